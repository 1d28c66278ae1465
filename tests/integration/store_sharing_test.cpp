// One data folder shared by several real `quarry` processes: `serve` with CLI
// `research`, `index`, `sessions rm/resume`, and two CLIs at once, round
// after round. After every round the databases pass `PRAGMA
// integrity_check`, every session a process said it stored is there with
// all its packets (seq 1..last_seq, no gap), and no process holds a
// descriptor of a deleted `-wal`, `-shm` or `-journal` file (which is what a
// process's own stray close of a database file leads to: its locks go, and
// another process that closes last deletes the WAL it still writes).
//
// QUARRY_SHARING_ROUNDS sets the rounds (default 20).

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace store_sharing_test {

using namespace quarry;
using namespace quarry::test::serve;
namespace fs = std::filesystem;

namespace {

int rounds() {
  if (const char* x = std::getenv("QUARRY_SHARING_ROUNDS")) {
    auto n = std::atoi(x);
    if (n > 0)
      return n;
  }
  return 20;
}

/// The descriptors of process `pid` (or of this process, for "self") that
/// point at a deleted file of a SQLite database: `NAME.db-wal (deleted)` and
/// the like.
std::vector<std::string> deleted_database_files(const std::string& pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it{"/proc/" + pid + "/fd", ec}, end; !ec && it != end;
       it.increment(ec)) {
    char target[4096];
    auto n = ::readlink(it->path().c_str(), target, sizeof(target) - 1);
    if (n <= 0)
      continue;
    std::string t{target, static_cast<size_t>(n)};
    bool deleted = t.size() > 10 && t.compare(t.size() - 10, 10, " (deleted)") == 0;
    bool database = t.find(".db") != std::string::npos;
    if (deleted && database)
      out.push_back(t);
  }
  return out;
}

/// Runs `sql` on a read-only connection of the test's own (through SQLite,
/// as every access of a database file must be) and returns the first column
/// of every row.
std::vector<std::string> query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  auto rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::vector<std::string> out;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10'000);
    sqlite3_stmt* st = nullptr;
    rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(st, 0);
      out.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
      rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
  }
  INFO(path << ": " << sql << ": " << sqlite3_errstr(rc));
  CHECK(rc == SQLITE_DONE);
  sqlite3_close(db);
  return out;
}

/// One data folder and the `quarry` processes that share it.
struct shared_home {
  test::temp_dir home;
  /// Sessions some process said it stored, with the state it reported.
  std::map<std::string, std::string> told;

  std::string data() const {
    return home.path() + "/.local/share/quarry";
  }

  std::string store() const {
    return data() + "/quarry.db";
  }

  std::vector<std::string> argv(std::vector<std::string> args) const {
    std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  test::process_options options() const {
    auto o = test::isolated_quarry_options(home.path());
    o.timeout = std::chrono::minutes{3};
    return o;
  }

  test::process_result quarry(std::vector<std::string> args) const {
    return test::run_process(argv(std::move(args)), options());
  }

  std::unique_ptr<test::child_process> start(std::vector<std::string> args) const {
    return std::make_unique<test::child_process>(argv(std::move(args)), options());
  }

  /// The session id a CLI research printed ("quarry: session qX (kept in ...)").
  static std::string session_of(const test::process_result& r) {
    auto at = r.err.find("quarry: session q");
    REQUIRE_MESSAGE(at != std::string::npos, r.err);
    return r.err.substr(at + 16, 17);
  }

  /// A CLI research that must succeed; its session is remembered.
  void research_done(const test::process_result& r) {
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    told[session_of(r)] = "completed";
  }

  /// Every check of a round: integrity of every database of the folder,
  /// every remembered session complete, no deleted database file held open
  /// by `pids` or by this process.
  void check(const std::vector<int>& pids, int round) {
    INFO("round " << round);
    for (auto pid : pids) {
      auto held = deleted_database_files(std::to_string(pid));
      INFO("process " << pid << " holds deleted database files");
      CHECK(held.empty());
      for (const auto& h : held)
        MESSAGE(h);
    }
    CHECK(deleted_database_files("self").empty());
    std::vector<std::string> databases;
    std::error_code ec;
    for (fs::recursive_directory_iterator it{data(), ec}, end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".db")
        databases.push_back(it->path().string());
    CHECK_FALSE(databases.empty());
    for (const auto& db : databases) {
      auto result = query(db, "PRAGMA integrity_check");
      INFO(db);
      CHECK(result == std::vector<std::string>{"ok"});
    }
    for (const auto& id_state : told) {
      const auto& id = id_state.first;
      const auto& state = id_state.second;
      INFO("session " << id);
      auto rows = query(store(),
                        "SELECT last_seq || ' ' || state FROM sessions WHERE id = '" + id + "'");
      REQUIRE(rows.size() == 1);
      auto space = rows[0].find(' ');
      auto last = std::stoll(rows[0].substr(0, space));
      CHECK(rows[0].substr(space + 1) == state);
      CHECK(last > 0);
      // The runs of packets cover 1..last_seq without a gap or an overlap.
      auto runs = query(store(), "SELECT first_seq || ' ' || last_seq FROM packet_runs "
                                 "WHERE session_id = '"
                                   + id + "' ORDER BY last_seq");
      long long covered = 0;
      for (const auto& run : runs) {
        auto gap = run.find(' ');
        CHECK(std::stoll(run.substr(0, gap)) == covered + 1);
        covered = std::stoll(run.substr(gap + 1));
      }
      CHECK(covered == last);
    }
  }
};

/// Starts a research on the server; its id.
std::string post_research(const server_process& srv, const std::string& question) {
  auto r = call("POST", srv.url("/v1/research"),
                json{{"question", question}, {"clarify", false}}.dump());
  INFO(r.body);
  REQUIRE(r.status == 202);
  return r.as_json()["id"].get<std::string>();
}

/// Waits until the server's session `id` is no longer running; its state.
std::string wait_done(const server_process& srv, const std::string& id) {
  std::string state;
  wait_until(
    [&] {
      state = state_of(srv, id);
      return state != "running" && state != "pending";
    },
    "a session of the server to end");
  return state;
}

const char* questions[] = {
  "What is a buffer tank for?",
  "How loud is a heat pump?",
  "Why does a heat pump's efficiency drop in cold weather?",
  "What refrigerants do heat pumps use?",
};

} // namespace

TEST_CASE("store sharing: serve and CLI research on one data folder, round after round") {
  shared_home h;
  server_process srv{h.home, {}};
  for (int round = 0; round < rounds(); ++round) {
    auto id = post_research(srv, questions[round % 4]);
    // The CLI researches while the server does, and exits first or last.
    auto cli = h.quarry({"research", "--no-clarify", questions[(round + 1) % 4]});
    h.research_done(cli);
    h.told[id] = wait_done(srv, id);
    CHECK(h.told[id] == "completed");
    // What the CLI stored, the server sees (one file, not two).
    auto seen = call("GET", srv.url("/v1/research/" + h.session_of(cli)));
    CHECK(seen.status == 200);
    h.check({srv.proc->pid()}, round);
  }
  // A session researched after the CLI's last exit is kept after the server
  // stops (a server writing into an unlinked WAL loses it here).
  auto last = post_research(srv, "What is a buffer tank for?");
  h.told[last] = wait_done(srv, last);
  srv.proc->signal(SIGTERM);
  auto ended = srv.proc->wait(std::chrono::seconds{60});
  CHECK(ended.exit_code == 143);
  h.check({}, rounds());
  auto listed = h.quarry({"sessions", "list", "--json", "--limit", "500"});
  REQUIRE(listed.exit_code == 0);
  CHECK(json::parse(listed.out).size() == h.told.size());
}

TEST_CASE("store sharing: two CLI researches at once, round after round") {
  shared_home h;
  for (int round = 0; round < rounds(); ++round) {
    auto a = h.start({"research", "--no-clarify", questions[round % 4]});
    auto b = h.start({"research", "--no-clarify", questions[(round + 2) % 4]});
    // Both hold their connections now or soon; look while they run.
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
    auto live_a = deleted_database_files(std::to_string(a->pid()));
    auto live_b = deleted_database_files(std::to_string(b->pid()));
    for (const auto& held : live_a)
      MESSAGE("the first research holds " << held);
    for (const auto& held : live_b)
      MESSAGE("the second research holds " << held);
    CHECK(live_a.empty());
    CHECK(live_b.empty());
    h.research_done(a->wait(std::chrono::minutes{3}));
    h.research_done(b->wait(std::chrono::minutes{3}));
    h.check({}, round);
  }
}

TEST_CASE("store sharing: serve and quarry index on one corpus index") {
  shared_home h;
  auto docs = h.home.file("docs");
  h.home.write("docs/pumps.md", "# Heat pumps\n\nA heat pump moves heat from outside air "
                                "into a house. Its efficiency falls in cold weather.\n");
  h.home.write("docs/tanks.md", "# Buffer tanks\n\nA buffer tank stores heated water so a "
                                "heat pump runs in longer cycles.\n");
  server_process srv{h.home, {"--set", "research.corpus=" + docs}};
  // The server indexed the folder into its corpus index when it started.
  std::string index;
  for (const auto& e : fs::directory_iterator{h.data() + "/corpora"})
    if (e.path().extension() == ".db")
      index = e.path().string();
  REQUIRE_FALSE(index.empty());
  for (int round = 0; round < rounds(); ++round) {
    // A changed and a new document, so that every run writes.
    h.home.write("docs/round.md", "# Round " + std::to_string(round)
                                    + "\n\nBuffer tanks and heat pumps, round "
                                    + std::to_string(round) + ".\n");
    h.home.write("docs/note" + std::to_string(round) + ".md",
                 "# Note\n\nA heat pump is loud at night, note " + std::to_string(round) + ".\n");
    auto id = post_research(srv, questions[round % 4]);
    auto indexed = h.quarry({"index", docs, "--db", index});
    INFO(indexed.err);
    CHECK(indexed.exit_code == 0);
    auto cli = h.quarry(
      {"--set", "research.corpus=" + docs, "research", "--no-clarify", questions[(round + 1) % 4]});
    h.research_done(cli);
    h.told[id] = wait_done(srv, id);
    h.check({srv.proc->pid()}, round);
  }
  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait(std::chrono::seconds{60}).exit_code == 143);
  h.check({}, rounds());
  // Every document of the last round is in the index that outlived them all.
  auto titles = query(index, "SELECT count(*) FROM sqlite_master");
  REQUIRE(titles.size() == 1);
  CHECK(std::stoi(titles[0]) > 0);
}

TEST_CASE("store sharing: a session another process runs is neither removed nor resumed, "
          "with two servers and the CLI on one data folder") {
  using namespace quarry::test::script;
  shared_home h;
  // Every research hangs at its agents' first request: a session is
  // running, for certain, until it is cancelled.
  // The orchestrator always sends agents (two_agent_script sends them once).
  auto rules = two_agent_script();
  for (auto& r : rules)
    r["match"].erase("times");
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(hanging_at(rules, agent_marker)));
  server_process a{h.home, {}, llm_env(llm)};
  server_process b{h.home, {}, llm_env(llm)};
  std::string previous;
  for (int round = 0; round < rounds(); ++round) {
    INFO("round " << round);
    auto& owner = round % 2 == 0 ? a : b;
    auto& other = round % 2 == 0 ? b : a;
    auto before = requests_with(llm, agent_marker);
    auto id = post_research(owner, questions[round % 4]);
    wait_until([&] { return requests_with(llm, agent_marker) > before; },
               "the session's agent to ask the model");
    // The CLI refuses, saying why, and leaves the session alone.
    auto rm = h.quarry({"sessions", "rm", id});
    CHECK(rm.exit_code == 1);
    CHECK(rm.err.find("running in another process") != std::string::npos);
    auto resume = h.quarry({"sessions", "resume", id});
    CHECK(resume.exit_code == 1);
    CHECK(resume.err.find("running in another process") != std::string::npos);
    // So does the other server, which sees the session in the shared store.
    CHECK(state_of(other, id) == "running");
    auto removed = call("DELETE", other.url("/v1/research/" + id));
    CHECK(removed.status == 409);
    CHECK(removed.body.find("running in another process") != std::string::npos);
    auto resumed = call("POST", other.url("/v1/research/" + id + "/resume"));
    CHECK(resumed.status == 409);
    CHECK(resumed.body.find("running in another process") != std::string::npos);
    auto cancel_there = call("POST", other.url("/v1/research/" + id + "/cancel"));
    CHECK(cancel_there.status == 409);
    CHECK(cancel_there.body.find("running in another process") != std::string::npos);
    // The session of the round before goes, through the CLI, while this
    // one runs.
    if (!previous.empty()) {
      auto gone = h.quarry({"sessions", "rm", previous});
      INFO(gone.err);
      CHECK(gone.exit_code == 0);
      h.told.erase(previous);
      CHECK(call("GET", a.url("/v1/research/" + previous)).status == 404);
      CHECK(call("GET", b.url("/v1/research/" + previous)).status == 404);
    }
    CHECK(state_of(owner, id) == "running");
    CHECK(call("POST", owner.url("/v1/research/" + id + "/cancel")).status == 202);
    h.told[id] = wait_done(owner, id);
    CHECK(h.told[id] == "cancelled");
    previous = id;
    h.check({a.proc->pid(), b.proc->pid()}, round);
  }
  for (auto* srv : {&a, &b}) {
    srv->proc->signal(SIGTERM);
    CHECK(srv->proc->wait(std::chrono::seconds{60}).exit_code == 143);
  }
  h.check({}, rounds());
}

} // namespace store_sharing_test
