// Where Quarry's policies read the time: an interface, the real steady clock,
// and a manual clock for tests that moves only when told. Rate limits,
// retries, stall detection and deadlines take a `const clock&`, so a test can
// step through minutes of policy without waiting a second.

#pragma once

#include <atomic>
#include <chrono>

namespace quarry::core {

/// A source of the current time on a monotonic time line.
class clock {
public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~clock();

  /// The current time; never goes back.
  virtual time_point now() const noexcept = 0;
};

/// `std::chrono::steady_clock`.
class steady_clock final : public clock {
public:
  time_point now() const noexcept override;
};

/// The process's one steady clock; lives as long as the program.
const clock& real_clock() noexcept;

/// The time `d` after `clk.now()` (now itself for a negative `d`), at most
/// the largest time point: a deadline however far away never wraps around.
clock::time_point time_after(const clock& clk, std::chrono::milliseconds d) noexcept;

/// A clock that moves only when told (for tests). Reading and moving it from
/// different threads is safe.
class manual_clock final : public clock {
public:
  /// Starts at `start` (by default an arbitrary point one hour after the
  /// clock's epoch, so that subtracting small durations stays positive).
  explicit manual_clock(time_point start = time_point{} + std::chrono::hours{1})
    : ticks_(start.time_since_epoch().count()) {
    // nop
  }

  time_point now() const noexcept override;

  /// Moves the clock forward by `d` (a negative `d` is ignored: the clock
  /// never goes back).
  void advance(duration d) noexcept;

private:
  std::atomic<duration::rep> ticks_;
};

} // namespace quarry::core
