// Tests of the `brave` web_search plugin: the parser on real Brave bodies,
// the exact request, error statuses and the whole tool against a fake server.

#include "brave_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <future>

namespace web_search_brave_test {

using namespace quarry;
namespace brave = quarry::plugins::web_search_brave;
using json = nlohmann::json;
using test::http_server;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

std::string brave_fixture() {
  return test::search_fixture("brave/brave-search-python-client__web.json");
}

// A fake Brave server recording every request.
struct brave_env : test::search_env {
  void serve(std::function<response_plan(const request&)> fn) {
    search_env::serve("GET", "/res/v1/web/search", std::move(fn));
  }

  std::unique_ptr<sdk::tool> make(json extra = json::object()) {
    return brave::make_tool(
      host, test::with_keys({{"api_key", "BSA-secret-key"}, {"base_url", server.url("")}}, extra));
  }
};

// A Brave body with the given (title, url) results.
std::string body_of(std::vector<std::pair<std::string, std::string>> xs) {
  json results = json::array();
  for (auto& [t, u] : xs)
    results.push_back({{"title", t}, {"url", u}, {"description", "about " + t}});
  return json{{"type", "search"}, {"web", {{"type", "search"}, {"results", results}}}}.dump();
}

} // namespace

TEST_CASE("brave parses the real web search response") {
  auto parsed = brave::parse_response(brave_fixture());
  REQUIRE_FALSE(parsed.failure.has_value());
  REQUIRE(parsed.results.size() == 20);
  const auto& first = parsed.results[0];
  CHECK(first.title == "\"Hello, World!\" program - Wikipedia");
  CHECK(first.url == "https://en.wikipedia.org/wiki/%22Hello,_World!%22_program");
  CHECK(first.snippet.rfind("A \"Hello, World!\" program is usually a simple "
                            "computer program",
                            0)
        == 0);
  CHECK(first.snippet.find("<strong>") == std::string::npos);
  CHECK(first.snippet.find("&quot;") == std::string::npos);
  CHECK(first.snippet.find("language's basic syntax.") != std::string::npos);
  CHECK(first.published == std::optional<std::string>{"2024-12-27T15:49:55"});
  CHECK(parsed.results[1].title == "Hello World Computer Science");
  CHECK(parsed.results[1].url == "https://www.helloworldcs.org/");
  CHECK_FALSE(parsed.results[4].published.has_value());
  for (const auto& r : parsed.results) {
    CHECK(r.snippet.find('<') == std::string::npos);
    CHECK(r.title.find("&#") == std::string::npos);
  }
}

TEST_CASE("brave parser rejects broken bodies and accepts empty ones") {
  CHECK(brave::parse_response("<html>502</html>").failure->code == sdk::errc::invalid_response);
  CHECK(brave::parse_response("[1,2]").failure->code == sdk::errc::invalid_response);
  CHECK(brave::parse_response("").failure.has_value());
  auto empty = brave::parse_response(R"({"type":"search","query":{"original":"x"}})");
  CHECK_FALSE(empty.failure.has_value());
  CHECK(empty.results.empty());
  auto err = brave::parse_response(R"({"type":"ErrorResponse","error":{"detail":"bad"}})");
  REQUIRE(err.failure.has_value());
  CHECK(err.failure->message.find("bad") != std::string::npos);
  // Items missing fields or of the wrong type are skipped.
  auto odd = brave::parse_response(
    R"({"web":{"results":[1,{"title":"t"},{"url":"https://u","title":5},)"
    R"({"url":"https://ok","title":"OK","description":null}]}})");
  REQUIRE(odd.results.size() == 1);
  CHECK(odd.results[0].title == "OK");
}

TEST_CASE("brave validates its configuration") {
  CHECK_THROWS_AS(brave::parse_config(json::object()), std::invalid_argument);
  CHECK_THROWS_AS(brave::parse_config({{"api_key", "k"}, {"count", 5}}), std::invalid_argument);
  CHECK_THROWS_AS(brave::parse_config({{"api_key", "k"}, {"safesearch", "high"}}),
                  std::invalid_argument);
  auto cfg = brave::parse_config({{"api_key", "k"}, {"country", "US"}, {"freshness", "pw"}});
  CHECK(cfg.common.base_url == "https://api.search.brave.com");
  CHECK(cfg.common.max_results == 10);
  CHECK(cfg.country == "US");
  auto req = brave::make_request(cfg, "hello world");
  CHECK(req.method == "GET");
  CHECK(req.url
        == "https://api.search.brave.com/res/v1/web/search?q=hello%20world&count=10"
           "&text_decorations=false&result_filter=web&country=US&freshness=pw");
}

TEST_CASE("brave sends the exact request and returns Onyx's JSON") {
  brave_env env;
  auto body = brave_fixture();
  env.serve([&](const request&) { return response_plan::json(200, body); });
  auto tool = env.make({{"max_results", 20}, {"search_lang", "en"}});
  CHECK(tool->name() == "web_search");
  CHECK(tool->parameters()["required"] == json::array({"queries"}));
  auto result = run_tool(*tool, {{"queries", {"hello  world\n"}}});
  REQUIRE_FALSE(result.failure.has_value());
  auto reqs = env.requests();
  REQUIRE(reqs.size() == 1);
  const auto& req = reqs[0];
  CHECK(req.method == "GET");
  CHECK(req.path == "/res/v1/web/search");
  CHECK(req.param("q") == std::optional<std::string>{"hello world"});
  CHECK(req.param("count") == std::optional<std::string>{"20"});
  CHECK(req.param("text_decorations") == std::optional<std::string>{"false"});
  CHECK(req.param("result_filter") == std::optional<std::string>{"web"});
  CHECK(req.param("search_lang") == std::optional<std::string>{"en"});
  CHECK_FALSE(req.param("country").has_value());
  CHECK(req.header("X-Subscription-Token") == std::optional<std::string>{"BSA-secret-key"});
  CHECK(req.header("Accept") == std::optional<std::string>{"application/json"});
  CHECK(req.body.empty());
  auto llm = json::parse(result.llm_text);
  REQUIRE(llm["results"].size() == 20);
  auto first = llm["results"][0];
  CHECK(first["document"] == 1);
  CHECK(first["title"] == "\"Hello, World!\" program - Wikipedia");
  CHECK(first["updated_at"] == "2024-12-27T15:49:55");
  CHECK(first["url"] == "https://en.wikipedia.org/wiki/%22Hello,_World!%22_program");
  CHECK(first.dump().find("<strong>") == std::string::npos);
  // Key order is Onyx's (the dump keeps insertion order).
  CHECK(result.llm_text.find("\"document\": 1,\n      \"title\"") != std::string::npos);
  CHECK_FALSE(llm["results"][4].contains("updated_at"));
  REQUIRE(result.documents.size() == 20);
  CHECK(result.documents[0].id == first["url"]);
  CHECK(result.documents[0].snippet == first["content"]);
  CHECK(result.documents[0].published == std::optional<std::string>{"2024-12-27T15:49:55"});
  CHECK(result.documents[0].kind == sdk::source_kind::web);
}

TEST_CASE("brave runs queries in parallel, interleaves and tolerates failures") {
  brave_env env;
  env.serve([&](const request& req) {
    auto q = req.param("q").value_or("");
    if (q == "alpha")
      return response_plan::json(
        200, body_of({{"A1", "https://a/1"}, {"A2", "https://a/2?x=1#f"}, {"A3", "https://a/3"}}));
    if (q == "beta")
      return response_plan::json(
        200, body_of(
               {{"B1", "https://b/1"}, {"A1", "https://a/1?utm_source=z"}, {"B3", "https://b/3"}}));
    return response_plan::json(500, R"({"error":{"detail":"boom"}})");
  });
  auto tool = env.make();
  auto result = run_tool(*tool, {{"queries", {"alpha", "beta", "gamma", "alpha "}}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(env.requests().size() == 3); // the duplicate query is dropped
  std::vector<std::string> titles;
  for (auto& d : result.documents)
    titles.push_back(d.title);
  CHECK(titles == std::vector<std::string>{"A1", "B1", "A2", "A3", "B3"});
  CHECK(result.documents[2].url == "https://a/2?x=1");
  auto llm = json::parse(result.llm_text);
  CHECK(llm["results"].size() == 5);
  CHECK(llm["results"][4]["document"] == 5);
}

TEST_CASE("brave caps each query at max_results") {
  brave_env env;
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 8; ++i)
    many.emplace_back("T" + std::to_string(i), "https://t/" + std::to_string(i));
  env.serve([&](const request&) { return response_plan::json(200, body_of(many)); });
  auto tool = env.make({{"max_results", 3}});
  auto result = run_tool(*tool, {{"queries", "one"}});
  CHECK(result.documents.size() == 3);
}

TEST_CASE("brave reports error statuses and broken bodies to the LLM") {
  struct row {
    int status;
    std::string body;
    sdk::errc code;
  };
  std::vector<row> rows{
    {401, R"({"type":"ErrorResponse","error":{"detail":"Unauthorized"}})", sdk::errc::auth},
    {422,
     R"({"type":"ErrorResponse","error":{"id":"1","status":422,)"
     R"("code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription )"
     R"(token is invalid.","meta":{"component":"authentication"}}})",
     sdk::errc::auth},
    {429, R"({"type":"ErrorResponse","error":{"code":"RATE_LIMITED","detail":"Too many"}})",
     sdk::errc::rate_limited},
    {402, R"({"type":"ErrorResponse","error":{"code":"CREDIT_EXHAUSTED","detail":"No credit"}})",
     sdk::errc::quota},
    {500, "Internal Server Error", sdk::errc::server_error},
    {200, "<html>not json</html>", sdk::errc::invalid_response},
  };
  for (const auto& r : rows) {
    CAPTURE(r.status);
    brave_env env;
    env.serve([&](const request&) {
      auto plan = response_plan::text(r.status, r.body, "application/json");
      if (r.status == 429)
        plan.header("Retry-After", "7");
      return plan;
    });
    auto tool = env.make();
    auto result = run_tool(*tool, {{"queries", {"q one", "q two"}}});
    REQUIRE(result.failure.has_value());
    CHECK(result.failure->code == r.code);
    CHECK(result.documents.empty());
    CHECK(result.llm_text.rfind("All web search queries failed. Query failures:\n", 0) == 0);
    auto tail = result.llm_text.substr(result.llm_text.find('\n') + 1);
    auto failures = json::parse(tail);
    CHECK(failures.size() == 2);
    CHECK(failures.contains("q one"));
    CHECK(failures.contains("q two"));
    CHECK(result.llm_text.find("BSA-secret-key") == std::string::npos);
    CHECK(result.failure->message.find("BSA-secret-key") == std::string::npos);
    if (r.status == 429)
      CHECK(result.failure->retry_after_ms == std::optional<int64_t>{7000});
    if (r.status == 422)
      CHECK(failures["q one"].get<std::string>().find("subscription token is invalid")
            != std::string::npos);
  }
}

TEST_CASE("brave tells the LLM when nothing was found") {
  brave_env env;
  env.serve([&](const request&) { return response_plan::json(200, body_of({})); });
  auto tool = env.make();
  auto result = run_tool(*tool, {{"queries", {"nothing"}}});
  REQUIRE(result.failure.has_value());
  CHECK(result.failure->code == sdk::errc::not_found);
  CHECK(result.llm_text == plugins::web_search_common::no_results_message());
}

TEST_CASE("brave never calls the provider for empty or missing queries") {
  brave_env env;
  env.serve([&](const request&) { return response_plan::json(200, body_of({})); });
  auto tool = env.make();
  auto blank = run_tool(*tool, {{"queries", "   "}});
  REQUIRE(blank.failure.has_value());
  CHECK(blank.failure->code == sdk::errc::bad_request);
  CHECK(blank.llm_text == plugins::web_search_common::empty_queries_message());
  auto missing = run_tool(*tool, {{"query", "x"}});
  REQUIRE(missing.failure.has_value());
  CHECK(missing.llm_text == plugins::web_search_common::missing_queries_message());
  auto weird = run_tool(*tool, {{"queries", 42}});
  CHECK(weird.llm_text == plugins::web_search_common::empty_queries_message());
  CHECK(env.requests().empty());
  CHECK(env.server.requests_served() == 0);
}

TEST_CASE("brave sends a bare string as one query") {
  brave_env env;
  env.serve([&](const request&) {
    return response_plan::json(200, body_of({{"T", "https://t"}}));
  });
  auto tool = env.make();
  auto result = run_tool(*tool, {{"queries", "abc"}});
  REQUIRE_FALSE(result.failure.has_value());
  auto reqs = env.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].param("q") == std::optional<std::string>{"abc"});
}

TEST_CASE("brave cancel ends a stalled run once with cancelled") {
  brave_env env;
  env.serve([&](const request&) { return response_plan{}.stall(); });
  auto tool = env.make();
  auto promise = std::make_shared<std::promise<sdk::tool_result>>();
  auto future = promise->get_future();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto run = tool->run({{"queries", {"a", "b"}}}, [promise, calls](sdk::tool_result r) {
    if (calls->fetch_add(1) == 0)
      promise->set_value(std::move(r));
  });
  run->cancel();
  run->cancel();
  auto result = future.get();
  REQUIRE(result.failure.has_value());
  CHECK(result.failure->code == sdk::errc::cancelled);
  env.host.shutdown();
  CHECK(calls->load() == 1);
}

TEST_CASE("brave module loads through the plugin registry and searches") {
  test::module_fixture module{"quarry_brave.so"};
  auto& registry = *module.registry;
  auto info = registry.find("brave");
  REQUIRE(info != nullptr);
  CHECK(info->ok);
  CHECK(info->kind == sdk::plugin_kind::tool);
  CHECK(
    std::get<std::string>(registry.make_tool("brave", {{"api_key", "k"}, {"typo", 1}})).find("typo")
    != std::string::npos);
  http_server server;
  auto body = brave_fixture();
  std::atomic<int> hits{0};
  server.route("GET", "/res/v1/web/search", [&](const request& req) {
    if (req.header("X-Subscription-Token") != std::optional<std::string>{"k"})
      return response_plan::json(401, "{}");
    ++hits;
    return response_plan::json(200, body);
  });
  auto tool = module.tool("brave", {{"api_key", "k"}, {"base_url", server.url("")}});
  CHECK(tool->name() == "web_search");
  auto result = run_tool(*tool, {{"queries", {"hello world"}}});
  REQUIRE_FALSE(result.failure.has_value());
  CHECK(hits.load() == 1);
  CHECK(result.documents.size() == 10);
  CHECK(json::parse(result.llm_text)["results"][0]["title"]
        == "\"Hello, World!\" program - Wikipedia");
  module.services->shutdown();
}

TEST_CASE("brave answers a query that already ran from the tool's cache") {
  brave_env env;
  env.serve([&](const request& req) {
    auto q = req.param("q").value_or("");
    if (q == "broken")
      return response_plan::json(500, R"({"error":{"detail":"boom"}})");
    return response_plan::json(200, body_of({{q + " page", "https://x/" + q}}));
  });
  auto tool = env.make();
  auto first = run_tool(*tool, {{"queries", {"alpha", "beta"}}});
  REQUIRE_FALSE(first.failure);
  CHECK(env.requests().size() == 2);
  // Another agent asks beta again together with a new query: only the new
  // one goes out, and beta's results are the same.
  auto second = run_tool(*tool, {{"queries", {"beta", "gamma"}}});
  REQUIRE_FALSE(second.failure);
  auto seen = env.requests();
  REQUIRE(seen.size() == 3);
  CHECK(seen[2].param("q") == std::optional<std::string>{"gamma"});
  std::vector<std::string> titles;
  for (const auto& d : second.documents)
    titles.push_back(d.title);
  CHECK(titles == std::vector<std::string>{"beta page", "gamma page"});
  // Entirely cached: no request at all.
  auto third = run_tool(*tool, {{"queries", {"alpha"}}});
  REQUIRE_FALSE(third.failure);
  CHECK(env.requests().size() == 3);
  CHECK(third.documents.at(0).title == "alpha page");
  // Failures are not kept: the query is tried again.
  run_tool(*tool, {{"queries", {"broken"}}});
  run_tool(*tool, {{"queries", {"broken"}}});
  CHECK(env.requests().size() == 5);
}

TEST_CASE("brave's query cache takes the host's limits and its clock") {
  brave_env env;
  env.serve([&](const request& req) {
    auto q = req.param("q").value_or("");
    return response_plan::json(200, body_of({{q + " page", "https://x/" + q}}));
  });
  auto tool = env.make();
  // The host's limits: a minute, two queries.
  CHECK(tool->own_cache(std::chrono::minutes{1}, 2));
  REQUIRE_FALSE(run_tool(*tool, {{"queries", {"alpha"}}}).failure);
  REQUIRE_FALSE(run_tool(*tool, {{"queries", {"alpha"}}}).failure);
  CHECK(env.requests().size() == 1);
  // Past the minute on the host's clock, the query goes out again.
  env.host.advance_steady(std::chrono::seconds{61});
  REQUIRE_FALSE(run_tool(*tool, {{"queries", {"alpha"}}}).failure);
  CHECK(env.requests().size() == 2);
  // At most two queries are kept: a third drops the oldest.
  run_tool(*tool, {{"queries", {"beta"}}});
  run_tool(*tool, {{"queries", {"gamma"}}});
  CHECK(env.requests().size() == 4);
  run_tool(*tool, {{"queries", {"gamma", "beta"}}});
  CHECK(env.requests().size() == 4);
  run_tool(*tool, {{"queries", {"alpha"}}});
  CHECK(env.requests().size() == 5);
  // A ttl of 0 keeps nothing.
  CHECK(tool->own_cache(std::chrono::milliseconds{0}, 256));
  run_tool(*tool, {{"queries", {"alpha"}}});
  run_tool(*tool, {{"queries", {"alpha"}}});
  CHECK(env.requests().size() == 7);
}

TEST_CASE("brave: an HTML error page from its edge becomes short text, and key "
          "and quota errors say which setting to check") {
  // The shape of a CDN's page in front of an API: a title, a heading, a
  // paragraph, and a lot of markup and script nobody should read.
  std::string cdn_page
    = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
      "Access denied | api.search.brave.com used Cloudflare to restrict access"
      "</title><style>"
      + std::string(5000, 'x')
      + "</style><script>"
        "window._cf_chl_opt={cvId:'3'};</script></head><body><div id=\"cf-wrapper\">"
        "<h1 data-translate=\"block_headline\">Sorry, you have been blocked</h1>"
        "<h2>You are unable to access brave.com</h2><p>This website is using a "
        "security service to protect itself from online attacks.</p>"
        "<span class=\"cf-footer-item\">Cloudflare Ray ID: <strong>8a1b2c3d4e5f"
        "</strong></span></div></body></html>";
  brave_env env;
  int status = 403;
  env.serve([&](const request&) {
    if (status == 403)
      return response_plan::text(403, cdn_page, "text/html; charset=UTF-8");
    return response_plan::json(402, R"({"type":"ErrorResponse","error":{"code":"CREDIT_EXHAUSTED",)"
                                    R"("detail":"No credit left.","status":402}})");
  });
  auto tool = env.make();
  auto blocked = run_tool(*tool, {{"queries", {"q"}}});
  REQUIRE(blocked.failure.has_value());
  CHECK(blocked.failure->code == sdk::errc::auth);
  const auto& msg = blocked.failure->message;
  CAPTURE(msg);
  CHECK(msg.find("Brave Search refused the request: the request is not "
                 "authorised (HTTP 403: Access denied | api.search.brave.com "
                 "used Cloudflare to restrict access: Sorry, you have been "
                 "blocked.")
        != std::string::npos);
  CHECK(msg.find("X-Subscription-Token") != std::string::npos);
  CHECK(msg.find("api_key") != std::string::npos);
  for (const auto& text : {msg, blocked.llm_text}) {
    CHECK(text.find('<') == std::string::npos);
    CHECK(text.find("_cf_chl_opt") == std::string::npos);
    CHECK(text.find("xxxxxxxx") == std::string::npos);
    CHECK(text.find("BSA-secret-key") == std::string::npos);
  }
  CHECK(msg.size() < 600);
  status = 402;
  auto broke = run_tool(*tool, {{"queries", {"r"}}});
  REQUIRE(broke.failure.has_value());
  CHECK(broke.failure->code == sdk::errc::quota);
  CHECK(broke.failure->message.find("(HTTP 402: No credit left.)") != std::string::npos);
  CHECK(broke.failure->message.find("quota or credits") != std::string::npos);
  CHECK(broke.llm_text.find("Brave Search API dashboard") != std::string::npos);
}

} // namespace web_search_brave_test
