// The research store: opening (file checks, WAL, migrations), batched writes
// and the queries.

#include "quarry/store/store.hpp"

#include "sqlite_util.hpp"
#include "text.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sqlite/open.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace quarry::store {

namespace fs = std::filesystem;
using detail::db_error;
using detail::statement;

namespace {

// Whether `path` (a file or folder) is on a file system mounted read-only.
bool on_read_only_file_system(const std::string& path) {
  struct statvfs st {};
  return ::statvfs(path.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

// Why the store at `path` cannot be written by this process, or "": a
// read-only file system, no write permission on the file, or on its folder
// (SQLite creates its `-wal` and `-shm` files there).
std::string why_read_only(const std::string& path) {
  auto dir = fs::path{path}.parent_path().string();
  if (dir.empty())
    dir = ".";
  if (on_read_only_file_system(path) || on_read_only_file_system(dir))
    return "it is on a read-only file system";
  if (::access(dir.c_str(), W_OK) != 0)
    return "no write permission on its folder";
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return "no write permission on the file";
  return {};
}

// A `file:` URI for `path` that opens it immutable (SQLite then takes no
// lock and needs no `-shm` file; safe only where nobody can write it).
std::string immutable_uri(std::string_view path) {
  std::string out = "file:";
  if (!path.empty() && path.front() != '/')
    out += "./";
  // `file://` would start an authority.
  while (path.size() > 1 && path[0] == '/' && path[1] == '/')
    path.remove_prefix(1);
  static constexpr char hex[] = "0123456789ABCDEF";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7F) {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "?immutable=1";
}

// One step of the schema: the SQL that brings a database of version
// `version - 1` to `version`. Steps are never edited once released; a change
// is a new step.
struct migration {
  int version;
  const char* sql;
};

// Version 1: the initial schema.
//
// sessions.num is the stable row id that the full-text index of questions
// refers to (an implicit rowid could change on VACUUM); `id` is the key
// everything else uses.
constexpr const char* schema_v1 = R"sql(
CREATE TABLE sessions(
  num INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
  question TEXT NOT NULL,
  options TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0);
CREATE INDEX sessions_by_created ON sessions(created_at, id);
CREATE INDEX sessions_by_state ON sessions(state, created_at, id);
CREATE INDEX sessions_by_parent ON sessions(parent_id, created_at, id);
CREATE VIRTUAL TABLE sessions_fts USING fts5(
  question, content='sessions', content_rowid='num',
  tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER sessions_fts_insert AFTER INSERT ON sessions BEGIN
  INSERT INTO sessions_fts(rowid, question) VALUES (new.num, new.question);
END;
CREATE TRIGGER sessions_fts_delete AFTER DELETE ON sessions BEGIN
  INSERT INTO sessions_fts(sessions_fts, rowid, question)
  VALUES ('delete', old.num, old.question);
END;
CREATE TRIGGER sessions_fts_update AFTER UPDATE OF question ON sessions BEGIN
  INSERT INTO sessions_fts(sessions_fts, rowid, question)
  VALUES ('delete', old.num, old.question);
  INSERT INTO sessions_fts(rowid, question) VALUES (new.num, new.question);
END;
CREATE TABLE packets(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  line TEXT NOT NULL,
  PRIMARY KEY(session_id, seq)) WITHOUT ROWID;
CREATE TABLE documents(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  document_id TEXT NOT NULL,
  url TEXT NOT NULL,
  title TEXT NOT NULL,
  text TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  fetched_at INTEGER NOT NULL,
  source_type TEXT NOT NULL,
  PRIMARY KEY(session_id, document_id));
CREATE TABLE citations(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  number INTEGER NOT NULL,
  document_id TEXT NOT NULL,
  PRIMARY KEY(session_id, number),
  UNIQUE(session_id, document_id)) WITHOUT ROWID;
CREATE TABLE reports(
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK(kind IN ('intermediate', 'final')),
  tab INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  text TEXT NOT NULL,
  created_at INTEGER NOT NULL);
CREATE INDEX reports_by_session ON reports(session_id, kind, id);
CREATE TABLE usage(
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  role TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost REAL NOT NULL);
CREATE INDEX usage_by_session ON usage(session_id);
CREATE TABLE checkpoints(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  number INTEGER NOT NULL,
  state TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY(session_id, number));
)sql";

// Version 2: packets are stored in runs, one row per session and batch (the
// lines of consecutive packets joined by newlines), appended in the order
// they are written. Version 1 kept a row per packet clustered by (session,
// seq): a batch of many running sessions' packets dirtied a page per session
// and wrote it to the WAL whole, and each row paid a foreign-key check and a
// B-tree insert of its line (bench/README.md, `quarry_bench_store_actor`).
// A run holds whole lines; a line holding a newline is a run of its own.
constexpr const char* schema_v2 = R"sql(
CREATE TABLE packet_runs(
  num INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  lines TEXT NOT NULL,
  CHECK(first_seq >= 1 AND last_seq >= first_seq));
CREATE UNIQUE INDEX packet_runs_by_session ON packet_runs(session_id, last_seq);
INSERT INTO packet_runs(session_id, first_seq, last_seq, lines)
  SELECT session_id, seq, seq, line FROM packets ORDER BY session_id, seq;
DROP TABLE packets;
)sql";

// Version 3: research you can check. A document says whether its text is
// only a search snippet (stored before: unknown, read as read text), and the
// claims of a final report are kept with their verdicts and evidence.
constexpr const char* schema_v3 = R"sql(
ALTER TABLE documents ADD COLUMN snippet_only INTEGER NOT NULL DEFAULT 0;
CREATE TABLE claims(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  claim INTEGER NOT NULL,
  text TEXT NOT NULL,
  report_begin INTEGER,
  report_end INTEGER,
  citations TEXT NOT NULL,
  verdict TEXT NOT NULL,
  judge TEXT NOT NULL,
  recited_to INTEGER,
  source INTEGER,
  document_id TEXT NOT NULL,
  evidence_begin INTEGER,
  evidence_end INTEGER,
  evidence TEXT NOT NULL,
  snippet_only INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY(session_id, claim)) WITHOUT ROWID;
)sql";

// Version 4: sessions say what they cost. A usage row says how its cost is
// known: `priced` (by configured prices or the shipped price table),
// `unpriced` (no price for the model: the cost is unknown, stored as 0) or
// `offline` (no model ran). Rows of before read as priced when they had a
// cost and as unpriced otherwise (no price was configured).
constexpr const char* schema_v4 = R"sql(
ALTER TABLE usage ADD COLUMN cost_basis TEXT NOT NULL DEFAULT 'unpriced'
  CHECK(cost_basis IN ('priced', 'unpriced', 'offline'));
UPDATE usage SET cost_basis = 'priced' WHERE cost > 0;
)sql";

constexpr migration migrations[] = {
  {1, schema_v1},
  {2, schema_v2},
  {3, schema_v3},
  {4, schema_v4},
};

static_assert(sizeof(migrations) / sizeof(migrations[0]) == schema_version,
              "one migration step per schema version");

constexpr const char* session_columns
  = "id, parent_id, question, options, state, error, created_at, updated_at, "
    "finished_at, last_seq";

constexpr std::array<session_state, 7> all_states{
  session_state::pending,    session_state::running, session_state::clarification,
  session_state::completed,  session_state::failed,  session_state::cancelled,
  session_state::interrupted};

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

bool is_terminal(session_state s) {
  return s == session_state::completed || s == session_state::failed
         || s == session_state::cancelled;
}

// The verdicts a claim may have (core::verification::verdict).
bool verdict_known(std::string_view v) {
  return v == "supported" || v == "partly_supported" || v == "unsupported" || v == "no_evidence"
         || v == "unverified";
}

// A byte range: both ends or neither, from 0, begin <= end.
bool range_ok(const std::optional<int64_t>& b, const std::optional<int64_t>& e) {
  if (!b || !e)
    return !b && !e;
  return *b >= 0 && *b <= *e;
}

// JSON as stored: invalid UTF-8 in strings is replaced, never thrown on.
std::string dump_json(const nlohmann::json& j) {
  return sdk::dump_json(j);
}

// JSON as read: anything unreadable becomes `fallback`.
nlohmann::json parse_json(const std::string& text, nlohmann::json fallback) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return fallback;
  return j;
}

session_row read_session(const statement& st) {
  session_row row;
  row.id = st.text_at(0);
  row.parent_id = st.text_at(1);
  row.question = st.text_at(2);
  row.options = parse_json(st.text_at(3), nlohmann::json::object());
  // A state this build does not know (a later version's) reads as failed.
  row.state = session_state_from(st.text_at(4)).value_or(session_state::failed);
  row.error = st.text_at(5);
  row.created_at = st.int_at(6);
  row.updated_at = st.int_at(7);
  row.finished_at = st.int_at(8);
  auto last = st.int_at(9);
  row.last_seq = last > 0 ? static_cast<uint64_t>(last) : 0;
  return row;
}

std::string describe_session(const std::string& id) {
  if (is_session_id(id))
    return "session " + id;
  return "a session id that is not one (" + std::to_string(id.size()) + " bytes)";
}

// Writes everything of `b` inside the caller's transaction; the first
// failure stops it (the caller rolls back).
std::optional<sdk::error> write_batch(detail::statement_cache& cache, const batch& b) {
  sqlite3* db = cache.db();
  auto now = now_ms();
  auto refuse = [&](const std::string& msg) {
    return sdk::make_error(sdk::errc::bad_request,
                           "research store: " + msg + "; nothing of the batch was written");
  };
  auto failed = [&](const std::string& what, int rc) { return db_error(what, rc, db); };
  // The last seq of every session the batch touched (as written so far).
  std::map<std::string, int64_t> last;
  // Finds a session: SQLITE_ROW (with its last seq), SQLITE_DONE (unknown)
  // or an error.
  auto lookup = [&](const std::string& id, int64_t& seq) {
    if (auto i = last.find(id); i != last.end()) {
      seq = i->second;
      return SQLITE_ROW;
    }
    statement st{cache, "SELECT last_seq FROM sessions WHERE id = ?1"};
    st.bind(1, id);
    auto rc = st.step();
    if (rc == SQLITE_ROW) {
      seq = st.int_at(0);
      last.emplace(id, seq);
    }
    return rc;
  };
  auto require = [&](const std::string& id, const std::string& what) -> std::optional<sdk::error> {
    int64_t seq = 0;
    auto rc = lookup(id, seq);
    if (rc == SQLITE_ROW)
      return std::nullopt;
    if (rc == SQLITE_DONE)
      return refuse(what + " of unknown session " + id);
    return failed("cannot read session " + id, rc);
  };
  // Sessions whose updated_at (and last_seq) change.
  std::set<std::string> touched;

  for (const auto& s : b.new_sessions) {
    auto options = dump_json(s.options.is_null() ? nlohmann::json::object() : s.options);
    auto created = s.created_at != 0 ? s.created_at : now;
    statement st{cache, "INSERT INTO sessions(id, parent_id, question, options, "
                        "state, error, created_at, updated_at, finished_at, last_seq) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)"};
    st.bind(1, s.id);
    if (s.parent_id.empty())
      st.bind_null(2);
    else
      st.bind(2, s.parent_id);
    st.bind(3, s.question);
    st.bind(4, options);
    st.bind(5, std::string_view{to_string(s.state)});
    st.bind(6, s.error);
    st.bind(7, created);
    st.bind(8, s.updated_at != 0 ? s.updated_at : created);
    st.bind(9, s.finished_at);
    auto rc = st.step();
    if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
      return refuse("session " + s.id + " exists already");
    if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
      return refuse("session " + s.id + " follows up session " + s.parent_id
                    + ", which is unknown");
    if (rc != SQLITE_DONE)
      return failed("cannot add session " + s.id, rc);
    last[s.id] = 0;
  }

  // Packets: each must follow its session's last seq.
  for (const auto& x : b.packets) {
    const auto& id = x.session_id;
    auto seq = x.packet.seq;
    int64_t prev = 0;
    auto rc = lookup(id, prev);
    if (rc == SQLITE_DONE)
      return refuse("packet " + std::to_string(seq) + " of unknown session " + id);
    if (rc != SQLITE_ROW)
      return failed("cannot read session " + id, rc);
    auto expected = static_cast<uint64_t>(prev) + 1;
    if (seq != expected || seq > static_cast<uint64_t>(INT64_MAX))
      return refuse("session " + id + ": packet seq " + std::to_string(seq) + " after seq "
                    + std::to_string(prev) + " (expected " + std::to_string(expected) + ")");
    last[id] = static_cast<int64_t>(seq);
  }
  // Each session's packets of the batch, in seq order, become runs (a row
  // each) of up to `max_run_bytes`; a line holding a newline could not be
  // told from two, so it is a run of its own, read whole.
  constexpr size_t max_run_bytes = 64 * 1024;
  std::vector<size_t> order(b.packets.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return b.packets[x].session_id < b.packets[y].session_id;
  });
  std::string joined;
  for (size_t at = 0; at < order.size();) {
    const auto& head = b.packets[order[at]];
    const auto& id = head.session_id;
    // The run: order[at, end).
    auto end = at + 1;
    auto bytes = head.packet.line.size();
    if (head.packet.line.find('\n') == std::string::npos) {
      while (end < order.size()) {
        const auto& x = b.packets[order[end]];
        if (x.session_id != id || x.packet.line.find('\n') != std::string::npos
            || bytes + 1 + x.packet.line.size() > max_run_bytes)
          break;
        bytes += 1 + x.packet.line.size();
        ++end;
      }
    }
    auto first = head.packet.seq;
    auto last_of_run = b.packets[order[end - 1]].packet.seq;
    statement st{cache, "INSERT INTO packet_runs(session_id, first_seq, last_seq, lines) "
                        "VALUES (?1, ?2, ?3, ?4)"};
    st.bind(1, id);
    st.bind(2, static_cast<int64_t>(first));
    st.bind(3, static_cast<int64_t>(last_of_run));
    if (end == at + 1) {
      st.bind(4, head.packet.line);
    } else {
      joined.clear();
      joined.reserve(bytes);
      for (auto i = at; i < end; ++i) {
        if (i > at)
          joined += '\n';
        joined += b.packets[order[i]].packet.line;
      }
      st.bind(4, joined);
    }
    auto rc = st.step();
    if (rc != SQLITE_DONE) {
      auto seqs = std::to_string(first)
                  + (last_of_run != first ? "-" + std::to_string(last_of_run) : std::string{});
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
        return refuse("session " + id + ": packet seq " + seqs + " is stored already");
      return failed("cannot add packets " + seqs + " of session " + id, rc);
    }
    touched.insert(id);
    at = end;
  }

  for (const auto& x : b.documents) {
    const auto& id = x.session_id;
    const auto& d = x.document;
    if (auto err = require(id, "a document"))
      return err;
    if (d.document_id.empty())
      return refuse("session " + id + ": a document without an id");
    auto sha = detail::is_sha256_hex(d.sha256) ? d.sha256 : detail::sha256_hex(d.text);
    // A document read again keeps what was read over a snippet, else the
    // longer text (the page after its snippet); fields it lacked are filled
    // in. `newer` is that choice, in SQL.
#define QUARRY_NEWER_TEXT                                                                          \
  "((documents.snippet_only <> 0 AND excluded.snippet_only = 0) OR "                               \
  "(documents.snippet_only = excluded.snippet_only AND length(CAST(excluded.text AS BLOB)) "       \
  "> length(CAST(documents.text AS BLOB))))"
    statement st{
      cache,
      "INSERT INTO documents(session_id, document_id, url, title, text, sha256, "
      "fetched_at, source_type, snippet_only) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
      "ON CONFLICT(session_id, document_id) DO UPDATE SET "
      "text = CASE WHEN " QUARRY_NEWER_TEXT " THEN excluded.text ELSE documents.text END, "
      "sha256 = CASE WHEN " QUARRY_NEWER_TEXT " THEN excluded.sha256 ELSE documents.sha256 END, "
      "fetched_at = CASE WHEN " QUARRY_NEWER_TEXT
      " THEN excluded.fetched_at ELSE documents.fetched_at END, "
      "url = CASE WHEN documents.url = '' OR (excluded.url <> '' AND " QUARRY_NEWER_TEXT
      ") THEN excluded.url ELSE documents.url END, "
      "title = CASE WHEN documents.title = '' OR (excluded.title <> '' AND " QUARRY_NEWER_TEXT
      ") THEN excluded.title ELSE documents.title END, "
      "source_type = CASE WHEN documents.source_type = '' "
      "THEN excluded.source_type ELSE documents.source_type END, "
      "snippet_only = CASE WHEN " QUARRY_NEWER_TEXT
      " THEN excluded.snippet_only ELSE documents.snippet_only END"};
#undef QUARRY_NEWER_TEXT
    st.bind(1, id);
    st.bind(2, d.document_id);
    st.bind(3, d.url);
    st.bind(4, d.title);
    st.bind(5, d.text);
    st.bind(6, sha);
    st.bind(7, d.fetched_at != 0 ? d.fetched_at : now);
    st.bind(8, d.source_type);
    st.bind(9, int64_t{d.snippet_only ? 1 : 0});
    auto rc = st.step();
    if (rc != SQLITE_DONE)
      return failed("cannot store a document of session " + id, rc);
    touched.insert(id);
  }

  for (const auto& x : b.reports) {
    const auto& id = x.session_id;
    const auto& r = x.report;
    if (auto err = require(id, "a report"))
      return err;
    if (r.kind != "intermediate" && r.kind != "final")
      return refuse("session " + id + ": a report kind must be 'intermediate' or 'final'");
    statement st{cache, "INSERT INTO reports(session_id, kind, tab, turn, "
                        "text, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
    st.bind(1, id);
    st.bind(2, r.kind);
    st.bind(3, static_cast<int64_t>(r.tab));
    st.bind(4, static_cast<int64_t>(r.turn));
    st.bind(5, r.text);
    st.bind(6, r.created_at != 0 ? r.created_at : now);
    auto rc = st.step();
    if (rc != SQLITE_DONE)
      return failed("cannot store a report of session " + id, rc);
    touched.insert(id);
  }

  for (const auto& x : b.usage) {
    const auto& id = x.session_id;
    const auto& u = x.usage;
    if (auto err = require(id, "usage"))
      return err;
    statement st{cache, "INSERT INTO usage(session_id, role, provider, model, "
                        "input_tokens, output_tokens, cost, cost_basis) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"};
    st.bind(1, id);
    st.bind(2, u.role);
    st.bind(3, u.provider);
    st.bind(4, u.model);
    st.bind(5, u.input_tokens);
    st.bind(6, u.output_tokens);
    // SQLite would store NaN as NULL: an unknown cost counts as 0.
    st.bind_double(7, std::isfinite(u.cost) ? u.cost : 0.0);
    std::string_view basis = u.cost_basis == "offline" || u.cost_basis == "unpriced"
                               ? std::string_view{u.cost_basis}
                               : std::string_view{"priced"};
    st.bind(8, basis);
    auto rc = st.step();
    if (rc != SQLITE_DONE)
      return failed("cannot store usage of session " + id, rc);
    touched.insert(id);
  }

  for (const auto& x : b.checkpoints) {
    const auto& id = x.session_id;
    const auto& c = x.checkpoint;
    int64_t last_seq = 0;
    auto rc = lookup(id, last_seq);
    if (rc == SQLITE_DONE)
      return refuse("a checkpoint of unknown session " + id);
    if (rc != SQLITE_ROW)
      return failed("cannot read session " + id, rc);
    if (!x.citations_only && c.last_seq > static_cast<uint64_t>(last_seq))
      return refuse("session " + id + ": checkpoint " + std::to_string(c.number) + " is at seq "
                    + std::to_string(c.last_seq) + ", beyond the last packet (seq "
                    + std::to_string(last_seq) + ")");
    // The session's checkpoints so far, and the highest number.
    int64_t stored_checkpoints = 0;
    if (!x.citations_only) {
      statement st{cache, "SELECT max(number), count(*) FROM checkpoints "
                          "WHERE session_id = ?1"};
      st.bind(1, id);
      rc = st.step();
      if (rc != SQLITE_ROW)
        return failed("cannot read the checkpoints of session " + id, rc);
      if (!st.null_at(0) && c.number <= st.int_at(0))
        return refuse("session " + id + ": checkpoint " + std::to_string(c.number)
                      + " does not follow checkpoint " + std::to_string(st.int_at(0)));
      stored_checkpoints = st.int_at(1);
    }
    // The citations first: the checkpoint numbers them.
    for (const auto& cite : x.citations) {
      auto number = std::to_string(cite.number);
      if (cite.number < 1 || cite.document_id.empty())
        return refuse("session " + id + ": citation [" + number
                      + "] needs a number from 1 and a document id");
      {
        statement st{cache, "SELECT document_id FROM citations "
                            "WHERE session_id = ?1 AND number = ?2"};
        st.bind(1, id);
        st.bind(2, static_cast<int64_t>(cite.number));
        rc = st.step();
        if (rc == SQLITE_ROW) {
          if (st.text_at(0) == cite.document_id)
            continue; // known
          return refuse("session " + id + ": citation [" + number
                        + "] is another document's; it cannot be renumbered");
        }
        if (rc != SQLITE_DONE)
          return failed("cannot read the citations of session " + id, rc);
      }
      {
        statement st{cache, "SELECT number FROM citations "
                            "WHERE session_id = ?1 AND document_id = ?2"};
        st.bind(1, id);
        st.bind(2, cite.document_id);
        rc = st.step();
        if (rc == SQLITE_ROW)
          return refuse("session " + id + ": a document numbered [" + std::to_string(st.int_at(0))
                        + "] cannot become [" + number + "]");
        if (rc != SQLITE_DONE)
          return failed("cannot read the citations of session " + id, rc);
      }
      statement st{cache, "INSERT INTO citations(session_id, number, "
                          "document_id) VALUES (?1, ?2, ?3)"};
      st.bind(1, id);
      st.bind(2, static_cast<int64_t>(cite.number));
      st.bind(3, cite.document_id);
      rc = st.step();
      if (rc != SQLITE_DONE)
        return failed("cannot store citation [" + number + "] of session " + id, rc);
    }
    if (x.citations_only) {
      touched.insert(id);
      continue;
    }
    auto state = dump_json(c.state);
    {
      statement st{cache, "INSERT INTO checkpoints(session_id, number, state, "
                          "last_seq, created_at) VALUES (?1, ?2, ?3, ?4, ?5)"};
      st.bind(1, id);
      st.bind(2, c.number);
      st.bind(3, state);
      st.bind(4, static_cast<int64_t>(c.last_seq));
      st.bind(5, c.created_at != 0 ? c.created_at : now);
      rc = st.step();
      if (rc != SQLITE_DONE)
        return failed("cannot store checkpoint " + std::to_string(c.number) + " of session " + id,
                      rc);
    }
    // Older ones are dropped only when there are more than kept (a
    // research writes about three: the search for them is mostly skipped).
    if (stored_checkpoints + 1 > kept_checkpoints) {
      statement st{cache, "DELETE FROM checkpoints WHERE session_id = ?1 AND "
                          "number NOT IN (SELECT number FROM checkpoints "
                          "WHERE session_id = ?1 ORDER BY number DESC "
                          "LIMIT ?2)"};
      st.bind(1, id);
      st.bind(2, kept_checkpoints);
      rc = st.step();
      if (rc != SQLITE_DONE)
        return failed("cannot drop old checkpoints of session " + id, rc);
    }
    touched.insert(id);
  }

  for (const auto& x : b.claims) {
    const auto& id = x.session_id;
    if (auto err = require(id, "claims"))
      return err;
    std::set<int64_t> seen;
    for (const auto& c : x.claims) {
      auto bad = [&](const std::string& why) {
        return refuse("session " + id + ": claim " + std::to_string(c.claim) + " " + why);
      };
      if (c.claim < 0 || !seen.insert(c.claim).second)
        return bad("has a negative or repeated index");
      if (!verdict_known(c.verdict))
        return bad("has an unknown verdict '" + c.verdict + "'");
      if (!range_ok(c.report_begin, c.report_end) || !range_ok(c.evidence_begin, c.evidence_end))
        return bad("has a byte range that is not from 0 and ordered");
    }
    {
      statement st{cache, "DELETE FROM claims WHERE session_id = ?1"};
      st.bind(1, id);
      auto rc = st.step();
      if (rc != SQLITE_DONE)
        return failed("cannot replace the claims of session " + id, rc);
    }
    for (const auto& c : x.claims) {
      statement st{cache, "INSERT INTO claims(session_id, claim, text, report_begin, report_end, "
                          "citations, verdict, judge, recited_to, source, document_id, "
                          "evidence_begin, evidence_end, evidence, snippet_only, created_at) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                          "?15, ?16)"};
      auto citations = dump_json(nlohmann::json(c.citations));
      auto maybe = [&](int i, auto v) {
        if (v)
          st.bind(i, static_cast<int64_t>(*v));
        else
          st.bind_null(i);
      };
      st.bind(1, id);
      st.bind(2, c.claim);
      st.bind(3, c.text);
      maybe(4, c.report_begin);
      maybe(5, c.report_end);
      st.bind(6, citations);
      st.bind(7, c.verdict);
      st.bind(8, c.judge);
      maybe(9, c.recited_to);
      maybe(10, c.source);
      st.bind(11, c.document_id);
      maybe(12, c.evidence_begin);
      maybe(13, c.evidence_end);
      st.bind(14, c.evidence);
      st.bind(15, int64_t{c.snippet_only ? 1 : 0});
      st.bind(16, c.created_at != 0 ? c.created_at : now);
      auto rc = st.step();
      if (rc != SQLITE_DONE)
        return failed("cannot store claim " + std::to_string(c.claim) + " of session " + id, rc);
    }
    touched.insert(id);
  }

  for (const auto& id : touched) {
    statement st{cache, "UPDATE sessions SET last_seq = ?2, updated_at = ?3 "
                        "WHERE id = ?1"};
    st.bind(1, id);
    st.bind(2, last[id]);
    st.bind(3, now);
    auto rc = st.step();
    if (rc != SQLITE_DONE)
      return failed("cannot update session " + id, rc);
  }

  for (const auto& x : b.states) {
    const auto& id = x.session_id;
    if (auto err = require(id, "a state change"))
      return err;
    statement st{cache, "UPDATE sessions SET state = ?2, error = ?3, "
                        "updated_at = ?4, finished_at = ?5 WHERE id = ?1"};
    st.bind(1, id);
    st.bind(2, std::string_view{to_string(x.state)});
    st.bind(3, x.error);
    st.bind(4, now);
    st.bind(5, is_terminal(x.state) ? now : int64_t{0});
    auto rc = st.step();
    if (rc != SQLITE_DONE)
      return failed("cannot change the state of session " + id, rc);
  }
  for (const auto& x : b.options) {
    const auto& id = x.session_id;
    if (auto err = require(id, "an options change"))
      return err;
    if (!x.options.is_object())
      return sdk::make_error(sdk::errc::bad_request, "research store: the options of session " + id
                                                       + " are not a JSON object");
    // Bound without a copy: the text must outlive the step.
    auto text = dump_json(x.options);
    statement opt{cache, "UPDATE sessions SET options = ?2 WHERE id = ?1"};
    opt.bind(1, id);
    opt.bind(2, text);
    auto rc = opt.step();
    if (rc != SQLITE_DONE)
      return failed("cannot change the options of session " + id, rc);
  }
  return std::nullopt;
}

} // namespace

// -- names and ids ------------------------------------------------------------

const char* to_string(session_state s) {
  switch (s) {
    case session_state::pending:
      return "pending";
    case session_state::running:
      return "running";
    case session_state::clarification:
      return "clarification";
    case session_state::completed:
      return "completed";
    case session_state::failed:
      return "failed";
    case session_state::cancelled:
      return "cancelled";
    case session_state::interrupted:
      return "interrupted";
  }
  return "failed";
}

std::optional<session_state> session_state_from(std::string_view name) {
  for (auto s : all_states)
    if (name == to_string(s))
      return s;
  return std::nullopt;
}

std::string make_session_id() {
  std::array<unsigned char, 8> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    auto n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  if (got < bytes.size()) {
    std::random_device rd;
    for (auto& b : bytes)
      b = static_cast<unsigned char>(rd());
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string id = "q";
  for (auto b : bytes) {
    id += hex[b >> 4];
    id += hex[b & 0x0F];
  }
  return id;
}

bool is_cursor(std::string_view text) {
  auto c = detail::decode_cursor(text);
  return c && is_session_id(c->id);
}

bool is_session_id(std::string_view id) {
  if (id.size() != 17 || id[0] != 'q')
    return false;
  for (size_t i = 1; i < id.size(); ++i) {
    auto c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

// -- batch --------------------------------------------------------------------

bool batch::empty() const noexcept {
  return size() == 0;
}

size_t batch::size() const noexcept {
  size_t n = new_sessions.size() + packets.size() + documents.size() + reports.size() + usage.size()
             + states.size() + options.size();
  for (const auto& c : claims)
    n += 1 + c.claims.size();
  for (const auto& c : checkpoints)
    n += 1 + c.citations.size();
  return n;
}

// -- the store ----------------------------------------------------------------

struct store::statements : detail::statement_cache {
  statements(sqlite3* db, int busy_wait_ms) : detail::statement_cache(db), wait_ms(busy_wait_ms) {
    // nop
  }

  /// How long a write waits for another connection's lock.
  int wait_ms;
};

store::store(sqlite3* db, std::string path, bool read_only)
  : db_(db),
    path_(std::move(path)),
    read_only_(read_only),
    stmts_(std::make_unique<statements>(db, open_options{}.busy_wait_ms)) {
  // nop
}

store::~store() {
  stmts_.reset(); // finalizes the statements before the connection closes
  sqlite3_close_v2(db_);
}

const std::string& store::path() const noexcept {
  return path_;
}

std::variant<std::unique_ptr<store>, sdk::error> store::open(const std::string& path,
                                                             const open_options& opts) {
  auto fail = [&](sdk::errc code, const std::string& msg) {
    return sdk::make_error(code, "research store: " + msg);
  };
  if (path.empty())
    return fail(sdk::errc::bad_request, "no path given");
  if (path.find('\0') != std::string::npos)
    return fail(sdk::errc::bad_request, "the path holds a NUL byte");
  std::error_code ec;
  auto st = fs::status(path, ec);
  bool exists = fs::exists(st);
  if (exists && !fs::is_regular_file(st))
    return fail(sdk::errc::bad_request, "not a regular file");
  if (!exists && opts.read_only)
    return fail(sdk::errc::not_found, "no such file");
  if (!exists) {
    auto parent = fs::path{path}.parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec)
        return fail(sdk::errc::internal,
                    "cannot create the folder '" + parent.string() + "': " + ec.message());
    }
  }
  int wait_ms = std::max(0, opts.busy_wait_ms);
  int flags = SQLITE_OPEN_NOMUTEX
              | (opts.read_only ? SQLITE_OPEN_READONLY
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  // SQLite may read a name that starts with "file:" as a URI (with options
  // such as mode=memory or vfs=): the path is always a plain file name.
  auto file_name = path.compare(0, 5, "file:") == 0 ? "./" + path : path;
  // The header is checked through the connection's own file handle, never
  // with a descriptor of ours: closing one would drop the locks of this
  // process's other connections to the file (quarry/sqlite/open.hpp).
  auto opened = sqlite::open_database(file_name, flags,
                                      opts.vfs.empty() ? nullptr : opts.vfs.c_str());
  if (opened.rc != SQLITE_OK) {
    std::string what = opts.vfs.empty() ? "cannot open" : "cannot open (VFS '" + opts.vfs + "')";
    auto err = db_error(what, opened.rc, nullptr);
    return err;
  }
  if (opened.kind == sqlite::file_kind::other)
    return fail(sdk::errc::bad_request, "not a SQLite database (left untouched)");
  sqlite3* db = opened.db;
  int rc = SQLITE_OK;
  // Closes the connection on every early return.
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> guard{db, sqlite3_close_v2};
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, wait_ms);
  if (!opts.read_only && sqlite3_db_readonly(db, "main") == 1) {
    auto why = why_read_only(path);
    return fail(sdk::errc::refused, "read-only ("
                                      + (why.empty() ? std::string{"no write permission"} : why)
                                      + "): it cannot be written");
  }
  // The application id, schema version and number of schema objects, read
  // in one snapshot.
  struct header {
    int64_t app = 0;
    int64_t version = 0;
    int64_t objects = 0;
  };
  auto read_header = [&](header& h, bool in_transaction) -> int {
    if (!in_transaction) {
      auto rc = detail::exec_retrying(db, "BEGIN", wait_ms);
      if (rc != SQLITE_OK)
        return rc;
    }
    int result = SQLITE_OK;
    auto one = [&](const char* sql, int64_t& out) {
      if (result != SQLITE_OK)
        return;
      sqlite3_stmt* stmt = nullptr;
      result = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
      if (result == SQLITE_OK) {
        auto step = sqlite3_step(stmt);
        if (step == SQLITE_ROW)
          out = sqlite3_column_int64(stmt, 0);
        else
          result = step == SQLITE_DONE ? SQLITE_CORRUPT : step;
      }
      sqlite3_finalize(stmt);
    };
    one("PRAGMA application_id", h.app);
    one("PRAGMA user_version", h.version);
    one("SELECT count(*) FROM sqlite_master", h.objects);
    if (!in_transaction)
      sqlite3_exec(db, result == SQLITE_OK ? "COMMIT" : "ROLLBACK", nullptr, nullptr, nullptr);
    return result;
  };
  auto unreadable = [&](int rc) -> sdk::error {
    if (detail::is_busy(rc))
      return fail(sdk::errc::busy, "still locked by another process after waiting "
                                     + std::to_string(wait_ms) + " ms");
    if ((rc & 0xFF) == SQLITE_NOTADB || (rc & 0xFF) == SQLITE_CORRUPT)
      return fail(sdk::errc::bad_request, std::string{"unreadable or corrupt SQLite database (left "
                                                      "untouched): "}
                                            + sqlite3_errmsg(db));
    // SQLite opens a store in WAL mode with its `-wal` and `-shm` files,
    // which it creates beside the store: where it cannot, the store is
    // read-only, and that is what the user needs to hear.
    if ((rc & 0xFF) == SQLITE_CANTOPEN || (rc & 0xFF) == SQLITE_READONLY) {
      if (auto why = why_read_only(path); !why.empty())
        return fail(sdk::errc::refused,
                    "read-only (" + why + ")"
                      + (opts.read_only ? std::string{": SQLite cannot create the -shm file it "
                                                      "needs beside the store to read it"}
                                        : std::string{": it cannot be written"}));
    }
    return db_error("cannot read the database header", rc, db);
  };
  // Refuses what is not ours, or not readable by this build.
  auto check = [&](const header& h) -> std::optional<sdk::error> {
    bool empty = h.app == 0 && h.objects == 0;
    if (h.app != application_id && !empty)
      return fail(sdk::errc::bad_request, "a SQLite database of another application, not a Quarry "
                                          "research store (left untouched)");
    if (h.version > schema_version)
      return fail(sdk::errc::bad_request,
                  "was written by a newer Quarry (schema " + std::to_string(h.version)
                    + ", this build reads up to " + std::to_string(schema_version) + ")");
    return std::nullopt;
  };
  header h;
  if (auto rc = read_header(h, false); rc != SQLITE_OK) {
    // On a read-only file system nobody can write the store, and SQLite
    // cannot create its `-shm` file: it is read as an immutable file.
    bool immutable = false;
    if (opts.read_only && opts.vfs.empty() && (rc & 0xFF) == SQLITE_CANTOPEN
        && on_read_only_file_system(path)) {
      auto again = sqlite::open_database(immutable_uri(path), flags | SQLITE_OPEN_URI);
      if (again.rc == SQLITE_OK && again.kind != sqlite::file_kind::other) {
        guard.reset(again.db);
        db = again.db;
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, wait_ms);
        immutable = read_header(h, false) == SQLITE_OK;
      } else if (again.db != nullptr) {
        sqlite3_close_v2(again.db);
      }
    }
    if (!immutable)
      return unreadable(rc);
  }
  if (auto err = check(h))
    return *err;
  if (opts.read_only) {
    if (h.version < schema_version)
      return fail(sdk::errc::refused, "schema " + std::to_string(h.version)
                                        + " needs a migration to schema "
                                        + std::to_string(schema_version)
                                        + ", which a read-only open does not do (open it once "
                                          "for writing)");
    sqlite3_exec(db, "PRAGMA query_only=ON", nullptr, nullptr, nullptr);
    guard.release();
    std::unique_ptr<store> result{new store(db, path, true)};
    result->stmts_->wait_ms = wait_ms;
    return result;
  }
  // WAL: readers never wait for the writer, a commit is one append.
  {
    std::string mode;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{wait_ms};
    for (;;) {
      rc = sqlite3_exec(
        db, "PRAGMA journal_mode=WAL",
        [](void* out, int n, char** values, char**) {
          if (n > 0 && values[0] != nullptr)
            *static_cast<std::string*>(out) = values[0];
          return 0;
        },
        &mode, nullptr);
      // Two connections switching at once: SQLite fails one at once rather
      // than wait (a deadlock otherwise); retry.
      if (rc == SQLITE_OK || !detail::is_busy(rc) || std::chrono::steady_clock::now() >= until)
        break;
      sqlite3_sleep(10);
    }
    if (rc != SQLITE_OK)
      return db_error("cannot switch to WAL", rc, db);
    if (mode != "wal")
      return fail(sdk::errc::internal, "cannot switch to WAL (journal mode '" + mode
                                         + "'; is the file on a network file system?)");
  }
  // Migrations, one transaction each. Another process may migrate at the
  // same time: the header is read again under the write lock.
  for (const auto& step : migrations) {
    if (h.version >= step.version)
      continue;
    rc = detail::exec_retrying(db, "BEGIN IMMEDIATE", wait_ms);
    if (rc != SQLITE_OK)
      return detail::is_busy(rc) ? unreadable(rc) : db_error("cannot migrate the schema", rc, db);
    rc = read_header(h, true);
    if (rc != SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return unreadable(rc);
    }
    if (auto err = check(h)) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return *err;
    }
    if (h.version >= step.version) {
      sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
      continue;
    }
    std::string sql = step.sql;
    if (step.version == 1)
      sql += "PRAGMA application_id=" + std::to_string(application_id) + ";";
    sql += "PRAGMA user_version=" + std::to_string(step.version) + ";";
    rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      auto err = db_error("cannot migrate the schema to version " + std::to_string(step.version),
                          rc, db);
      if (sqlite3_get_autocommit(db) == 0)
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return err;
    }
    h.version = step.version;
    h.app = application_id;
  }
  // NORMAL: in WAL mode a commit is durable at the next checkpoint; a power
  // cut may lose the last commits, never consistency.
  rc = sqlite3_exec(db,
                    "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; "
                    "PRAGMA journal_size_limit=67108864;",
                    nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    return db_error("cannot configure the connection", rc, db);
  guard.release();
  std::unique_ptr<store> result{new store(db, path, false)};
  result->stmts_->wait_ms = wait_ms;
  return result;
}

// -- writing ------------------------------------------------------------------

std::optional<sdk::error> store::write(const batch& b) {
  auto refuse = [&](std::string msg) {
    return sdk::make_error(sdk::errc::bad_request, "research store: " + std::move(msg));
  };
  if (read_only_)
    return sdk::make_error(sdk::errc::refused, "research store: opened read-only, cannot write");
  if (b.empty())
    return std::nullopt;
  // Ids first: nothing that is not a session id reaches a query.
  auto check_id = [&](const std::string& id) -> std::optional<sdk::error> {
    if (!is_session_id(id))
      return refuse("not a session id: " + describe_session(id));
    return std::nullopt;
  };
  for (const auto& s : b.new_sessions) {
    if (auto err = check_id(s.id))
      return err;
    if (!s.parent_id.empty() && !is_session_id(s.parent_id))
      return refuse("session " + s.id + ": the parent is " + describe_session(s.parent_id));
  }
  for (const auto& x : b.packets)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.documents)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.reports)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.usage)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.checkpoints)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.claims)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.states)
    if (auto err = check_id(x.session_id))
      return err;
  for (const auto& x : b.options)
    if (auto err = check_id(x.session_id))
      return err;
  // Never inside a transaction here; should one be open (a bug), it is
  // rolled back rather than merged with this batch.
  if (sqlite3_get_autocommit(db_) == 0)
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  auto rc = detail::exec_retrying(db_, "BEGIN IMMEDIATE", stmts_->wait_ms);
  if (rc != SQLITE_OK)
    return db_error("cannot start a transaction", rc, db_);
  auto err = write_batch(*stmts_, b);
  if (!err) {
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK)
      err = db_error("cannot commit", rc, db_);
  }
  // SQLite may have rolled back by itself (a full disk, an I/O error); a
  // transaction still open is rolled back here, so that the next batch
  // starts clean.
  if (err && sqlite3_get_autocommit(db_) == 0)
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return err;
}

std::variant<bool, sdk::error> store::remove(const std::string& id) {
  if (read_only_)
    return sdk::make_error(sdk::errc::refused, "research store: opened read-only, cannot remove");
  if (!is_session_id(id))
    return false;
  auto rc = detail::exec_retrying(db_, "BEGIN IMMEDIATE", stmts_->wait_ms);
  if (rc != SQLITE_OK)
    return db_error("cannot start a transaction", rc, db_);
  int changes = 0;
  {
    // Packets, documents, ... go by ON DELETE CASCADE; follow-ups keep their
    // rows (ON DELETE SET NULL of parent_id).
    statement st{*stmts_, "DELETE FROM sessions WHERE id = ?1"};
    st.bind(1, id);
    rc = st.step();
    if (rc == SQLITE_DONE)
      changes = sqlite3_changes(db_);
  }
  if (rc == SQLITE_DONE)
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    auto err = db_error("cannot remove session " + id, rc, db_);
    if (sqlite3_get_autocommit(db_) == 0)
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return err;
  }
  return changes > 0;
}

std::variant<std::vector<std::string>, sdk::error> store::mark_interrupted(const std::string& why) {
  if (read_only_)
    return sdk::make_error(sdk::errc::refused, "research store: opened read-only, cannot write");
  auto rc = detail::exec_retrying(db_, "BEGIN IMMEDIATE", stmts_->wait_ms);
  if (rc != SQLITE_OK)
    return db_error("cannot start a transaction", rc, db_);
  std::vector<std::string> ids;
  {
    statement st{*stmts_, "SELECT id FROM sessions WHERE state IN "
                          "('running', 'pending') ORDER BY created_at, id"};
    while ((rc = st.step()) == SQLITE_ROW)
      ids.push_back(st.text_at(0));
  }
  if (rc == SQLITE_DONE) {
    statement st{*stmts_, "UPDATE sessions SET state = 'interrupted', error = ?1, "
                          "updated_at = ?2 WHERE state IN ('running', 'pending')"};
    st.bind(1, why);
    st.bind(2, now_ms());
    rc = st.step();
  }
  if (rc == SQLITE_DONE)
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    auto err = db_error("cannot mark sessions interrupted", rc, db_);
    if (sqlite3_get_autocommit(db_) == 0)
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return err;
  }
  return ids;
}

// -- reading ------------------------------------------------------------------

namespace {

// What a read was doing, put into words only when it fails: `prefix`
// followed by `id` ("cannot read the packets of session " + id).
struct read_what {
  const char* prefix;
  std::string_view id = {};

  std::string text() const {
    std::string out = prefix;
    out += id;
    return out;
  }
};

// Every row of `st` through `row`, then the error if the statement did not
// run to its end (a corrupt page, an I/O error, a lock held too long).
template <class F>
std::optional<sdk::error> each_row(statement& st, sqlite3* db, read_what what, F&& row) {
  int rc;
  while ((rc = st.step()) == SQLITE_ROW)
    row();
  if (rc == SQLITE_DONE)
    return std::nullopt;
  return db_error(what.text(), rc, db);
}

// The one row of `st`, if any, through `row`; an error otherwise.
template <class F>
std::optional<sdk::error> at_most_one(statement& st, sqlite3* db, read_what what, F&& row) {
  auto rc = st.step();
  if (rc == SQLITE_ROW) {
    row();
    return std::nullopt;
  }
  if (rc == SQLITE_DONE)
    return std::nullopt;
  return db_error(what.text(), rc, db);
}

} // namespace

result<std::optional<session_row>> store::session(const std::string& id) {
  std::optional<session_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, std::string{"SELECT "} + session_columns + " FROM sessions WHERE id = ?1"};
  st.bind(1, id);
  if (auto err = at_most_one(st, db_, {"cannot read session ", id},
                             [&] { out = read_session(st); }))
    return *err;
  return out;
}

result<session_page> store::list_sessions(const session_filter& f) {
  session_page page;
  auto limit = std::clamp(f.limit, 1, 500);
  std::optional<detail::cursor> before;
  if (!f.before.empty()) {
    before = detail::decode_cursor(f.before);
    if (!before || !is_session_id(before->id))
      return page; // not a cursor of ours
  }
  std::string match;
  if (!f.search.empty()) {
    match = detail::fts_query(f.search, max_search_words);
    if (match.empty())
      return page; // no words: nothing can hold them
  }
  // Only fixed fragments make the SQL; values are bound.
  std::string sql = std::string{"SELECT "} + session_columns + " FROM sessions WHERE 1";
  if (before)
    sql += " AND (created_at < ?1 OR (created_at = ?1 AND id < ?2))";
  if (f.state)
    sql += " AND state = ?3";
  if (!match.empty())
    sql += " AND num IN (SELECT rowid FROM sessions_fts WHERE sessions_fts "
           "MATCH ?4)";
  sql += " ORDER BY created_at DESC, id DESC LIMIT ?5";
  statement st{*stmts_, sql};
  if (before) {
    st.bind(1, before->created_at);
    st.bind(2, before->id);
  }
  std::string state_name = f.state ? to_string(*f.state) : "";
  if (f.state)
    st.bind(3, state_name);
  if (!match.empty())
    st.bind(4, match);
  st.bind(5, static_cast<int64_t>(limit) + 1);
  int rc;
  while ((rc = st.step()) == SQLITE_ROW) {
    if (page.sessions.size() == static_cast<size_t>(limit)) {
      const auto& last = page.sessions.back();
      page.next_cursor = detail::encode_cursor({last.created_at, last.id});
      rc = SQLITE_DONE;
      break;
    }
    page.sessions.push_back(read_session(st));
  }
  if (rc != SQLITE_DONE)
    return db_error("cannot list the sessions", rc, db_);
  return page;
}

result<std::vector<packet_row>> store::packets(const std::string& id, uint64_t from_seq,
                                               size_t limit) {
  std::vector<packet_row> out;
  if (!is_session_id(id) || limit == 0)
    return out;
  constexpr auto max_int = static_cast<uint64_t>(INT64_MAX);
  if (from_seq > max_int)
    return out;
  // The runs holding from_seq and after, each split into its lines. They
  // must follow each other without a gap or an overlap: anything else is
  // damage, reported rather than read around.
  statement st{*stmts_, "SELECT first_seq, last_seq, lines FROM packet_runs "
                        "WHERE session_id = ?1 AND last_seq >= ?2 ORDER BY last_seq"};
  st.bind(1, id);
  st.bind(2, static_cast<int64_t>(from_seq));
  auto damaged = [&](int64_t first, int64_t last, const char* what) {
    return sdk::make_error(sdk::errc::internal, "research store: the packets of session " + id
                                                  + " are damaged (the run of seq "
                                                  + std::to_string(first) + " to "
                                                  + std::to_string(last) + " " + what + ")");
  };
  auto expected = std::max<uint64_t>(from_seq, 1);
  bool first_run = true;
  int rc = SQLITE_DONE;
  while (out.size() < limit && (rc = st.step()) == SQLITE_ROW) {
    auto first = st.int_at(0);
    auto last = st.int_at(1);
    if (first < 1 || last < first)
      return damaged(first, last, "is not a range of seqs");
    auto ufirst = static_cast<uint64_t>(first);
    if (first_run ? ufirst > expected : ufirst != expected)
      return damaged(first, last, "does not follow the one before");
    first_run = false;
    expected = static_cast<uint64_t>(last) + 1;
    auto lines = st.view_at(2);
    if (first == last) {
      if (static_cast<uint64_t>(first) >= from_seq)
        out.push_back({static_cast<uint64_t>(first), std::string{lines}});
      continue;
    }
    // `at` is where the line of `seq` starts; past the end once the last
    // line was read.
    size_t at = 0;
    auto seq = ufirst;
    auto ulast = static_cast<uint64_t>(last);
    for (; seq <= ulast && out.size() < limit; ++seq) {
      if (at > lines.size())
        return damaged(first, last, "holds fewer lines");
      auto end = lines.find('\n', at);
      if (end == std::string_view::npos)
        end = lines.size();
      if (seq >= from_seq)
        out.push_back({seq, std::string{lines.substr(at, end - at)}});
      at = end + 1;
    }
    if (seq > ulast && at <= lines.size())
      return damaged(first, last, "holds more lines");
  }
  if (out.size() < limit && rc != SQLITE_DONE)
    return db_error("cannot read the packets of session " + id, rc, db_);
  return out;
}

result<std::vector<document_row>> store::documents(const std::string& id) {
  std::vector<document_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT document_id, url, title, text, sha256, fetched_at, "
                        "source_type, snippet_only FROM documents WHERE session_id = ?1 "
                        "ORDER BY fetched_at, document_id"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the documents of session ", id}, [&] {
        document_row row;
        row.document_id = st.text_at(0);
        row.url = st.text_at(1);
        row.title = st.text_at(2);
        row.text = st.text_at(3);
        row.sha256 = st.text_at(4);
        row.fetched_at = st.int_at(5);
        row.source_type = st.text_at(6);
        row.snippet_only = st.int_at(7) != 0;
        out.push_back(std::move(row));
      }))
    return *err;
  return out;
}

result<std::vector<claim_row>> store::claims(const std::string& id) {
  std::vector<claim_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT claim, text, report_begin, report_end, citations, verdict, judge, "
                        "recited_to, source, document_id, evidence_begin, evidence_end, "
                        "evidence, snippet_only, created_at FROM claims WHERE session_id = ?1 "
                        "ORDER BY claim"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the claims of session ", id}, [&] {
        auto maybe = [&](int i) {
          return st.null_at(i) ? std::nullopt : std::optional<int64_t>{st.int_at(i)};
        };
        auto maybe_int = [&](int i) {
          return st.null_at(i) ? std::nullopt : std::optional<int>{static_cast<int>(st.int_at(i))};
        };
        claim_row row;
        row.claim = st.int_at(0);
        row.text = st.text_at(1);
        row.report_begin = maybe(2);
        row.report_end = maybe(3);
        auto cites = parse_json(st.text_at(4), nlohmann::json::array());
        if (cites.is_array())
          for (const auto& n : cites)
            if (n.is_number_integer())
              row.citations.push_back(n.get<int>());
        row.verdict = st.text_at(5);
        row.judge = st.text_at(6);
        row.recited_to = maybe_int(7);
        row.source = maybe_int(8);
        row.document_id = st.text_at(9);
        row.evidence_begin = maybe(10);
        row.evidence_end = maybe(11);
        row.evidence = st.text_at(12);
        row.snippet_only = st.int_at(13) != 0;
        row.created_at = st.int_at(14);
        out.push_back(std::move(row));
      }))
    return *err;
  return out;
}

std::optional<claim_row> claim_from_json(const nlohmann::json& j) {
  if (!j.is_object())
    return std::nullopt;
  auto id = j.find("id");
  auto verdict = j.find("verdict");
  if (id == j.end() || !id->is_number_integer() || verdict == j.end() || !verdict->is_string())
    return std::nullopt;
  auto text = [&](const char* key) {
    auto i = j.find(key);
    return i != j.end() && i->is_string() ? i->get<std::string>() : std::string{};
  };
  auto number = [&](const char* key) -> std::optional<int64_t> {
    auto i = j.find(key);
    if (i == j.end() || !i->is_number_integer())
      return std::nullopt;
    return i->get<int64_t>();
  };
  auto small = [&](const char* key) -> std::optional<int> {
    auto n = number(key);
    if (!n || *n < INT32_MIN || *n > INT32_MAX)
      return std::nullopt;
    return static_cast<int>(*n);
  };
  claim_row c;
  c.claim = id->get<int64_t>();
  c.text = text("claim");
  c.report_begin = number("report_begin");
  c.report_end = number("report_end");
  if (auto i = j.find("citations"); i != j.end() && i->is_array())
    for (const auto& n : *i)
      if (n.is_number_integer() && n.get<int64_t>() >= INT32_MIN && n.get<int64_t>() <= INT32_MAX)
        c.citations.push_back(n.get<int>());
  c.verdict = verdict->get<std::string>();
  c.judge = text("judge");
  c.recited_to = small("recited_to");
  c.source = small("source");
  c.document_id = text("document_id");
  c.evidence_begin = number("evidence_begin");
  c.evidence_end = number("evidence_end");
  c.evidence = text("evidence");
  if (auto i = j.find("snippet_only"); i != j.end() && i->is_boolean())
    c.snippet_only = i->get<bool>();
  if (auto t = number("created_at"))
    c.created_at = *t;
  return c;
}

nlohmann::json to_json(const claim_row& c) {
  using nlohmann::json;
  auto maybe = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"id", c.claim},
          {"claim", c.text},
          {"report_begin", maybe(c.report_begin)},
          {"report_end", maybe(c.report_end)},
          {"citations", c.citations},
          {"verdict", c.verdict},
          {"judge", c.judge.empty() ? json(nullptr) : json(c.judge)},
          {"recited_to", maybe(c.recited_to)},
          {"source", maybe(c.source)},
          {"document_id", c.document_id.empty() ? json(nullptr) : json(c.document_id)},
          {"evidence_begin", maybe(c.evidence_begin)},
          {"evidence_end", maybe(c.evidence_end)},
          {"evidence", c.source ? json(c.evidence) : json(nullptr)},
          {"snippet_only", c.snippet_only},
          {"created_at", c.created_at}};
}

result<std::vector<citation_row>> store::citations(const std::string& id) {
  std::vector<citation_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT number, document_id FROM citations "
                        "WHERE session_id = ?1 ORDER BY number"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the citations of session ", id}, [&] {
        citation_row row;
        row.number = static_cast<int>(st.int_at(0));
        row.document_id = st.text_at(1);
        out.push_back(std::move(row));
      }))
    return *err;
  return out;
}

result<std::vector<source_row>> store::sources(const std::string& id) {
  std::vector<source_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT c.number, c.document_id, coalesce(d.title, ''), "
                        "coalesce(d.url, ''), coalesce(d.snippet_only, 0) FROM citations AS c "
                        "LEFT JOIN documents "
                        "AS d ON d.session_id = c.session_id AND d.document_id = "
                        "c.document_id WHERE c.session_id = ?1 ORDER BY c.number"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the sources of session ", id}, [&] {
        source_row row;
        row.number = static_cast<int>(st.int_at(0));
        row.document_id = st.text_at(1);
        row.title = st.text_at(2);
        row.url = st.text_at(3);
        row.snippet_only = st.int_at(4) != 0;
        out.push_back(std::move(row));
      }))
    return *err;
  return out;
}

namespace {

report_row read_report(const statement& st) {
  report_row row;
  row.kind = st.text_at(0);
  row.tab = static_cast<int>(st.int_at(1));
  row.turn = static_cast<int>(st.int_at(2));
  row.text = st.text_at(3);
  row.created_at = st.int_at(4);
  return row;
}

} // namespace

result<std::vector<report_row>> store::reports(const std::string& id) {
  std::vector<report_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT kind, tab, turn, text, created_at FROM reports "
                        "WHERE session_id = ?1 ORDER BY id"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the reports of session ", id},
                          [&] { out.push_back(read_report(st)); }))
    return *err;
  return out;
}

result<std::optional<report_row>> store::final_report(const std::string& id) {
  std::optional<report_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT kind, tab, turn, text, created_at FROM reports "
                        "WHERE session_id = ?1 AND kind = 'final' "
                        "ORDER BY id DESC LIMIT 1"};
  st.bind(1, id);
  if (auto err = at_most_one(st, db_, {"cannot read the final report of session ", id},
                             [&] { out = read_report(st); }))
    return *err;
  return out;
}

result<std::optional<checkpoint_row>> store::latest_checkpoint(const std::string& id) {
  std::optional<checkpoint_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT number, state, last_seq, created_at FROM "
                        "checkpoints WHERE session_id = ?1 "
                        "ORDER BY number DESC LIMIT 1"};
  st.bind(1, id);
  if (auto err = at_most_one(st, db_, {"cannot read the checkpoint of session ", id}, [&] {
        checkpoint_row row;
        row.number = st.int_at(0);
        row.state = parse_json(st.text_at(1), nullptr);
        auto last = st.int_at(2);
        row.last_seq = last > 0 ? static_cast<uint64_t>(last) : 0;
        row.created_at = st.int_at(3);
        out = std::move(row);
      }))
    return *err;
  return out;
}

result<usage_total> store::usage(const std::string& id) {
  usage_total total;
  if (!id.empty() && !is_session_id(id))
    return total;
  std::string sql = "SELECT count(*), total(input_tokens), "
                    "total(output_tokens), total(cost) FROM usage";
  if (!id.empty())
    sql += " WHERE session_id = ?1";
  statement st{*stmts_, sql};
  if (!id.empty())
    st.bind(1, id);
  auto what = id.empty() ? read_what{"cannot read the usage"}
                         : read_what{"cannot read the usage of session ", id};
  if (auto err = at_most_one(st, db_, what, [&] {
        total.calls = st.int_at(0);
        total.input_tokens = static_cast<int64_t>(st.double_at(1));
        total.output_tokens = static_cast<int64_t>(st.double_at(2));
        total.cost = st.double_at(3);
      }))
    return *err;
  return total;
}

result<std::vector<usage_group>> store::usage_groups(const std::string& id) {
  std::vector<usage_group> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, "SELECT role, provider, model, cost_basis, count(*), "
                        "total(input_tokens), total(output_tokens), total(cost) FROM usage "
                        "WHERE session_id = ?1 GROUP BY role, provider, model, cost_basis "
                        "ORDER BY min(id)"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the usage of session ", id}, [&] {
        usage_group g;
        g.role = st.text_at(0);
        g.provider = st.text_at(1);
        g.model = st.text_at(2);
        g.cost_basis = st.text_at(3);
        g.calls = st.int_at(4);
        g.input_tokens = static_cast<int64_t>(st.double_at(5));
        g.output_tokens = static_cast<int64_t>(st.double_at(6));
        g.cost = st.double_at(7);
        out.push_back(std::move(g));
      }))
    return *err;
  return out;
}

result<std::vector<session_row>> store::children(const std::string& id) {
  std::vector<session_row> out;
  if (!is_session_id(id))
    return out;
  statement st{*stmts_, std::string{"SELECT "} + session_columns
                          + " FROM sessions WHERE parent_id = ?1 "
                            "ORDER BY created_at, id"};
  st.bind(1, id);
  if (auto err = each_row(st, db_, {"cannot read the follow-ups of session ", id},
                          [&] { out.push_back(read_session(st)); }))
    return *err;
  return out;
}

result<std::vector<std::pair<session_state, int64_t>>> store::count_by_state() {
  std::vector<std::pair<session_state, int64_t>> out;
  for (auto s : all_states)
    out.emplace_back(s, 0);
  statement st{*stmts_, "SELECT state, count(*) FROM sessions GROUP BY state"};
  if (auto err = each_row(st, db_, {"cannot count the sessions"}, [&] {
        // A state of a later version counts as failed, as read_session()
        // shows it.
        auto s = session_state_from(st.text_at(0)).value_or(session_state::failed);
        for (auto& entry : out)
          if (entry.first == s)
            entry.second += st.int_at(1);
      }))
    return *err;
  return out;
}

} // namespace quarry::store
