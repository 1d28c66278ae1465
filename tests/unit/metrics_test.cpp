// Tests of the metrics registry (core/metrics.hpp): the exact text format,
// escaping, errors and concurrent updates.

#include "quarry/core/metrics.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace metrics_test {

namespace core = quarry::core;
namespace sdk = quarry::sdk;

namespace {

template <class T>
T* unwrap(std::variant<T*, sdk::error> x) {
  if (auto* err = std::get_if<sdk::error>(&x))
    FAIL(err->message);
  return std::get<T*>(x);
}

} // namespace

TEST_CASE("metrics: counters and gauges render HELP, TYPE and samples exactly") {
  core::metrics_registry reg;
  auto* calls = unwrap(reg.add_counter("quarry_llm_calls_total", "LLM calls made.", {"provider"}));
  auto* streams = unwrap(reg.add_gauge("quarry_event_streams", "Open event streams."));
  auto* tokens = unwrap(
    reg.add_counter("quarry_llm_tokens_total", "Tokens.", {"provider", "direction"}));
  calls->with({"openai"}).inc();
  calls->with({"openai"}).inc(2);
  calls->with({"anthropic"}).inc();
  calls->with({"anthropic"}).inc(-5); // ignored: counters only go up
  streams->with().set(4);
  streams->with().dec();
  tokens->with({"openai", "input"}).inc(1500);
  tokens->with({"openai", "output"}).inc(0.5);
  CHECK(reg.render()
        == "# HELP quarry_llm_calls_total LLM calls made.\n"
           "# TYPE quarry_llm_calls_total counter\n"
           "quarry_llm_calls_total{provider=\"anthropic\"} 1\n"
           "quarry_llm_calls_total{provider=\"openai\"} 3\n"
           "# HELP quarry_event_streams Open event streams.\n"
           "# TYPE quarry_event_streams gauge\n"
           "quarry_event_streams 3\n"
           "# HELP quarry_llm_tokens_total Tokens.\n"
           "# TYPE quarry_llm_tokens_total counter\n"
           "quarry_llm_tokens_total{provider=\"openai\",direction=\"input\"} 1500\n"
           "quarry_llm_tokens_total{provider=\"openai\",direction=\"output\"} 0.5\n");
}

TEST_CASE("metrics: a family without labels shows 0 before its first use") {
  core::metrics_registry reg;
  unwrap(reg.add_counter("quarry_errors_total", "Errors."));
  unwrap(reg.add_counter("quarry_tool_calls_total", "Tool calls.", {"tool"}));
  CHECK(reg.render()
        == "# HELP quarry_errors_total Errors.\n"
           "# TYPE quarry_errors_total counter\n"
           "quarry_errors_total 0\n"
           "# HELP quarry_tool_calls_total Tool calls.\n"
           "# TYPE quarry_tool_calls_total counter\n");
}

TEST_CASE("metrics: label values and help text are escaped") {
  core::metrics_registry reg;
  auto* f = unwrap(reg.add_counter("x_total", "Help with \\ and\nnewline and \"quotes\".", {"v"}));
  f->with({"a\\b\"c\nd"}).inc();
  CHECK(reg.render()
        == "# HELP x_total Help with \\\\ and\\nnewline and \"quotes\".\n"
           "# TYPE x_total counter\n"
           "x_total{v=\"a\\\\b\\\"c\\nd\"} 1\n");
  CHECK(core::escape_label_value("plain") == "plain");
  CHECK(core::escape_label_value("\"") == "\\\"");
  CHECK(core::escape_metric_help("\"") == "\"");
}

TEST_CASE("metrics: missing label values are empty, extra ones dropped") {
  core::metrics_registry reg;
  auto* f = unwrap(reg.add_counter("y_total", "Y.", {"a", "b"}));
  f->with({"1"}).inc();
  f->with({"1", "2", "3"}).inc();
  CHECK(reg.render()
        == "# HELP y_total Y.\n# TYPE y_total counter\n"
           "y_total{a=\"1\",b=\"\"} 1\n"
           "y_total{a=\"1\",b=\"2\"} 1\n");
}

TEST_CASE("metrics: histograms render cumulative buckets, +Inf, sum and count") {
  core::metrics_registry reg;
  auto* h = unwrap(reg.add_histogram("quarry_llm_call_seconds", "LLM call latency.", {"provider"},
                                     {0.25, 0.5, 2.5}));
  auto& o = h->with({"openai"});
  o.observe(0.125);
  o.observe(0.25); // le is inclusive
  o.observe(1);
  o.observe(100);
  CHECK(reg.render()
        == "# HELP quarry_llm_call_seconds LLM call latency.\n"
           "# TYPE quarry_llm_call_seconds histogram\n"
           "quarry_llm_call_seconds_bucket{provider=\"openai\",le=\"0.25\"} 2\n"
           "quarry_llm_call_seconds_bucket{provider=\"openai\",le=\"0.5\"} 2\n"
           "quarry_llm_call_seconds_bucket{provider=\"openai\",le=\"2.5\"} 3\n"
           "quarry_llm_call_seconds_bucket{provider=\"openai\",le=\"+Inf\"} 4\n"
           "quarry_llm_call_seconds_sum{provider=\"openai\"} 101.375\n"
           "quarry_llm_call_seconds_count{provider=\"openai\"} 4\n");
  core::metrics_registry plain;
  auto* p = unwrap(
    plain.add_histogram("t_seconds", "T.", {}, {1, std::numeric_limits<double>::infinity()}));
  p->with().observe(3);
  CHECK(plain.render()
        == "# HELP t_seconds T.\n# TYPE t_seconds histogram\n"
           "t_seconds_bucket{le=\"1\"} 0\n"
           "t_seconds_bucket{le=\"+Inf\"} 1\n"
           "t_seconds_sum 3\n"
           "t_seconds_count 1\n");
}

TEST_CASE("metrics: invalid names and conflicting families are errors") {
  core::metrics_registry reg;
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("1bad", "x")));
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("bad-name", "x")));
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("ok", "x", {"__reserved"})));
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("ok", "x", {"a:b"})));
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("ok", "x", {"a", "a"})));
  CHECK(std::holds_alternative<sdk::error>(reg.add_histogram("h", "x", {"le"}, {1})));
  CHECK(std::holds_alternative<sdk::error>(reg.add_histogram("h", "x", {}, {2, 1})));
  CHECK(std::holds_alternative<sdk::error>(reg.add_histogram("h", "x", {}, {std::nan("")})));
  auto* a = unwrap(reg.add_counter("same_total", "x", {"k"}));
  CHECK(unwrap(reg.add_counter("same_total", "x", {"k"})) == a);
  auto other = reg.add_gauge("same_total", "x", {"k"});
  REQUIRE(std::holds_alternative<sdk::error>(other));
  CHECK(std::get<sdk::error>(other).message.find("same_total") != std::string::npos);
  CHECK(std::holds_alternative<sdk::error>(reg.add_counter("same_total", "x", {"j"})));
}

TEST_CASE("metrics: values are formatted as the text format wants") {
  CHECK(core::format_metric_value(0) == "0");
  CHECK(core::format_metric_value(42) == "42");
  CHECK(core::format_metric_value(-3) == "-3");
  CHECK(core::format_metric_value(0.25) == "0.25");
  CHECK(core::format_metric_value(1e20) == "1e+20");
  CHECK(core::format_metric_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(core::format_metric_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(core::format_metric_value(std::nan("")) == "NaN");
}

TEST_CASE("metrics: concurrent updates from many threads are exact") {
  core::metrics_registry reg;
  auto* c = unwrap(reg.add_counter("c_total", "C.", {"k"}));
  auto* g = unwrap(reg.add_gauge("g", "G."));
  auto* h = unwrap(reg.add_histogram("h_seconds", "H.", {"k"}, {1, 2}));
  constexpr int threads = 8;
  constexpr int per_thread = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        c->with({i % 2 == 0 ? "even" : "odd"}).inc();
        g->with().inc();
        h->with({"x"}).observe(t % 3);
        if (i % 1000 == 0)
          (void)reg.render(); // rendering while others write
      }
    });
  }
  for (auto& t : pool)
    t.join();
  CHECK(c->with({"even"}).value() == threads * per_thread / 2);
  CHECK(c->with({"odd"}).value() == threads * per_thread / 2);
  CHECK(g->with().value() == threads * per_thread);
  auto snap = h->with({"x"}).read();
  CHECK(snap.count == static_cast<uint64_t>(threads * per_thread));
  uint64_t total = 0;
  for (auto n : snap.counts)
    total += n;
  CHECK(total == snap.count);
  auto text = reg.render();
  CHECK(text.find("c_total{k=\"even\"} 80000\n") != std::string::npos);
  CHECK(text.find("g 160000\n") != std::string::npos);
  CHECK(text.find("h_seconds_count{k=\"x\"} 160000\n") != std::string::npos);
}

} // namespace metrics_test
