// The Model Context Protocol server without I/O (core/mcp.hpp): framing,
// JSON-RPC errors for every kind of bad input, the lifecycle, tools,
// progress, cancellation and resources.

#include "quarry/core/mcp.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

namespace mcp_test {

using namespace quarry::core;
using nlohmann::json;

namespace {

json echo_schema() {
  return json{{"type", "object"},
              {"properties", {{"text", {{"type", "string"}}}}},
              {"required", {"text"}},
              {"additionalProperties", false}};
}

// A server with one tool `echo` whose calls wait in `calls` until the test
// finishes them, and one resource.
struct fixture {
  std::vector<std::string> out;
  std::vector<std::shared_ptr<mcp::call>> calls;
  int cancels = 0;
  std::unique_ptr<mcp::server> srv;

  fixture() {
    mcp::server_setup s;
    s.name = "quarry";
    s.version = "1.0";
    s.tools.push_back({"echo", "Echo", "Echoes its text", echo_schema(),
                       json{{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}},
                       nullptr});
    s.resource_templates.push_back({"quarry://sessions/{id}/report", "report", "", "", ""});
    s.call_tool = [this](std::shared_ptr<mcp::call> c) {
      c->on_cancel([this] { ++cancels; });
      calls.push_back(std::move(c));
    };
    s.list_resources =
      [](const std::string& cursor) -> std::variant<mcp::resource_page, mcp::rpc_error> {
      if (cursor == "bad")
        return mcp::rpc_error{mcp::error_code::invalid_params, "Invalid params: unknown cursor"};
      mcp::resource_page p;
      p.resources.push_back(
        {"quarry://sessions/q1/report", "q1", "A question", "", "text/markdown"});
      return p;
    };
    s.read_resource =
      [](const std::string& uri) -> std::variant<std::vector<mcp::resource_text>, mcp::rpc_error> {
      if (uri != "quarry://sessions/q1/report")
        return mcp::rpc_error{mcp::error_code::resource_not_found, "Resource not found"};
      return std::vector<mcp::resource_text>{{uri, "text/markdown", "# Report"}};
    };
    s.write = [this](const std::string& line) { out.push_back(line); };
    srv = std::make_unique<mcp::server>(std::move(s));
  }

  // Sends `line` and returns what was written for it, parsed.
  std::vector<json> send(const std::string& line) {
    auto before = out.size();
    srv->handle(line);
    std::vector<json> got;
    for (auto i = before; i < out.size(); ++i) {
      CHECK(out[i].find('\n') == std::string::npos);
      got.push_back(json::parse(out[i]));
    }
    return got;
  }

  json one(const std::string& line) {
    auto got = send(line);
    REQUIRE(got.size() == 1);
    return got[0];
  }

  void initialize(const std::string& version = "2025-11-25") {
    auto r = one(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":")"
                 + version + R"(","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
    REQUIRE(r.contains("result"));
    send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
};

int error_of(const json& j) {
  REQUIRE(j.contains("error"));
  CHECK(j["jsonrpc"] == "2.0");
  return j["error"]["code"].get<int>();
}

} // namespace

TEST_CASE("mcp line splitter frames one message per line") {
  mcp::line_splitter s{16};
  s.feed("{\"a\":1}\r\n{\"b\"");
  auto l = s.next();
  REQUIRE(l);
  CHECK(l->text == "{\"a\":1}");
  CHECK_FALSE(l->oversized);
  CHECK_FALSE(s.next());
  s.feed(":2}\n");
  l = s.next();
  REQUIRE(l);
  CHECK(l->text == "{\"b\":2}");
  // A line over the limit is reported once its end comes, without its bytes.
  s.feed(std::string(10, 'x'));
  s.feed(std::string(10, 'y'));
  CHECK_FALSE(s.next());
  s.feed("z\nok\n");
  l = s.next();
  REQUIRE(l);
  CHECK(l->oversized);
  CHECK(l->text.empty());
  l = s.next();
  REQUIRE(l);
  CHECK(l->text == "ok");
  // The end of the stream gives the unterminated rest.
  s.feed("tail");
  CHECK_FALSE(s.next());
  l = s.finish();
  REQUIRE(l);
  CHECK(l->text == "tail");
  CHECK_FALSE(s.finish());
}

TEST_CASE("mcp answers bad JSON with a parse error and a null id") {
  fixture f;
  for (const auto* line : {"{", "not json", "{\"jsonrpc\":\"2.0\",\"id\":1,", "\x01\x02"}) {
    auto r = f.one(line);
    CHECK(error_of(r) == mcp::error_code::parse_error);
    CHECK(r["id"].is_null());
  }
  // Nested deeper than the cap: refused before it is parsed.
  std::string deep = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":)"
                     + std::string(200, '[') + std::string(200, ']') + "}}";
  CHECK(error_of(f.one(deep)) == mcp::error_code::parse_error);
}

TEST_CASE("mcp answers what is no JSON-RPC request with an invalid request error") {
  fixture f;
  f.initialize();
  // A batch, a scalar, a wrong version, a wrong id, a missing or wrong method.
  for (const auto* line :
       {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", "42", R"("text")",
        R"({"jsonrpc":"1.0","id":1,"method":"ping"})", R"({"id":1,"method":"ping"})",
        R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})",
        R"({"jsonrpc":"2.0","id":null,"method":"ping"})",
        R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", R"({"jsonrpc":"2.0","id":1})",
        R"({"jsonrpc":"2.0","id":1,"method":7})",
        R"({"jsonrpc":"2.0","id":1,"method":"ping","params":3})"})
    CHECK_MESSAGE(error_of(f.one(line)) == mcp::error_code::invalid_request, line);
  // The id is kept when it could be read.
  CHECK(f.one(R"({"jsonrpc":"1.0","id":"x","method":"ping"})")["id"] == "x");
  // Too long: refused without being parsed.
  f.srv->handle_oversized();
  CHECK(json::parse(f.out.back())["error"]["code"] == mcp::error_code::invalid_request);
  auto big = mcp::read_message(std::string(mcp::max_message_bytes + 1, ' '));
  CHECK(big.kind == mcp::message::invalid);
  CHECK(json::parse(big.error)["error"]["code"] == mcp::error_code::invalid_request);
  // Blank lines and responses to requests the server never sent: nothing.
  CHECK(f.send("").empty());
  CHECK(f.send("  \r").empty());
  CHECK(f.send(R"({"jsonrpc":"2.0","id":5,"result":{}})").empty());
  // The server still answers.
  CHECK(f.one(R"({"jsonrpc":"2.0","id":9,"method":"ping"})")["result"] == json::object());
}

TEST_CASE(
  "mcp answers an unknown method with method not found, and ignores unknown notifications") {
  fixture f;
  f.initialize();
  auto r = f.one(R"({"jsonrpc":"2.0","id":"a","method":"tools/destroy"})");
  CHECK(error_of(r) == mcp::error_code::method_not_found);
  CHECK(r["id"] == "a");
  CHECK(f.send(R"({"jsonrpc":"2.0","method":"notifications/whatever","params":{}})").empty());
  CHECK(f.send(R"({"jsonrpc":"2.0","method":"tools/destroy"})").empty());
}

TEST_CASE("mcp answers bad params with invalid params") {
  fixture f;
  // initialize without a version, with capabilities that are no object.
  CHECK(error_of(f.one(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"))
        == mcp::error_code::invalid_params);
  CHECK(
    error_of(f.one(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":[]}})"))
    == mcp::error_code::invalid_params);
  f.initialize();
  for (
    const auto* line : {
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":3}})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":[1]}})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":["echo"]})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":5}})",
      R"({"jsonrpc":"2.0","id":2,"method":"resources/read","params":{}})",
      R"({"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":1}})",
      R"({"jsonrpc":"2.0","id":2,"method":"resources/list","params":{"cursor":"bad"}})",
    })
    CHECK_MESSAGE(error_of(f.one(line)) == mcp::error_code::invalid_params, line);
  CHECK(f.calls.empty());
}

TEST_CASE("mcp initialize negotiates the protocol version") {
  for (const auto& v : mcp::supported_protocol_versions()) {
    fixture f;
    auto r = f.one(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":")"
                   + v + R"(","capabilities":{}}})");
    CHECK(r["result"]["protocolVersion"] == v);
  }
  fixture f;
  // Before initialize only ping is answered.
  CHECK(f.one(R"({"jsonrpc":"2.0","id":1,"method":"ping"})").contains("result"));
  CHECK(error_of(f.one(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})"))
        == mcp::error_code::invalid_request);
  auto r = f.one(
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{}}})");
  const auto& res = r["result"];
  CHECK(res["protocolVersion"] == std::string{mcp::latest_protocol_version});
  CHECK(res["serverInfo"]["name"] == "quarry");
  CHECK(res["capabilities"].contains("tools"));
  CHECK(res["capabilities"].contains("resources"));
  CHECK(f.srv->protocol_version() == std::string{mcp::latest_protocol_version});
  // Once only.
  CHECK(
    error_of(f.one(
      R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}})"))
    == mcp::error_code::invalid_request);
}

TEST_CASE("mcp lists tools with input and output schemas") {
  fixture f;
  f.initialize();
  auto r = f.one(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  const auto& tools = r["result"]["tools"];
  REQUIRE(tools.size() == 1);
  CHECK(tools[0]["name"] == "echo");
  CHECK(tools[0]["title"] == "Echo");
  CHECK(tools[0]["inputSchema"] == echo_schema());
  CHECK(tools[0]["outputSchema"]["type"] == "object");
}

TEST_CASE("mcp tool calls: results, tool errors, progress and cancellation") {
  fixture f;
  f.initialize();
  // Wrong arguments are the tool's error, which the model can read.
  auto bad = f.one(
    R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":5}}})");
  CHECK(bad["result"]["isError"] == true);
  CHECK(bad["result"]["content"][0]["type"] == "text");
  CHECK(f.calls.empty());

  // A call with a progress token: progress, then the result; nothing after.
  CHECK(
    f.send(
       R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p2"}}})")
      .empty());
  REQUIRE(f.calls.size() == 1);
  auto c = f.calls[0];
  CHECK(c->arguments()["text"] == "hi");
  CHECK(f.srv->running() == 1);
  // The same id again while it runs.
  CHECK(
    error_of(f.one(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}})"))
    == mcp::error_code::invalid_request);
  c->progress("planning");
  c->progress("searching", 10);
  auto p1 = json::parse(f.out[f.out.size() - 2]);
  auto p2 = json::parse(f.out.back());
  CHECK(p1["method"] == "notifications/progress");
  CHECK(p1["params"]["progressToken"] == "p2");
  CHECK(p1["params"]["message"] == "planning");
  CHECK(p2["params"]["progress"].get<double>() > p1["params"]["progress"].get<double>());
  CHECK(p2["params"]["total"] == 10);
  c->finish(mcp::tool_result({{"text", "hi"}}, "hi"));
  auto done = json::parse(f.out.back());
  CHECK(done["id"] == 2);
  CHECK(done["result"]["structuredContent"]["text"] == "hi");
  CHECK(done["result"]["isError"] == false);
  auto n = f.out.size();
  c->progress("late");
  c->finish(mcp::tool_error("twice"));
  CHECK(f.out.size() == n);
  CHECK(f.srv->running() == 0);

  // Without a token: no progress.
  f.send(
    R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}})");
  REQUIRE(f.calls.size() == 2);
  n = f.out.size();
  f.calls[1]->progress("nobody asked");
  CHECK(f.out.size() == n);

  // Cancelled: the handler hears of it, and nothing is answered.
  CHECK(
    f.send(
       R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}})")
      .empty());
  CHECK(f.cancels == 1);
  CHECK(f.calls[1]->cancelled());
  // Still running until its handler finishes it.
  CHECK(f.srv->running() == 1);
  f.calls[1]->finish(mcp::tool_result({{"text", "a"}}, "a"));
  CHECK(f.out.size() == n);
  CHECK(f.srv->running() == 0);
  // Cancelling what is unknown or malformed does nothing.
  CHECK(f.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}})")
          .empty());
  CHECK(f.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{}})").empty());
  CHECK(f.cancels == 1);

  // The string id "4" and the number 4 are different requests.
  f.send(
    R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}})");
  f.send(
    R"({"jsonrpc":"2.0","id":"4","method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}})");
  CHECK(f.srv->running() == 2);
  // The client goes away: every call is cancelled.
  f.srv->cancel_all();
  CHECK(f.cancels == 3);
  for (auto& x : f.calls)
    x->finish(mcp::tool_error("stopped"));
  CHECK(f.srv->running() == 0);
}

TEST_CASE("mcp refuses tool calls over the cap with a tool error") {
  fixture f;
  f.initialize();
  for (size_t i = 0; i < mcp::max_running_calls; ++i)
    CHECK(f.send(R"({"jsonrpc":"2.0","id":)" + std::to_string(100 + i)
                 + R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}})")
            .empty());
  auto r = f.one(
    R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}})");
  CHECK(r["result"]["isError"] == true);
  for (auto& c : f.calls)
    c->finish(mcp::tool_error("done"));
}

TEST_CASE("mcp resources: list, templates, read and not found") {
  fixture f;
  f.initialize();
  auto l = f.one(R"({"jsonrpc":"2.0","id":1,"method":"resources/list"})");
  REQUIRE(l["result"]["resources"].size() == 1);
  CHECK(l["result"]["resources"][0]["uri"] == "quarry://sessions/q1/report");
  CHECK(l["result"]["resources"][0]["mimeType"] == "text/markdown");
  auto t = f.one(R"({"jsonrpc":"2.0","id":2,"method":"resources/templates/list"})");
  CHECK(t["result"]["resourceTemplates"][0]["uriTemplate"] == "quarry://sessions/{id}/report");
  auto r = f.one(
    R"({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"quarry://sessions/q1/report"}})");
  CHECK(r["result"]["contents"][0]["text"] == "# Report");
  auto missing = f.one(
    R"({"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"quarry://sessions/q2/report"}})");
  CHECK(error_of(missing) == mcp::error_code::resource_not_found);
  CHECK(missing["error"]["data"]["uri"] == "quarry://sessions/q2/report");
}

TEST_CASE("mcp messages with invalid UTF-8 are read with it repaired") {
  fixture f;
  f.initialize();
  auto r = f.one("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no\xff\"}");
  CHECK(error_of(r) == mcp::error_code::method_not_found);
  // What was written is valid JSON (parsed above) and names the method.
  CHECK(r["error"]["message"].get<std::string>().find("no") != std::string::npos);
}

} // namespace mcp_test
