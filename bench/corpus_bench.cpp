// Benchmark of the local corpus index: build rate and query latency on a
// generated corpus (default 100,000 passages of about 1,000 characters).

#include "quarry/corpus/index.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>

using namespace quarry::corpus;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

// Pseudo-words with a Zipf-like frequency, so that BM25 sees realistic IDFs.
class vocabulary {
public:
  explicit vocabulary(size_t n) : words_(n) {
    std::mt19937 rng{7};
    const char* syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo",
                               "zen", "bar", "qui", "dor", "fel", "gra",
                               "hex", "jor"};
    for (auto& w : words_) {
      auto len = 2 + rng() % 3;
      for (size_t i = 0; i < len; ++i)
        w += syllables[rng() % 16];
    }
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      sum += 1.0 / static_cast<double>(i + 1);
      cdf_.push_back(sum);
    }
    for (auto& x : cdf_)
      x /= sum;
  }

  const std::string& pick(std::mt19937& rng) const {
    auto u = std::uniform_real_distribution<double>{0, 1}(rng);
    auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    auto i = static_cast<size_t>(it - cdf_.begin());
    return words_[std::min(i, words_.size() - 1)];
  }

  const std::string& at(size_t i) const {
    return words_[i % words_.size()];
  }

private:
  std::vector<std::string> words_;
  std::vector<double> cdf_;
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(std::ceil(p * static_cast<double>(xs.size())));
  return xs[std::min(xs.size() - 1, i == 0 ? 0 : i - 1)];
}

size_t arg(int argc, char** argv, const std::string& name, size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return static_cast<size_t>(std::strtoull(argv[i + 1], nullptr, 10));
  return fallback;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// CPU time of this thread, in seconds: on a machine shared with other work
// it varies much less than the wall-clock time.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec)
         + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

int main(int argc, char** argv) {
  auto passages = arg(argc, argv, "--passages", 100000);
  auto queries = arg(argc, argv, "--queries", 1000);
  const size_t per_file = 10;
  auto dir = fs::temp_directory_path()
             / ("quarry-corpus-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir / "docs");
  vocabulary vocab{20000};
  std::mt19937 rng{42};
  // One Markdown file per `per_file` passages: a heading and ~1,000
  // characters per section.
  size_t bytes = 0;
  auto files = (passages + per_file - 1) / per_file;
  for (size_t f = 0; f < files; ++f) {
    std::string text = "# Document " + std::to_string(f) + "\n\n";
    for (size_t s = 0; s < per_file && f * per_file + s < passages; ++s) {
      text += "## Section " + vocab.pick(rng) + "\n\n";
      std::string para;
      while (para.size() < 1000)
        para += vocab.pick(rng) + (rng() % 12 == 0 ? ".\n" : " ");
      text += para + "\n\n";
    }
    bytes += text.size();
    std::ofstream out{dir / "docs" / ("doc" + std::to_string(f) + ".md"),
                      std::ios::binary};
    out << text;
  }
  auto opened = corpus_index::open((dir / "corpus.db").string());
  if (opened.failure) {
    std::fprintf(stderr, "open: %s\n", opened.failure->message.c_str());
    return 1;
  }
  auto& index = *opened.index;
  auto t0 = clock_type::now();
  auto c0 = cpu_seconds();
  auto built = index.update({(dir / "docs").string()});
  auto build_s = seconds_since(t0);
  auto build_cpu = cpu_seconds() - c0;
  if (built.failure) {
    std::fprintf(stderr, "update: %s\n", built.failure->message.c_str());
    return 1;
  }
  t0 = clock_type::now();
  auto again = index.update({(dir / "docs").string()});
  auto noop_s = seconds_since(t0);
  std::vector<double> latencies;
  std::vector<double> cpu_latencies;
  size_t hits = 0;
  size_t failed = 0;
  std::mt19937 qrng{99};
  for (size_t i = 0; i < queries; ++i) {
    // Two to four words of middling frequency, like a typical LLM query.
    std::string q;
    auto n = 2 + qrng() % 3;
    for (size_t k = 0; k < n; ++k)
      q += vocab.at(50 + qrng() % 5000) + " ";
    auto q0 = clock_type::now();
    auto qc = cpu_seconds();
    auto r = index.search(q, 10);
    latencies.push_back(seconds_since(q0) * 1e3);
    cpu_latencies.push_back((cpu_seconds() - qc) * 1e3);
    hits += r.hits.size();
    failed += r.failure ? 1 : 0;
    if (std::getenv("QUARRY_BENCH_DEBUG") != nullptr && r.hits.size() < 10)
      std::fprintf(stderr, "%zu hits: %s %s\n", r.hits.size(), q.c_str(),
                   r.failure ? r.failure->message.c_str() : "");
  }
  std::error_code ec;
  auto db_bytes = fs::file_size(dir / "corpus.db", ec);
  auto wal_bytes = fs::file_size(dir / "corpus.db-wal", ec);
  if (ec)
    wal_bytes = 0;
  std::printf("| measure | value |\n|---|---:|\n");
  std::printf("| files, passages | %zu, %zu |\n", built.added, built.passages);
  std::printf("| text | %.1f MB |\n", static_cast<double>(bytes) / 1e6);
  std::printf("| index build | %.2f s |\n", build_s);
  std::printf("| build rate | %.0f passages/s, %.2f MB/s |\n",
              static_cast<double>(built.passages) / build_s,
              static_cast<double>(bytes) / 1e6 / build_s);
  std::printf("| build CPU time, rate per CPU second | %.2f s, %.2f MB/s |\n",
              build_cpu, static_cast<double>(bytes) / 1e6 / build_cpu);
  std::printf("| update with nothing changed | %.3f s (%zu unchanged) |\n",
              noop_s, again.unchanged);
  std::printf("| database size | %.1f MB |\n",
              static_cast<double>(db_bytes + wal_bytes) / 1e6);
  std::printf("| queries, mean hits, failed | %zu, %.1f, %zu |\n", queries,
              static_cast<double>(hits) / static_cast<double>(queries),
              failed);
  std::printf("| query latency p50 | %.2f ms |\n", percentile(latencies, 0.5));
  std::printf("| query latency p99 | %.2f ms |\n",
              percentile(latencies, 0.99));
  std::printf("| query CPU time p50, p99 | %.2f ms, %.2f ms |\n",
              percentile(cpu_latencies, 0.5), percentile(cpu_latencies, 0.99));
  std::printf("| index size / text | %.2f |\n",
              static_cast<double>(db_bytes + wal_bytes)
                / static_cast<double>(bytes));
  opened.index.reset();
  if (arg(argc, argv, "--keep", 0) != 0)
    std::printf("kept %s\n", dir.string().c_str());
  else
    fs::remove_all(dir, ec);
  return built.passages == passages && failed == 0 ? 0 : 1;
}
