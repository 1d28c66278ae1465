#include "index_progress.hpp"

#include "quarry/sdk/strings.hpp"

#include <cinttypes>
#include <cmath>

namespace quarry::app {

namespace {

std::string megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string duration_text(double seconds) {
  auto s = static_cast<uint64_t>(std::llround(seconds));
  if (s < 60)
    return std::to_string(s) + " s";
  if (s < 3600)
    return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

} // namespace

std::string format_index_progress(const corpus::update_progress& p,
                                  std::chrono::steady_clock::duration elapsed) {
  auto count = [](uint64_t n) { return sdk::digit_groups(static_cast<int64_t>(n)); };
  std::string out = "indexing: " + count(p.files_done) + " of " + count(p.files_total) + " files, "
                    + megabytes(p.bytes_done) + " of " + megabytes(p.bytes_total) + " MB";
  auto seconds = std::chrono::duration<double>(elapsed).count();
  if (p.bytes_done > 0 && seconds > 0) {
    auto rate = static_cast<double>(p.bytes_done) / seconds;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", rate / 1e6);
    out += std::string{", "} + buf + " MB/s";
    if (p.bytes_total > p.bytes_done)
      out += ", about " + duration_text(static_cast<double>(p.bytes_total - p.bytes_done) / rate)
             + " left";
  }
  return out;
}

index_progress_line::index_progress_line(std::FILE* out, std::chrono::milliseconds every,
                                         std::chrono::milliseconds quiet_for)
  : out_(out),
    every_(every),
    quiet_for_(quiet_for),
    start_(std::chrono::steady_clock::now()),
    last_(start_) {
}

std::function<void(const corpus::update_progress&)> index_progress_line::callback() {
  return [this](const corpus::update_progress& p) { draw(p); };
}

void index_progress_line::draw(const corpus::update_progress& p) {
  auto now = std::chrono::steady_clock::now();
  auto last_file = p.files_done == p.files_total;
  if (now - start_ < quiet_for_ || (drawn_ && now - last_ < every_ && !last_file))
    return;
  last_ = now;
  auto line = format_index_progress(p, now - start_);
  // Spaces over what a longer earlier line left.
  auto width = line.size();
  if (width < width_)
    line.append(width_ - width, ' ');
  width_ = width;
  std::fprintf(out_, "\r%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void index_progress_line::finish() {
  if (drawn_) {
    std::fputs("\n", out_);
    std::fflush(out_);
  }
  drawn_ = false;
}

} // namespace quarry::app
