// The calls of one LLM provider instance (or the runs of one tool) waiting to
// start, and when each may: a slot under the concurrency limit and room in
// the rate limits.

#pragma once

#include "quarry/core/clock.hpp"
#include "quarry/core/concurrency.hpp"
#include "quarry/core/rate_limit.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace quarry::core {

/// A first-in, first-out queue of calls (by key, with their estimated
/// tokens) in front of an @ref adaptive_limit and a @ref rate_limiter.
/// A retried call goes back to the front. Without rate limits and without
/// outcomes reported, it is a plain cap of `max_concurrency` (the tool
/// provider's). Not thread-safe: one owner.
class call_queue {
public:
  /// What may happen now.
  struct step {
    /// The call that starts now (it counts as running and has taken its
    /// request and tokens), if any.
    std::optional<uint64_t> start;
    /// Without a start: how long the rate limits hold the first call (zero
    /// when the queue is empty or every slot is taken).
    std::chrono::milliseconds wait{0};
  };

  call_queue(int max_concurrency, double requests_per_minute, double tokens_per_minute,
             const clock& clk);

  /// Adds a new call at the end.
  void push_back(uint64_t key, int64_t tokens);

  /// Adds a call at the front (a retry: it was admitted before).
  void push_front(uint64_t key, int64_t tokens);

  /// Drops a waiting call; false if it was not waiting.
  bool remove(uint64_t key);

  /// Drops every waiting call.
  void clear() noexcept {
    waiting_.clear();
  }

  /// Starts the first waiting call if a slot is free and the rate limits
  /// allow it now. Call again until it starts nothing.
  step next();

  /// A running call ended (done, failed or cancelled): its slot is free.
  void release() noexcept;

  /// The outcome of an attempt, for the adaptive limit.
  void on_rate_limited() noexcept {
    limit_.on_rate_limited();
  }
  void on_success() noexcept {
    limit_.on_success();
  }

  size_t running() const noexcept {
    return running_;
  }
  size_t waiting() const noexcept {
    return waiting_.size();
  }
  const adaptive_limit& limit() const noexcept {
    return limit_;
  }
  rate_limiter& rate() noexcept {
    return rate_;
  }

private:
  adaptive_limit limit_;
  rate_limiter rate_;
  std::deque<std::pair<uint64_t, int64_t>> waiting_;
  size_t running_ = 0;
};

} // namespace quarry::core
