// MCP over Streamable HTTP at /mcp in `quarry serve` (docs/mcp.md), through
// the real server and raw HTTP: the session header, JSON answers and the
// event stream of a tool call, and the HTTP errors of the transport.

#include "serve_client.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace serve_mcp_test {

using namespace quarry;
using namespace quarry::test::serve;
using nlohmann::json;

namespace {

std::vector<std::string> mcp_headers(const std::string& session = {}) {
  std::vector<std::string> h{"Accept: application/json, text/event-stream"};
  if (!session.empty())
    h.push_back("MCP-Session-Id: " + session);
  return h;
}

json rpc(const json& id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

} // namespace

TEST_CASE("serve mcp: sessions, JSON answers, a tool call's event stream and the transport's "
          "errors") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto url = srv.url("/mcp");
  auto init = call("POST", url,
                   rpc(1, "initialize",
                       {{"protocolVersion", "2025-06-18"},
                        {"capabilities", json::object()},
                        {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                     .dump(),
                   mcp_headers());
  REQUIRE(init.status == 200);
  CHECK(init.as_json()["result"]["protocolVersion"] == "2025-06-18");
  auto session = init.header("mcp-session-id");
  REQUIRE(session.size() == 32);
  // A notification: 202, no body.
  auto note = call("POST", url, R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                   mcp_headers(session));
  CHECK(note.status == 202);
  CHECK(note.body.empty());
  auto tools = call("POST", url, rpc(2, "tools/list").dump(), mcp_headers(session));
  REQUIRE(tools.status == 200);
  CHECK(tools.as_json()["result"]["tools"].size() == 5);
  // A tool call answers with an event stream that ends after the response.
  auto listed = call(
    "POST", url,
    rpc(3, "tools/call", {{"name", "list_sessions"}, {"arguments", json::object()}}).dump(),
    mcp_headers(session));
  REQUIRE(listed.status == 200);
  CHECK(listed.header("content-type").find("text/event-stream") != std::string::npos);
  auto events = parse_sse(listed.body);
  REQUIRE_FALSE(events.empty());
  auto last = json::parse(events.back().data);
  CHECK(last["id"] == 3);
  CHECK(last["result"]["isError"] == false);
  // Tool errors stay results; protocol errors are JSON-RPC errors.
  auto wrong = call(
    "POST", url, rpc(4, "tools/call", {{"name", "get_report"}, {"arguments", {{"x", 1}}}}).dump(),
    mcp_headers(session));
  CHECK(json::parse(parse_sse(wrong.body).back().data)["result"]["isError"] == true);
  auto unknown_tool = call("POST", url, rpc(5, "tools/call", {{"name", "nope"}}).dump(),
                           mcp_headers(session));
  CHECK(json::parse(parse_sse(unknown_tool.body).back().data)["error"]["code"] == -32602);
  auto method = call("POST", url, rpc(6, "no/such").dump(), mcp_headers(session));
  CHECK(method.as_json()["error"]["code"] == -32601);

  // The transport's errors.
  auto bad = call("POST", url, "{nope", mcp_headers(session));
  CHECK(bad.status == 400);
  CHECK(bad.as_json()["error"]["code"] == -32700);
  auto batch = call("POST", url, "[" + rpc(7, "ping").dump() + "]", mcp_headers(session));
  CHECK(batch.status == 400);
  CHECK(batch.as_json()["error"]["code"] == -32600);
  CHECK(call("POST", url, rpc(8, "ping").dump(), mcp_headers()).status == 400);
  CHECK(call("POST", url, rpc(8, "ping").dump(), mcp_headers(std::string(32, 'a'))).status == 404);
  auto h = mcp_headers(session);
  h.push_back("MCP-Protocol-Version: 2000-01-01");
  CHECK(call("POST", url, rpc(8, "ping").dump(), h).status == 400);
  CHECK(call("GET", url, {}, mcp_headers(session)).status == 405);
  auto text = call("POST", url, rpc(8, "ping").dump(),
                   {"Content-Type: text/plain", "MCP-Session-Id: " + session});
  CHECK(text.status == 415);
  auto foreign = mcp_headers();
  foreign.push_back("Origin: http://evil.example");
  CHECK(call("POST", url, rpc(1, "initialize", {{"protocolVersion", "2025-11-25"}}).dump(), foreign)
          .status
        == 403);
  // Still answering; then the session ends.
  CHECK(call("POST", url, rpc(9, "ping").dump(), mcp_headers(session)).as_json()["result"]
        == json::object());
  CHECK(call("DELETE", url, {}, mcp_headers(session)).status == 204);
  CHECK(call("POST", url, rpc(10, "ping").dump(), mcp_headers(session)).status == 404);
  CHECK(call("DELETE", url, {}, mcp_headers(session)).status == 404);
}

TEST_CASE("serve mcp: the bearer token is asked for like everywhere else") {
  test::temp_dir home;
  server_process srv{home, {"--set", "server.auth_token=mcp-secret"}};
  auto body = rpc(1, "initialize", {{"protocolVersion", "2025-11-25"}}).dump();
  CHECK(call("POST", srv.url("/mcp"), body, mcp_headers()).status == 401);
  auto h = mcp_headers();
  h.push_back("Authorization: Bearer mcp-secret");
  auto ok = call("POST", srv.url("/mcp"), body, h);
  CHECK(ok.status == 200);
  CHECK_FALSE(ok.header("mcp-session-id").empty());
}

} // namespace serve_mcp_test
