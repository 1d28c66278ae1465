// Scripted researches through `quarry research --json`, compared with the
// transcripts kept in tests/golden/: the exit code, the standard error, the
// report written with --out and every packet. Both strategies, the offline
// extractive provider and the fake OpenAI server (reasoning, parallel
// agents, think calls, verification, clarification, failure). A change to
// the session's machinery must leave these byte for byte as they were; a
// change meant to alter them rewrites them with QUARRY_UPDATE_GOLDEN=1 and
// shows the difference in review.
//
// The transcript leaves out only what differs from run to run: the session
// id, `seq` (agents running at once interleave their packets, so packets are
// grouped by placement, each group in the order it was sent), the time
// before the answer (`pre_answer_processing_seconds`) and the folders of
// this checkout and of the test's home.

#include "research_script.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include "quarry/core/prompts.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <tuple>

namespace golden_test {

using namespace quarry;
using namespace quarry::test::script;

namespace {

constexpr const char* heat_pump_question
  = "Why does a heat pump's efficiency drop in cold weather, and what do manufacturers do "
    "about it?";

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty())
    return text;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

struct golden_fixture {
  test::temp_dir home;

  /// What differs between checkouts and runs, made fixed.
  std::string stable(std::string text) const {
    text = replace_all(std::move(text), home.path(), "<home>");
    text = replace_all(std::move(text), QUARRY_SOURCE_DIR, "<source>");
    static const std::regex session_id{"q[0-9a-f]{16}"};
    static const std::regex loopback_port{"127\\.0\\.0\\.1:[0-9]+"};
    text = std::regex_replace(text, session_id, "<session>");
    return std::regex_replace(text, loopback_port, "127.0.0.1:<port>");
  }

  /// One line a packet, `turn.tab.sub type {fields}`, grouped by placement;
  /// a run of deltas of one type and placement is one line holding the list
  /// of their pieces, `turn.tab.sub type* ["piece", ...]` (each piece as it
  /// was sent).
  std::string packets(const std::string& out) const {
    struct line {
      std::tuple<int64_t, int64_t, int64_t> at;
      size_t order;
      std::string head;
      std::string piece;
      std::string fields;
    };
    std::vector<line> lines;
    std::istringstream in{out};
    for (std::string raw; std::getline(in, raw);) {
      auto p = nlohmann::json::parse(raw, nullptr, false);
      REQUIRE_MESSAGE(p.is_object(), "not a packet: ", raw);
      const auto& where = p["placement"];
      auto sub = where["sub_turn_index"].is_null() ? int64_t{-1}
                                                   : where["sub_turn_index"].get<int64_t>();
      auto obj = p["obj"];
      auto type = obj.value("type", std::string{"?"});
      obj.erase("type");
      obj.erase("pre_answer_processing_seconds");
      auto turn = where["turn_index"].get<int64_t>();
      auto tab = where["tab_index"].get<int64_t>();
      auto head = std::to_string(turn) + "." + std::to_string(tab) + "."
                  + (sub < 0 ? std::string{"-"} : std::to_string(sub)) + " " + type;
      // A delta holds one text field: its piece.
      std::string piece;
      if (obj.size() == 1 && obj.begin().value().is_string() && type.size() > 6
          && type.compare(type.size() - 6, 6, "_delta") == 0)
        piece = nlohmann::json(obj.begin().key() + "=" + obj.begin().value().get<std::string>())
                  .dump();
      lines.push_back({{turn, tab, sub}, lines.size(), head, std::move(piece), obj.dump()});
    }
    std::stable_sort(lines.begin(), lines.end(),
                     [](const line& a, const line& b) { return a.at < b.at; });
    std::string text;
    for (size_t i = 0; i < lines.size();) {
      const auto& l = lines[i];
      if (l.piece.empty()) {
        text += l.head + " " + l.fields + "\n";
        ++i;
        continue;
      }
      text += l.head + "* [" + l.piece;
      for (++i; i < lines.size() && lines[i].at == l.at && lines[i].head == l.head
                && !lines[i].piece.empty();
           ++i)
        text += "," + lines[i].piece;
      text += "]\n";
    }
    return stable(std::move(text));
  }

  /// The environment of a research against `server`. The folders of this
  /// checkout and of the test's home reach the model inside `file://` URLs,
  /// and today's date in the prompts ("Today is Tuesday December 01, 2026":
  /// its length changes from day to day): the server leaves them out of its
  /// token counts, which the transcript keeps. Yesterday and tomorrow too,
  /// for a run across midnight.
  std::vector<std::pair<std::string, std::optional<std::string>>>
  openai_at(test::fake_llm_server& server) const {
    server.uncounted(QUARRY_SOURCE_DIR);
    server.uncounted(home.path());
    auto now = std::chrono::system_clock::now();
    for (auto day : {-24, 0, 24})
      server.uncounted(core::prompt_date(now + std::chrono::hours{day}));
    return {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
  }

  /// Runs `quarry research --json --out FILE args...` and returns its
  /// transcript.
  std::string transcript(std::vector<std::string> args,
                         std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    auto report = home.file("report.md");
    std::vector<std::string> argv{
      QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "research", "--json", "--out", report};
    argv.insert(argv.end(), args.begin(), args.end());
    auto res = test::run_process(argv, test::isolated_quarry_options(home.path(), env));
    std::string text = "exit: " + std::to_string(res.exit_code) + "\n";
    text += "--- stderr\n" + stable(res.err);
    text += "--- report\n" + stable(read_file(report));
    text += "\n--- packets\n" + packets(res.out);
    return text;
  }
};

/// Compares `got` with tests/golden/`name`.txt (or writes it with
/// QUARRY_UPDATE_GOLDEN=1), naming the first line that differs.
void check_golden(const std::string& name, const std::string& got) {
  auto path = std::string{QUARRY_SOURCE_DIR} + "/tests/golden/" + name + ".txt";
  if (const char* update = std::getenv("QUARRY_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out << got;
    REQUIRE(out.good());
    return;
  }
  auto want = read_file(path);
  REQUIRE_MESSAGE(!want.empty(), "no transcript at tests/golden/", name,
                  ".txt (QUARRY_UPDATE_GOLDEN=1 writes it)");
  if (got == want)
    return;
  std::istringstream a{want};
  std::istringstream b{got};
  std::string la;
  std::string lb;
  for (int n = 1;; ++n) {
    bool more_a = static_cast<bool>(std::getline(a, la));
    bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b)
      break;
    if (la != lb || more_a != more_b) {
      FAIL_CHECK("tests/golden/" << name << ".txt differs at line " << n
                                 << "\n  kept: " << (more_a ? la : "(end)")
                                 << "\n  now:  " << (more_b ? lb : "(end)"));
      return;
    }
  }
  FAIL_CHECK("tests/golden/" << name << ".txt differs (line ends)");
}

} // namespace

TEST_CASE_FIXTURE(golden_fixture, "golden: the orchestrator strategy offline") {
  check_golden("orchestrator_offline", transcript({heat_pump_question}));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: the reflective strategy offline at medium depth, "
                                  "verified") {
  check_golden(
    "reflective_offline_medium",
    transcript({heat_pump_question, "--strategy", "reflective", "--depth", "medium", "--verify"}));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: the reflective strategy offline at light depth") {
  check_golden("reflective_offline_light",
               transcript({heat_pump_question, "--strategy", "reflective", "--depth", "light"}));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: the reflective strategy's web_search and simple "
                                  "modes offline") {
  check_golden("reflective_offline_web_search", transcript({heat_pump_question, "--strategy",
                                                            "reflective", "--mode", "web_search"}));
  check_golden("reflective_offline_simple",
               transcript({heat_pump_question, "--strategy", "reflective", "--mode", "simple"}));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: two parallel agents, a think call and a report, "
                                  "every answer with reasoning") {
  test::fake_llm_server server;
  auto rules = two_agent_script(true);
  for (auto& r : rules)
    r["respond"]["reasoning"] = "Thinking about the next step.";
  REQUIRE_FALSE(server.script(rules));
  check_golden("orchestrator_scripted_reasoning",
               transcript({"How do heat pumps cope with cold weather?", "--no-clarify", "--verify"},
                          openai_at(server)));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: clarifying questions") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({rule(clarify_marker, {{"text", "1. Which climate zone?"}})})));
  check_golden("orchestrator_scripted_clarification",
               transcript({"heat pumps?"}, openai_at(server)));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: an orchestrator that calls no tool twice fails") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({rule(plan_marker, {{"text", "1. One step"}}),
                           rule(orchestrator_marker, {{"text", "I would research this."}})})));
  check_golden("orchestrator_scripted_no_tool",
               transcript({"How do heat pumps cope with cold weather?", "--no-clarify"},
                          openai_at(server)));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: a final report the model cannot write is "
                                  "assembled from the findings") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Defrost"}}));
  for (auto& r : one_agent_round())
    rules.push_back(r);
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(rule(final_marker, {{"text", " "}}));
  REQUIRE_FALSE(server.script(rules));
  check_golden("orchestrator_scripted_fallback",
               transcript({"How do heat pumps cope with cold weather?", "--no-clarify"},
                          openai_at(server)));
}

TEST_CASE_FIXTURE(golden_fixture, "golden: the reflective strategy scripted at light depth, "
                                  "every answer with reasoning, a repair and a reflection") {
  auto call = [](const std::string& name, const nlohmann::json& args) {
    return nlohmann::json{{"tool_calls", {{{"name", name}, {"arguments", args.dump()}}}}};
  };
  nlohmann::json steps = nlohmann::json::array();
  for (const char* t : {"Efficiency in the cold", "Defrost cycles"})
    steps.push_back(
      {{"title", t}, {"description", std::string{t} + " in detail."}, {"needs_search", true}});
  test::fake_llm_server server;
  auto rules = nlohmann::json::array(
    {rule("You are the coordinator of a research assistant",
          call("classify_question", {{"complexity", "moderate"},
                                     {"is_ambiguous", false},
                                     {"recommended_depth", "light"},
                                     {"reasoning", "Scripted."}})),
     // The background investigator's queries (the first request), 2 to 3.
     rule("You write web search queries for a research assistant",
          call("search_queries", {{"queries", {"heat pump defrost", "heat pump cold climate"}}}),
          1),
     rule("You write web search queries for a research assistant",
          call("search_queries", {{"queries", {"heat pump defrost"}}})),
     // The first plan is unusable (no steps): repaired once.
     rule("You are the planner of a research assistant",
          call("write_plan", {{"title", "Cold weather"}, {"thought", "Scripted."}}), 1),
     rule("You are the planner of a research assistant",
          call("write_plan",
               {{"title", "Cold weather"}, {"thought", "Scripted."}, {"steps", steps}})),
     rule("You are a researcher working on one step",
          {{"text", "Defrost cycles remove frost from the coil [1]."}}),
     rule("You are the reflector of a research assistant",
          call("reflect", {{"decision", "CONTINUE"},
                           {"reasoning", "Scripted CONTINUE."},
                           {"suggested_changes", nlohmann::json::array()}})),
     rule("You write the final answer of a research task",
          {{"text", "Heat pumps defrost their coils [1]."}})});
  for (auto& r : rules)
    r["respond"]["reasoning"] = "Weighing the step.";
  REQUIRE_FALSE(server.script(rules));
  check_golden("reflective_scripted_reasoning",
               transcript({"How do heat pumps cope with cold weather?", "--no-clarify",
                           "--strategy", "reflective", "--depth", "light", "--verify"},
                          openai_at(server)));
}

} // namespace golden_test
