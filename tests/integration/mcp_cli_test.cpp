// `quarry mcp` as a child process spoken to in raw JSON-RPC lines over its
// standard input and output (docs/mcp.md): hostile input gets JSON-RPC
// errors and the server stays up; an offline deep_research sends progress
// and returns a cited report; cancellation and a client that goes away stop
// the research, stored as cancelled; read_url refuses a loopback address.

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mcp_cli_test {

using namespace quarry;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// `quarry mcp` with pipes to its standard input and output; its standard
// error goes to a file. Killed at destruction if it still runs.
class mcp_process {
public:
  mcp_process(const test::temp_dir& home,
              std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    auto opts = test::isolated_quarry_options(home.path(), env);
    err_file_ = home.file("mcp-stderr.txt");
    int in[2];
    int out[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    int err = ::open(err_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(err >= 0);
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "mcp"};
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[1], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      for (const auto& [key, value] : opts.env) {
        if (value)
          setenv(key.c_str(), value->c_str(), 1);
        else
          unsetenv(key.c_str());
      }
      std::vector<char*> args;
      for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      _exit(127);
    }
    ::close(in[1]);
    ::close(out[1]);
    ::close(err);
    in_ = in[0];
    out_ = out[0];
  }

  ~mcp_process() {
    if (in_ >= 0)
      ::close(in_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0)
      ::close(out_);
  }

  void send_raw(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      auto n = ::send(in_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      done += static_cast<size_t>(n);
    }
  }

  void send(const json& j) {
    send_raw(j.dump() + "\n");
  }

  // The next line of standard output, or nothing when it ended or `timeout`
  // passed.
  std::optional<std::string> line(std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        auto l = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return l;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char chunk[65536];
      auto n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0)
        return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Reads lines until the response to `id`; every line must be JSON, and
  // the notifications on the way are kept in `notifications`.
  json response(const json& id, std::chrono::milliseconds timeout = 60s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
      auto l = line(std::max(left, 1ms));
      if (!l) {
        FAIL("no response to " << id.dump() << "; stderr:\n" << err());
        return {};
      }
      auto j = json::parse(*l, nullptr, false);
      REQUIRE_MESSAGE(j.is_object(), "not a JSON object on stdout: " << *l);
      CHECK(j["jsonrpc"] == "2.0");
      if (j.contains("method")) {
        notifications.push_back(j);
        continue;
      }
      if (j["id"] == id)
        return j;
      others.push_back(j);
    }
  }

  json request(const json& id, const std::string& method, json params = json::object()) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    return response(id);
  }

  void initialize() {
    auto r = request(0, "initialize",
                     {{"protocolVersion", "2025-11-25"},
                      {"capabilities", json::object()},
                      {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
    REQUIRE_MESSAGE(r.contains("result"), r.dump());
    CHECK(r["result"]["protocolVersion"] == "2025-11-25");
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }

  void close_input() {
    ::close(in_);
    in_ = -1;
  }

  // The exit status once it ended within `timeout`, else nothing (and it is
  // killed).
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

  std::string err() const {
    return test::read_file(err_file_);
  }

  std::vector<json> notifications;
  std::vector<json> others;

private:
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::string err_file_;
};

int error_code(const json& r) {
  REQUIRE_MESSAGE(r.contains("error"), r.dump());
  return r["error"]["code"].get<int>();
}

// The state of a stored session, as `quarry sessions list --json` says.
std::string stored_state(const test::temp_dir& home, const std::string& id) {
  auto r = test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "sessions", "list",
                              "--json"},
                             test::isolated_quarry_options(home.path()));
  REQUIRE(r.exit_code == 0);
  auto j = json::parse(r.out, nullptr, false);
  auto list = j.is_object() && j.contains("sessions") ? j["sessions"] : j;
  for (const auto& s : list)
    if (s.value("id", "") == id)
      return s.value("state", "");
  return "missing";
}

} // namespace

TEST_CASE("mcp: garbage on stdin gets JSON-RPC errors and the server stays up") {
  test::temp_dir home;
  mcp_process p{home};
  // Before initialize: only ping.
  CHECK(p.request(1, "ping").contains("result"));
  CHECK(error_code(p.request(2, "tools/list")) == -32600);
  p.initialize();
  struct bad {
    std::string line;
    int code;
  };
  std::string deep = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":)"
                     + std::string(5000, '[') + std::string(5000, ']') + "}}";
  std::vector<bad> cases{
    {"not json at all", -32700},
    {"{\"jsonrpc\":\"2.0\",", -32700},
    {"\xff\xfe\x00garbage", -32700},
    {deep, -32700},
    {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", -32600},
    {"12345", -32600},
    {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", -32600},
    {R"({"jsonrpc":"2.0","id":[1],"method":"ping"})", -32600},
    {R"({"jsonrpc":"2.0","id":3,"method":{"x":1}})", -32600},
    // A line of 5 MiB: refused without being parsed.
    {std::string(5u << 20, 'x'), -32600},
  };
  for (const auto& c : cases) {
    p.send_raw(c.line + "\n");
    auto l = p.line(30s);
    REQUIRE_MESSAGE(l, "no answer to a bad line; stderr:\n" << p.err());
    auto j = json::parse(*l, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(error_code(j) == c.code);
  }
  CHECK(error_code(p.request("u", "no/such/method")) == -32601);
  CHECK(error_code(p.request("t", "tools/call", {{"name", "rm_rf"}})) == -32602);
  CHECK(error_code(p.request("a", "tools/call", {{"name", "get_report"}, {"arguments", "x"}}))
        == -32602);
  CHECK(error_code(
          p.request("r", "resources/read", {{"uri", "quarry://sessions/q0000000000000000/report"}}))
        == -32002);
  CHECK(error_code(p.request("r2", "resources/read", {{"uri", "file:///etc/passwd"}})) == -32002);
  // Wrong tool arguments are tool errors, not protocol errors.
  auto wrong = p.request("w", "tools/call",
                         {{"name", "deep_research"}, {"arguments", {{"question", 7}}}});
  CHECK(wrong["result"]["isError"] == true);
  auto extra = p.request("w2", "tools/call",
                         {{"name", "get_report"}, {"arguments", {{"session_id", "nope"}}}});
  CHECK(extra["result"]["isError"] == true);
  // Notifications (even unknown ones) get no answer; the next request does.
  p.send({{"jsonrpc", "2.0"}, {"method", "notifications/unknown"}});
  p.send(
    {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 999}}}});
  CHECK(p.request("last", "ping")["result"] == json::object());
  CHECK(p.others.empty());
  // Nothing but protocol lines on stdout: the logs went to stderr.
  CHECK(p.err().find("quarry: MCP server") != std::string::npos);
  p.close_input();
  auto rc = p.wait(60s);
  REQUIRE(rc);
  CHECK(*rc == 0);
}

TEST_CASE("mcp: an offline deep_research sends progress and returns a cited report") {
  test::temp_dir home;
  mcp_process p{home};
  p.initialize();
  auto tools = p.request(1, "tools/list");
  std::vector<std::string> names;
  for (const auto& t : tools["result"]["tools"]) {
    names.push_back(t["name"]);
    CHECK(t["inputSchema"]["type"] == "object");
    CHECK(t["outputSchema"]["type"] == "object");
  }
  CHECK(names
        == std::vector<std::string>{"deep_research", "quick_search", "read_url", "get_report",
                                    "list_sessions"});
  auto r = p.request(
    2, "tools/call",
    {{"name", "deep_research"},
     {"arguments", {{"question", "Why does a heat pump's efficiency drop in cold weather?"}}},
     {"_meta", {{"progressToken", "dr"}}}});
  REQUIRE_MESSAGE(r.contains("result"), r.dump());
  const auto& res = r["result"];
  REQUIRE_MESSAGE(res["isError"] == false, res.dump());
  const auto& sc = res["structuredContent"];
  auto id = sc["session_id"].get<std::string>();
  CHECK(sc["state"] == "completed");
  CHECK(sc["report"].get<std::string>().find("[[1]]") != std::string::npos);
  REQUIRE(sc["sources"].size() >= 1);
  for (const auto& s : sc["sources"]) {
    CHECK(s["number"].get<int>() >= 1);
    CHECK_FALSE(s["url"].get<std::string>().empty());
    CHECK_FALSE(s["passage"].get<std::string>().empty());
  }
  auto text = res["content"][0]["text"].get<std::string>();
  CHECK(text.find("## Sources") != std::string::npos);
  // Progress: the token, growing numbers, the plan and the sources found.
  std::vector<std::string> messages;
  double last = 0;
  for (const auto& n : p.notifications) {
    if (n["method"] != "notifications/progress")
      continue;
    CHECK(n["params"]["progressToken"] == "dr");
    CHECK(n["params"]["progress"].get<double>() > last);
    last = n["params"]["progress"].get<double>();
    messages.push_back(n["params"].value("message", ""));
  }
  auto has = [&](const std::string& prefix) {
    for (const auto& m : messages)
      if (m.find(prefix) != std::string::npos)
        return true;
    return false;
  };
  CHECK(has("Session " + id));
  CHECK(has("Sources found"));
  CHECK(has("Agent 1"));
  // Stored: get_report, list_sessions and the resources give it again.
  auto again = p.request(3, "tools/call",
                         {{"name", "get_report"}, {"arguments", {{"session_id", id}}}});
  CHECK(again["result"]["structuredContent"]["report"] == sc["report"]);
  auto listed = p.request(4, "tools/call",
                          {{"name", "list_sessions"}, {"arguments", json::object()}});
  CHECK(listed["result"]["structuredContent"]["sessions"][0]["id"] == id);
  auto resources = p.request(5, "resources/list");
  REQUIRE(resources["result"]["resources"].size() == 1);
  auto uri = resources["result"]["resources"][0]["uri"].get<std::string>();
  CHECK(uri == "quarry://sessions/" + id + "/report");
  auto read = p.request(6, "resources/read", {{"uri", uri}});
  CHECK(read["result"]["contents"][0]["text"].get<std::string>().find("## Sources")
        != std::string::npos);
  auto sources = p.request(7, "resources/read", {{"uri", "quarry://sessions/" + id + "/sources"}});
  auto sj = json::parse(sources["result"]["contents"][0]["text"].get<std::string>());
  CHECK(sj["sources"] == sc["sources"]);
  // quick_search over the example corpus.
  auto qs = p.request(8, "tools/call",
                      {{"name", "quick_search"},
                       {"arguments", {{"queries", {"heat pump defrost"}}}}});
  REQUIRE(qs["result"]["isError"] == false);
  CHECK(qs["result"]["structuredContent"]["results"].size() >= 1);
  // read_url refuses a loopback address (open_url's rules), as a tool error.
  auto ru = p.request(
    9, "tools/call", {{"name", "read_url"}, {"arguments", {{"url", "http://127.0.0.1:9/secret"}}}});
  CHECK(ru["result"]["isError"] == true);
  p.close_input();
  auto rc = p.wait(60s);
  REQUIRE(rc);
  CHECK(*rc == 0);
}

TEST_CASE("mcp: cancellation and a client that goes away stop the research, stored as cancelled") {
  test::temp_dir home;
  test::fake_llm_server llm;
  // Every model call waits forever: the research runs until it is stopped.
  REQUIRE_FALSE(
    llm.script(json::array({{{"respond", {{"text", "never"}}}, {"stall_after_bytes", 0}}})));
  mcp_process p{home, {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", llm.base_url_openai()}}};
  p.initialize();
  auto start = [&](const json& id) {
    p.send({{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params",
             {{"name", "deep_research"},
              {"arguments", {{"question", "How loud are heat pumps at night?"}}},
              {"_meta", {{"progressToken", id}}}}}});
    // The first progress names the session.
    auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      auto l = p.line(1s);
      if (!l)
        continue;
      auto j = json::parse(*l);
      REQUIRE_MESSAGE(j.contains("method"), "an answer before any progress: " << *l);
      auto m = j["params"].value("message", "");
      if (m.rfind("Session ", 0) == 0)
        return m.substr(8, 17);
    }
    FAIL("no progress; stderr:\n" << p.err());
    return std::string{};
  };
  auto first = start("c1");
  p.send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", "c1"}, {"reason", "the user changed their mind"}}}});
  // No answer to the cancelled call; the server goes on.
  CHECK(p.request("p", "ping")["result"] == json::object());
  auto until = std::chrono::steady_clock::now() + 60s;
  while (stored_state(home, first) != "cancelled" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(100ms);
  CHECK(stored_state(home, first) == "cancelled");
  // A second research; then the client goes away.
  auto second = start("c2");
  p.close_input();
  auto rc = p.wait(60s);
  REQUIRE_MESSAGE(rc, "quarry mcp did not exit when its input closed; stderr:\n" << p.err());
  CHECK(*rc == 0);
  CHECK(stored_state(home, second) == "cancelled");
  // Nothing was answered for either call.
  for (const auto& o : p.others)
    CHECK(o["id"] != "c1");
  while (auto l = p.line(100ms))
    CHECK(json::parse(*l).value("id", json()) != "c2");
}

TEST_CASE("mcp: a client that stops reading its output counts as gone after 30 s") {
  test::temp_dir home;
  mcp_process p{home};
  p.initialize();
  // Each answer is some 6 KB: far more than a pipe holds, never read.
  for (int i = 0; i < 100; ++i)
    p.send({{"jsonrpc", "2.0"}, {"id", 100 + i}, {"method", "tools/list"}});
  // Standard input stays open: only the stalled output ends the server.
  auto rc = p.wait(90s);
  REQUIRE_MESSAGE(rc, "quarry mcp still waits for a client that does not read; stderr:\n"
                        << p.err());
  CHECK(*rc == 0);
  CHECK(p.err().find("has not read its output for 30 s") != std::string::npos);
}

} // namespace mcp_cli_test
