// Rate limits of an LLM provider instance as token buckets: requests per
// minute and tokens per minute (estimated input plus requested output).

#pragma once

#include "quarry/core/clock.hpp"
#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstdint>

namespace quarry::core {

/// An estimate of the tokens a call uses: about four characters per token
/// of every message's text and reasoning and of every tool's description and
/// parameters, plus the output it asks for (`max_tokens`, if positive).
int64_t estimate_call_tokens(const sdk::chat_request& request);

/// The longest wait rate_limiter::wait_for returns (a year), however small
/// the limit.
inline constexpr std::chrono::milliseconds longest_rate_wait{365LL * 24 * 3600 * 1000};

/// Two token buckets that refill continuously from `clock`: one of
/// `requests_per_minute` requests and one of `tokens_per_minute` tokens,
/// both full at the start. A limit of 0 (or less) is no limit.
///
/// A call takes one request and its estimated tokens. A call larger than the
/// whole token bucket waits for a full bucket and then takes all of it, so
/// it runs at last instead of waiting for ever.
class rate_limiter {
public:
  rate_limiter(double requests_per_minute, double tokens_per_minute, const clock& clk);

  /// How long a call of `tokens` estimated tokens must wait before the
  /// buckets hold what it takes (zero: it may start now). Rounded up to
  /// whole milliseconds, at most @ref longest_rate_wait.
  std::chrono::milliseconds wait_for(int64_t tokens);

  /// Takes one request and `tokens` (at most a whole bucket) from the
  /// buckets. The buckets may go below zero; later calls then wait longer.
  void consume(int64_t tokens);

  /// What the buckets hold now.
  double requests_available();
  double tokens_available();

  bool limited() const noexcept {
    return requests_per_minute_ > 0 || tokens_per_minute_ > 0;
  }

private:
  void refill();

  double requests_per_minute_;
  double tokens_per_minute_;
  const clock* clock_;
  double requests_;
  double tokens_;
  clock::time_point last_refill_;
};

} // namespace quarry::core
