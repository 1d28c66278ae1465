// Standalone fake LLM server: loads a script, prints its port on stdout, then
// serves OpenAI and Anthropic endpoints on 127.0.0.1 until SIGINT or SIGTERM.

#include "support/fake_llm_server.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <signal.h>

namespace {

void usage(const char* self) {
  std::fprintf(stderr,
               "usage: %s [--port 0] [--script FILE] [--replay FILE]\n"
               "Prints the port on the first line of stdout, then serves until\n"
               "SIGINT or SIGTERM. See docs/testing.md for the script format.\n",
               self);
}

} // namespace

int main(int argc, char** argv) {
  std::string script;
  std::string replay;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--port") {
      // The underlying test server only binds ephemeral ports.
      if (std::strcmp(value(), "0") != 0) {
        std::fprintf(stderr, "%s: only --port 0 (an ephemeral port) is supported\n", argv[0]);
        return 2;
      }
    } else if (arg == "--script") {
      script = value();
    } else if (arg == "--replay") {
      replay = value();
    } else if (arg == "--help" || arg == "-h") {
      usage(argv[0]);
      return 0;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  // Block the termination signals so that sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  quarry::test::fake_llm_server server;
  if (!script.empty()) {
    if (auto err = server.script_file(script)) {
      std::fprintf(stderr, "%s\n", err->message.c_str());
      return 1;
    }
  }
  if (!replay.empty()) {
    if (auto err = server.replay_file(replay)) {
      std::fprintf(stderr, "%s\n", err->message.c_str());
      return 1;
    }
  }
  std::printf("%u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  server.stop();
  return 0;
}
