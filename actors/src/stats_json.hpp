// What the provider actors count for `stats_atom`: latency histograms and
// errors by class, as the JSON their stats replies carry (read by the
// /metrics route of `quarry serve`).

#pragma once

#include "quarry/core/clock.hpp"
#include "quarry/core/metrics.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace quarry::actors::detail {

/// Upper bounds (seconds) of an LLM call's duration buckets.
inline std::vector<double> llm_call_seconds_bounds() {
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300};
}

/// Upper bounds (seconds) of a tool run's duration buckets.
inline std::vector<double> tool_call_seconds_bounds() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

/// A latency histogram and errors by class, kept in an actor's state.
class call_stats {
public:
  explicit call_stats(std::vector<double> bounds)
    : seconds_(std::make_unique<core::metric_histogram>(
      std::make_shared<const std::vector<double>>(std::move(bounds)))) {
    // nop
  }

  /// Records the time from `start` to `end` (never negative).
  void observe(core::clock::time_point start, core::clock::time_point end) {
    auto d = end > start ? end - start : core::clock::duration::zero();
    seconds_->observe(std::chrono::duration<double>(d).count());
  }

  /// Counts one failure of class `code`.
  void count_error(sdk::errc code) {
    ++errors_[sdk::to_string(code)];
  }

  /// `{"bounds": [..], "counts": [..] (per bucket, the last one +Inf),
  /// "sum": seconds, "count": n}`.
  nlohmann::json histogram_json() const {
    auto snap = seconds_->read();
    return {{"bounds", seconds_->bounds()},
            {"counts", snap.counts},
            {"sum", snap.sum},
            {"count", snap.count}};
  }

  /// `{"<errc name>": n, ...}`.
  nlohmann::json errors_json() const {
    auto out = nlohmann::json::object();
    for (const auto& [name, n] : errors_)
      out[name] = n;
    return out;
  }

  /// Failures counted so far.
  uint64_t error_count() const {
    uint64_t n = 0;
    for (const auto& [name, k] : errors_)
      n += k;
    return n;
  }

private:
  std::unique_ptr<core::metric_histogram> seconds_;
  std::map<std::string, uint64_t> errors_;
};

} // namespace quarry::actors::detail
