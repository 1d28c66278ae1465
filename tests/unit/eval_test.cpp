// The pure pieces of `quarry eval`: the questions file (DeepResearch Bench's
// JSONL, read strictly), a research's tally from its packets, citation
// counts, the result JSON and its article line, the run folder (new, resumed,
// refused), the report's table, the difference of two runs, the HTML page and
// the progress line.

#include "eval_progress.hpp"
#include "eval_questions.hpp"
#include "eval_report.hpp"
#include "eval_result.hpp"
#include "eval_run_dir.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace eval_test {

using namespace quarry::app;
using nlohmann::json;

namespace {

std::vector<eval::question> good(std::string_view text) {
  auto parsed = eval::parse_questions(text);
  if (auto* errors = std::get_if<std::vector<std::string>>(&parsed)) {
    for (const auto& e : *errors)
      MESSAGE(e);
    FAIL("the questions were refused");
  }
  return std::get<std::vector<eval::question>>(parsed);
}

std::vector<std::string> bad(std::string_view text) {
  auto parsed = eval::parse_questions(text);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(parsed));
  return std::get<std::vector<std::string>>(parsed);
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

quarry::core::packet packet_of(json obj) {
  quarry::core::packet p;
  p.obj = std::move(obj);
  return p;
}

// A completed result of `q` with the given numbers.
json completed(const eval::question& q, int read, int cited, double rate, int64_t tokens,
               double seconds) {
  eval::packet_tally t;
  for (int i = 0; i < read; ++i)
    t.read.insert("doc" + std::to_string(i));
  t.found = t.read;
  t.input_tokens = tokens;
  t.model_calls = 1;
  t.verification = {{"type", "verification_summary"},
                    {"claims", 10},
                    {"supported", static_cast<int>(rate * 10)},
                    {"unsupported", 10 - static_cast<int>(rate * 10)},
                    {"unverified", 0},
                    {"rate", rate}};
  eval::finished_research r;
  r.status = "completed";
  r.session = "q0123456789abcdef";
  for (int i = 1; i <= cited; ++i) {
    r.body += "Fact " + std::to_string(i) + " [[" + std::to_string(i) + "]](file:///c/d"
              + std::to_string(i) + ".md). ";
    r.cited.push_back({i, "Doc " + std::to_string(i), "file:///c/d" + std::to_string(i) + ".md"});
  }
  r.article = "# " + q.prompt + "\n\n" + r.body;
  r.seconds = seconds;
  r.finished_at = "2026-12-01T00:00:00.000Z";
  return eval::result_json(q, r, t);
}

} // namespace

TEST_CASE("eval questions: DeepResearch Bench lines are read with their extra fields") {
  auto qs = good("\xEF\xBB\xBF{\"id\": 1, \"topic\": \"Energy\", \"language\": \"en\", \"prompt\": "
                 "\"  Why do heat pumps defrost?  \"}\r\n"
                 "\n   \n"
                 "{\"id\": \"q-2\", \"prompt\": \"What is SCOP?\", \"must_cite\": [\"a.md\"]}\n"
                 "{\"prompt\": \"Third\", \"id\": 3}");
  REQUIRE(qs.size() == 3);
  CHECK(qs[0].id == 1);
  CHECK(qs[0].key == "1");
  CHECK(qs[0].prompt == "Why do heat pumps defrost?");
  CHECK(qs[0].fields["topic"] == "Energy");
  CHECK(qs[0].line == 1);
  CHECK(qs[1].key == "q-2");
  CHECK(qs[1].line == 4);
  CHECK(eval::must_cite(qs[1]) == std::vector<std::string>{"a.md"});
  CHECK(eval::must_cite(qs[0]).empty());
  CHECK(qs[2].line == 5);
}

TEST_CASE("eval questions: every bad line is named with its line and why") {
  auto errors = bad("{\"id\": 1, \"prompt\": \"ok\"}\n"
                    "{\"id\": 2, \"prompt\": \"cut\n"
                    "[1, 2]\n"
                    "{\"prompt\": \"no id\"}\n"
                    "{\"id\": 5}\n"
                    "{\"id\": 6, \"prompt\": \"   \"}\n"
                    "{\"id\": 7, \"prompt\": 42}\n"
                    "{\"id\": \"1\", \"prompt\": \"same id as line 1\"}\n"
                    "{\"id\": 1.5, \"prompt\": \"x\"}\n"
                    "{\"id\": null, \"prompt\": \"x\"}\n"
                    "{\"id\": 11, \"prompt\": \"x\", \"must_cite\": \"a.md\"}\n"
                    "{\"id\": 12, \"prompt\": \"bad \xff byte\"}\n");
  REQUIRE(errors.size() == 11);
  CHECK(errors[0].rfind("2: not JSON (", 0) == 0);
  CHECK(errors[1] == "3: not a JSON object but array");
  CHECK(errors[2] == "4: no \"id\"");
  CHECK(errors[3] == "5: id 5: no \"prompt\"");
  CHECK(errors[4] == "6: id 6: \"prompt\" is empty");
  CHECK(errors[5] == "7: id 7: \"prompt\" is number, not a string");
  CHECK(errors[6] == "8: id \"1\" is used on line 1 already");
  CHECK(errors[7] == "9: id is not a whole number (1.5)");
  CHECK(errors[8] == "10: id is null");
  CHECK(errors[9] == "11: id 11: \"must_cite\" is not an array of strings");
  CHECK(errors[10] == "12: not UTF-8 (byte 27)");
  // An empty file, and one of blank lines, hold no question.
  CHECK(bad("")[0].find("holds no question") != std::string::npos);
  CHECK(bad("\n \n")[0].find("holds no question") != std::string::npos);
  // Past 20 bad lines, the rest are counted.
  std::string many;
  for (int i = 0; i < 30; ++i)
    many += "nope\n";
  auto lots = bad(many);
  REQUIRE(lots.size() == 21);
  CHECK(lots.back() == "and 10 more bad lines");
  // A prompt past 64 KiB.
  auto huge = bad("{\"id\": 1, \"prompt\": \"" + std::string(70000, 'a') + "\"}");
  CHECK(huge[0] == "1: id 1: \"prompt\" is longer than 64 KiB");
}

TEST_CASE("eval questions: the file is read whole and named in its messages") {
  quarry::test::temp_dir dir;
  auto path = dir.write("q.jsonl",
                        "{\"id\": 1, \"prompt\": \"a\"}\n{\"id\": 1, \"prompt\": \"b\"}\n");
  auto read = eval::read_questions_file(path);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(read));
  CHECK(std::get<1>(read)[0] == path + ":2: id 1 is used on line 1 already");
  auto missing = eval::read_questions_file(dir.file("none.jsonl"));
  REQUIRE(std::holds_alternative<std::vector<std::string>>(missing));
  CHECK(std::get<1>(missing)[0].find("none.jsonl: cannot be read") != std::string::npos);
  auto folder = eval::read_questions_file(dir.path());
  REQUIRE(std::holds_alternative<std::vector<std::string>>(folder));
  CHECK(std::get<1>(folder)[0].find("is a folder") != std::string::npos);
}

TEST_CASE("eval questions: file names of ids and expected sources") {
  CHECK(eval::file_stem("17") == "17");
  CHECK(eval::file_stem("heat-pumps_2.v1") == "heat-pumps_2.v1");
  for (std::string odd : std::vector<std::string>{"../etc/passwd", ".hidden", "-flag", "a b", "",
                                                  std::string(65, 'x'), "caf\xc3\xa9"}) {
    CAPTURE(odd);
    auto stem = eval::file_stem(odd);
    CHECK(stem.size() == 19);
    CHECK(stem.rfind("id-", 0) == 0);
    CHECK(stem.find('/') == std::string::npos);
  }
  CHECK(eval::file_stem("a b") != eval::file_stem("a  b"));
  CHECK(eval::cites_expected("file:///x/corpus/cold-climate-operation.md", "Cold climate",
                             "cold-climate-operation.md"));
  CHECK(eval::cites_expected("file:///x/corpus/my%20notes.md", "", "my notes.md"));
  CHECK_FALSE(eval::cites_expected("file:///x/corpus/not-cold-climate-operation.md", "",
                                   "cold-climate-operation.md"));
  CHECK(eval::cites_expected("https://example.org/a/page.html?x=1", "", "page.html"));
  CHECK(eval::cites_expected("https://example.org/a", "", "https://example.org/a"));
  CHECK(eval::cites_expected("", "Glossary", "Glossary"));
  CHECK_FALSE(eval::cites_expected("", "", ""));
}

TEST_CASE("eval result: a research's packets are tallied") {
  eval::packet_tally t;
  t.add(packet_of({{"type", "search_tool_documents_delta"},
                   {"documents",
                    {{{"document_id", "web1"}, {"is_internet", true}},
                     {{"document_id", "local1"}, {"is_internet", false}},
                     {{"document_id", "local1"}, {"is_internet", false}},
                     {{"no_id", 1}}}}}));
  t.add(packet_of({{"type", "open_url_documents"},
                   {"documents", {{{"document_id", "web1"}, {"is_internet", true}}}}}));
  t.add(packet_of(
    {{"type", "usage"}, {"input_tokens", 100}, {"output_tokens", 20}, {"cost_usd", 0.5}}));
  t.add(packet_of({{"type", "usage"}, {"input_tokens", 1}, {"output_tokens", 2}}));
  t.add(packet_of({{"type", "error"}, {"message", "agent 2 failed"}}));
  t.add(packet_of({{"type", "verification_summary"},
                   {"claims", 4},
                   {"supported", 3},
                   {"unsupported", 1},
                   {"unverified", 0},
                   {"rate", 0.75}}));
  t.add(packet_of({{"type", "message_delta"}, {"content", "x"}}));
  t.add(packet_of(json::array()));
  CHECK(t.found.size() == 2);
  CHECK(t.read == std::set<std::string>{"local1", "web1"});
  CHECK(t.model_calls == 2);
  CHECK(t.input_tokens == 101);
  CHECK(t.output_tokens == 22);
  CHECK(t.cost_usd == doctest::Approx(0.5));
  CHECK(t.errors == std::vector<std::string>{"agent 2 failed"});
  CHECK(t.verification["supported"] == 3);
}

TEST_CASE("eval result: citation markers are counted") {
  auto c = eval::count_citations("A [[1]](file:///a). B [[2]](x) [[1]](y). C [3, 4]. "
                                 "D [2019 is a year] E [] F [5");
  CHECK(c.markers == 5);
  CHECK(c.distinct == 4);
  CHECK(eval::count_citations("").markers == 0);
}

TEST_CASE("eval result: the JSON of a question and its article line") {
  auto qs = good("{\"id\": 7, \"prompt\": \"Q?\", \"topic\": \"T\", "
                 "\"must_cite\": [\"d1.md\", \"d9.md\"]}");
  auto r = completed(qs[0], 3, 2, 0.8, 1000, 4.5);
  CHECK(r["id"] == 7);
  CHECK(r["status"] == "completed");
  CHECK(r["sources_read"] == 3);
  CHECK(r["citations"] == 2);
  CHECK(r["unique_cited_sources"] == 2);
  CHECK(r["claims"]["verified"] == 10);
  CHECK(r["claims"]["supported"] == 8);
  CHECK(r["tokens"]["total"] == 1000);
  CHECK(r["must_cite"]["cited"] == json::array({"d1.md"}));
  CHECK(r["must_cite"]["missing"] == json::array({"d9.md"}));
  CHECK(r["must_cite"]["recall"] == doctest::Approx(0.5));
  CHECK(eval::is_finished(r, qs[0]));
  auto line = json::parse(eval::article_line(r));
  CHECK(line["id"] == 7);
  CHECK(line["prompt"] == "Q?");
  CHECK(line["topic"] == "T");
  CHECK(line["article"].get<std::string>().rfind("# Q?", 0) == 0);
  // Not finished: failed, or another question's.
  auto failed = r;
  failed["status"] = "failed";
  CHECK_FALSE(eval::is_finished(failed, qs[0]));
  auto other = good("{\"id\": 7, \"prompt\": \"Another?\"}");
  CHECK_FALSE(eval::is_finished(r, other[0]));
  // Without verification, claims are null.
  eval::finished_research plain;
  plain.status = "failed";
  plain.failure = "no source";
  auto f = eval::result_json(qs[0], plain, eval::packet_tally{});
  CHECK(f["claims"].is_null());
  CHECK(f["failure"] == "no source");
  CHECK(f["session"].is_null());
}

TEST_CASE("eval run folder: new, refused without --resume, resumed, other sets refused") {
  quarry::test::temp_dir home;
  auto dir = home.file("runs/first");
  auto qs = good("{\"id\": 1, \"prompt\": \"A?\"}\n{\"id\": 2, \"prompt\": \"B?\"}\n");
  eval::run_options opts;
  opts.strategy = "orchestrator";
  json extra = {{"started_at", "t0"}};
  {
    auto opened = eval::open_for_run(dir, qs, opts, false, false, extra);
    REQUIRE(std::holds_alternative<eval::run_folder>(opened));
    auto& folder = std::get<eval::run_folder>(opened);
    CHECK(folder.results.empty());
    auto manifest = json::parse(read_file(dir + "/run.json"));
    CHECK(manifest["format"] == eval::run_format);
    CHECK(manifest["questions"].size() == 2);
    CHECK(manifest["options"]["strategy"] == "orchestrator");
    // Another process cannot run it at once.
    auto twice = eval::open_for_run(dir, qs, opts, false, true, extra);
    REQUIRE(std::holds_alternative<std::string>(twice));
    CHECK(std::get<std::string>(twice).find("another process runs the evaluation")
          != std::string::npos);
    REQUIRE_FALSE(eval::write_result(folder, qs[0], completed(qs[0], 1, 1, 1.0, 10, 1.0)));
    REQUIRE_FALSE(eval::write_articles(folder));
    CHECK(read_file(dir + "/articles.jsonl") == eval::articles_text(folder));
    auto articles = eval::articles_text(folder);
    CHECK(std::count(articles.begin(), articles.end(), '\n') == 1);
  }
  // Without --resume: refused, nothing changed.
  auto before = read_file(dir + "/results/1.json");
  auto again = eval::open_for_run(dir, qs, opts, false, false, extra);
  REQUIRE(std::holds_alternative<std::string>(again));
  CHECK(std::get<std::string>(again).find("holds an evaluation run already (1 of 2 questions "
                                          "done): pass --resume")
        != std::string::npos);
  CHECK(read_file(dir + "/results/1.json") == before);
  // Resumed with the same set in another order: the result is there.
  auto swapped = good("{\"id\": 2, \"prompt\": \"B?\"}\n{\"id\": 1, \"prompt\": \"A?\"}\n");
  {
    auto resumed = eval::open_for_run(dir, swapped, eval::run_options{}, false, true, extra);
    REQUIRE(std::holds_alternative<eval::run_folder>(resumed));
    auto& folder = std::get<eval::run_folder>(resumed);
    CHECK(folder.results.count("1") == 1);
    CHECK(folder.options.strategy == "orchestrator");
    CHECK(folder.questions[0].key == "1");
  }
  // Another prompt, another id, a missing id, other options: refused.
  for (const auto& refused : std::vector<std::pair<std::string, std::string>>{
         {"{\"id\": 1, \"prompt\": \"A?\"}\n{\"id\": 2, \"prompt\": \"C?\"}\n",
          "the prompt of id 2 differs"},
         {"{\"id\": 1, \"prompt\": \"A?\"}\n{\"id\": 3, \"prompt\": \"B?\"}\n",
          "id 3 (line 2 of the questions file) is not in it"},
         {"{\"id\": 1, \"prompt\": \"A?\"}\n", "its id 2 is not in the questions file"}}) {
    // Named, not bound: CAPTURE cannot take a structured binding (clang).
    const auto& text = refused.first;
    const auto& why = refused.second;
    CAPTURE(text);
    auto other = eval::open_for_run(dir, good(text), eval::run_options{}, false, true, extra);
    REQUIRE(std::holds_alternative<std::string>(other));
    CHECK(std::get<std::string>(other).find("holds a run of another question set (" + why)
          != std::string::npos);
  }
  eval::run_options reflective;
  reflective.strategy = "reflective";
  auto mixed = eval::open_for_run(dir, qs, reflective, false, true, extra);
  REQUIRE(std::holds_alternative<std::string>(mixed));
  CHECK(std::get<std::string>(mixed).find("--strategy reflective (the run has orchestrator)")
        != std::string::npos);
  eval::run_options unverified;
  unverified.verify = "off";
  auto no_verify = eval::open_for_run(dir, qs, unverified, true, true, extra);
  REQUIRE(std::holds_alternative<std::string>(no_verify));
  CHECK(std::get<std::string>(no_verify).find("--no-verify (the run has verify on)")
        != std::string::npos);
  CHECK(read_file(dir + "/results/1.json") == before);
}

TEST_CASE("eval run folder: a folder of other files, a file and an unwritable folder are refused") {
  quarry::test::temp_dir home;
  auto qs = good("{\"id\": 1, \"prompt\": \"A?\"}");
  home.write("busy/notes.txt", "mine");
  auto busy = eval::open_for_run(home.file("busy"), qs, {}, false, false, {});
  REQUIRE(std::holds_alternative<std::string>(busy));
  CHECK(std::get<std::string>(busy).find("holds other files (notes.txt) and no evaluation run")
        != std::string::npos);
  CHECK(read_file(home.file("busy/notes.txt")) == "mine");
  home.write("plain", "x");
  auto file = eval::open_for_run(home.file("plain"), qs, {}, false, false, {});
  REQUIRE(std::holds_alternative<std::string>(file));
  CHECK(std::get<std::string>(file) == home.file("plain") + " is not a folder");
  if (::geteuid() != 0) {
    std::filesystem::create_directories(home.file("locked"));
    ::chmod(home.file("locked").c_str(), 0555);
    auto locked = eval::open_for_run(home.file("locked/run"), qs, {}, false, false, {});
    REQUIRE(std::holds_alternative<std::string>(locked));
    CHECK(std::get<std::string>(locked).find("cannot be created") != std::string::npos);
    ::chmod(home.file("locked").c_str(), 0755);
  }
  auto none = eval::open_for_report(home.file("busy"));
  REQUIRE(std::holds_alternative<std::string>(none));
  CHECK(std::get<std::string>(none).find("holds no evaluation run (no run.json)")
        != std::string::npos);
}

TEST_CASE("eval report: the table, the difference of two runs and the HTML page") {
  quarry::test::temp_dir home;
  auto qs = good("{\"id\": 1, \"prompt\": \"A?\", \"must_cite\": [\"d1.md\"]}\n"
                 "{\"id\": 2, \"prompt\": \"B?\"}\n"
                 "{\"id\": \"x<y>\", \"prompt\": \"C?\"}\n");
  auto make = [&](const std::string& name, int read1, int read2, bool second_failed) {
    auto opened = eval::open_for_run(home.file(name), qs, {}, false, false, {});
    REQUIRE(std::holds_alternative<eval::run_folder>(opened));
    auto& folder = std::get<eval::run_folder>(opened);
    REQUIRE_FALSE(eval::write_result(folder, qs[0], completed(qs[0], read1, 2, 0.5, 1000, 2.0)));
    auto second = completed(qs[1], read2, 4, 1.0, 3000, 4.0);
    if (second_failed)
      second["status"] = "failed";
    REQUIRE_FALSE(eval::write_result(folder, qs[1], second));
    auto report = eval::open_for_report(home.file(name));
    REQUIRE(std::holds_alternative<eval::run_folder>(report));
    return eval::summarize(std::get<eval::run_folder>(report));
  };
  auto a = make("a", 4, 6, false);
  auto b = make("b", 7, 6, true);
  CHECK(a.completed == 2);
  CHECK(a.not_run == 1);
  CHECK(b.completed == 1);
  CHECK(b.failed == 1);
  CHECK(eval::values_of(a, "read") == std::vector<double>{4, 6});
  CHECK(eval::mean_of(eval::values_of(a, "read")) == doctest::Approx(5));
  CHECK(eval::median_of({3, 1, 2, 10}) == doctest::Approx(2.5));
  CHECK(eval::values_of(a, "must_cite_pct") == std::vector<double>{100});
  auto table = eval::table_text(a);
  MESSAGE(table);
  CHECK(table.find("3 questions, 2 completed, 0 failed, 1 not run") != std::string::npos);
  CHECK(table.find("x<y>") != std::string::npos);
  CHECK(table.find("not run") != std::string::npos);
  CHECK(table.find("mean") != std::string::npos);
  CHECK(table.find("4,000") != std::string::npos); // total tokens
  auto diff = eval::diff_text(a, b);
  MESSAGE(diff);
  // Question 1: 3 more sources read; question 2 failed in the second run.
  CHECK(diff.find("completed -> failed") != std::string::npos);
  std::istringstream lines{diff};
  bool q1 = false;
  bool overall_read = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("1 ", 0) == 0 && line.find("completed") != std::string::npos) {
      q1 = true;
      CHECK(line.find("+3") != std::string::npos);
    }
    if (line.rfind("read ", 0) == 0) {
      overall_read = true;
      // Over the one question completed in both: 4.0 -> 7.0, up 1, down 0.
      CHECK(line.find("4.0") != std::string::npos);
      CHECK(line.find("7.0") != std::string::npos);
      CHECK(line.find("+3.0") != std::string::npos);
    }
  }
  CHECK(q1);
  CHECK(overall_read);
  CHECK(diff.find("means over the 1 questions completed in both runs; completed: 2 of 3 -> 1 of "
                  "3")
        != std::string::npos);
  auto page = eval::html_page({a, b});
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<svg") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK(page.find("x&lt;y&gt;") != std::string::npos);
  CHECK(page.find("x<y>") == std::string::npos);
  CHECK(page.find("id=\"chart-read\"") != std::string::npos);
  // One dot per completed question and run in the chart of sources read.
  auto chart = page.substr(page.find("id=\"chart-read\""));
  chart = chart.substr(0, chart.find("</section>"));
  size_t dots = 0;
  for (auto at = chart.find("<circle"); at != std::string::npos; at = chart.find("<circle", at + 1))
    ++dots;
  CHECK(dots == 3);
  CHECK(eval::html_escape("<a href='x'>&\"") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
}

TEST_CASE("eval progress: the bar line") {
  eval::progress_counts p;
  p.total = 10;
  p.skipped = 2;
  p.done = 2;
  p.failed = 1;
  p.running = 2;
  auto line = eval::format_progress(p, std::chrono::seconds{63}, 0);
  CHECK(line
        == "eval [############                  ] 4 of 10 (2 earlier), 2 running, 1 failed, "
           "1 min 3 s, about 3 min 9 s left");
  // Narrow: the bar goes before the text is cut.
  auto narrow = eval::format_progress(p, std::chrono::seconds{63}, 40);
  CHECK(narrow.size() <= 40);
  CHECK(narrow.find('[') == std::string::npos);
  eval::progress_counts none;
  none.total = 3;
  CHECK(eval::format_progress(none, std::chrono::seconds{0}, 0)
        == "eval [                              ] 0 of 3, 0 s");
}

} // namespace eval_test
