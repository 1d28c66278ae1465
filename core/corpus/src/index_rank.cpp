// The ranking of the corpus index: BM25 over the positions FTS5 gives, as
// the FTS5 function quarry_collect, and the statistics a
// search reads (passage lengths, document frequencies, the corpus's
// languages), cached until the database changes.

#include "index_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::corpus {

using detail::bm25_b;
using detail::bm25_k1;
using detail::fts5_of;
using detail::heading_weight;
using detail::query_int;
using detail::rank_context;
using detail::rank_lengths;
using detail::statement;
using detail::stem_language;

namespace {

// The BM25 score of the current row of `fts`: FTS5's bm25() with the
// IDFs given (`weight(p)` for phrase p, 0 for a phrase that only selects
// rows) instead of counted (bm25() reads every phrase's whole posting list
// per query to count them) and lengths from rank_lengths: per phrase, tf
// counts its matches (heading ones twice), and the score is the sum of
// w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length)).
//
// Plus a bonus for query words near each other (Büttcher, Clarke and
// Lushman, "Term proximity scoring for ad-hoc retrieval on very large text
// collections", SIGIR 2006): the matches of the phrases with a proximity
// weight `near(p)` > 0 (the query's own words and phrases), in the order
// they occur in each column; each two neighbours of different phrases at a
// distance of d tokens add near(other) / d^2 to the accumulator of each;
// each phrase then adds min(1, near(p)) * acc * (k1 + 1) / (acc + K), with
// K the denominator's length norm above. So each phrase adds less than
// w * (k1 + 1) + min(1, near) * (k1 + 1), the bound that search() prunes
// with. Returns false when the positions cannot be read.
template <class Weight, class Near>
bool passage_score(const Fts5ExtensionApi* api, Fts5Context* fts, rank_context& rc, int n,
                   Weight weight, Near near, double& score) {
  const auto& lengths = rc.lengths;
  auto rowid = api->xRowid(fts);
  auto average = lengths.average;
  auto length = average;
  if (rowid >= 0 && static_cast<uint64_t>(rowid) < lengths.by_id.size())
    length = lengths.by_id[static_cast<size_t>(rowid)];
  auto norm = bm25_k1 * (1 - bm25_b + bm25_b * length / average);
  auto phrases = std::min(api->xPhraseCount(fts), n);
  score = 0;
  auto& hits = rc.hits;
  hits.clear();
  size_t near_phrases = 0;
  for (int p = 0; p < phrases; ++p) {
    double w = weight(p);
    double close = near(p);
    if (!(w > 0) && !(close > 0))
      continue;
    Fts5PhraseIter it;
    int column = 0;
    int offset = 0;
    double tf = 0;
    if (api->xPhraseFirst(fts, p, &it, &column, &offset) != SQLITE_OK)
      return false;
    bool counted = false;
    for (; column >= 0; api->xPhraseNext(fts, &it, &column, &offset)) {
      tf += column == 0 ? heading_weight : 1.0;
      if (close > 0 && hits.size() < detail::max_proximity_hits) {
        hits.push_back({column, offset, p});
        counted = true;
      }
    }
    near_phrases += counted ? 1 : 0;
    if (tf > 0 && w > 0)
      score += w * tf * (bm25_k1 + 1) / (tf + norm);
  }
  if (near_phrases < 2)
    return true;
  std::sort(hits.begin(), hits.end());
  auto& acc = rc.accumulators;
  acc.assign(static_cast<size_t>(phrases), 0.0);
  for (size_t i = 1; i < hits.size(); ++i) {
    const auto& a = hits[i - 1];
    const auto& b = hits[i];
    if (a.column != b.column || a.phrase == b.phrase || b.offset <= a.offset)
      continue;
    auto d = static_cast<double>(b.offset - a.offset);
    acc[static_cast<size_t>(a.phrase)] += near(b.phrase) / (d * d);
    acc[static_cast<size_t>(b.phrase)] += near(a.phrase) / (d * d);
  }
  for (int p = 0; p < phrases; ++p) {
    auto x = acc[static_cast<size_t>(p)];
    if (x > 0)
      score += std::min(1.0, near(p)) * x * (bm25_k1 + 1) / (x + norm);
  }
  return true;
}

// `quarry_collect()`: scores the row with the weights of the active
// top_passages and keeps it there if it is among the best; returns 0, so
// that a query `WHERE fts MATCH ... AND quarry_collect(fts)` yields no
// rows. The best passages are chosen without FTS5's sorter, which costs
// more per row than the score.
void quarry_collect(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* ctx, int,
                    sqlite3_value**) {
  auto* rc = static_cast<rank_context*>(api->xUserData(fts));
  auto* top = rc->top;
  if (top == nullptr) {
    sqlite3_result_error(ctx, "quarry_collect: no query is collecting", -1);
    return;
  }
  if (!top->admits(api->xRowid(fts))) {
    sqlite3_result_int(ctx, 0);
    return;
  }
  double score = 0;
  if (!passage_score(
        api, fts, *rc, static_cast<int>(top->weights.size()),
        [&](int p) { return top->weights[static_cast<size_t>(p)]; },
        [&](int p) {
          auto i = static_cast<size_t>(p);
          return i < top->near.size() ? top->near[i] : 0.0;
        },
        score)) {
    sqlite3_result_error(ctx, "quarry_collect: cannot read positions", -1);
    return;
  }
  top->add(score, api->xRowid(fts));
  sqlite3_result_int(ctx, 0);
}

} // namespace

// Sets up the tokenizer of the index and the ranking function on `db`.
bool corpus_index::search_state::init(sqlite3* db) {
  auto* api = fts5_of(db);
  if (api == nullptr)
    return false;
  void* user = nullptr;
  if (api->xFindTokenizer(api, "quarry", &user, &module) != SQLITE_OK)
    return false;
  if (module.xCreate(user, nullptr, 0, &tokenizer) != SQLITE_OK) {
    tokenizer = nullptr;
    return false;
  }
  return api->xCreateFunction(api, "quarry_collect", &ranking, &quarry_collect, nullptr)
         == SQLITE_OK;
}

// The index terms of `text`, as a MATCH query string is tokenized (at
// most `max_terms`).
std::vector<std::string> corpus_index::search_state::tokens(std::string_view text,
                                                            size_t max_terms) {
  struct collected {
    std::vector<std::string> terms;
    size_t max = 0;
  } out{{}, max_terms};
  auto add = [](void* ctx, int flags, const char* token, int n, int, int) -> int {
    auto* c = static_cast<collected*>(ctx);
    if ((flags & FTS5_TOKEN_COLOCATED) == 0 && c->terms.size() < c->max && n > 0)
      c->terms.emplace_back(token, static_cast<size_t>(n));
    return SQLITE_OK;
  };
  auto size = static_cast<int>(std::min<size_t>(text.size(), INT32_MAX));
  module.xTokenize(tokenizer, &out, FTS5_TOKENIZE_QUERY, text.data(), size, add);
  return std::move(out.terms);
}

std::vector<std::pair<std::string, std::string>>
corpus_index::search_state::token_words(std::string_view text, size_t max_terms) {
  struct collected {
    std::vector<std::pair<std::string, std::string>> terms;
    std::string_view text;
    size_t max = 0;
  } out{{}, text, max_terms};
  auto add = [](void* ctx, int flags, const char* token, int n, int start, int end) -> int {
    auto* c = static_cast<collected*>(ctx);
    if ((flags & FTS5_TOKEN_COLOCATED) == 0 && c->terms.size() < c->max && n > 0 && start >= 0
        && end > start && static_cast<size_t>(end) <= c->text.size())
      c->terms.emplace_back(
        std::string{token, static_cast<size_t>(n)},
        std::string{c->text.substr(static_cast<size_t>(start), static_cast<size_t>(end - start))});
    return SQLITE_OK;
  };
  auto size = static_cast<int>(std::min<size_t>(text.size(), INT32_MAX));
  module.xTokenize(tokenizer, &out, FTS5_TOKENIZE_QUERY, text.data(), size, add);
  return std::move(out.terms);
}

// Drops the cached statistics when another connection (or this one)
// changed the database.
void corpus_index::search_state::check(sqlite3* db) {
  // data_version covers other connections, total_changes this one.
  auto version = query_int(db, "PRAGMA data_version").value_or(-2);
  auto changes = static_cast<int64_t>(sqlite3_total_changes(db));
  if (version == data_version && changes == own_changes)
    return;
  data_version = version;
  own_changes = changes;
  df.clear();
  load_lengths(db);
  // A query word is stemmed in each language of the corpus.
  std::set<std::string> present;
  statement st{db, "SELECT DISTINCT language FROM documents"};
  while (st.ok() && st.step() == SQLITE_ROW)
    present.insert(stem_language(st.text_at(0)));
  languages->query_languages.assign(present.begin(), present.end());
  if (languages->query_languages.empty())
    languages->query_languages.push_back("en");
  // English first: its stem is the one whose frequency counts.
  std::stable_partition(languages->query_languages.begin(), languages->query_languages.end(),
                        [](const std::string& l) { return l == "en"; });
}

// Reads the passages' lengths (and counts them).
void corpus_index::search_state::load_lengths(sqlite3* db) {
  passages = 0;
  lengths.by_id.clear();
  statement st{db, "SELECT id, length + length(CAST(heading AS BLOB)) "
                   "FROM passages"};
  double total = 0;
  while (st.ok() && st.step() == SQLITE_ROW) {
    auto id = st.int_at(0);
    auto length = std::clamp<int64_t>(st.int_at(1), 1, std::numeric_limits<uint32_t>::max());
    // Ids are dense unless many passages were deleted; a sparse table
    // still costs only 4 bytes per id up to the largest.
    if (id < 0 || id > (int64_t{1} << 31))
      continue;
    if (static_cast<size_t>(id) >= lengths.by_id.size())
      lengths.by_id.resize(static_cast<size_t>(id) + 1 + lengths.by_id.size() / 2);
    lengths.by_id[static_cast<size_t>(id)] = static_cast<uint32_t>(length);
    total += static_cast<double>(length);
    ++passages;
  }
  lengths.average = passages > 0 ? total / static_cast<double>(passages) : 1.0;
}

// The number of passages holding `term`: from the terms table for a
// common term, else counted (a rare term has a short list).
int64_t corpus_index::search_state::frequency(sqlite3* db, const std::string& term) {
  if (auto it = df.find(term); it != df.end())
    return it->second;
  int64_t n = 0;
  statement st{db, "SELECT df FROM terms WHERE term=?1"};
  st.bind(1, term);
  if (st.ok() && st.step() == SQLITE_ROW) {
    n = st.int_at(0);
  } else {
    statement count{db, "SELECT doc FROM passages_vocab WHERE term=?1"};
    count.bind(1, term);
    if (count.ok() && count.step() == SQLITE_ROW)
      n = count.int_at(0);
  }
  if (df.size() > 100000)
    df.clear();
  df.emplace(term, n);
  return n;
}

} // namespace quarry::corpus
