// What the parts of the corpus index share, internal to the index: SQLite
// helpers, what a file yields for the index, the ranking's statistics, the
// `quarry` FTS5 tokenizer and its recorder, and the definitions of the
// index's private structures (the search state and the queued writes).
#pragma once

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/sqlite/statement.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::corpus::detail {

using sqlite::statement;

// -- SQLite helpers (index.cpp) -----------------------------------------------

/// An internal error: `what` and SQLite's message for `db`.
sdk::error db_error(sqlite3* db, const std::string& what);

/// Runs `sql` (no results); whether it succeeded.
bool exec(sqlite3* db, const char* sql);

/// Whether the last failure on `db` was another connection's lock.
bool busy(sqlite3* db);

/// Runs a statement that returns one integer.
std::optional<int64_t> query_int(sqlite3* db, const char* sql);

// -- what a file yields (index_files.cpp) -------------------------------------

enum class file_type { none, markdown, text, html, pdf };

/// The type of a file by its name's extension.
file_type type_of(const std::filesystem::path& p);

struct document_content {
  std::string title;
  std::string text;
  // The date the document gives itself (HTML metadata, PDF info), or empty.
  std::string published;
  // The language the document declares (HTML lang), or empty.
  std::string declared_language;
  // A remark for the user, or empty.
  std::string note;
  // Nothing could be read: the file is skipped.
  bool unreadable = false;
  // The file is binary data (for good: not tried again until it changes).
  bool binary = false;
};

/// Extracts the title and text of one file.
document_content document_text(const std::string& path, file_type type, std::string bytes);

/// The day of an ISO 8601 date as found in a page or PDF (`2024-05-01`,
/// `2024-05-01T12:00:00Z`): "YYYY-MM-DD", or empty when `text` does not start
/// with one.
std::string iso_date(std::string_view text);

/// The day (UTC) of a file's modification time, or empty.
std::string mtime_date(const std::string& path);

// -- ranking (index_rank.cpp) -------------------------------------------------

/// BM25 saturation (k1) and the weight of a match in the heading (the body
/// counts 1).
inline constexpr double bm25_k1 = 1.2;
inline constexpr double bm25_b = 0.75;
inline constexpr double heading_weight = 2.0;

/// What the ranking function reads besides the index: the passages'
/// lengths (in bytes of heading and text, a stand-in for their number of
/// words) by passage id, loaded once per change of the database. The index
/// keeps no lengths of its own (columnsize=0): reading them from it costs a
/// B-tree lookup per ranked passage, most of a query's time.
struct rank_lengths {
  std::vector<uint32_t> by_id;
  double average = 1.0;
};

/// The `k` best passages of a query, gathered by quarry_collect. The
/// weights travel here, not as arguments of an SQL function: SQLite allows
/// an SQL function at most 127 arguments (SQLITE_MAX_FUNCTION_ARG), fewer
/// than a query with feedback words has phrases (two weights each).
struct top_passages {
  size_t k = 0;
  std::vector<double> weights; // per phrase, as passage_score reads them
  std::vector<double> near;    // per phrase, the proximity weights (or none)
  /// When set, only passages with an id in one of these ranges [first,
  /// second] count (a path filter: each document's passages have
  /// consecutive ids); sorted and not overlapping.
  const std::vector<std::pair<int64_t, int64_t>>* allowed = nullptr;
  size_t matched = 0; // rows seen (of the allowed ones)
  // (score, passage id), the worst first (a heap); higher scores are
  // better, and the lower id of equal scores.
  std::vector<std::pair<double, int64_t>> heap;

  static bool better(const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }

  /// Whether passage `id` counts (see `allowed`).
  bool admits(int64_t id) const {
    if (allowed == nullptr)
      return true;
    auto it = std::upper_bound(allowed->begin(), allowed->end(), id,
                               [](int64_t x, const std::pair<int64_t, int64_t>& r) {
                                 return x < r.first;
                               });
    return it != allowed->begin() && id <= std::prev(it)->second;
  }

  void add(double score, int64_t id) {
    ++matched;
    std::pair<double, int64_t> e{score, id};
    if (heap.size() < k) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (k > 0 && better(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
};

/// The most matches of a passage's proximity phrases that the proximity
/// bonus reads (a passage is about 2,000 characters: some 400 tokens).
inline constexpr size_t max_proximity_hits = 1024;

/// One match of a proximity phrase in a passage: the column (0 heading, 1
/// body), the token offset in it, the phrase's number.
struct phrase_hit {
  int column = 0;
  int offset = 0;
  int phrase = 0;

  bool operator<(const phrase_hit& o) const {
    return column != o.column   ? column < o.column
           : offset != o.offset ? offset < o.offset
                                : phrase < o.phrase;
  }
};

/// What the ranking functions read besides the index, and their scratch
/// space.
struct rank_context {
  rank_lengths lengths;
  top_passages* top = nullptr; // set by search() while it collects
  std::vector<phrase_hit> hits;
  std::vector<double> accumulators;
};

// -- the tokenizer (index_tokenizer.cpp) --------------------------------------

/// The FTS5 API of a connection.
fts5_api* fts5_of(sqlite3* db);

/// The tokens the `quarry` tokenizer gives for the passages of one file,
/// recorded on the reading thread of an update and replayed when the
/// passages are inserted, so that the indexing thread (the one that holds
/// the write lock) does not tokenize and stem them itself.
struct token_recording {
  struct token {
    uint32_t at = 0; // in `bytes`
    uint32_t size = 0;
    int start = 0;
    int end = 0;
    int flags = 0;
  };
  std::string bytes;
  std::vector<token> tokens;
  // Per passage: where the tokens of its heading, then of its body, start,
  // and where they end.
  std::vector<std::array<uint32_t, 3>> bounds;
};

/// What the connection's `quarry` tokenizers share: the language of the
/// document being indexed (set by write_batch before its passages are added
/// or deleted, so both see the same tokens) and the languages of the corpus
/// (a query word is looked up under its stem in each). Owned by the
/// connection (freed when it closes).
struct language_context {
  language_context();
  ~language_context();

  language_context(const language_context&) = delete;
  language_context& operator=(const language_context&) = delete;

  std::string document_language = "en";
  std::vector<std::string> query_languages{"en"};

  // Set by write_batch while one passage is inserted: texts whose tokens
  // were recorded, and the recorded tokens [first, last). A text given to
  // the tokenizer that is one of them (same bytes) gets them replayed.
  struct recorded_text {
    std::string_view text;
    const token_recording* recording = nullptr;
    uint32_t first = 0;
    uint32_t last = 0;
  };
  std::array<recorded_text, 2> replay{};
  size_t replay_count = 0;

  // A language's stemmer and the stems it gave (index_tokenizer.cpp).
  struct cached_stemmer;
  std::map<std::string, std::unique_ptr<cached_stemmer>> stemmers;

  // The stem of `word` in `language`, without diacritics.
  const std::string& stem(const std::string& language, std::string_view word);

private:
  cached_stemmer* last = nullptr;
  std::string last_language;
};

/// The language whose stemmer indexes a document of `language`: its own
/// when Snowball has one, English otherwise (undetected text, and the Latin
/// words of Chinese, Japanese and Korean text).
std::string stem_language(const std::string& language);

/// One `quarry` tokenizer: FTS5's unicode61 (lower case, diacritics kept,
/// so the stemmers see them) and then, per token, either overlapping pairs
/// of characters for a run of CJK characters, or the Snowball stem of the
/// word with its diacritics removed ("häuser" -> "haus", "été" -> "ete").
/// A document is stemmed in its own language; a query word gets one stem
/// per language of the corpus, the others as FTS5 synonyms (colocated), so
/// it matches documents in any of them.
struct quarry_tokenizer {
  fts5_tokenizer base_module{};
  Fts5Tokenizer* base = nullptr;
  language_context* languages = nullptr;
  // The stems of a query word (scratch, reused across tokens).
  std::vector<std::string> variants;
};

/// The largest text whose tokens the reading thread records (about 6 bytes
/// of recording per byte of text); a larger one is tokenized as inserted.
inline constexpr size_t max_recorded_bytes = 4 * 1024 * 1024;

/// A `quarry` tokenizer for another thread than the connection's: its own
/// unicode61 instance and language context, recording tokens.
class token_recorder {
public:
  token_recorder();
  ~token_recorder();

  token_recorder(const token_recorder&) = delete;
  token_recorder& operator=(const token_recorder&) = delete;

  /// Sets up the unicode61 instance from `db`'s FTS5 (on the connection's
  /// thread).
  bool init(sqlite3* db);

  /// Records the tokens of every passage of `text`, stemmed in `language`.
  void record(const std::string& language, std::string_view text,
              const std::vector<passage>& passages, token_recording& out);

private:
  quarry_tokenizer tokenizer_;
  language_context languages_;
};

/// Registers the `quarry` tokenizer on `db` and returns the context its
/// instances share (owned by the connection), or nullptr.
language_context* register_tokenizer(sqlite3* db);

} // namespace quarry::corpus::detail

namespace quarry::corpus {

/// What search() keeps between calls: the query tokenizer (the index's own)
/// and cached statistics, dropped whenever the database changed
/// (index_rank.cpp).
struct corpus_index::search_state {
  fts5_tokenizer module{};
  Fts5Tokenizer* tokenizer = nullptr;
  int64_t data_version = -1;
  int64_t own_changes = -1;
  // Passages in the index.
  int64_t passages = 0;
  // Document frequencies by term.
  std::map<std::string, int64_t> df;
  // The passages' lengths, for the ranking functions.
  detail::rank_context ranking;
  detail::rank_lengths& lengths = ranking.lengths;
  // What the connection's tokenizers share (owned by the connection).
  detail::language_context* languages = nullptr;

  search_state() = default;
  search_state(const search_state&) = delete;
  search_state& operator=(const search_state&) = delete;

  ~search_state() {
    if (tokenizer != nullptr)
      module.xDelete(tokenizer);
  }

  /// Sets up the tokenizer of the index and the ranking function on `db`.
  bool init(sqlite3* db);

  /// The index terms of `text`, as a MATCH query string is tokenized (at
  /// most `max_terms`).
  std::vector<std::string> tokens(std::string_view text, size_t max_terms = 64);

  /// The same with the word of `text` each term comes from: (term, word).
  std::vector<std::pair<std::string, std::string>> token_words(std::string_view text,
                                                               size_t max_terms);

  /// Drops the cached statistics when another connection (or this one)
  /// changed the database.
  void check(sqlite3* db);

  /// Reads the passages' lengths (and counts them).
  void load_lengths(sqlite3* db);

  /// The number of passages holding `term`: from the terms table for a
  /// common term, else counted (a rare term has a short list).
  int64_t frequency(sqlite3* db, const std::string& term);
};

/// A write queued by update(): committed by write_batch().
struct corpus_index::pending_write {
  enum kind_t { upsert, touch, remove };
  kind_t kind = upsert;
  std::string path;
  int64_t mtime = 0;
  int64_t size = 0;
  std::string hash;
  std::string title;
  std::string date;
  std::string date_source;
  std::string language;
  std::string text;
  // The passages of `text` (split by the reading thread) and their tokens
  // (recorded by it too).
  std::vector<passage> passages;
  detail::token_recording tokens;
};

} // namespace quarry::corpus
