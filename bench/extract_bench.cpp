// Benchmark of the HTML main-content extractor: speed (MB/s on one core) and
// quality (token F1 against the readability fixtures' expected.html).

#include "quarry/extract/html.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// Lower-cased tokens: runs of ASCII letters/digits or non-ASCII bytes.
std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (auto ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      cur += static_cast<char>(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty())
    out.push_back(std::move(cur));
  return out;
}

double f1(const std::string& got, const std::string& want) {
  auto a = tokens(got);
  auto b = tokens(want);
  if (a.empty() && b.empty())
    return 1;
  if (a.empty() || b.empty())
    return 0;
  std::unordered_map<std::string, int> counts;
  for (auto& t : b)
    ++counts[t];
  size_t common = 0;
  for (auto& t : a)
    if (auto i = counts.find(t); i != counts.end() && i->second > 0) {
      --i->second;
      ++common;
    }
  if (common == 0)
    return 0;
  auto p = static_cast<double>(common) / static_cast<double>(a.size());
  auto r = static_cast<double>(common) / static_cast<double>(b.size());
  return 2 * p * r / (p + r);
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  bool verbose = false;
  std::string dir = QUARRY_FIXTURES_DIR "/html/readability";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--verbose") == 0)
      verbose = true;
    else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
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
  double mean = 0;
  for (auto s : scores)
    mean += s;
  mean /= static_cast<double>(scores.size());
  auto sorted = scores;
  std::sort(sorted.begin(), sorted.end());
  auto n = sorted.size();
  double median = n % 2 ? sorted[n / 2]
                        : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  // Speed: every page `rounds` times on this thread.
  size_t bytes = 0;
  for (auto& p : pages)
    bytes += p.source.size();
  size_t sink = 0;
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r)
    for (auto& p : pages)
      sink += ce::extract_html(p.source).text.size();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                            - start)
                .count();
  auto mb = static_cast<double>(bytes) * rounds / 1e6;
  std::printf("pages            %zu (%.1f MB)\n", pages.size(),
              static_cast<double>(bytes) / 1e6);
  std::printf("token F1 mean    %.4f\n", mean);
  std::printf("token F1 median  %.4f\n", median);
  std::printf("speed            %.1f MB/s on one core (%.1f ms/page, %d rounds)\n",
              mb / secs, secs * 1000 / (static_cast<double>(pages.size()) * rounds),
              rounds);
  std::printf("(checksum %zu)\n", sink);
  return 0;
}
