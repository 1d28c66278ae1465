// Benchmark of the HTML main-content extractor: speed (MB/s on one core) and
// quality (token F1 against the readability fixtures' expected.html), and
// optionally the same F1 for another extractor's output (--score-dir).

#include "quarry/extract/html.hpp"

#include "support/token_f1.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#ifndef QUARRY_FIXTURES_DIR
#  define QUARRY_FIXTURES_DIR "../shared/fixtures"
#endif

namespace ce = quarry::extract;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double f1(const std::string& got, const std::string& want) {
  return quarry::test::token_f1(got, want);
}

double mean_of(const std::vector<double>& xs) {
  double sum = 0;
  for (auto x : xs)
    sum += x;
  return xs.empty() ? 0 : sum / static_cast<double>(xs.size());
}

double median_of(std::vector<double> xs) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

// Speed of the other extractor, from `speed.txt` in its output folder
// ("key value" lines written by bench/readability/compare.mjs); negative when
// absent.
struct other_speed {
  double mb_per_s = -1;
  double pages_per_s = -1;
  double mb_per_cpu_s = -1;
};

other_speed read_other_speed(const fs::path& file) {
  other_speed out;
  std::ifstream in{file};
  std::string key;
  double value = 0;
  while (in >> key >> value) {
    if (key == "mb_per_s")
      out.mb_per_s = value;
    else if (key == "pages_per_s")
      out.pages_per_s = value;
    else if (key == "mb_per_cpu_s")
      out.mb_per_cpu_s = value;
  }
  return out;
}

std::string format_speed(double x) {
  if (x < 0)
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), x < 10 ? "%.2f" : "%.1f", x);
  return buf;
}

// Hostile pages: `depth` nested <div>s (unclosed) around one paragraph, and
// a page of `depth` nested divs repeated until it reaches about the same size
// with every div closed again. Prints the time of each extraction; the time
// must grow linearly with the size.
int run_nested() {
  std::printf("%-34s %10s %10s %10s\n", "page", "bytes", "ms", "MB/s");
  for (size_t depth : {size_t{10000}, size_t{100000}, size_t{400000}}) {
    for (bool closed : {false, true}) {
      std::string html = "<html><body>";
      for (size_t i = 0; i < depth; ++i)
        html += "<div>";
      html += "<p>Heat pumps move heat from a cold place to a warm one.</p>";
      if (closed)
        for (size_t i = 0; i < depth; ++i)
          html += "</div>";
      html += "</body></html>";
      auto start = std::chrono::steady_clock::now();
      auto x = ce::extract_html(html);
      auto ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
      if (x.text.find("Heat pumps") == std::string::npos) {
        std::fprintf(stderr, "nested page lost its text\n");
        return 1;
      }
      auto name = std::to_string(depth) + " nested divs"
                  + (closed ? " (closed)" : " (unclosed)");
      std::printf("%-34s %10zu %10.1f %10.2f\n", name.c_str(), html.size(), ms,
                  static_cast<double>(html.size()) / 1e6 / (ms / 1000));
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--nested") == 0)
      return run_nested();
  int rounds = 5;
  bool verbose = false;
  std::string dir = QUARRY_FIXTURES_DIR "/html/readability";
  // Another extractor's output, one <case>.html per page, scored like ours.
  std::string score_dir;
  std::string score_label = "other";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--verbose") == 0)
      verbose = true;
    else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (std::strcmp(argv[i], "--score-dir") == 0 && i + 1 < argc)
      score_dir = argv[++i];
    else if (std::strcmp(argv[i], "--score-label") == 0 && i + 1 < argc)
      score_label = argv[++i];
  }
  struct page {
    std::string name, source, expected;
  };
  std::vector<page> pages;
  for (auto& entry : fs::directory_iterator{dir}) {
    if (!fs::exists(entry.path() / "source.html"))
      continue;
    pages.push_back({entry.path().filename().string(),
                     read_file(entry.path() / "source.html"),
                     read_file(entry.path() / "expected.html")});
  }
  std::sort(pages.begin(), pages.end(),
            [](const page& a, const page& b) { return a.name < b.name; });
  if (pages.empty()) {
    std::fprintf(stderr, "no pages in %s\n", dir.c_str());
    return 1;
  }
  // Quality.
  std::vector<double> scores;
  for (auto& p : pages) {
    auto got = ce::extract_html(p.source).text;
    auto want = ce::html_to_text(p.expected);
    auto s = f1(got, want);
    scores.push_back(s);
    if (verbose)
      std::printf("%-50s %.3f  got %zu want %zu\n", p.name.c_str(), s,
                  got.size(), want.size());
  }
  auto mean = mean_of(scores);
  auto median = median_of(scores);
  // The other extractor's output: its HTML rendered with html_to_text, exactly
  // like expected.html, then the same F1. A missing file counts as empty.
  std::vector<double> other_scores;
  size_t other_missing = 0;
  if (!score_dir.empty()) {
    for (auto& p : pages) {
      auto file = fs::path{score_dir} / (p.name + ".html");
      std::string html;
      if (fs::exists(file))
        html = read_file(file);
      else
        ++other_missing;
      other_scores.push_back(
        f1(ce::html_to_text(html), ce::html_to_text(p.expected)));
    }
  }
  // Speed: every page `rounds` times on this thread, each round timed.
  size_t bytes = 0;
  for (auto& p : pages)
    bytes += p.source.size();
  size_t sink = 0;
  std::vector<double> round_secs;
  std::vector<double> round_cpu_secs;
  for (int r = 0; r < rounds; ++r) {
    auto cpu_start = std::clock();
    auto start = std::chrono::steady_clock::now();
    for (auto& p : pages)
      sink += ce::extract_html(p.source).text.size();
    round_secs.push_back(std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count());
    round_cpu_secs.push_back(static_cast<double>(std::clock() - cpu_start)
                             / CLOCKS_PER_SEC);
  }
  double secs = 0;
  for (auto x : round_secs)
    secs += x;
  auto mb = static_cast<double>(bytes) * rounds / 1e6;
  std::printf("pages            %zu (%.1f MB)\n", pages.size(),
              static_cast<double>(bytes) / 1e6);
  std::printf("token F1 mean    %.4f\n", mean);
  std::printf("token F1 median  %.4f\n", median);
  std::printf("speed            %.1f MB/s on one core (%.1f ms/page, %d rounds)\n",
              mb / secs, secs * 1000 / (static_cast<double>(pages.size()) * rounds),
              rounds);
  std::printf("(checksum %zu)\n", sink);
  if (score_dir.empty())
    return 0;
  // Side by side with the other extractor.
  std::vector<double> mbps;
  std::vector<double> pps;
  std::vector<double> cpu_mbps;
  for (size_t r = 0; r < round_secs.size(); ++r) {
    mbps.push_back(static_cast<double>(bytes) / 1e6 / round_secs[r]);
    pps.push_back(static_cast<double>(pages.size()) / round_secs[r]);
    cpu_mbps.push_back(static_cast<double>(bytes) / 1e6 / round_cpu_secs[r]);
  }
  std::printf("\nMB/s per round  ");
  for (auto x : mbps)
    std::printf(" %.1f", x);
  std::printf("\nper CPU-second  ");
  for (auto x : cpu_mbps)
    std::printf(" %.1f", x);
  std::printf("\n");
  auto speed = read_other_speed(fs::path{score_dir} / "speed.txt");
  auto our_mbps = median_of(mbps);
  auto our_pps = median_of(pps);
  auto other_mean = mean_of(other_scores);
  auto other_median = median_of(other_scores);
  // Wins and ties per page; a tie is a difference below 0.001.
  size_t wins = 0;
  size_t losses = 0;
  size_t ties = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    auto d = scores[i] - other_scores[i];
    if (d >= 0.001)
      ++wins;
    else if (d <= -0.001)
      ++losses;
    else
      ++ties;
    if (verbose)
      std::printf("%-50s quarry %.3f  %s %.3f\n", pages[i].name.c_str(),
                  scores[i], score_label.c_str(), other_scores[i]);
  }
  std::printf("\ntoken F1 over %zu pages; speed = median of %d rounds on one "
              "thread, by wall clock and per CPU-second of the process\n",
              pages.size(), rounds);
  std::printf("%-14s %8s %10s %11s %13s %9s\n", "extractor", "mean F1",
              "median F1", "MB/s wall", "MB/s per CPU", "pages/s");
  std::printf("%-14s %8.4f %10.4f %11s %13s %9s\n", "quarry", mean, median,
              format_speed(our_mbps).c_str(),
              format_speed(median_of(cpu_mbps)).c_str(),
              format_speed(our_pps).c_str());
  std::printf("%-14s %8.4f %10.4f %11s %13s %9s\n", score_label.c_str(),
              other_mean, other_median, format_speed(speed.mb_per_s).c_str(),
              format_speed(speed.mb_per_cpu_s).c_str(),
              format_speed(speed.pages_per_s).c_str());
  if (other_missing > 0)
    std::printf("(%zu pages had no output file in %s: scored as empty)\n",
                other_missing, score_dir.c_str());
  std::printf("pages won: quarry %zu, %s %zu, ties %zu (difference < 0.001)\n",
              wins, score_label.c_str(), losses, ties);
  if (speed.mb_per_s > 0) {
    auto ratio = our_mbps / speed.mb_per_s;
    // The aim is judged on the smaller of the two ratios.
    auto low = ratio;
    std::printf("speed ratio      %.1fx by wall clock", ratio);
    if (speed.mb_per_cpu_s > 0) {
      auto cpu_ratio = median_of(cpu_mbps) / speed.mb_per_cpu_s;
      low = std::min(low, cpu_ratio);
      std::printf(", %.1fx per CPU-second", cpu_ratio);
    }
    std::printf("\n");
    std::printf("aims             mean F1 >= %s's: %s; median F1 >= %s's: %s; "
                "speed >= 10x: %s\n",
                score_label.c_str(), mean >= other_mean ? "yes" : "no",
                score_label.c_str(), median >= other_median ? "yes" : "no",
                low >= 10 ? "yes" : "no");
  }
  return 0;
}
