// Tests of the research store (quarry_store) on real SQLite files in fresh
// temporary folders: round trips, paging and search, all-or-nothing batches,
// refusing foreign and newer files, read-only files, full disks and I/O
// errors (through a fault-injecting VFS), two connections, hostile text.

#include "quarry/store/store.hpp"

#include "support/faulty_vfs.hpp"
#include "support/process.hpp"
#include "support/store_read.hpp"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace store_test {

using namespace quarry;
using namespace quarry::store;
namespace fs = std::filesystem;
using test::fault_plan;
using test::faulty_vfs;
using test::read_ok;

namespace {

std::unique_ptr<quarry::store::store> open_ok(const std::string& path,
                                              const open_options& opts = {}) {
  auto opened = quarry::store::store::open(path, opts);
  if (auto* err = std::get_if<sdk::error>(&opened))
    FAIL("open failed: " << err->message);
  auto result = std::move(std::get<std::unique_ptr<quarry::store::store>>(opened));
  REQUIRE(result != nullptr);
  return result;
}

sdk::error open_fails(const std::string& path, const open_options& opts = {}) {
  auto opened = quarry::store::store::open(path, opts);
  if (std::holds_alternative<std::unique_ptr<quarry::store::store>>(opened))
    FAIL("open of " << path << " succeeded, expected an error");
  return std::get<sdk::error>(opened);
}

void write_ok(quarry::store::store& db, const batch& b) {
  auto err = db.write(b);
  if (err)
    FAIL("write failed: " << err->message);
}

/// Checks that `message` is worded as the store words its errors: it starts
/// with "research store: " and never names the database file `path` (such
/// messages reach HTTP clients; the command line adds the path itself).
void check_without_path(const std::string& message, const std::string& path) {
  CHECK_MESSAGE(message.rfind("research store: ", 0) == 0, message);
  CHECK_MESSAGE(message.find(path) == std::string::npos, message);
}

session_row make_session(const std::string& id, const std::string& question, int64_t created_at = 0,
                         const std::string& parent = "") {
  session_row row;
  row.id = id;
  row.question = question;
  row.created_at = created_at;
  row.parent_id = parent;
  row.state = session_state::running;
  return row;
}

// A packet line as core::encode writes it.
std::string packet_line(const std::string& session, uint64_t seq,
                        const std::string& type = "message_delta",
                        const std::string& text = "some words") {
  nlohmann::json j{{"seq", seq},
                   {"session", session},
                   {"placement", {{"turn_index", 0}, {"tab_index", 0}}},
                   {"obj", {{"content", text}, {"type", type}}}};
  return j.dump();
}

batch::packet_write packet(const std::string& session, uint64_t seq,
                           const std::string& type = "message_delta") {
  return {session, {seq, packet_line(session, seq, type)}};
}

// Every row of every table (not the search index), read through a
// connection of its own: what "the database holds".
std::string dump_db(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  std::vector<std::string> tables;
  {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db,
                               "SELECT name FROM sqlite_master WHERE type = "
                               "'table' AND name NOT LIKE 'sqlite_%' AND name "
                               "NOT LIKE 'sessions_fts%' ORDER BY name",
                               -1, &st, nullptr)
            == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
      tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
  }
  std::string out;
  for (const auto& t : tables) {
    out += "table " + t + "\n";
    sqlite3_stmt* st = nullptr;
    auto sql = "SELECT * FROM \"" + t + "\" ORDER BY 1, 2";
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const auto* p = sqlite3_column_blob(st, i);
        auto n = sqlite3_column_bytes(st, i);
        out += '|';
        if (p != nullptr)
          out.append(static_cast<const char*>(p), static_cast<size_t>(n));
      }
      out += '\n';
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// Runs one statement on a connection of its own (to set up files).
void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* msg = nullptr;
  auto rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
  std::string why = msg != nullptr ? msg : "";
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, why);
}

int64_t raw_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  auto result = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return result;
}

std::string integrity(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK);
  std::string result;
  while (sqlite3_step(st) == SQLITE_ROW)
    result += reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return result;
}

std::vector<std::string> ids_of(const std::vector<session_row>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    out.push_back(r.id);
  return out;
}

// A session id whose hex digits are `n` (sorts like n).
std::string sid(unsigned n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "q%016x", n);
  return buf;
}

} // namespace

TEST_CASE("store: session ids have one form") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = make_session_id();
    CHECK(is_session_id(id));
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
  CHECK(is_session_id("q0123456789abcdef"));
  CHECK_FALSE(is_session_id(""));
  CHECK_FALSE(is_session_id("q0123456789abcde"));
  CHECK_FALSE(is_session_id("q0123456789abcdef0"));
  CHECK_FALSE(is_session_id("Q0123456789abcdef"));
  CHECK_FALSE(is_session_id("q0123456789ABCDEF"));
  CHECK_FALSE(is_session_id("q0123456789abcdeg"));
  CHECK_FALSE(is_session_id(std::string_view{"q0123456789abcde\0", 17}));
  CHECK_FALSE(is_session_id("q'; DROP TABLE x"));
}

TEST_CASE("store: state names round trip") {
  for (auto s : {session_state::pending, session_state::running, session_state::clarification,
                 session_state::completed, session_state::failed, session_state::cancelled,
                 session_state::interrupted})
    CHECK(session_state_from(to_string(s)) == s);
  CHECK_FALSE(session_state_from("done").has_value());
  CHECK_FALSE(session_state_from("").has_value());
}

TEST_CASE("store: every row kind round trips") {
  test::temp_dir dir;
  auto path = dir.file("sub/folder/store.db");
  auto db = open_ok(path);
  CHECK(db->path() == path);
  CHECK(fs::exists(path));
  CHECK(raw_int(path, "PRAGMA application_id") == application_id);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);

  auto id = make_session_id();
  auto row = make_session(id, "Why is the sky blue?", 1000);
  row.options = {{"strategy", "deep"}, {"depth", 3}};
  row.state = session_state::pending;
  batch b;
  b.new_sessions.push_back(row);
  CHECK(b.size() == 1);
  CHECK_FALSE(b.empty());
  write_ok(*db, b);

  auto got = read_ok(db->session(id));
  REQUIRE(got);
  CHECK(got->id == id);
  CHECK(got->parent_id.empty());
  CHECK(got->question == "Why is the sky blue?");
  CHECK(got->options == row.options);
  CHECK(got->state == session_state::pending);
  CHECK(got->created_at == 1000);
  CHECK(got->updated_at == 1000);
  CHECK(got->finished_at == 0);
  CHECK(got->last_seq == 0);

  batch w;
  for (uint64_t seq = 1; seq <= 3; ++seq)
    w.packets.push_back(packet(id, seq, seq == 1 ? "plan" : "message_delta"));
  document_row doc;
  doc.document_id = "d1";
  doc.url = "https://example.org/a";
  doc.title = "A";
  doc.text = "short snippet";
  doc.fetched_at = 2000;
  doc.source_type = "web";
  w.documents.push_back({id, doc});
  w.reports.push_back({id, {"intermediate", 2, 1, "# Agent 2", 3000}});
  w.usage.push_back({id, {"agent", "openai", "gpt", 100, 20, 0.5, "priced"}});
  w.usage.push_back({id, {"final", "openai", "gpt", 50, 10, 0.25, "priced"}});
  batch::checkpoint_write cp;
  cp.session_id = id;
  cp.checkpoint.number = 1;
  cp.checkpoint.state = {{"cycle", 1}, {"plan", {"a", "b"}}};
  cp.checkpoint.last_seq = 3;
  cp.checkpoint.created_at = 4000;
  cp.citations = {{1, "d1"}};
  w.checkpoints.push_back(cp);
  CHECK(w.size() == 3 + 1 + 1 + 2 + 2);
  write_ok(*db, w);

  got = read_ok(db->session(id));
  REQUIRE(got);
  CHECK(got->last_seq == 3);
  CHECK(got->updated_at > 1000);
  auto packets = read_ok(db->packets(id));
  REQUIRE(packets.size() == 3);
  for (uint64_t i = 0; i < 3; ++i) {
    CHECK(packets[i].seq == i + 1);
    CHECK(packets[i].line == w.packets[i].packet.line);
  }
  CHECK(read_ok(db->packets(id, 2)).size() == 2);
  CHECK(read_ok(db->packets(id, 2, 1)).size() == 1);
  CHECK(read_ok(db->packets(id, 2, 1))[0].seq == 2);
  CHECK(read_ok(db->packets(id, 4)).empty());
  CHECK(read_ok(db->packets(id, 1, 0)).empty());
  // The three packets of one batch are one row.
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs") == 1);

  auto docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].document_id == "d1");
  CHECK(docs[0].url == doc.url);
  CHECK(docs[0].title == "A");
  CHECK(docs[0].text == "short snippet");
  // SHA-256 of "short snippet", computed by the store.
  CHECK(docs[0].sha256.size() == 64);
  CHECK(docs[0].fetched_at == 2000);
  CHECK(docs[0].source_type == "web");
  auto snippet_sha = docs[0].sha256;

  // The page read later: the longer text wins; a shorter one does not.
  batch longer;
  doc.text = "the whole page, much longer than the snippet";
  doc.fetched_at = 5000;
  longer.documents.push_back({id, doc});
  write_ok(*db, longer);
  docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].text == doc.text);
  CHECK(docs[0].sha256 != snippet_sha);
  CHECK(docs[0].fetched_at == 5000);
  batch shorter;
  auto old = doc;
  doc.text = "tiny";
  doc.fetched_at = 6000;
  shorter.documents.push_back({id, doc});
  write_ok(*db, shorter);
  docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].text == old.text);
  CHECK(docs[0].fetched_at == 5000);

  auto cites = read_ok(db->citations(id));
  REQUIRE(cites.size() == 1);
  CHECK(cites[0].number == 1);
  CHECK(cites[0].document_id == "d1");

  auto reports = read_ok(db->reports(id));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == "intermediate");
  CHECK(reports[0].tab == 2);
  CHECK(reports[0].turn == 1);
  CHECK(reports[0].text == "# Agent 2");
  CHECK(reports[0].created_at == 3000);
  CHECK_FALSE(read_ok(db->final_report(id)));

  auto usage = read_ok(db->usage(id));
  CHECK(usage.calls == 2);
  CHECK(usage.input_tokens == 150);
  CHECK(usage.output_tokens == 30);
  CHECK(usage.cost == doctest::Approx(0.75));

  auto checkpoint = read_ok(db->latest_checkpoint(id));
  REQUIRE(checkpoint);
  CHECK(checkpoint->number == 1);
  CHECK(checkpoint->state == cp.checkpoint.state);
  CHECK(checkpoint->last_seq == 3);
  CHECK(checkpoint->created_at == 4000);

  // The final report, more citations with the next checkpoint, completion.
  batch done;
  done.packets.push_back(packet(id, 4, "final_report"));
  done.reports.push_back({id, {"final", 0, 2, "# Report [1] [2]", 7000}});
  batch::checkpoint_write cp2;
  cp2.session_id = id;
  cp2.checkpoint.number = 2;
  cp2.checkpoint.state = {{"cycle", 2}};
  cp2.checkpoint.last_seq = 4;
  cp2.citations = {{1, "d1"}, {2, "d2"}};
  done.checkpoints.push_back(cp2);
  done.states.push_back({id, session_state::completed, ""});
  write_ok(*db, done);
  auto final = read_ok(db->final_report(id));
  REQUIRE(final);
  CHECK(final->text == "# Report [1] [2]");
  CHECK(read_ok(db->reports(id)).size() == 2);
  CHECK(read_ok(db->citations(id)).size() == 2);
  auto sources = read_ok(db->sources(id));
  REQUIRE(sources.size() == 2);
  CHECK(sources[0].number == 1);
  CHECK(sources[0].document_id == "d1");
  CHECK(sources[0].title == "A");
  CHECK(sources[0].url == "https://example.org/a");
  CHECK(sources[1].number == 2);
  CHECK(sources[1].document_id == "d2"); // cited, not stored
  CHECK(sources[1].title.empty());
  CHECK(sources[1].url.empty());
  CHECK(read_ok(db->sources("nonsense")).empty());
  CHECK(read_ok(db->latest_checkpoint(id))->number == 2);
  got = read_ok(db->session(id));
  REQUIRE(got);
  CHECK(got->state == session_state::completed);
  CHECK(got->finished_at > 0);
  CHECK(got->last_seq == 4);

  // Usage over all sessions.
  auto other = make_session_id();
  batch more;
  more.new_sessions.push_back(make_session(other, "other"));
  more.usage.push_back({other, {"agent", "anthropic", "claude", 1, 2, 1.0, "priced"}});
  write_ok(*db, more);
  CHECK(read_ok(db->usage("")).calls == 3);
  CHECK(read_ok(db->usage("")).cost == doctest::Approx(1.75));
  CHECK(read_ok(db->usage(other)).calls == 1);

  // Unknown and malformed ids read as nothing.
  CHECK_FALSE(read_ok(db->session(make_session_id())));
  CHECK_FALSE(read_ok(db->session("nonsense")));
  CHECK(read_ok(db->packets("nonsense")).empty());
  CHECK(read_ok(db->usage("nonsense")).calls == 0);

  // An empty batch writes nothing and succeeds.
  CHECK_FALSE(db->write(batch{}));
}

TEST_CASE("store: old checkpoints are dropped, the latest kept") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "q"));
  write_ok(*db, b);
  for (int64_t n = 1; n <= 6; ++n) {
    batch c;
    batch::checkpoint_write cp;
    cp.session_id = id;
    cp.checkpoint.number = n * 10;
    cp.checkpoint.state = {{"n", n}};
    c.checkpoints.push_back(cp);
    write_ok(*db, c);
  }
  CHECK(read_ok(db->latest_checkpoint(id))->number == 60);
  CHECK(raw_int(db->path(), "SELECT count(*) FROM checkpoints") == kept_checkpoints);
}

TEST_CASE("store: lists page newest first with a cursor") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  batch b;
  // 25 sessions; created_at repeats, so the id decides within a time.
  for (unsigned i = 0; i < 25; ++i)
    b.new_sessions.push_back(make_session(sid(i), "question " + std::to_string(i), 1000 + i / 3));
  write_ok(*db, b);
  std::vector<std::string> all;
  session_filter f;
  f.limit = 10;
  std::vector<size_t> sizes;
  for (int page_no = 0; page_no < 10; ++page_no) {
    auto page = read_ok(db->list_sessions(f));
    sizes.push_back(page.sessions.size());
    for (const auto& s : page.sessions)
      all.push_back(s.id);
    if (page.next_cursor.empty())
      break;
    f.before = page.next_cursor;
  }
  CHECK(sizes == std::vector<size_t>{10, 10, 5});
  REQUIRE(all.size() == 25);
  for (unsigned i = 0; i < 25; ++i)
    CHECK(all[i] == sid(24 - i));
  // A page that ends exactly at the last session has no next cursor.
  f = {};
  f.limit = 25;
  CHECK(read_ok(db->list_sessions(f)).next_cursor.empty());
  f.limit = 24;
  auto page = read_ok(db->list_sessions(f));
  CHECK_FALSE(page.next_cursor.empty());
  f.before = page.next_cursor;
  CHECK(ids_of(read_ok(db->list_sessions(f)).sessions) == std::vector<std::string>{sid(0)});
  // The limit is clamped to 1..500.
  f = {};
  f.limit = 0;
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 1);
  f.limit = -5;
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 1);
  f.limit = 1'000'000;
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 25);
}

TEST_CASE("store: a cursor that is not one gives an empty page") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  batch b;
  for (unsigned i = 0; i < 3; ++i)
    b.new_sessions.push_back(make_session(sid(i), "q", 1000 + i));
  write_ok(*db, b);
  for (std::string garbage : std::vector<std::string>{
         "x", "c", "c.", "c1.", "c1.x", "cabc.q0000000000000001",
         "c99999999999999999999999.q0000000000000001", "c1.q000000000000000G",
         "c1' OR 1=1 --.q0000000000000001", "c1.q0000000000000001 OR 1=1", std::string(10000, 'c'),
         std::string{"c1\0.q0000000000000001", 21}}) {
    session_filter f;
    f.before = garbage;
    CHECK(read_ok(db->list_sessions(f)).sessions.empty());
  }
  // A well-formed cursor of an unknown session still pages by its time.
  session_filter f;
  f.before = "c1002.q0000000000000000";
  CHECK(ids_of(read_ok(db->list_sessions(f)).sessions) == std::vector<std::string>{sid(1), sid(0)});
  CHECK(raw_int(db->path(), "SELECT count(*) FROM sessions") == 3);
}

TEST_CASE("store: search and state filter") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  batch b;
  b.new_sessions.push_back(make_session(sid(1), "How does photosynthesis work in plants?", 1));
  b.new_sessions.push_back(make_session(sid(2), "History of the Nile delta", 2));
  b.new_sessions.push_back(make_session(sid(3), "Plants of the Nile — a survey", 3));
  b.new_sessions.push_back(make_session(sid(4), "Le café et la crème brûlée", 4));
  b.new_sessions.push_back(make_session(sid(5), "C++ \"quoted\" AND OR NEAR(x) * -", 5));
  b.states.push_back({sid(2), session_state::completed, ""});
  b.states.push_back({sid(3), session_state::failed, "no luck"});
  write_ok(*db, b);
  auto search = [&](const std::string& words, std::optional<session_state> state = std::nullopt) {
    session_filter f;
    f.search = words;
    f.state = state;
    return ids_of(read_ok(db->list_sessions(f)).sessions);
  };
  using ids = std::vector<std::string>;
  CHECK(search("photosynthesis") == ids{sid(1)});
  CHECK(search("PHOTO") == ids{sid(1)});
  CHECK(search("plants") == ids{sid(3), sid(1)});
  CHECK(search("nile plants") == ids{sid(3)});
  CHECK(search("  nile,   plants!! ") == ids{sid(3)});
  CHECK(search("plants — nile") == ids{sid(3)});
  CHECK(search("nile zebra").empty());
  CHECK(search("cafe creme") == ids{sid(4)});
  CHECK(search("CAFÉ") == ids{sid(4)});
  CHECK(search("nile", session_state::completed) == ids{sid(2)});
  CHECK(search("", session_state::failed) == ids{sid(3)});
  CHECK(search("", session_state::cancelled).empty());
  // User text is data: query syntax is not interpreted.
  CHECK(search("\"quoted\"") == ids{sid(5)});
  CHECK(search("NEAR(x)") == ids{sid(5)});
  CHECK(search("AND") == ids{sid(5)});
  CHECK(search("photosynthesis OR nile").empty());
  CHECK(search("nile NOT plants").empty());
  CHECK(search("'); DROP TABLE sessions; --").empty());
  CHECK(search("*").empty());
  CHECK(search("\"").empty());
  CHECK(search(std::string{"nile\0plants", 11}) == ids{sid(3)});
  CHECK(search("\xff\xfe nile") == ids{sid(3), sid(2)});
  CHECK(search(std::string(100000, 'a')).empty());
  CHECK(raw_int(db->path(), "SELECT count(*) FROM sessions") == 5);
  // Search and paging together.
  session_filter f;
  f.search = "nile";
  f.limit = 1;
  auto page = read_ok(db->list_sessions(f));
  CHECK(ids_of(page.sessions) == ids{sid(3)});
  f.before = page.next_cursor;
  page = read_ok(db->list_sessions(f));
  CHECK(ids_of(page.sessions) == ids{sid(2)});
  CHECK(page.next_cursor.empty());
}

TEST_CASE("store: follow-ups and counts by state") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto parent = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(parent, "first", 100));
  b.new_sessions.push_back(make_session(sid(2), "second follow-up", 300, parent));
  b.new_sessions.push_back(make_session(sid(1), "first follow-up", 200, parent));
  b.new_sessions.push_back(make_session(sid(3), "unrelated", 400));
  b.states.push_back({sid(3), session_state::cancelled, ""});
  write_ok(*db, b);
  CHECK(ids_of(read_ok(db->children(parent))) == std::vector<std::string>{sid(1), sid(2)});
  CHECK(read_ok(db->session(sid(1)))->parent_id == parent);
  CHECK(read_ok(db->children(sid(3))).empty());
  auto counts = read_ok(db->count_by_state());
  REQUIRE(counts.size() == 7);
  CHECK(counts[0] == std::pair{session_state::pending, int64_t{0}});
  CHECK(counts[1] == std::pair{session_state::running, int64_t{3}});
  CHECK(counts[5] == std::pair{session_state::cancelled, int64_t{1}});
  int64_t total = 0;
  for (const auto& c : counts)
    total += c.second;
  CHECK(total == 4);
}

TEST_CASE("store: remove cascades and keeps follow-ups") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  auto child = make_session_id();
  auto keep = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "removed question", 1));
  b.new_sessions.push_back(make_session(child, "child", 2, id));
  b.new_sessions.push_back(make_session(keep, "kept", 3));
  for (auto s : {id, keep}) {
    b.packets.push_back(packet(s, 1));
    b.packets.push_back(packet(s, 2));
    b.documents.push_back({s, {"d", "u", "t", "text", "", 1, "web"}});
    b.reports.push_back({s, {"final", 0, 1, "r", 1}});
    b.usage.push_back({s, {"r", "p", "m", 1, 1, 1, "priced"}});
    batch::checkpoint_write cp;
    cp.session_id = s;
    cp.checkpoint.number = 1;
    cp.checkpoint.last_seq = 2;
    cp.citations = {{1, "d"}};
    b.checkpoints.push_back(cp);
  }
  write_ok(*db, b);
  auto path = db->path();
  auto rows = [&](const char* table) {
    return raw_int(path, std::string{"SELECT count(*) FROM "} + table);
  };
  // Each session's two packets of the batch are one run.
  for (auto t : {"packet_runs", "documents", "citations", "reports", "usage", "checkpoints"})
    CHECK(rows(t) == 2);
  auto removed = db->remove(id);
  REQUIRE(std::holds_alternative<bool>(removed));
  CHECK(std::get<bool>(removed));
  CHECK_FALSE(read_ok(db->session(id)));
  for (auto t : {"packet_runs", "documents", "citations", "reports", "usage", "checkpoints"})
    CHECK(rows(t) == 1);
  auto c = read_ok(db->session(child));
  REQUIRE(c);
  CHECK(c->parent_id.empty());
  CHECK(read_ok(db->packets(keep)).size() == 2);
  session_filter f;
  f.search = "removed";
  CHECK(read_ok(db->list_sessions(f)).sessions.empty());
  f.search = "kept";
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 1);
  // Unknown and malformed ids: false.
  CHECK_FALSE(std::get<bool>(db->remove(id)));
  CHECK_FALSE(std::get<bool>(db->remove("x' OR 1=1")));
  CHECK(rows("sessions") == 2);
  CHECK(integrity(path) == "ok");
  // The search index agrees with the table.
  raw_exec(path, "INSERT INTO sessions_fts(sessions_fts) VALUES('integrity-check')");
}

TEST_CASE("store: mark_interrupted marks running and pending sessions") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  batch b;
  for (unsigned i = 0; i < 5; ++i)
    b.new_sessions.push_back(make_session(sid(i), "q", 10 + i));
  b.new_sessions[0].state = session_state::pending;
  b.new_sessions[2].state = session_state::completed;
  b.new_sessions[3].state = session_state::clarification;
  write_ok(*db, b);
  auto marked = db->mark_interrupted("the process stopped");
  REQUIRE(std::holds_alternative<std::vector<std::string>>(marked));
  CHECK(std::get<std::vector<std::string>>(marked)
        == std::vector<std::string>{sid(0), sid(1), sid(4)});
  for (auto i : {0u, 1u, 4u}) {
    auto s = read_ok(db->session(sid(i)));
    CHECK(s->state == session_state::interrupted);
    CHECK(s->error == "the process stopped");
  }
  CHECK(read_ok(db->session(sid(2)))->state == session_state::completed);
  CHECK(read_ok(db->session(sid(3)))->state == session_state::clarification);
  CHECK(std::get<std::vector<std::string>>(db->mark_interrupted("again")).empty());
}

TEST_CASE("store: a seq gap or a repeated seq refuses the whole batch") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto a = make_session_id();
  auto b_id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(a, "a"));
  b.new_sessions.push_back(make_session(b_id, "b"));
  b.packets.push_back(packet(a, 1));
  b.packets.push_back(packet(a, 2));
  write_ok(*db, b);
  auto before = dump_db(db->path());

  auto refused = [&](const batch& bad, const std::string& expect) {
    auto err = db->write(bad);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::bad_request);
    CHECK_MESSAGE(err->message.find(expect) != std::string::npos, err->message);
    check_without_path(err->message, db->path());
    CHECK(dump_db(db->path()) == before);
  };
  SUBCASE("a gap") {
    batch bad;
    bad.new_sessions.push_back(make_session(make_session_id(), "new"));
    bad.packets.push_back(packet(b_id, 1));
    bad.packets.push_back(packet(a, 3));
    bad.packets.push_back(packet(a, 5));
    bad.states.push_back({a, session_state::completed, ""});
    refused(bad, "session " + a + ": packet seq 5 after seq 3 (expected 4)");
  }
  SUBCASE("a repeated seq") {
    batch bad;
    bad.packets.push_back(packet(b_id, 1));
    bad.packets.push_back(packet(a, 2));
    refused(bad, "session " + a + ": packet seq 2 after seq 2 (expected 3)");
  }
  SUBCASE("a repeat within the batch") {
    batch bad;
    bad.packets.push_back(packet(b_id, 1));
    bad.packets.push_back(packet(b_id, 1));
    refused(bad, "packet seq 1 after seq 1");
  }
  SUBCASE("seq 0 and a huge seq") {
    batch bad;
    bad.packets.push_back(packet(b_id, 0));
    refused(bad, "packet seq 0 after seq 0 (expected 1)");
    batch huge;
    huge.packets.push_back(packet(b_id, UINT64_MAX));
    refused(huge, "expected 1");
  }
  SUBCASE("an unknown session") {
    batch bad;
    bad.packets.push_back(packet(b_id, 1));
    bad.packets.push_back(packet(make_session_id(), 1));
    refused(bad, "of unknown session");
  }
  // The store goes on: the right next seq is taken.
  batch ok;
  ok.packets.push_back(packet(a, 3));
  ok.packets.push_back(packet(b_id, 1));
  write_ok(*db, ok);
  CHECK(read_ok(db->session(a))->last_seq == 3);
  CHECK(read_ok(db->session(b_id))->last_seq == 1);
}

TEST_CASE("store: a renumbered citation is refused and the batch rolled back") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "q"));
  batch::checkpoint_write cp;
  cp.session_id = id;
  cp.checkpoint.number = 1;
  cp.citations = {{1, "d1"}, {2, "d2"}};
  b.checkpoints.push_back(cp);
  write_ok(*db, b);
  auto before = dump_db(db->path());
  auto refused = [&](std::vector<citation_row> cites, const std::string& expect) {
    batch bad;
    bad.packets.push_back(packet(id, 1));
    bad.reports.push_back({id, {"final", 0, 1, "text", 0}});
    batch::checkpoint_write next;
    next.session_id = id;
    next.checkpoint.number = 2;
    next.checkpoint.last_seq = 1;
    next.citations = std::move(cites);
    bad.checkpoints.push_back(next);
    auto err = db->write(bad);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::bad_request);
    CHECK_MESSAGE(err->message.find(expect) != std::string::npos, err->message);
    CHECK(dump_db(db->path()) == before);
  };
  // Number 2 given to another document.
  refused({{1, "d1"}, {2, "d3"}}, "citation [2] is another document's");
  // A numbered document given a new number.
  refused({{1, "d1"}, {2, "d2"}, {3, "d1"}}, "a document numbered [1] cannot become [3]");
  // Nonsense numbers.
  refused({{0, "d9"}}, "citation [0]");
  refused({{-4, "d9"}}, "citation [-4]");
  refused({{7, ""}}, "citation [7]");
  // Adding a number is fine; the known ones are kept.
  batch ok;
  batch::checkpoint_write next;
  next.session_id = id;
  next.checkpoint.number = 2;
  next.citations = {{1, "d1"}, {2, "d2"}, {3, "d3"}};
  ok.checkpoints.push_back(next);
  write_ok(*db, ok);
  CHECK(read_ok(db->citations(id)).size() == 3);
}

TEST_CASE("store: citations stored without a checkpoint keep the latest checkpoint") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "q"));
  batch::checkpoint_write cp;
  cp.session_id = id;
  cp.checkpoint.number = 3;
  cp.checkpoint.state = {{"n", 3}};
  cp.citations = {{1, "d1"}};
  b.checkpoints.push_back(cp);
  write_ok(*db, b);
  // The numbers of a report written after the last checkpoint: no checkpoint
  // row, no seq or number rules (neither is read), the citation rules still.
  batch only;
  batch::checkpoint_write late;
  late.session_id = id;
  late.citations_only = true;
  late.checkpoint.number = 1;     // below the stored one: not read
  late.checkpoint.last_seq = 999; // beyond the last packet: not read
  late.citations = {{1, "d1"}, {2, "d2"}};
  only.checkpoints.push_back(late);
  write_ok(*db, only);
  auto cites = read_ok(db->citations(id));
  REQUIRE(cites.size() == 2);
  CHECK(cites[1].number == 2);
  CHECK(cites[1].document_id == "d2");
  CHECK(raw_int(db->path(), "SELECT count(*) FROM checkpoints") == 1);
  CHECK(read_ok(db->latest_checkpoint(id))->number == 3);
  // A renumbering is refused as in any batch, and nothing is stored.
  auto before = dump_db(db->path());
  batch bad;
  late.citations = {{2, "d3"}};
  bad.checkpoints.push_back(late);
  auto err = db->write(bad);
  REQUIRE(err);
  CHECK_MESSAGE(err->message.find("citation [2] is another document's") != std::string::npos,
                err->message);
  CHECK(dump_db(db->path()) == before);
}

TEST_CASE("store: batches that break the rules are refused whole") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "q"));
  b.packets.push_back(packet(id, 1));
  batch::checkpoint_write cp;
  cp.session_id = id;
  cp.checkpoint.number = 5;
  cp.checkpoint.last_seq = 1;
  b.checkpoints.push_back(cp);
  write_ok(*db, b);
  auto before = dump_db(db->path());
  auto refused = [&](const batch& bad, const std::string& expect) {
    auto err = db->write(bad);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::bad_request);
    CHECK_MESSAGE(err->message.find(expect) != std::string::npos, err->message);
    CHECK(dump_db(db->path()) == before);
  };
  auto with_packet = [&] {
    batch x;
    x.packets.push_back(packet(id, 2));
    return x;
  };
  {
    auto x = with_packet();
    x.new_sessions.push_back(make_session(id, "again"));
    refused(x, "session " + id + " exists already");
  }
  {
    auto x = with_packet();
    auto orphan = make_session_id();
    auto ghost = make_session_id();
    x.new_sessions.push_back(make_session(orphan, "o", 0, ghost));
    refused(x, "follows up session " + ghost + ", which is unknown");
  }
  {
    auto x = with_packet();
    x.new_sessions.push_back(make_session("not-an-id", "x"));
    refused(x, "not a session id");
  }
  {
    auto x = with_packet();
    x.new_sessions.push_back(make_session(make_session_id(), "x", 0, "../etc"));
    refused(x, "the parent is");
  }
  {
    auto x = with_packet();
    x.reports.push_back({id, {"summary", 0, 0, "x", 0}});
    refused(x, "'intermediate' or 'final'");
  }
  {
    auto x = with_packet();
    x.documents.push_back({id, {"", "u", "t", "x", "", 0, "web"}});
    refused(x, "a document without an id");
  }
  {
    auto x = with_packet();
    batch::checkpoint_write c;
    c.session_id = id;
    c.checkpoint.number = 5;
    c.checkpoint.last_seq = 2;
    x.checkpoints.push_back(c);
    refused(x, "checkpoint 5 does not follow checkpoint 5");
  }
  {
    auto x = with_packet();
    batch::checkpoint_write c;
    c.session_id = id;
    c.checkpoint.number = 6;
    c.checkpoint.last_seq = 3;
    x.checkpoints.push_back(c);
    refused(x, "beyond the last packet (seq 2)");
  }
  {
    auto x = with_packet();
    x.states.push_back({make_session_id(), session_state::failed, "x"});
    refused(x, "a state change of unknown session");
  }
  {
    auto x = with_packet();
    x.usage.push_back({"q'; DELETE FROM sessions; --", {}});
    refused(x, "not a session id");
  }
}

TEST_CASE("store: data survives closing and opening again") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  {
    auto db = open_ok(path);
    batch b;
    b.new_sessions.push_back(make_session(id, "durable", 5));
    b.packets.push_back(packet(id, 1));
    b.documents.push_back({id, {"d", "u", "t", "text", "", 1, "web"}});
    write_ok(*db, b);
  }
  auto before = dump_db(path);
  {
    auto db = open_ok(path);
    CHECK(read_ok(db->session(id))->question == "durable");
    CHECK(read_ok(db->packets(id)).size() == 1);
    batch b;
    b.packets.push_back(packet(id, 2));
    write_ok(*db, b);
  }
  auto db = open_ok(path);
  CHECK(read_ok(db->session(id))->last_seq == 2);
  CHECK(dump_db(path) != before);
  CHECK(raw_int(path, "PRAGMA journal_mode") >= 0);
  CHECK(integrity(path) == "ok");
}

TEST_CASE("store: an empty file becomes a store") {
  test::temp_dir dir;
  auto path = dir.write("empty.db", "");
  REQUIRE(fs::file_size(path) == 0);
  {
    auto db = open_ok(path);
    batch b;
    b.new_sessions.push_back(make_session(make_session_id(), "q"));
    write_ok(*db, b);
  }
  CHECK(raw_int(path, "PRAGMA application_id") == application_id);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);
  CHECK(raw_int(path, "SELECT count(*) FROM sessions") == 1);
  // So does a SQLite database without any table (and no application id).
  auto blank = dir.file("blank.db");
  raw_exec(blank, "PRAGMA user_version=0");
  { auto db = open_ok(blank); }
  CHECK(raw_int(blank, "PRAGMA user_version") == schema_version);
}

TEST_CASE("store: a newer schema is refused and left untouched") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  { auto db = open_ok(path); }
  raw_exec(path, "PRAGMA user_version=7");
  auto bytes = test::read_file(path);
  auto err = open_fails(path);
  CHECK(err.code == sdk::errc::bad_request);
  CHECK_MESSAGE(err.message.find("was written by a newer Quarry (schema 7, "
                                 "this build reads up to "
                                 + std::to_string(schema_version) + ")")
                  != std::string::npos,
                err.message);
  check_without_path(err.message, path);
  open_options ro;
  ro.read_only = true;
  err = open_fails(path, ro);
  CHECK(err.message.find("newer Quarry") != std::string::npos);
  CHECK(test::read_file(path) == bytes);
}

TEST_CASE("store: a file that is not SQLite is refused and left untouched") {
  test::temp_dir dir;
  for (std::string content : std::vector<std::string>{
         std::string{"hello, this is a text file\n"}, std::string(5000, 'x'),
         std::string{"SQLite format 2\0garbage", 23}, std::string{"\0\0\0", 3}}) {
    auto path = dir.write("not.db", content);
    auto err = open_fails(path);
    CHECK(err.code == sdk::errc::bad_request);
    check_without_path(err.message, path);
    CHECK(err.message.find("not a SQLite database") != std::string::npos);
    CHECK(test::read_file(path) == content);
    CHECK_FALSE(fs::exists(path + "-wal"));
    CHECK_FALSE(fs::exists(path + "-journal"));
  }
  // A folder is not a store either.
  fs::create_directories(dir.file("folder.db"));
  CHECK(open_fails(dir.file("folder.db")).message.find("not a regular file") != std::string::npos);
  CHECK(open_fails("").code == sdk::errc::bad_request);
}

TEST_CASE("store: a SQLite database of another application is refused and left untouched") {
  test::temp_dir dir;
  SUBCASE("tables, no application id") {
    auto path = dir.file("other.db");
    raw_exec(path, "CREATE TABLE sessions(x); INSERT INTO sessions VALUES (1);");
    auto bytes = test::read_file(path);
    auto err = open_fails(path);
    CHECK(err.code == sdk::errc::bad_request);
    CHECK(err.message.find("another application") != std::string::npos);
    check_without_path(err.message, path);
    CHECK(test::read_file(path) == bytes);
    CHECK(raw_int(path, "PRAGMA journal_mode = 'delete'") >= 0);
  }
  SUBCASE("another application id, no tables") {
    auto path = dir.file("other.db");
    raw_exec(path, "PRAGMA application_id=1234; PRAGMA user_version=1;");
    auto bytes = test::read_file(path);
    REQUIRE_FALSE(bytes.empty());
    auto err = open_fails(path);
    CHECK(err.message.find("another application") != std::string::npos);
    CHECK(test::read_file(path) == bytes);
  }
  SUBCASE("Quarry's corpus index") {
    auto path = dir.file("corpus.db");
    raw_exec(path, "CREATE TABLE documents(id); PRAGMA application_id=" + std::to_string(0x51525259)
                     + ";");
    auto bytes = test::read_file(path);
    auto err = open_fails(path);
    CHECK(err.message.find("another application") != std::string::npos);
    CHECK(test::read_file(path) == bytes);
  }
}

TEST_CASE("store: read-only files and read-only opens") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  {
    auto db = open_ok(path);
    batch b;
    b.new_sessions.push_back(make_session(id, "kept"));
    b.packets.push_back(packet(id, 1));
    write_ok(*db, b);
  }
  auto before = dump_db(path);
  open_options ro;
  ro.read_only = true;
  if (geteuid() != 0) {
    // Without write permission: a writing open is refused with a reason.
    REQUIRE(chmod(path.c_str(), 0444) == 0);
    auto err = open_fails(path);
    CHECK(err.code == sdk::errc::refused);
    CHECK(err.message.find("read-only") != std::string::npos);
    check_without_path(err.message, path);
  }
  // (root ignores file modes: SQLITE_OPEN_READONLY is what is tested then.)
  auto bytes = test::read_file(path);
  {
    auto db = open_ok(path, ro);
    CHECK(read_ok(db->session(id))->question == "kept");
    CHECK(read_ok(db->packets(id)).size() == 1);
    batch b;
    b.packets.push_back(packet(id, 2));
    auto err = db->write(b);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::refused);
    CHECK(err->message.find("opened read-only") != std::string::npos);
    check_without_path(err->message, path);
    auto removed = db->remove(id);
    REQUIRE(std::holds_alternative<sdk::error>(removed));
    CHECK(std::get<sdk::error>(removed).code == sdk::errc::refused);
    CHECK(std::holds_alternative<sdk::error>(db->mark_interrupted("x")));
  }
  CHECK(test::read_file(path) == bytes);
  CHECK(dump_db(path) == before);
  chmod(path.c_str(), 0644);
  // A read-only open creates nothing and migrates nothing.
  auto missing = dir.file("none/missing.db");
  CHECK(open_fails(missing, ro).code == sdk::errc::not_found);
  CHECK_FALSE(fs::exists(dir.file("none")));
  auto old = dir.file("old.db");
  raw_exec(old, "PRAGMA user_version=0");
  auto err = open_fails(old, ro);
  CHECK(err.code == sdk::errc::refused);
  CHECK(err.message.find("needs a migration") != std::string::npos);
  CHECK(raw_int(old, "PRAGMA user_version") == 0);
}

TEST_CASE("store: a full disk refuses the batch and damages nothing") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto& vfs = faulty_vfs::get();
  vfs.disarm();
  open_options with_faults;
  with_faults.vfs = vfs.name();
  auto id = make_session_id();
  std::string committed;
  {
    auto db = open_ok(path, with_faults);
    batch b;
    b.new_sessions.push_back(make_session(id, "before the disk filled up"));
    for (uint64_t seq = 1; seq <= 20; ++seq)
      b.packets.push_back(packet(id, seq));
    write_ok(*db, b);
    committed = dump_db(path);

    // The disk is full after a few more KiB.
    fault_plan full;
    full.when = fault_plan::trigger::after_bytes;
    full.bytes = 8192;
    full.code = SQLITE_FULL;
    vfs.arm(full);
    batch big;
    for (uint64_t seq = 21; seq <= 400; ++seq)
      big.packets.push_back(packet(id, seq));
    big.documents.push_back({id, {"d", "u", "t", std::string(100000, 'x'), "", 1, "web"}});
    auto err = db->write(big);
    REQUIRE(err);
    CHECK(vfs.faults() > 0);
    CHECK(err->code == sdk::errc::too_large);
    CHECK_MESSAGE(err->message.find("the disk is full") != std::string::npos, err->message);
    check_without_path(err->message, path);
    // Still full: the next batch fails the same way.
    batch small;
    small.packets.push_back(packet(id, 21));
    small.documents.push_back({id, {"d2", "u", "t", std::string(20000, 'y'), "", 1, "web"}});
    err = db->write(small);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::too_large);
    // Reads go on.
    CHECK(read_ok(db->session(id))->last_seq == 20);
    CHECK(read_ok(db->packets(id)).size() == 20);

    // Space again: the same store writes.
    vfs.disarm();
    write_ok(*db, small);
    CHECK(read_ok(db->session(id))->last_seq == 21);
  }
  CHECK(integrity(path) == "ok");
  auto db = open_ok(path);
  CHECK(read_ok(db->session(id))->last_seq == 21);
  CHECK(read_ok(db->packets(id)).size() == 21);
  CHECK(read_ok(db->documents(id)).size() == 1);
  CHECK(read_ok(db->documents(id))[0].document_id == "d2");
}

TEST_CASE("store: after a full disk the file holds exactly what was committed") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto& vfs = faulty_vfs::get();
  vfs.disarm();
  open_options with_faults;
  with_faults.vfs = vfs.name();
  auto id = make_session_id();
  std::string committed;
  {
    auto db = open_ok(path, with_faults);
    batch b;
    b.new_sessions.push_back(make_session(id, "q"));
    b.packets.push_back(packet(id, 1));
    write_ok(*db, b);
    committed = dump_db(path);
    fault_plan full;
    full.when = fault_plan::trigger::after_bytes;
    full.bytes = 0;
    full.code = SQLITE_FULL;
    vfs.arm(full);
    batch more;
    more.packets.push_back(packet(id, 2));
    more.states.push_back({id, session_state::completed, ""});
    auto err = db->write(more);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::too_large);
    CHECK(vfs.faults() > 0);
    // Closed while the disk is still full.
  }
  vfs.disarm();
  CHECK(integrity(path) == "ok");
  CHECK(dump_db(path) == committed);
  auto db = open_ok(path);
  CHECK(read_ok(db->session(id))->state == session_state::running);
  batch more;
  more.packets.push_back(packet(id, 2));
  write_ok(*db, more);
}

TEST_CASE("store: an I/O error while committing rolls back the batch") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto& vfs = faulty_vfs::get();
  vfs.disarm();
  open_options with_faults;
  with_faults.vfs = vfs.name();
  auto id = make_session_id();
  std::string committed;
  {
    auto db = open_ok(path, with_faults);
    batch b;
    b.new_sessions.push_back(make_session(id, "q"));
    b.packets.push_back(packet(id, 1));
    write_ok(*db, b);
    committed = dump_db(path);
    for (int nth : {1, 2, 3}) {
      // The nth write to the WAL fails once (the commit writes the WAL).
      fault_plan io;
      io.when = fault_plan::trigger::on_write;
      io.nth = nth;
      io.code = SQLITE_IOERR_WRITE;
      io.files = SQLITE_OPEN_WAL;
      io.sticky = false;
      vfs.arm(io);
      batch more;
      for (uint64_t seq = 2; seq <= 50; ++seq)
        more.packets.push_back(packet(id, seq));
      auto err = db->write(more);
      REQUIRE(err);
      CHECK(vfs.faults() == 1);
      CHECK(err->code == sdk::errc::internal);
      CHECK_MESSAGE(err->message.find("I/O error") != std::string::npos, err->message);
      check_without_path(err->message, path);
      CHECK(read_ok(db->session(id))->last_seq == 1);
      CHECK(dump_db(path) == committed);
    }
    // The fault has passed: the same store writes.
    batch again;
    again.packets.push_back(packet(id, 2));
    write_ok(*db, again);
    CHECK(vfs.writes() > 3);
  }
  vfs.disarm();
  CHECK(integrity(path) == "ok");
  auto db = open_ok(path);
  CHECK(read_ok(db->session(id))->last_seq == 2);
  CHECK(read_ok(db->packets(id)).size() == 2);
}

TEST_CASE("store: an I/O error during a WAL checkpoint loses nothing") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto& vfs = faulty_vfs::get();
  vfs.disarm();
  open_options with_faults;
  with_faults.vfs = vfs.name();
  auto id = make_session_id();
  std::string committed;
  size_t stored = 0;
  {
    auto db = open_ok(path, with_faults);
    batch b;
    b.new_sessions.push_back(make_session(id, "q"));
    write_ok(*db, b);
    fault_plan io;
    io.sticky = true;
    // Whether every commit must succeed (only checkpoints touch the file).
    bool commits_succeed = true;
    SUBCASE("writes to the database file fail") {
      // Checkpoints (which copy the WAL into it) fail; commits (WAL
      // appends) succeed.
      io.when = fault_plan::trigger::on_write;
      io.nth = 1;
      io.code = SQLITE_IOERR_WRITE;
      io.files = SQLITE_OPEN_MAIN_DB;
    }
    SUBCASE("syncs fail") {
      // With synchronous=NORMAL, commits do not sync the WAL; checkpoints
      // sync it and the database file; the writer syncs a WAL header it
      // writes anew. A failed sync fails that commit.
      io.when = fault_plan::trigger::on_sync;
      io.nth = 1;
      io.code = SQLITE_IOERR_FSYNC;
      commits_succeed = false;
    }
    vfs.arm(io);
    // Over 1000 pages (4 MiB): SQLite checkpoints after the commit.
    for (int i = 0; i < 3; ++i) {
      batch big;
      big.documents.push_back({id,
                               {"d" + std::to_string(i), "u", "t",
                                std::string(2'000'000, static_cast<char>('a' + i)), "", 1, "web"}});
      auto err = db->write(big);
      if (!err) {
        ++stored;
        continue;
      }
      CHECK_FALSE(commits_succeed);
      CHECK(err->code == sdk::errc::internal);
      CHECK(err->message.find("I/O error") != std::string::npos);
    }
    MESSAGE("batches stored despite the faults: " << stored);
    CHECK(stored >= 1);
    CHECK(vfs.faults() > 0);
    committed = dump_db(path);
    // Closing checkpoints too (and fails): the WAL stays.
  }
  CHECK(vfs.faults() > 1);
  vfs.disarm();
  CHECK(fs::exists(path + "-wal"));
  CHECK(integrity(path) == "ok");
  CHECK(dump_db(path) == committed);
  auto db = open_ok(path);
  auto docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == stored);
  for (size_t i = 0; i < stored; ++i)
    CHECK(docs[i].text == std::string(2'000'000, static_cast<char>('a' + i)));
  // And it writes on.
  batch more;
  more.packets.push_back(packet(id, 1));
  write_ok(*db, more);
  CHECK(read_ok(db->session(id))->last_seq == 1);
}

TEST_CASE("store: an unknown VFS is an error") {
  test::temp_dir dir;
  open_options opts;
  opts.vfs = "no_such_vfs";
  auto err = open_fails(dir.file("s.db"), opts);
  CHECK(err.message.find("no_such_vfs") != std::string::npos);
}

TEST_CASE("store: two connections on one file write alternately") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto one = open_ok(path);
  auto two = open_ok(path);
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "shared"));
  write_ok(*one, b);
  for (uint64_t seq = 1; seq <= 40; ++seq) {
    batch p;
    p.packets.push_back(packet(id, seq));
    write_ok(seq % 2 == 1 ? *one : *two, p);
  }
  CHECK(read_ok(one->session(id))->last_seq == 40);
  CHECK(read_ok(two->packets(id)).size() == 40);
  // A connection that lags behind reads the other's seq, and refuses a
  // repeat.
  batch repeat;
  repeat.packets.push_back(packet(id, 40));
  CHECK(one->write(repeat));
}

TEST_CASE("store: two connections writing at once both succeed") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  { auto db = open_ok(path); }
  constexpr uint64_t batches = 150;
  std::vector<std::string> errors[2];
  std::string ids[2] = {make_session_id(), make_session_id()};
  auto run = [&](int k) {
    auto opened = quarry::store::store::open(path);
    if (auto* err = std::get_if<sdk::error>(&opened)) {
      errors[k].push_back(err->message);
      return;
    }
    auto& db = *std::get<std::unique_ptr<quarry::store::store>>(opened);
    batch b;
    b.new_sessions.push_back(make_session(ids[k], "thread"));
    if (auto err = db.write(b))
      errors[k].push_back(err->message);
    for (uint64_t seq = 1; seq <= batches; ++seq) {
      batch p;
      for (uint64_t i = 0; i < 4; ++i)
        p.packets.push_back(packet(ids[k], (seq - 1) * 4 + i + 1));
      if (auto err = db.write(p))
        errors[k].push_back(err->message);
    }
  };
  std::thread a{run, 0};
  std::thread b{run, 1};
  a.join();
  b.join();
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  auto db = open_ok(path);
  CHECK(read_ok(db->session(ids[0]))->last_seq == batches * 4);
  CHECK(read_ok(db->session(ids[1]))->last_seq == batches * 4);
}

TEST_CASE("store: hostile text is stored safely") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  std::string nul{"before\0after", 12};
  std::string bad_utf8{"caf\xc3 \xff\xfe \xed\xa0\x80 end"};
  std::string huge(4 * 1024 * 1024, '\0');
  for (size_t i = 0; i < huge.size(); ++i)
    huge[i] = static_cast<char>((i * 7919) % 256);
  {
    auto db = open_ok(path);
    batch b;
    auto row = make_session(id, nul + bad_utf8);
    row.error = bad_utf8;
    row.options = {{"note", bad_utf8}, {"n", 1}};
    b.new_sessions.push_back(row);
    b.packets.push_back({id, {1, nul}});
    b.packets.push_back({id, {2, bad_utf8}});
    b.packets.push_back({id, {3, huge}});
    b.packets.push_back({id, {4, ""}});
    b.documents.push_back({id, {nul, bad_utf8, nul, huge, "", 1, bad_utf8}});
    b.reports.push_back({id, {"final", 0, 0, huge, 1}});
    b.usage.push_back({id, {nul, bad_utf8, "m", 1, 1, std::nan("")}});
    batch::checkpoint_write cp;
    cp.session_id = id;
    cp.checkpoint.number = 1;
    cp.checkpoint.state = {{"text", bad_utf8}};
    cp.checkpoint.last_seq = 4;
    cp.citations = {{1, nul}};
    b.checkpoints.push_back(cp);
    b.states.push_back({id, session_state::failed, nul});
    write_ok(*db, b);
  }
  auto db = open_ok(path);
  auto s = read_ok(db->session(id));
  REQUIRE(s);
  CHECK(s->question == nul + bad_utf8);
  CHECK(s->error == nul);
  CHECK(s->options["n"] == 1);
  CHECK(s->options["note"].is_string()); // invalid UTF-8 replaced
  auto packets = read_ok(db->packets(id));
  REQUIRE(packets.size() == 4);
  CHECK(packets[0].line == nul);
  CHECK(packets[1].line == bad_utf8);
  CHECK(packets[2].line == huge);
  CHECK(packets[3].line.empty());
  auto docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].document_id == nul);
  CHECK(docs[0].url == bad_utf8);
  CHECK(docs[0].text == huge);
  CHECK(docs[0].source_type == bad_utf8);
  CHECK(docs[0].sha256.size() == 64);
  CHECK(read_ok(db->final_report(id))->text == huge);
  CHECK(read_ok(db->citations(id))[0].document_id == nul);
  CHECK(read_ok(db->usage(id)).cost == 0);
  CHECK(read_ok(db->latest_checkpoint(id))->state["text"].is_string());
  // A longer document text with NUL bytes counts its bytes, not its C length.
  batch longer;
  longer.documents.push_back({id, {nul, "", "", huge + nul, "", 2, ""}});
  write_ok(*db, longer);
  CHECK(read_ok(db->documents(id))[0].text == huge + nul);
  CHECK(read_ok(db->documents(id))[0].url == bad_utf8);
  session_filter f;
  f.search = "after";
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 1);
  f.search = "before aftercaf end";
  CHECK(read_ok(db->list_sessions(f)).sessions.size() == 1);
  CHECK(integrity(path) == "ok");
  raw_exec(path, "INSERT INTO sessions_fts(sessions_fts) VALUES('integrity-check')");
  // Removing it removes its words from the search index.
  CHECK(std::get<bool>(db->remove(id)));
  CHECK(read_ok(db->list_sessions(f)).sessions.empty());
  raw_exec(path, "INSERT INTO sessions_fts(sessions_fts) VALUES('integrity-check')");
  CHECK(integrity(path) == "ok");
}

TEST_CASE("store: several connections create one database at once") {
  test::temp_dir dir;
  auto path = dir.file("new/s.db");
  constexpr int n = 4;
  std::vector<std::string> errors[n];
  std::vector<std::thread> threads;
  for (int k = 0; k < n; ++k)
    threads.emplace_back([&, k] {
      auto opened = quarry::store::store::open(path);
      if (auto* err = std::get_if<sdk::error>(&opened)) {
        errors[k].push_back(err->message);
        return;
      }
      auto& db = *std::get<std::unique_ptr<quarry::store::store>>(opened);
      batch b;
      b.new_sessions.push_back(make_session(make_session_id(), "q"));
      if (auto err = db.write(b))
        errors[k].push_back(err->message);
    });
  for (auto& t : threads)
    t.join();
  for (int k = 0; k < n; ++k)
    CHECK_MESSAGE(errors[k].empty(), (errors[k].empty() ? "" : errors[k][0]));
  CHECK(raw_int(path, "SELECT count(*) FROM sessions") == n);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);
  CHECK(integrity(path) == "ok");
}

TEST_CASE("store: random search texts and cursors are data") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  batch b;
  for (unsigned i = 0; i < 20; ++i)
    b.new_sessions.push_back(make_session(sid(i), "alpha beta " + std::to_string(i), i));
  write_ok(*db, b);
  std::mt19937 rng{1234};
  static const char chars[] = "ab \"'*():-^+{}NEAROTD\\\0\xc3\xa9\xff";
  const std::string alphabet(chars, sizeof chars - 1); // NUL included
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    auto n = rng() % 24;
    for (size_t i = 0; i < n; ++i)
      text += round % 2 == 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256);
    session_filter f;
    f.search = text;
    f.limit = 1 + static_cast<int>(rng() % 30);
    auto page = read_ok(db->list_sessions(f));
    CHECK(page.sessions.size() <= 20);
    session_filter g;
    g.before = text; // empty: the first page
    CHECK(read_ok(db->list_sessions(g)).sessions.size() == (text.empty() ? 20u : 0u));
    g.before = "c" + std::to_string(rng() % 30) + "." + text;
    CHECK(read_ok(db->list_sessions(g)).sessions.size() <= 20);
  }
  CHECK(raw_int(db->path(), "SELECT count(*) FROM sessions") == 20);
}

TEST_CASE("store: a write that waits too long for another writer is busy") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  open_options quick;
  quick.busy_wait_ms = 100;
  auto db = open_ok(path, quick);
  auto id = make_session_id();
  batch b;
  b.new_sessions.push_back(make_session(id, "q"));
  write_ok(*db, b);
  auto before = dump_db(path);
  // Another connection holds the write lock throughout.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  batch p;
  p.packets.push_back(packet(id, 1));
  auto err = db->write(p);
  REQUIRE(err);
  CHECK(err->code == sdk::errc::busy);
  CHECK_MESSAGE(err->message.find("locked by another connection") != std::string::npos,
                err->message);
  check_without_path(err->message, path);
  auto removed = db->remove(id);
  REQUIRE(std::holds_alternative<sdk::error>(removed));
  CHECK(std::get<sdk::error>(removed).code == sdk::errc::busy);
  // Reads go on meanwhile (WAL).
  CHECK(read_ok(db->session(id)));
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  CHECK(dump_db(path) == before);
  write_ok(*db, p);
  CHECK(read_ok(db->session(id))->last_seq == 1);
}

TEST_CASE("store: a path that looks like a URI is a file name") {
  test::temp_dir dir;
  auto cwd = fs::current_path();
  fs::current_path(dir.path());
  auto name = std::string{"file:s.db?mode=memory&vfs=no_such_vfs"};
  auto id = make_session_id();
  {
    auto db = open_ok(name);
    batch b;
    b.new_sessions.push_back(make_session(id, "kept on disk"));
    write_ok(*db, b);
  }
  fs::current_path(cwd);
  auto path = dir.file(name);
  CHECK(fs::exists(path));
  auto db = open_ok(path);
  CHECK(read_ok(db->session(id)));
}

TEST_CASE("store: a damaged SQLite file is refused and left untouched") {
  test::temp_dir dir;
  std::mt19937 rng{77};
  std::string content{"SQLite format 3\0", 16};
  while (content.size() < 8192)
    content += static_cast<char>(rng() % 256);
  auto path = dir.write("damaged.db", content);
  auto err = open_fails(path);
  check_without_path(err.message, path);
  CHECK_MESSAGE(err.message.find("corrupt") != std::string::npos, err.message);
  CHECK(test::read_file(path) == content);
  // A path below a file cannot be created.
  auto below = dir.write("plain", "x") + "/s.db";
  err = open_fails(below);
  check_without_path(err.message, below);
  CHECK_MESSAGE(err.message.find("cannot") != std::string::npos, err.message);
}

TEST_CASE("store: a state change can replace the session's options") {
  test::temp_dir dir;
  auto db = open_ok(dir.path() + "/quarry.db");
  auto id = make_session_id();
  batch b;
  session_row row;
  row.id = id;
  row.question = "q";
  row.options = {{"question", "q"}, {"clarify", true}};
  b.new_sessions.push_back(row);
  REQUIRE_FALSE(db->write(b));
  batch s;
  s.states.push_back({id, session_state::running, ""});
  s.options.push_back({id, {{"question", "q"}, {"answers", "cold\n"}}});
  REQUIRE_FALSE(db->write(s));
  auto got = read_ok(db->session(id));
  REQUIRE(got);
  CHECK(got->options["answers"] == "cold\n");
  CHECK_FALSE(got->options.contains("clarify"));
  // Without options, they stay.
  batch k;
  k.states.push_back({id, session_state::completed, ""});
  REQUIRE_FALSE(db->write(k));
  CHECK(read_ok(db->session(id))->options["answers"] == "cold\n");
  CHECK(read_ok(db->session(id))->state == session_state::completed);
}

TEST_CASE("store: a file that is not SQLite, with a journal beside it, is refused "
          "before SQLite reads the journal") {
  test::temp_dir dir;
  std::string content = "my notes, not a database\n";
  std::string journal(2048, '\xd9');
  auto path = dir.write("notes.db", content);
  dir.write("notes.db-journal", journal);
  auto err = open_fails(path);
  CHECK(err.message.find("not a SQLite database") != std::string::npos);
  CHECK(test::read_file(path) == content);
  CHECK(test::read_file(path + "-journal") == journal);
  CHECK_FALSE(fs::exists(path + "-wal"));
}

TEST_CASE("store: a batch stores each session's packets as one run, read back one by one") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto db = open_ok(path);
  auto a = make_session_id();
  auto b = make_session_id();
  auto c = make_session_id();
  {
    batch w;
    w.new_sessions = {make_session(a, "a"), make_session(b, "b"), make_session(c, "c")};
    write_ok(*db, w);
  }
  // Interleaved as many running sessions' emitters send them.
  batch w;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    w.packets.push_back(packet(a, seq));
    w.packets.push_back(packet(b, seq, "reasoning_delta"));
  }
  // A line holding newlines (no packet Quarry encodes does) is a run of its
  // own and reads back whole, and the session's next packet starts a new run.
  w.packets.push_back({c, {1, "first\nsecond\n"}});
  w.packets.push_back(packet(c, 2));
  w.packets.push_back({c, {3, ""}});
  w.packets.push_back(packet(c, 4));
  write_ok(*db, w);
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs WHERE session_id = '" + a + "'") == 1);
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs WHERE session_id = '" + b + "'") == 1);
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs WHERE session_id = '" + c + "'") == 2);
  // A second batch adds a run.
  batch more;
  more.packets.push_back(packet(a, 6));
  more.packets.push_back(packet(a, 7));
  write_ok(*db, more);
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs WHERE session_id = '" + a + "'") == 2);

  auto expect = [&](const std::string& id, uint64_t from, size_t limit, uint64_t first,
                    uint64_t last) {
    INFO(id << " from " << from << " limit " << limit);
    auto got = read_ok(db->packets(id, from, limit));
    REQUIRE(got.size() == (last >= first ? last - first + 1 : 0));
    for (size_t i = 0; i < got.size(); ++i) {
      auto seq = first + i;
      CHECK(got[i].seq == seq);
      const auto& sent = id == a && seq > 5 ? more.packets[seq - 6].packet
                         : id == a          ? w.packets[2 * (seq - 1)].packet
                         : id == b          ? w.packets[2 * (seq - 1) + 1].packet
                                            : w.packets[10 + seq - 1].packet;
      CHECK(got[i].line == sent.line);
    }
  };
  expect(a, 1, SIZE_MAX, 1, 7);
  expect(a, 3, SIZE_MAX, 3, 7); // from the middle of a run
  expect(a, 2, 3, 2, 4);        // a limit inside a run
  expect(a, 5, 2, 5, 6);        // a limit across two runs
  expect(a, 7, SIZE_MAX, 7, 7);
  expect(a, 8, SIZE_MAX, 1, 0);
  expect(b, 1, SIZE_MAX, 1, 5);
  expect(b, 4, 1, 4, 4);
  expect(c, 1, SIZE_MAX, 1, 4);
  expect(c, 2, SIZE_MAX, 2, 4);
  expect(c, 3, 1, 3, 3);
}

TEST_CASE("store: a session's runs are cut at 64 KiB") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto db = open_ok(path);
  auto id = make_session_id();
  batch w;
  w.new_sessions = {make_session(id, "q")};
  std::string text(10'000, 'x');
  for (uint64_t seq = 1; seq <= 20; ++seq)
    w.packets.push_back({id, {seq, packet_line(id, seq, "message_delta", text)}});
  // A line larger than a run is a run of its own.
  w.packets.push_back({id, {21, std::string(100'000, 'y')}});
  w.packets.push_back(packet(id, 22));
  write_ok(*db, w);
  CHECK(raw_int(path, "SELECT max(length(lines)) FROM packet_runs WHERE first_seq < 21")
        <= 64 * 1024);
  CHECK(raw_int(path, "SELECT count(*) FROM packet_runs") >= 5);
  auto got = read_ok(db->packets(id));
  REQUIRE(got.size() == 22);
  for (uint64_t i = 0; i < 22; ++i) {
    CHECK(got[i].seq == i + 1);
    CHECK(got[i].line == w.packets[i].packet.line);
  }
}

TEST_CASE("store: damaged runs of packets are an error, not a guess") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  {
    auto db = open_ok(path);
    batch w;
    w.new_sessions = {make_session(id, "q")};
    for (uint64_t seq = 1; seq <= 3; ++seq)
      w.packets.push_back(packet(id, seq));
    write_ok(*db, w);
  }
  // Fewer lines than the run says.
  raw_exec(path, "UPDATE packet_runs SET lines = 'one line only'");
  {
    auto db = open_ok(path);
    auto read = db->packets(id);
    REQUIRE_FALSE(static_cast<bool>(read));
    CHECK(read.error().message.find("damaged (the run of seq 1 to 3 holds fewer lines)")
          != std::string::npos);
    check_without_path(read.error().message, path);
    // What comes before the damage is read.
    auto first = read_ok(db->packets(id, 1, 1));
    REQUIRE(first.size() == 1);
    CHECK(first[0].line == "one line only");
  }
  // A gap between runs (a run lost), and runs that overlap.
  {
    auto db = open_ok(path);
    batch w;
    w.packets.push_back(packet(id, 4));
    write_ok(*db, w);
    batch more;
    more.packets.push_back(packet(id, 5));
    write_ok(*db, more);
  }
  // More lines than the run says.
  raw_exec(path, "UPDATE packet_runs SET lines = 'a\nb\nc\nd' WHERE first_seq = 1");
  {
    auto read = open_ok(path)->packets(id);
    REQUIRE_FALSE(static_cast<bool>(read));
    CHECK(read.error().message.find("holds more lines") != std::string::npos);
  }
  raw_exec(path, "UPDATE packet_runs SET lines = 'a\nb\nc'");
  REQUIRE(read_ok(open_ok(path)->packets(id)).size() == 5);
  raw_exec(path, "DELETE FROM packet_runs WHERE first_seq = 4");
  {
    auto db = open_ok(path);
    auto read = db->packets(id, 2);
    REQUIRE_FALSE(static_cast<bool>(read));
    CHECK(read.error().message.find("does not follow") != std::string::npos);
    CHECK(read_ok(db->packets(id, 5)).size() == 1);
  }
  raw_exec(path, "UPDATE packet_runs SET first_seq = 3 WHERE first_seq = 5");
  {
    auto db = open_ok(path);
    auto read = db->packets(id);
    REQUIRE_FALSE(static_cast<bool>(read));
    CHECK(read.error().message.find("does not follow") != std::string::npos);
  }
  // A run whose seqs are reversed cannot be written (CHECK constraint) nor read.
  raw_exec(path, "PRAGMA ignore_check_constraints=ON; "
                 "UPDATE packet_runs SET first_seq = 9 WHERE first_seq = 1");
  {
    auto db = open_ok(path);
    auto read = db->packets(id);
    REQUIRE_FALSE(static_cast<bool>(read));
    CHECK(read.error().message.find("is not a range of seqs") != std::string::npos);
  }
}

TEST_CASE("store: a schema 1 store is migrated, its packets kept") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  std::vector<std::string> lines;
  {
    auto db = open_ok(path);
    batch w;
    w.new_sessions = {make_session(id, "q")};
    write_ok(*db, w);
  }
  // The packets table as schema 1 had it, filled, and the version put back.
  std::string sql = "CREATE TABLE packets(session_id TEXT NOT NULL REFERENCES sessions(id) ON "
                    "DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, line TEXT NOT "
                    "NULL, PRIMARY KEY(session_id, seq)) WITHOUT ROWID; "
                    "DROP TABLE packet_runs; DROP TABLE claims; "
                    "ALTER TABLE documents DROP COLUMN snippet_only; "
                    "ALTER TABLE usage DROP COLUMN cost_basis; ";
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    lines.push_back(packet_line(id, seq));
    sql += "INSERT INTO packets VALUES ('" + id + "', " + std::to_string(seq)
           + ", 'message_delta', '" + lines.back() + "'); ";
  }
  sql += "UPDATE sessions SET last_seq = 4; PRAGMA user_version=1;";
  raw_exec(path, sql);
  REQUIRE(raw_int(path, "PRAGMA user_version") == 1);
  // A read-only open does not migrate.
  open_options ro;
  ro.read_only = true;
  CHECK(open_fails(path, ro).message.find("needs a migration") != std::string::npos);
  auto db = open_ok(path);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);
  CHECK(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'packets'") == 0);
  auto got = read_ok(db->packets(id));
  REQUIRE(got.size() == 4);
  for (size_t i = 0; i < 4; ++i)
    CHECK(got[i].line == lines[i]);
  // Writing goes on after the migrated packets.
  batch w;
  w.packets.push_back(packet(id, 5));
  write_ok(*db, w);
  CHECK(read_ok(db->packets(id, 5)).size() == 1);
}

namespace {

claim_row make_claim(int64_t index, std::string verdict) {
  claim_row c;
  c.claim = index;
  c.text = "Claim " + std::to_string(index) + " holds.";
  c.report_begin = index * 20;
  c.report_end = index * 20 + 15;
  c.citations = {1, 2};
  c.verdict = std::move(verdict);
  c.judge = "lexical";
  c.source = 1;
  c.document_id = "https://a.example/";
  c.evidence_begin = 3;
  c.evidence_end = 40;
  c.evidence = "what the page says";
  return c;
}

document_row make_doc(std::string text, bool snippet_only) {
  document_row d;
  d.document_id = "https://a.example/";
  d.url = "https://a.example/";
  d.title = "A";
  d.text = std::move(text);
  d.snippet_only = snippet_only;
  d.source_type = "web";
  return d;
}

} // namespace

TEST_CASE("store: claims round trip, are replaced by a new report's, and go with the session") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto db = open_ok(path);
  auto id = make_session_id();
  batch b;
  b.new_sessions = {make_session(id, "q")};
  auto dropped = make_claim(1, "unsupported");
  dropped.report_begin.reset();
  dropped.report_end.reset();
  dropped.recited_to = 3;
  auto bare = make_claim(2, "no_evidence");
  bare.source.reset();
  bare.document_id.clear();
  bare.evidence_begin.reset();
  bare.evidence_end.reset();
  bare.evidence.clear();
  bare.judge.clear();
  auto snippet = make_claim(0, "supported");
  snippet.snippet_only = true;
  b.claims.push_back({id, {snippet, dropped, bare}});
  CHECK(b.size() == 5);
  write_ok(*db, b);
  auto got = read_ok(db->claims(id));
  REQUIRE(got.size() == 3);
  CHECK(got[0].claim == 0);
  CHECK(got[0].snippet_only);
  CHECK(got[0].verdict == "supported");
  CHECK(got[0].citations == std::vector<int>{1, 2});
  CHECK(got[0].report_begin == std::optional<int64_t>{0});
  CHECK(got[0].evidence_end == std::optional<int64_t>{40});
  CHECK(got[0].created_at > 0);
  CHECK_FALSE(got[1].report_begin.has_value());
  CHECK(got[1].recited_to == std::optional<int>{3});
  CHECK_FALSE(got[2].source.has_value());
  CHECK(got[2].judge.empty());
  // The JSON the API gives reads back as the same claim.
  for (const auto& c : got) {
    auto back = claim_from_json(to_json(c));
    REQUIRE(back);
    CHECK(to_json(*back) == to_json(c));
  }
  CHECK_FALSE(claim_from_json(nlohmann::json::array()).has_value());
  CHECK_FALSE(claim_from_json({{"id", 1}}).has_value());
  CHECK_FALSE(claim_from_json({{"id", "1"}, {"verdict", "supported"}}).has_value());
  // Hostile numbers in JSON are dropped, not wrapped.
  auto odd = claim_from_json(
    {{"id", 4}, {"verdict", "supported"}, {"source", 1e20}, {"citations", {1, 99999999999LL}}});
  REQUIRE(odd);
  CHECK_FALSE(odd->source.has_value());
  CHECK(odd->citations == std::vector<int>{1});
  // A new report's claims replace the old ones.
  batch again;
  again.claims.push_back({id, {make_claim(5, "partly_supported")}});
  write_ok(*db, again);
  got = read_ok(db->claims(id));
  REQUIRE(got.size() == 1);
  CHECK(got[0].claim == 5);
  // An unknown session's claims read as none.
  CHECK(read_ok(db->claims(make_session_id())).empty());
  CHECK(read_ok(db->claims("not an id")).empty());
  // Removing the session removes its claims.
  REQUIRE(std::get<bool>(db->remove(id)));
  CHECK(raw_int(path, "SELECT count(*) FROM claims") == 0);
}

TEST_CASE("store: claims that break the rules refuse the batch, and keep what was stored") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto db = open_ok(path);
  auto id = make_session_id();
  batch b;
  b.new_sessions = {make_session(id, "q")};
  b.claims.push_back({id, {make_claim(0, "supported")}});
  write_ok(*db, b);
  auto refused = [&](std::vector<claim_row> claims, const char* why) {
    batch w;
    w.claims.push_back({id, std::move(claims)});
    auto err = db->write(w);
    REQUIRE_MESSAGE(err, why);
    CHECK(err->code == sdk::errc::bad_request);
    check_without_path(err->message, path);
    auto kept = read_ok(db->claims(id));
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].claim == 0);
  };
  refused({make_claim(1, "maybe")}, "unknown verdict");
  refused({make_claim(1, "supported"), make_claim(1, "supported")}, "repeated index");
  refused({make_claim(-1, "supported")}, "negative index");
  auto backwards = make_claim(1, "supported");
  backwards.report_end = 0;
  refused({backwards}, "range end before begin");
  auto half = make_claim(1, "supported");
  half.evidence_end.reset();
  refused({half}, "half a range");
  auto negative = make_claim(1, "supported");
  negative.evidence_begin = -5;
  refused({negative}, "negative offset");
  batch unknown;
  unknown.claims.push_back({make_session_id(), {make_claim(0, "supported")}});
  CHECK(db->write(unknown));
  batch not_id;
  not_id.claims.push_back({"x", {make_claim(0, "supported")}});
  CHECK(db->write(not_id));
}

TEST_CASE("store: read text replaces a snippet, even a shorter one; a snippet never replaces it") {
  test::temp_dir dir;
  auto db = open_ok(dir.file("s.db"));
  auto id = make_session_id();
  batch b;
  b.new_sessions = {make_session(id, "q")};
  b.documents.push_back({id, make_doc("A long search snippet that says rather a lot.", true)});
  write_ok(*db, b);
  auto docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].snippet_only);
  batch read;
  read.documents.push_back({id, make_doc("Short page.", false)});
  write_ok(*db, read);
  docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK_FALSE(docs[0].snippet_only);
  CHECK(docs[0].text == "Short page.");
  batch snippet_again;
  snippet_again.documents.push_back(
    {id, make_doc("An even longer snippet than before, which must not replace the page.", true)});
  write_ok(*db, snippet_again);
  docs = read_ok(db->documents(id));
  CHECK_FALSE(docs[0].snippet_only);
  CHECK(docs[0].text == "Short page.");
  // Between read texts the longer wins, as before.
  batch longer;
  longer.documents.push_back({id, make_doc("Short page. With the rest of it read too.", false)});
  write_ok(*db, longer);
  docs = read_ok(db->documents(id));
  CHECK(docs[0].text == "Short page. With the rest of it read too.");
  auto sources = read_ok(db->sources(id));
  CHECK(sources.empty()); // no citations
}

TEST_CASE("store: a schema 2 store is migrated: its documents read as read text, claims added") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  {
    auto db = open_ok(path);
    batch w;
    w.new_sessions = {make_session(id, "q")};
    w.documents.push_back({id, make_doc("Stored before claims were kept.", false)});
    write_ok(*db, w);
  }
  raw_exec(path, "DROP TABLE claims; ALTER TABLE documents DROP COLUMN snippet_only; "
                 "ALTER TABLE usage DROP COLUMN cost_basis; PRAGMA user_version=2;");
  REQUIRE(raw_int(path, "PRAGMA user_version") == 2);
  auto db = open_ok(path);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);
  auto docs = read_ok(db->documents(id));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].text == "Stored before claims were kept.");
  CHECK_FALSE(docs[0].snippet_only);
  batch w;
  w.claims.push_back({id, {make_claim(0, "supported")}});
  write_ok(*db, w);
  CHECK(read_ok(db->claims(id)).size() == 1);
}

TEST_CASE("store: usage by model says how each cost is known, and a schema 3 store is migrated") {
  test::temp_dir dir;
  auto path = dir.file("s.db");
  auto id = make_session_id();
  {
    auto db = open_ok(path);
    batch w;
    w.new_sessions = {make_session(id, "q")};
    w.usage.push_back({id, {"plan", "main", "gpt-4o", 100, 20, 0.5, "priced"}});
    w.usage.push_back({id, {"plan", "main", "gpt-4o", 10, 2, 0.25, "priced"}});
    w.usage.push_back({id, {"report", "local", "llama3.1:8b", 7, 3, 0, "unpriced"}});
    w.usage.push_back({id, {"report", "offline", "", 5, 5, 0, "offline"}});
    write_ok(*db, w);
    auto groups = read_ok(db->usage_groups(id));
    REQUIRE(groups.size() == 3);
    CHECK(groups[0].model == "gpt-4o");
    CHECK(groups[0].cost_basis == "priced");
    CHECK(groups[0].calls == 2);
    CHECK(groups[0].input_tokens == 110);
    CHECK(groups[0].cost == doctest::Approx(0.75));
    CHECK(groups[1].cost_basis == "unpriced");
    CHECK(groups[2].cost_basis == "offline");
    CHECK(groups[2].provider == "offline");
    CHECK(read_ok(db->usage_groups("not a session")).empty());
  }
  // Schema 3 had no cost basis: a row with a cost reads as priced, one
  // without as unpriced.
  raw_exec(path, "ALTER TABLE usage DROP COLUMN cost_basis; PRAGMA user_version=3;");
  auto db = open_ok(path);
  CHECK(raw_int(path, "PRAGMA user_version") == schema_version);
  auto groups = read_ok(db->usage_groups(id));
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].cost_basis == "priced");
  CHECK(groups[1].cost_basis == "unpriced");
  CHECK(groups[2].cost_basis == "unpriced");
}

} // namespace store_test
