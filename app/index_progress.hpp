// The progress line of corpus indexing (`quarry index`, and `quarry
// research` when it updates its corpus): files done of the total, bytes,
// rate and time left, redrawn in place on a terminal.

#pragma once

#include "quarry/corpus/index.hpp"

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace quarry::app {

/// One progress line for `p` after `elapsed`, e.g. "indexing: 120 of 10,000
/// files, 3.4 of 103.0 MB, 5.2 MB/s, about 19 s left". The rate and the
/// time left appear once some bytes are done; the time left assumes the
/// rest goes at the rate so far.
std::string format_index_progress(const corpus::update_progress& p,
                                  std::chrono::steady_clock::duration elapsed);

/// A progress callback for corpus::update_options that redraws one line on
/// `out` (a terminal) at most every `every`, and a `finish` that ends it.
/// Prints nothing for an update that ends before `quiet_for` has passed.
class index_progress_line {
public:
  explicit index_progress_line(std::FILE* out,
                               std::chrono::milliseconds every = std::chrono::milliseconds{200},
                               std::chrono::milliseconds quiet_for = std::chrono::milliseconds{
                                 500});

  /// The callback to put into corpus::update_options::progress.
  std::function<void(const corpus::update_progress&)> callback();

  /// Ends the line (a newline) if anything was drawn.
  void finish();

private:
  void draw(const corpus::update_progress& p);

  std::FILE* out_;
  std::chrono::milliseconds every_;
  std::chrono::milliseconds quiet_for_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  size_t width_ = 0;
  bool drawn_ = false;
};

} // namespace quarry::app
