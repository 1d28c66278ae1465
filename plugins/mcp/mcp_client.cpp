// A JSON-RPC connection to one MCP server (mcp_client.hpp).

#include "mcp_client.hpp"

#include "quarry/sdk/http_buffer.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/sse.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace quarry::plugins::mcp {

using nlohmann::json;
using steady = std::chrono::steady_clock;

bool supported_version(const std::string& version) {
  // Every revision since the first (the lifecycle and tools did not change in
  // ways that concern a client that only lists and calls tools).
  return version == "2025-11-25" || version == "2025-06-18" || version == "2025-03-26"
         || version == "2024-11-05";
}

rpc_outcome client::request_blocking(std::string method, json params,
                                     std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<rpc_outcome>>();
  auto future = promise->get_future();
  auto handle = request(std::move(method), std::move(params), timeout,
                        [promise](rpc_outcome x) { promise->set_value(std::move(x)); });
  // The request's own timeout ends it; this wait only guards a transport
  // that would never report (a second longer).
  if (future.wait_for(timeout + std::chrono::seconds{1}) != std::future_status::ready) {
    cancel(handle, "timed out");
    if (future.wait_for(std::chrono::seconds{1}) != std::future_status::ready) {
      rpc_outcome out;
      out.failure = sdk::make_error(sdk::errc::timeout, "no answer");
      return out;
    }
  }
  return future.get();
}

std::variant<std::vector<json>, sdk::error> client::list_tools(std::chrono::milliseconds timeout) {
  std::vector<json> tools;
  auto until = steady::now() + timeout;
  std::string cursor;
  for (size_t page = 0; page < max_list_pages; ++page) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
    if (left.count() <= 0)
      return sdk::make_error(sdk::errc::timeout, "tools/list took longer than the start-up time");
    json params = json::object();
    if (!cursor.empty())
      params["cursor"] = cursor;
    auto r = request_blocking("tools/list", std::move(params), left);
    if (r.failure)
      return *r.failure;
    auto list = r.result.find("tools");
    if (!r.result.is_object() || list == r.result.end() || !list->is_array())
      return sdk::make_error(sdk::errc::invalid_response,
                             "the server's tools/list answer has no list of tools");
    for (auto& t : *list) {
      if (tools.size() >= max_listed_tools)
        return tools;
      tools.push_back(std::move(t));
    }
    auto next = r.result.find("nextCursor");
    if (next == r.result.end() || !next->is_string() || next->get<std::string>().empty())
      return tools;
    cursor = next->get<std::string>();
  }
  return tools;
}

namespace {

/// The `params` of `initialize`.
json initialize_params() {
  return {{"protocolVersion", protocol_version},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "quarry"}, {"title", "Quarry"}, {"version", "0.1.0"}}}};
}

std::string request_line(uint64_t id, const std::string& method, const json& params) {
  json msg{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null())
    msg["params"] = params;
  return sdk::dump_json(msg);
}

std::string notification_line(const std::string& method, const json& params) {
  json msg{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null())
    msg["params"] = params;
  return sdk::dump_json(msg);
}

std::string seconds_text(std::chrono::milliseconds x) {
  auto s = x.count() / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s == static_cast<int64_t>(s) ? "%.0f s" : "%.1f s", s);
  return buf;
}

/// The shared part: requests, the handshake, what comes back.
class session : public client, public std::enable_shared_from_this<session> {
public:
  session(sdk::host_context& host, server_config cfg) : host_(host), cfg_(std::move(cfg)) {
    // nop
  }

  uint64_t request(std::string method, json params, std::chrono::milliseconds timeout,
                   rpc_callback done) override {
    std::vector<std::function<void()>> after;
    uint64_t id = 0;
    {
      std::unique_lock guard{mu_};
      id = next_id_++;
      if (phase_ == phase::closed) {
        after.emplace_back([done = std::move(done)] {
          rpc_outcome out;
          out.failure = sdk::make_error(sdk::errc::cancelled, "the connection is closed");
          done(std::move(out));
        });
      } else {
        pending p;
        p.method = method;
        p.done = std::move(done);
        p.deadline = steady::now() + timeout;
        p.timeout = timeout;
        p.line = request_line(id, method, params);
        pending_.emplace(id, std::move(p));
        if (phase_ == phase::ready) {
          after.push_back(send_later(id));
        } else {
          queued_.push_back(id);
          if (phase_ == phase::down)
            start_locked(after);
        }
      }
    }
    run(after);
    return id;
  }

  void cancel(uint64_t handle, std::string reason) override {
    std::vector<std::function<void()>> after;
    {
      std::unique_lock guard{mu_};
      auto i = pending_.find(handle);
      if (i == pending_.end())
        return;
      auto was_sent = i->second.sent;
      end_locked(i, sdk::make_error(sdk::errc::cancelled, "cancelled: " + reason), after);
      if (was_sent && phase_ == phase::ready)
        after.push_back(
          notify_later("notifications/cancelled", {{"requestId", handle}, {"reason", reason}}));
    }
    run(after);
  }

  json server_info() const override {
    std::unique_lock guard{mu_};
    return server_info_;
  }

protected:
  enum class phase { down, starting, ready, closed };

  struct pending {
    std::string method;
    rpc_callback done;
    steady::time_point deadline;
    std::chrono::milliseconds timeout{0};
    // The request's message, until it is sent.
    std::string line;
    bool sent = false;
    // The handshake's own request.
    bool handshake = false;
    // HTTP: the POST that carries it.
    std::shared_ptr<sdk::http_call> call;
  };

  using actions = std::vector<std::function<void()>>;

  static void run(actions& after) {
    for (auto& f : after)
      f();
    after.clear();
  }

  // -- transport hooks --------------------------------------------------------

  /// Starts the server (stdio) or nothing (HTTP); fills `why` on failure.
  virtual bool open_locked(std::string& why, actions& after) = 0;

  /// Returns an action that sends one message (`id` 0 for a notification or
  /// an answer to the server).
  virtual std::function<void()> transmit(uint64_t id, std::string line) = 0;

  /// The connection failed as a whole (the process ended, the handshake
  /// failed): the transport cleans up.
  virtual void lost_locked(actions& after) = 0;

  // -- the state machine, with mu_ held --------------------------------------

  std::function<void()> send_later(uint64_t id) {
    auto i = pending_.find(id);
    if (i == pending_.end())
      return [] {};
    i->second.sent = true;
    return transmit(id, std::move(i->second.line));
  }

  std::function<void()> notify_later(const std::string& method, const json& params) {
    return transmit(0, notification_line(method, params));
  }

  void start_locked(actions& after) {
    std::string why;
    phase_ = phase::starting;
    if (!open_locked(why, after)) {
      fail_all_locked(sdk::make_error(sdk::errc::server_error, why), after);
      phase_ = phase::down;
      return;
    }
    auto id = next_id_++;
    pending p;
    p.method = "initialize";
    p.handshake = true;
    p.deadline = steady::now() + cfg_.startup_timeout;
    p.timeout = cfg_.startup_timeout;
    p.line = request_line(id, "initialize", initialize_params());
    p.done = [this](rpc_outcome out) { handshake_done(std::move(out)); };
    pending_.emplace(id, std::move(p));
    after.push_back(send_later(id));
  }

  // Runs outside the lock (a callback).
  void handshake_done(rpc_outcome out) {
    actions after;
    {
      std::unique_lock guard{mu_};
      if (phase_ != phase::starting)
        return;
      std::optional<sdk::error> failure = out.failure;
      if (!failure) {
        auto v = out.result.is_object() ? out.result.value("protocolVersion", json{}) : json{};
        if (!v.is_string())
          failure = sdk::make_error(sdk::errc::invalid_response,
                                    "its answer to initialize names no protocol version");
        else if (!supported_version(v.get<std::string>()))
          failure = sdk::make_error(sdk::errc::invalid_response,
                                    "it speaks MCP revision " + v.get<std::string>()
                                      + ", which Quarry does not (it speaks 2024-11-05 to "
                                      + protocol_version + ")");
        else
          negotiated_ = v.get<std::string>();
      }
      if (failure) {
        failure->message = "the MCP server " + cfg_.label() + " did not start: " + failure->message;
        host_.log().log(sdk::log_level::warn, failure->message);
        fail_all_locked(*failure, after);
        lost_locked(after);
        return;
      }
      json info = json::object();
      if (auto s = out.result.find("serverInfo"); s != out.result.end())
        info["serverInfo"] = *s;
      if (auto s = out.result.find("instructions"); s != out.result.end())
        info["instructions"] = *s;
      server_info_ = std::move(info);
      phase_ = phase::ready;
      after.push_back(notify_later("notifications/initialized", json{}));
      auto queued = std::move(queued_);
      queued_.clear();
      for (auto id : queued)
        after.push_back(send_later(id));
    }
    run(after);
  }

  void end_locked(std::map<uint64_t, pending>::iterator i, std::optional<sdk::error> failure,
                  actions& after, json result = {}) {
    auto id = i->first;
    auto p = std::move(i->second);
    pending_.erase(i);
    queued_.erase(std::remove(queued_.begin(), queued_.end(), id), queued_.end());
    if (p.call)
      after.emplace_back([call = p.call] { call->cancel(); });
    after.emplace_back([done = std::move(p.done), failure = std::move(failure),
                        result = std::move(result)]() mutable {
      rpc_outcome out;
      out.result = std::move(result);
      out.failure = std::move(failure);
      done(std::move(out));
    });
  }

  void fail_all_locked(const sdk::error& why, actions& after) {
    while (!pending_.empty())
      end_locked(pending_.begin(), why, after);
    queued_.clear();
  }

  /// Ends the requests whose time is up.
  void expire_locked(steady::time_point now, actions& after) {
    for (auto i = pending_.begin(); i != pending_.end();) {
      if (i->second.deadline > now) {
        ++i;
        continue;
      }
      auto next = std::next(i);
      auto id = i->first;
      auto sent = i->second.sent;
      auto msg = "the MCP server " + cfg_.label() + " did not answer " + i->second.method
                 + " within " + seconds_text(i->second.timeout);
      end_locked(i, sdk::make_error(sdk::errc::timeout, msg), after);
      if (sent && phase_ == phase::ready)
        after.push_back(
          notify_later("notifications/cancelled", {{"requestId", id}, {"reason", "timed out"}}));
      i = next;
    }
  }

  /// The earliest deadline of a pending request.
  std::optional<steady::time_point> next_deadline_locked() const {
    std::optional<steady::time_point> out;
    for (const auto& [_, p] : pending_)
      if (!out || p.deadline < *out)
        out = p.deadline;
    return out;
  }

  /// Reads one message from the server (a line of stdio, an HTTP body or
  /// event).
  void on_message(std::string_view text, actions& after) {
    std::string error;
    auto msg = sdk::parse_json(text, &error);
    if (msg.is_discarded() || !msg.is_object()) {
      noise("a line that is not a JSON-RPC message ("
            + (msg.is_discarded() ? error : std::string{"not an object"}) + ")");
      return;
    }
    auto method = msg.find("method");
    auto id = msg.find("id");
    if (method != msg.end()) {
      if (!method->is_string()) {
        noise("a message whose method is not a string");
        return;
      }
      auto name = method->get<std::string>();
      if (id == msg.end() || id->is_null()) {
        notification(name, msg.value("params", json{}));
        return;
      }
      // A request of the server's: Quarry offers no capability but ping.
      json reply{{"jsonrpc", "2.0"}, {"id", *id}};
      if (name == "ping")
        reply["result"] = json::object();
      else
        reply["error"] = {{"code", -32601}, {"message", "Quarry does not offer " + name}};
      after.push_back(transmit(0, sdk::dump_json(reply)));
      return;
    }
    // A response.
    if (id == msg.end() || !id->is_number_unsigned()) {
      noise("a response with no request id of Quarry's");
      return;
    }
    auto i = pending_.find(id->get<uint64_t>());
    if (i == pending_.end())
      return; // late: timed out or cancelled
    auto result = msg.find("result");
    auto err = msg.find("error");
    auto version = msg.find("jsonrpc");
    auto valid = version != msg.end() && *version == "2.0"
                 && ((result != msg.end()) != (err != msg.end()));
    if (!valid) {
      end_locked(i,
                 sdk::make_error(sdk::errc::invalid_response,
                                 "the MCP server " + cfg_.label() + " answered " + i->second.method
                                   + " with an invalid JSON-RPC response"),
                 after);
      return;
    }
    if (err != msg.end()) {
      auto message = err->is_object() ? err->value("message", json{}) : json{};
      auto code = err->is_object() ? err->value("code", json{}) : json{};
      std::string why = message.is_string() ? message.get<std::string>() : "no message";
      why = std::string{sdk::utf8_prefix(sdk::repair_utf8(why), 2000)};
      if (code.is_number_integer())
        why += " (JSON-RPC error " + std::to_string(code.get<int64_t>()) + ")";
      end_locked(i,
                 sdk::make_error(sdk::errc::bad_request, "the MCP server " + cfg_.label()
                                                           + " refused " + i->second.method + ": "
                                                           + why),
                 after);
      return;
    }
    end_locked(i, std::nullopt, after, std::move(*result));
  }

  void notification(const std::string& method, const json& params) {
    if (method == "notifications/message") {
      auto data = params.is_object() ? params.value("data", json{}) : json{};
      auto text = data.is_string() ? data.get<std::string>() : sdk::dump_json(data);
      host_.log().log(sdk::log_level::debug,
                      "mcp " + cfg_.label() + ": " + std::string{sdk::utf8_prefix(text, 2000)});
    } else if (method == "notifications/tools/list_changed") {
      host_.log().log(sdk::log_level::debug,
                      "mcp " + cfg_.label()
                        + ": the server's tools changed; Quarry offers the ones it listed at "
                          "start until it is restarted");
    }
  }

  /// Something that is not MCP came from the server: logged, at most once a
  /// second, and otherwise ignored.
  void noise(const std::string& what) {
    auto now = steady::now();
    if (now - last_noise_ < std::chrono::seconds{1})
      return;
    last_noise_ = now;
    host_.log().log(sdk::log_level::warn, "mcp " + cfg_.label() + ": ignored " + what);
  }

  sdk::host_context& host_;
  server_config cfg_;
  mutable std::mutex mu_;
  phase phase_ = phase::down;
  std::map<uint64_t, pending> pending_;
  std::vector<uint64_t> queued_;
  uint64_t next_id_ = 1;
  json server_info_;
  std::string negotiated_;
  steady::time_point last_noise_{};
};

// -- stdio ------------------------------------------------------------------------

/// The variables a server inherits (the TypeScript SDK's
/// DEFAULT_INHERITED_ENV_VARS on POSIX).
constexpr const char* inherited_variables[] = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"};

/// Finds `program` in the folders of `path` (when it has no slash).
std::string find_program(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos)
    return program;
  size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    auto dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    auto candidate = (dir.empty() ? std::string{"."} : dir) + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return {};
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

class stdio_session final : public session {
public:
  using session::session;

  ~stdio_session() override {
    close();
  }

  void close() override {
    actions after;
    {
      std::unique_lock guard{mu_};
      if (phase_ == phase::closed && !io_.joinable())
        return;
      phase_ = phase::closed;
      fail_all_locked(sdk::make_error(sdk::errc::cancelled, "the connection is closed"), after);
      stopping_ = true;
    }
    wake();
    if (io_.joinable()) {
      // Never joined from itself (a callback dropping the last reference).
      if (io_.get_id() != std::this_thread::get_id())
        io_.join();
      else
        io_.detach();
    }
    run(after);
    std::unique_lock guard{mu_};
    reap_locked(true);
    if (auto fd = wake_fd_.exchange(-1); fd >= 0)
      ::close(fd);
  }

protected:
  bool open_locked(std::string& why, actions&) override {
    auto now = steady::now();
    if (now < restart_at_) {
      auto left = std::chrono::ceil<std::chrono::seconds>(restart_at_ - now);
      why = "the MCP server " + cfg_.label() + " " + last_exit_ + "; it is started again in "
            + std::to_string(left.count()) + " s";
      return false;
    }
    if (wake_fd_ < 0) {
      wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (wake_fd_.load() < 0) {
        why = std::string{"eventfd: "} + std::strerror(errno);
        return false;
      }
    }
    if (!spawn_locked(why)) {
      note_exit_locked("could not be started: " + why);
      return false;
    }
    if (!io_.joinable())
      io_ = std::thread{[this] { loop(); }};
    wake();
    return true;
  }

  std::function<void()> transmit(uint64_t, std::string line) override {
    // Appended under the lock right away (the order of messages is kept);
    // the I/O thread writes it.
    if (in_fd_ < 0)
      return [] {};
    out_ += line;
    out_ += '\n';
    return [this] { wake(); };
  }

  void lost_locked(actions&) override {
    kill_locked();
  }

private:
  void wake() {
    if (auto fd = wake_fd_.load(); fd >= 0) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
    }
  }

  bool spawn_locked(std::string& why) {
    // Everything the child needs is made before fork: after it, the child
    // only calls async-signal-safe functions.
    std::vector<std::string> env_strings;
    std::string path;
    for (const auto* name : inherited_variables)
      if (auto v = host_.secrets().get(name); v && cfg_.env.count(name) == 0) {
        env_strings.push_back(std::string{name} + "=" + *v);
        if (std::strcmp(name, "PATH") == 0)
          path = *v;
      }
    for (const auto& [k, v] : cfg_.env) {
      env_strings.push_back(k + "=" + v);
      if (k == "PATH")
        path = v;
    }
    if (path.empty())
      path = "/usr/local/bin:/usr/bin:/bin";
    auto program = find_program(cfg_.command.front(), path);
    if (program.empty()) {
      why = "no program '" + cfg_.command.front() + "' in PATH";
      return false;
    }
    std::vector<char*> argv;
    for (const auto& a : cfg_.command)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env_strings)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int in[2] = {-1, -1};
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    int status[2] = {-1, -1};
    auto close_all = [&] {
      for (auto* p : {in, out, err, status})
        for (int k = 0; k < 2; ++k)
          if (p[k] >= 0)
            ::close(p[k]);
    };
    // Sockets for the server's input and output (a write to a server that
    // went away fails with EPIPE instead of raising SIGPIPE: MSG_NOSIGNAL);
    // a pipe for its stderr; a pipe that tells whether exec worked.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0
        || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) != 0
        || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
      why = std::string{"cannot make pipes: "} + std::strerror(errno);
      close_all();
      return false;
    }
    const char* cwd = cfg_.cwd.empty() ? nullptr : cfg_.cwd.c_str();
    auto parent = ::getpid();
    auto pid = ::fork();
    if (pid < 0) {
      why = std::string{"fork: "} + std::strerror(errno);
      close_all();
      return false;
    }
    if (pid == 0) {
      // The child: its own process group (so that the whole tree can be
      // stopped), killed with Quarry, the sockets as stdin and stdout.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(127);
      ::signal(SIGPIPE, SIG_DFL);
      ::dup2(in[1], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      int code = 0;
      if (cwd != nullptr && ::chdir(cwd) != 0)
        code = errno;
      if (code == 0) {
        ::execve(program.c_str(), argv.data(), envp.data());
        code = errno;
      }
      [[maybe_unused]] auto n = ::write(status[1], &code, sizeof code);
      ::_exit(127);
    }
    ::setpgid(pid, pid); // also here: no race with the first kill
    ::close(in[1]);
    ::close(out[1]);
    ::close(err[1]);
    ::close(status[1]);
    int code = 0;
    ssize_t n = 0;
    do {
      n = ::read(status[0], &code, sizeof code);
    } while (n < 0 && errno == EINTR);
    ::close(status[0]);
    if (n == static_cast<ssize_t>(sizeof code)) {
      ::waitpid(pid, nullptr, 0);
      ::close(in[0]);
      ::close(out[0]);
      ::close(err[0]);
      why = std::string{cwd != nullptr ? "cannot run it in " + cfg_.cwd : "cannot run "}
            + (cwd != nullptr ? "" : program) + ": " + std::strerror(code);
      return false;
    }
    pid_ = pid;
    in_fd_ = in[0];
    out_fd_ = out[0];
    err_fd_ = err[0];
    set_nonblocking(in_fd_);
    set_nonblocking(out_fd_);
    set_nonblocking(err_fd_);
    started_at_ = steady::now();
    out_.clear();
    line_.clear();
    err_line_.clear();
    oversized_ = false;
    host_.log().log(sdk::log_level::debug,
                    "mcp " + cfg_.label() + ": started (pid " + std::to_string(pid) + ")");
    return true;
  }

  /// Closes the server's input, waits, then SIGTERM, waits, then SIGKILL to
  /// its process group (`graceful`), or kills it at once.
  void reap_locked(bool graceful) {
    if (in_fd_ >= 0) {
      ::close(in_fd_);
      in_fd_ = -1;
    }
    if (pid_ > 0) {
      auto wait_for = [&](std::chrono::milliseconds t) {
        auto until = steady::now() + t;
        while (true) {
          int st = 0;
          auto r = ::waitpid(pid_, &st, WNOHANG);
          if (r == pid_ || (r < 0 && errno == ECHILD)) {
            exit_status_ = st;
            return true;
          }
          if (steady::now() >= until)
            return false;
          std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
      };
      auto gone = graceful && wait_for(shutdown_grace);
      if (!gone) {
        ::kill(-pid_, SIGTERM);
        gone = wait_for(graceful ? shutdown_grace : std::chrono::milliseconds{200});
      }
      if (!gone) {
        ::kill(-pid_, SIGKILL);
        int st = 0;
        ::waitpid(pid_, &st, 0);
        exit_status_ = st;
      } else {
        // Children the server left in its group go with it.
        ::kill(-pid_, SIGKILL);
      }
      pid_ = -1;
    }
    for (auto* fd : {&out_fd_, &err_fd_})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  }

  void kill_locked() {
    auto was_running = pid_ > 0;
    reap_locked(false);
    if (was_running)
      note_exit_locked(exit_text());
    if (phase_ != phase::closed)
      phase_ = phase::down;
  }

  std::string exit_text() const {
    if (WIFEXITED(exit_status_))
      return "exited with status " + std::to_string(WEXITSTATUS(exit_status_));
    if (WIFSIGNALED(exit_status_))
      return std::string{"was killed by signal "} + std::to_string(WTERMSIG(exit_status_));
    return "ended";
  }

  /// Records why the server is down and when it may start again.
  void note_exit_locked(std::string what) {
    auto ran = steady::now() - started_at_;
    if (ran >= stable_run)
      backoff_ = first_restart_backoff;
    restart_at_ = steady::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, max_restart_backoff);
    last_exit_ = std::move(what);
    if (!last_stderr_.empty())
      last_exit_ += "; its last words: " + last_stderr_;
  }

  void on_exit_locked(actions& after) {
    reap_locked(false);
    note_exit_locked(exit_text());
    auto msg = "the MCP server " + cfg_.label() + " " + last_exit_;
    host_.log().log(sdk::log_level::warn, msg);
    fail_all_locked(sdk::make_error(sdk::errc::server_error, msg), after);
    if (phase_ != phase::closed)
      phase_ = phase::down;
  }

  void read_stdout_locked(actions& after) {
    char buf[65536];
    while (out_fd_ >= 0) {
      auto n = ::read(out_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return; // EAGAIN
      if (n == 0) {
        on_exit_locked(after);
        return;
      }
      std::string_view chunk{buf, static_cast<size_t>(n)};
      while (!chunk.empty()) {
        auto nl = chunk.find('\n');
        auto piece = chunk.substr(0, nl);
        if (!oversized_) {
          if (line_.size() + piece.size() > cfg_.max_message_bytes) {
            oversized_ = true;
            line_.clear();
            line_.shrink_to_fit();
          } else {
            line_.append(piece);
          }
        }
        if (nl == std::string_view::npos)
          break;
        chunk.remove_prefix(nl + 1);
        if (oversized_) {
          oversized_ = false;
          if (!oversize_reported_)
            too_large_locked(after);
          oversize_reported_ = false;
        } else {
          if (!line_.empty() && line_.back() == '\r')
            line_.pop_back();
          if (!sdk::trim(line_).empty())
            on_message(line_, after);
          line_.clear();
        }
      }
      // A line still growing past the cap fails its request at once, not
      // when (if ever) it ends.
      if (oversized_ && !oversize_reported_) {
        too_large_locked(after);
        oversize_reported_ = true;
      }
    }
  }

  void too_large_locked(actions& after) {
    auto msg = "the MCP server " + cfg_.label() + " sent a message larger than "
               + std::to_string(cfg_.max_message_bytes) + " bytes (max_message_bytes)";
    host_.log().log(sdk::log_level::warn, msg);
    // Which request it answered cannot be told: every request sent ends.
    for (auto i = pending_.begin(); i != pending_.end();) {
      auto next = std::next(i);
      if (i->second.sent && !i->second.handshake)
        end_locked(i, sdk::make_error(sdk::errc::too_large, msg), after);
      i = next;
    }
  }

  void read_stderr_locked() {
    char buf[8192];
    while (err_fd_ >= 0) {
      auto n = ::read(err_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        if (n == 0) {
          ::close(err_fd_);
          err_fd_ = -1;
        }
        return;
      }
      for (ssize_t k = 0; k < n; ++k) {
        auto c = buf[k];
        if (c == '\n' || err_line_.size() >= 2000) {
          log_stderr_locked();
          if (c == '\n')
            continue;
        }
        err_line_.push_back(c);
      }
    }
  }

  void log_stderr_locked() {
    auto line = sdk::strip_terminal_controls(sdk::repair_utf8(sdk::trim(err_line_)));
    err_line_.clear();
    if (line.empty())
      return;
    // At most 200 lines a minute reach the log.
    auto now = steady::now();
    if (now - stderr_window_ > std::chrono::minutes{1}) {
      stderr_window_ = now;
      stderr_lines_ = 0;
    }
    if (++stderr_lines_ <= 200)
      host_.log().log(sdk::log_level::debug, "mcp " + cfg_.label() + " stderr: " + line);
    last_stderr_ = std::string{sdk::utf8_prefix(line, 300)};
  }

  void write_stdin_locked(actions& after) {
    while (in_fd_ >= 0 && !out_.empty()) {
      auto n = ::send(in_fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      if (n < 0) {
        // The server closed its input: it is going away.
        on_exit_locked(after);
        return;
      }
      out_.erase(0, static_cast<size_t>(n));
    }
  }

  void loop() {
    while (true) {
      pollfd fds[4];
      nfds_t count = 0;
      int timeout_ms = -1;
      {
        std::unique_lock guard{mu_};
        if (stopping_)
          break;
        fds[count++] = {wake_fd_, POLLIN, 0};
        if (out_fd_ >= 0)
          fds[count++] = {out_fd_, POLLIN, 0};
        if (err_fd_ >= 0)
          fds[count++] = {err_fd_, POLLIN, 0};
        if (in_fd_ >= 0 && !out_.empty())
          fds[count++] = {in_fd_, POLLOUT, 0};
        if (auto d = next_deadline_locked()) {
          auto left = std::chrono::ceil<std::chrono::milliseconds>(*d - steady::now()).count();
          timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
        }
      }
      auto r = ::poll(fds, count, timeout_ms);
      if (r < 0 && errno != EINTR)
        break;
      actions after;
      {
        std::unique_lock guard{mu_};
        if (stopping_)
          break;
        uint64_t drained = 0;
        [[maybe_unused]] auto n = ::read(wake_fd_, &drained, sizeof drained);
        if (err_fd_ >= 0)
          read_stderr_locked();
        if (out_fd_ >= 0)
          read_stdout_locked(after);
        write_stdin_locked(after);
        expire_locked(steady::now(), after);
      }
      run(after);
    }
  }

  std::thread io_;
  bool stopping_ = false;
  // Written under mu_; read by wake() from any thread.
  std::atomic<int> wake_fd_{-1};
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int exit_status_ = 0;
  std::string out_;
  std::string line_;
  bool oversized_ = false;
  bool oversize_reported_ = false;
  std::string err_line_;
  std::string last_stderr_;
  steady::time_point stderr_window_{};
  int stderr_lines_ = 0;
  steady::time_point started_at_{};
  steady::time_point restart_at_{};
  std::chrono::milliseconds backoff_ = first_restart_backoff;
  std::string last_exit_;
};

// -- Streamable HTTP ---------------------------------------------------------------

class http_session final : public session {
public:
  using session::session;

  ~http_session() override {
    close();
  }

  void close() override {
    actions after;
    std::string sid;
    {
      std::unique_lock guard{mu_};
      if (phase_ == phase::closed)
        return;
      phase_ = phase::closed;
      fail_all_locked(sdk::make_error(sdk::errc::cancelled, "the connection is closed"), after);
      sid = session_id_;
    }
    run(after);
    // The specification asks a client that is done with a session to end it
    // (DELETE with its id); best effort, waiting a little at most.
    if (!sid.empty()) {
      auto req = base_request("DELETE");
      req.headers.emplace_back("Mcp-Session-Id", sid);
      req.total_timeout = std::chrono::milliseconds{2000};
      auto done = std::make_shared<std::promise<void>>();
      auto f = done->get_future();
      sdk::fetch_buffered(host_.http(), std::move(req), 64 * 1024,
                          [done](sdk::http_response, std::optional<sdk::error>) {
                            done->set_value();
                          });
      f.wait_for(std::chrono::milliseconds{2500});
    }
  }

protected:
  bool open_locked(std::string&, actions&) override {
    session_id_.clear();
    return true;
  }

  std::function<void()> transmit(uint64_t id, std::string line) override {
    auto req = base_request("POST");
    req.body = std::move(line);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("Accept", "application/json, text/event-stream");
    if (!session_id_.empty())
      req.headers.emplace_back("Mcp-Session-Id", session_id_);
    if (!negotiated_.empty())
      req.headers.emplace_back("MCP-Protocol-Version", negotiated_);
    if (id != 0)
      if (auto i = pending_.find(id); i != pending_.end())
        req.total_timeout = i->second.timeout + std::chrono::milliseconds{1000};
    auto self = std::static_pointer_cast<http_session>(shared_from_this());
    auto sink = std::make_shared<response_sink>(self, id);
    return [self, id, req = std::move(req), sink]() mutable {
      auto call = self->host_.http().start(std::move(req), sink);
      std::unique_lock guard{self->mu_};
      if (auto i = self->pending_.find(id); id != 0 && i != self->pending_.end())
        i->second.call = std::move(call);
    };
  }

  void lost_locked(actions&) override {
    session_id_.clear();
    negotiated_.clear();
    if (phase_ != phase::closed)
      phase_ = phase::down;
  }

private:
  sdk::http_request base_request(const char* method) const {
    sdk::http_request req;
    req.method = method;
    req.url = cfg_.url;
    req.headers = cfg_.headers;
    req.follow_redirects = false;
    req.max_response_bytes = static_cast<int64_t>(cfg_.max_message_bytes);
    req.connect_timeout = std::min(cfg_.startup_timeout, std::chrono::milliseconds{10000});
    return req;
  }

  /// One POST's answer: an empty 202, a JSON body, or an event stream.
  class response_sink final : public sdk::http_response_sink {
  public:
    response_sink(std::shared_ptr<http_session> owner, uint64_t id)
      : owner_(std::move(owner)), id_(id), sse_(owner_->cfg_.max_message_bytes) {
      // nop
    }

    bool on_response(int status, const sdk::http_headers& headers) override {
      status_ = status;
      auto type = sdk::to_lower(sdk::find_header(headers, "content-type").value_or(""));
      stream_ = sdk::contains(type, "text/event-stream");
      if (auto sid = sdk::find_header(headers, "mcp-session-id"); sid && status / 100 == 2) {
        std::unique_lock guard{owner_->mu_};
        if (owner_->session_id_.empty() && sid->size() <= 1024)
          owner_->session_id_ = *sid;
      }
      return true;
    }

    bool on_data(std::string_view bytes) override {
      if (status_ / 100 != 2 || !stream_) {
        if (body_.size() + bytes.size() > owner_->cfg_.max_message_bytes)
          return false;
        body_.append(bytes);
        return true;
      }
      actions after;
      bool ok = true;
      {
        std::unique_lock guard{owner_->mu_};
        ok = sse_.feed(bytes, [&](const sdk::sse_event& ev) {
          if ((ev.type.empty() || ev.type == "message") && !sdk::trim(ev.data).empty())
            owner_->on_message(ev.data, after);
          return true;
        });
      }
      session::run(after);
      return ok;
    }

    void on_complete(std::optional<sdk::error> failure) override {
      actions after;
      {
        std::unique_lock guard{owner_->mu_};
        if (!failure && status_ / 100 == 2 && stream_)
          sse_.finish([&](const sdk::sse_event& ev) {
            if ((ev.type.empty() || ev.type == "message") && !sdk::trim(ev.data).empty())
              owner_->on_message(ev.data, after);
            return true;
          });
        else if (!failure && status_ / 100 == 2 && !sdk::trim(body_).empty())
          owner_->on_message(body_, after);
        if (sse_.overflowed())
          failure = sdk::make_error(sdk::errc::too_large, "an event larger than max_message_bytes");
        if (!failure && status_ / 100 != 2) {
          failure = sdk::http_status_error(status_, {}, sdk::http_error_message(body_));
          // A session the server no longer knows: the next request starts
          // a new one.
          if (status_ == 404 && !owner_->session_id_.empty()) {
            owner_->session_id_.clear();
            owner_->negotiated_.clear();
            if (owner_->phase_ == phase::ready)
              owner_->phase_ = phase::down;
          }
        }
        if (id_ != 0) {
          if (auto i = owner_->pending_.find(id_); i != owner_->pending_.end()) {
            auto why = failure ? *failure
                               : sdk::make_error(sdk::errc::invalid_response,
                                                 "the answer to " + i->second.method
                                                   + " held no response to it");
            why.message = "the MCP server " + owner_->cfg_.label() + ": " + why.message;
            i->second.call.reset();
            owner_->end_locked(i, why, after);
          }
        }
      }
      session::run(after);
    }

  private:
    std::shared_ptr<http_session> owner_;
    uint64_t id_;
    int status_ = 0;
    bool stream_ = false;
    std::string body_;
    sdk::sse_parser sse_;
  };

  std::string session_id_;
};

} // namespace

std::shared_ptr<client> client::make(sdk::host_context& host, server_config config) {
  if (!config.url.empty())
    return std::make_shared<http_session>(host, std::move(config));
  return std::make_shared<stdio_session>(host, std::move(config));
}

} // namespace quarry::plugins::mcp
