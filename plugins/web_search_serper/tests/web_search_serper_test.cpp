// Tests of the `serper` web_search plugin: parser on real Serper bodies,
// exact POST request, errors and the module against a fake server.

#include "serper_search.hpp"

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"
#include "support/process.hpp"
#include "support/test_host.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

#include <future>
#include <mutex>

using namespace quarry;
namespace serper = quarry::plugins::web_search_serper;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

std::string serper_fixture() {
  return test::read_file(std::string{QUARRY_FIXTURES_DIR}
                         + "/search/serper/langchain-docs__search__apple_inc__L93.json");
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
  CHECK_THROWS_AS(serper::parse_config({{"api_key", "k"}, {"num", 3}}),
                  std::invalid_argument);
  CHECK(serper::parse_config({{"api_key", "k"}}).common.base_url
        == "https://google.serper.dev");
  test::test_host host;
  http_server server;
  std::mutex mtx;
  std::vector<request> seen;
  int status = 200;
  std::string body = serper_fixture();
  server.route("POST", "/search", [&](const request& req) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.push_back(req);
    return response_plan::text(status, body, "application/json");
  });
  auto tool = serper::make_tool(host, {{"api_key", "serper-secret"},
                                       {"base_url", server.url("")},
                                       {"gl", "us"},
                                       {"hl", "en"}});
  auto result = run_tool(*tool, {{"queries", {"Apple Inc."}}});
  REQUIRE_FALSE(result.failure.has_value());
  {
    std::lock_guard<std::mutex> guard{mtx};
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
  struct row {
    int status;
    std::string body;
    sdk::errc code;
  };
  std::vector<row> rows{{401, R"({"message":"Unauthorized.","statusCode":401})", sdk::errc::auth},
                        {422, R"({"message":"bad"})", sdk::errc::bad_request},
                        {429, R"({"message":"slow"})", sdk::errc::rate_limited},
                        {500, "boom", sdk::errc::server_error},
                        {200, "<html>", sdk::errc::invalid_response}};
  for (const auto& r : rows) {
    CAPTURE(r.status);
    {
      std::lock_guard<std::mutex> guard{mtx};
      status = r.status;
      body = r.body;
    }
    auto failed = run_tool(*tool, {{"queries", {"q"}}});
    REQUIRE(failed.failure.has_value());
    CHECK(failed.failure->code == r.code);
    CHECK(failed.llm_text.rfind("All web search queries failed.", 0) == 0);
    CHECK(failed.llm_text.find("serper-secret") == std::string::npos);
    if (r.status == 401)
      CHECK(failed.llm_text.find("Unauthorized.") != std::string::npos);
  }
  host.shutdown();
}

TEST_CASE("serper module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_serper.so"};
  auto& registry = *module.registry;
  http_server server;
  auto body = serper_fixture();
  server.route("POST", "/search", [&](const request&) {
    return response_plan::json(200, body);
  });
  auto made = registry.make_tool("serper", {{"api_key", "k"}, {"base_url", server.url("")}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto result = run_tool(*std::get<std::shared_ptr<sdk::tool>>(made), {{"queries", "apple"}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(result.documents.size() == 6);
  module.services->shutdown();
}
