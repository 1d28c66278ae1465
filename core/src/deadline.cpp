// Deadline planning of research sessions and agents.

#include "quarry/core/deadline.hpp"

#include <algorithm>

namespace quarry::core {

using std::chrono::milliseconds;

int orchestrator_cycles(int configured, bool reasoning_model) noexcept {
  if (configured > 0)
    return configured;
  return reasoning_model ? 4 : 8;
}

bool final_cycle(int cycle, int max_cycles) noexcept {
  return cycle >= max_cycles - 1;
}

research_deadline::research_deadline(milliseconds deadline, const clock& clk)
  : deadline_(std::max(deadline, milliseconds{0})), clock_(&clk), started_(clk.now()) {
  // nop
}

milliseconds research_deadline::report_margin() const noexcept {
  return std::min<milliseconds>(std::chrono::minutes{2}, deadline_ / 5);
}

milliseconds research_deadline::elapsed() const noexcept {
  return std::chrono::duration_cast<milliseconds>(clock_->now() - started_);
}

double research_deadline::elapsed_seconds() const noexcept {
  return std::chrono::duration<double>(clock_->now() - started_).count();
}

// In milliseconds throughout: no time point is formed from a configured
// duration, so no duration can overflow the clock's finer unit.
milliseconds research_deadline::left() const noexcept {
  return std::max(milliseconds{0}, deadline_ - elapsed());
}

agent_time_limits
research_deadline::agent_limits(const agent_time_limits& configured) const noexcept {
  auto rest = left();
  agent_time_limits out;
  out.force_report_after = std::min(configured.force_report_after, rest);
  constexpr milliseconds grace = std::chrono::seconds{1};
  out.hard_timeout = rest < milliseconds::max() - grace
                       ? std::min(configured.hard_timeout, rest + grace)
                       : configured.hard_timeout;
  return out;
}

agent_deadline::agent_deadline(agent_time_limits limits, const clock& clk)
  : limits_(limits), clock_(&clk), started_(clk.now()) {
  // nop
}

milliseconds agent_deadline::elapsed() const noexcept {
  return std::chrono::duration_cast<milliseconds>(clock_->now() - started_);
}

bool agent_deadline::must_report() const noexcept {
  return elapsed() >= limits_.force_report_after;
}

} // namespace quarry::core
