// The real and the manual clock.

#include "quarry/core/clock.hpp"

namespace quarry::core {

clock::~clock() = default;

clock::time_point steady_clock::now() const noexcept {
  return std::chrono::steady_clock::now();
}

const clock& real_clock() noexcept {
  static const steady_clock instance;
  return instance;
}

clock::time_point time_after(const clock& clk, std::chrono::milliseconds d) noexcept {
  auto now = clk.now();
  if (d.count() <= 0)
    return now;
  auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now);
  if (d >= room)
    return clock::time_point::max();
  return now + d;
}

clock::time_point manual_clock::now() const noexcept {
  return time_point{duration{ticks_.load(std::memory_order_acquire)}};
}

void manual_clock::advance(duration d) noexcept {
  if (d.count() > 0)
    ticks_.fetch_add(d.count(), std::memory_order_acq_rel);
}

} // namespace quarry::core
