// `quarry mcp`: the Model Context Protocol over stdio (cmd_mcp.hpp). The
// main thread reads standard input (one JSON-RPC message per line) and hands
// each line to core::mcp::server; answers and notifications are written to
// standard output, a whole line at a time, from whichever thread produces
// them. Logs go to standard error only: standard output is the protocol.

#include "cmd_mcp.hpp"

#include "cli.hpp"
#include "research_engine.hpp"
#include "session_store.hpp"

#include "quarry/actors/runtime.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace quarry::app {

namespace {

namespace mcp = core::mcp;

/// Bytes read from standard input at a time.
constexpr size_t read_chunk = 64 * 1024;

/// How long the command waits, once the client went away or a signal came,
/// for the running calls to end (their sessions stop and are stored), on top
/// of runtime.shutdown_grace.
constexpr auto calls_grace = std::chrono::seconds{30};

// A pipe that wakes the reading thread (a signal, standard output closed).
struct wake_pipe {
  int fds[2] = {-1, -1};
  wake_pipe() {
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
      fds[0] = fds[1] = -1;
  }
  ~wake_pipe() {
    for (int fd : fds)
      if (fd >= 0)
        ::close(fd);
  }
  void wake() const {
    if (fds[1] >= 0) {
      char c = 1;
      [[maybe_unused]] auto n = ::write(fds[1], &c, 1);
    }
  }
};

/// How long a line may wait for the client to read standard output (a pipe
/// or socket) before the client counts as gone: a client that stops reading
/// would otherwise hold every thread that answers it.
constexpr auto output_stall_limit = std::chrono::seconds{30};

// Standard output that is a pipe or a socket (the client's own) is made
// non-blocking, so that a write can give up; a terminal or a file is left
// as it is (its open file may be shared with the shell).
bool make_output_nonblocking() {
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return false;
  auto flags = ::fcntl(STDOUT_FILENO, F_GETFL);
  return flags >= 0 && ::fcntl(STDOUT_FILENO, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Writes `line` and a newline to standard output, whole; false when the
// client closed its end or did not read for output_stall_limit.
bool write_line(const std::string& line) {
  std::string out;
  out.reserve(line.size() + 1);
  out.append(line).push_back('\n');
  const char* p = out.data();
  size_t left = out.size();
  auto until = std::chrono::steady_clock::now() + output_stall_limit;
  while (left > 0) {
    auto n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
        if (wait.count() <= 0) {
          spdlog::warn("mcp: the client has not read its output for {} s: it counts as gone",
                       output_stall_limit.count());
          return false;
        }
        pollfd pfd{STDOUT_FILENO, POLLOUT, 0};
        ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(wait.count(), 1000)));
        continue;
      }
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
    // Progress resets the clock: a slow reader is not a gone one.
    until = std::chrono::steady_clock::now() + output_stall_limit;
  }
  return true;
}

} // namespace

int cmd_mcp(context& ctx) {
  auto& cfg = ctx.config.values;
  // A client that closes standard output is gone: writes fail with EPIPE
  // instead of ending the process.
  std::signal(SIGPIPE, SIG_IGN);
  if (!cfg.store.enabled) {
    std::cerr << "quarry: mcp keeps every research in the store, but store.enabled is false\n";
    return exit_usage;
  }
  auto opened = open_store(cfg);
  if (auto* why = std::get_if<std::string>(&opened)) {
    std::cerr << "quarry: the research store cannot be used: " << *why << "\n";
    return exit_failure;
  }
  auto db = std::get<std::shared_ptr<store::store>>(std::move(opened));
  auto store_file = db->path();
  auto read_opened = open_store(cfg, true);
  if (auto* why = std::get_if<std::string>(&read_opened)) {
    std::cerr << "quarry: the research store cannot be read: " << *why << "\n";
    return exit_failure;
  }
  auto reader = std::get<std::shared_ptr<store::store>>(std::move(read_opened));
  auto prepared = research_engine::prepare(ctx, engine_setup{});
  if (auto* rc = std::get_if<int>(&prepared))
    return *rc;
  auto engine = std::get<std::unique_ptr<research_engine>>(std::move(prepared));
  engine->start(std::move(db));
  std::string refusal;
  {
    const auto& windows = engine->check_context();
    for (const auto& note : windows.notes)
      std::cerr << "quarry: " << sdk::strip_terminal_controls(note) << "\n";
    if (!windows.refusal.empty()) {
      refusal = windows.refusal;
      std::cerr << "quarry: every research will be refused: "
                << sdk::strip_terminal_controls(windows.refusal) << "\n";
    }
  }
  manager_settings ms;
  ms.max_running = cfg.server.max_running_sessions;
  auto manager = spawn_session_manager(engine->runtime().system(), *engine, store_file, ms);
  auto svc = std::shared_ptr<mcp_service>(
    new mcp_service{ctx, *engine, manager, store_file, ctx.services->pool(), reader, refusal, {}});

  make_output_nonblocking();
  wake_pipe wake;
  std::atomic<bool> output_closed{false};
  auto setup = mcp_server_setup(svc);
  setup.write = [&output_closed, &wake](const std::string& line) {
    if (output_closed.load())
      return;
    if (!write_line(line)) {
      output_closed = true;
      wake.wake();
    }
  };
  auto server = std::make_unique<mcp::server>(std::move(setup));
  std::cerr << "quarry: MCP server on standard input and output (protocol "
            << mcp::latest_protocol_version << ")\n"
            << std::flush;

  // Reads until the client goes away or a signal asks to stop.
  int signal_number = 0;
  {
    actors::signal_watcher watcher{[&wake](int) { wake.wake(); }};
    mcp::line_splitter lines;
    std::string chunk(read_chunk, '\0');
    bool eof = false;
    while (!eof && watcher.received() == 0 && !output_closed.load()) {
      pollfd pfds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake.fds[0], POLLIN, 0}};
      auto n = ::poll(pfds, wake.fds[0] >= 0 ? 2 : 1, -1);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        spdlog::error("mcp: polling standard input failed: {}", std::strerror(errno));
        break;
      }
      if (pfds[1].revents != 0)
        continue; // the loop's condition says why
      if (pfds[0].revents == 0)
        continue;
      auto got = ::read(STDIN_FILENO, chunk.data(), chunk.size());
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN)
          continue;
        spdlog::warn("mcp: reading standard input failed: {}", std::strerror(errno));
        eof = true;
      } else if (got == 0) {
        eof = true;
      } else {
        lines.feed(std::string_view{chunk.data(), static_cast<size_t>(got)});
      }
      auto take = [&](std::optional<mcp::line_splitter::line> l) {
        if (!l)
          return false;
        if (l->oversized)
          server->handle_oversized();
        else
          server->handle(l->text);
        return true;
      };
      while (take(lines.next())) {
      }
      if (eof)
        take(lines.finish());
    }
    signal_number = watcher.received();
  }

  // The client went away (or a signal came): running calls are cancelled,
  // their sessions stopped and stored (cancelled; on a signal the manager's
  // stop keeps them as interrupted).
  auto running = server->running();
  if (signal_number != 0) {
    // The sessions stop and are kept as interrupted (resumable); their calls
    // are answered with what was found, should the client still read.
    std::cerr << "quarry: stopping: running researches are stopped and kept as interrupted\n";
    caf::anon_send(manager, actors::stop_atom::value);
  } else {
    if (running > 0)
      spdlog::info("mcp: the client went away: cancelling {} running call(s)", running);
    server->cancel_all();
  }
  auto until = std::chrono::steady_clock::now() + cfg.runtime.shutdown_grace + calls_grace;
  while (server->running() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  if (server->running() > 0)
    spdlog::warn("mcp: {} call(s) did not end in time", server->running());
  {
    caf::scoped_actor self{engine->runtime().system()};
    self->monitor(manager);
    self->send(manager, actors::stop_atom::value);
    bool down = false;
    self->receive_while(
      [&] { return !down; })([&](const caf::down_msg&) { down = true; },
                             caf::after(cfg.runtime.shutdown_grace + std::chrono::seconds{5}) >>
                               [&] {
                                 spdlog::warn("the sessions did not stop in time");
                                 down = true;
                               });
  }
  // Every actor handle goes before the actor system (it waits for them). A
  // call that never ended still points to the server: it is left alive.
  if (server->running() > 0)
    server.release();
  else
    server.reset();
  svc.reset();
  manager = session_manager_actor{};
  reader.reset();
  engine.reset();
  return signal_number != 0 ? actors::exit_code_for_signal(signal_number) : exit_ok;
}

} // namespace quarry::app
