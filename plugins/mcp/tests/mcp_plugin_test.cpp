// The `mcp` tool plugin's pieces: its configuration, what a server's answers
// become, which listed tools are offered, and the connection against a
// hostile stdio server (tests/e2e/mcp_hostile_server.mjs, run with node).

#include "mcp_client.hpp"
#include "mcp_config.hpp"
#include "mcp_results.hpp"
#include "mcp_tool.hpp"

#include "quarry/host/services.hpp"
#include "quarry/sdk/text.hpp"

#include "support/run_tool.hpp"
#include "support/test_host.hpp"
#include "support/http_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace mcp_plugin_test {

namespace {

using namespace quarry;
using namespace quarry::plugins::mcp;
using nlohmann::json;

std::string refusal(const json& config) {
  try {
    parse_config(config);
  } catch (const std::invalid_argument& ex) {
    return ex.what();
  }
  return "accepted";
}

} // namespace

TEST_CASE("mcp config: a server is a command or a URL, and every option is checked") {
  auto cfg = parse_config({{"command", {"node", "server.js"}},
                           {"env", {{"TOKEN", "x"}}},
                           {"include", {"a", "b"}},
                           {"kind", {{"a", "search"}, {"b", "page_reader"}}},
                           {"rename", {{"a", "find"}}},
                           {"timeout", 2.5}});
  CHECK(cfg.label() == "node");
  CHECK(cfg.kinds.at("a") == sdk::tool_kind::internal_search);
  CHECK(cfg.kinds.at("b") == sdk::tool_kind::page_reader);
  CHECK(cfg.call_timeout == std::chrono::milliseconds{2500});
  CHECK(parse_config({{"url", "https://mcp.example.com/mcp"}, {"kind", "web_search"}}).label()
        == "mcp.example.com");
  CHECK(refusal(json::object()).find("give either 'command'") != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"url", "http://h/mcp"}}).find("not both")
        != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"comand", 1}}).find("unknown configuration key 'comand'")
        != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"kind", "searcher"}}).find("'kind' must be generic")
        != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"rename", {{"a", "has space"}}}}).find("'rename.a'")
        != std::string::npos);
  CHECK(refusal({{"url", "ftp://h"}}).find("'url' must be an http") != std::string::npos);
  CHECK(refusal({{"url", "http://h"}, {"env", {{"A", "b"}}}}).find("'env' is for a 'command'")
        != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"headers", {{"A", "b"}}}}).find("'headers' are for")
        != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"timeout", 0}}).find("'timeout'") != std::string::npos);
  CHECK(refusal({{"command", {"x"}}, {"max_tools", 1000}}).find("'max_tools'")
        != std::string::npos);
  CHECK(model_tool_name("files.read text") == "files_read_text");
  CHECK(model_tool_name(std::string(100, 'a')).size() == 64);
}

TEST_CASE("mcp results: searches become numbered documents, page reads documents at their "
          "address, errors and floods stay tool answers") {
  result_options search{"find", sdk::tool_kind::web_search, 4096, 10};
  auto r = convert_result(
    {{"content", {{{"type", "text"}, {"text", "two results"}}}},
     {"structuredContent",
      {{"results",
        {{{"url", "https://a.example/x"}, {"title", "A"}, {"snippet", "first"}},
         {{"link", "/docs/b.md"}, {"name", "B"}, {"content", "second"}, {"date", "2025-01-02"}},
         {{"title", "no address"}},
         {{"url", "https://a.example/x"}, {"title", "A"}, {"snippet", "again"}}}}}}},
    json::object(), search);
  REQUIRE_FALSE(r.failure);
  REQUIRE(r.documents.size() == 2);
  CHECK(r.documents[0].kind == sdk::source_kind::web);
  CHECK(r.documents[1].kind == sdk::source_kind::file);
  CHECK(r.documents[1].published == std::optional<std::string>{"2025-01-02"});
  auto shown = json::parse(r.llm_text);
  CHECK(shown["results"][1]["document"] == 2);
  CHECK(shown["results"][1]["content"] == "second");
  // The same results as JSON text, and as resource links.
  r = convert_result(
    {{"content",
      {{{"type", "text"},
        {"text", R"({"results": [{"url": "https://c.example", "title": "C"}]})"}}}}},
    json::object(), search);
  CHECK(r.documents.size() == 1);
  r = convert_result({{"content",
                       {{{"type", "resource_link"},
                         {"uri", "file:///docs/d.md"},
                         {"name", "d.md"},
                         {"description", "about D"}}}}},
                     json::object(), search);
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].snippet == "about D");
  // A search that found nothing readable is text for the model.
  r = convert_result({{"content", {{{"type", "text"}, {"text", "nothing matched"}}}}},
                     json::object(), search);
  CHECK(r.documents.empty());
  CHECK(r.llm_text == "nothing matched");

  result_options reader{"read_text_file", sdk::tool_kind::page_reader, 4096, 10};
  r = convert_result({{"content", {{{"type", "text"}, {"text", "# Heat pumps\n\nCOP 3 to 4."}}}}},
                     {{"path", "/docs/heat.md"}, {"_quarry", {{"snippets", json::object()}}}},
                     reader);
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].url == "/docs/heat.md");
  CHECK(r.documents[0].title == "Heat pumps");
  CHECK(r.documents[0].content.find("COP 3 to 4") != std::string::npos);
  CHECK(json::parse(r.llm_text)["results"][0]["url"] == "/docs/heat.md");
  r = convert_result(
    {{"content",
      {{{"type", "resource"}, {"resource", {{"uri", "file:///docs/e.md"}, {"text", "# E\nbody"}}}},
       {{"type", "image"}, {"data", "AAAA"}, {"mimeType", "image/png"}}}}},
    json::object(), reader);
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].title == "E");

  result_options generic{"echo", sdk::tool_kind::other, 1024, 10};
  r = convert_result(
    {{"content", {{{"type", "image"}, {"data", "AAAA"}, {"mimeType", "image/png"}}}}},
    json::object(), generic);
  CHECK(r.llm_text == "[an image (image/png) was left out]");
  r = convert_result({{"structuredContent", {{"sum", 42}}}}, json::object(), generic);
  CHECK(r.llm_text.find("42") != std::string::npos);
  r = convert_result({{"content", {{{"type", "text"}, {"text", std::string(5000, 'x')}}}}},
                     json::object(), generic);
  CHECK(r.llm_text.size() < 1200);
  CHECK(r.llm_text.find("[... cut: the answer had 5000 bytes; the first 1024 are shown]")
        != std::string::npos);
  r = convert_result({{"isError", true},
                      {"content", {{{"type", "text"}, {"text", "no such file"}}}}},
                     json::object(), generic);
  REQUIRE(r.failure);
  CHECK(r.failure->code == sdk::errc::bad_request);
  CHECK(r.llm_text == "The tool echo reported an error: no such file");
  r = convert_result(json::array(), json::object(), generic);
  REQUIRE(r.failure);
  CHECK(r.failure->code == sdk::errc::invalid_response);
  // Bytes that are not UTF-8 are repaired.
  r = convert_result({{"content", {{{"type", "text"}, {"text", std::string{"a\xff"}}}}}},
                     json::object(), generic);
  CHECK(sdk::is_valid_utf8(r.llm_text));
}

TEST_CASE("mcp tools: include, exclude, rename and kinds apply, unknown names and collisions "
          "are refused, bad schemas are left out and the list is capped") {
  std::vector<json> listed;
  for (int i = 0; i < 5; ++i)
    listed.push_back({{"name", "tool." + std::to_string(i)},
                      {"description", "Tool " + std::to_string(i)},
                      {"inputSchema", {{"type", "object"}}}});
  listed.push_back({{"name", "bad"}, {"inputSchema", {{"type", "string"}}}});
  auto cfg = parse_config({{"command", {"x"}},
                           {"exclude", {"tool.4"}},
                           {"rename", {{"tool.0", "search"}}},
                           {"kind", {{"tool.0", "search"}}},
                           {"max_tools", 3}});
  std::vector<std::string> notes;
  auto specs = select_tools(listed, cfg, notes);
  REQUIRE(specs.size() == 3);
  CHECK(specs[0].name == "search");
  CHECK(specs[0].server_name == "tool.0");
  CHECK(specs[0].kind == sdk::tool_kind::internal_search);
  CHECK(specs[1].name == "tool_1");
  CHECK(specs[1].kind == sdk::tool_kind::other);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].find("left out the tool 'bad'") != std::string::npos);
  CHECK(notes[1].find("left out: tool.3") != std::string::npos);
  auto refused = [&](const json& config) {
    std::vector<std::string> n;
    try {
      select_tools(listed, parse_config(config), n);
    } catch (const std::invalid_argument& ex) {
      return std::string{ex.what()};
    }
    return std::string{"accepted"};
  };
  CHECK(refused({{"command", {"x"}}, {"include", {"nope"}}})
          .find("'include' names the tool 'nope', which the MCP server x does not offer")
        != std::string::npos);
  CHECK(refused({{"command", {"x"}}, {"rename", {{"tool.1", "tool_2"}}}})
          .find("would both be called 'tool_2'")
        != std::string::npos);
}

namespace {

// The hostile server's tools through the plugin's factory (node from PATH).
std::vector<sdk::tool_offer> hostile(test::test_host& host, const std::string& mode,
                                     json extra = json::object()) {
  json config{{"command",
               {"node", std::string{QUARRY_SOURCE_DIR} + "/tests/e2e/mcp_hostile_server.mjs", mode,
                extra.value("state", std::string{"/nonexistent/state"})}},
              {"timeout", 2}};
  extra.erase("state");
  config.update(extra);
  return make_server_tools(host, config);
}

bool have_node() {
  return ::access("/usr/bin/node", X_OK) == 0 || ::access("/usr/local/bin/node", X_OK) == 0;
}

} // namespace

TEST_CASE("mcp connection: a hostile stdio server times out, floods, crashes and is started "
          "again, all as tool answers") {
  if (!have_node()) {
    MESSAGE("node is not installed (scripts/e2e-setup installs it): not run");
    return;
  }
  test::test_host host;
  {
    auto tools = hostile(host, "silent");
    REQUIRE(tools.size() == 1);
    CHECK(tools[0].object->name() == "probe");
    auto t0 = std::chrono::steady_clock::now();
    auto r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::timeout);
    CHECK(r.llm_text.find("did not answer tools/call within 2 s") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds{20});
  }
  {
    auto tools = hostile(host, "flood", {{"max_output_bytes", 10000}});
    auto r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE_FALSE(r.failure);
    CHECK(r.llm_text.size() < 11000);
    CHECK(r.llm_text.find("the answer had 3145728 bytes") != std::string::npos);
  }
  {
    auto tools = hostile(host, "endless", {{"max_message_bytes", 65536}});
    auto r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::too_large);
  }
  {
    auto tools = hostile(host, "invalid");
    auto r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::invalid_response);
  }
  {
    test::temp_dir dir;
    auto state = dir.path() + "/crashed";
    auto tools = hostile(host, "crash-once", {{"state", state}});
    auto r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::server_error);
    CHECK(r.llm_text.find("exited with status 3; its last words: dying") != std::string::npos);
    // Within the backoff the server stays down and says when it returns.
    r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    REQUIRE(r.failure);
    CHECK(r.llm_text.find("it is started again in") != std::string::npos);
    std::this_thread::sleep_for(std::chrono::milliseconds{1100});
    r = test::run_tool(*tools[0].object, {{"queries", {"x"}}});
    CHECK_FALSE(r.failure);
    CHECK(r.llm_text == "alive again");
  }
  {
    auto tools = hostile(host, "reserved");
    REQUIRE(tools.size() == 1);
    CHECK(tools[0].object->name() == "generate_report"); // refused by the host's check
  }
  CHECK_THROWS_WITH_AS(make_server_tools(host, {{"command", {"no-such-mcp-program"}}}),
                       doctest::Contains("no program 'no-such-mcp-program' in PATH"),
                       std::runtime_error);
}

TEST_CASE("mcp connection: a hostile Streamable HTTP server gives tool errors, never a hang") {
  test::http_server server;
  std::string mode;
  server.route("POST", "/mcp", [&](const test::request& req) {
    auto msg = json::parse(req.body, nullptr, false);
    auto method = msg.is_object() ? msg.value("method", std::string{}) : std::string{};
    if (!msg.contains("id"))
      return test::response_plan::text(202, "");
    json reply{{"jsonrpc", "2.0"}, {"id", msg["id"]}};
    if (method == "initialize") {
      reply["result"] = {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()}};
      return test::response_plan::json(200, reply.dump());
    }
    if (method == "tools/list") {
      reply["result"] = {{"tools", {{{"name", "probe"}, {"inputSchema", {{"type", "object"}}}}}}};
      return test::response_plan::json(200, reply.dump());
    }
    if (mode == "500")
      return test::response_plan::json(500, R"({"error": "broken"})");
    if (mode == "garbage")
      return test::response_plan::text(200, "this is not JSON", "application/json");
    // An event larger than max_message_bytes.
    return test::response_plan::text(200, "data: " + std::string(100 * 1024, 'x') + "\n\n",
                                     "text/event-stream");
  });
  test::test_host host;
  auto tools = make_server_tools(
    host, {{"url", server.url("/mcp")}, {"timeout", 2}, {"max_message_bytes", 65536}});
  REQUIRE(tools.size() == 1);
  for (auto [which, code] : {std::pair{"500", sdk::errc::server_error},
                             std::pair{"garbage", sdk::errc::invalid_response},
                             std::pair{"huge", sdk::errc::too_large}}) {
    mode = which;
    std::string shown{which};
    CAPTURE(shown);
    auto t0 = std::chrono::steady_clock::now();
    auto r = test::run_tool(*tools[0].object, json::object());
    REQUIRE(r.failure);
    CHECK(r.failure->code == code);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds{10});
  }
}

} // namespace mcp_plugin_test
