// `quarry eval run` and `quarry eval report` through the real binary, offline
// (the extractive provider over the example corpus): the example question set
// (examples/eval) cites the sources it expects, every output file is
// well-formed, each question is a stored session, a run killed with SIGKILL
// goes on with --resume and asks only what is missing (and one stopped by
// SIGINT exits 130 keeping what finished), two runs are compared,
// and hostile input (bad lines, duplicate ids, a missing prompt, a folder that
// cannot be written, another question set on --resume) is a clear error with
// a non-zero exit that changes nothing already written.

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace eval_cli_test {

using namespace quarry;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

const std::string example_questions = std::string{QUARRY_SOURCE_DIR}
                                      + "/examples/eval/"
                                        "questions.jsonl";

struct eval_fixture {
  test::temp_dir home;

  std::vector<std::string> argv(std::vector<std::string> args) const {
    std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  test::process_result quarry(std::vector<std::string> args) const {
    auto opts = test::isolated_quarry_options(home.path(), {});
    opts.timeout = std::chrono::minutes{8};
    return test::run_process(argv(std::move(args)), opts);
  }
};

// The lines of a JSONL file, each parsed; a line that does not parse fails
// the test.
std::vector<json> jsonl(const std::string& path) {
  std::vector<json> out;
  std::istringstream in{test::read_file(path)};
  for (std::string line; std::getline(in, line);) {
    CAPTURE(line);
    auto j = json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<json> example_set() {
  return jsonl(example_questions);
}

json result_of(const std::string& dir, int id) {
  auto j = json::parse(test::read_file(dir + "/results/" + std::to_string(id) + ".json"), nullptr,
                       false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// Every file of `dir` (recursively) with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file())
      out[e.path().lexically_relative(dir).string()] = test::read_file(e.path().string());
  return out;
}

} // namespace

TEST_CASE_FIXTURE(eval_fixture, "eval: the example questions run offline, cite the sources they "
                                "expect, are stored, and the report and page are written") {
  auto dir = home.file("run");
  auto res = quarry({"eval", "run", example_questions, "--out", dir, "--concurrency", "2"});
  CAPTURE(res.err);
  CAPTURE(res.out);
  REQUIRE(res.exit_code == 0);
  auto questions = example_set();
  REQUIRE(questions.size() == 5);

  // DeepResearch Bench's file: one {"id", "prompt", "article"} per question,
  // in the set's order, with the other fields kept.
  auto articles = jsonl(dir + "/articles.jsonl");
  REQUIRE(articles.size() == questions.size());
  std::set<std::string> sessions;
  size_t expected = 0;
  size_t cited = 0;
  for (size_t i = 0; i < questions.size(); ++i) {
    const auto& q = questions[i];
    CAPTURE(q.dump());
    CHECK(articles[i]["id"] == q["id"]);
    CHECK(articles[i]["prompt"] == q["prompt"]);
    CHECK(articles[i]["topic"] == q["topic"]);
    auto article = articles[i]["article"].get<std::string>();
    CHECK(article.rfind("# " + q["prompt"].get<std::string>(), 0) == 0);
    CHECK(article.find("## Sources") != std::string::npos);

    // One result per question, measured.
    auto r = result_of(dir, q["id"].get<int>());
    CHECK(r["status"] == "completed");
    CHECK(r["article"] == articles[i]["article"]);
    auto session = r["session"].get<std::string>();
    CHECK(std::regex_match(session, std::regex{"q[0-9a-f]{16}"}));
    sessions.insert(session);
    CHECK(r["sources_read"].get<int>() >= 3);
    CHECK(r["sources_found"].get<int>() >= r["sources_read"].get<int>());
    CHECK(r["unique_cited_sources"].get<int>() >= 3);
    CHECK(r["citations"].get<int>() >= r["unique_cited_sources"].get<int>());
    CHECK(r["cited"].size() == r["unique_cited_sources"].get<size_t>());
    CHECK(r["seconds"].get<double>() > 0);
    CHECK(r["tokens"]["total"].get<int64_t>() > 0);
    CHECK(r["model_calls"].get<int>() > 0);
    // Verified by default: the claims were judged.
    REQUIRE(r["claims"].is_object());
    CHECK(r["claims"]["claims"].get<int>() > 0);
    CHECK(r["claims"]["verified"].get<int>() > 0);
    CHECK(r["claims"]["supported"].get<int>() + r["claims"]["partly_supported"].get<int>()
            + r["claims"]["unsupported"].get<int>() + r["claims"]["no_evidence"].get<int>()
          == r["claims"]["verified"].get<int>());
    // The sources a good answer cites are cited.
    REQUIRE(r.contains("must_cite"));
    expected += r["must_cite"]["expected"].size();
    cited += r["must_cite"]["cited"].size();
    CHECK(r["must_cite"]["missing"] == json::array());
  }
  CHECK(expected == 14);
  CHECK(cited == expected);
  CHECK(sessions.size() == 5);
  // The table at the end names every question.
  CHECK(res.out.find("5 questions, 5 completed, 0 failed, 0 not run") != std::string::npos);

  // Each question is a stored session, completed, with its question.
  auto list = quarry({"sessions", "list", "--json"});
  REQUIRE(list.exit_code == 0);
  auto listed = json::parse(list.out, nullptr, false);
  REQUIRE_FALSE(listed.is_discarded());
  size_t found = 0;
  for (const auto& row : listed)
    if (sessions.count(row.value("id", "")) != 0) {
      ++found;
      CHECK(row.value("state", "") == "completed");
    }
  CHECK(found == 5);

  // The report: a table of the run; a page with a chart per metric.
  auto page = home.file("page.html");
  auto report = quarry({"eval", "report", dir, "--html", page});
  CAPTURE(report.err);
  REQUIRE(report.exit_code == 0);
  CHECK(report.out.find(dir + ": 5 questions, 5 completed") != std::string::npos);
  CHECK(report.out.find("must%") != std::string::npos);
  std::istringstream table{report.out};
  size_t full_rows = 0;
  for (std::string line; std::getline(table, line);)
    if (std::regex_search(line, std::regex{R"(^[1-5] +completed .* 100 )"}))
      ++full_rows;
  CHECK(full_rows == 5);
  auto html = test::read_file(page);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("id=\"chart-must_cite_pct\"") != std::string::npos);
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);

  // A second run of two of the questions, without verification, compared
  // with the first: per question and overall.
  auto two = home.write("two.jsonl", questions[0].dump() + "\n" + questions[1].dump() + "\n");
  auto second_dir = home.file("second");
  auto second = quarry({"eval", "run", two, "--out", second_dir, "--no-verify"});
  CAPTURE(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(result_of(second_dir, 1)["claims"].is_null());
  auto diff = quarry({"eval", "report", dir, second_dir, "--html", page});
  CAPTURE(diff.out);
  REQUIRE(diff.exit_code == 0);
  CHECK(diff.out.find("Difference per question") != std::string::npos);
  CHECK(diff.out.find("only in the first run") != std::string::npos);
  CHECK(diff.out.find("means over the 2 questions completed in both runs; completed: 5 of 5 -> 2 "
                      "of 2")
        != std::string::npos);
  CHECK(diff.out.find("(not verified)") != std::string::npos);
  CHECK(test::read_file(page).find("#d0662c") != std::string::npos);
}

TEST_CASE_FIXTURE(eval_fixture, "eval: a run killed with SIGKILL goes on with --resume, which asks "
                                "only the questions without a report") {
  auto dir = home.file("run");
  auto opts = test::isolated_quarry_options(home.path(), {});
  test::child_process child{argv({"eval", "run", example_questions, "--out", dir}), opts};
  // Killed once the first question has its result.
  auto first = dir + "/results/1.json";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes{4};
  while (!fs::exists(first) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  REQUIRE(fs::exists(first));
  child.signal(SIGKILL);
  auto killed = child.wait(std::chrono::seconds{30});
  CHECK(killed.exit_code == 128 + SIGKILL);

  // What was written is whole: each result parses, articles.jsonl has one
  // line per result with a report.
  size_t done = 0;
  std::map<int, std::string> before;
  for (int id = 1; id <= 5; ++id) {
    auto path = dir + "/results/" + std::to_string(id) + ".json";
    if (!fs::exists(path))
      continue;
    ++done;
    before[id] = test::read_file(path);
    CHECK(result_of(dir, id)["status"] == "completed");
  }
  REQUIRE(done >= 1);
  REQUIRE(done < 5);
  CHECK(jsonl(dir + "/articles.jsonl").size() <= done);

  // Without --resume: refused, nothing changed.
  auto files = snapshot(dir);
  auto refused = quarry({"eval", "run", example_questions, "--out", dir});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("holds an evaluation run already (" + std::to_string(done)
                         + " of 5 questions done): pass --resume")
        != std::string::npos);
  CHECK(snapshot(dir) == files);

  auto resumed = quarry({"eval", "run", example_questions, "--out", dir, "--resume"});
  CAPTURE(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find(std::to_string(done) + " of 5 questions have a report already; "
                         + std::to_string(5 - done) + " to go")
        != std::string::npos);
  // The finished questions were not asked again: their results are as they
  // were; the others were asked once.
  for (const auto& finished : before) {
    // Named, not bound: CAPTURE cannot take a structured binding (clang).
    const auto& id = finished.first;
    const auto& text = finished.second;
    CAPTURE(id);
    CHECK(test::read_file(dir + "/results/" + std::to_string(id) + ".json") == text);
    CHECK(resumed.err.find("eval: " + std::to_string(id) + ": ") == std::string::npos);
  }
  for (int id = 1; id <= 5; ++id)
    if (before.count(id) == 0)
      CHECK(resumed.err.find("eval: " + std::to_string(id) + ": completed") != std::string::npos);
  auto articles = jsonl(dir + "/articles.jsonl");
  REQUIRE(articles.size() == 5);
  for (int id = 1; id <= 5; ++id)
    CHECK(articles[static_cast<size_t>(id - 1)]["id"] == id);

  // Once all are done, a resume asks nothing: no session is added.
  auto sessions = [&] {
    auto list = quarry({"sessions", "list", "--json"});
    REQUIRE(list.exit_code == 0);
    return json::parse(list.out).size();
  };
  auto stored = sessions();
  // Five completed, and the one the kill interrupted if it had started.
  CHECK(stored >= 5);
  CHECK(stored <= 6);
  auto again = quarry({"eval", "run", example_questions, "--out", dir, "--resume"});
  REQUIRE(again.exit_code == 0);
  CHECK(again.err.find("all 5 questions of " + dir + " have a report already")
        != std::string::npos);
  CHECK(again.out.find("5 questions, 5 completed") != std::string::npos);
  CHECK(sessions() == stored);
}

TEST_CASE_FIXTURE(eval_fixture, "eval: SIGINT stops the run with exit 130, keeps the questions "
                                "that finished and --resume completes it") {
  auto dir = home.file("run");
  auto opts = test::isolated_quarry_options(home.path(), {});
  test::child_process child{argv({"eval", "run", example_questions, "--out", dir}), opts};
  auto first = dir + "/results/1.json";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes{4};
  while (!fs::exists(first) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  REQUIRE(fs::exists(first));
  child.signal(SIGINT);
  auto stopped = child.wait(std::chrono::seconds{60});
  CAPTURE(stopped.err);
  CHECK(stopped.exit_code == 130);
  CHECK(stopped.err.find("interrupted by SIGINT; go on with: quarry eval run")
        != std::string::npos);
  auto kept = test::read_file(first);
  CHECK(json::parse(kept)["status"] == "completed");
  auto articles = jsonl(dir + "/articles.jsonl");
  CHECK(articles.size() >= 1);
  CHECK(articles.size() < 5);
  auto resumed = quarry({"eval", "run", example_questions, "--out", dir, "--resume"});
  CAPTURE(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(test::read_file(first) == kept);
  CHECK(jsonl(dir + "/articles.jsonl").size() == 5);
}

TEST_CASE_FIXTURE(eval_fixture, "eval: bad lines, duplicate ids, a missing prompt, an unwritable "
                                "folder and another question set are clear errors") {
  // Bad lines: each named with its line; nothing runs, no folder is made.
  auto dir = home.file("never");
  auto broken = home.write("broken.jsonl", "{\"id\": 1, \"prompt\": \"Heat pumps?\"}\n"
                                           "{\"id\": 2, \"prompt\": \"cut off\n"
                                           "{\"id\": 1, \"prompt\": \"again\"}\n"
                                           "{\"id\": 4}\n"
                                           "{\"id\": 5, \"prompt\": \"\"}\n");
  auto res = quarry({"eval", "run", broken, "--out", dir});
  CHECK(res.exit_code == 2);
  CAPTURE(res.err);
  CHECK(res.err.find(broken + ":2: not JSON (") != std::string::npos);
  CHECK(res.err.find(broken + ":3: id 1 is used on line 1 already") != std::string::npos);
  CHECK(res.err.find(broken + ":4: id 4: no \"prompt\"") != std::string::npos);
  CHECK(res.err.find(broken + ":5: id 5: \"prompt\" is empty") != std::string::npos);
  CHECK(res.err.find("no question was run") != std::string::npos);
  CHECK_FALSE(fs::exists(dir));
  auto missing = quarry({"eval", "run", home.file("nothing.jsonl"), "--out", dir});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("nothing.jsonl: cannot be read: No such file or directory")
        != std::string::npos);

  // A folder that cannot be written, or a file, or a folder of other files.
  auto one = home.write("one.jsonl", "{\"id\": \"a\", \"prompt\": \"What is a heat pump's "
                                     "COP?\", \"must_cite\": [\"cop-and-temperature-lift.md\"]}\n");
  auto plain = home.write("plain.txt", "mine");
  auto under_file = quarry({"eval", "run", one, "--out", plain + "/run"});
  CHECK(under_file.exit_code == 2);
  CHECK(under_file.err.find(plain + "/run cannot be created") != std::string::npos);
  auto on_file = quarry({"eval", "run", one, "--out", plain});
  CHECK(on_file.exit_code == 2);
  CHECK(on_file.err.find(plain + " is not a folder") != std::string::npos);
  CHECK(test::read_file(plain) == "mine");
  home.write("busy/keep.md", "notes");
  auto busy = quarry({"eval", "run", one, "--out", home.file("busy")});
  CHECK(busy.exit_code == 2);
  CHECK(busy.err.find("holds other files (keep.md) and no evaluation run") != std::string::npos);
  CHECK(test::read_file(home.file("busy/keep.md")) == "notes");
  auto bad_concurrency = quarry({"eval", "run", one, "--out", dir, "--concurrency", "0"});
  CHECK(bad_concurrency.exit_code == 2);
  CHECK(bad_concurrency.err.find("--concurrency must be between 1 and 16") != std::string::npos);

  // A real run of one question, then another set on --resume: refused,
  // nothing written is lost.
  auto run = home.file("one-run");
  auto ok = quarry({"eval", "run", one, "--out", run, "--no-verify"});
  CAPTURE(ok.err);
  REQUIRE(ok.exit_code == 0);
  auto files = snapshot(run);
  REQUIRE(files.count("results/a.json") == 1);
  REQUIRE(files.count("articles.jsonl") == 1);
  auto other = home.write("other.jsonl", "{\"id\": \"a\", \"prompt\": \"What is a heat pump's "
                                         "SCOP?\"}\n");
  auto different = quarry({"eval", "run", other, "--out", run, "--resume"});
  CHECK(different.exit_code == 2);
  CHECK(different.err.find("holds a run of another question set (the prompt of id \"a\" differs)")
        != std::string::npos);
  auto more = home.write("more.jsonl",
                         test::read_file(one) + "{\"id\": \"b\", \"prompt\": \"x\"}\n");
  auto added = quarry({"eval", "run", more, "--out", run, "--resume"});
  CHECK(added.exit_code == 2);
  CHECK(added.err.find("id \"b\" (line 2 of the questions file) is not in it")
        != std::string::npos);
  auto strategy = quarry(
    {"eval", "run", one, "--out", run, "--resume", "--strategy", "reflective"});
  CHECK(strategy.exit_code == 2);
  CHECK(strategy.err.find("the run was started with other options: --strategy reflective")
        != std::string::npos);
  CHECK(snapshot(run) == files);
  // A report of a folder that holds no run.
  auto no_run = quarry({"eval", "report", home.file("busy")});
  CHECK(no_run.exit_code == 2);
  CHECK(no_run.err.find("holds no evaluation run (no run.json)") != std::string::npos);
}

} // namespace eval_cli_test
