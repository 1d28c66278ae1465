// The progress of `quarry eval run`: on a terminal one bar redrawn in place
// (as `quarry index` draws its line), otherwise one line per question that
// ends.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>

namespace quarry::app::eval {

/// Where a run stands.
struct progress_counts {
  /// Questions of the set.
  size_t total = 0;
  /// Completed in an earlier process (skipped by --resume).
  size_t skipped = 0;
  /// Ended in this process: completed, failed (failed ones included in
  /// `done`).
  size_t done = 0;
  size_t failed = 0;
  /// Researching now.
  size_t running = 0;
};

/// The bar line for `p` after `elapsed`, at most `width` columns (0: no
/// limit), e.g. `eval [#########           ] 4 of 10, 2 running, 1 failed,
/// 1 min 3 s, about 2 min left`. The time left appears once a question has
/// ended in this process; it assumes the questions left take as long as
/// those done so far, `running` at a time.
std::string format_progress(const progress_counts& p, std::chrono::steady_clock::duration elapsed,
                            size_t width = 0);

/// Draws the progress on `out`: on a terminal (`live`) one line redrawn in
/// place (`\r`, the rest of an older line cleared), at most every 200 ms
/// unless forced; otherwise nothing but the lines given to line(). Every
/// member is thread-safe.
class progress_line {
public:
  progress_line(std::FILE* out, bool live);

  /// Redraws the bar with `p` (`force`: even if drawn less than 200 ms ago).
  void update(const progress_counts& p, bool force = false);

  /// Prints `text` on a line of its own (above the bar on a terminal, which
  /// is redrawn below it); the text is cleaned of escape sequences and
  /// controls.
  void line(const std::string& text);

  /// Ends the bar's line, if one is drawn.
  void finish();

private:
  void draw_locked(bool force);

  std::mutex mtx_;
  std::FILE* out_;
  bool live_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  progress_counts counts_;
  size_t drawn_ = 0;
};

} // namespace quarry::app::eval
