// JSON forms of the SDK's LLM types: for messages between nodes, the CLI's
// --json output, and (later) the store. Round-trips exactly. The from_json
// functions never throw: a missing or wrongly typed member reads as its
// default.

#pragma once

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace quarry::sdk {

void to_json(nlohmann::json& j, const tool_call& x);
void from_json(const nlohmann::json& j, tool_call& x);
void to_json(nlohmann::json& j, const chat_message& x);
void from_json(const nlohmann::json& j, chat_message& x);
void to_json(nlohmann::json& j, const tool_definition& x);
void from_json(const nlohmann::json& j, tool_definition& x);
void to_json(nlohmann::json& j, const usage& x);
void from_json(const nlohmann::json& j, usage& x);
void to_json(nlohmann::json& j, const research_finding& x);
void from_json(const nlohmann::json& j, research_finding& x);
void to_json(nlohmann::json& j, const claim_evidence& x);
void from_json(const nlohmann::json& j, claim_evidence& x);
/// Only the members that differ from the defaults are written.
void to_json(nlohmann::json& j, const research_context& x);
void from_json(const nlohmann::json& j, research_context& x);
/// `research` is written only when it is not empty.
void to_json(nlohmann::json& j, const chat_request& x);
void from_json(const nlohmann::json& j, chat_request& x);
void to_json(nlohmann::json& j, const chat_result& x);
void from_json(const nlohmann::json& j, chat_result& x);
void to_json(nlohmann::json& j, const tool_call_delta& x);
void from_json(const nlohmann::json& j, tool_call_delta& x);
void to_json(nlohmann::json& j, const error& x);
void from_json(const nlohmann::json& j, error& x);
void to_json(nlohmann::json& j, const document& x);
void from_json(const nlohmann::json& j, document& x);

} // namespace quarry::sdk

namespace quarry::core {

/// Parses `role`, `tool_choice`, `finish_reason` and `errc` names; nothing
/// for an unknown name.
std::optional<sdk::role> parse_role(std::string_view x);
std::optional<sdk::tool_choice> parse_tool_choice(std::string_view x);
std::optional<sdk::finish_reason> parse_finish_reason(std::string_view x);
std::optional<sdk::errc> parse_errc(std::string_view x);
std::optional<sdk::source_kind> parse_source_kind(std::string_view x);

/// The deepest nesting accepted in a tool definition's parameter schema.
inline constexpr size_t max_schema_depth = 64;

/// Reads tool definitions from a JSON array whose entries are either OpenAI
/// format (`{"type": "function", "function": {...}}`) or plain
/// (`{"name", "description", "parameters"}`). Returns an error text on bad
/// input, including a schema nested deeper than @ref max_schema_depth.
std::optional<std::string> parse_tool_definitions(const nlohmann::json& j,
                                                  std::vector<sdk::tool_definition>& out);

} // namespace quarry::core
