// Faults from outside, end to end through the real `quarry` binary: every
// error class a provider can report, an exhausted 429, signals in every
// command, interrupted research, a very long question, and a byte that is not
// UTF-8 inside a streamed answer.

#include "research_script.hpp"
#include "support/fake_llm_server.hpp"
#include "support/http_server.hpp"
#include "support/process.hpp"

#include "quarry/sdk/types.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace robustness_test {

using namespace quarry;
using namespace std::chrono_literals;
using namespace quarry::test::script;

namespace {

struct robust_fixture {
  test::temp_dir home;

  test::process_options
  options(std::vector<std::pair<std::string, std::optional<std::string>>> extra_env = {}) {
    auto opts = test::isolated_quarry_options(home.path(), extra_env);
    opts.timeout = 120s;
    return opts;
  }

  std::vector<std::string> argv(std::vector<std::string> args) {
    std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  test::process_result
  quarry(std::vector<std::string> args,
         std::vector<std::pair<std::string, std::optional<std::string>>> extra_env = {}) {
    return test::run_process(argv(std::move(args)), options(std::move(extra_env)));
  }
};

bool mentions(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE_FIXTURE(robust_fixture, "llm chat reports every error class and exits 1") {
  for (int i = static_cast<int>(sdk::errc_first); i <= static_cast<int>(sdk::errc_last); ++i) {
    auto code = static_cast<sdk::errc>(i);
    std::string name = sdk::to_string(code);
    CAPTURE(name);
    for (bool json : {false, true}) {
      std::vector<std::string> args{"--plugin-dir", std::string{QUARRY_TEST_PLUGIN_DIR} + "/good",
                                    "--set",        "llm.providers.t.plugin=echo_llm",
                                    "--set",        "llm.providers.t.max_retries=0",
                                    "llm",          "chat"};
      if (json)
        args.push_back("--json");
      args.push_back("fail:" + name);
      auto res = quarry(args);
      CAPTURE(res.err);
      CAPTURE(res.out);
      CHECK(res.exit_code == 1);
      CHECK_FALSE(mentions(res.out, "unhandled exception"));
      if (json) {
        auto j = nlohmann::json::parse(res.out, nullptr, false);
        REQUIRE_FALSE(j.is_discarded());
        CHECK(j["error"]["class"] == name);
      } else {
        CHECK(mentions(res.err, name));
      }
    }
  }
}

TEST_CASE_FIXTURE(robust_fixture, "an HTTP 429 that runs out of retries fails cleanly") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 429, "message": "slow down"}}
  ])")));
  SUBCASE("llm chat") {
    auto res = quarry({"--set", "llm.providers.main.plugin=openai", "--set",
                       "llm.providers.main.base_url=" + server.base_url_openai(), "--set",
                       "llm.providers.main.api_key=sk-test", "--set", "llm.providers.main.model=m",
                       "--set", "llm.providers.main.max_retries=0", "llm", "chat", "hello"});
    CAPTURE(res.err);
    CHECK(res.exit_code == 1);
    CHECK(mentions(res.err, "rate_limited"));
  }
  SUBCASE("research") {
    auto res = quarry({"--set", "llm.providers.main.plugin=openai", "--set",
                       "llm.providers.main.base_url=" + server.base_url_openai(), "--set",
                       "llm.providers.main.api_key=sk-test", "--set", "llm.providers.main.model=m",
                       "--set", "llm.providers.main.max_retries=0", "research", "--no-clarify",
                       "Why do heat pumps defrost?"});
    CAPTURE(res.err);
    CHECK(res.exit_code == 1);
    CHECK(mentions(res.err, "research failed"));
    CHECK(mentions(res.err, "slow down"));
  }
}

TEST_CASE_FIXTURE(robust_fixture, "a byte that is not UTF-8 in a streamed answer is "
                                  "replaced, and stdout stays clean JSON") {
  test::fake_llm_server server;
  std::string bad = "Caf\xff\xfe and cr\xc3"; // invalid, then a cut sequence
  std::string sse;
  sse += "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
         "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\""
         + bad + "\"},\"finish_reason\":null}]}\n\n";
  sse += "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
         "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"me\"},"
         "\"finish_reason\":\"stop\"}]}\n\n";
  sse += "data: [DONE]\n\n";
  REQUIRE_FALSE(server.replay(sse, "text/event-stream"));
  auto res = test::run_process(
    argv({"--set", "llm.providers.main.plugin=openai", "--set",
          "llm.providers.main.base_url=" + server.base_url_openai(), "--set",
          "llm.providers.main.api_key=sk-test", "--set", "llm.providers.main.model=m", "llm",
          "chat", "--json", "hello"}),
    [&] {
      auto o = options();
      o.timeout = 30s;
      return o;
    }());
  CAPTURE(res.err);
  CAPTURE(res.out);
  CHECK_FALSE(res.timed_out);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  auto text = j["text"].get<std::string>();
  CHECK(mentions(text, "Caf\xef\xbf\xbd"));
  CHECK(mentions(text, "me"));
}

TEST_CASE_FIXTURE(robust_fixture, "commands without a session stop promptly on "
                                  "SIGINT and SIGTERM") {
  // A server that takes connections and never answers: `extract` waits for
  // the page. (A FIFO as the configuration file used to block too; it is
  // refused at once now.)
  auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  auto url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/page";
  for (int sig : {SIGINT, SIGTERM}) {
    CAPTURE(sig);
    test::child_process child{argv({"extract", url, "--set", "tools.open_url.plugin=open_url",
                                    "--set", "tools.open_url.allow=[\"127.0.0.1\"]"}),
                              options()};
    REQUIRE(child.wait_until_blocked(sig, 30s));
    // Then give it time to reach the FIFO.
    std::this_thread::sleep_for(300ms);
    child.signal(sig);
    auto res = child.wait(10s);
    CAPTURE(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 128 + sig);
    CHECK(mentions(res.err, sig == SIGINT ? "interrupted" : "terminated"));
  }
  ::close(fd);
}

TEST_CASE_FIXTURE(robust_fixture, "interrupted research says so, exits 130 or 143 and "
                                  "leaves an existing report alone") {
  test::fake_llm_server server;
  // Planning never answers in time.
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({{{"respond", {{"text", "1. A step"}}}, {"latency_ms", 120000}}})));
  auto out = home.write("report.md", "an earlier report\n");
  for (int sig : {SIGINT, SIGTERM}) {
    CAPTURE(sig);
    auto before = server.request_count();
    test::child_process child{
      argv({"research", "--no-clarify", "--out", out, "How do heat pumps defrost?"}),
      options({{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}})};
    REQUIRE(server.wait_for_requests(before + 1, 30s));
    child.signal(sig);
    auto res = child.wait(20s);
    CAPTURE(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 128 + sig);
    CHECK(mentions(res.err, "interrupted"));
    CHECK_FALSE(mentions(res.err, "deadline was reached"));
    CHECK(test::read_file(out) == "an earlier report\n");
  }
}

TEST_CASE_FIXTURE(robust_fixture, "a second signal ends research at once") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({{{"respond", {{"text", "1. A step"}}}, {"latency_ms", 120000}}})));
  test::child_process child{
    argv({"--set", "research.final_report_timeout=10m", "research", "--no-clarify",
          "How do heat pumps defrost?"}),
    options({{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}})};
  REQUIRE(server.wait_for_requests(1, 30s));
  child.signal(SIGINT);
  // Signals of one kind sent together merge into one: wait for the first
  // to be seen.
  REQUIRE(child.wait_for_err("received SIGINT", 10s));
  child.signal(SIGINT);
  auto res = child.wait(10s);
  CAPTURE(res.err);
  CHECK_FALSE(res.timed_out);
  CHECK(res.exit_code == 130);
}

TEST_CASE_FIXTURE(robust_fixture, "offline research with a very long question ends "
                                  "cleanly without --json") {
  std::string question = "Why does a heat pump's efficiency drop in cold weather?";
  while (question.size() < 100000)
    question += " Please consider defrost cycles, refrigerants and compressor design.";
  auto res = quarry({"research", "--no-clarify", question});
  CAPTURE(res.err.substr(0, 2000));
  CHECK(res.exit_code == 0);
  CHECK(mentions(res.out, "## Sources"));
}

TEST_CASE_FIXTURE(robust_fixture, "offline research finds the example corpus from a "
                                  "binary outside the build tree") {
  // A copy of the binary and the plugins in a folder of their own, as a
  // build folder outside the source tree would have them.
  test::temp_dir elsewhere;
  namespace fs = std::filesystem;
  fs::create_directories(elsewhere.file("bin"));
  fs::copy_file(QUARRY_EXE, elsewhere.file("bin/quarry"));
  fs::copy(QUARRY_PLUGIN_DIR, elsewhere.file("plugins"), fs::copy_options::recursive);
  auto res = test::run_process({elsewhere.file("bin/quarry"), "research", "--no-clarify",
                                "How does a heat pump defrost its outdoor coil?"},
                               options());
  CAPTURE(res.err);
  CHECK(res.exit_code == 0);
  CHECK(mentions(res.err, "example corpus"));
  CHECK(mentions(res.out, "## Sources"));
}

TEST_CASE_FIXTURE(robust_fixture, "llm chat, tool run and extract stop on a signal "
                                  "with 130 or 143") {
  SUBCASE("llm chat against a model that never answers") {
    test::fake_llm_server server;
    REQUIRE_FALSE(server.script(
      nlohmann::json::array({{{"respond", {{"text", "late"}}}, {"latency_ms", 120000}}})));
    test::child_process child{argv({"--set", "llm.providers.main.plugin=openai", "--set",
                                    "llm.providers.main.base_url=" + server.base_url_openai(),
                                    "--set", "llm.providers.main.api_key=sk-test", "--set",
                                    "llm.providers.main.model=m", "llm", "chat", "hello"}),
                              options()};
    REQUIRE(server.wait_for_requests(1, 30s));
    child.signal(SIGINT);
    auto res = child.wait(10s);
    CAPTURE(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 130);
    CHECK(mentions(res.err, "interrupted"));
  }
  SUBCASE("tool run of a tool that never finishes") {
    test::child_process child{
      argv({"--plugin-dir", std::string{QUARRY_TEST_PLUGIN_DIR} + "/good", "--set",
            "tools.echo.plugin=echo", "--set", "tools.echo.timeout=10m", "tool", "run", "echo",
            R"({"text": "hang"})"}),
      options()};
    REQUIRE(child.wait_until_blocked(SIGTERM, 30s));
    std::this_thread::sleep_for(500ms);
    child.signal(SIGTERM);
    auto res = child.wait(10s);
    CAPTURE(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 143);
  }
  SUBCASE("extract of a page that never arrives") {
    test::http_server web;
    web.route("GET", "/slow",
              [](const test::request&) { return test::response_plan{200}.stall(); });
    test::child_process child{
      argv({"--set", "tools.open_url.plugin=open_url", "--set",
            "tools.open_url.allow=[\"127.0.0.1\"]", "extract", web.url("/slow")}),
      options()};
    auto until = std::chrono::steady_clock::now() + 20s;
    while (web.requests_served() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
    child.signal(SIGINT);
    auto res = child.wait(10s);
    CAPTURE(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 130);
  }
}

TEST_CASE_FIXTURE(robust_fixture, "JSON nested 60,000 deep is refused, never a crash") {
  std::string deep = std::string(60000, '[') + std::string(60000, ']');
  SUBCASE("tool run arguments") {
    auto res = quarry({"--plugin-dir", std::string{QUARRY_TEST_PLUGIN_DIR} + "/good", "--set",
                       "tools.echo.plugin=echo", "tool", "run", "echo",
                       "{\"text\": " + deep + "}"});
    CAPTURE(res.err);
    CHECK(res.exit_code == 2);
    CHECK(mentions(res.err, "deeper than"));
  }
  SUBCASE("tool-call arguments streamed by a model") {
    test::fake_llm_server server;
    auto args = nlohmann::json("{\"q\": " + deep + "}").dump();
    std::string sse
      = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":"
        "[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":"
        "{\"name\":\"search\",\"arguments\":"
        + args
        + "}}]},\"finish_reason\":null}]}\n\n"
          "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
          "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
          "data: [DONE]\n\n";
    REQUIRE_FALSE(server.replay(sse, "text/event-stream"));
    auto res = quarry({"--set", "llm.providers.main.plugin=openai", "--set",
                       "llm.providers.main.base_url=" + server.base_url_openai(), "--set",
                       "llm.providers.main.api_key=sk-test", "--set", "llm.providers.main.model=m",
                       "llm", "chat", "--json", "hello"});
    CAPTURE(res.err);
    CAPTURE(res.out.substr(0, 300));
    CHECK(res.exit_code < 128);
    auto j = nlohmann::json::parse(res.out, nullptr, false);
    CHECK_FALSE(j.is_discarded());
  }
}

} // namespace robustness_test
