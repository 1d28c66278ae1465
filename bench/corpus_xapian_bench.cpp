// The local-search bench's corpus and queries (corpus_generator.hpp) with
// Xapian instead of SQLite FTS5, to choose the engine by the numbers: build
// rate, size and top-10 latency of BM25 OR queries with one passage per
// document (Xapian's collapse key). Built only when Xapian's headers are
// installed (Debian's libxapian-dev); Quarry itself does not use Xapian.

#include "corpus_generator.hpp"

#include <xapian.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using namespace quarry::bench;

int main(int argc, char** argv) {
  auto passages = arg(argc, argv, "--passages", 100000);
  auto queries = arg(argc, argv, "--queries", 1000);
  // 1: positions (phrase queries, as Quarry's index has); 0: none.
  auto positions = arg(argc, argv, "--positions", 1) != 0;
  const size_t per_file = 10;
  auto dir = fs::temp_directory_path() / ("quarry-xapian-bench-" + std::to_string(::getpid()));
  corpus_generator gen;
  size_t bytes = 0;
  auto t0 = clock_type::now();
  auto c0 = process_cpu_seconds();
  try {
    Xapian::WritableDatabase db(dir.string(), Xapian::DB_CREATE_OR_OVERWRITE | Xapian::DB_NO_SYNC);
    Xapian::TermGenerator terms;
    terms.set_stemmer(Xapian::Stem("english"));
    terms.set_stemming_strategy(Xapian::TermGenerator::STEM_SOME);
    auto files = (passages + per_file - 1) / per_file;
    for (size_t f = 0; f < files; ++f) {
      auto sections = gen.sections(f, per_file, passages);
      // The same bytes as the Markdown file of the FTS5 bench.
      bytes += corpus_generator::markdown(f, sections).size();
      for (const auto& s : sections) {
        Xapian::Document doc;
        terms.set_document(doc);
        if (positions) {
          terms.index_text(s.heading, 2);
          terms.increase_termpos();
          terms.index_text(s.body);
        } else {
          terms.index_text_without_positions(s.heading, 2);
          terms.index_text_without_positions(s.body);
        }
        doc.add_value(0, Xapian::sortable_serialise(static_cast<double>(f)));
        db.add_document(doc);
      }
    }
    db.commit();
  } catch (const Xapian::Error& e) {
    std::fprintf(stderr, "xapian: %s\n", e.get_description().c_str());
    return 1;
  }
  auto build_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto build_cpu = process_cpu_seconds() - c0;
  size_t size = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      size += e.file_size();
  std::vector<double> latencies;
  std::vector<double> cpu_latencies;
  size_t hits = 0;
  try {
    Xapian::Database db(dir.string());
    Xapian::Enquire enquire(db);
    // Quarry's BM25: k1 1.2, b 0.75.
    enquire.set_weighting_scheme(Xapian::BM25Weight(1.2, 0, 1, 0.75, 0.5));
    enquire.set_collapse_key(0);
    Xapian::Stem stem("english");
    for (size_t i = 0; i < queries; ++i) {
      std::vector<Xapian::Query> words;
      for (const auto& w : gen.query())
        words.emplace_back("Z" + stem(w));
      auto q0 = clock_type::now();
      auto qc = thread_cpu_seconds();
      enquire.set_query(Xapian::Query(Xapian::Query::OP_OR, words.begin(), words.end()));
      auto found = enquire.get_mset(0, 10);
      for (auto it = found.begin(); it != found.end(); ++it) {
        // What a hit needs: its document.
        (void)it.get_document().get_value(0);
        ++hits;
      }
      latencies.push_back(std::chrono::duration<double>(clock_type::now() - q0).count() * 1e3);
      cpu_latencies.push_back((thread_cpu_seconds() - qc) * 1e3);
    }
  } catch (const Xapian::Error& e) {
    std::fprintf(stderr, "xapian: %s\n", e.get_description().c_str());
    return 1;
  }
  std::printf("| measure | value |\n|---|---:|\n");
  std::printf("| engine | Xapian %s, positions %s |\n", Xapian::version_string(),
              positions ? "on" : "off");
  std::printf("| passages | %zu |\n", passages);
  std::printf("| text | %.1f MB |\n", static_cast<double>(bytes) / 1e6);
  std::printf("| index build | %.2f s |\n", build_s);
  std::printf("| build rate | %.2f MB/s |\n", static_cast<double>(bytes) / 1e6 / build_s);
  std::printf("| build CPU time (process), rate per CPU second | %.2f s, "
              "%.2f MB/s |\n",
              build_cpu, static_cast<double>(bytes) / 1e6 / build_cpu);
  std::printf("| database size | %.1f MB (%.2fx the text) |\n", static_cast<double>(size) / 1e6,
              static_cast<double>(size) / static_cast<double>(bytes));
  std::printf("| queries, mean hits | %zu, %.1f |\n", queries,
              static_cast<double>(hits) / static_cast<double>(queries));
  std::printf("| query latency p50, p99 | %.2f ms, %.2f ms |\n", percentile(latencies, 0.5),
              percentile(latencies, 0.99));
  std::printf("| query CPU time p50, p99 | %.2f ms, %.2f ms |\n", percentile(cpu_latencies, 0.5),
              percentile(cpu_latencies, 0.99));
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
