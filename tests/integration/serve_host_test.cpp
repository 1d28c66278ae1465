// `quarry serve` against DNS rebinding and cross-site requests (docs/api.md,
// "Host and Origin"), through a real server process: without a token, a
// request whose Host does not name the server is refused on every path, and
// a request that changes state with a foreign Origin is refused; with a
// token neither is checked.

#include "serve_client.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace serve_host_test {

using namespace quarry;
using namespace quarry::test::serve;
using nlohmann::json;

namespace {

std::string port_of(const server_process& srv) {
  return srv.base.substr(srv.base.rfind(':') + 1);
}

// Sends `bytes` on a new connection to 127.0.0.1:`port` and reads until the
// server closes it (or 30 s pass); returns what came.
std::string raw_exchange(const std::string& port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char buf[4096];
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Checks a 403 with the JSON error `forbidden` whose message has `words`.
void check_forbidden(const reply& r, const std::string& words) {
  CAPTURE(r.body);
  CHECK(r.status == 403);
  auto j = json::parse(r.body, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["error"]["code"] == "forbidden");
  CHECK(j["error"]["message"].get<std::string>().find(words) != std::string::npos);
}

size_t sessions_listed(const server_process& srv) {
  return call("GET", srv.url("/v1/research")).as_json()["sessions"].size();
}

} // namespace

TEST_CASE("serve: host check: without a token a rebound name, a foreign page or no Host is "
          "refused on every path") {
  test::temp_dir home;
  server_process srv{home,
                     {"--set", "server.allowed_hosts=[quarry.lan]", "--set",
                      "server.allowed_origins=[http://localhost:3000]"}};
  const auto port = port_of(srv);
  // A session to read and delete (no Origin: not a browser).
  auto started = call("POST", srv.url("/v1/research"),
                      R"({"question": "How loud is a heat pump?", "clarify": false})");
  REQUIRE(started.status == 202);
  auto id = started.as_json()["id"].get<std::string>();
  call("GET", srv.url("/v1/research/" + id + "/events"), {}, {}, std::chrono::seconds{90});
  REQUIRE(state_of(srv, id) == "completed");

  // A page of attacker.example whose name now points at 127.0.0.1.
  const std::string rebound = "Host: attacker.example:" + port;
  for (const auto& path : std::vector<std::string>{
         "/", "/app.js", "/healthz", "/metrics", "/v1/research", "/v1/research/" + id,
         "/v1/research/" + id + "/events", "/v1/research/" + id + "/report", "/v1/models"}) {
    CAPTURE(path);
    check_forbidden(call("GET", srv.url(path), {}, {rebound}, std::chrono::seconds{10}),
                    "attacker.example");
  }
  check_forbidden(call("POST", srv.url("/v1/chat/completions"),
                       R"({"model": "quarry", "messages": [{"role": "user", "content": "q"}]})",
                       {rebound}),
                  "server.allowed_hosts");
  check_forbidden(call("POST", srv.url("/v1/research"), R"({"question": "steal my keys"})",
                       {rebound}),
                  "attacker.example");
  check_forbidden(call("DELETE", srv.url("/v1/research/" + id), {}, {rebound}), "attacker.example");
  // The right name with another port, or without one (port 80), is another
  // server.
  check_forbidden(call("GET", srv.url("/v1/research"), {}, {"Host: 127.0.0.1:1"}), "Host");
  check_forbidden(call("GET", srv.url("/v1/research"), {}, {"Host: localhost"}), "Host");
  // The names of this server, and one allowed in the configuration.
  for (const auto& host : {"localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port,
                           "[::1]:" + port, "quarry.lan:" + port}) {
    CAPTURE(host);
    CHECK(call("GET", srv.url("/v1/research"), {}, {"Host: " + host}).status == 200);
  }
  // No Host: refused in HTTP/1.0 too (and a framing error in HTTP/1.1).
  auto old = raw_exchange(port, "GET /v1/research HTTP/1.0\r\n\r\n");
  CHECK(old.rfind("HTTP/1.", 0) == 0);
  CHECK(old.substr(8, 5) == " 403 ");
  CHECK(old.find("\"forbidden\"") != std::string::npos);
  CHECK(raw_exchange(port, "GET /v1/research HTTP/1.1\r\nConnection: close\r\n\r\n").substr(8, 5)
        == " 400 ");

  // Requests that change state from a foreign page (cross-site), with the
  // right Host: refused, nothing changes.
  const auto before = sessions_listed(srv);
  for (const auto& origin :
       std::vector<std::string>{"https://attacker.example", "null", "http://localhost:3001",
                                "https://localhost:" + port}) {
    CAPTURE(origin);
    check_forbidden(call("DELETE", srv.url("/v1/research/" + id), {}, {"Origin: " + origin}),
                    "Origin");
    check_forbidden(call("POST", srv.url("/v1/research"), R"({"question": "q"})",
                         {"Origin: " + origin}),
                    "server.allowed_origins");
    check_forbidden(
      call("POST", srv.url("/v1/research/" + id + "/resume"), {}, {"Origin: " + origin}), "Origin");
  }
  CHECK(sessions_listed(srv) == before);
  CHECK(state_of(srv, id) == "completed");
  // Reads with a foreign Origin and the right Host are answered (the
  // browser keeps the answer from that page: no CORS fields).
  auto read = call("GET", srv.url("/v1/research"), {}, {"Origin: https://attacker.example"});
  CHECK(read.status == 200);
  CHECK(read.header("access-control-allow-origin").empty());

  // The server's own page (under any of its names) and a listed origin
  // may change state.
  auto second = call("POST", srv.url("/v1/research"),
                     R"({"question": "How warm is a heat pump?", "clarify": false})",
                     {"Origin: http://localhost:" + port, "Host: localhost:" + port});
  CHECK(second.status == 202);
  auto second_id = second.as_json()["id"].get<std::string>();
  call("GET", srv.url("/v1/research/" + second_id + "/events"), {}, {}, std::chrono::seconds{90});
  CHECK(call("DELETE", srv.url("/v1/research/" + second_id), {}, {"Origin: http://localhost:3000"})
          .status
        == 204);
  CHECK(
    call("DELETE", srv.url("/v1/research/" + id), {}, {"Origin: http://127.0.0.1:" + port}).status
    == 204);
  CHECK(sessions_listed(srv) == before - 1);
}

TEST_CASE("serve: host check: entries that are not hosts or origins are refused at start") {
  test::temp_dir home;
  auto run = [&](const std::string& setting) {
    return test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "--set", setting,
                              "serve", "--listen", "127.0.0.1:0"},
                             test::isolated_quarry_options(home.path()));
  };
  auto hosts = run("server.allowed_hosts=[http://quarry.lan]");
  CHECK(hosts.exit_code == 2);
  CHECK(hosts.err.find("server.allowed_hosts: 'http://quarry.lan'") != std::string::npos);
  auto origins = run("server.allowed_origins=[localhost:3000]");
  CHECK(origins.exit_code == 2);
  CHECK(origins.err.find("server.allowed_origins: 'localhost:3000'") != std::string::npos);
}

TEST_CASE("serve: host check: with a token neither Host nor Origin is checked") {
  test::temp_dir home;
  server_process srv{home,
                     {"--set", "server.auth_token=${QUARRY_TEST_TOKEN}"},
                     {{"QUARRY_TEST_TOKEN", "s3cret-token-for-tests"}}};
  const std::string bearer = "Authorization: Bearer s3cret-token-for-tests";
  // A rebound page has no token: the API stays closed to it.
  auto rebound = call("GET", srv.url("/v1/research"), {}, {"Host: attacker.example"});
  CHECK(rebound.status == 401);
  CHECK(call("DELETE", srv.url("/v1/research/q0123456789abcdef"), {},
             {"Host: attacker.example", "Origin: http://attacker.example"})
          .status
        == 401);
  CHECK(call("GET", srv.url("/healthz"), {}, {"Host: attacker.example"}).status == 200);
  // Names Quarry cannot know (a proxy in front) work with the token.
  CHECK(call("GET", srv.url("/v1/research"), {}, {"Host: quarry.example.com", bearer}).status
        == 200);
  CHECK(call("DELETE", srv.url("/v1/research/q0123456789abcdef"), {},
             {"Host: quarry.example.com", "Origin: https://quarry.example.com", bearer})
          .status
        == 404);
}

} // namespace serve_host_test
