// Searching the corpus index: the query's words and phrases weighed by
// their IDF, the best passages ranked by BM25 with a bonus for the query's
// words near each other and top-k pruning (MaxScore), a bonus for documents
// whose titles hold the query's words, pseudo-relevance feedback (RM3), and
// the best passage of each document read back with a snippet.

#include "index_internal.hpp"

#include "quarry/corpus/language.hpp"
#include "quarry/corpus/text.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::corpus {

using detail::bm25_k1;
using detail::db_error;
using detail::statement;
using detail::top_passages;

namespace {

// A query unit in a document's title adds its IDF times this to the score
// of the document's best passage (a title is short: no saturation), so that
// a document about X ranks above passages that mention X in passing. A unit
// in more than max_title_df titles is too common to count: it would cost a
// long list and weigh little.
constexpr double title_weight = 1.0;
constexpr size_t max_title_df = 1000;

// The words of a feedback passage that are read (a passage is at most about
// 2,000 characters: some 400 words).
constexpr size_t max_feedback_tokens = 2048;
// At most this many feedback documents and added words (more would only
// cost time: RM3 is tuned at 10 and 10).
constexpr size_t max_feedback_documents = 100;
constexpr size_t max_feedback_terms = 100;
// Added words in this share of the passages or more are left out.
constexpr double max_feedback_df_share = 0.5;

} // namespace

// -- querying -----------------------------------------------------------------

std::vector<std::string> corpus_index::terms(std::string_view text, size_t max_terms) {
  std::lock_guard<std::mutex> guard{mtx_};
  state_->check(db_);
  return state_->tokens(text, max_terms);
}

search_result corpus_index::search(const std::string& query, size_t limit,
                                   const search_options& options) {
  std::lock_guard<std::mutex> guard{mtx_};
  search_result result;
  auto parsed = parse_search_query(query);
  if (limit == 0)
    return result;
  // The stop words of the query's language carry nothing a search needs
  // ("how does X do Y"): they are dropped, unless that leaves nothing.
  // (Phrases keep theirs.)
  {
    auto language = detect_language(query, 1);
    if (language.empty())
      language = "en";
    std::vector<std::string> kept;
    for (const auto& w : parsed.words)
      if (!is_stop_word(language, fold_case(w)))
        kept.push_back(w);
    if (!kept.empty() || !parsed.phrases.empty())
      parsed.words = std::move(kept);
  }
  auto& state = *state_;
  state.check(db_);
  auto n = static_cast<double>(std::max<int64_t>(state.passages, 1));
  // The units of the query: each word and each phrase, one FTS5 phrase
  // each (a quoted string, which FTS5 tokenizes as the index was), with
  // its IDF.
  struct unit {
    std::string match;
    // Its tokens, each followed by a space.
    std::string key;
    double idf = 0;
    int64_t df = 0;
    bool expansion = false;
    // The proximity weight (passage_score): the IDF of a unit of the
    // query, 0 for a word feedback added.
    double near = 0;
  };
  // The most a unit adds to a passage's score: BM25's bound plus the
  // proximity bonus's (passage_score).
  auto bound = [](const unit& u) { return (u.idf + std::min(1.0, u.near)) * (bm25_k1 + 1); };
  std::vector<unit> required;
  std::vector<unit> optional;
  std::set<std::string> seen_units;
  auto add_unit = [&](const std::vector<std::string>& words, bool must) {
    std::string text;
    for (const auto& w : words)
      text += (text.empty() ? "" : " ") + w;
    auto tokens = state.tokens(text);
    if (tokens.empty())
      return;
    std::string key;
    for (const auto& t : tokens)
      key += t + ' ';
    if (!seen_units.insert(key).second)
      return;
    unit u;
    u.match = '"' + text + '"';
    u.key = key;
    // A phrase is at most as frequent as its rarest word.
    u.df = std::numeric_limits<int64_t>::max();
    for (const auto& t : tokens)
      u.df = std::min(u.df, state.frequency(db_, t));
    auto df = static_cast<double>(u.df);
    u.idf = std::max(std::log((n - df + 0.5) / (df + 0.5)), 1e-6);
    u.near = u.idf;
    (must ? required : optional).push_back(std::move(u));
  };
  for (const auto& p : parsed.phrases)
    add_unit(p, true);
  for (const auto& w : parsed.words)
    add_unit({w}, false);
  if (required.empty() && optional.empty())
    return result;
  // One unit has no neighbours to be near.
  if (required.size() + optional.size() < 2) {
    for (auto& u : required)
      u.near = 0;
    for (auto& u : optional)
      u.near = 0;
  }
  // The words for the snippets.
  auto terms = parsed.words;
  for (const auto& p : parsed.phrases)
    terms.insert(terms.end(), p.begin(), p.end());
  struct candidate {
    int64_t document = 0;
    int64_t passage = 0;
    double score = 0; // positive: higher is better
  };
  // quarry_collect keeps the best passages as the statement runs through
  // the rows the expression matches (the statement yields none); the best
  // passage of each document counts. When the top k passages hold fewer
  // than the documents wanted, look deeper. A path filter is a list of the
  // passage ids it allows, which quarry_collect checks before scoring.
  statement rank{db_, R"sql(
    SELECT count(*) FROM passages_fts
    WHERE passages_fts MATCH ?1 AND quarry_collect(passages_fts))sql"};
  statement info{db_, R"sql(
    SELECT p.document_id, p.start, p.length, p.heading, d.path, d.title,
           d.date, d.date_source, d.language
    FROM passages p JOIN documents d ON d.id = p.document_id
    WHERE p.id = ?1)sql"};
  if (!rank.ok() || !info.ok()) {
    result.failure = db_error(db_, "cannot prepare the search");
    return result;
  }
  // The passages of the documents whose path holds every filter's text, as
  // ranges of ids (a document's passages have consecutive ids: write_batch
  // inserts them in one run under the write lock).
  std::vector<std::pair<int64_t, int64_t>> allowed;
  bool filtered = !parsed.paths.empty();
  if (filtered) {
    statement within_paths{db_, R"sql(
      SELECT min(p.id), max(p.id) FROM passages p
      JOIN documents d ON d.id = p.document_id
      WHERE instr(d.path, ?1) > 0 AND instr(d.path, ?2) > 0
        AND instr(d.path, ?3) > 0 AND instr(d.path, ?4) > 0
      GROUP BY p.document_id ORDER BY 1)sql"};
    if (!within_paths.ok()) {
      result.failure = db_error(db_, "cannot prepare the search");
      return result;
    }
    for (size_t i = 0; i < 4; ++i)
      within_paths.bind(static_cast<int>(1 + i), i < parsed.paths.size()
                                                   ? std::string_view{parsed.paths[i]}
                                                   : std::string_view{""});
    int rc = SQLITE_ROW;
    while ((rc = within_paths.step()) == SQLITE_ROW)
      allowed.emplace_back(within_paths.int_at(0), within_paths.int_at(1));
    if (rc != SQLITE_DONE) {
      result.failure = db_error(db_, "search failed");
      return result;
    }
    if (allowed.empty())
      return result;
  }
  auto fail = [&] {
    result.failure = db_error(db_, "search failed");
    return result;
  };
  // Reads passage `passage` of `document`: its row into `info` and its text
  // (only its bytes of the document's text) into `text`, empty if that
  // cannot be read. False when the passage is gone.
  auto read_passage = [&](int64_t passage, int64_t document, std::string& text) {
    info.reset();
    info.bind(1, passage);
    if (info.step() != SQLITE_ROW)
      return false;
    auto start = info.int_at(1);
    auto length = info.int_at(2);
    text.clear();
    sqlite3_blob* blob = nullptr;
    if (start >= 0 && length >= 0
        && sqlite3_blob_open(db_, "main", "documents", "body", document, 0, &blob) == SQLITE_OK
        && start + length <= sqlite3_blob_bytes(blob)) {
      text.resize(static_cast<size_t>(length));
      if (sqlite3_blob_read(blob, text.data(), static_cast<int>(length), static_cast<int>(start))
          != SQLITE_OK)
        text.clear();
    }
    sqlite3_blob_close(blob);
    return true;
  };
  // Ranks the units into `candidates`, at most `want` documents: the best
  // passage of each, plus its title bonus. False when the database failed.
  std::vector<candidate> candidates;
  auto rank_units = [&](size_t want) -> bool {
    candidates.clear();
    // Rarest first.
    std::sort(optional.begin(), optional.end(),
              [](const unit& a, const unit& b) { return a.idf > b.idf; });
    auto all = required;
    all.insert(all.end(), optional.begin(), optional.end());
    // Top-k pruning (MaxScore): only passages with one of the `essential`
    // rarest units are ranked, which is exact as long as the best documents
    // found score more than a passage with all the other units could (each
    // adds at most `bound`); else the next unit becomes essential.
    // Required phrases (quoted) make every phrase essential instead.
    //
    // The first essential units: the rarest, and more while the others could
    // outscore a passage with one match of the rarest (the check below would
    // fail).
    size_t essential = 0;
    if (required.empty()) {
      double rest = 0;
      for (const auto& u : optional)
        rest += bound(u);
      while (essential < optional.size() && (essential == 0 || rest >= optional[0].idf * 1.5)) {
        rest -= bound(optional[essential]);
        ++essential;
      }
    }
    constexpr size_t max_depth = 1 << 14;
    size_t depth = std::max<size_t>(want * 4, 32);
    // The best passages found (passage id, score).
    std::vector<std::pair<int64_t, double>> ranked;
    // Any of the units: the expression that ranks them.
    std::string any;
    for (size_t i = 0; i < all.size(); ++i)
      any += (i == 0 ? "" : " OR ") + all[i].match;
    // The top `k` passages of the rows `match` matches (its first
    // `selecting` phrases only select rows and weigh nothing), of those
    // whose id is in [lo, hi] when given; the number of rows seen, or
    // nothing when the database failed.
    auto collect = [&](statement& st, const std::string& match, size_t selecting, size_t k,
                       std::optional<std::pair<int64_t, int64_t>> range) {
      top_passages top;
      top.k = k;
      top.weights.assign(selecting, 0.0);
      top.near.assign(selecting, 0.0);
      for (const auto& u : all) {
        top.weights.push_back(u.idf);
        top.near.push_back(u.near);
      }
      if (filtered)
        top.allowed = &allowed;
      st.reset();
      st.bind(1, match);
      if (range) {
        st.bind(2, range->first);
        st.bind(3, range->second);
      }
      state.ranking.top = &top;
      auto rc = st.step();
      state.ranking.top = nullptr;
      if (rc != SQLITE_ROW)
        return std::pair<std::optional<size_t>, top_passages>{std::nullopt, std::move(top)};
      return std::pair<std::optional<size_t>, top_passages>{std::min(top.matched, k),
                                                            std::move(top)};
    };
    // Ranks the top `depth` passages of the rows `select` (or all rows when
    // empty) selects, made of `selecting` phrases, into `ranked`.
    auto run = [&](const std::string& select, size_t selecting) {
      auto match = select.empty() ? any : "(" + select + ") AND (" + any + ")";
      auto [rows, top] = collect(rank, match, selecting, depth, std::nullopt);
      if (rows)
        for (const auto& [score, id] : top.heap)
          ranked.emplace_back(id, -score);
      return rows;
    };
    // Units [from, to) OR'ed (or AND'ed, for required phrases).
    auto group = [&](const std::vector<unit>& units, size_t from, size_t to, const char* op) {
      std::string out;
      for (size_t i = from; i < to; ++i)
        out += (i == from ? "" : op) + units[i].match;
      return out;
    };
    // Whether the last run reached `depth` (there may be more rows).
    bool truncated = false;
    // The title bonus of each document whose title holds a unit.
    std::map<int64_t, double> title_bonus;
    {
      statement titles{db_, "SELECT rowid FROM titles_fts WHERE titles_fts "
                            "MATCH ?1 LIMIT ?2"};
      if (!titles.ok())
        return false;
      std::vector<int64_t> ids;
      for (const auto& u : all) {
        if (u.expansion)
          continue;
        ids.clear();
        titles.reset();
        titles.bind(1, u.match);
        titles.bind(2, static_cast<int64_t>(max_title_df + 1));
        int rc = SQLITE_ROW;
        while ((rc = titles.step()) == SQLITE_ROW)
          ids.push_back(titles.int_at(0));
        if (rc != SQLITE_DONE)
          return false;
        if (ids.size() > max_title_df)
          continue;
        for (auto id : ids)
          title_bonus[id] += title_weight * u.idf;
      }
    }
    // The documents with the largest bonuses (at most `want`) are ranked
    // whatever their passages hold: their best passages, in `title_best`
    // (document, passage, score). Any other document's bonus is at most
    // `title_rest`.
    std::vector<std::pair<int64_t, double>> title_docs(title_bonus.begin(), title_bonus.end());
    std::stable_sort(title_docs.begin(), title_docs.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    double title_rest = title_docs.size() > want ? title_docs[want].second : 0;
    double top_bonus = title_docs.empty() ? 0 : title_docs.front().second;
    if (title_docs.size() > want)
      title_docs.resize(want);
    std::vector<candidate> title_best;
    if (!title_docs.empty()) {
      // A document's passages have consecutive ids (write_batch inserts them
      // in one run under the write lock).
      statement range{db_, "SELECT min(p.id), max(p.id), d.path FROM passages p "
                           "JOIN documents d ON d.id = p.document_id "
                           "WHERE p.document_id=?1"};
      statement within{db_, R"sql(
        SELECT count(*) FROM passages_fts
        WHERE passages_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3
          AND quarry_collect(passages_fts))sql"};
      if (!range.ok() || !within.ok())
        return false;
      auto match = required.empty()
                     ? any
                     : "(" + group(required, 0, required.size(), " AND ") + ") AND (" + any + ")";
      for (const auto& [doc, bonus] : title_docs) {
        range.reset();
        range.bind(1, doc);
        if (range.step() != SQLITE_ROW || sqlite3_column_type(range.get(), 0) == SQLITE_NULL)
          continue; // no passages
        auto lo = range.int_at(0);
        auto hi = range.int_at(1);
        auto path = range.text_at(2);
        bool passes = std::all_of(parsed.paths.begin(), parsed.paths.end(),
                                  [&](const std::string& part) {
                                    return path.find(part) != std::string::npos;
                                  });
        if (!passes)
          continue;
        auto [rows, best] = collect(within, match, required.size(), 1, std::pair{lo, hi});
        if (!rows)
          return false;
        if (!best.heap.empty())
          title_best.push_back({doc, best.heap.front().second, best.heap.front().first + bonus});
        else if (required.empty()) // the title alone matches
          title_best.push_back({doc, lo, bonus});
      }
    }
    // Ranks from scratch: the rows of every required phrase, or of any of
    // the essential units.
    auto rank_all = [&] {
      ranked.clear();
      std::optional<size_t> rows;
      if (!required.empty())
        rows = run(group(required, 0, required.size(), " AND "), required.size());
      else if (essential >= optional.size())
        rows = run({}, 0);
      else
        rows = run(group(optional, 0, essential, " OR "), essential);
      truncated = rows && *rows == depth;
      return rows.has_value();
    };
    if (!rank_all())
      return false;
    for (;;) {
      // Best first; the best passage of each document counts, plus the
      // document's title bonus.
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
      if (ranked.size() > depth)
        ranked.resize(depth);
      candidates = title_best;
      std::set<int64_t> seen;
      for (const auto& c : title_best)
        seen.insert(c.document);
      // The `want`-th best score of the candidates so far, worked out again
      // only after a candidate was added.
      std::vector<double> scores;
      double kth_cached = 0;
      bool kth_known = false;
      auto kth_score = [&] {
        if (kth_known)
          return kth_cached;
        kth_known = true;
        kth_cached = -std::numeric_limits<double>::infinity();
        if (candidates.size() >= want) {
          scores.clear();
          for (const auto& c : candidates)
            scores.push_back(c.score);
          std::nth_element(scores.begin(), scores.begin() + static_cast<long>(want - 1),
                           scores.end(), std::greater<>{});
          kth_cached = scores[want - 1];
        }
        return kth_cached;
      };
      size_t from_ranked = 0;
      for (const auto& [id, score] : ranked) {
        // Later passages score less: done when even the largest bonus
        // cannot lift one into the top `want`.
        if (from_ranked >= want && -score + top_bonus <= kth_score())
          break;
        info.reset();
        info.bind(1, id);
        if (info.step() != SQLITE_ROW)
          continue;
        auto doc = info.int_at(0);
        if (!seen.insert(doc).second)
          continue;
        ++from_ranked;
        auto bonus = title_bonus.find(doc);
        candidates.push_back(
          {doc, id, -score + (bonus == title_bonus.end() ? 0.0 : bonus->second)});
        kth_known = false;
      }
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const candidate& a, const candidate& b) { return a.score > b.score; });
      if (candidates.size() > want)
        candidates.resize(want);
      if (from_ranked < want && truncated && depth < max_depth) {
        depth *= 4;
        if (!rank_all())
          return false;
        continue;
      }
      if (!required.empty() || essential >= optional.size())
        break;
      // A document not ranked yet holds no essential unit: its passages
      // score at most `rest`, its title at most `title_rest`.
      double rest = 0;
      for (size_t i = essential; i < optional.size(); ++i)
        rest += bound(optional[i]);
      double kth = candidates.size() >= want ? candidates[want - 1].score : 0;
      if (kth > rest + title_rest)
        break;
      // Not sure yet: the next unit becomes essential, and only its rows
      // without an essential unit (the others are ranked already) are added.
      auto next = optional[essential].match + " NOT (" + group(optional, 0, essential, " OR ")
                  + ")";
      auto rows = run(next, essential + 1);
      if (!rows)
        return false;
      truncated = truncated || *rows == depth;
      ++essential;
    }
    if (candidates.size() > want)
      candidates.resize(want);
    return true;
  };
  auto feedback_documents = std::min(options.feedback_documents, max_feedback_documents);
  bool feedback = feedback_documents > 0 && options.feedback_terms > 0;
  if (!rank_units(feedback ? std::max(limit, feedback_documents) : limit))
    return fail();
  if (feedback && !candidates.empty()) {
    // RM3 (Lavrenko and Croft's relevance model, mixed with the query as
    // Anserini mixes it): the words of the best passages of the first
    // ranking's best documents, each weighed by its share of its passage
    // times the passage's score; the best of them join the query.
    struct feedback_term {
      double weight = 0;
      std::string word; // a word of the passages that gives the term
    };
    std::map<std::string, feedback_term> model;
    std::string text;
    size_t used = 0;
    for (const auto& c : candidates) {
      if (used == feedback_documents)
        break;
      ++used;
      if (!read_passage(c.passage, c.document, text) || text.empty())
        continue;
      auto language = info.text_at(8);
      if (language.empty())
        language = "en";
      auto words = state.token_words(text, max_feedback_tokens);
      std::vector<const std::pair<std::string, std::string>*> kept;
      for (const auto& tw : words)
        if (tw.first.size() >= 2 && tw.second.find('"') == std::string::npos
            && !is_stop_word(language, fold_case(tw.second)))
          kept.push_back(&tw);
      if (kept.empty() || c.score <= 0)
        continue;
      auto share = c.score / static_cast<double>(kept.size());
      for (const auto* tw : kept) {
        auto& t = model[tw->first];
        t.weight += share;
        if (t.word.empty())
          t.word = tw->second;
      }
    }
    std::vector<std::pair<double, std::string>> chosen;
    for (const auto& [token, t] : model)
      chosen.emplace_back(t.weight, token);
    std::sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    if (chosen.size() > std::min(options.feedback_terms, max_feedback_terms))
      chosen.resize(std::min(options.feedback_terms, max_feedback_terms));
    double sum = 0;
    for (const auto& c : chosen)
      sum += c.first;
    if (sum > 0 && options.query_share < 1) {
      // Weights scaled so that a word of the query alone weighs 1 (the
      // ranking is the same at any scale; the title bonus and the pruning
      // bounds scale with the units' weights).
      auto keep = std::max(options.query_share, 0.05);
      auto scale = (1 - keep) / keep * static_cast<double>(required.size() + optional.size());
      std::map<std::string, size_t> by_key;
      for (size_t i = 0; i < optional.size(); ++i)
        by_key[optional[i].key] = i;
      std::vector<unit> added;
      for (const auto& [weight, token] : chosen) {
        auto w = scale * weight / sum;
        if (auto i = by_key.find(token + ' '); i != by_key.end()) {
          optional[i->second].idf *= 1 + w;
          continue;
        }
        if (!seen_units.insert(token + ' ').second)
          continue; // a phrase of one word: its weight stays
        unit u;
        u.match = '"' + model[token].word + '"';
        u.key = token + ' ';
        u.expansion = true;
        u.df = state.frequency(db_, token);
        auto df = static_cast<double>(u.df);
        // A word in half of the passages or more has no weight (its IDF is
        // not above 0) and would cost the second ranking its long list.
        if (df >= n * max_feedback_df_share)
          continue;
        u.idf = std::max(std::log((n - df + 0.5) / (df + 0.5)), 1e-6) * w;
        added.push_back(std::move(u));
      }
      optional.insert(optional.end(), added.begin(), added.end());
      if (!rank_units(limit))
        return fail();
    }
  }
  if (candidates.size() > limit)
    candidates.resize(limit);
  for (const auto& c : candidates) {
    search_hit hit;
    if (!read_passage(c.passage, c.document, hit.text))
      continue;
    hit.passage_id = c.passage;
    hit.document_id = c.document;
    hit.heading = info.text_at(3);
    hit.path = info.text_at(4);
    hit.url = file_url(hit.path);
    hit.title = info.text_at(5);
    hit.date = info.text_at(6);
    hit.date_source = info.text_at(7);
    hit.language = info.text_at(8);
    hit.score = -c.score;
    hit.snippet = make_snippet(hit.text, terms);
    result.hits.push_back(std::move(hit));
  }
  return result;
}

} // namespace quarry::corpus
