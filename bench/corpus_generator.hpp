// The generated corpus of the local-search benches (quarry_bench_corpus and
// quarry_bench_corpus_xapian): the same files, passages and queries for
// every engine measured.

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <time.h>

namespace quarry::bench {

/// Pseudo-words with a Zipf-like frequency, so that BM25 sees realistic IDFs.
class vocabulary {
public:
  explicit vocabulary(size_t n) : words_(n) {
    std::mt19937 rng{7};
    const char* syllables[] = {"ka",  "lo",  "mi",  "ne",  "ru",  "sa",  "ti",  "vo",
                               "zen", "bar", "qui", "dor", "fel", "gra", "hex", "jor"};
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

/// One section of a generated file: a heading and about 1,000 characters.
struct generated_section {
  std::string heading;
  std::string body;
};

/// The corpus: `passages` sections, `per_file` to a Markdown file.
class corpus_generator {
public:
  corpus_generator() : vocab_(20000), rng_(42), qrng_(99) {
    // nop
  }

  /// The sections of file `f` (at most `per_file`, fewer for the last).
  std::vector<generated_section> sections(size_t f, size_t per_file, size_t passages) {
    std::vector<generated_section> out;
    for (size_t s = 0; s < per_file && f * per_file + s < passages; ++s) {
      generated_section sec;
      sec.heading = "Section " + vocab_.pick(rng_);
      while (sec.body.size() < 1000)
        sec.body += vocab_.pick(rng_) + (rng_() % 12 == 0 ? ".\n" : " ");
      out.push_back(std::move(sec));
    }
    return out;
  }

  /// File `f` as Markdown.
  static std::string markdown(size_t f, const std::vector<generated_section>& sections) {
    std::string text = "# Document " + std::to_string(f) + "\n\n";
    for (const auto& s : sections)
      text += "## " + s.heading + "\n\n" + s.body + "\n\n";
    return text;
  }

  /// The next query: two to four words of middling frequency (the 50th to
  /// 5,050th most frequent), like a typical LLM query.
  std::vector<std::string> query() {
    std::vector<std::string> words;
    auto n = 2 + qrng_() % 3;
    for (size_t k = 0; k < n; ++k)
      words.push_back(vocab_.at(50 + qrng_() % 5000));
    return words;
  }

private:
  vocabulary vocab_;
  std::mt19937 rng_;
  std::mt19937 qrng_;
};

inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(std::ceil(p * static_cast<double>(xs.size())));
  return xs[std::min(xs.size() - 1, i == 0 ? 0 : i - 1)];
}

/// The text after `name` on the command line, or empty.
inline std::string text_arg(int argc, char** argv, const std::string& name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return argv[i + 1];
  return {};
}

inline size_t arg(int argc, char** argv, const std::string& name, size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return static_cast<size_t>(std::strtoull(argv[i + 1], nullptr, 10));
  return fallback;
}

/// CPU time of this process (all threads), in seconds: on a machine shared
/// with other work it varies much less than the wall-clock time.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// CPU time of the calling thread, in seconds.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace quarry::bench
