// Tests of the `tavily` web_search plugin: the parser on real Tavily bodies,
// the exact POST request, error statuses and the tool against a fake server.

#include "tavily_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

namespace web_search_tavily_test {

using namespace quarry;
namespace tavily = quarry::plugins::web_search_tavily;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

std::string tavily_fixture(const std::string& name) {
  return test::search_fixture("tavily/" + name);
}

std::string basic_body() {
  return tavily_fixture("pydantic-ai__test_basic_search__0.response.json");
}

// A fake Tavily server recording every request.
struct tavily_env : test::search_env {
  void serve(std::function<response_plan(const request&)> fn) {
    search_env::serve("POST", "/search", std::move(fn));
  }

  std::unique_ptr<sdk::tool> make(json extra = json::object()) {
    return tavily::make_tool(
      host, test::with_keys({{"api_key", "tvly-secret"}, {"base_url", server.url("/")}}, extra));
  }
};

} // namespace

TEST_CASE("tavily parses the real search responses") {
  auto parsed = tavily::parse_response(basic_body());
  REQUIRE_FALSE(parsed.failure.has_value());
  REQUIRE(parsed.results.size() == 5);
  CHECK(parsed.results[0].title == "Pydantic AI: Agent Framework");
  CHECK(parsed.results[0].url
        == "https://medium.com/ai-agent-insider/pydantic-ai-agent-framework-02b138e8db71");
  CHECK(parsed.results[0].snippet.rfind("## AI Agent Insider. # Pydantic AI", 0) == 0);
  CHECK_FALSE(parsed.results[0].published.has_value());
  // The query string stays: distinct videos stay distinct.
  CHECK(parsed.results[2].url == "https://www.youtube.com/watch?v=-WB0T0XmDrY");
  auto domains = tavily::parse_response(
    tavily_fixture("pydantic-ai__test_search_with_include_domains__0.response.json"));
  REQUIRE_FALSE(domains.failure.has_value());
  CHECK(domains.results.size() == 5);
  auto docs = tavily::parse_response(
    tavily_fixture("langchain-docs__tavily_search_md_line186.json"));
  REQUIRE_FALSE(docs.failure.has_value());
  CHECK(docs.results.size() == 5);
  for (const auto& r : docs.results) {
    CHECK_FALSE(r.url.empty());
    CHECK_FALSE(r.title.empty());
  }
  auto dated = tavily::parse_response(
    R"({"results":[{"title":"N","url":"https://n","content":"c &amp; d",)"
    R"("published_date":"Mon, 02 Dec 2024 10:00:00 GMT"}]})");
  REQUIRE(dated.results.size() == 1);
  CHECK(dated.results[0].snippet == "c & d");
  CHECK(dated.results[0].published == std::optional<std::string>{"Mon, 02 Dec 2024 10:00:00 GMT"});
}

TEST_CASE("tavily parser rejects broken bodies") {
  CHECK(tavily::parse_response("not json").failure->code == sdk::errc::invalid_response);
  CHECK(tavily::parse_response(R"({"query":"x"})").failure->code == sdk::errc::invalid_response);
  auto empty = tavily::parse_response(R"({"query":"x","results":[]})");
  CHECK_FALSE(empty.failure.has_value());
  CHECK(empty.results.empty());
}

TEST_CASE("tavily validates its configuration") {
  CHECK_THROWS_AS(tavily::parse_config(json::object()), std::invalid_argument);
  CHECK_THROWS_AS(tavily::parse_config({{"api_key", "k"}, {"depth", "basic"}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tavily::parse_config({{"api_key", "k"}, {"search_depth", "deep"}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tavily::parse_config({{"api_key", "k"}, {"topic", "sports"}}),
                  std::invalid_argument);
  auto cfg = tavily::parse_config({{"api_key", "k"}});
  CHECK(cfg.common.base_url == "https://api.tavily.com");
  CHECK(cfg.search_depth == "basic");
  CHECK(cfg.topic == "general");
  auto req = tavily::make_request(cfg, "q");
  CHECK(req.url == "https://api.tavily.com/search");
}

TEST_CASE("tavily sends the exact request and returns Onyx's JSON") {
  tavily_env env;
  auto body = basic_body();
  env.serve([&](const request&) { return response_plan::json(200, body); });
  auto tool = env.make({{"max_results", 7}, {"topic", "news"}, {"country", "germany"}});
  auto result = run_tool(*tool, {{"queries", {"What is Pydantic AI?"}}});
  REQUIRE_FALSE(result.failure.has_value());
  auto reqs = env.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].method == "POST");
  CHECK(reqs[0].path == "/search");
  CHECK(reqs[0].query_string.empty());
  CHECK(reqs[0].header("Authorization") == std::optional<std::string>{"Bearer tvly-secret"});
  CHECK(reqs[0].header("Content-Type") == std::optional<std::string>{"application/json"});
  CHECK(json::parse(reqs[0].body)
        == json{{"query", "What is Pydantic AI?"},
                {"search_depth", "basic"},
                {"topic", "news"},
                {"max_results", 7},
                {"country", "germany"}});
  auto llm = json::parse(result.llm_text);
  REQUIRE(llm["results"].size() == 5);
  CHECK(llm["results"][0]["document"] == 1);
  CHECK(llm["results"][0]["title"] == "Pydantic AI: Agent Framework");
  CHECK_FALSE(llm["results"][0].contains("updated_at"));
  CHECK(llm["results"][2]["url"] == "https://www.youtube.com/watch?v=-WB0T0XmDrY");
  REQUIRE(result.documents.size() == 5);
  CHECK(result.documents[1].id == "https://ai.pydantic.dev/");
}

TEST_CASE("tavily interleaves two queries and tolerates one failure") {
  tavily_env env;
  auto body = basic_body();
  env.serve([&](const request& req) {
    auto q = json::parse(req.body)["query"].get<std::string>();
    if (q == "bad")
      return response_plan::json(429, R"({"detail":{"error":"rate limited"}})");
    if (q == "second")
      return response_plan::json(
        200, R"({"results":[{"title":"Pydantic AI - Pydantic AI","url":"https://ai.pydantic.dev/",)"
             R"("content":"dup"},{"title":"Other","url":"https://o/","content":"o"}]})");
    return response_plan::json(200, body);
  });
  auto tool = env.make();
  auto result = run_tool(*tool, {{"queries", {"first", "bad", "second"}}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(env.requests().size() == 3);
  std::vector<std::string> urls;
  for (auto& d : result.documents)
    urls.push_back(d.url);
  REQUIRE(urls.size() == 6);
  CHECK(urls[0] == "https://medium.com/ai-agent-insider/pydantic-ai-agent-framework-02b138e8db71");
  CHECK(urls[1] == "https://ai.pydantic.dev/"); // from "second": same title and URL
  CHECK(urls[2] == "https://o/");               // the duplicate from "first" is skipped
  CHECK(urls[3] == "https://www.youtube.com/watch?v=-WB0T0XmDrY");
}

TEST_CASE("tavily reports error statuses and broken bodies to the LLM") {
  struct row {
    int status;
    std::string body;
    sdk::errc code;
  };
  std::vector<row> rows{
    {401, R"({"detail":{"error":"Unauthorized: missing or invalid API key."}})", sdk::errc::auth},
    {422, R"({"detail":[{"msg":"field required"}]})", sdk::errc::bad_request},
    {429, R"({"detail":{"error":"Rate limit exceeded"}})", sdk::errc::rate_limited},
    {432, R"({"detail":{"error":"Plan limit exceeded"}})", sdk::errc::quota},
    {500, R"({"detail":{"error":"Internal error"}})", sdk::errc::server_error},
    {200, "<!doctype html><p>gateway", sdk::errc::invalid_response},
  };
  for (const auto& r : rows) {
    CAPTURE(r.status);
    tavily_env env;
    env.serve(
      [&](const request&) { return response_plan::text(r.status, r.body, "application/json"); });
    auto tool = env.make();
    auto result = run_tool(*tool, {{"queries", {"only"}}});
    REQUIRE(result.failure.has_value());
    CHECK(result.failure->code == r.code);
    CHECK(result.llm_text.rfind("All web search queries failed. Query failures:\n", 0) == 0);
    auto failures = json::parse(result.llm_text.substr(result.llm_text.find('\n') + 1));
    REQUIRE(failures.contains("only"));
    CHECK(result.llm_text.find("tvly-secret") == std::string::npos);
    if (r.status == 401)
      CHECK(failures["only"].get<std::string>().find("missing or invalid API key")
            != std::string::npos);
  }
}

TEST_CASE("tavily module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_tavily.so"};
  auto& registry = *module.registry;
  auto info = registry.find("tavily");
  REQUIRE(info != nullptr);
  CHECK(info->kind == sdk::plugin_kind::tool);
  CHECK(std::holds_alternative<std::string>(registry.make_tool("tavily", json::object())));
  http_server server;
  auto body = basic_body();
  server.route("POST", "/search", [&](const request& req) {
    if (req.header("Authorization") != std::optional<std::string>{"Bearer k"})
      return response_plan::json(401, "{}");
    return response_plan::json(200, body);
  });
  auto tool = module.tool("tavily", {{"api_key", "k"}, {"base_url", server.url("")}});
  auto result = run_tool(*tool, {{"queries", "pydantic"}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(result.documents.size() == 5);
  module.services->shutdown();
}

TEST_CASE("tavily: an HTML gateway page becomes short text; key and plan "
          "errors name the setting and the plan") {
  // A load balancer's page in front of the API, in Latin-1 with entities.
  std::string gateway = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                        "<center><h1>502 Bad Gateway</h1></center>\r\n<p>The upstream server "
                        "did not answer &ndash; r\xE9"
                        "essayez plus tard.</p>\r\n<hr><center>"
                        "awselb/2.0</center>\r\n</body>\r\n</html>\r\n";
  tavily_env env;
  int status = 502;
  env.serve([&](const request&) {
    if (status == 502)
      return response_plan::text(502, gateway, "text/html");
    if (status == 401)
      return response_plan::json(
        401, R"({"detail":{"error":"Unauthorized: missing or invalid API key."}})");
    return response_plan::json(432, R"({"detail":{"error":"This request exceeds )"
                                    R"(your plan's set usage limit."}})");
  });
  auto tool = env.make();
  auto bad_gateway = run_tool(*tool, {{"queries", {"q"}}});
  REQUIRE(bad_gateway.failure.has_value());
  CHECK(bad_gateway.failure->code == sdk::errc::server_error);
  CHECK(bad_gateway.failure->retryable());
  CAPTURE(bad_gateway.failure->message);
  CHECK(bad_gateway.failure->message
        == "all web search queries failed: Tavily answered HTTP 502: 502 Bad "
           "Gateway: The upstream server did not answer \xE2\x80\x93 "
           "r\xEF\xBF\xBD"
           "essayez plus tard. awselb/2.0");
  CHECK(bad_gateway.llm_text.find('<') == std::string::npos);
  CHECK(bad_gateway.llm_text.find("\r") == std::string::npos);
  status = 401;
  auto unauthorised = run_tool(*tool, {{"queries", {"r"}}});
  REQUIRE(unauthorised.failure.has_value());
  CHECK(unauthorised.failure->code == sdk::errc::auth);
  CHECK(unauthorised.failure->message.find("Check api_key in this tool's settings")
        != std::string::npos);
  CHECK(unauthorised.failure->message.find("tvly-secret") == std::string::npos);
  CHECK(unauthorised.llm_text.find("missing or invalid API key") != std::string::npos);
  status = 432;
  auto over = run_tool(*tool, {{"queries", {"s"}}});
  REQUIRE(over.failure.has_value());
  CHECK(over.failure->code == sdk::errc::quota);
  CHECK(over.failure->message.find("plan's set usage limit") != std::string::npos);
  CHECK(over.failure->message.find("credit limit is reached") != std::string::npos);
}

} // namespace web_search_tavily_test
