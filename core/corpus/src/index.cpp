// The local corpus index: a SQLite database with an FTS5 table of passages
// of local Markdown, text, HTML and PDF files, updated incrementally.

#include "quarry/corpus/index.hpp"

#include "quarry/corpus/text.hpp"
#include "quarry/extract/html.hpp"
#include "quarry/extract/pdf.hpp"
#include "quarry/fetch/local_file.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace quarry::corpus {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view sqlite_magic{"SQLite format 3\0", 16};

// The main content of an HTML file is indexed when it holds at least this
// share (1/3) of the page's visible text. On the 130 readability test pages
// (news and blog articles) the main content holds 85% in the median and less
// than a third on 11 pages (less than half on 25), whose boilerplate is then
// indexed too.
constexpr size_t min_main_share_numerator = 1;
constexpr size_t min_main_share_denominator = 3;

// How long the text of one PDF file may take to read.
constexpr std::chrono::milliseconds pdf_time_limit{60000};

const char* schema_sql = R"sql(
CREATE TABLE documents(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  mtime INTEGER NOT NULL,
  size INTEGER NOT NULL,
  hash TEXT NOT NULL,
  body TEXT NOT NULL);
CREATE TABLE passages(
  id INTEGER PRIMARY KEY,
  document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  heading TEXT NOT NULL,
  body TEXT NOT NULL);
CREATE INDEX passages_by_document ON passages(document_id);
CREATE VIRTUAL TABLE passages_fts USING fts5(
  heading, body, content='passages', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
  INSERT INTO passages_fts(rowid, heading, body)
  VALUES (new.id, new.heading, new.body);
END;
CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
  INSERT INTO passages_fts(passages_fts, rowid, heading, body)
  VALUES ('delete', old.id, old.heading, old.body);
END;
)sql";

sdk::error db_error(sqlite3* db, const std::string& what) {
  std::string msg = what;
  if (db != nullptr) {
    msg += ": ";
    msg += sqlite3_errmsg(db);
  }
  return sdk::make_error(sdk::errc::internal, std::move(msg));
}

// A prepared statement, finalised on destruction.
class statement {
public:
  statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      stmt_ = nullptr;
  }

  ~statement() {
    sqlite3_finalize(stmt_);
  }

  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  bool ok() const noexcept {
    return stmt_ != nullptr;
  }

  sqlite3_stmt* get() const noexcept {
    return stmt_;
  }

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  void bind(int i, int64_t x) {
    sqlite3_bind_int64(stmt_, i, x);
  }

  void bind(int i, std::string_view x) {
    sqlite3_bind_text(stmt_, i, x.data(), static_cast<int>(x.size()),
                      SQLITE_TRANSIENT);
  }

  /// Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int step() {
    return sqlite3_step(stmt_);
  }

  int64_t int_at(int i) {
    return sqlite3_column_int64(stmt_, i);
  }

  double double_at(int i) {
    return sqlite3_column_double(stmt_, i);
  }

  std::string text_at(int i) {
    const auto* p = sqlite3_column_text(stmt_, i);
    auto n = sqlite3_column_bytes(stmt_, i);
    if (p == nullptr)
      return {};
    return std::string{reinterpret_cast<const char*>(p),
                       static_cast<size_t>(n)};
  }

private:
  sqlite3_stmt* stmt_ = nullptr;
};

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

bool under(const std::string& path, const std::string& root) {
  if (path == root)
    return true;
  if (path.size() <= root.size() || path.compare(0, root.size(), root) != 0)
    return false;
  return root.back() == '/' || path[root.size()] == '/';
}

} // namespace

// -- opening ------------------------------------------------------------------

corpus_index::corpus_index(token, sqlite3* db, std::string path)
  : db_(db), path_(std::move(path)) {
  // nop
}

corpus_index::~corpus_index() {
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
  bool fresh = !exists || fs::file_size(path, ec) == 0;
  if (!fresh) {
    // Check the header ourselves: SQLite must never get a chance to touch a
    // file that is not one of its databases.
    std::ifstream in{path, std::ios::binary};
    std::string head(sqlite_magic.size(), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    if (!in || head != sqlite_magic)
      return fail(sdk::errc::bad_request,
                  "not a SQLite database (left untouched; choose another "
                  "file with tools.internal_search.db)");
  } else if (!exists) {
    auto parent = fs::path{path}.parent_path();
    if (!parent.empty())
      fs::create_directories(parent, ec);
  }
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
              | (fresh ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return fail(sdk::errc::internal, "cannot open: " + msg);
  }
  auto close_fail = [&](sdk::errc code, std::string msg) {
    sqlite3_close_v2(db);
    return fail(code, std::move(msg));
  };
  // Another process may be creating or writing this database right now
  // (two `quarry index` runs at once): wait for it.
  sqlite3_busy_timeout(db, busy_wait_ms);
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
  exec(db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;");
  result.index = std::make_unique<corpus_index>(token{}, db, path);
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
  // The write lock first, then what the index holds: another process may
  // be updating the same database, and what it wrote must be seen.
  if (!exec(db_, "BEGIN IMMEDIATE")) {
    result.failure = db_error(db_, "cannot start a transaction");
    return result;
  }
  // What the index holds.
  std::map<std::string, existing_doc> known;
  {
    statement st{db_, "SELECT id, path, mtime, size, hash FROM documents"};
    if (!st.ok()) {
      result.failure = db_error(db_, "cannot read the index");
      exec(db_, "ROLLBACK");
      return result;
    }
    while (st.step() == SQLITE_ROW)
      known[st.text_at(1)] = existing_doc{st.int_at(0), st.int_at(2),
                                          st.int_at(3), st.text_at(4)};
  }
  statement touch{db_, "UPDATE documents SET mtime=?2, size=?3 WHERE id=?1"};
  statement insert_doc{db_, "INSERT INTO documents(path, title, mtime, size, "
                            "hash, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  statement update_doc{db_, "UPDATE documents SET title=?2, mtime=?3, "
                            "size=?4, hash=?5, body=?6 WHERE id=?1"};
  statement drop_passages{db_, "DELETE FROM passages WHERE document_id=?1"};
  statement drop_doc{db_, "DELETE FROM documents WHERE id=?1"};
  statement insert_passage{db_, "INSERT INTO passages(document_id, ordinal, "
                                "heading, body) VALUES (?1, ?2, ?3, ?4)"};
  bool ok = touch.ok() && insert_doc.ok() && update_doc.ok()
            && drop_passages.ok() && drop_doc.ok() && insert_passage.ok();
  auto run = [&](statement& st) {
    auto rc = st.step();
    st.reset();
    if (rc != SQLITE_DONE)
      ok = false;
  };
  for (const auto& [path, info] : found) {
    if (!ok)
      break;
    auto old = known.find(path);
    if (old != known.end() && old->second.mtime == info.mtime
        && old->second.size == info.size) {
      ++result.unchanged;
      continue;
    }
    auto read = fetch::read_local_file(path, limits);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      skip(path, err->message);
      continue;
    }
    auto bytes = &std::get<std::string>(read);
    auto hash = content_hash(*bytes);
    if (old != known.end() && old->second.hash == hash) {
      touch.bind(1, old->second.id);
      touch.bind(2, info.mtime);
      touch.bind(3, info.size);
      run(touch);
      ++result.unchanged;
      continue;
    }
    auto doc = document_text(path, info.type, std::move(*bytes));
    if (doc.binary)
      skipped.insert(path);
    if (!doc.note.empty())
      result.notes.push_back(std::move(doc.note));
    if (doc.unreadable) {
      ++result.skipped;
      continue;
    }
    auto& title = doc.title;
    auto& text = doc.text;
    if (title.empty() && info.type != file_type::pdf)
      title = markdown_title(text);
    if (title.empty())
      title = fs::path{path}.stem().string();
    int64_t id = 0;
    if (old != known.end()) {
      id = old->second.id;
      drop_passages.bind(1, id);
      run(drop_passages);
      update_doc.bind(1, id);
      update_doc.bind(2, title);
      update_doc.bind(3, info.mtime);
      update_doc.bind(4, info.size);
      update_doc.bind(5, hash);
      update_doc.bind(6, text);
      run(update_doc);
      ++result.updated;
    } else {
      insert_doc.bind(1, path);
      insert_doc.bind(2, title);
      insert_doc.bind(3, info.mtime);
      insert_doc.bind(4, info.size);
      insert_doc.bind(5, hash);
      insert_doc.bind(6, text);
      run(insert_doc);
      id = sqlite3_last_insert_rowid(db_);
      ++result.added;
    }
    int64_t ordinal = 0;
    for (const auto& p : split_passages(text)) {
      insert_passage.bind(1, id);
      insert_passage.bind(2, ordinal++);
      insert_passage.bind(3, p.heading);
      insert_passage.bind(4, p.text);
      run(insert_passage);
      ++result.passages;
    }
  }
  for (const auto& [path, doc] : known) {
    if (!ok)
      break;
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
    drop_passages.bind(1, doc.id);
    run(drop_passages);
    drop_doc.bind(1, doc.id);
    run(drop_doc);
    ++result.removed;
  }
  if (!ok || !exec(db_, "COMMIT")) {
    result.failure = db_error(db_, "cannot update the index");
    exec(db_, "ROLLBACK");
  }
  return result;
}

// -- querying -----------------------------------------------------------------

search_result corpus_index::search(const std::string& query, size_t limit) {
  std::lock_guard<std::mutex> guard{mtx_};
  search_result result;
  auto match = sanitize_fts_query(query);
  if (match.empty() || limit == 0)
    return result;
  // Rank first (cheap: rowids and scores only), then read and snip only the
  // passages that make it into the result.
  statement st{db_, R"sql(
    SELECT r.id, p.document_id, d.path, d.title, p.heading, p.body, r.score
    FROM (SELECT rowid AS id, bm25(passages_fts, 2.0, 1.0) AS score
          FROM passages_fts WHERE passages_fts MATCH ?1
          ORDER BY score LIMIT ?2) r
    JOIN passages p ON p.id = r.id
    JOIN documents d ON d.id = p.document_id
    ORDER BY r.score)sql"};
  statement snip{db_, R"sql(
    SELECT snippet(passages_fts, 1, '', '', '...', 40)
    FROM passages_fts WHERE passages_fts MATCH ?1 AND rowid = ?2)sql"};
  if (!st.ok() || !snip.ok()) {
    result.failure = db_error(db_, "cannot prepare the search");
    return result;
  }
  st.bind(1, match);
  // Several passages of one document may rank high: look a little deeper.
  st.bind(2, static_cast<int64_t>(std::max<size_t>(limit * 8, 50)));
  std::set<int64_t> seen;
  int rc = SQLITE_ROW;
  while (result.hits.size() < limit && (rc = st.step()) == SQLITE_ROW) {
    auto doc = st.int_at(1);
    if (!seen.insert(doc).second)
      continue;
    search_hit hit;
    hit.passage_id = st.int_at(0);
    hit.document_id = doc;
    hit.path = st.text_at(2);
    hit.url = file_url(hit.path);
    hit.title = st.text_at(3);
    hit.heading = st.text_at(4);
    hit.text = st.text_at(5);
    hit.score = st.double_at(6);
    snip.bind(1, match);
    snip.bind(2, hit.passage_id);
    if (snip.step() == SQLITE_ROW)
      hit.snippet = snip.text_at(0);
    snip.reset();
    result.hits.push_back(std::move(hit));
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    result.failure = db_error(db_, "search failed");
  return result;
}

std::optional<stored_document> corpus_index::get_document(int64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  statement st{db_, "SELECT path, title, body FROM documents WHERE id=?1"};
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
