// Adaptive concurrency of an LLM provider instance: the number of calls in
// flight halves on every rate-limit answer and creeps back by additive
// increase as calls succeed.

#pragma once

#include <cstddef>

namespace quarry::core {

/// A concurrency limit between 1 and a ceiling (AIMD). Needs no clock: it
/// moves on outcomes, not on time.
class adaptive_limit {
public:
  /// Starts at `ceiling` (at least 1).
  explicit adaptive_limit(int ceiling = 16);

  /// A rate-limit answer (HTTP 429): the limit halves, never below 1.
  void on_rate_limited() noexcept;

  /// A call succeeded: the limit grows by 1/limit (about one slot per
  /// `limit` successes), never above the ceiling.
  void on_success() noexcept;

  /// How many calls may be in flight now: the limit rounded down, at least 1.
  size_t slots() const noexcept;

  /// The limit as a fraction (for statistics).
  double value() const noexcept {
    return limit_;
  }

  int ceiling() const noexcept {
    return ceiling_;
  }

private:
  int ceiling_;
  double limit_;
};

} // namespace quarry::core
