// The field case `searxng-limiter-429` (../shared/field-cases): SearXNG's
// limiter refuses the client with an HTTP 429 HTML page. The plugin, loaded
// from disk, must tell the host and the model in a few readable words what
// happened and what to do, never in markup; the retries themselves are the
// tool actor's (tests/integration/tool_retry_test.cpp).

#include "searxng_search.hpp"

#include "../../web_search_common/tests/search_test_support.hpp"

#include <doctest/doctest.h>

namespace searxng_limiter_test {

using namespace quarry;
using json = nlohmann::json;
using test::request;
using test::response_plan;
using test::run_tool;

namespace {

// The limiter's page, as the field case has it.
std::string limiter_page() {
  return test::read_file(std::string{QUARRY_FIXTURES_DIR}
                         + "/../field-cases/searxng-limiter-429/body.html");
}

} // namespace

TEST_CASE("searxng field case: the limiter's 429 page becomes a short readable "
          "error with the remedy") {
  auto page = limiter_page();
  REQUIRE(page.find("<title>429 Too Many Requests</title>") != std::string::npos);
  test::module_fixture module{"quarry_searxng.so"};
  test::search_env env;
  env.serve("GET", "/search",
            [&](const request&) { return response_plan::text(429, page, "text/html"); });
  auto tool = module.tool("searxng", {{"base_url", env.server.url("")}});
  auto result = run_tool(*tool, {{"queries", {"heat pump", "cold climate"}}});
  REQUIRE(result.failure.has_value());
  CHECK(result.failure->code == sdk::errc::rate_limited);
  CHECK(result.failure->http_status == 429);
  CHECK(result.failure->retryable());
  CHECK(env.requests().size() == 2);
  const auto& msg = result.failure->message;
  CAPTURE(msg);
  // The page's words, not its markup.
  CHECK(msg.find("429 Too Many Requests: Rate limit exceeded for this client.")
        != std::string::npos);
  CHECK(msg.find('<') == std::string::npos);
  CHECK(msg.find("DOCTYPE") == std::string::npos);
  // What to do.
  CHECK(msg.find("limiter") != std::string::npos);
  CHECK(msg.find("your own instance") != std::string::npos);
  CHECK(msg.find("limiter: false") != std::string::npos);
  CHECK(msg.size() < 600);
  // What the model reads: the words once (the second query failed the same
  // way), short, no markup.
  CHECK(result.llm_text.rfind("All web search queries failed.", 0) == 0);
  CHECK(result.llm_text.find('<') == std::string::npos);
  CHECK(result.llm_text.find("Rate limit exceeded for this client.") != std::string::npos);
  CHECK(result.llm_text.find("limiter") != std::string::npos);
  auto failures = json::parse(result.llm_text.substr(result.llm_text.find('\n') + 1));
  REQUIRE(failures.size() == 2);
  auto first = failures["heat pump"].get<std::string>();
  CHECK(first.rfind("rate_limited (HTTP 429): SearXNG refused the request: too "
                    "many requests (HTTP 429: 429 Too Many Requests: Rate limit "
                    "exceeded for this client.). The SearXNG instance's limiter "
                    "refused this client",
                    0)
        == 0);
  CHECK(first.size() < 600);
  CHECK(failures["cold climate"] == "the same error as for \"heat pump\"");
  CHECK(result.llm_text.size() < 800);
  module.services->shutdown();
}

TEST_CASE("searxng: a 503 HTML page and a 403 get their own short explanations") {
  test::search_env env;
  int status = 503;
  env.serve("GET", "/search", [&](const request&) {
    if (status == 503)
      return response_plan::text(
               503,
               "<html><head><title>503 Service Temporarily Unavailable</title></head>"
               "<body><center><h1>503 Service Temporarily Unavailable</h1></center>"
               "<hr><center>nginx</center></body></html>",
               "text/html")
        .header("Retry-After", "Wed, 21 Oct 2037 07:28:00 GMT");
    return response_plan::text(403, "<!doctype html><title>403 Forbidden</title>", "text/html");
  });
  auto tool = plugins::web_search_searxng::make_tool(env.host, {{"base_url", env.server.url("")}});
  auto overloaded = run_tool(*tool, {{"queries", {"x"}}});
  REQUIRE(overloaded.failure.has_value());
  CHECK(overloaded.failure->code == sdk::errc::overloaded);
  // The HTTP date is read as a wait (far away: a retry will not honour it).
  REQUIRE(overloaded.failure->retry_after_ms.has_value());
  CHECK(*overloaded.failure->retry_after_ms > 86400000LL);
  CHECK(overloaded.failure->message
        == "all web search queries failed: SearXNG answered HTTP 503: 503 "
           "Service Temporarily Unavailable: nginx");
  status = 403;
  auto forbidden = run_tool(*tool, {{"queries", {"y"}}});
  REQUIRE(forbidden.failure.has_value());
  CHECK(forbidden.failure->code == sdk::errc::auth);
  CHECK(forbidden.failure->message.find("(HTTP 403: 403 Forbidden)") != std::string::npos);
  CHECK(forbidden.failure->message.find("search.formats") != std::string::npos);
  CHECK(forbidden.llm_text.find("format=json") != std::string::npos);
  CHECK(forbidden.llm_text.find('<') == std::string::npos);
}

} // namespace searxng_limiter_test
