// The tools the research loop itself offers to models (Onyx's "mock tools"):
// generate_plan, research_agent, generate_report and think_tool.
#pragma once

#include "quarry/sdk/types.hpp"

#include <string>
#include <vector>

namespace quarry::core {

/// Offered at the clarification step: calling it means "no questions".
sdk::tool_definition generate_plan_tool();

/// Offered to the orchestrator: starts a research agent on `task`.
sdk::tool_definition research_agent_tool();

/// Offered to the orchestrator and to research agents. Agents get their own
/// description (Onyx gives them the orchestrator's).
sdk::tool_definition generate_report_tool(bool for_agent);

/// Offered to models without native reasoning; `for_agent` selects the
/// research agent's description.
sdk::tool_definition think_tool(bool for_agent);

/// The name of the search tool over the files a person attached to one
/// research (the server's uploads, app/upload_files.hpp). Strategies search
/// it alongside their main search tool: the person chose those files for
/// this question.
inline constexpr const char* attached_files_tool_name = "session_files";

/// The names of the tools Quarry's research loop offers models itself (the
/// four above, the structured steps of the reflective strategy and of
/// verification: classify_question, search_queries, write_plan, reflect,
/// judge_claims, and session_files). A configured tool may not take one of
/// them: the model could not tell the two apart.
const std::vector<std::string>& reserved_tool_names();

/// Joins tool names for prompts: "a", "a and b", "a, b, and c".
std::string join_tool_names(const std::vector<std::string>& names);

/// The tool result of a think_tool call.
inline constexpr const char* think_acknowledgement = "Acknowledged, please continue.";

} // namespace quarry::core
