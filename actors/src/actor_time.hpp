// The actor system's clock as the clock of core's policies.

#pragma once

#include "quarry/core/clock.hpp"

#include <caf/actor_clock.hpp>

namespace quarry::actors::detail {

/// Reads the time from the clock of an actor's own actor system, so that an
/// actor's policies (rate limits, retries, stalls, deadlines) and its timers
/// read one time line. In production that is the steady clock; under CAF's
/// deterministic test coordinator it is virtual time, which moves only when
/// a test advances it. Until it is given a clock it reads core's steady clock.
class actor_time final : public core::clock {
public:
  actor_time() noexcept = default;

  explicit actor_time(caf::actor_clock& clk) noexcept : clk_(&clk) {
    // nop
  }

  time_point now() const noexcept override {
    return clk_ != nullptr ? clk_->now() : core::real_clock().now();
  }

private:
  caf::actor_clock* clk_ = nullptr;
};

} // namespace quarry::actors::detail
