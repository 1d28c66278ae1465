// The research store under faults, through the real binary: a store whose
// pages are corrupted is never read as "no session" (the CLI exits 1 and the
// API answers 500/503 with a JSON error that does not name the store's
// path), a burst of requests over the server's limit leaves no row for
// any request it refused, and a store on a read-only file system is read as
// it is while serve and research refuse it saying it is read-only.

#include "serve_client.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace store_faults_test {

using namespace quarry;
using namespace quarry::test::serve;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> argv_of(std::vector<std::string> args) {
  std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

test::process_result quarry_in(const test::temp_dir& home, std::vector<std::string> args) {
  return test::run_process(argv_of(std::move(args)), test::isolated_quarry_options(home.path()));
}

std::string store_of(const test::temp_dir& home) {
  return home.path() + "/.local/share/quarry/quarry.db";
}

/// The pages of every table and index but `sessions` (and its indexes and
/// full-text tables), read with SQLite's dbstat table.
std::vector<int64_t> pages_past_sessions(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  auto rc = sqlite3_prepare_v2(db,
                               "SELECT pageno FROM dbstat WHERE pageno > 1 AND name NOT LIKE "
                               "'sessions%' AND name NOT LIKE 'sqlite_%' ORDER BY pageno",
                               -1, &st, nullptr);
  INFO(sqlite3_errmsg(db));
  REQUIRE(rc == SQLITE_OK);
  std::vector<int64_t> out;
  while (sqlite3_step(st) == SQLITE_ROW)
    out.push_back(sqlite3_column_int64(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

int64_t page_size_of(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  auto size = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return size;
}

} // namespace

TEST_CASE("store faults: a store with corrupted pages is an error everywhere, never "
          "\"no session\"") {
  // A real store of three researches, made by the CLI.
  test::temp_dir made;
  std::vector<std::string> ids;
  for (const char* q : {"What is a buffer tank for?", "How loud is a heat pump?",
                        "What refrigerants do heat pumps use?"}) {
    auto r = quarry_in(made, {"research", "--no-clarify", q});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto at = r.err.find("quarry: session q");
    REQUIRE(at != std::string::npos);
    ids.push_back(r.err.substr(at + 16, 17));
  }
  // A copy (every process has ended: the WAL was checkpointed into the
  // file), its pages past the sessions table overwritten with random bytes.
  test::temp_dir home;
  auto path = store_of(home);
  fs::create_directories(fs::path{path}.parent_path());
  fs::copy_file(store_of(made), path);
  auto pages = pages_past_sessions(path);
  REQUIRE(pages.size() >= 3);
  auto page_size = page_size_of(path);
  {
    std::fstream f{path, std::ios::in | std::ios::out | std::ios::binary};
    REQUIRE(f);
    std::mt19937 random{20261129};
    for (auto page : pages) {
      std::string junk(static_cast<size_t>(page_size), '\0');
      for (auto& c : junk)
        c = static_cast<char>(random() & 0xFF);
      f.seekp((page - 1) * page_size);
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    REQUIRE(f);
  }
  // The list reads only the sessions table: it still works.
  auto listed = quarry_in(home, {"sessions", "list", "--json"});
  INFO(listed.err);
  REQUIRE(listed.exit_code == 0);
  CHECK(json::parse(listed.out).size() == ids.size());
  // Everything that reads more says the store cannot be read, with the
  // reason and the file; never that there is no such session.
  size_t errors = 0;
  auto never_missing = [&](const test::process_result& r, const std::string& id) {
    INFO(id << ": " << r.err);
    CHECK(r.err.find("no session") == std::string::npos);
    CHECK(r.exit_code != 2);
    if (r.exit_code != 0) {
      CHECK(r.exit_code == 1);
      CHECK(r.err.find("the research store cannot be read") != std::string::npos);
      CHECK(r.err.find(path) != std::string::npos);
      ++errors;
    }
  };
  for (const auto& id : ids) {
    never_missing(quarry_in(home, {"sessions", "show", id}), id);
    never_missing(quarry_in(home, {"sessions", "show", id, "--json"}), id);
    never_missing(quarry_in(home, {"sessions", "export", id, "--format", "jsonl"}), id);
    never_missing(quarry_in(home, {"sessions", "export", id, "--format", "md"}), id);
    never_missing(quarry_in(home, {"research", "--no-clarify", "--follow-up", id, "and then?"}),
                  id);
  }
  // Every show reads the session's report, on a corrupted page.
  CHECK(errors >= ids.size());
  // The API: 500 or 503 with a JSON error, logged, without the store's path.
  {
    server_process srv{home, {}};
    // The list reads each session's usage too: a corrupted page there is a
    // 500 or 503 as well, without the store's path.
    auto list = call("GET", srv.url("/v1/research"));
    CAPTURE(list.body);
    CHECK((list.status == 200 || list.status == 500 || list.status == 503));
    CHECK(list.body.find(home.path()) == std::string::npos);
    size_t api_errors = 0;
    for (const auto& id : ids) {
      for (auto path_of : {"/v1/research/" + id, "/v1/research/" + id + "/report",
                           "/v1/research/" + id + "/report?format=json"}) {
        auto r = call("GET", srv.url(path_of));
        INFO(path_of << ": " << r.status << " " << r.body);
        CHECK(r.status != 404);
        CHECK(r.body.find(home.path()) == std::string::npos);
        if (r.status != 200) {
          CHECK((r.status == 500 || r.status == 503));
          auto j = r.as_json();
          CHECK(j["error"]["message"].get<std::string>().find("corrupt") != std::string::npos);
          ++api_errors;
        }
      }
      auto follow = call("POST", srv.url("/v1/research/" + id + "/follow-up"),
                         R"({"question": "and then?", "clarify": false})");
      INFO(follow.body);
      CHECK(follow.status != 404);
      CHECK(follow.body.find(home.path()) == std::string::npos);
    }
    CHECK(api_errors >= ids.size());
    srv.proc->signal(SIGTERM);
    auto ended = srv.proc->wait(std::chrono::seconds{60});
    // Each failed read was logged.
    CHECK(ended.err.find("the database is corrupt") != std::string::npos);
  }
}

TEST_CASE("store faults: a burst over server.max_running_sessions leaves no row for a "
          "request answered 429") {
  test::temp_dir home;
  server_process srv{home, {"--set", "server.max_running_sessions=1"}};
  constexpr int burst = 24;
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  std::vector<std::string> accepted_ids(burst);
  std::vector<std::thread> clients;
  for (int i = 0; i < burst; ++i)
    clients.emplace_back([&, i] {
      auto r = call("POST", srv.url("/v1/research"),
                    json{{"question", "What is a buffer tank for? (" + std::to_string(i) + ")"},
                         {"clarify", false}}
                      .dump());
      if (r.status == 202) {
        ++accepted;
        accepted_ids[static_cast<size_t>(i)] = r.as_json()["id"].get<std::string>();
      } else if (r.status == 429) {
        ++refused;
      }
    });
  for (auto& t : clients)
    t.join();
  CHECK(accepted + refused == burst);
  CHECK(accepted >= 1);
  CHECK(refused >= 1);
  // Only what was accepted is stored, and none of it failed for being busy.
  std::set<std::string> stored;
  wait_until(
    [&] {
      auto j = call("GET", srv.url("/v1/research?limit=500")).as_json();
      stored.clear();
      bool running = false;
      for (const auto& s : j["sessions"]) {
        stored.insert(s["id"].get<std::string>());
        CHECK(s.value("error", "").find("refused") == std::string::npos);
        running = running || s["state"] == "running" || s["state"] == "pending";
      }
      return !running;
    },
    "the accepted sessions to end");
  CHECK(stored.size() == static_cast<size_t>(accepted.load()));
  for (const auto& id : accepted_ids)
    if (!id.empty())
      CHECK(stored.count(id) == 1);
  auto failed = call("GET", srv.url("/v1/research?state=failed")).as_json();
  for (const auto& s : failed["sessions"])
    FAIL_CHECK("a failed session was stored: " << s.dump());
}

TEST_CASE("store faults: a store on a read-only file system is read as it is, and serve "
          "and research refuse it saying it is read-only") {
  // A file system of its own, in a mount namespace of its own (as root, or
  // as the root of a user namespace): made writable, filled by a research,
  // then turned read-only.
  test::temp_dir home;
  test::temp_dir mount_point;
  const std::string q = std::string{QUARRY_EXE} + " --plugin-dir " + QUARRY_PLUGIN_DIR
                        + " --set store.path=" + mount_point.path() + "/quarry.db";
  const std::string script
    = "mount -t tmpfs -o size=32m tmpfs \"$1\" || exit 77\n" + q
      + " research --no-clarify 'How loud is a heat pump?' >/dev/null 2>&1 || exit 78\n"
        "mount -o remount,ro \"$1\" || exit 77\n"
        "echo '== list'; "
      + q
      + " sessions list --json 2>&1; echo \"rc=$?\"\n"
        "echo '== show'; "
      + q + " sessions show \"$(" + q
      + " sessions list --json | sed -n 's/.*\"id\": \"\\(q[0-9a-f]*\\)\".*/\\1/p')\" 2>&1; "
        "echo \"rc=$?\"\n"
        "echo '== serve'; "
      + q
      + " serve --listen 127.0.0.1:0 2>&1; echo \"rc=$?\"\n"
        "echo '== research'; "
      + q + " research --no-clarify 'q' 2>&1; echo \"rc=$?\"\n";
  std::vector<std::string> argv{"unshare", "--mount", "--propagation", "private"};
  if (::geteuid() != 0) {
    argv.emplace_back("--user");
    argv.emplace_back("--map-root-user");
  }
  for (const char* x : {"sh", "-c"})
    argv.emplace_back(x);
  argv.push_back(script);
  argv.emplace_back("sh");
  argv.push_back(mount_point.path());
  auto r = test::run_process(argv, test::isolated_quarry_options(home.path()));
  // Without a mount namespace (unshare(1) from util-linux, root or user
  // namespaces) the test cannot run: that is a failure, not a pass.
  REQUIRE_MESSAGE(
    !(r.exit_code == 77 || r.exit_code == 127 || r.err.find("unshare") != std::string::npos),
    "this test needs a private mount namespace with a tmpfs (unshare --mount): " << r.err);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto part = [&](const std::string& name) {
    auto at = r.out.find("== " + name + "\n");
    REQUIRE(at != std::string::npos);
    auto end = r.out.find("\n== ", at + 3);
    return r.out.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  // Read as it is.
  auto list = part("list");
  CHECK(list.find("rc=0") != std::string::npos);
  CHECK(list.find("\"state\": \"completed\"") != std::string::npos);
  auto show = part("show");
  CHECK(show.find("rc=0") != std::string::npos);
  CHECK(show.find("How loud is a heat pump?") != std::string::npos);
  // Not written: both say why, neither talks of a header.
  auto serve = part("serve");
  CHECK(serve.find("rc=1") != std::string::npos);
  CHECK(serve.find("read-only (it is on a read-only file system)") != std::string::npos);
  CHECK(serve.find("writable store.path") != std::string::npos);
  CHECK(serve.find("header") == std::string::npos);
  auto research = part("research");
  CHECK(research.find("rc=1") != std::string::npos);
  CHECK(research.find("read-only (it is on a read-only file system)") != std::string::npos);
  CHECK(research.find("--no-store") != std::string::npos);
}

} // namespace store_faults_test
