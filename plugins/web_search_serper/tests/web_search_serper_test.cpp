// Tests of the `serper` web_search plugin: parser on real Serper bodies,
// exact POST request, errors and the module against a fake server.

#include "serper_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

namespace web_search_serper_test {

using namespace quarry;
namespace serper = quarry::plugins::web_search_serper;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

std::string serper_fixture() {
  return test::search_fixture("serper/langchain-docs__search__apple_inc__L93.json");
}

} // namespace

TEST_CASE("serper parses the real search response") {
  auto parsed = serper::parse_response(serper_fixture());
  REQUIRE_FALSE(parsed.failure.has_value());
  REQUIRE(parsed.results.size() == 6);
  CHECK(parsed.results[0].title == "Apple");
  CHECK(parsed.results[0].url == "https://www.apple.com/");
  CHECK(parsed.results[0].snippet.rfind("Discover the innovative world of Apple", 0) == 0);
  CHECK_FALSE(parsed.results[0].published.has_value());
  CHECK(parsed.results[3].published == std::optional<std::string>{"5 days ago"});
  CHECK(parsed.results[5].url == "https://www.bloomberg.com/quote/AAPL:US");
  CHECK(serper::parse_response("<html>").failure->code == sdk::errc::invalid_response);
  auto none = serper::parse_response(R"({"searchParameters":{"q":"x"}})");
  CHECK_FALSE(none.failure.has_value());
  CHECK(none.results.empty());
}

TEST_CASE("serper sends the exact request and reports errors") {
  CHECK_THROWS_AS(serper::parse_config(json::object()), std::invalid_argument);
  CHECK_THROWS_AS(serper::parse_config({{"api_key", "k"}, {"num", 3}}), std::invalid_argument);
  CHECK(serper::parse_config({{"api_key", "k"}}).common.base_url == "https://google.serper.dev");
  test::search_env env;
  env.answer(200, serper_fixture());
  env.serve_answer("POST", "/search");
  auto tool = serper::make_tool(
    env.host,
    {{"api_key", "serper-secret"}, {"base_url", env.server.url("")}, {"gl", "us"}, {"hl", "en"}});
  auto result = run_tool(*tool, {{"queries", {"Apple Inc."}}});
  REQUIRE_FALSE(result.failure.has_value());
  {
    auto seen = env.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "POST");
    CHECK(seen[0].path == "/search");
    CHECK(seen[0].header("X-API-KEY") == std::optional<std::string>{"serper-secret"});
    CHECK(seen[0].header("Content-Type") == std::optional<std::string>{"application/json"});
    CHECK(json::parse(seen[0].body)
          == json{{"q", "Apple Inc."}, {"num", 10}, {"gl", "us"}, {"hl", "en"}});
  }
  auto llm = json::parse(result.llm_text);
  REQUIRE(llm["results"].size() == 6);
  CHECK(llm["results"][3]["updated_at"] == "5 days ago");
  test::check_error_rows(
    env, *tool,
    {{401, R"({"message":"Unauthorized.","statusCode":401})", sdk::errc::auth},
     {422, R"({"message":"bad"})", sdk::errc::bad_request},
     {429, R"({"message":"slow"})", sdk::errc::rate_limited},
     {400, R"({"message":"Not enough credits","statusCode":400})", sdk::errc::quota},
     {500, "boom", sdk::errc::server_error},
     {200, "<html>", sdk::errc::invalid_response}},
    "serper-secret", [](const test::error_row& r, const sdk::tool_result& failed) {
      CAPTURE(failed.failure->message);
      if (r.status == 401) {
        CHECK(failed.llm_text.find("Unauthorized.") != std::string::npos);
        CHECK(failed.failure->message.find("Check api_key in this tool's settings "
                                           "(tools.NAME.api_key): a Serper key, sent "
                                           "as X-API-KEY.")
              != std::string::npos);
      }
      if (r.status == 400)
        CHECK(failed.failure->message.find("(HTTP 400: Not enough credits). The "
                                           "Serper account has no credits left")
              != std::string::npos);
      if (r.status == 429)
        CHECK(failed.failure->message.find("queries per second") != std::string::npos);
    });
}

TEST_CASE("serper module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_serper.so"};
  http_server server;
  auto body = serper_fixture();
  server.route("POST", "/search", [&](const request&) { return response_plan::json(200, body); });
  auto tool = module.tool("serper", {{"api_key", "k"}, {"base_url", server.url("")}});
  auto result = run_tool(*tool, {{"queries", "apple"}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(result.documents.size() == 6);
  module.services->shutdown();
}

} // namespace web_search_serper_test
