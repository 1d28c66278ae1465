// The local corpus index: a SQLite database with an FTS5 table of passages
// of local Markdown, text, HTML and PDF files, updated incrementally.

#include "quarry/corpus/index.hpp"

#include "quarry/corpus/language.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/extract/html.hpp"
#include "quarry/extract/pdf.hpp"
#include "quarry/fetch/local_file.hpp"
#include "quarry/sqlite/open.hpp"
#include "quarry/sqlite/statement.hpp"
#include "quarry/sdk/strings.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <utility>

#include <sys/stat.h>

namespace quarry::corpus {

namespace fs = std::filesystem;

namespace {

// The main content of an HTML file is indexed when it holds at least this
// share (1/3) of the page's visible text. On the 130 readability test pages
// (news and blog articles) the main content holds 85% in the median and less
// than a third on 11 pages (less than half on 25), whose boilerplate is then
// indexed too.
constexpr size_t min_main_share_numerator = 1;
constexpr size_t min_main_share_denominator = 3;

// How long the text of one PDF file may take to read.
constexpr std::chrono::milliseconds pdf_time_limit{60000};

// Schema version 4. The text of a document is stored once (documents.body);
// a passage is a byte range of it. The FTS5 table is contentless: it holds
// only the inverted index (with positions, for phrase queries) and the
// passages' lengths, and what it needs to delete a row is read back from
// documents.body. `terms` holds the document frequency of the common terms
// (those in at least max(64, N/1000) passages), refreshed after updates
// that change a tenth of the index; the ranking reads it (see search()).
// `titles_fts` (contentless too, rowid = document id) indexes the titles,
// whose words raise a document's rank (see search()).
// The index is derived data: a database of an older schema is emptied and
// built again from the files by the next update (see open()).
const char* schema_sql = R"sql(
CREATE TABLE documents(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  mtime INTEGER NOT NULL,
  size INTEGER NOT NULL,
  hash TEXT NOT NULL,
  date TEXT NOT NULL,
  date_source TEXT NOT NULL,
  language TEXT NOT NULL,
  body TEXT NOT NULL);
CREATE TABLE passages(
  id INTEGER PRIMARY KEY,
  document_id INTEGER NOT NULL,
  start INTEGER NOT NULL,
  length INTEGER NOT NULL,
  heading TEXT NOT NULL);
CREATE INDEX passages_by_document ON passages(document_id);
CREATE VIRTUAL TABLE passages_fts USING fts5(
  heading, body, content='', columnsize=0, tokenize='quarry');
INSERT INTO passages_fts(passages_fts, rank) VALUES ('hashsize', 16777216);
INSERT INTO passages_fts(passages_fts, rank) VALUES ('automerge', 4);
CREATE VIRTUAL TABLE passages_vocab USING fts5vocab(passages_fts, 'row');
CREATE VIRTUAL TABLE titles_fts USING fts5(
  title, content='', columnsize=0, tokenize='quarry');
CREATE TABLE terms(term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta VALUES ('stats_passages', 0), ('changed', 0);
)sql";

// Drops the tables of an older schema (version 1 had the same names).
const char* drop_sql = R"sql(
DROP TABLE IF EXISTS passages_vocab;
DROP TABLE IF EXISTS passages_fts;
DROP TABLE IF EXISTS titles_fts;
DROP TABLE IF EXISTS terms;
DROP TABLE IF EXISTS meta;
DROP TABLE IF EXISTS passages;
DROP TABLE IF EXISTS documents;
)sql";

// A batch of writes is committed when it holds this much text or this many
// files, so the write lock is held briefly and never while a file is read.
constexpr size_t batch_bytes = 8 * 1024 * 1024;
constexpr size_t batch_files = 512;
// ... or when its first write waited this long (slow files: what was read is
// searchable soon).
constexpr std::chrono::seconds batch_age{2};

sdk::error db_error(sqlite3* db, const std::string& what) {
  std::string msg = what;
  if (db != nullptr) {
    msg += ": ";
    msg += sqlite3_errmsg(db);
  }
  return sdk::make_error(sdk::errc::internal, std::move(msg));
}

using sqlite::statement;

bool exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

// Whether the last failure on `db` was another connection's lock.
bool busy(sqlite3* db) {
  auto rc = sqlite3_errcode(db) & 0xFF;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

// Switches the database to WAL. The busy handler does not cover every case
// here (two connections changing the journal mode at once: SQLite fails one
// at once to avoid a deadlock), so busy failures are retried until
// busy_wait_ms has passed.
bool enable_wal(sqlite3* db) {
  auto until = std::chrono::steady_clock::now()
               + std::chrono::milliseconds{busy_wait_ms};
  for (;;) {
    std::string mode;
    auto rc = sqlite3_exec(
      db, "PRAGMA journal_mode=WAL",
      [](void* out, int n, char** values, char**) {
        if (n > 0 && values[0] != nullptr)
          *static_cast<std::string*>(out) = values[0];
        return 0;
      },
      &mode, nullptr);
    if (rc == SQLITE_OK)
      return mode == "wal";
    if (!busy(db) || std::chrono::steady_clock::now() >= until)
      return false;
    sqlite3_sleep(20);
  }
}

// Runs a statement that returns one integer.
std::optional<int64_t> query_int(sqlite3* db, const char* sql) {
  statement st{db, sql};
  if (!st.ok() || st.step() != SQLITE_ROW)
    return std::nullopt;
  return st.int_at(0);
}

enum class file_type { none, markdown, text, html, pdf };

file_type type_of(const fs::path& p) {
  auto ext = p.extension().string();
  for (auto& c : ext)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  if (ext == ".md" || ext == ".markdown")
    return file_type::markdown;
  if (ext == ".txt" || ext == ".text")
    return file_type::text;
  if (ext == ".html" || ext == ".htm" || ext == ".xhtml")
    return file_type::html;
  if (ext == ".pdf")
    return file_type::pdf;
  return file_type::none;
}

struct file_stat {
  int64_t mtime = 0;
  int64_t size = 0;
  file_type type = file_type::none;
};

struct existing_doc {
  int64_t id = 0;
  int64_t mtime = 0;
  int64_t size = 0;
  std::string hash;
};

// The letters and digits of a text (bytes of multi-byte UTF-8 characters
// count too): a length measure that ignores layout and Markdown marks.
size_t visible_chars(std::string_view text) {
  size_t n = 0;
  for (auto ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z'))
      ++n;
  }
  return n;
}

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

// Extracts the title and text of one file.
document_content document_text(const std::string& path, file_type type,
                               std::string bytes) {
  document_content result;
  switch (type) {
    case file_type::html: {
      auto decoded = extract::decode_document(bytes, {});
      if (!decoded.note.empty())
        result.note = path + ": " + decoded.note;
      const auto& html = decoded.text;
      auto main = extract::extract_html(html, file_url(path));
      auto whole = extract::html_to_text(html);
      result.title = std::move(main.title);
      result.published = std::move(main.published);
      result.declared_language = normalize_language(main.lang);
      // Readability-style scoring keeps an article and drops navigation, but
      // on documentation, index or FAQ pages it may keep one section of
      // many. Use the main content only when it holds at least a third (the
      // min_main_share constants) of the page's visible text, the whole page
      // otherwise: an index favours recall over a little navigation noise.
      if (visible_chars(main.text) * min_main_share_denominator
          >= visible_chars(whole) * min_main_share_numerator)
        result.text = std::move(main.text);
      else
        result.text = std::move(whole);
      break;
    }
    case file_type::pdf: {
      auto pdf = extract::extract_pdf(bytes, pdf_time_limit);
      if (pdf.failure) {
        result.note = "skipped " + path + ": " + pdf.failure->message;
        result.unreadable = true;
        break;
      }
      if (pdf.pages_read < pdf.pages)
        result.note = "indexed " + std::to_string(pdf.pages_read) + " of "
                      + std::to_string(pdf.pages) + " pages of " + path
                      + " (time limit reached)";
      else if (pdf.text.empty())
        result.note = "no text in " + path
                      + " (a scanned PDF without a text layer?)";
      result.title = std::move(pdf.title);
      result.published = std::move(pdf.published);
      result.text = std::move(pdf.text);
      break;
    }
    default: {
      // A .txt or .md name is no proof of text: random bytes must not reach
      // the index, the model or a terminal.
      auto text = extract::decode_to_utf8(bytes, {});
      if (extract::looks_binary(text)) {
        result.note = "skipped " + path + ": binary data, not text";
        result.unreadable = true;
        result.binary = true;
        break;
      }
      result.text = extract::clean_text(text);
    }
  }
  return result;
}

// The day of an ISO 8601 date as found in a page or PDF (`2024-05-01`,
// `2024-05-01T12:00:00Z`): "YYYY-MM-DD", or empty when `text` does not start
// with one.
std::string iso_date(std::string_view text) {
  if (text.size() < 10)
    return {};
  for (size_t i = 0; i < 10; ++i) {
    bool dash = i == 4 || i == 7;
    auto c = text[i];
    if (dash ? c != '-' : (c < '0' || c > '9'))
      return {};
  }
  auto month = (text[5] - '0') * 10 + (text[6] - '0');
  auto day = (text[8] - '0') * 10 + (text[9] - '0');
  if (month < 1 || month > 12 || day < 1 || day > 31)
    return {};
  return std::string{text.substr(0, 10)};
}

// The day (UTC) of a file's modification time, or empty.
std::string mtime_date(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  std::tm tm{};
  time_t t = st.st_mtime;
  if (gmtime_r(&t, &tm) == nullptr)
    return {};
  char buf[32];
  auto n = std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return std::string{buf, n};
}

bool under(const std::string& path, const std::string& root) {
  if (path == root)
    return true;
  if (path.size() <= root.size() || path.compare(0, root.size(), root) != 0)
    return false;
  return root.back() == '/' || path[root.size()] == '/';
}

// BM25 saturation (k1) and the weight of a match in the heading (the body
// counts 1).
constexpr double bm25_k1 = 1.2;
constexpr double bm25_b = 0.75;
constexpr double heading_weight = 2.0;

// A query unit in a document's title adds its IDF times this to the score
// of the document's best passage (a title is short: no saturation), so that
// a document about X ranks above passages that mention X in passing. A unit
// in more than max_title_df titles is too common to count: it would cost a
// long list and weigh little.
constexpr double title_weight = 1.0;
constexpr size_t max_title_df = 1000;

// What the ranking function reads besides the index: the passages'
// lengths (in bytes of heading and text, a stand-in for their number of
// words) by passage id, loaded once per change of the database. The index
// keeps no lengths of its own (columnsize=0): reading them from it costs a
// B-tree lookup per ranked passage, most of a query's time.
struct rank_lengths {
  std::vector<uint32_t> by_id;
  double average = 1.0;
};

// The BM25 score of the current row of `fts`: FTS5's bm25() with the
// IDFs given (`weight(p)` for phrase p, 0 for a phrase that only selects
// rows) instead of counted (bm25() reads every phrase's whole posting list
// per query to count them) and lengths from rank_lengths: per phrase, tf
// counts its matches (heading ones twice), and the score is the sum of
// w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length)).
// Each phrase adds less than w * (k1 + 1), the bound that search() prunes
// with. Returns false when the positions cannot be read.
template <class Weight>
bool passage_score(const Fts5ExtensionApi* api, Fts5Context* fts,
                   const rank_lengths& lengths, int n, Weight weight,
                   double& score) {
  auto rowid = api->xRowid(fts);
  auto average = lengths.average;
  auto length = average;
  if (rowid >= 0 && static_cast<uint64_t>(rowid) < lengths.by_id.size())
    length = lengths.by_id[static_cast<size_t>(rowid)];
  auto norm = bm25_k1 * (1 - bm25_b + bm25_b * length / average);
  auto phrases = api->xPhraseCount(fts);
  score = 0;
  for (int p = 0; p < phrases && p < n; ++p) {
    double w = weight(p);
    if (!(w > 0))
      continue;
    Fts5PhraseIter it;
    int column = 0;
    int offset = 0;
    double tf = 0;
    if (api->xPhraseFirst(fts, p, &it, &column, &offset) != SQLITE_OK)
      return false;
    for (; column >= 0; api->xPhraseNext(fts, &it, &column, &offset))
      tf += column == 0 ? heading_weight : 1.0;
    if (tf > 0)
      score += w * tf * (bm25_k1 + 1) / (tf + norm);
  }
  return true;
}

// The `k` best passages of a query, gathered by quarry_collect.
struct top_passages {
  size_t k = 0;
  std::vector<double> weights; // per phrase, as passage_score reads them
  size_t matched = 0;          // rows seen
  // (score, passage id), the worst first (a heap); higher scores are
  // better, and the lower id of equal scores.
  std::vector<std::pair<double, int64_t>> heap;

  static bool better(const std::pair<double, int64_t>& a,
                     const std::pair<double, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
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

// What the ranking functions read besides the index.
struct rank_context {
  rank_lengths lengths;
  top_passages* top = nullptr; // set by search() while it collects
};

// `quarry_rank(w0, w1, ...)`, FTS5's rank: the negated passage_score (lower
// is better, as FTS5's rank) with one weight per phrase.
void quarry_rank(const Fts5ExtensionApi* api, Fts5Context* fts,
                 sqlite3_context* ctx, int n, sqlite3_value** args) {
  const auto* rc = static_cast<const rank_context*>(api->xUserData(fts));
  double score = 0;
  if (!passage_score(api, fts, rc->lengths, n,
                     [&](int p) { return sqlite3_value_double(args[p]); },
                     score)) {
    sqlite3_result_error(ctx, "quarry_rank: cannot read positions", -1);
    return;
  }
  sqlite3_result_double(ctx, -score);
}

// `quarry_collect()`: scores the row with the weights of the active
// top_passages and keeps it there if it is among the best; returns 0, so
// that a query `WHERE fts MATCH ... AND quarry_collect(fts)` yields no
// rows. The best passages are chosen without FTS5's sorter, which costs
// more per row than the score.
void quarry_collect(const Fts5ExtensionApi* api, Fts5Context* fts,
                    sqlite3_context* ctx, int, sqlite3_value**) {
  auto* rc = static_cast<rank_context*>(api->xUserData(fts));
  auto* top = rc->top;
  if (top == nullptr) {
    sqlite3_result_error(ctx, "quarry_collect: no query is collecting", -1);
    return;
  }
  double score = 0;
  if (!passage_score(api, fts, rc->lengths, static_cast<int>(top->weights.size()),
                     [&](int p) { return top->weights[static_cast<size_t>(p)]; },
                     score)) {
    sqlite3_result_error(ctx, "quarry_collect: cannot read positions", -1);
    return;
  }
  top->add(score, api->xRowid(fts));
  sqlite3_result_int(ctx, 0);
}

// The FTS5 API of a connection.
fts5_api* fts5_of(sqlite3* db) {
  fts5_api* api = nullptr;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, nullptr) != SQLITE_OK)
    return nullptr;
  sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr",
                       nullptr);
  sqlite3_step(st);
  sqlite3_finalize(st);
  return api;
}


// -- the tokenizer ------------------------------------------------------------

// The tokens the `quarry` tokenizer gives for the passages of one file,
// recorded on the reading thread of an update and replayed when the
// passages are inserted, so that the indexing thread (the one that holds
// the write lock) does not tokenize and stem them itself.
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

// What the connection's `quarry` tokenizers share: the language of the
// document being indexed (set by write_batch before its passages are added
// or deleted, so both see the same tokens) and the languages of the corpus
// (a query word is looked up under its stem in each). Owned by the
// connection (freed when it closes).
struct language_context {
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

  // A language's stemmer and the stems it gave (without diacritics), in a
  // direct-mapped cache by the word's hash: text repeats its words, and
  // Snowball would be most of the tokenizer's cost.
  struct cached_stemmer {
    static constexpr size_t slots = 1 << 15;
    explicit cached_stemmer(const std::string& language)
      : impl(language), words(slots), stems(slots) {
      // nop
    }
    stemmer impl;
    std::vector<std::string> words;
    std::vector<std::string> stems;
  };
  std::map<std::string, std::unique_ptr<cached_stemmer>> stemmers;

  // The stem of `word` in `language`, without diacritics.
  const std::string& stem(const std::string& language, std::string_view word) {
    if (last == nullptr || last_language != language) {
      auto& s = stemmers[language];
      if (!s)
        s = std::make_unique<cached_stemmer>(language);
      last = s.get();
      last_language = language;
    }
    auto& s = *last;
    uint64_t h = 1469598103934665603ull;
    for (auto c : word)
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    auto slot = static_cast<size_t>(h ^ (h >> 32)) & (cached_stemmer::slots - 1);
    if (!s.stems[slot].empty() && s.words[slot] == word)
      return s.stems[slot];
    auto out = s.impl.stem(word);
    bool ascii = std::all_of(out.begin(), out.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x80;
    });
    if (!ascii)
      out = strip_diacritics(out);
    if (out.empty()) // never cached as empty (an empty slot)
      out.assign(word.data(), word.size());
    s.words[slot].assign(word.data(), word.size());
    s.stems[slot] = std::move(out);
    return s.stems[slot];
  }

private:
  cached_stemmer* last = nullptr;
  std::string last_language;
};

// The language whose stemmer indexes a document of `language`: its own
// when Snowball has one, English otherwise (undetected text, and the Latin
// words of Chinese, Japanese and Korean text).
std::string stem_language(const std::string& language) {
  const auto& known = stemmed_languages();
  return std::find(known.begin(), known.end(), language) != known.end()
           ? language
           : std::string{"en"};
}

// One `quarry` tokenizer: FTS5's unicode61 (lower case, diacritics kept,
// so the stemmers see them) and then, per token, either overlapping pairs
// of characters for a run of CJK characters, or the Snowball stem of the
// word with its diacritics removed ("häuser" -> "haus", "été" -> "ete").
// A document is stemmed in its own language; a query word gets one stem
// per language of the corpus, the others as FTS5 synonyms (colocated), so
// it matches documents in any of them.
struct quarry_tokenizer {
  fts5_tokenizer base_module{};
  Fts5Tokenizer* base = nullptr;
  language_context* languages = nullptr;
  // The stems of a query word (scratch, reused across tokens).
  std::vector<std::string> variants;
};

struct token_pass {
  quarry_tokenizer* self;
  void* ctx;
  int (*emit)(void*, int, const char*, int, int, int);
  bool query;
  // Added to the byte offsets of the tokens unicode61 reports (it is given
  // pieces of the text).
  int offset = 0;
};

int emit_word(token_pass& p, std::string_view word, int start, int end) {
  auto& t = *p.self;
  start += p.offset;
  end += p.offset;
  auto& languages = *t.languages;
  if (!p.query) {
    const auto& stem = languages.stem(languages.document_language, word);
    return p.emit(p.ctx, 0, stem.data(), static_cast<int>(stem.size()), start,
                  end);
  }
  t.variants.clear();
  for (const auto& language : languages.query_languages) {
    const auto& stem = languages.stem(language, word);
    if (std::find(t.variants.begin(), t.variants.end(), stem)
        == t.variants.end())
      t.variants.push_back(stem);
  }
  for (size_t i = 0; i < t.variants.size(); ++i) {
    auto rc = p.emit(p.ctx, i == 0 ? 0 : FTS5_TOKEN_COLOCATED,
                     t.variants[i].data(),
                     static_cast<int>(t.variants[i].size()), start, end);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

int on_token(void* pass, int flags, const char* token, int n, int start,
             int end) {
  auto& p = *static_cast<token_pass*>(pass);
  if ((flags & FTS5_TOKEN_COLOCATED) != 0 || n <= 0)
    return SQLITE_OK;
  std::string_view word{token, static_cast<size_t>(n)};
  bool ascii = std::all_of(word.begin(), word.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x80;
  });
  if (ascii)
    return emit_word(p, word, start, end);
  // Split the token into runs of CJK characters (indexed as pairs) and of
  // other characters (words).
  size_t i = 0;
  while (i < word.size()) {
    size_t run = i;
    bool cjk = is_cjk(sdk::decode_utf8(word, i).code_point);
    std::vector<size_t> starts;
    while (i < word.size()) {
      auto d = sdk::decode_utf8(word, i);
      if (is_cjk(d.code_point) != cjk)
        break;
      starts.push_back(i);
      i += d.length;
    }
    int rc = SQLITE_OK;
    if (!cjk) {
      rc = emit_word(p, word.substr(run, i - run), start, end);
    } else if (starts.size() == 1) {
      rc = p.emit(p.ctx, 0, word.data() + run, static_cast<int>(i - run),
                  start + p.offset, end + p.offset);
    } else {
      for (size_t k = 0; k + 1 < starts.size() && rc == SQLITE_OK; ++k) {
        auto to = k + 2 < starts.size() ? starts[k + 2] : i;
        rc = p.emit(p.ctx, 0, word.data() + starts[k],
                    static_cast<int>(to - starts[k]), start + p.offset,
                    end + p.offset);
      }
    }
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

int tokenizer_create(void* user, const char**, int, Fts5Tokenizer** out) {
  auto* ctx = static_cast<std::pair<fts5_api*, language_context*>*>(user);
  auto t = std::make_unique<quarry_tokenizer>();
  t->languages = ctx->second;
  void* base_user = nullptr;
  if (ctx->first->xFindTokenizer(ctx->first, "unicode61", &base_user,
                                 &t->base_module)
      != SQLITE_OK)
    return SQLITE_ERROR;
  const char* args[] = {"remove_diacritics", "0"};
  if (t->base_module.xCreate(base_user, args, 2, &t->base) != SQLITE_OK)
    return SQLITE_ERROR;
  *out = reinterpret_cast<Fts5Tokenizer*>(t.release());
  return SQLITE_OK;
}

void tokenizer_delete(Fts5Tokenizer* tok) {
  auto* t = reinterpret_cast<quarry_tokenizer*>(tok);
  if (t->base != nullptr)
    t->base_module.xDelete(t->base);
  delete t;
}

bool ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

// Splits the text as unicode61 does (ASCII letters and digits are token
// characters, other ASCII is a separator), lower-casing ASCII words itself
// (most words of most text, at a fraction of unicode61's cost) and giving
// unicode61 only the runs with non-ASCII characters.
int tokenizer_run(Fts5Tokenizer* tok, void* ctx, int flags, const char* text,
                  int n, int (*emit)(void*, int, const char*, int, int, int)) {
  auto* t = reinterpret_cast<quarry_tokenizer*>(tok);
  if ((flags & FTS5_TOKENIZE_DOCUMENT) != 0 && n >= 0) {
    auto& languages = *t->languages;
    for (size_t r = 0; r < languages.replay_count; ++r) {
      const auto& rec = languages.replay[r];
      if (rec.text.size() != static_cast<size_t>(n)
          || (n > 0 && std::memcmp(rec.text.data(), text, rec.text.size()) != 0))
        continue;
      const auto& recording = *rec.recording;
      for (auto k = rec.first; k < rec.last; ++k) {
        const auto& x = recording.tokens[k];
        auto rc = emit(ctx, x.flags, recording.bytes.data() + x.at,
                       static_cast<int>(x.size), x.start, x.end);
        if (rc != SQLITE_OK)
          return rc;
      }
      return SQLITE_OK;
    }
  }
  token_pass pass{t, ctx, emit, (flags & FTS5_TOKENIZE_QUERY) != 0};
  char lower[64];
  int i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80 && !ascii_alnum(c)) {
      ++i;
      continue;
    }
    auto start = i;
    bool ascii = true;
    for (; i < n; ++i) {
      c = static_cast<unsigned char>(text[i]);
      if (c >= 0x80)
        ascii = false;
      else if (!ascii_alnum(c))
        break;
    }
    int rc = SQLITE_OK;
    if (ascii && i - start <= static_cast<int>(sizeof(lower))) {
      for (int k = start; k < i; ++k) {
        auto b = static_cast<unsigned char>(text[k]);
        lower[k - start] = static_cast<char>(b >= 'A' && b <= 'Z' ? b | 0x20
                                                                  : b);
      }
      pass.offset = 0;
      rc = on_token(&pass, 0, lower, i - start, start, i);
    } else {
      pass.offset = start;
      rc = t->base_module.xTokenize(t->base, &pass, flags, text + start,
                                    i - start, &on_token);
    }
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

// The largest text whose tokens the reading thread records (about 6 bytes
// of recording per byte of text); a larger one is tokenized as inserted.
constexpr size_t max_recorded_bytes = 4 * 1024 * 1024;

// A `quarry` tokenizer for another thread than the connection's: its own
// unicode61 instance and language context, recording tokens.
class token_recorder {
public:
  token_recorder() = default;
  token_recorder(const token_recorder&) = delete;
  token_recorder& operator=(const token_recorder&) = delete;

  ~token_recorder() {
    if (tokenizer_.base != nullptr)
      tokenizer_.base_module.xDelete(tokenizer_.base);
  }

  // Sets up the unicode61 instance from `db`'s FTS5 (on the connection's
  // thread).
  bool init(sqlite3* db) {
    auto* api = fts5_of(db);
    void* base_user = nullptr;
    if (api == nullptr
        || api->xFindTokenizer(api, "unicode61", &base_user,
                               &tokenizer_.base_module)
             != SQLITE_OK)
      return false;
    const char* args[] = {"remove_diacritics", "0"};
    if (tokenizer_.base_module.xCreate(base_user, args, 2, &tokenizer_.base)
        != SQLITE_OK) {
      tokenizer_.base = nullptr;
      return false;
    }
    tokenizer_.languages = &languages_;
    return true;
  }

  // Records the tokens of every passage of `text`, stemmed in `language`.
  void record(const std::string& language, std::string_view text,
              const std::vector<passage>& passages, token_recording& out) {
    if (tokenizer_.base == nullptr)
      return;
    languages_.document_language = language;
    auto add = [](void* ctx, int flags, const char* token, int n, int start,
                  int end) -> int {
      auto* r = static_cast<token_recording*>(ctx);
      r->tokens.push_back({static_cast<uint32_t>(r->bytes.size()),
                           static_cast<uint32_t>(n), start, end, flags});
      r->bytes.append(token, static_cast<size_t>(n));
      return SQLITE_OK;
    };
    auto* tok = reinterpret_cast<Fts5Tokenizer*>(&tokenizer_);
    for (const auto& p : passages) {
      std::array<uint32_t, 3> b{};
      b[0] = static_cast<uint32_t>(out.tokens.size());
      tokenizer_run(tok, &out, FTS5_TOKENIZE_DOCUMENT, p.heading.data(),
                    static_cast<int>(p.heading.size()), add);
      b[1] = static_cast<uint32_t>(out.tokens.size());
      auto body = text.substr(p.offset, p.length);
      tokenizer_run(tok, &out, FTS5_TOKENIZE_DOCUMENT, body.data(),
                    static_cast<int>(body.size()), add);
      b[2] = static_cast<uint32_t>(out.tokens.size());
      out.bounds.push_back(b);
    }
  }

private:
  quarry_tokenizer tokenizer_;
  language_context languages_;
};

// Registers the `quarry` tokenizer on `db` and returns the context its
// instances share (owned by the connection), or nullptr.
language_context* register_tokenizer(sqlite3* db) {
  auto* api = fts5_of(db);
  if (api == nullptr)
    return nullptr;
  using user_data = std::pair<fts5_api*, language_context*>;
  auto user = std::make_unique<user_data>(api, new language_context);
  auto* languages = user->second;
  fts5_tokenizer module{&tokenizer_create, &tokenizer_delete, &tokenizer_run};
  auto rc = api->xCreateTokenizer(
    api, "quarry", user.get(), &module, [](void* p) {
      auto* u = static_cast<user_data*>(p);
      delete u->second;
      delete u;
    });
  if (rc != SQLITE_OK) {
    delete user->second;
    return nullptr;
  }
  user.release();
  return languages;
}

} // namespace

/// What search() keeps between calls: the query tokenizer (the index's own)
/// and cached statistics, dropped whenever the database changed.
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
  rank_context ranking;
  rank_lengths& lengths = ranking.lengths;
  // What the connection's tokenizers share (owned by the connection).
  language_context* languages = nullptr;

  search_state() = default;
  search_state(const search_state&) = delete;
  search_state& operator=(const search_state&) = delete;

  ~search_state() {
    if (tokenizer != nullptr)
      module.xDelete(tokenizer);
  }

  // Sets up the tokenizer of the index and the ranking function on `db`.
  bool init(sqlite3* db) {
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
    return api->xCreateFunction(api, "quarry_rank", &ranking, &quarry_rank,
                                nullptr)
             == SQLITE_OK
           && api->xCreateFunction(api, "quarry_collect", &ranking,
                                   &quarry_collect, nullptr)
                == SQLITE_OK;
  }

  // The index terms of `text`, as a MATCH query string is tokenized (at
  // most 64).
  std::vector<std::string> tokens(std::string_view text) {
    std::vector<std::string> out;
    auto add = [](void* ctx, int flags, const char* token, int n, int,
                  int) -> int {
      auto* v = static_cast<std::vector<std::string>*>(ctx);
      if ((flags & FTS5_TOKEN_COLOCATED) == 0 && v->size() < 64 && n > 0)
        v->emplace_back(token, static_cast<size_t>(n));
      return SQLITE_OK;
    };
    module.xTokenize(tokenizer, &out, FTS5_TOKENIZE_QUERY, text.data(),
                     static_cast<int>(text.size()), add);
    return out;
  }

  // Drops the cached statistics when another connection (or this one)
  // changed the database.
  void check(sqlite3* db) {
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
    std::stable_partition(languages->query_languages.begin(),
                          languages->query_languages.end(),
                          [](const std::string& l) { return l == "en"; });
  }

  // Reads the passages' lengths (and counts them).
  void load_lengths(sqlite3* db) {
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
  int64_t frequency(sqlite3* db, const std::string& term) {
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
  token_recording tokens;
};

// -- opening ------------------------------------------------------------------

corpus_index::corpus_index(token, sqlite3* db, std::string path)
  : db_(db), path_(std::move(path)) {
  // nop
}

corpus_index::~corpus_index() {
  state_.reset(); // its tokenizer first
  sqlite3_close_v2(db_);
}

open_result corpus_index::open(const std::string& path) {
  open_result result;
  auto fail = [&](sdk::errc code, std::string msg) {
    result.failure = sdk::make_error(code, "corpus database '" + path
                                             + "': " + std::move(msg));
    return std::move(result);
  };
  if (path.empty())
    return fail(sdk::errc::bad_request, "no path given");
  std::error_code ec;
  auto st = fs::status(path, ec);
  bool exists = fs::exists(st);
  if (exists && !fs::is_regular_file(st))
    return fail(sdk::errc::bad_request, "not a regular file");
  if (!exists) {
    auto parent = fs::path{path}.parent_path();
    if (!parent.empty())
      fs::create_directories(parent, ec);
  }
  // The header is checked through the connection's own file handle, never
  // with a descriptor of ours: closing one would drop the locks of this
  // process's other connections to the index (quarry/sqlite/open.hpp).
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
              | (exists ? 0 : SQLITE_OPEN_CREATE);
  auto opened = sqlite::open_database(path, flags);
  if (opened.rc != SQLITE_OK)
    return fail(sdk::errc::internal, "cannot open: " + opened.message);
  if (opened.kind == sqlite::file_kind::other)
    return fail(sdk::errc::bad_request,
                "not a SQLite database (left untouched; choose another "
                "file with tools.internal_search.db)");
  sqlite3* db = opened.db;
  auto close_fail = [&](sdk::errc code, std::string msg) {
    sqlite3_close_v2(db);
    return fail(code, std::move(msg));
  };
  // Another process may be creating or writing this database right now
  // (two `quarry index` runs at once): wait for it.
  sqlite3_busy_timeout(db, busy_wait_ms);
  // The index's own tokenizer, needed before its table is created or used.
  auto* languages = register_tokenizer(db);
  if (languages == nullptr)
    return close_fail(sdk::errc::internal,
                      std::string{"cannot set up full-text search: "}
                        + sqlite3_errmsg(db));
  std::optional<int64_t> app;
  std::optional<int64_t> version;
  std::optional<int64_t> tables;
  bool locked = false;
  std::string why;
  // Reads the three values from one snapshot (in a transaction: separate
  // reads could see the schema without the application id).
  auto read_header = [&](bool in_transaction) {
    if (!in_transaction && !exec(db, "BEGIN")) {
      locked = busy(db);
      why = sqlite3_errmsg(db);
      return false;
    }
    app = query_int(db, "PRAGMA application_id");
    version = query_int(db, "PRAGMA user_version");
    tables = query_int(db, "SELECT count(*) FROM sqlite_master");
    bool ok = app && version && tables;
    locked = !ok && busy(db);
    if (!ok)
      why = sqlite3_errmsg(db);
    if (!in_transaction)
      exec(db, ok ? "COMMIT" : "ROLLBACK");
    return ok;
  };
  auto unreadable = [&] {
    if (locked)
      return close_fail(sdk::errc::busy,
                        "still locked by another process after waiting "
                          + std::to_string(busy_wait_ms / 1000) + " s");
    return close_fail(sdk::errc::bad_request,
                      "unreadable or corrupt SQLite database (left "
                      "untouched): " + why);
  };
  if (!read_header(false))
    return unreadable();
  if (*app == 0 && *tables == 0) {
    // An empty database: ours to set up, unless another process gets there
    // first. BEGIN IMMEDIATE takes the write lock at once (waiting for a
    // writer), so the emptiness is checked again under the lock.
    if (!exec(db, "BEGIN IMMEDIATE")) {
      locked = busy(db);
      why = sqlite3_errmsg(db);
      if (locked)
        return unreadable();
      return close_fail(sdk::errc::internal,
                        std::string{"cannot create the schema: "}
                          + sqlite3_errmsg(db));
    }
    if (!read_header(true)) {
      exec(db, "ROLLBACK");
      return unreadable();
    }
    std::string init;
    if (*app == 0 && *tables == 0) {
      init += schema_sql;
      init += "PRAGMA application_id=" + std::to_string(application_id) + ";";
      init += "PRAGMA user_version=" + std::to_string(schema_version) + ";";
    }
    init += "COMMIT;";
    if (!exec(db, init.c_str())) {
      auto err = db_error(db, "cannot create the schema");
      exec(db, "ROLLBACK");
      sqlite3_close_v2(db);
      result.failure = err;
      return result;
    }
    if (!read_header(false))
      return unreadable();
  }
  if (*app == application_id && *version < schema_version) {
    // An index of an older schema: derived data, so it is emptied and set up
    // again (under the write lock, checking the version again), and the next
    // update indexes the files anew.
    if (!exec(db, "BEGIN IMMEDIATE")) {
      locked = busy(db);
      why = sqlite3_errmsg(db);
      return unreadable();
    }
    if (!read_header(true)) {
      exec(db, "ROLLBACK");
      return unreadable();
    }
    std::string init;
    if (*app == application_id && *version < schema_version) {
      init += drop_sql;
      init += schema_sql;
      init += "PRAGMA user_version=" + std::to_string(schema_version) + ";";
    }
    init += "COMMIT;";
    if (!exec(db, init.c_str())) {
      auto err = db_error(db, "cannot rebuild the index of an older schema");
      exec(db, "ROLLBACK");
      sqlite3_close_v2(db);
      result.failure = err;
      return result;
    }
    // Give the old index's pages back (best effort: another connection may
    // be reading; the pages are reused by the next update anyway).
    exec(db, "VACUUM");
    if (!read_header(false))
      return unreadable();
  }
  if (*app != application_id) {
    return close_fail(sdk::errc::bad_request,
                      "a SQLite database of another application (left "
                      "untouched)");
  } else if (*version != schema_version) {
    return close_fail(sdk::errc::bad_request,
                      "schema version " + std::to_string(*version)
                        + ", this build reads version "
                        + std::to_string(schema_version));
  } else if (!enable_wal(db)) {
    return close_fail(sdk::errc::internal,
                      std::string{"cannot enable WAL: "} + sqlite3_errmsg(db));
  }
  // WAL with synchronous=NORMAL: a commit does not wait for the disk (a
  // power cut may lose the last commits of an update, never the database).
  // A larger page cache keeps FTS5's segment merges in memory; reads map the
  // file.
  exec(db, "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536; "
           "PRAGMA mmap_size=1073741824;");
  auto state = std::make_unique<search_state>();
  state->languages = languages;
  if (!state->init(db)) {
    state.reset();
    return close_fail(sdk::errc::internal,
                      std::string{"cannot set up full-text search: "}
                        + sqlite3_errmsg(db));
  }
  result.index = std::make_unique<corpus_index>(token{}, db, path);
  result.index->state_ = std::move(state);
  return result;
}

// -- updating -----------------------------------------------------------------

update_result corpus_index::update(const std::vector<std::string>& paths,
                                   const update_options& options) {
  std::lock_guard<std::mutex> guard{mtx_};
  update_result result;
  fetch::local_file_limits limits;
  limits.max_html_bytes = options.max_html_bytes;
  limits.max_pdf_bytes = options.max_pdf_bytes;
  // Every path is opened as found by the walk (links resolved already):
  // a link swapped in later is refused.
  limits.follow_symlinks = false;
  // Collect the files under every root.
  std::map<std::string, file_stat> found;
  std::vector<std::string> scanned;
  // Files found but not indexed: an earlier entry of theirs is removed.
  std::set<std::string> skipped;
  auto skip = [&](const std::string& path, const std::string& why) {
    if (!skipped.insert(path).second)
      return;
    result.notes.push_back("skipped " + path + ": " + why);
    ++result.skipped;
  };
  // Records a regular file (its real path) of a type that is indexed.
  auto consider = [&](const fs::path& p) {
    auto type = type_of(p);
    if (type == file_type::none)
      return;
    std::error_code ec;
    auto size = fs::file_size(p, ec);
    if (ec)
      return;
    auto mtime = fs::last_write_time(p, ec);
    if (ec)
      return;
    // Over the cap: not read at all (the reader checks again when it reads).
    bool pdf = type == file_type::pdf;
    if (static_cast<int64_t>(size)
        > (pdf ? limits.max_pdf_bytes : limits.max_html_bytes)) {
      skip(p.string(), fetch::too_large_error(limits, pdf).message);
      return;
    }
    found[p.string()] = file_stat{
      static_cast<int64_t>(mtime.time_since_epoch().count()),
      static_cast<int64_t>(size), type};
  };
  // A symbolic link met by the walk of `root`: followed only to a file
  // inside the root, which is then recorded under its own path (so it is
  // indexed once, however many links lead to it). Links to folders are not
  // followed: the walk reaches what is inside the root anyway, and links
  // cannot make it loop.
  auto consider_link = [&](const fs::path& link, const fs::path& root) {
    std::error_code ec;
    auto target = fs::canonical(link, ec);
    auto interesting = type_of(link) != file_type::none;
    if (ec) {
      if (interesting)
        skip(link.string(), "a broken symbolic link");
      return;
    }
    auto status = fs::status(target, ec);
    interesting = interesting || type_of(target) != file_type::none
                  || fs::is_directory(status);
    if (!under(target.string(), root.string())) {
      if (interesting)
        skip(link.string(), "a symbolic link to " + target.string()
                              + ", outside the folder being indexed ("
                              + root.string() + ")");
      return;
    }
    if (fs::is_regular_file(status))
      consider(target);
    else if (!fs::is_directory(status) && interesting)
      skip(link.string(),
           "a symbolic link to a file that "
             + fetch::describe_file_type(status.type()));
  };
  for (const auto& raw : paths) {
    if (raw.empty()) {
      result.notes.push_back("skipped an empty path");
      continue;
    }
    std::error_code ec;
    // A path named by the user is taken as it is, links resolved: that is
    // the folder (or file) being indexed.
    auto root = fs::weakly_canonical(fs::absolute(raw, ec), ec);
    if (ec)
      root = fs::absolute(raw, ec).lexically_normal();
    auto root_status = fs::status(root, ec);
    if (!fs::exists(root_status)) {
      // Whatever the index holds under a vanished path is gone too.
      result.notes.push_back("not found: " + raw);
      scanned.push_back(root.string());
      continue;
    }
    if (fs::is_regular_file(root_status)) {
      scanned.push_back(root.string());
      if (type_of(root) == file_type::none)
        result.notes.push_back("skipped " + raw
                               + ": not a Markdown, text, HTML or PDF file");
      else
        consider(root);
      continue;
    }
    if (!fs::is_directory(root_status)) {
      // Never opened: a FIFO would block.
      skip(root.string(), fetch::describe_file_type(root_status.type()));
      continue;
    }
    scanned.push_back(root.string());
    fs::recursive_directory_iterator it{
      root, fs::directory_options::skip_permission_denied, ec};
    if (ec) {
      result.notes.push_back("cannot read " + raw + ": " + ec.message());
      continue;
    }
    for (; it != fs::recursive_directory_iterator{}; it.increment(ec)) {
      if (ec)
        break;
      const auto& entry = *it;
      auto name = entry.path().filename().string();
      auto status = entry.symlink_status(ec);
      if (ec)
        continue;
      if (!name.empty() && name.front() == '.') {
        if (fs::is_directory(status))
          it.disable_recursion_pending();
        continue;
      }
      if (fs::is_symlink(status))
        consider_link(entry.path(), root);
      else if (fs::is_regular_file(status))
        consider(entry.path());
      else if (!fs::is_directory(status)
               && type_of(entry.path()) != file_type::none)
        // FIFOs, sockets and devices are never opened.
        skip(entry.path().string(), fetch::describe_file_type(status.type()));
    }
  }
  // What the index holds (a snapshot: each batch checks again under the
  // write lock, as another process may be updating the same database).
  std::map<std::string, existing_doc> known;
  {
    statement st{db_, "SELECT id, path, mtime, size, hash FROM documents"};
    if (!st.ok()) {
      result.failure = db_error(db_, "cannot read the index");
      return result;
    }
    int rc = SQLITE_ROW;
    while ((rc = st.step()) == SQLITE_ROW)
      known[st.text_at(1)] = existing_doc{st.int_at(0), st.int_at(2),
                                          st.int_at(3), st.text_at(4)};
    if (rc != SQLITE_DONE) {
      result.failure = db_error(db_, "cannot read the index");
      return result;
    }
  }
  // Files are read and extracted outside any transaction, by a reading
  // thread that stays a few files ahead (so reading and extracting overlap
  // with indexing); their writes are queued and committed in short batches.
  struct file_outcome {
    enum state_t { unchanged, failed, touched, unreadable, read };
    state_t state = read;
    const std::string* path = nullptr;
    const file_stat* info = nullptr;
    // failed: why.
    std::string error;
    // From document_text: a remark, and whether the file is binary data.
    std::string note;
    bool binary = false;
    pending_write write;
  };
  // The reading thread tokenizes the passages it prepares (see
  // token_recording); without a recorder they are tokenized as inserted.
  token_recorder recorder;
  bool recording = options.tokenize_while_reading && recorder.init(db_);
  auto prepare = [&](const std::string& path, const file_stat& info) {
    file_outcome out;
    out.path = &path;
    out.info = &info;
    auto old = known.find(path);
    if (old != known.end() && old->second.mtime == info.mtime
        && old->second.size == info.size) {
      out.state = file_outcome::unchanged;
      return out;
    }
    if (options.before_read)
      options.before_read(path);
    auto read = fetch::read_local_file(path, limits);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      out.state = file_outcome::failed;
      out.error = err->message;
      return out;
    }
    auto bytes = &std::get<std::string>(read);
    auto& w = out.write;
    w.path = path;
    w.mtime = info.mtime;
    w.size = info.size;
    w.hash = content_hash(*bytes);
    if (old != known.end() && old->second.hash == w.hash) {
      w.kind = pending_write::touch;
      out.state = file_outcome::touched;
      return out;
    }
    auto doc = document_text(path, info.type, std::move(*bytes));
    out.binary = doc.binary;
    out.note = std::move(doc.note);
    if (doc.unreadable) {
      out.state = file_outcome::unreadable;
      return out;
    }
    w.kind = pending_write::upsert;
    w.title = std::move(doc.title);
    w.text = std::move(doc.text);
    w.passages = split_passages(w.text);
    if (w.title.empty() && info.type != file_type::pdf)
      w.title = markdown_title(w.text);
    if (w.title.empty() && info.type == file_type::text)
      w.title = text_title(w.text);
    if (w.title.empty())
      w.title = fs::path{path}.stem().string();
    // The text tells its language better than a page's declaration
    // (templates often declare "en" whatever the text).
    w.language = detect_language(w.text);
    if (w.language.empty())
      w.language = doc.declared_language;
    if (recording && w.text.size() <= max_recorded_bytes)
      recorder.record(stem_language(w.language), w.text, w.passages, w.tokens);
    if (auto date = iso_date(doc.published); !date.empty()) {
      w.date = std::move(date);
      w.date_source = info.type == file_type::pdf ? "pdf" : "html";
    } else {
      w.date = mtime_date(path);
      w.date_source = "mtime";
    }
    return out;
  };
  // The queue between the reading thread and this one: at most two batches
  // of files, or 96 MB of text and recorded tokens (one larger file always
  // fits), besides the run of files this thread took from it last. The
  // reading thread stays a batch ahead while this one writes a batch.
  constexpr size_t max_ahead_files = 2 * batch_files;
  constexpr size_t max_ahead_bytes = 96 * 1024 * 1024;
  std::mutex queue_mtx;
  std::condition_variable queue_cv;
  std::deque<file_outcome> queue;
  size_t queued_bytes = 0;
  bool reader_done = false;
  bool stop_reading = false;
  std::thread reader{[&] {
    for (const auto& [path, info] : found) {
      file_outcome out;
      try {
        out = prepare(path, info);
      } catch (const std::exception& e) {
        out = file_outcome{};
        out.state = file_outcome::failed;
        out.path = &path;
        out.info = &info;
        out.error = std::string{"cannot read: "} + e.what();
      }
      std::unique_lock<std::mutex> lock{queue_mtx};
      queue_cv.wait(lock, [&] {
        return stop_reading || queue.empty()
               || (queue.size() < max_ahead_files
                   && queued_bytes < max_ahead_bytes);
      });
      if (stop_reading)
        return;
      queued_bytes += out.write.text.size() + out.write.tokens.bytes.size()
                      + out.write.tokens.tokens.size()
                          * sizeof(token_recording::token);
      queue.push_back(std::move(out));
      if (queue.size() == 1)
        queue_cv.notify_all();
    }
    std::lock_guard<std::mutex> lock{queue_mtx};
    reader_done = true;
    queue_cv.notify_all();
  }};
  // Stops and joins the reading thread on every way out of this function.
  struct reader_guard {
    std::function<void()> stop;
    ~reader_guard() {
      stop();
    }
  } guard_reader{[&] {
    {
      std::lock_guard<std::mutex> lock{queue_mtx};
      stop_reading = true;
    }
    queue_cv.notify_all();
    if (reader.joinable())
      reader.join();
  }};
  std::vector<pending_write> batch;
  size_t batch_size = 0;
  auto batch_started = std::chrono::steady_clock::now();
  update_progress progress;
  progress.files_total = found.size();
  for (const auto& [path, info] : found)
    progress.bytes_total += static_cast<uint64_t>(info.size);
  auto flush = [&] {
    if (batch.empty())
      return true;
    auto ok = write_batch(batch, result);
    batch.clear();
    batch_size = 0;
    return ok;
  };
  auto file_done = [&](const file_stat& info) {
    ++progress.files_done;
    progress.bytes_done += static_cast<uint64_t>(info.size);
    if (options.progress)
      options.progress(progress);
  };
  // What was taken from the queue at once (everything it held: one wake-up
  // per run of files, not per file).
  std::deque<file_outcome> ready;
  for (;;) {
    if (ready.empty()) {
      {
        std::unique_lock<std::mutex> lock{queue_mtx};
        queue_cv.wait(lock, [&] { return !queue.empty() || reader_done; });
        if (queue.empty())
          break;
        ready.swap(queue);
        queued_bytes = 0;
      }
      queue_cv.notify_all();
    }
    auto out = std::move(ready.front());
    ready.pop_front();
    const auto& path = *out.path;
    const auto& info = *out.info;
    if (out.binary)
      skipped.insert(path);
    if (!out.note.empty())
      result.notes.push_back(std::move(out.note));
    switch (out.state) {
      case file_outcome::unchanged:
        ++result.unchanged;
        file_done(info);
        continue;
      case file_outcome::failed:
        skip(path, out.error);
        file_done(info);
        continue;
      case file_outcome::unreadable:
        ++result.skipped;
        file_done(info);
        continue;
      case file_outcome::touched:
        ++result.unchanged;
        break;
      case file_outcome::read:
        break;
    }
    if (batch.empty())
      batch_started = std::chrono::steady_clock::now();
    batch_size += out.write.text.size() + 256;
    batch.push_back(std::move(out.write));
    file_done(info);
    if ((batch_size >= batch_bytes || batch.size() >= batch_files
         || std::chrono::steady_clock::now() - batch_started >= batch_age)
        && !flush())
      return result;
  }
  guard_reader.stop();
  for (const auto& [path, doc] : known) {
    // A file skipped now (a link out of the folder, binary data, too
    // large, ...) loses what an earlier update indexed of it.
    if (skipped.count(path) == 0) {
      if (found.count(path) != 0)
        continue;
      // (A structured binding cannot be captured in C++17: name it.)
      const auto& file = path;
      bool in_scope = std::any_of(scanned.begin(), scanned.end(),
                                  [&file](const auto& root) {
                                    return under(file, root);
                                  });
      std::error_code ec;
      if (!in_scope || fs::exists(path, ec))
        continue; // outside this update, or still there but not indexed
    }
    pending_write w;
    w.kind = pending_write::remove;
    w.path = path;
    batch.push_back(std::move(w));
  }
  if (!flush())
    return result;
  if (!refresh_term_stats())
    result.notes.push_back("could not refresh the term statistics: "
                           + std::string{sqlite3_errmsg(db_)});
  // Keep the WAL file small: its pages are in the database now.
  exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
  return result;
}

bool corpus_index::write_batch(std::vector<pending_write>& batch,
                               update_result& result) {
  auto fail = [&](const std::string& what) {
    result.failure = db_error(db_, what);
    exec(db_, "ROLLBACK");
    return false;
  };
  if (!exec(db_, "BEGIN IMMEDIATE")) {
    result.failure = db_error(db_, "cannot start a transaction");
    return false;
  }
  statement find{db_, "SELECT id, hash FROM documents WHERE path=?1"};
  statement touch{db_, "UPDATE documents SET mtime=?2, size=?3 WHERE id=?1"};
  statement insert_doc{db_, "INSERT INTO documents(path, title, mtime, size, "
                            "hash, date, date_source, body, language) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"};
  statement update_doc{db_, "UPDATE documents SET title=?2, mtime=?3, "
                            "size=?4, hash=?5, date=?6, date_source=?7, "
                            "body=?8, language=?9 WHERE id=?1"};
  statement old_body{db_, "SELECT body, language, title FROM documents "
                          "WHERE id=?1"};
  statement old_passages{db_, "SELECT id, start, length, heading FROM "
                              "passages WHERE document_id=?1"};
  statement unindex{db_, "INSERT INTO passages_fts(passages_fts, rowid, "
                         "heading, body) VALUES ('delete', ?1, ?2, ?3)"};
  statement unindex_title{db_, "INSERT INTO titles_fts(titles_fts, rowid, "
                               "title) VALUES ('delete', ?1, ?2)"};
  statement index_title{db_, "INSERT INTO titles_fts(rowid, title) "
                             "VALUES (?1, ?2)"};
  statement drop_passages{db_, "DELETE FROM passages WHERE document_id=?1"};
  statement drop_doc{db_, "DELETE FROM documents WHERE id=?1"};
  statement insert_passage{db_, "INSERT INTO passages(document_id, start, "
                                "length, heading) VALUES (?1, ?2, ?3, ?4)"};
  statement index_passage{db_, "INSERT INTO passages_fts(rowid, heading, "
                               "body) VALUES (?1, ?2, ?3)"};
  if (!find.ok() || !touch.ok() || !insert_doc.ok() || !update_doc.ok()
      || !old_body.ok() || !old_passages.ok() || !unindex.ok()
      || !drop_passages.ok() || !drop_doc.ok() || !insert_passage.ok()
      || !index_passage.ok() || !unindex_title.ok() || !index_title.ok())
    return fail("cannot prepare the update");
  bool ok = true;
  size_t passages_changed = 0;
  auto run = [&](statement& st) {
    auto rc = st.step();
    st.reset();
    if (rc != SQLITE_DONE)
      ok = false;
  };
  // Takes a document's title and passages out of the full-text indexes (a
  // contentless FTS5 table needs the text that was indexed) and deletes the
  // passages.
  auto drop_all = [&](int64_t id) {
    std::string body;
    old_body.bind(1, id);
    if (old_body.step() == SQLITE_ROW) {
      body = old_body.text_at(0);
      // Deleted with the tokens it was indexed with.
      state_->languages->document_language = stem_language(old_body.text_at(1));
      auto old_title = old_body.text_at(2);
      unindex_title.bind(1, id);
      unindex_title.bind(2, old_title);
      run(unindex_title);
    }
    old_body.reset();
    old_passages.bind(1, id);
    int rc = SQLITE_ROW;
    while (ok && (rc = old_passages.step()) == SQLITE_ROW) {
      auto start = static_cast<size_t>(old_passages.int_at(1));
      auto length = static_cast<size_t>(old_passages.int_at(2));
      if (start > body.size() || length > body.size() - start) {
        ok = false;
        break;
      }
      auto heading = old_passages.text_at(3);
      unindex.bind(1, old_passages.int_at(0));
      unindex.bind(2, heading);
      unindex.bind(3, std::string_view{body}.substr(start, length));
      run(unindex);
      ++passages_changed;
    }
    if (rc != SQLITE_DONE)
      ok = false;
    old_passages.reset();
    drop_passages.bind(1, id);
    run(drop_passages);
  };
  for (auto& w : batch) {
    if (!ok)
      break;
    // What the index holds now, under the write lock (another connection
    // may have written the same file since the update began).
    find.bind(1, w.path);
    int64_t id = 0;
    std::string hash;
    if (find.step() == SQLITE_ROW) {
      id = find.int_at(0);
      hash = find.text_at(1);
    }
    find.reset();
    if (w.kind == pending_write::upsert && id != 0 && hash == w.hash) {
      w.kind = pending_write::touch;
      ++result.unchanged;
    }
    switch (w.kind) {
      case pending_write::touch:
        if (id != 0) {
          touch.bind(1, id);
          touch.bind(2, w.mtime);
          touch.bind(3, w.size);
          run(touch);
        }
        break;
      case pending_write::remove:
        if (id != 0) {
          drop_all(id);
          drop_doc.bind(1, id);
          run(drop_doc);
          ++result.removed;
        }
        break;
      case pending_write::upsert: {
        if (id != 0) {
          drop_all(id);
          update_doc.bind(1, id);
          update_doc.bind(2, w.title);
          update_doc.bind(3, w.mtime);
          update_doc.bind(4, w.size);
          update_doc.bind(5, w.hash);
          update_doc.bind(6, w.date);
          update_doc.bind(7, w.date_source);
          update_doc.bind(8, w.text);
          update_doc.bind(9, w.language);
          run(update_doc);
          ++result.updated;
        } else {
          insert_doc.bind(1, w.path);
          insert_doc.bind(2, w.title);
          insert_doc.bind(3, w.mtime);
          insert_doc.bind(4, w.size);
          insert_doc.bind(5, w.hash);
          insert_doc.bind(6, w.date);
          insert_doc.bind(7, w.date_source);
          insert_doc.bind(8, w.text);
          insert_doc.bind(9, w.language);
          run(insert_doc);
          id = sqlite3_last_insert_rowid(db_);
          ++result.added;
        }
        std::string_view text = w.text;
        state_->languages->document_language = stem_language(w.language);
        index_title.bind(1, id);
        index_title.bind(2, w.title);
        run(index_title);
        for (const auto& p : w.passages) {
          insert_passage.bind(1, id);
          insert_passage.bind(2, static_cast<int64_t>(p.offset));
          insert_passage.bind(3, static_cast<int64_t>(p.length));
          insert_passage.bind(4, p.heading);
          run(insert_passage);
          index_passage.bind(1, sqlite3_last_insert_rowid(db_));
          index_passage.bind(2, p.heading);
          auto body = text.substr(p.offset, p.length);
          index_passage.bind(3, body);
          // The tokens the reading thread recorded, if it did.
          auto& languages = *state_->languages;
          auto n = static_cast<size_t>(&p - w.passages.data());
          if (n < w.tokens.bounds.size()) {
            const auto& b = w.tokens.bounds[n];
            languages.replay[0] = {p.heading, &w.tokens, b[0], b[1]};
            languages.replay[1] = {body, &w.tokens, b[1], b[2]};
            languages.replay_count = 2;
          }
          run(index_passage);
          languages.replay_count = 0;
          ++result.passages;
          ++passages_changed;
        }
        break;
      }
    }
  }
  statement changed{db_, "UPDATE meta SET value=value+?1 WHERE key='changed'"};
  if (ok && changed.ok()) {
    changed.bind(1, static_cast<int64_t>(passages_changed));
    run(changed);
  }
  if (!ok || !changed.ok() || !exec(db_, "COMMIT"))
    return fail("cannot update the index");
  return true;
}

bool corpus_index::refresh_term_stats() {
  auto changed = query_int(db_, "SELECT value FROM meta WHERE key='changed'");
  auto base = query_int(db_, "SELECT value FROM meta WHERE "
                             "key='stats_passages'");
  if (!changed || !base)
    return false;
  // Document frequencies change IDFs little until a tenth of the index
  // changed; terms missing from the table are counted at query time.
  if (*changed == 0 || *changed * 10 < *base)
    return true;
  auto passages = query_int(db_, "SELECT count(*) FROM passages").value_or(0);
  auto min_df = std::max<int64_t>(64, passages / 1000);
  // Read in a read transaction (the whole index is scanned), then written
  // under the write lock.
  std::vector<std::pair<std::string, int64_t>> common;
  {
    statement st{db_, "SELECT term, doc FROM passages_vocab"};
    if (!st.ok())
      return false;
    int rc = SQLITE_ROW;
    while ((rc = st.step()) == SQLITE_ROW) {
      auto df = st.int_at(1);
      if (df >= min_df)
        common.emplace_back(st.text_at(0), df);
    }
    if (rc != SQLITE_DONE)
      return false;
  }
  if (!exec(db_, "BEGIN IMMEDIATE"))
    return false;
  bool ok = exec(db_, "DELETE FROM terms");
  statement insert{db_, "INSERT INTO terms(term, df) VALUES (?1, ?2)"};
  ok = ok && insert.ok();
  for (const auto& [term, df] : common) {
    if (!ok)
      break;
    insert.bind(1, term);
    insert.bind(2, df);
    ok = insert.step() == SQLITE_DONE;
    insert.reset();
  }
  statement meta{db_, "UPDATE meta SET value=CASE key WHEN 'changed' THEN 0 "
                      "ELSE ?1 END"};
  ok = ok && meta.ok();
  if (ok) {
    meta.bind(1, passages);
    ok = meta.step() == SQLITE_DONE;
  }
  if (!ok || !exec(db_, "COMMIT")) {
    exec(db_, "ROLLBACK");
    return false;
  }
  return true;
}

// -- querying -----------------------------------------------------------------

search_result corpus_index::search(const std::string& query, size_t limit) {
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
    double idf = 0;
    int64_t df = 0;
  };
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
    // A phrase is at most as frequent as its rarest word.
    u.df = std::numeric_limits<int64_t>::max();
    for (const auto& t : tokens)
      u.df = std::min(u.df, state.frequency(db_, t));
    auto df = static_cast<double>(u.df);
    u.idf = std::max(std::log((n - df + 0.5) / (df + 0.5)), 1e-6);
    (must ? required : optional).push_back(std::move(u));
  };
  for (const auto& p : parsed.phrases)
    add_unit(p, true);
  for (const auto& w : parsed.words)
    add_unit({w}, false);
  if (required.empty() && optional.empty())
    return result;
  // The words for the snippets.
  auto terms = parsed.words;
  for (const auto& p : parsed.phrases)
    terms.insert(terms.end(), p.begin(), p.end());
  // Rarest first.
  std::sort(optional.begin(), optional.end(),
            [](const unit& a, const unit& b) { return a.idf > b.idf; });
  auto all = required;
  all.insert(all.end(), optional.begin(), optional.end());
  // Top-k pruning (MaxScore): only passages with one of the `essential`
  // rarest units are ranked, which is exact as long as the best documents
  // found score more than a passage with all the other units could (each
  // adds at most idf * (k1 + 1)); else the next unit becomes essential.
  // Required phrases (quoted) make every phrase essential instead.
  //
  // The first essential units: the rarest, and more while the others could
  // outscore a passage with one match of the rarest (the check below would
  // fail).
  size_t essential = 0;
  if (required.empty()) {
    double rest = 0;
    for (const auto& u : optional)
      rest += u.idf * (bm25_k1 + 1);
    while (essential < optional.size()
           && (essential == 0 || rest >= optional[0].idf * 1.5)) {
      rest -= optional[essential].idf * (bm25_k1 + 1);
      ++essential;
    }
  }
  // FTS5's own top-k path (ORDER BY rank LIMIT k) ranks the passages; the
  // best passage of each document counts. When the top k passages hold
  // fewer than `limit` documents, look deeper. A path filter is checked per
  // passage in the same statement.
  // Without a path filter, quarry_collect keeps the best rows as the
  // statement runs through them (the statement yields none).
  const char* plain_sql = R"sql(
    SELECT count(*) FROM passages_fts
    WHERE passages_fts MATCH ?1 AND quarry_collect(passages_fts))sql";
  const char* filtered_sql = R"sql(
    SELECT f.rowid, f.rank FROM passages_fts f
    JOIN passages p ON p.id = f.rowid
    JOIN documents d ON d.id = p.document_id
    WHERE f.passages_fts MATCH ?1 AND f.rank MATCH ?7
      AND instr(d.path, ?3) > 0 AND instr(d.path, ?4) > 0
      AND instr(d.path, ?5) > 0 AND instr(d.path, ?6) > 0
    ORDER BY f.rank LIMIT ?2)sql";
  bool filtered = !parsed.paths.empty();
  statement rank{db_, filtered ? filtered_sql : plain_sql};
  statement info{db_, R"sql(
    SELECT p.document_id, p.start, p.length, p.heading, d.path, d.title,
           d.date, d.date_source, d.language
    FROM passages p JOIN documents d ON d.id = p.document_id
    WHERE p.id = ?1)sql"};
  if (!rank.ok() || !info.ok()) {
    result.failure = db_error(db_, "cannot prepare the search");
    return result;
  }
  constexpr size_t max_depth = 1 << 14;
  size_t depth = std::max<size_t>(limit * 4, 32);
  // The best passages found (passage id, score).
  std::vector<std::pair<int64_t, double>> ranked;
  std::vector<std::pair<int64_t, double>> best; // one per document
  std::vector<int64_t> best_docs;
  // The ranking weights of all units (the selecting phrases, which come
  // first in the expression, get 0) and the expression that ranks them.
  std::string any;
  std::string all_weights;
  for (size_t i = 0; i < all.size(); ++i) {
    any += (i == 0 ? "" : " OR ") + all[i].match;
    char buf[40];
    // (FTS5 reads no exponents in rank arguments.)
    std::snprintf(buf, sizeof(buf), "%s%.9f", i == 0 ? "" : ", ", all[i].idf);
    all_weights += buf;
  }
  // Ranks the top `depth` passages of the rows `select` (or all rows when
  // empty) selects, made of `selecting` phrases, into `ranked`.
  auto run = [&](const std::string& select, size_t selecting) {
    std::string weights = "quarry_rank(";
    for (size_t i = 0; i < selecting; ++i)
      weights += "0, ";
    weights += all_weights + ")";
    auto match = select.empty() ? any : "(" + select + ") AND (" + any + ")";
    rank.reset();
    rank.bind(1, match);
    if (!filtered) {
      top_passages top;
      top.k = depth;
      for (size_t i = 0; i < selecting; ++i)
        top.weights.push_back(0);
      for (const auto& u : all)
        top.weights.push_back(u.idf);
      state.ranking.top = &top;
      auto rc = rank.step();
      state.ranking.top = nullptr;
      if (rc != SQLITE_ROW)
        return std::optional<size_t>{};
      for (const auto& [score, id] : top.heap)
        ranked.emplace_back(id, -score);
      return std::optional<size_t>{std::min(top.matched, depth)};
    }
    rank.bind(2, static_cast<int64_t>(depth));
    rank.bind(7, weights);
    for (size_t i = 0; i < 4; ++i)
      rank.bind(static_cast<int>(3 + i),
                i < parsed.paths.size() ? std::string_view{parsed.paths[i]}
                                        : std::string_view{""});
    int rc = SQLITE_ROW;
    size_t rows = 0;
    while ((rc = rank.step()) == SQLITE_ROW) {
      ranked.emplace_back(rank.int_at(0), rank.double_at(1));
      ++rows;
    }
    if (rc != SQLITE_DONE)
      return std::optional<size_t>{};
    return std::optional<size_t>{rows};
  };
  // Units [from, to) OR'ed (or AND'ed, for required phrases).
  auto group = [&](const std::vector<unit>& units, size_t from, size_t to,
                   const char* op) {
    std::string out;
    for (size_t i = from; i < to; ++i)
      out += (i == from ? "" : op) + units[i].match;
    return out;
  };
  // Whether the last run reached `depth` (there may be more rows).
  bool truncated = false;
  auto fail = [&] {
    result.failure = db_error(db_, "search failed");
    return result;
  };
  // The title bonus of each document whose title holds a unit.
  std::map<int64_t, double> title_bonus;
  {
    statement titles{db_, "SELECT rowid FROM titles_fts WHERE titles_fts "
                          "MATCH ?1 LIMIT ?2"};
    if (!titles.ok())
      return fail();
    std::vector<int64_t> ids;
    for (const auto& u : all) {
      ids.clear();
      titles.reset();
      titles.bind(1, u.match);
      titles.bind(2, static_cast<int64_t>(max_title_df + 1));
      int rc = SQLITE_ROW;
      while ((rc = titles.step()) == SQLITE_ROW)
        ids.push_back(titles.int_at(0));
      if (rc != SQLITE_DONE)
        return fail();
      if (ids.size() > max_title_df)
        continue;
      for (auto id : ids)
        title_bonus[id] += title_weight * u.idf;
    }
  }
  // The documents with the largest bonuses (at most `limit`) are ranked
  // whatever their passages hold: their best passages, in `title_best`
  // (document, passage, score). Any other document's bonus is at most
  // `title_rest`.
  std::vector<std::pair<int64_t, double>> title_docs(title_bonus.begin(),
                                                     title_bonus.end());
  std::stable_sort(title_docs.begin(), title_docs.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  double title_rest = title_docs.size() > limit ? title_docs[limit].second : 0;
  double top_bonus = title_docs.empty() ? 0 : title_docs.front().second;
  if (title_docs.size() > limit)
    title_docs.resize(limit);
  struct candidate {
    int64_t document = 0;
    int64_t passage = 0;
    double score = 0; // positive: higher is better
  };
  std::vector<candidate> title_best;
  if (!title_docs.empty()) {
    // A document's passages have consecutive ids (write_batch inserts them
    // in one run under the write lock).
    statement range{db_, "SELECT min(p.id), max(p.id), d.path FROM passages p "
                         "JOIN documents d ON d.id = p.document_id "
                         "WHERE p.document_id=?1"};
    statement within{db_, R"sql(
      SELECT rowid, rank FROM passages_fts
      WHERE passages_fts MATCH ?1 AND rank MATCH ?2
        AND rowid BETWEEN ?3 AND ?4
      ORDER BY rank LIMIT 1)sql"};
    if (!range.ok() || !within.ok())
      return fail();
    std::string weights = "quarry_rank(";
    for (size_t i = 0; i < required.size(); ++i)
      weights += "0, ";
    weights += all_weights + ")";
    auto match = required.empty()
                   ? any
                   : "(" + group(required, 0, required.size(), " AND ")
                       + ") AND (" + any + ")";
    for (const auto& [doc, bonus] : title_docs) {
      range.reset();
      range.bind(1, doc);
      if (range.step() != SQLITE_ROW
          || sqlite3_column_type(range.get(), 0) == SQLITE_NULL)
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
      within.reset();
      within.bind(1, match);
      within.bind(2, weights);
      within.bind(3, lo);
      within.bind(4, hi);
      auto rc = within.step();
      if (rc == SQLITE_ROW)
        title_best.push_back({doc, within.int_at(0), -within.double_at(1) + bonus});
      else if (rc != SQLITE_DONE)
        return fail();
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
      rows = run(group(required, 0, required.size(), " AND "),
                 required.size());
    else if (essential >= optional.size())
      rows = run({}, 0);
    else
      rows = run(group(optional, 0, essential, " OR "), essential);
    truncated = rows && *rows == depth;
    return rows.has_value();
  };
  if (!rank_all())
    return fail();
  std::vector<candidate> candidates;
  for (;;) {
    // Best first; the best passage of each document counts, plus the
    // document's title bonus.
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) {
                       return a.second < b.second;
                     });
    if (ranked.size() > depth)
      ranked.resize(depth);
    candidates = title_best;
    std::set<int64_t> seen;
    for (const auto& c : title_best)
      seen.insert(c.document);
    // The `limit`-th best score of the candidates so far, worked out again
    // only after a candidate was added.
    std::vector<double> scores;
    double kth_cached = 0;
    bool kth_known = false;
    auto kth_score = [&] {
      if (kth_known)
        return kth_cached;
      kth_known = true;
      kth_cached = -std::numeric_limits<double>::infinity();
      if (candidates.size() >= limit) {
        scores.clear();
        for (const auto& c : candidates)
          scores.push_back(c.score);
        std::nth_element(scores.begin(), scores.begin() + static_cast<long>(limit - 1),
                         scores.end(), std::greater<>{});
        kth_cached = scores[limit - 1];
      }
      return kth_cached;
    };
    size_t from_ranked = 0;
    for (const auto& [id, score] : ranked) {
      // Later passages score less: done when even the largest bonus
      // cannot lift one into the top `limit`.
      if (from_ranked >= limit && -score + top_bonus <= kth_score())
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
                     [](const candidate& a, const candidate& b) {
                       return a.score > b.score;
                     });
    if (candidates.size() > limit)
      candidates.resize(limit);
    if (from_ranked < limit && truncated && depth < max_depth) {
      depth *= 4;
      if (!rank_all())
        return fail();
      continue;
    }
    if (!required.empty() || essential >= optional.size())
      break;
    // A document not ranked yet holds no essential unit: its passages
    // score at most `rest`, its title at most `title_rest`.
    double rest = 0;
    for (size_t i = essential; i < optional.size(); ++i)
      rest += optional[i].idf * (bm25_k1 + 1);
    double kth = candidates.size() >= limit ? candidates[limit - 1].score : 0;
    if (kth > rest + title_rest)
      break;
    // Not sure yet: the next unit becomes essential, and only its rows
    // without an essential unit (the others are ranked already) are added.
    auto next = optional[essential].match + " NOT ("
                + group(optional, 0, essential, " OR ") + ")";
    auto rows = run(next, essential + 1);
    if (!rows)
      return fail();
    truncated = truncated || *rows == depth;
    ++essential;
  }
  best.clear();
  best_docs.clear();
  for (const auto& c : candidates) {
    best.emplace_back(c.passage, -c.score);
    best_docs.push_back(c.document);
  }
  for (size_t i = 0; i < best.size(); ++i) {
    info.reset();
    info.bind(1, best[i].first);
    if (info.step() != SQLITE_ROW)
      continue;
    search_hit hit;
    hit.passage_id = best[i].first;
    hit.document_id = best_docs[i];
    auto start = info.int_at(1);
    auto length = info.int_at(2);
    hit.heading = info.text_at(3);
    hit.path = info.text_at(4);
    hit.url = file_url(hit.path);
    hit.title = info.text_at(5);
    hit.date = info.text_at(6);
    hit.date_source = info.text_at(7);
    hit.language = info.text_at(8);
    hit.score = best[i].second;
    // Only the passage's bytes of the document's text are read.
    sqlite3_blob* blob = nullptr;
    if (start >= 0 && length >= 0
        && sqlite3_blob_open(db_, "main", "documents", "body",
                             hit.document_id, 0, &blob)
             == SQLITE_OK
        && start + length <= sqlite3_blob_bytes(blob)) {
      hit.text.resize(static_cast<size_t>(length));
      if (sqlite3_blob_read(blob, hit.text.data(), static_cast<int>(length),
                            static_cast<int>(start))
          != SQLITE_OK)
        hit.text.clear();
    }
    sqlite3_blob_close(blob);
    hit.snippet = make_snippet(hit.text, terms);
    result.hits.push_back(std::move(hit));
  }
  return result;
}

std::optional<stored_document> corpus_index::get_document(int64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  statement st{db_, "SELECT path, title, body, date, date_source, language "
                    "FROM documents WHERE id=?1"};
  if (!st.ok())
    return std::nullopt;
  st.bind(1, id);
  if (st.step() != SQLITE_ROW)
    return std::nullopt;
  stored_document result;
  result.id = id;
  result.path = st.text_at(0);
  result.url = file_url(result.path);
  result.title = st.text_at(1);
  result.text = st.text_at(2);
  result.date = st.text_at(3);
  result.date_source = st.text_at(4);
  result.language = st.text_at(5);
  return result;
}

std::optional<stored_document>
corpus_index::find_document(const std::string& path) {
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    statement st{db_, "SELECT id FROM documents WHERE path=?1"};
    if (!st.ok())
      return std::nullopt;
    st.bind(1, path);
    if (st.step() != SQLITE_ROW)
      return std::nullopt;
    id = st.int_at(0);
  }
  return get_document(id);
}

std::pair<size_t, size_t> corpus_index::size() {
  std::lock_guard<std::mutex> guard{mtx_};
  auto docs = query_int(db_, "SELECT count(*) FROM documents").value_or(0);
  auto passages = query_int(db_, "SELECT count(*) FROM passages").value_or(0);
  return {static_cast<size_t>(docs), static_cast<size_t>(passages)};
}

} // namespace quarry::corpus
