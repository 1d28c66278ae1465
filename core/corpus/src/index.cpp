// The local corpus index: a SQLite database with an FTS5 table of passages
// of local Markdown, text, HTML and PDF files, updated incrementally. This
// file opens a database (the schema, the rebuild of an older one, WAL) and
// reads whole documents; updating, ranking and searching are in the
// index_*.cpp files beside it.

#include "quarry/corpus/index.hpp"

#include "index_internal.hpp"

#include "quarry/corpus/text.hpp"
#include "quarry/sqlite/open.hpp"

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace quarry::corpus {

namespace fs = std::filesystem;

namespace detail {

sdk::error db_error(sqlite3* db, const std::string& what) {
  std::string msg = what;
  if (db != nullptr) {
    msg += ": ";
    msg += sqlite3_errmsg(db);
  }
  return sdk::make_error(sdk::errc::internal, std::move(msg));
}

bool exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

// Whether the last failure on `db` was another connection's lock.
bool busy(sqlite3* db) {
  auto rc = sqlite3_errcode(db) & 0xFF;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

// Runs a statement that returns one integer.
std::optional<int64_t> query_int(sqlite3* db, const char* sql) {
  statement st{db, sql};
  if (!st.ok() || st.step() != SQLITE_ROW)
    return std::nullopt;
  return st.int_at(0);
}

} // namespace detail

using detail::busy;
using detail::db_error;
using detail::exec;
using detail::query_int;
using detail::register_tokenizer;
using detail::statement;

namespace {

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

// Switches the database to WAL. The busy handler does not cover every case
// here (two connections changing the journal mode at once: SQLite fails one
// at once to avoid a deadlock), so busy failures are retried until
// busy_wait_ms has passed.
bool enable_wal(sqlite3* db) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{busy_wait_ms};
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

} // namespace

// -- opening ------------------------------------------------------------------

corpus_index::corpus_index(token, sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {
  // nop
}

corpus_index::~corpus_index() {
  state_.reset(); // its tokenizer first
  sqlite3_close_v2(db_);
}

open_result corpus_index::open(const std::string& path) {
  open_result result;
  auto fail = [&](sdk::errc code, std::string msg) {
    result.failure = sdk::make_error(code, "corpus database '" + path + "': " + std::move(msg));
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
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (exists ? 0 : SQLITE_OPEN_CREATE);
  auto opened = sqlite::open_database(path, flags);
  if (opened.rc != SQLITE_OK)
    return fail(sdk::errc::internal, "cannot open: " + opened.message);
  if (opened.kind == sqlite::file_kind::other)
    return fail(sdk::errc::bad_request, "not a SQLite database (left untouched; choose another "
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
                      std::string{"cannot set up full-text search: "} + sqlite3_errmsg(db));
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
      return close_fail(sdk::errc::busy, "still locked by another process after waiting "
                                           + std::to_string(busy_wait_ms / 1000) + " s");
    return close_fail(sdk::errc::bad_request, "unreadable or corrupt SQLite database (left "
                                              "untouched): "
                                                + why);
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
                        std::string{"cannot create the schema: "} + sqlite3_errmsg(db));
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
    return close_fail(sdk::errc::bad_request, "a SQLite database of another application (left "
                                              "untouched)");
  } else if (*version != schema_version) {
    return close_fail(sdk::errc::bad_request, "schema version " + std::to_string(*version)
                                                + ", this build reads version "
                                                + std::to_string(schema_version));
  } else if (!enable_wal(db)) {
    return close_fail(sdk::errc::internal, std::string{"cannot enable WAL: "} + sqlite3_errmsg(db));
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
                      std::string{"cannot set up full-text search: "} + sqlite3_errmsg(db));
  }
  result.index = std::make_unique<corpus_index>(token{}, db, path);
  result.index->state_ = std::move(state);
  return result;
}

// -- whole documents ----------------------------------------------------------

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

std::optional<stored_document> corpus_index::find_document(const std::string& path) {
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

std::vector<listed_document> corpus_index::documents(size_t limit, size_t offset) {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<listed_document> out;
  statement st{db_, "SELECT d.id, d.path, d.title, d.size, d.mtime, "
                    "(SELECT count(*) FROM passages p WHERE p.document_id = d.id) "
                    "FROM documents d ORDER BY d.path LIMIT ?1 OFFSET ?2"};
  if (!st.ok())
    return out;
  auto clamp = [](size_t x) {
    return static_cast<int64_t>(std::min<size_t>(x, static_cast<size_t>(INT64_MAX)));
  };
  st.bind(1, clamp(limit));
  st.bind(2, clamp(offset));
  while (st.step() == SQLITE_ROW) {
    listed_document d;
    d.id = st.int_at(0);
    d.path = st.text_at(1);
    d.title = st.text_at(2);
    d.size = st.int_at(3);
    d.mtime = st.int_at(4);
    d.passages = static_cast<size_t>(st.int_at(5));
    out.push_back(std::move(d));
  }
  return out;
}

std::pair<size_t, size_t> corpus_index::size() {
  std::lock_guard<std::mutex> guard{mtx_};
  auto docs = query_int(db_, "SELECT count(*) FROM documents").value_or(0);
  auto passages = query_int(db_, "SELECT count(*) FROM passages").value_or(0);
  return {static_cast<size_t>(docs), static_cast<size_t>(passages)};
}

} // namespace quarry::corpus
