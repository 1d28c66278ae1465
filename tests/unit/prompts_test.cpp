// Unit tests of the prompt templates (prompts/, compiled in) and their
// rendering: every template's variables, missing variables, overrides, the
// tool names and the optional guidance sections.

#include "quarry/core/prompts.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <regex>
#include <set>

namespace prompts_test {

using namespace quarry;
using core::prompt_library;
using core::prompt_vars;

namespace {

std::string ok(const std::variant<std::string, core::prompt_error>& x) {
  if (auto* err = std::get_if<core::prompt_error>(&x))
    FAIL_CHECK(err->message);
  return std::holds_alternative<std::string>(x) ? std::get<std::string>(x) : std::string{};
}

// Values for every variable any template uses.
prompt_vars all_vars() {
  return {{"current_datetime", "Sunday November 22, 2026"},
          {"internal_search_clarification_guidance", ""},
          {"internal_search_research_task_guidance", ""},
          {"internal_search_tool_guidance", ""},
          {"web_search_tool_guidance", ""},
          {"open_url_tool_guidance", ""},
          {"available_tools", "web_search, open_url"},
          {"current_cycle_count", "2"},
          {"max_cycles", "8"},
          {"max_parallel_agents", "3"},
          {"max_plan_steps", "6"},
          {"research_plan", "1. First step\n2. Second step"},
          {"research_topic", "heat pumps in cold climates"},
          {"web_search_tool", "web_search"},
          {"internal_search_tool", "internal_search"},
          {"open_url_tool", "open_url"},
          {"max_clarifying_questions", "3"},
          {"query_count", "2 to 3"},
          {"step_range", "3 to 6"},
          {"depth", "medium"},
          {"min_steps", "3"}};
}

} // namespace

TEST_CASE("prompts: every template uses exactly its documented variables") {
  auto lib = prompt_library::embedded();
  const std::map<std::string, std::set<std::string>> expected = {
    {"clarification", {"current_datetime", "internal_search_clarification_guidance"}},
    {"internal_search_clarification_guidance", {}},
    {"research_plan", {"current_datetime", "max_plan_steps"}},
    {"research_plan_reminder", {"max_plan_steps"}},
    {"orchestrator",
     {"current_datetime", "current_cycle_count", "max_cycles",
      "internal_search_research_task_guidance", "max_parallel_agents", "research_plan"}},
    {"orchestrator_reasoning",
     {"current_datetime", "current_cycle_count", "max_cycles",
      "internal_search_research_task_guidance", "max_parallel_agents", "research_plan"}},
    {"internal_search_research_task_guidance", {}},
    {"first_cycle_reminder", {}},
    {"research_agent",
     {"available_tools", "current_datetime", "current_cycle_count", "max_cycles",
      "internal_search_tool_guidance", "web_search_tool_guidance", "open_url_tool_guidance"}},
    {"research_agent_reasoning",
     {"available_tools", "current_datetime", "current_cycle_count", "max_cycles",
      "internal_search_tool_guidance", "web_search_tool_guidance", "open_url_tool_guidance"}},
    // The guidance names the tools as the session configured them.
    {"internal_search_tool_guidance", {"internal_search_tool"}},
    {"web_search_tool_guidance", {"web_search_tool"}},
    {"open_url_tool_guidance", {"open_url_tool", "web_search_tool"}},
    {"open_url_tool_guidance_reasoning", {"open_url_tool", "web_search_tool"}},
    {"open_url_reminder", {"open_url_tool"}},
    {"research_report", {}},
    {"user_report_query", {"research_topic"}},
    {"final_report", {"current_datetime"}},
    {"user_final_report_query", {"research_plan"}},
    // The reflective strategy and verification.
    {"reflective_coordinator", {"current_datetime", "max_clarifying_questions"}},
    {"reflective_queries", {"current_datetime", "query_count"}},
    {"reflective_planner", {"current_datetime", "step_range", "depth"}},
    {"reflective_observation", {"current_datetime"}},
    {"reflective_reflector", {"current_datetime", "depth", "min_steps"}},
    {"reflective_synthesizer", {"current_datetime"}},
    {"reflective_simple", {"current_datetime"}},
    {"verification_judge", {}},
  };
  std::set<std::string> names;
  for (const auto& n : lib.names())
    names.insert(n);
  std::set<std::string> want_names;
  for (const auto& [n, _] : expected)
    want_names.insert(n);
  CHECK(names == want_names);
  for (const auto& name_vars : expected) {
    const auto& name = name_vars.first;
    const auto& vars = name_vars.second;
    CAPTURE(name);
    const auto* text = lib.find(name);
    REQUIRE(text != nullptr);
    auto got = core::template_variables(*text);
    CHECK(std::set<std::string>(got.begin(), got.end()) == vars);
    auto rendered = ok(lib.render(name, all_vars()));
    CHECK_FALSE(rendered.empty());
    // No placeholder survives rendering.
    CHECK(core::template_variables(rendered).empty());
    // Real tool names only (Onyx's prompts say `open_urls`).
    CHECK(rendered.find("open_urls") == std::string::npos);
  }
}

TEST_CASE("prompts: a missing variable is an error naming it") {
  auto lib = prompt_library::embedded();
  auto vars = all_vars();
  vars.erase("research_plan");
  auto r = lib.render("orchestrator", vars);
  REQUIRE(std::holds_alternative<core::prompt_error>(r));
  auto msg = std::get<core::prompt_error>(r).message;
  CHECK(msg.find("'orchestrator'") != std::string::npos);
  CHECK(msg.find("'research_plan'") != std::string::npos);
  auto unknown = lib.render("no_such_prompt", vars);
  REQUIRE(std::holds_alternative<core::prompt_error>(unknown));
}

TEST_CASE("prompts: rendering replaces placeholders only") {
  auto r = core::render_template("A {x} and {\"json\": 1} and {Upper} and {y}{x} {",
                                 {{"x", "{y}"}, {"y", "2"}}, "t");
  REQUIRE(std::holds_alternative<std::string>(r));
  // Values are not re-scanned; other braces stay.
  CHECK(std::get<std::string>(r) == "A {y} and {\"json\": 1} and {Upper} and 2{y} {");
  CHECK(core::template_variables("{a}{b}{a} {c d} {e}") == std::vector<std::string>{"a", "b", "e"});
}

TEST_CASE("prompts: tool guidance appears only for configured tools") {
  auto lib = prompt_library::embedded();
  auto vars = all_vars();
  auto bare = ok(lib.render("research_agent", vars));
  CHECK(bare.find("## internal_search") == std::string::npos);
  CHECK(bare.find("## web_search") == std::string::npos);
  vars["internal_search_tool_guidance"] = ok(lib.render("internal_search_tool_guidance", vars));
  vars["web_search_tool_guidance"] = ok(lib.render("web_search_tool_guidance", vars));
  vars["open_url_tool_guidance"] = ok(lib.render("open_url_tool_guidance", vars));
  auto full = ok(lib.render("research_agent", vars));
  // Each section heading starts its own paragraph (Onyx glues the first one
  // to the cycle sentence).
  CHECK(full.find("of 8.\n\n## internal_search\n") != std::string::npos);
  CHECK(full.find("\n\n## web_search\n") != std::string::npos);
  CHECK(full.find("\n\n## open_url\n") != std::string::npos);
  CHECK(full.find("\n\n## think_tool\n") != std::string::npos);
  CHECK(full.find("cycle\n2 of 8.") != std::string::npos);
  auto orch = ok(lib.render("orchestrator", vars));
  CHECK(orch.find("never start more than 3 agents at once") != std::string::npos);
  CHECK(orch.find("You have used 2 of 8 research cycles.") != std::string::npos);
  CHECK(orch.rfind("# Research Plan\n\n1. First step\n2. Second step")
        == orch.size() - std::string{"# Research Plan\n\n1. First step\n2. Second step"}.size());
  auto reasoning = ok(lib.render("orchestrator_reasoning", vars));
  CHECK(reasoning.find("think_tool") == std::string::npos);
  // A search tool of another name is called by that name.
  vars["web_search_tool"] = "company_search";
  auto renamed = ok(lib.render("web_search_tool_guidance", vars));
  CHECK(renamed.find("## company_search\n\nUse `company_search` to") != std::string::npos);
  CHECK(renamed.find("web_search") == std::string::npos);
}

TEST_CASE("prompts: overrides replace built-in templates from a folder") {
  test::temp_dir tmp;
  auto lib = prompt_library::embedded();
  tmp.write("ok/final_report.md", "Write the report. Today is {current_datetime}.\n");
  auto r = lib.load_overrides(tmp.file("ok"));
  REQUIRE(std::holds_alternative<size_t>(r));
  CHECK(std::get<size_t>(r) == 1);
  CHECK(ok(lib.render("final_report", all_vars()))
        == "Write the report. Today is Sunday November 22, 2026.");
  auto before = *lib.find("orchestrator");
  tmp.write("bad/orchestrator.md", "Cycle {current_cycle_count}, user {user_name}\n");
  auto bad = lib.load_overrides(tmp.file("bad"));
  REQUIRE(std::holds_alternative<core::prompt_error>(bad));
  CHECK(std::get<core::prompt_error>(bad).message.find("{user_name}") != std::string::npos);
  CHECK(*lib.find("orchestrator") == before);
  tmp.write("unknown/not_a_prompt.md", "x\n");
  CHECK(std::holds_alternative<core::prompt_error>(lib.load_overrides(tmp.file("unknown"))));
  CHECK(std::holds_alternative<core::prompt_error>(lib.load_overrides(tmp.file("absent"))));
}

TEST_CASE("prompts: the date reads like Onyx's") {
  auto text = core::prompt_date(std::chrono::system_clock::now());
  CHECK(std::regex_match(text, std::regex{"(Sun|Mon|Tues|Wednes|Thurs|Fri|Satur)day "
                                          "[A-Z][a-z]+ [0-3][0-9], 2[0-9]{3}"}));
}

} // namespace prompts_test
