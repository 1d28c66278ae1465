// The progress of `quarry eval run` (eval_progress.hpp).

#include "eval_progress.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cmath>

#include <sys/ioctl.h>
#include <unistd.h>

namespace quarry::app::eval {

namespace {

std::string duration_text(double seconds) {
  auto s = static_cast<uint64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60)
    return std::to_string(s) + " s";
  if (s < 3600)
    return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

} // namespace

std::string format_progress(const progress_counts& p, std::chrono::steady_clock::duration elapsed,
                            size_t width) {
  auto finished = p.skipped + p.done;
  auto seconds = std::chrono::duration<double>(elapsed).count();
  std::string tail = " " + std::to_string(finished) + " of " + std::to_string(p.total);
  if (p.skipped > 0)
    tail += " (" + std::to_string(p.skipped) + " earlier)";
  if (p.running > 0)
    tail += ", " + std::to_string(p.running) + " running";
  if (p.failed > 0)
    tail += ", " + std::to_string(p.failed) + " failed";
  tail += ", " + duration_text(seconds);
  auto left = p.total > finished ? p.total - finished : 0;
  if (p.done > 0 && left > 0) {
    // Questions end at this rate with this many at once: the rest go alike.
    auto per_question = seconds / static_cast<double>(p.done);
    tail += ", about " + duration_text(per_question * static_cast<double>(left)) + " left";
  }
  // The bar takes what the text leaves, 10 to 30 columns.
  size_t bar = 30;
  if (width > 0) {
    auto room = width > tail.size() + 7 ? width - tail.size() - 7 : 0;
    bar = std::min<size_t>(30, room);
  }
  std::string out = "eval";
  if (bar >= 10) {
    auto filled = p.total == 0 ? bar : bar * finished / p.total;
    out += " [" + std::string(filled, '#') + std::string(bar - filled, ' ') + "]";
  }
  out += tail;
  if (width > 0 && out.size() > width)
    out.resize(width);
  return out;
}

progress_line::progress_line(std::FILE* out, bool live)
  : out_(out), live_(live), start_(std::chrono::steady_clock::now()), last_(start_) {
}

void progress_line::update(const progress_counts& p, bool force) {
  std::lock_guard<std::mutex> guard{mtx_};
  counts_ = p;
  draw_locked(force);
}

void progress_line::draw_locked(bool force) {
  if (!live_)
    return;
  auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ > 0 && now - last_ < std::chrono::milliseconds{200})
    return;
  last_ = now;
  size_t width = 80;
  winsize ws{};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    width = ws.ws_col;
  // One column short of the width, so the cursor never wraps.
  auto text = format_progress(counts_, now - start_, width > 1 ? width - 1 : width);
  std::fprintf(out_, "\r%s\x1b[K", text.c_str());
  std::fflush(out_);
  drawn_ = text.size();
}

void progress_line::line(const std::string& text) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto clean = sdk::strip_terminal_controls(text);
  if (live_ && drawn_ > 0)
    std::fputs("\r\x1b[K", out_);
  std::fprintf(out_, "%s\n", clean.c_str());
  std::fflush(out_);
  if (live_ && drawn_ > 0)
    draw_locked(true);
}

void progress_line::finish() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (live_ && drawn_ > 0) {
    draw_locked(true);
    std::fputs("\n", out_);
    std::fflush(out_);
  }
  drawn_ = 0;
}

} // namespace quarry::app::eval
