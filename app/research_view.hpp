// What `quarry research` shows while it runs: a live view on a terminal
// (plan steps, one lane per agent with its current action, sources, time,
// tokens) or plain progress lines otherwise. Fed with the session's packets.

#pragma once

#include "quarry/core/packets.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace quarry::app {

/// Totals shown in the summary line at the end of a run.
struct research_totals {
  /// Calls a model answered.
  size_t model_calls = 0;
  /// Calls of the offline extractive provider (no model ran).
  size_t offline_calls = 0;
  /// Model calls without a price (their cost is unknown).
  size_t unpriced_calls = 0;
  /// Input and output tokens of the model calls.
  int64_t tokens = 0;
  /// US dollars, of the priced calls.
  double cost_usd = 0;
  size_t sources = 0;
};

/// Turns packets into progress output on `out` (normally stderr). Every
/// member function may be called from any thread. Whatever it prints is
/// cleaned of escape sequences and controls (sdk::strip_terminal_controls),
/// live or not: the plan, tasks, queries, errors and log lines come from
/// models and servers.
class research_view {
public:
  /// `live`: redraw a status block with ANSI escapes (a terminal);
  /// otherwise write one line per event. `width`: the terminal's width in
  /// columns, or 0 to ask the terminal behind `out` at every redraw (so a
  /// resize is picked up).
  research_view(std::FILE* out, bool live, int width = 0);

  /// Stops the clock thread.
  ~research_view();

  research_view(const research_view&) = delete;
  research_view& operator=(const research_view&) = delete;

  /// Handles one packet.
  void on_packet(const core::packet& p);

  /// Prints `text` (one or more lines, cleaned) above the status block, which
  /// is redrawn below it. Log lines go through here while the view is live.
  void print_above(const std::string& text);

  /// Clears the status block, calls `write` (which writes to the same
  /// terminal), then redraws the block below what was written.
  void print_above(const std::function<void()>& write);

  /// Starts redrawing at least twice a second (the clock ticks, a resized
  /// terminal is redrawn). Only for a live view.
  void start_clock();

  /// Clears the status block (before the report is printed) and stops the
  /// clock.
  void finish();

  /// Sources seen so far (documents found or read).
  size_t sources() const;

  /// Totals so far.
  research_totals totals() const;

  /// The plan text as streamed (the orchestrator strategy), or the
  /// reflective strategy's checklist, one `[x] id title` line per step.
  std::string plan() const;

  /// Renders the status block, each line fitted to `width` columns (for
  /// tests and the live view).
  std::vector<std::string> status_lines(size_t width) const;

  /// Cuts `text` to at most `width` columns (code points), ending with "..."
  /// when cut: escape sequences and controls removed, newlines and tabs
  /// turned into spaces.
  static std::string fit(std::string text, size_t width);

private:
  struct lane {
    std::string task;
    std::string action;
    bool done = false;
  };

  void line(const std::string& text);
  void redraw_locked(bool force);
  void clear_locked();
  size_t width_locked() const;

  mutable std::mutex mtx_;
  std::FILE* out_;
  bool live_;
  int fixed_width_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_;
  size_t drawn_ = 0;
  size_t drawn_width_ = 0;
  std::string plan_;
  bool plan_done_ = false;
  /// The reflective strategy's plan as a checklist: status mark, id, title.
  struct check_item {
    std::string status;
    std::string id;
    std::string title;
  };
  std::vector<check_item> checklist_;
  int plan_iteration_ = 0;
  size_t claims_checked_ = 0;
  static std::string check_line(const check_item& c);
  std::string plan_locked() const;
  std::map<std::pair<int, int>, lane> lanes_;
  std::set<std::string> sources_;
  research_totals totals_;
  std::string phase_ = "planning";
  bool finished_ = false;
  std::condition_variable tick_cv_;
  bool stop_clock_ = false;
  std::thread clock_;
};

/// While alive, routes the default logger's lines through a live view, so
/// that they are printed above its status block instead of breaking it.
/// With no view (nullptr) logging is left as it is.
class log_forwarder {
public:
  explicit log_forwarder(research_view* view);

  /// Stops routing through the view.
  ~log_forwarder();

  log_forwarder(const log_forwarder&) = delete;
  log_forwarder& operator=(const log_forwarder&) = delete;

  /// Routes to another view (nullptr: straight to the logger's sinks).
  void set_view(research_view* view);

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

/// Formats the one-line summary left on the terminal at the end of a run:
/// `quarry: done in 83.4 s, 2 model calls, 1.6k tokens, $0.2500, 5 sources;
/// wrote r.md`. The cost is `cost unknown` when no model call had a price,
/// `at least $0.0100 (1 call unpriced)` when some had none; calls of the
/// offline provider follow as `, 3 offline calls`, or, when no model ran at
/// all, replace calls, tokens and cost: `no model (14 offline calls)`.
std::string summary_line(std::chrono::steady_clock::duration elapsed, const research_totals& totals,
                         const std::vector<std::string>& files);

} // namespace quarry::app
