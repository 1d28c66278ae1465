// Token buckets for requests and tokens per minute.

#include "quarry/core/rate_limit.hpp"

#include "quarry/sdk/json.hpp"

#include <algorithm>
#include <cmath>

namespace quarry::core {

int64_t estimate_call_tokens(const sdk::chat_request& request) {
  size_t chars = 0;
  for (const auto& m : request.messages)
    chars += m.content.size() + m.reasoning.size();
  for (const auto& t : request.tools)
    chars += t.description.size() + sdk::dump_json(t.parameters).size();
  return static_cast<int64_t>(chars / 4) + std::max<int64_t>(request.max_tokens, 0);
}

rate_limiter::rate_limiter(double requests_per_minute, double tokens_per_minute, const clock& clk)
  : requests_per_minute_(std::max(0.0, requests_per_minute)),
    tokens_per_minute_(std::max(0.0, tokens_per_minute)),
    clock_(&clk),
    requests_(requests_per_minute_),
    tokens_(tokens_per_minute_),
    last_refill_(clk.now()) {
  // nop
}

void rate_limiter::refill() {
  auto now = clock_->now();
  auto elapsed = std::chrono::duration<double, std::milli>(now - last_refill_).count();
  last_refill_ = now;
  if (elapsed <= 0)
    return;
  if (requests_per_minute_ > 0)
    requests_ = std::min(requests_per_minute_,
                         requests_ + elapsed * requests_per_minute_ / 60000.0);
  if (tokens_per_minute_ > 0)
    tokens_ = std::min(tokens_per_minute_, tokens_ + elapsed * tokens_per_minute_ / 60000.0);
}

std::chrono::milliseconds rate_limiter::wait_for(int64_t tokens) {
  refill();
  double wait_ms = 0;
  if (requests_per_minute_ > 0 && requests_ < 1)
    wait_ms = std::max(wait_ms, (1 - requests_) * 60000.0 / requests_per_minute_);
  if (tokens_per_minute_ > 0) {
    // A call larger than the whole bucket waits for a full bucket.
    auto need = std::min(static_cast<double>(std::max<int64_t>(tokens, 0)), tokens_per_minute_);
    if (tokens_ < need)
      wait_ms = std::max(wait_ms, (need - tokens_) * 60000.0 / tokens_per_minute_);
  }
  // A limit close to zero must not overflow the wait.
  wait_ms = std::min(wait_ms, static_cast<double>(longest_rate_wait.count()));
  return std::chrono::milliseconds{static_cast<int64_t>(std::ceil(wait_ms))};
}

void rate_limiter::consume(int64_t tokens) {
  refill();
  if (requests_per_minute_ > 0)
    requests_ -= 1;
  if (tokens_per_minute_ > 0)
    tokens_ -= std::min(static_cast<double>(std::max<int64_t>(tokens, 0)), tokens_per_minute_);
}

double rate_limiter::requests_available() {
  refill();
  return requests_;
}

double rate_limiter::tokens_available() {
  refill();
  return tokens_;
}

} // namespace quarry::core
