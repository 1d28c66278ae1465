// Search faults handled as well as model faults: the tool provider actor
// retries a search backend's 429 and 503 with the LLM providers' policy
// (core::retry_policy: backoff, at least the server's Retry-After, bounded
// by max_retries and the run's time limit), stops at once when the run's
// requester is gone, and `quarry tool run` shows the short explanation. The
// real SearXNG plugin is loaded from disk and talks to a real HTTP server;
// the 429 page is the field case `searxng-limiter-429`.

#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/config_limits.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

namespace tool_retry_test {

using namespace quarry;
using namespace std::chrono_literals;
using test::response_plan;

namespace {

using steady = std::chrono::steady_clock;

// The limiter's page of the field case.
std::string limiter_page() {
  return test::read_file(std::string{QUARRY_FIXTURES_DIR}
                         + "/../field-cases/searxng-limiter-429/body.html");
}

// A format=json answer with one result.
const char* found_body = R"({"query":"q","results":[{"url":"https://example.org/hp",)"
                         R"("title":"Heat pumps in the cold","content":"They keep )"
                         R"(working below zero."}]})";

// `t` as an HTTP date (RFC 9110, IMF-fixdate).
std::string http_date(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

// A SearXNG instance on 127.0.0.1 whose answers a test scripts, recording
// when each request came.
struct searxng_server {
  test::http_server server;
  std::mutex mtx;
  std::vector<steady::time_point> times;
  // Answers request number n (from 0).
  std::function<response_plan(size_t n)> answer;

  searxng_server() {
    server.route("GET", "/search", [this](const test::request&) {
      size_t n = 0;
      {
        std::lock_guard<std::mutex> guard{mtx};
        n = times.size();
        times.push_back(steady::now());
      }
      return answer(n);
    });
  }

  size_t count() {
    std::lock_guard<std::mutex> guard{mtx};
    return times.size();
  }

  // Time from request `a` to request `b`.
  std::chrono::milliseconds gap(size_t a, size_t b) {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE(b < times.size());
    return std::chrono::duration_cast<std::chrono::milliseconds>(times[b] - times[a]);
  }
};

struct retry_fixture {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  searxng_server searxng;

  retry_fixture() {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    REQUIRE_FALSE(
      registry->load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_searxng.so").has_value());
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~retry_fixture() {
    rt.reset();
    services->shutdown();
  }

  // The web_search tool over the test instance, in a tool provider actor
  // with the limits `keys` (no result cache: every run asks the server).
  actors::tool_provider_actor spawn(nlohmann::json keys) {
    auto made = registry->make_tool("searxng", {{"base_url", searxng.server.url("")}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    keys["cache_ttl"] = 0;
    core::tool_limits limits;
    REQUIRE(core::read_limits(keys, limits).empty());
    auto hdl = actors::spawn_tool_provider(rt->system(), std::get<std::shared_ptr<sdk::tool>>(made),
                                           actors::tool_actor_settings::of("web_search", limits));
    rt->add_stoppable(hdl);
    return hdl;
  }

  static actors::tool_reply run(caf::scoped_actor& self, const actors::tool_provider_actor& hdl,
                                std::string args) {
    actors::tool_reply out;
    self
      ->request(hdl, std::chrono::seconds{60}, actors::run_atom::value,
                actors::tool_call_msg{1, std::move(args)})
      .receive([&](actors::tool_reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  }

  static nlohmann::json stats(caf::scoped_actor& self, const actors::tool_provider_actor& hdl) {
    nlohmann::json out;
    self->request(hdl, std::chrono::seconds{10}, actors::stats_atom::value)
      .receive([&](std::string& s) { out = nlohmann::json::parse(s); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  }
};

} // namespace

TEST_CASE_FIXTURE(retry_fixture, "tool retries: the field case's 429 forever is "
                                 "tried a bounded number of times, then a clear error") {
  auto page = limiter_page();
  searxng.answer = [&](size_t) { return response_plan::text(429, page, "text/html"); };
  auto hdl = spawn({{"max_retries", 2}, {"retry_base", "20ms"}, {"retry_max", "40ms"}});
  caf::scoped_actor self{rt->system()};
  auto started = steady::now();
  auto r = run(self, hdl, R"({"queries": ["heat pump cold climate"]})");
  auto took = steady::now() - started;
  REQUIRE(r.result.failure.has_value());
  const auto& failure = *r.result.failure;
  CAPTURE(failure.message);
  CHECK(failure.code == sdk::errc::rate_limited);
  // One attempt and two retries, no more.
  CHECK(searxng.count() == 3);
  CHECK(took < 10s);
  CHECK(failure.message.find("(after 3 attempts)") != std::string::npos);
  CHECK(failure.message.find("429 Too Many Requests: Rate limit exceeded for this client.")
        != std::string::npos);
  CHECK(failure.message.find("limiter") != std::string::npos);
  CHECK(failure.message.find('<') == std::string::npos);
  // The model reads the short text, the remedy and how often it was tried.
  CAPTURE(r.result.llm_text);
  CHECK(r.result.llm_text.rfind("All web search queries failed.", 0) == 0);
  CHECK(r.result.llm_text.find("Rate limit exceeded for this client.") != std::string::npos);
  CHECK(r.result.llm_text.find('<') == std::string::npos);
  CHECK(r.result.llm_text.find("(The web_search call was tried 3 times.)") != std::string::npos);
  auto s = stats(self, hdl);
  CHECK(s["retries"] == 2);
  CHECK(s["runs"] == 3);
  CHECK(s["outcomes"]["error"] == 1);
  CHECK(s["errors"]["rate_limited"] == 1);
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: a 429 with Retry-After in seconds "
                                 "is honoured, then the search succeeds") {
  auto page = limiter_page();
  searxng.answer = [&](size_t n) {
    if (n == 0)
      return response_plan::text(429, page, "text/html").header("Retry-After", "1");
    return response_plan::json(200, found_body);
  };
  // The backoff alone would wait at most 20 ms: only Retry-After explains
  // a second.
  auto hdl = spawn({{"max_retries", 3}, {"retry_base", "10ms"}, {"retry_max", "20ms"}});
  caf::scoped_actor self{rt->system()};
  auto r = run(self, hdl, R"({"queries": ["heat pump"]})");
  CAPTURE(r.result.llm_text);
  REQUIRE_FALSE(r.result.failure.has_value());
  CHECK(searxng.count() == 2);
  CHECK(searxng.gap(0, 1) >= 950ms);
  REQUIRE(r.result.documents.size() == 1);
  CHECK(r.result.documents[0].url == "https://example.org/hp");
  CHECK(r.result.llm_text.find("Heat pumps in the cold") != std::string::npos);
  CHECK(r.result.llm_text.find("tried") == std::string::npos);
  auto s = stats(self, hdl);
  CHECK(s["retries"] == 1);
  CHECK(s["outcomes"]["ok"] == 1);
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: a 503 with Retry-After as an HTTP "
                                 "date is honoured") {
  searxng.answer = [&](size_t n) {
    if (n == 0)
      return response_plan::text(503,
                                 "<html><head><title>503 Service Unavailable</title>"
                                 "</head><body>busy</body></html>",
                                 "text/html")
        .header("Retry-After", http_date(std::time(nullptr) + 2));
    return response_plan::json(200, found_body);
  };
  auto hdl = spawn({{"max_retries", 3}, {"retry_base", "10ms"}, {"retry_max", "20ms"}});
  caf::scoped_actor self{rt->system()};
  auto r = run(self, hdl, R"({"queries": ["heat pump"]})");
  REQUIRE_FALSE(r.result.failure.has_value());
  CHECK(searxng.count() == 2);
  // The date is two seconds ahead in whole seconds: at least one of them.
  CHECK(searxng.gap(0, 1) >= 900ms);
  CHECK(r.result.documents.size() == 1);
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: a wait past the run's time limit "
                                 "is not taken, and the error says why") {
  searxng.answer = [&](size_t) {
    return response_plan::text(429, limiter_page(), "text/html").header("Retry-After", "600");
  };
  auto hdl = spawn({{"max_retries", 3}, {"retry_base", "10ms"}, {"timeout", "5s"}});
  caf::scoped_actor self{rt->system()};
  auto started = steady::now();
  auto r = run(self, hdl, R"({"queries": ["heat pump"]})");
  CHECK(steady::now() - started < 4s);
  REQUIRE(r.result.failure.has_value());
  CHECK(r.result.failure->code == sdk::errc::rate_limited);
  CHECK(searxng.count() == 1);
  CHECK(r.result.failure->message.find("(not retried: the wait would end after "
                                       "this run's time limit of 5s)")
        != std::string::npos);
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: non-retryable failures are not "
                                 "retried") {
  searxng.answer = [&](size_t) {
    return response_plan::text(403, "<!doctype html><title>403 Forbidden</title>", "text/html");
  };
  auto hdl = spawn({{"max_retries", 3}, {"retry_base", "10ms"}});
  caf::scoped_actor self{rt->system()};
  auto r = run(self, hdl, R"({"queries": ["heat pump"]})");
  REQUIRE(r.result.failure.has_value());
  CHECK(r.result.failure->code == sdk::errc::auth);
  CHECK(searxng.count() == 1);
  CHECK(stats(self, hdl)["retries"] == 0);
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: a run waiting for its retry ends at "
                                 "once when its requester is gone, and asks no more") {
  auto page = limiter_page();
  searxng.answer = [&](size_t) {
    return response_plan::text(429, page, "text/html").header("Retry-After", "2");
  };
  auto hdl = spawn({{"max_retries", 3}, {"retry_base", "10ms"}});
  {
    caf::scoped_actor requester{rt->system()};
    requester->send(hdl, actors::run_atom::value,
                    actors::tool_call_msg{7, R"({"queries": ["heat pump"]})"});
    // The first attempt failed; the run now waits two seconds.
    for (int i = 0; i < 500 && searxng.count() == 0; ++i)
      std::this_thread::sleep_for(10ms);
    REQUIRE(searxng.count() == 1);
    std::this_thread::sleep_for(100ms);
  } // the requester ends here
  caf::scoped_actor self{rt->system()};
  nlohmann::json s;
  for (int i = 0; i < 100; ++i) {
    s = stats(self, hdl);
    if (s["outcomes"]["cancelled"] == 1)
      break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(s["outcomes"]["cancelled"] == 1);
  CHECK(s["active"] == 0);
  CHECK(s["queued"] == 0);
  // Past the Retry-After: no second request.
  std::this_thread::sleep_for(2500ms);
  CHECK(searxng.count() == 1);
  // The actor serves the next run.
  searxng.answer = [&](size_t) { return response_plan::json(200, found_body); };
  auto r = run(self, hdl, R"({"queries": ["another"]})");
  CHECK_FALSE(r.result.failure.has_value());
}

TEST_CASE_FIXTURE(retry_fixture, "tool retries: quarry tool run shows the field "
                                 "case's error short and readable, after the retries") {
  auto page = limiter_page();
  searxng.answer = [&](size_t) { return response_plan::text(429, page, "text/html"); };
  test::temp_dir home;
  std::vector<std::string> argv{QUARRY_EXE,
                                "--plugin-dir",
                                QUARRY_PLUGIN_DIR,
                                "--set",
                                "tools.web_search.plugin=searxng",
                                "--set",
                                "tools.web_search.base_url=" + searxng.server.url(""),
                                "--set",
                                "tools.web_search.limits.max_retries=1",
                                "--set",
                                "tools.web_search.limits.retry_base=10ms",
                                "tool",
                                "run",
                                "web_search",
                                R"({"queries": ["heat pump"]})",
                                "--json"};
  test::process_options opts;
  opts.env = {
    {"HOME", home.path()}, {"XDG_CONFIG_HOME", std::nullopt}, {"QUARRY_CONFIG", std::nullopt}};
  auto res = test::run_process(argv, opts);
  CAPTURE(res.out);
  CAPTURE(res.err);
  CHECK(res.exit_code == 1);
  CHECK(searxng.count() == 2);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["error"]["class"] == "rate_limited");
  auto message = j["error"]["message"].get<std::string>();
  CHECK(message.find("Rate limit exceeded for this client.") != std::string::npos);
  CHECK(message.find("limiter") != std::string::npos);
  CHECK(message.find("(after 2 attempts)") != std::string::npos);
  CHECK(message.find('<') == std::string::npos);
  CHECK(j["llm_text"].get<std::string>().find('<') == std::string::npos);
}

} // namespace tool_retry_test
