// Fake-LLM scripts for research sessions: rules that recognise each step of
// the research loop by its system prompt, and readers of what the fake
// server received. Shared by the in-process and the command-line tests.

#pragma once

#include "support/fake_llm_server.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace quarry::test::script {

// Rules that recognise each step of the loop by its system prompt.
inline constexpr const char* orchestrator_marker = "You are the orchestrator";
inline constexpr const char* agent_marker = "careful, precise research agent";
inline constexpr const char* agent_report_marker = "finished its research";
inline constexpr const char* final_marker = "You write the final answer";
inline constexpr const char* plan_marker = "You are the planner";
inline constexpr const char* clarify_marker = "clarification step";

inline nlohmann::json rule(const char* marker, nlohmann::json respond, int times = 0) {
  nlohmann::json r{{"match", {{"system_contains", marker}}}, {"respond", respond}};
  if (times > 0)
    r["match"]["times"] = times;
  return r;
}

inline nlohmann::json calls(std::vector<std::pair<std::string, nlohmann::json>> xs) {
  auto arr = nlohmann::json::array();
  for (auto& [name, args] : xs)
    arr.push_back({{"name", name}, {"arguments", args}});
  return {{"tool_calls", arr}};
}

/// A research agent that has search results (documents) in its messages
/// writes its report.
inline nlohmann::json report_after_search() {
  return {{"match", {{"system_contains", agent_marker}, {"message_contains", "\"document\""}}},
          {"respond", calls({{"generate_report", nlohmann::json::object()}})}};
}

// The research agents search once, then report; their report cites [1] [2].
inline std::vector<nlohmann::json> agent_rules() {
  return {report_after_search(),
          rule(agent_marker,
               calls({{"internal_search", {{"queries", {"heat pump defrost cold"}}}}})),
          rule(agent_report_marker, {{"text", "Heat pump efficiency falls as the outdoor air gets "
                                              "colder [1]. Defrost cycles remove frost from the "
                                              "outdoor coil [2]."}})};
}

/// One research round for scripts that test something else: the
/// orchestrator sends one agent once, which searches the example corpus and
/// reports (a research must read a source to succeed). Put these before the
/// script's other orchestrator rules.
inline std::vector<nlohmann::json> one_agent_round() {
  std::vector<nlohmann::json> out;
  out.push_back(rule(orchestrator_marker,
                     calls({{"research_agent", {{"task", "Explain defrost cycles."}}}}), 1));
  for (auto& r : agent_rules())
    out.push_back(r);
  return out;
}

/// `rules` with @ref one_agent_round before its first orchestrator rule.
inline nlohmann::json researched(const nlohmann::json& rules) {
  auto out = nlohmann::json::array();
  bool added = false;
  for (const auto& r : rules) {
    auto sys = r.value("match", nlohmann::json::object()).value("system_contains", "");
    if (!added && sys == orchestrator_marker) {
      for (auto& x : one_agent_round())
        out.push_back(x);
      added = true;
    }
    out.push_back(r);
  }
  return out;
}

/// A research in one turn of `agents` research_agent calls ("Task 0", ...),
/// then the report: plan, orchestrator, every agent's rules, final answer.
inline nlohmann::json parallel_agents_script(int agents) {
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  std::vector<std::pair<std::string, nlohmann::json>> xs;
  for (int i = 0; i < agents; ++i)
    xs.emplace_back("research_agent", nlohmann::json{{"task", "Task " + std::to_string(i)}});
  rules.push_back(rule(orchestrator_marker, calls(xs), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Done [1]."}}));
  return rules;
}

inline size_t requests_with(const test::fake_llm_server& server, const char* marker) {
  size_t n = 0;
  for (const auto& r : server.requests())
    if (r.raw_body.find(marker) != std::string::npos
        && r.body["messages"][0]["content"].get<std::string>().find(marker) != std::string::npos)
      ++n;
  return n;
}

inline std::vector<nlohmann::json> requests_of(const test::fake_llm_server& server,
                                               const char* marker) {
  std::vector<nlohmann::json> out;
  for (const auto& r : server.requests())
    if (r.body.is_object() && r.body.contains("messages")
        && r.body["messages"][0]["content"].get<std::string>().find(marker) != std::string::npos)
      out.push_back(r.body);
  return out;
}

/// A research of two agents in one round, then the report; with
/// `think_first`, a think call between the round and the report.
inline nlohmann::json two_agent_script(bool think_first = false) {
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Efficiency\n2. Defrost"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Why efficiency falls in the cold."}}},
                              {"research_agent", {{"task", "How defrost cycles work."}}}}),
                       1));
  if (think_first)
    rules.push_back(rule(orchestrator_marker,
                         calls({{"think_tool", {{"reasoning", "Both parts are covered now."}}}}),
                         1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Cold air lowers efficiency [1]. "
                                               "Defrosting clears the coil [2]."}}));
  return rules;
}

/// `rules` with the first request whose system prompt holds `marker` held
/// open and never answered (the phase a test stops or kills a process in).
inline nlohmann::json hanging_at(nlohmann::json rules, const char* marker) {
  nlohmann::json hang{{"match", {{"system_contains", marker}}},
                      {"respond", {{"text", "never"}}},
                      {"stall_after_bytes", 0}};
  auto out = nlohmann::json::array({hang});
  for (auto& r : rules)
    out.push_back(r);
  return out;
}

} // namespace quarry::test::script
