// Deadline planning of a research session: when the agents are told to
// report so that their reports are ready at the deadline, how long each
// agent may research, and how many orchestrator cycles a session has.

#pragma once

#include "quarry/core/clock.hpp"

#include <chrono>

namespace quarry::core {

/// Orchestrator cycles of a session: `configured` if positive, else Onyx's
/// 8 (MAX_ORCHESTRATOR_CYCLES), or 4 for reasoning models.
int orchestrator_cycles(int configured, bool reasoning_model) noexcept;

/// Whether orchestrator cycle `cycle` (counted from 0) must write the final
/// report instead of researching: the last of `max_cycles` cycles is kept
/// for it.
bool final_cycle(int cycle, int max_cycles) noexcept;

/// The time limits of one research agent, counted from its start.
struct agent_time_limits {
  /// After this long the agent stops researching and writes its report.
  std::chrono::milliseconds force_report_after{std::chrono::minutes{12}};
  /// After this long the agent stops, report or not (Onyx's
  /// RESEARCH_AGENT_TIMEOUT_SECONDS, 1800 s); it keeps what it found.
  std::chrono::milliseconds hard_timeout{std::chrono::minutes{30}};
};

/// The deadline of a research session, counted from its construction.
/// Research ends at the deadline; agents are told to report a margin before
/// it (a fifth of the deadline, at most two minutes), and an agent started
/// late gets no more time than is left.
class research_deadline {
public:
  explicit research_deadline(std::chrono::milliseconds deadline = std::chrono::minutes{30},
                             const clock& clk = real_clock());

  /// The deadline, from the start.
  std::chrono::milliseconds deadline() const noexcept {
    return deadline_;
  }

  /// How long before the deadline the agents are told to report.
  std::chrono::milliseconds report_margin() const noexcept;

  /// When, from the start, the agents are told to report (the deadline less
  /// the margin).
  std::chrono::milliseconds report_after() const noexcept {
    return deadline_ - report_margin();
  }

  /// The time since the start.
  std::chrono::milliseconds elapsed() const noexcept;

  /// The same in seconds, as the report's `message_start` states it.
  double elapsed_seconds() const noexcept;

  /// The time left until the deadline (zero once it passed).
  std::chrono::milliseconds left() const noexcept;

  bool passed() const noexcept {
    return left().count() == 0;
  }

  /// The limits of an agent that starts now, given the configured ones: it
  /// must report by the deadline and gives up at most a second after it.
  agent_time_limits agent_limits(const agent_time_limits& configured) const noexcept;

private:
  std::chrono::milliseconds deadline_;
  const clock* clock_;
  clock::time_point started_;
};

/// One research agent's time, counted from its construction.
class agent_deadline {
public:
  explicit agent_deadline(agent_time_limits limits = {}, const clock& clk = real_clock());

  /// Whether the agent must stop researching and write its report.
  bool must_report() const noexcept;

  /// When, from the start, the agent gives up.
  std::chrono::milliseconds hard_timeout() const noexcept {
    return limits_.hard_timeout;
  }

  std::chrono::milliseconds elapsed() const noexcept;

private:
  agent_time_limits limits_;
  const clock* clock_;
  clock::time_point started_;
};

} // namespace quarry::core
