// Benchmark of the local corpus index: build rate and query latency on a
// generated corpus (default 100,000 passages of about 1,000 characters).

#include "quarry/corpus/index.hpp"

#include "corpus_generator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace quarry::corpus;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

using namespace quarry::bench;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  auto passages = arg(argc, argv, "--passages", 100000);
  auto queries = arg(argc, argv, "--queries", 1000);
  // --feedback N: pseudo-relevance feedback from the N best documents, as
  // internal_search asks for it (10); 0 (the default): none.
  search_options options;
  options.feedback_documents = static_cast<size_t>(arg(argc, argv, "--feedback", 0));
  const size_t per_file = 10;
  // --dir DIR: work in DIR and keep it; a second run with the same DIR
  // (and --passages) reuses its files and index, to measure queries alone.
  auto given_dir = text_arg(argc, argv, "--dir");
  auto dir = given_dir.empty()
               ? fs::temp_directory_path() / ("quarry-corpus-bench-" + std::to_string(::getpid()))
               : fs::path{given_dir};
  bool reuse = !given_dir.empty() && fs::exists(dir / "docs");
  fs::create_directories(dir / "docs");
  corpus_generator gen;
  // One Markdown file per `per_file` passages: a heading and ~1,000
  // characters per section.
  size_t bytes = 0;
  auto files = (passages + per_file - 1) / per_file;
  for (size_t f = 0; f < files; ++f) {
    auto text = corpus_generator::markdown(f, gen.sections(f, per_file, passages));
    bytes += text.size();
    if (reuse)
      continue;
    std::ofstream out{dir / "docs" / ("doc" + std::to_string(f) + ".md"), std::ios::binary};
    out << text;
  }
  auto opened = corpus_index::open((dir / "corpus.db").string());
  if (opened.failure) {
    std::fprintf(stderr, "open: %s\n", opened.failure->message.c_str());
    return 1;
  }
  auto& index = *opened.index;
  auto t0 = clock_type::now();
  auto c0 = process_cpu_seconds();
  auto built = index.update({(dir / "docs").string()});
  auto build_s = seconds_since(t0);
  auto build_cpu = process_cpu_seconds() - c0;
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
  for (size_t i = 0; i < queries; ++i) {
    std::string q;
    for (const auto& w : gen.query())
      q += w + " ";
    auto q0 = clock_type::now();
    auto qc = thread_cpu_seconds();
    auto r = index.search(q, 10, options);
    latencies.push_back(seconds_since(q0) * 1e3);
    cpu_latencies.push_back((thread_cpu_seconds() - qc) * 1e3);
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
  std::printf("| build CPU time (process), rate per CPU second | %.2f s, %.2f MB/s |\n", build_cpu,
              static_cast<double>(bytes) / 1e6 / build_cpu);
  std::printf("| update with nothing changed | %.3f s (%zu unchanged) |\n", noop_s,
              again.unchanged);
  std::printf("| database size | %.1f MB |\n", static_cast<double>(db_bytes + wal_bytes) / 1e6);
  std::printf("| feedback documents | %zu |\n", options.feedback_documents);
  std::printf("| queries, mean hits, failed | %zu, %.1f, %zu |\n", queries,
              static_cast<double>(hits) / static_cast<double>(queries), failed);
  std::printf("| query latency p50 | %.2f ms |\n", percentile(latencies, 0.5));
  std::printf("| query latency p99 | %.2f ms |\n", percentile(latencies, 0.99));
  std::printf("| query CPU time p50, p99 | %.2f ms, %.2f ms |\n", percentile(cpu_latencies, 0.5),
              percentile(cpu_latencies, 0.99));
  std::printf("| index size / text | %.2f |\n",
              static_cast<double>(db_bytes + wal_bytes) / static_cast<double>(bytes));
  opened.index.reset();
  if (arg(argc, argv, "--keep", 0) != 0 || !given_dir.empty())
    std::printf("kept %s\n", dir.string().c_str());
  else
    fs::remove_all(dir, ec);
  if (reuse)
    return failed == 0 ? 0 : 1;
  return built.passages == passages && failed == 0 ? 0 : 1;
}
