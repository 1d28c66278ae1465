// What `quarry research` shows while it runs: a live view on a terminal
// (plan, one lane per agent with its current action, sources, time, tokens)
// or plain progress lines otherwise. Fed with the session's packets.

#pragma once

#include "quarry/core/packets.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace quarry::app {

/// Turns packets into progress output on `out` (normally stderr).
class research_view {
public:
  /// `live`: redraw a status block with ANSI escapes (a terminal);
  /// otherwise write one line per event.
  research_view(std::FILE* out, bool live);

  /// Handles one packet.
  void on_packet(const core::packet& p);

  /// Clears the status block (before the report is printed).
  void finish();

  /// Sources seen so far (documents found or read).
  size_t sources() const noexcept {
    return sources_.size();
  }

  /// The plan text as streamed.
  const std::string& plan() const noexcept {
    return plan_;
  }

  /// Renders the status block (for tests and the live view).
  std::vector<std::string> status_lines() const;

private:
  struct lane {
    std::string task;
    std::string action;
    bool done = false;
  };

  void line(const std::string& text);
  void redraw(bool force);

  std::FILE* out_;
  bool live_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_;
  size_t drawn_ = 0;
  std::string plan_;
  bool plan_done_ = false;
  std::map<std::pair<int, int>, lane> lanes_;
  std::set<std::string> sources_;
  int64_t tokens_ = 0;
  std::string phase_ = "planning";
};

} // namespace quarry::app
