// `quarry index` with the real binary: a folder of Markdown, text, HTML and
// PDF files indexed, updated incrementally, searched with internal_search,
// and the database choice (--db, tools.<name>.db, the per-user default);
// links out of the folder, FIFOs, size caps, binary text, two runs at once,
// a run interrupted by SIGINT.

#include "quarry/corpus/index.hpp"

#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

namespace index_cli_test {

using namespace quarry;
namespace fs = std::filesystem;

namespace {

struct index_cli_fixture {
  test::temp_dir home;
  test::temp_dir work;

  index_cli_fixture() {
    work.write("docs/plants.md", "# Plants\n\n## Photosynthesis\n\nChlorophyll absorbs light and "
                                 "photosynthesis makes glucose.\n");
    work.write("docs/notes/rivers.txt", "Rivers carry sediment to the sea; the Nile delta is "
                                        "fertile.\n");
    work.write("docs/notes/volcano.html",
               "<html><head><title>Volcanoes</title></head><body><article>"
               "<h1>Volcanoes</h1><p>Basalt lava flows from shield volcanoes "
               "such as Mauna Loa, and the eruptions are effusive rather "
               "than explosive.</p></article></body></html>");
    work.write("docs/reports/geothermal.pdf",
               test::make_pdf({"Geothermal energy\nHeat from the crust.",
                               "Binary cycle plants use isobutane to drive "
                               "turbines."},
                              "Geothermal Primer"));
    work.write("docs/image.png", "\x89PNG\r\n");
  }

  test::process_result quarry(std::vector<std::string> args) {
    std::vector<std::string> argv{QUARRY_EXE};
    argv.insert(argv.end(), args.begin(), args.end());
    // A fresh HOME, no configuration and no provider or search key: the
    // offline defaults.
    return test::run_process(argv, test::isolated_quarry_options(home.path()));
  }

  // Runs `quarry GLOBALS... index ARGS... --json` and parses the output.
  nlohmann::json index(const std::vector<std::string>& args,
                       std::vector<std::string> globals = {}) {
    globals.emplace_back("index");
    globals.insert(globals.end(), args.begin(), args.end());
    globals.emplace_back("--json");
    auto res = quarry(globals);
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    return nlohmann::json::parse(res.out);
  }

  // Runs internal_search on database `db` and returns the parsed --json.
  nlohmann::json search(const std::string& db, const std::string& query) {
    auto args = nlohmann::json{{"queries", {query}}}.dump();
    auto res = quarry({"--set", "tools.internal_search.plugin=local_corpus", "--set",
                       "tools.internal_search.db=" + db, "tool", "run", "internal_search", args,
                       "--json"});
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    return nlohmann::json::parse(res.out);
  }

  // The titles of the documents internal_search found for `query`, joined
  // with " | ".
  std::string titles(const std::string& db, const std::string& query) {
    std::string result;
    auto found = search(db, query);
    for (const auto& doc : found["documents"]) {
      if (!result.empty())
        result += " | ";
      result += doc["title"].get<std::string>();
    }
    return result;
  }

  // The title of the first document internal_search found for `query`.
  std::string first_title(const std::string& db, const std::string& query) {
    auto found = search(db, query);
    if (!found["documents"].is_array() || found["documents"].empty())
      return {};
    return found["documents"][0]["title"].get<std::string>();
  }

  std::string path_of(const std::string& name) {
    return fs::weakly_canonical(work.file(name)).string();
  }
};

// Moves the file's modification time (coarse file system timestamps would
// otherwise hide a quick rewrite).
void shift_mtime(const std::string& path, int seconds) {
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds{seconds});
}

} // namespace

TEST_CASE_FIXTURE(index_cli_fixture, "index builds, updates and serves internal_search") {
  auto db = work.file("out/corpus.db");
  auto first = index({work.file("docs"), "--db", db});
  CHECK(first["database"] == db);
  CHECK(first["added"] == 4);
  CHECK(first["updated"] == 0);
  CHECK(first["removed"] == 0);
  CHECK(first["unchanged"] == 0);
  CHECK(first["passages"] == 4);
  CHECK(first["total_documents"] == 4);
  CHECK(first["total_passages"] == 4);
  CHECK(first["notes"] == nlohmann::json::array());
  // Each kind of file is found, the PDF by the text of its second page.
  CHECK(titles(db, "isobutane turbines") == "Geothermal Primer");
  CHECK(titles(db, "chlorophyll") == "Plants");
  CHECK(titles(db, "sediment delta") == "rivers");
  CHECK(titles(db, "basalt lava") == "Volcanoes");
  auto found = search(db, "isobutane");
  REQUIRE(found["documents"].size() == 1);
  CHECK(found["documents"][0]["url"] == "file://" + path_of("docs/reports/geothermal.pdf"));
  CHECK(found["llm_text"].get<std::string>().find("Binary cycle plants") != std::string::npos);
  // Nothing changed.
  auto second = index({work.file("docs"), "--db", db});
  CHECK(second["added"] == 0);
  CHECK(second["updated"] == 0);
  CHECK(second["removed"] == 0);
  CHECK(second["unchanged"] == 4);
  CHECK(second["passages"] == 0);
  // One file modified, one deleted.
  work.write("docs/notes/rivers.txt", "Glaciers carve valleys.\n");
  shift_mtime(work.file("docs/notes/rivers.txt"), 30);
  fs::remove(work.file("docs/plants.md"));
  auto third = index({work.file("docs"), "--db", db});
  CHECK(third["added"] == 0);
  CHECK(third["updated"] == 1);
  CHECK(third["removed"] == 1);
  CHECK(third["unchanged"] == 2);
  CHECK(third["passages"] == 1);
  CHECK(third["total_documents"] == 3);
  CHECK(titles(db, "glaciers") == "rivers");
  CHECK(titles(db, "sediment").empty());
  CHECK(titles(db, "chlorophyll").empty());
  // The human summary.
  auto human = quarry({"index", work.file("docs"), "--db", db});
  CHECK(human.exit_code == 0);
  CHECK(human.out
        == "Database: " + db
             + "\nFiles: 0 added, 0 updated, 0 removed, 3 unchanged\n"
               "Passages written: 0\nIndex: 3 documents, 3 passages\n"
               "To search it, configure tools.internal_search: {plugin: local_corpus, db: "
             + db + "}; quarry corpus list --db " + db + " shows what it holds\n");
}

TEST_CASE_FIXTURE(index_cli_fixture, "index reports unreadable files as notes") {
  work.write("docs/broken.pdf", "%PDF-1.4\ngarbage");
  auto db = work.file("corpus.db");
  auto res = quarry({"index", work.file("docs"), "--db", db, "--json"});
  CHECK(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["added"] == 4);
  REQUIRE(j["notes"].size() == 1);
  CHECK(j["notes"][0].get<std::string>().find("broken.pdf") != std::string::npos);
  CHECK(res.err.find("note: skipped " + path_of("docs/broken.pdf")) != std::string::npos);
}

TEST_CASE_FIXTURE(index_cli_fixture, "index refuses a missing path") {
  auto db = work.file("corpus.db");
  auto res = quarry({"index", work.file("docs"), work.file("nope"), "--db", db});
  CHECK(res.exit_code == 2);
  CHECK(res.err.find("no such file or folder") != std::string::npos);
  CHECK(res.err.find(work.file("nope")) != std::string::npos);
  CHECK(res.out.empty());
  CHECK_FALSE(fs::exists(db));
}

TEST_CASE_FIXTURE(index_cli_fixture, "index leaves a database it does not own untouched") {
  SUBCASE("not SQLite") {
    std::string bytes = "name,value\nalpha,1\n" + std::string(5000, 'x');
    auto db = work.write("data.csv", bytes);
    auto res = quarry({"index", work.file("docs"), "--db", db});
    CHECK(res.exit_code == 1);
    CHECK(res.err.find("not a SQLite database") != std::string::npos);
    CHECK(res.out.empty());
    CHECK(test::read_file(db) == bytes);
    CHECK_FALSE(fs::exists(db + "-wal"));
    CHECK_FALSE(fs::exists(db + "-journal"));
  }
  SUBCASE("a corrupt SQLite file, with --json") {
    std::string bytes{"SQLite format 3\0", 16};
    bytes += std::string(4080, '\x5A');
    auto db = work.write("broken.db", bytes);
    auto res = quarry({"index", work.file("docs"), "--db", db, "--json"});
    CHECK(res.exit_code == 1);
    auto j = nlohmann::json::parse(res.out);
    CHECK(j["database"] == db);
    CHECK(j["error"]["class"] == "bad_request");
    CHECK(j["error"]["message"].get<std::string>().find("corrupt") != std::string::npos);
    CHECK(test::read_file(db) == bytes);
  }
}

TEST_CASE_FIXTURE(index_cli_fixture, "index writes where internal_search reads by default") {
  SUBCASE("the per-user data folder") {
    auto j = index({work.file("docs")});
    auto expected = home.file(".local/share/quarry/plugins/local_corpus/"
                              "corpus.db");
    CHECK(j["database"] == expected);
    CHECK(fs::exists(expected));
    // The tool configured without a db finds the same index.
    auto res = quarry({"--set", "tools.internal_search.plugin=local_corpus", "tool", "run",
                       "internal_search", R"({"queries": ["isobutane"]})", "--json"});
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    auto found = nlohmann::json::parse(res.out)["documents"];
    REQUIRE(found.size() == 1);
    CHECK(found[0]["title"] == "Geothermal Primer");
  }
  SUBCASE("runtime.data_dir") {
    auto data = work.file("data");
    auto j = index({work.file("docs")}, {"--set", "runtime.data_dir=" + data});
    CHECK(j["database"] == data + "/plugins/local_corpus/corpus.db");
    CHECK(fs::exists(data + "/plugins/local_corpus/corpus.db"));
  }
  SUBCASE("tools.internal_search.db") {
    auto db = work.file("configured/corpus.db");
    auto j = index({work.file("docs")}, {"--set", "tools.internal_search.plugin=local_corpus",
                                         "--set", "tools.internal_search.db=" + db});
    CHECK(j["database"] == db);
    CHECK(j["added"] == 4);
    CHECK(fs::exists(db));
    CHECK_FALSE(fs::exists(home.file(".local/share/quarry")));
    CHECK(titles(db, "chlorophyll") == "Plants");
  }
  SUBCASE("--db wins over the configuration") {
    auto db = work.file("explicit.db");
    auto j = index({work.file("docs"), "--db", db},
                   {"--set", "tools.internal_search.plugin=local_corpus", "--set",
                    "tools.internal_search.db=" + work.file("configured.db")});
    CHECK(j["database"] == db);
    CHECK_FALSE(fs::exists(work.file("configured.db")));
  }
}

TEST_CASE_FIXTURE(index_cli_fixture, "index, then research searches that index and corpus list "
                                     "shows what it holds") {
  auto indexed = quarry({"index", work.file("docs")});
  CAPTURE(indexed.err);
  REQUIRE(indexed.exit_code == 0);
  CHECK(indexed.out.find("Research searches it when no search tool is configured: quarry "
                         "research \"QUESTION\"")
        != std::string::npos);
  auto db = home.file(".local/share/quarry/plugins/local_corpus/corpus.db");
  auto listed = quarry({"corpus", "list"});
  CAPTURE(listed.err);
  REQUIRE(listed.exit_code == 0);
  CHECK(listed.out.find("Database: " + db) != std::string::npos);
  CHECK(listed.out.find("Index: 4 documents") != std::string::npos);
  CHECK(listed.out.find(path_of("docs/plants.md") + "  (Plants, ") != std::string::npos);
  auto as_json = quarry({"corpus", "list", "--json"});
  REQUIRE(as_json.exit_code == 0);
  auto j = nlohmann::json::parse(as_json.out);
  CHECK(j["total_documents"] == 4);
  REQUIRE(j["documents"].size() == 4);
  CHECK(j["documents"][0]["passages"].get<int>() >= 1);
  // Research without a search tool searches that index, not the example
  // corpus, and cites its files.
  auto research = quarry({"research", "How does photosynthesis make glucose?", "--no-clarify"});
  CAPTURE(research.err);
  REQUIRE(research.exit_code == 0);
  CHECK(research.err.find("searching the index built by quarry index (" + db + ", 4 documents")
        != std::string::npos);
  CHECK(research.err.find("example corpus") == std::string::npos);
  CHECK(research.out.find("plants.md") != std::string::npos);
  // No index there: a clear error.
  auto missing = quarry({"corpus", "list", "--db", work.file("none.db")});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("no index at " + work.file("none.db")) != std::string::npos);
  CHECK_FALSE(fs::exists(work.file("none.db")));
}

TEST_CASE_FIXTURE(index_cli_fixture, "index never follows a symbolic link out of the folder, so "
                                     "open_url cannot serve what it leads to") {
  auto secret = work.write("private/secret.txt", "The ultraviolet password is hunter2, kept out of "
                                                 "every corpus.\n");
  fs::create_symlink(secret, work.file("docs/secret.txt"));
  fs::create_symlink("/etc/passwd", work.file("docs/passwd.txt"));
  fs::create_symlink(work.file("private"), work.file("docs/private"));
  // A link inside the folder is fine, and indexes its file once.
  fs::create_symlink(work.file("docs/plants.md"), work.file("docs/notes/plants-link.md"));
  auto db = work.file("corpus.db");
  auto res = quarry({"index", work.file("docs"), "--db", db, "--json"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["added"] == 4);
  CHECK(j["skipped"] == 3);
  CHECK(j["total_documents"] == 4);
  auto outside = ", outside the folder being indexed (" + path_of("docs") + ")";
  CHECK(res.err.find("note: skipped " + path_of("docs")
                     + "/secret.txt: a "
                       "symbolic link to "
                     + path_of("private/secret.txt") + outside)
        != std::string::npos);
  CHECK(res.err.find("note: skipped " + path_of("docs")
                     + "/passwd.txt: a "
                       "symbolic link to /etc/passwd"
                     + outside)
        != std::string::npos);
  CHECK(res.err.find("note: skipped " + path_of("docs")
                     + "/private: a "
                       "symbolic link to "
                     + path_of("private") + outside)
        != std::string::npos);
  CHECK(titles(db, "ultraviolet hunter2").empty());
  CHECK(titles(db, "root bash nologin").empty());
  CHECK(titles(db, "chlorophyll") == "Plants");
  // open_url reads file URLs only from the index: the link is not there.
  for (auto name : {"secret.txt", "passwd.txt"}) {
    auto url = "file://" + path_of("docs") + "/" + name;
    auto opened = quarry({"--set", "tools.open_url.plugin=open_url", "--set",
                          "tools.open_url.corpus_db=" + db, "tool", "run", "open_url",
                          R"({"urls": [")" + url + R"("]})"});
    CAPTURE(opened.out);
    CHECK(opened.exit_code == 1);
    CHECK(opened.out.find("hunter2") == std::string::npos);
    CHECK(opened.out.find("root:") == std::string::npos);
  }
  // The human summary counts the skipped files.
  auto human = quarry({"index", work.file("docs"), "--db", db});
  CHECK(human.out.find("4 unchanged, 3 skipped (see the notes)\n") != std::string::npos);
}

TEST_CASE_FIXTURE(index_cli_fixture, "index skips FIFOs, files over open_url's size caps and "
                                     "binary text files") {
  // Nobody ever writes the FIFO: opening it would block the index forever.
  REQUIRE(::mkfifo(work.file("docs/pipe.txt").c_str(), 0600) == 0);
  work.write("docs/big.html", "<html><body><p>" + std::string(3000, 'x') + "</p></body></html>");
  std::string noise;
  uint32_t x = 99;
  for (int i = 0; i < 1024; ++i) {
    x = x * 1103515245u + 12345u;
    noise += static_cast<char>((x >> 16) & 0xFF);
  }
  work.write("docs/random.txt", noise);
  auto db = work.file("corpus.db");
  auto res = quarry({"--set", "tools.open_url.plugin=open_url", "--set",
                     "tools.open_url.max_html_size=2KiB", "index", work.file("docs"), "--db", db,
                     "--json"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK_FALSE(res.timed_out);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["added"] == 4);
  CHECK(j["skipped"] == 3);
  auto docs = path_of("docs");
  CHECK(res.err.find("note: skipped " + docs + "/pipe.txt: is not a regular file (a FIFO)")
        != std::string::npos);
  CHECK(res.err.find("note: skipped " + docs
                     + "/big.html: is too large: "
                       "more than 2 KiB")
        != std::string::npos);
  CHECK(res.err.find("note: skipped " + docs + "/random.txt: binary data, not text")
        != std::string::npos);
  // Without the configured cap the page fits open_url's default.
  auto again = quarry({"index", work.file("docs"), "--db", db, "--json"});
  REQUIRE(again.exit_code == 0);
  auto k = nlohmann::json::parse(again.out);
  CHECK(k["added"] == 1);
  CHECK(k["skipped"] == 2);
}

TEST_CASE_FIXTURE(index_cli_fixture, "two index runs started at once on a new database both "
                                     "succeed") {
  // Rounds of two processes started together, each on a fresh database:
  // whichever loses the race waits for the other and then succeeds.
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    auto db = work.file("race/" + std::to_string(round) + "/corpus.db");
    std::vector<std::string> argv{QUARRY_EXE, "index", work.file("docs"), "--db", db, "--json"};
    test::process_options opts;
    opts.env = {{"HOME", home.path()},
                {"XDG_DATA_HOME", std::nullopt},
                {"XDG_CONFIG_HOME", std::nullopt},
                {"QUARRY_CONFIG", std::nullopt}};
    test::child_process first{argv, opts};
    test::child_process second{argv, opts};
    auto a = first.wait(std::chrono::seconds{120});
    auto b = second.wait(std::chrono::seconds{120});
    CAPTURE(a.err);
    CAPTURE(b.err);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    auto ja = nlohmann::json::parse(a.out);
    auto jb = nlohmann::json::parse(b.out);
    CHECK(ja["added"].get<int>() + jb["added"].get<int>() == 4);
    CHECK(ja["total_documents"] == 4);
    CHECK(jb["total_documents"] == 4);
  }
  CHECK(titles(work.file("race/0/corpus.db"), "chlorophyll") == "Plants");
}

TEST_CASE_FIXTURE(index_cli_fixture, "SIGINT in the middle of an index run keeps what was "
                                     "committed, and the next run goes on from there") {
  // Enough files that indexing takes seconds: the signal lands mid-run.
  constexpr int files = 8000;
  std::string filler;
  for (int k = 0; k < 60; ++k)
    filler += "Sediment settles slowly where the current weakens. ";
  for (int i = 0; i < files; ++i)
    work.write("big/f" + std::to_string(i) + ".md", "# File " + std::to_string(i) + "\n\nMarker"
                                                      + std::to_string(i) + " " + filler + "\n");
  auto db = work.file("big.db");
  std::vector<std::string> argv{QUARRY_EXE, "index", work.file("big"), "--db", db, "--json"};
  test::process_options opts;
  opts.env = {{"HOME", home.path()},
              {"XDG_DATA_HOME", std::nullopt},
              {"XDG_CONFIG_HOME", std::nullopt},
              {"QUARRY_CONFIG", std::nullopt}};
  test::child_process run{argv, opts};
  // Wait for the first committed batch, read through a connection of our
  // own (once the run has set the database up: its write-ahead log exists).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{120};
  std::unique_ptr<corpus::corpus_index> watcher;
  size_t committed = 0;
  while (committed == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
    if (!watcher && fs::exists(db + "-wal")) {
      auto opened = corpus::corpus_index::open(db);
      REQUIRE_FALSE(opened.failure.has_value());
      watcher = std::move(opened.index);
    }
    if (watcher)
      committed = watcher->size().first;
  }
  REQUIRE(committed > 0);
  run.signal(SIGINT);
  auto stopped = run.wait(std::chrono::seconds{60});
  CAPTURE(stopped.err);
  CHECK_FALSE(stopped.timed_out);
  // Interrupted mid-run (had it finished first, it would have exited 0).
  REQUIRE(stopped.exit_code == 130);
  CHECK(stopped.err.find("interrupted (SIGINT)") != std::string::npos);
  // The next run finds what the first committed and adds the rest.
  auto j = index({work.file("big"), "--db", db});
  CHECK(j["added"].get<int>() + j["unchanged"].get<int>() == files);
  CHECK(j["unchanged"].get<size_t>() >= committed);
  CHECK(j["added"].get<int>() > 0);
  CHECK(j["total_documents"] == files);
  // (Feedback adds the files that share their other words after them.)
  CHECK(first_title(db, "Marker0") == "File 0");
  CHECK(first_title(db, "Marker" + std::to_string(files - 1))
        == "File " + std::to_string(files - 1));
}

} // namespace index_cli_test
