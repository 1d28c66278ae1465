// Backoff, retry decisions and stall detection.

#include "quarry/core/retry.hpp"

#include "quarry/core/duration.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

namespace quarry::core {

using std::chrono::milliseconds;

jitter_source seeded_jitter(uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng](double bound) {
    if (!(bound >= 0))
      return 0.0;
    std::uniform_real_distribution<double> jitter{0, bound};
    return jitter(*rng);
  };
}

retry_policy::retry_policy(retry_settings settings, const clock& clk, jitter_source jitter)
  : settings_(settings), clock_(&clk), jitter_(std::move(jitter)) {
  if (!jitter_)
    jitter_ = seeded_jitter();
}

milliseconds retry_policy::backoff_bound(int attempts) const {
  auto base = static_cast<double>(std::max<int64_t>(settings_.base.count(), 0));
  auto max = static_cast<double>(std::max<int64_t>(settings_.max.count(), 0));
  // 2^62 already exceeds any duration; a larger exponent would only risk
  // 0 * infinity.
  auto exponent = std::clamp(attempts - 1, 0, 62);
  auto bound = std::min(max, base * std::pow(2.0, exponent));
  return milliseconds{static_cast<int64_t>(bound)};
}

retry_decision retry_policy::after_failure(sdk::error failure, int attempts, bool streamed,
                                           clock::time_point deadline) {
  retry_decision out;
  auto retryable = failure.retryable();
  if (retryable && !streamed && attempts <= settings_.max_retries) {
    auto bound = static_cast<double>(backoff_bound(attempts).count());
    auto drawn = std::clamp(jitter_(bound), 0.0, bound);
    auto delay = milliseconds{static_cast<int64_t>(drawn)};
    if (failure.retry_after_ms)
      delay = std::max(delay, milliseconds{std::max<int64_t>(*failure.retry_after_ms, 0)});
    // In whole milliseconds (rounded up, so the comparison is exact): a
    // huge Retry-After must not overflow a finer unit.
    if (delay < std::chrono::ceil<milliseconds>(deadline - clock_->now())) {
      out.retry = true;
      out.delay = delay;
      out.failure = std::move(failure);
      return out;
    }
  }
  if (streamed && retryable)
    failure.message += " (not retried: part of the answer had already streamed)";
  else if (retryable && attempts > settings_.max_retries)
    failure.message += " (after " + std::to_string(attempts) + " attempts)";
  if (failure.message.empty())
    failure.message = sdk::to_string(failure.code);
  out.failure = std::move(failure);
  return out;
}

stall_watch::stall_watch(milliseconds limit, const clock& clk)
  : limit_(std::max(limit, milliseconds{0})), clock_(&clk), last_(clk.now()) {
  // nop
}

void stall_watch::activity() noexcept {
  last_ = clock_->now();
}

milliseconds stall_watch::idle() const noexcept {
  return std::max(milliseconds{0}, std::chrono::duration_cast<milliseconds>(clock_->now() - last_));
}

milliseconds stall_watch::remaining() const noexcept {
  return std::max(milliseconds{0}, limit_ - idle());
}

sdk::error stall_watch::failure() const {
  return sdk::make_error(sdk::errc::stall, "no data for " + format_duration(limit_));
}

} // namespace quarry::core
