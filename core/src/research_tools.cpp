// Definitions of the research loop's own tools.

#include "quarry/core/research_tools.hpp"

namespace quarry::core {

namespace {

nlohmann::json no_parameters() {
  return {{"type", "object"},
          {"properties", nlohmann::json::object()},
          {"required", nlohmann::json::array()}};
}

} // namespace

sdk::tool_definition generate_plan_tool() {
  return {"generate_plan",
          "No clarification needed, generate a research plan for the user's "
          "query.",
          no_parameters()};
}

sdk::tool_definition research_agent_tool() {
  return {"research_agent",
          "Conduct research on a specific topic.",
          {{"type", "object"},
           {"properties",
            {{"task",
              {{"type", "string"},
               {"description", "The research task to investigate, should be 1-2 descriptive "
                               "sentences outlining the direction of investigation."}}}}},
           {"required", {"task"}}}};
}

sdk::tool_definition generate_report_tool(bool for_agent) {
  if (for_agent)
    return {"generate_report",
            "Generate the final research report from all findings. Should be "
            "called when research is complete.",
            no_parameters()};
  return {"generate_report",
          "Generate the final research report from all of the findings. "
          "Should be called when all aspects of the user's query have been "
          "researched, or maximum cycles are reached.",
          no_parameters()};
}

sdk::tool_definition think_tool(bool for_agent) {
  auto description = for_agent ? "Use this for reasoning between research steps. Think "
                                 "deeply about key results, identify knowledge gaps, and plan "
                                 "next steps."
                               : "Use this for reasoning between research_agent calls and "
                                 "before calling generate_report. Think deeply about key "
                                 "results, identify knowledge gaps, and plan next steps.";
  auto param = for_agent ? "Your chain of thought reasoning, can be as long as "
                           "a lengthy paragraph."
                         : "Your chain of thought reasoning, use paragraph "
                           "format, no lists.";
  return {"think_tool",
          description,
          {{"type", "object"},
           {"properties", {{"reasoning", {{"type", "string"}, {"description", param}}}}},
           {"required", {"reasoning"}}}};
}

std::string join_tool_names(const std::vector<std::string>& names) {
  if (names.empty())
    return {};
  if (names.size() == 1)
    return names[0];
  if (names.size() == 2)
    return names[0] + " and " + names[1];
  std::string out;
  for (size_t i = 0; i + 1 < names.size(); ++i)
    out += names[i] + ", ";
  return out + "and " + names.back();
}

const std::vector<std::string>& reserved_tool_names() {
  static const std::vector<std::string> names{
    "generate_plan",     "research_agent",        "generate_report", "think_tool",
    "classify_question", "search_queries",        "write_plan",      "reflect",
    "judge_claims",      attached_files_tool_name};
  return names;
}

} // namespace quarry::core
