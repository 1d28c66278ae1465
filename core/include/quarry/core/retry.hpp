// Retrying failed LLM calls: full-jitter exponential backoff that honours
// the server's Retry-After, never retries a quota error or an answer that
// has partly streamed, and never waits past the call's deadline; and stall
// detection, an attempt that sent nothing for too long.

#pragma once

#include "quarry/core/clock.hpp"
#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstdint>
#include <functional>

namespace quarry::core {

/// How often and how patiently a failed call is tried again.
struct retry_settings {
  /// Retries after the first attempt, for retryable failures only.
  int max_retries = 4;
  /// First backoff step; doubles per attempt.
  std::chrono::milliseconds base{500};
  /// Largest backoff step.
  std::chrono::milliseconds max{30000};
};

/// What becomes of a failed attempt.
struct retry_decision {
  /// Whether the call is tried again, after `delay`.
  bool retry = false;
  std::chrono::milliseconds delay{0};
  /// The failure as the caller gets it when the call is not retried: a
  /// retryable failure says why it was not ("after 5 attempts", "part of the
  /// answer had already streamed"). An empty message becomes the class's
  /// name.
  sdk::error failure;
};

/// Draws a number uniformly between 0 and `bound` (full jitter);
/// retry_policy clamps what it returns to that range.
using jitter_source = std::function<double(double bound)>;

/// A jitter source from a 64-bit Mersenne Twister seeded with `seed`.
jitter_source seeded_jitter(uint64_t seed = 0x9e3779b97f4a7c15ULL);

/// Decides retries for one provider instance. Not thread-safe: one owner.
class retry_policy {
public:
  explicit retry_policy(retry_settings settings, const clock& clk,
                        jitter_source jitter = seeded_jitter());

  /// The upper bound of the backoff before attempt `attempts + 1`:
  /// `base * 2^(attempts - 1)`, at most `max`.
  std::chrono::milliseconds backoff_bound(int attempts) const;

  /// Decides after attempt number `attempts` (1 for the first) failed with
  /// `failure`. `streamed`: part of the answer already reached the caller.
  /// `deadline`: when the whole call must be over. A retry needs a
  /// retryable class (never errc::quota or errc::cancelled), nothing
  /// streamed, a retry left, and a delay (the jittered backoff, at least the
  /// server's Retry-After) that ends before the deadline.
  retry_decision after_failure(sdk::error failure, int attempts, bool streamed,
                               clock::time_point deadline);

  const retry_settings& settings() const noexcept {
    return settings_;
  }

private:
  retry_settings settings_;
  const clock* clock_;
  jitter_source jitter_;
};

/// Watches one attempt for silence: the attempt stalls when no piece came
/// for `limit`.
class stall_watch {
public:
  explicit stall_watch(std::chrono::milliseconds limit = std::chrono::seconds{60},
                       const clock& clk = real_clock());

  /// The attempt started or a piece arrived: the silence starts again.
  void activity() noexcept;

  /// How long the attempt has been silent.
  std::chrono::milliseconds idle() const noexcept;

  /// Zero when the attempt stalled, else the time left until it would.
  std::chrono::milliseconds remaining() const noexcept;

  bool stalled() const noexcept {
    return remaining().count() == 0;
  }

  /// The failure of a stalled attempt: errc::stall, "no data for 1m" (core::format_duration).
  sdk::error failure() const;

  std::chrono::milliseconds limit() const noexcept {
    return limit_;
  }

private:
  std::chrono::milliseconds limit_;
  const clock* clock_;
  clock::time_point last_;
};

} // namespace quarry::core
