// Tests of the `exa` web_search plugin: parser on the official example,
// exact POST request, errors and the module against a fake server.

#include "exa_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

namespace web_search_exa_test {

using namespace quarry;
namespace exa = quarry::plugins::web_search_exa;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

std::string exa_fixture() {
  return test::search_fixture("exa/exa-openapi-v2__search_200_example.json");
}

} // namespace

TEST_CASE("exa parses the official search response example") {
  auto parsed = exa::parse_response(exa_fixture());
  REQUIRE_FALSE(parsed.failure.has_value());
  REQUIRE(parsed.results.size() == 1);
  const auto& r = parsed.results[0];
  CHECK(r.title == "A Comprehensive Overview of Large Language Models");
  CHECK(r.url == "https://arxiv.org/pdf/2307.06435.pdf");
  CHECK(r.snippet == "Such requirements have limited their adoption...");
  CHECK(r.published == std::optional<std::string>{"2023-11-16T01:36:32.547Z"});
  auto fallback = exa::parse_response(
    R"({"results":[{"id":"https://s","title":"S","summary":"sum","text":"txt"},)"
    R"({"url":"https://t","title":"T","text":"only text","highlights":[]}]})");
  REQUIRE(fallback.results.size() == 2);
  CHECK(fallback.results[0].url == "https://s");
  CHECK(fallback.results[0].snippet == "sum");
  CHECK(fallback.results[1].snippet == "only text");
  CHECK(exa::parse_response("oops").failure->code == sdk::errc::invalid_response);
  CHECK(exa::parse_response("{}").failure.has_value());
}

TEST_CASE("exa sends the exact request and reports errors") {
  CHECK_THROWS_AS(exa::parse_config(json::object()), std::invalid_argument);
  CHECK_THROWS_AS(exa::parse_config({{"api_key", "k"}, {"type", "magic"}}), std::invalid_argument);
  CHECK(exa::parse_config({{"api_key", "k"}}).common.base_url == "https://api.exa.ai");
  test::search_env env;
  env.answer(200, exa_fixture());
  env.serve_answer("POST", "/search");
  auto tool = exa::make_tool(
    env.host, {{"api_key", "exa-secret"}, {"base_url", env.server.url("")}, {"max_results", 4}});
  auto result = run_tool(*tool, {{"queries", {"llm overview"}}});
  REQUIRE_FALSE(result.failure.has_value());
  {
    auto seen = env.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "POST");
    CHECK(seen[0].path == "/search");
    CHECK(seen[0].header("x-api-key") == std::optional<std::string>{"exa-secret"});
    CHECK(seen[0].header("Content-Type") == std::optional<std::string>{"application/json"});
    CHECK(json::parse(seen[0].body)
          == json{{"query", "llm overview"},
                  {"type", "auto"},
                  {"numResults", 4},
                  {"contents", {{"highlights", {{"numSentences", 2}, {"highlightsPerUrl", 1}}}}}});
  }
  auto llm = json::parse(result.llm_text);
  REQUIRE(llm["results"].size() == 1);
  CHECK(llm["results"][0]["updated_at"] == "2023-11-16T01:36:32.547Z");
  CHECK(llm["results"][0]["content"] == "Such requirements have limited their adoption...");
  test::check_error_rows(
    env, *tool,
    {{401, R"({"error":"Invalid API key"})", sdk::errc::auth},
     {422, R"({"error":"bad"})", sdk::errc::bad_request},
     {429, R"({"error":"rate"})", sdk::errc::rate_limited},
     {500, "boom", sdk::errc::server_error},
     {402, R"({"error":"Insufficient credits"})", sdk::errc::quota},
     {200, "not json at all", sdk::errc::invalid_response}},
    "exa-secret", [](const test::error_row& r, const sdk::tool_result& failed) {
      CAPTURE(failed.failure->message);
      if (r.status == 401)
        CHECK(failed.failure->message
              == "all web search queries failed: Exa refused the request: the "
                 "request is not authorised (HTTP 401: Invalid API key). Check "
                 "api_key in this tool's settings (tools.NAME.api_key): an Exa "
                 "key, sent as x-api-key.");
      if (r.status == 402)
        CHECK(failed.failure->message.find("billing in Exa's dashboard") != std::string::npos);
    });
}

TEST_CASE("exa module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_exa.so"};
  http_server server;
  auto body = exa_fixture();
  server.route("POST", "/search", [&](const request&) { return response_plan::json(200, body); });
  auto tool = module.tool("exa", {{"api_key", "k"}, {"base_url", server.url("")}});
  auto result = run_tool(*tool, {{"queries", "llm"}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(result.documents.size() == 1);
  module.services->shutdown();
}

} // namespace web_search_exa_test
