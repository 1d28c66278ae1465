// quarry_bench_retrieval: the local corpus search measured against judged
// relevance. The documents of an IR test collection (Cranfield 1400 from the
// fixtures by default: 1,400 aeronautics abstracts, 225 queries, Cleverdon's
// graded judgments) are written to a folder as Markdown files (`# title`,
// then the text) and indexed as `quarry index` does; each query is run
// through the `internal_search` tool, loaded from the plugin folder as
// `quarry` loads it, with `max_results` at the measuring depth. Beside it, a
// plain BM25 over whole documents computed here on the index's own tokens
// (corpus_index::terms: the same words and Snowball stems; English stop
// words dropped from documents and queries, as the search drops them from
// queries). Prints nDCG@10, MAP@100 and recall@100 of both (trec_eval's
// definitions, gains 4 to 1 for Cleverdon's codes 1 to 4) and the search's
// time per query.
//
// Usage: quarry_bench_retrieval [--collection DIR] [--plugin-dir DIR]
//        [--k 10] [--depth 100] [--k1 0.9] [--b 0.4] [--runs DIR]
//        [--fb-docs 10] [--fb-terms 10] [--fb-keep 0.5]
// --collection: a folder with cran.all.1400, cran.qry and cranqrel.
// --runs: also write the rankings as TREC run files (internal_search.run,
//   bm25.run, bm25_rm3.run) and the judgments as qrels.txt, for trec_eval or
//   ir_measures.
// --fb-*: the reference row of BM25 with RM3 pseudo-relevance feedback:
//   feedback documents, expansion terms, the original query's share.

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/language.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/core/settings.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/tool.hpp"

#include "support/ir_collection.hpp"
#include "support/process.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace quarry;
namespace ir = quarry::test::ir;
using clock_type = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "quarry_bench_retrieval: %s\n", what.c_str());
  std::exit(1);
}

// The collection's document id of a result: the stem of its file name.
int id_of_url(const std::string& url) {
  auto slash = url.rfind('/');
  auto name = url.substr(slash == std::string::npos ? 0 : slash + 1);
  auto dot = name.find('.');
  auto stem = name.substr(0, dot);
  if (stem.empty() || stem.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return std::stoi(stem);
}

// The index's terms of `text` without English stop words.
std::vector<std::string> content_terms(corpus::corpus_index& index, const std::string& text) {
  auto terms = index.terms(text, SIZE_MAX);
  terms.erase(std::remove_if(terms.begin(), terms.end(),
                             [](const std::string& t) { return corpus::is_stop_word("en", t); }),
              terms.end());
  return terms;
}

// The terms of a query as the search reads it: its words without stop
// words (all of them if that leaves none), each tokenized by the index.
std::vector<std::string> query_terms(corpus::corpus_index& index, const std::string& text) {
  auto words = corpus::parse_search_query(text, 1000).words;
  std::vector<std::string> kept;
  for (const auto& w : words)
    if (!corpus::is_stop_word("en", corpus::fold_case(w)))
      kept.push_back(w);
  if (kept.empty())
    kept = words;
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& w : kept)
    for (auto& t : index.terms(w, 16))
      if (seen.insert(t).second)
        out.push_back(std::move(t));
  return out;
}

// Okapi BM25 over whole documents (Lucene's idf: log(1 + (N - df + 0.5) /
// (df + 0.5))).
class bm25 {
public:
  bm25(double k1, double b) : k1_(k1), b_(b) {
  }

  void add(int id, const std::vector<std::string>& terms) {
    index_[id] = docs_.size();
    auto& doc = docs_.emplace_back();
    doc.id = id;
    doc.length = terms.size();
    for (const auto& t : terms)
      ++doc.tf[t];
    for (const auto& [t, n] : doc.tf)
      ++df_[t];
    total_length_ += terms.size();
  }

  /// The best `depth` documents for `terms` (each weighing 1), best first
  /// (ties by id), with their scores.
  std::vector<std::pair<double, int>> rank(const std::vector<std::string>& terms,
                                           size_t depth) const {
    std::map<std::string, double> weighted;
    for (const auto& t : terms)
      weighted[t] = 1;
    return rank(weighted, depth);
  }

  /// The same with a weight per term.
  std::vector<std::pair<double, int>> rank(const std::map<std::string, double>& terms,
                                           size_t depth) const {
    auto n = static_cast<double>(docs_.size());
    auto avg = docs_.empty() ? 1.0 : static_cast<double>(total_length_) / n;
    std::vector<std::pair<double, int>> scored;
    for (const auto& doc : docs_) {
      double score = 0;
      for (const auto& [t, weight] : terms) {
        auto f = doc.tf.find(t);
        if (f == doc.tf.end())
          continue;
        auto df = static_cast<double>(df_.at(t));
        auto idf = std::log(1 + (n - df + 0.5) / (df + 0.5));
        auto tf = static_cast<double>(f->second);
        auto norm = k1_ * (1 - b_ + b_ * static_cast<double>(doc.length) / avg);
        score += weight * idf * tf * (k1_ + 1) / (tf + norm);
      }
      if (score > 0)
        scored.emplace_back(score, doc.id);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    if (scored.size() > depth)
      scored.resize(depth);
    return scored;
  }

  /// RM3 pseudo-relevance feedback (Lavrenko and Croft's relevance model,
  /// interpolated with the query as in Anserini: `docs` feedback documents,
  /// `count` expansion terms, the query's own share `keep`): the first
  /// ranking's best documents, their terms weighed by frequency in each
  /// document times its score, the best terms mixed with the query.
  std::vector<std::pair<double, int>> rank_rm3(const std::vector<std::string>& terms, size_t depth,
                                               size_t docs, size_t count, double keep) const {
    auto first = rank(terms, docs);
    std::map<std::string, double> model;
    for (const auto& [score, id] : first) {
      const auto& doc = docs_[index_.at(id)];
      if (doc.length == 0)
        continue;
      for (const auto& [t, tf] : doc.tf)
        model[t] += score * static_cast<double>(tf) / static_cast<double>(doc.length);
    }
    std::vector<std::pair<double, std::string>> best;
    for (const auto& [t, w] : model)
      best.emplace_back(w, t);
    std::sort(best.begin(), best.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    if (best.size() > count)
      best.resize(count);
    double sum = 0;
    for (const auto& b : best)
      sum += b.first;
    std::map<std::string, double> mixed;
    std::set<std::string> unique(terms.begin(), terms.end());
    for (const auto& t : unique)
      mixed[t] += keep / static_cast<double>(unique.size());
    for (const auto& [w, t] : best)
      mixed[t] += (1 - keep) * (sum > 0 ? w / sum : 0);
    return rank(mixed, depth);
  }

private:
  struct doc_terms {
    int id = 0;
    size_t length = 0;
    std::unordered_map<std::string, int> tf;
  };
  double k1_;
  double b_;
  std::vector<doc_terms> docs_;
  std::unordered_map<std::string, int> df_;
  std::unordered_map<int, size_t> index_;
  size_t total_length_ = 0;
};

struct totals {
  double ndcg = 0;
  double map = 0;
  double recall = 0;
  size_t queries = 0;

  void add(const ir::measures& m) {
    ndcg += m.ndcg;
    map += m.average_precision;
    recall += m.recall;
    ++queries;
  }

  double mean(double sum) const {
    return queries == 0 ? 0 : sum / static_cast<double>(queries);
  }
};

void write_run(const std::string& path, const std::string& name,
               const std::map<int, std::vector<int>>& rankings) {
  std::ofstream out{path};
  for (const auto& [q, ids] : rankings)
    for (size_t i = 0; i < ids.size(); ++i)
      out << q << " Q0 " << ids[i] << ' ' << i + 1 << ' ' << (ids.size() - i) << ' ' << name
          << '\n';
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  return xs[static_cast<size_t>(p * static_cast<double>(xs.size() - 1))];
}

} // namespace

int main(int argc, char** argv) {
  std::string collection = std::string{QUARRY_FIXTURES_DIR} + "/ir/cranfield";
  std::string plugin_dir = QUARRY_PLUGIN_DIR;
  std::string runs;
  size_t k = 10;
  size_t depth = 100;
  double k1 = 0.9;
  double b = 0.4;
  // RM3's settings: Anserini's defaults.
  size_t fb_docs = 10;
  size_t fb_terms = 10;
  double fb_keep = 0.5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc)
      fail("missing value for " + arg);
    std::string value = argv[++i];
    if (arg == "--collection")
      collection = value;
    else if (arg == "--plugin-dir")
      plugin_dir = value;
    else if (arg == "--runs")
      runs = value;
    else if (arg == "--k")
      k = std::stoul(value);
    else if (arg == "--depth")
      depth = std::stoul(value);
    else if (arg == "--k1")
      k1 = std::stod(value);
    else if (arg == "--b")
      b = std::stod(value);
    else if (arg == "--fb-docs")
      fb_docs = std::stoul(value);
    else if (arg == "--fb-terms")
      fb_terms = std::stoul(value);
    else if (arg == "--fb-keep")
      fb_keep = std::stod(value);
    else
      fail("unknown option " + arg);
  }
  if (k == 0 || depth == 0 || depth > 100)
    fail("--k must be at least 1 and --depth 1 to 100 (internal_search's largest max_results)");

  std::string why;
  auto docs = ir::read_documents(slurp(collection + "/cran.all.1400"), why);
  if (!docs)
    fail("cran.all.1400: " + why);
  auto queries = ir::read_queries(slurp(collection + "/cran.qry"), why);
  if (!queries)
    fail("cran.qry: " + why);
  auto judged = ir::read_cleverdon_judgments(slurp(collection + "/cranqrel"), why);
  if (!judged)
    fail("cranqrel: " + why);

  // The documents as Markdown files, indexed as `quarry index` does.
  test::temp_dir tmp;
  auto folder = tmp.file("documents");
  std::filesystem::create_directories(folder);
  for (const auto& d : *docs) {
    std::ofstream out{folder + "/" + std::to_string(d.id) + ".md", std::ios::binary};
    if (!d.title.empty())
      out << "# " << d.title << "\n\n";
    out << d.text << '\n';
  }
  auto db = tmp.file("corpus.db");
  auto opened = corpus::corpus_index::open(db);
  if (!opened.index)
    fail("cannot open the index: " + opened.failure->message);
  auto& index = *opened.index;
  auto t0 = clock_type::now();
  auto updated = index.update({folder});
  auto index_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (updated.failure)
    fail("indexing failed: " + updated.failure->message);
  auto [indexed_docs, passages] = index.size();

  // internal_search as a research agent reaches it: the plugin from disk.
  core::settings cfg;
  cfg.runtime.data_dir = tmp.file("data");
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  registry.load_directories({plugin_dir});
  auto made = registry.make_tool("local_corpus", {{"db", db}, {"max_results", depth}});
  if (auto* err = std::get_if<std::string>(&made))
    fail("local_corpus: " + *err);
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);

  std::map<int, std::vector<int>> searched;
  std::vector<double> query_ms;
  for (const auto& q : *queries) {
    std::promise<sdk::tool_result> done;
    auto answer = done.get_future();
    auto q0 = clock_type::now();
    auto run = tool->run(nlohmann::json{{"queries", nlohmann::json::array({q.text})}},
                         [&done](sdk::tool_result r) { done.set_value(std::move(r)); });
    auto result = answer.get();
    query_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - q0).count());
    if (result.failure)
      fail("query " + std::to_string(q.number) + ": " + result.failure->message);
    auto& ids = searched[q.number];
    for (const auto& d : result.documents)
      if (auto id = id_of_url(d.url); id > 0)
        ids.push_back(id);
  }

  // Plain BM25 on the same tokens.
  bm25 plain{k1, b};
  for (const auto& d : *docs) {
    auto stored = index.find_document(folder + "/" + std::to_string(d.id) + ".md");
    if (!stored)
      fail("document " + std::to_string(d.id) + " is not in the index");
    plain.add(d.id, content_terms(index, stored->text));
  }
  auto ids = [](const std::vector<std::pair<double, int>>& scored) {
    std::vector<int> out;
    for (const auto& s : scored)
      out.push_back(s.second);
    return out;
  };
  std::map<int, std::vector<int>> ranked;
  std::map<int, std::vector<int>> expanded;
  for (const auto& q : *queries) {
    auto terms = query_terms(index, q.text);
    ranked[q.number] = ids(plain.rank(terms, depth));
    expanded[q.number] = ids(plain.rank_rm3(terms, depth, fb_docs, fb_terms, fb_keep));
  }

  totals tool_totals;
  totals plain_totals;
  totals rm3_totals;
  static const std::map<int, int> nothing;
  for (const auto& q : *queries) {
    auto j = judged->find(q.number);
    const auto& relevant = j == judged->end() ? nothing : j->second;
    if (relevant.empty())
      continue; // a query without relevant documents measures nothing
    tool_totals.add(ir::measure(searched[q.number], relevant, k, depth));
    plain_totals.add(ir::measure(ranked[q.number], relevant, k, depth));
    rm3_totals.add(ir::measure(expanded[q.number], relevant, k, depth));
  }

  if (!runs.empty()) {
    std::filesystem::create_directories(runs);
    write_run(runs + "/internal_search.run", "internal_search", searched);
    write_run(runs + "/bm25.run", "bm25", ranked);
    write_run(runs + "/bm25_rm3.run", "bm25_rm3", expanded);
    std::ofstream qrels{runs + "/qrels.txt"};
    for (const auto& [q, docs_of] : *judged)
      for (const auto& [id, gain] : docs_of)
        qrels << q << " 0 " << id << ' ' << gain << '\n';
  }

  std::printf("collection %s: %zu documents (%zu passages, indexed in %.2f s), %zu queries, "
              "%zu with judged relevant documents\n",
              std::filesystem::path{collection}.filename().string().c_str(), indexed_docs, passages,
              index_s, queries->size(), tool_totals.queries);
  std::printf("| ranking | nDCG@%zu | MAP@%zu | recall@%zu |\n|---|---:|---:|---:|\n", k, depth,
              depth);
  auto row = [&](const char* name, const totals& t) {
    std::printf("| %s | %.4f | %.4f | %.4f |\n", name, t.mean(t.ndcg), t.mean(t.map),
                t.mean(t.recall));
  };
  row("internal_search (the tool)", tool_totals);
  char label[96];
  std::snprintf(label, sizeof label, "plain BM25 (k1 %.2g, b %.2g), the index's tokens", k1, b);
  row(label, plain_totals);
  std::snprintf(label, sizeof label, "plain BM25 + RM3 (%zu documents, %zu terms, the query %.2g)",
                fb_docs, fb_terms, fb_keep);
  row(label, rm3_totals);
  auto change = [](double x, double y) { return y > 0 ? (x / y - 1) * 100 : 0.0; };
  auto against = [&](const char* name, const totals& t) {
    std::printf("| %s against plain BM25 | %+.1f %% | %+.1f %% | %+.1f %% |\n", name,
                change(t.ndcg, plain_totals.ndcg), change(t.map, plain_totals.map),
                change(t.recall, plain_totals.recall));
  };
  against("internal_search", tool_totals);
  against("BM25 + RM3", rm3_totals);
  std::printf("internal_search per query (the tool's whole run, %zu results): p50 %.2f ms, p99 "
              "%.2f ms\n",
              depth, percentile(query_ms, 0.5), percentile(query_ms, 0.99));
  services.shutdown();
  return 0;
}
