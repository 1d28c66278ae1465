// Tests of the `searxng` web_search plugin: parser, exact request, errors and
// the module against a fake instance. There is no real SearXNG recording
// (see the fixtures' README): bodies follow the documented format=json shape.

#include "searxng_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

namespace web_search_searxng_test {

using namespace quarry;
namespace searxng = quarry::plugins::web_search_searxng;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

// The shape searx/webutils.py emits for format=json.
const char* searxng_body = R"({"query":"hello world","number_of_results":0,"results":[
{"url":"https://en.wikipedia.org/wiki/%22Hello,_World!%22_program",
 "title":"\"Hello, World!\" program - Wikipedia",
 "content":"A &quot;Hello, World!&quot; program is usually a simple program.","engine":"google",
 "engines":["google","duckduckgo"],"positions":[1,3],"score":9.0,"category":"general",
 "template":"default.html","parsed_url":["https","en.wikipedia.org","/wiki/x","","",""],
 "img_src":"","thumbnail":null,"priority":"","publishedDate":null},
{"url":"https://example.com/news?id=5&utm_source=searx","title":"News","content":"Fresh",
 "engine":"bing","publishedDate":"2024-11-02T00:00:00"},
{"url":"https://example.com/empty","title":"","content":"  "}],
"answers":[],"corrections":[],"infoboxes":[],"suggestions":["hello"],
"unresponsive_engines":[["brave","timeout"]]})";

} // namespace

TEST_CASE("searxng parses the format=json response") {
  auto parsed = searxng::parse_response(searxng_body, 20);
  REQUIRE_FALSE(parsed.failure.has_value());
  REQUIRE(parsed.results.size() == 2);
  CHECK(parsed.results[0].title == "\"Hello, World!\" program - Wikipedia");
  CHECK(parsed.results[0].snippet == "A \"Hello, World!\" program is usually a simple program.");
  CHECK_FALSE(parsed.results[0].published.has_value());
  CHECK(parsed.results[1].url == "https://example.com/news?id=5");
  CHECK(parsed.results[1].published == std::optional<std::string>{"2024-11-02T00:00:00"});
  CHECK(searxng::parse_response(searxng_body, 1).results.size() == 1);
  CHECK(searxng::parse_response("<!DOCTYPE html>", 20).failure->code
        == sdk::errc::invalid_response);
  CHECK(searxng::parse_response(R"({"error":"x"})", 20).failure.has_value());
}

TEST_CASE("searxng validates its configuration") {
  CHECK_NOTHROW(searxng::parse_config(json::object()));
  CHECK_THROWS_AS(searxng::parse_config({{"format", "json"}}), std::invalid_argument);
  CHECK_THROWS_AS(searxng::parse_config({{"safesearch", "9"}}), std::invalid_argument);
  CHECK_THROWS_AS(searxng::parse_config({{"time_range", "week"}}), std::invalid_argument);
}

TEST_CASE("searxng sends the exact request and reports errors") {
  test::search_env env;
  env.answer(200, searxng_body);
  env.serve_answer("GET", "/search");
  auto tool = searxng::make_tool(
    env.host, {{"base_url", env.server.url("/")}, {"language", "en"}, {"categories", "general"}});
  auto result = run_tool(*tool, {{"queries", {"hello world"}}});
  REQUIRE_FALSE(result.failure.has_value());
  {
    auto seen = env.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "GET");
    CHECK(seen[0].path == "/search");
    CHECK(seen[0].param("q") == std::optional<std::string>{"hello world"});
    CHECK(seen[0].param("format") == std::optional<std::string>{"json"});
    CHECK(seen[0].param("pageno") == std::optional<std::string>{"1"});
    CHECK(seen[0].param("language") == std::optional<std::string>{"en"});
    CHECK(seen[0].param("categories") == std::optional<std::string>{"general"});
    CHECK_FALSE(seen[0].header("Authorization").has_value());
  }
  auto llm = json::parse(result.llm_text);
  REQUIRE(llm["results"].size() == 2);
  CHECK(llm["results"][1]["updated_at"] == "2024-11-02T00:00:00");
  // SearXNG has no key: nothing secret to look for.
  test::check_error_rows(env, *tool,
                         {{403, "Forbidden", sdk::errc::auth},
                          {400, R"({"error":"No query"})", sdk::errc::bad_request},
                          {429, "Too Many Requests", sdk::errc::rate_limited},
                          {500, R"({"error":"search error"})", sdk::errc::server_error},
                          {200, "<html>results</html>", sdk::errc::invalid_response}},
                         "", [](const test::error_row& r, const sdk::tool_result& failed) {
                           if (r.status == 403)
                             CHECK(failed.llm_text.find("format=json") != std::string::npos);
                         });
}

TEST_CASE("searxng module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_searxng.so"};
  http_server server;
  server.route("GET", "/search",
               [&](const request&) { return response_plan::json(200, searxng_body); });
  auto tool = module.tool("searxng", {{"base_url", server.url("")}, {"api_key", "t"}});
  CHECK(tool->name() == "web_search");
  auto result = run_tool(*tool, {{"queries", "hello"}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(result.documents.size() == 2);
  module.services->shutdown();
}

} // namespace web_search_searxng_test
