// Tests of GET /metrics' text (app/serve_metrics_text.hpp) from gathered
// stats, and of adding a histogram's snapshot (core/metrics.hpp).

#include "serve_metrics_text.hpp"

#include "quarry/core/metrics.hpp"

#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>

namespace serve_metrics_test {

using namespace quarry;
using namespace quarry::app;
using nlohmann::json;

namespace {

// The samples of an exposition: `name{labels}` -> value text.
std::map<std::string, std::string> samples_of(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

json llm_stats(std::string provider) {
  return {{"provider", provider},
          {"input_tokens", 120},
          {"output_tokens", 30},
          {"retries", 2},
          {"outcomes", {{"ok", 3}, {"error", 1}, {"cancelled", 0}}},
          {"errors", {{"timeout", 1}}},
          {"call_seconds",
           {{"bounds", {0.5, 1, 5}}, {"counts", {1, 2, 0, 1}}, {"sum", 9.25}, {"count", 4}}}};
}

json tool_stats(std::string tool) {
  return {{"tool", tool},
          {"outcomes", {{"ok", 4}, {"cached", 2}, {"error", 1}, {"timeout", 1}, {"cancelled", 0}}},
          {"errors", {{"timeout", 1}, {"not_found", 1}}},
          {"call_seconds",
           {{"bounds", {0.1, 1}}, {"counts", {3, 1, 1}}, {"sum", 12.5}, {"count", 5}}}};
}

} // namespace

TEST_CASE("serve metrics: a histogram adds a snapshot with the same buckets only") {
  core::metric_histogram h{std::make_shared<const std::vector<double>>(std::vector<double>{1, 2})};
  h.observe(0.5);
  CHECK(h.add({{1, 0, 2}, 7.5, 3}));
  auto s = h.read();
  CHECK(s.counts == std::vector<uint64_t>{2, 0, 2});
  CHECK(s.count == 4);
  CHECK(s.sum == doctest::Approx(8.0));
  // Wrong bucket count, or counts that do not add up to the count.
  CHECK_FALSE(h.add({{1, 0}, 1, 1}));
  CHECK_FALSE(h.add({{1, 0, 0}, 1, 2}));
  CHECK(h.read().count == 4);
}

TEST_CASE("serve metrics: every family is listed with HELP and TYPE, also with nothing gathered") {
  auto text = render_metrics({});
  for (const auto& name : metrics_family_names()) {
    CHECK(text.find("# HELP " + name + " ") != std::string::npos);
    CHECK(text.find("# TYPE " + name + " ") != std::string::npos);
  }
  CHECK(text.find("# TYPE quarry_llm_call_seconds histogram") != std::string::npos);
  CHECK(text.find("# TYPE quarry_sessions gauge") != std::string::npos);
  CHECK(text.find("# TYPE quarry_errors_total counter") != std::string::npos);
}

TEST_CASE("serve metrics: gathered stats become samples") {
  metrics_snapshot snap;
  snap.sessions = {{"running", 1}, {"completed", 4}};
  snap.sessions_running = 1;
  snap.llm_stats = {llm_stats("main"), llm_stats("fast")};
  snap.tool_stats = {tool_stats("web_search")};
  http::server_stats hs;
  hs.open_event_streams = 2;
  hs.responses_by_status = {{200, 10}, {404, 1}};
  snap.http = hs;
  auto m = samples_of(render_metrics(snap));
  CHECK(m["quarry_sessions{state=\"completed\"}"] == "4");
  CHECK(m["quarry_sessions{state=\"running\"}"] == "1");
  CHECK(m["quarry_sessions_running"] == "1");
  CHECK(m["quarry_llm_calls_total{provider=\"main\",outcome=\"ok\"}"] == "3");
  CHECK(m["quarry_llm_calls_total{provider=\"fast\",outcome=\"error\"}"] == "1");
  CHECK(m["quarry_llm_calls_total{provider=\"main\",outcome=\"cancelled\"}"] == "0");
  CHECK(m["quarry_llm_tokens_total{provider=\"main\",direction=\"input\"}"] == "120");
  CHECK(m["quarry_llm_tokens_total{provider=\"main\",direction=\"output\"}"] == "30");
  CHECK(m["quarry_llm_retries_total{provider=\"fast\"}"] == "2");
  // Buckets are cumulative.
  CHECK(m["quarry_llm_call_seconds_bucket{provider=\"main\",le=\"0.5\"}"] == "1");
  CHECK(m["quarry_llm_call_seconds_bucket{provider=\"main\",le=\"1\"}"] == "3");
  CHECK(m["quarry_llm_call_seconds_bucket{provider=\"main\",le=\"+Inf\"}"] == "4");
  CHECK(m["quarry_llm_call_seconds_sum{provider=\"main\"}"] == "9.25");
  CHECK(m["quarry_llm_call_seconds_count{provider=\"main\"}"] == "4");
  CHECK(m["quarry_tool_calls_total{tool=\"web_search\",outcome=\"cached\"}"] == "2");
  CHECK(m["quarry_tool_calls_total{tool=\"web_search\",outcome=\"timeout\"}"] == "1");
  CHECK(m["quarry_tool_call_seconds_count{tool=\"web_search\"}"] == "5");
  CHECK(m["quarry_tool_call_seconds_bucket{tool=\"web_search\",le=\"1\"}"] == "4");
  // Errors of both providers and the tool, by class.
  CHECK(m["quarry_errors_total{class=\"timeout\"}"] == "3");
  CHECK(m["quarry_errors_total{class=\"not_found\"}"] == "1");
  CHECK(m["quarry_http_requests_total{code=\"200\"}"] == "10");
  CHECK(m["quarry_http_requests_total{code=\"404\"}"] == "1");
  CHECK(m["quarry_event_streams"] == "2");
}

TEST_CASE("serve metrics: malformed stats count as nothing and never break the text") {
  metrics_snapshot snap;
  auto broken = llm_stats("main");
  broken["outcomes"]["ok"] = "many";
  broken["input_tokens"] = -5;
  broken["call_seconds"]["counts"] = {1, 1}; // not one per bucket
  snap.llm_stats = {broken, json::array(), json{{"provider", 5}},
                    json{{"provider", "other"}, {"errors", "none"}}};
  auto good = llm_stats("good");
  good["call_seconds"]["bounds"] = {1, 2}; // other buckets than the first
  good["call_seconds"]["counts"] = {1, 1, 1};
  good["call_seconds"]["count"] = 3;
  snap.llm_stats.push_back(good);
  snap.tool_stats = {json{{"tool", std::string(500, 'x')}}, json(nullptr)};
  auto text = render_metrics(snap);
  auto m = samples_of(text);
  CHECK(m["quarry_llm_calls_total{provider=\"main\",outcome=\"ok\"}"] == "0");
  CHECK(m["quarry_llm_calls_total{provider=\"main\",outcome=\"error\"}"] == "1");
  CHECK(m["quarry_llm_tokens_total{provider=\"main\",direction=\"input\"}"] == "0");
  CHECK(m["quarry_llm_calls_total{provider=\"other\",outcome=\"ok\"}"] == "0");
  // Neither histogram matches the buckets (the first well-formed bounds).
  CHECK(m.count("quarry_llm_call_seconds_count{provider=\"main\"}") == 0);
  CHECK(m.count("quarry_llm_call_seconds_count{provider=\"good\"}") == 0);
  CHECK(text.find(std::string(500, 'x')) == std::string::npos);
}

} // namespace serve_metrics_test
