// Robust parsing of the tool-call arguments models produce.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace quarry::core {

/// The deepest nesting of arrays and objects accepted in tool arguments.
inline constexpr size_t max_argument_depth = 128;

/// Parses a tool call's argument text into a JSON object, tolerating what
/// models get wrong: NUL bytes and invalid UTF-8 (removed), an empty text
/// (`{}`), a double-encoded object (a JSON string holding the object), a
/// Markdown code fence around the object, and string values that hold a JSON
/// array or object (`"queries": "[\"a\"]"` becomes an array). Anything else
/// that is not an object gives a message the model can act on, and so do
/// arguments nested deeper than @ref max_argument_depth (never parsed, so
/// hostile input cannot exhaust the stack).
std::variant<nlohmann::json, std::string> parse_tool_arguments(std::string_view text);

/// Checks parsed arguments against a tool's JSON schema (the subset tools
/// declare: `type` of object, array, string, integer, number, boolean;
/// `properties`, `required`, `items`, `enum`). Returns a message naming the
/// first offending argument, or nothing. Used where a person typed the
/// arguments (`quarry tool run`); models get the tool's own, tolerant
/// answer instead.
std::optional<std::string> check_tool_arguments(const nlohmann::json& schema,
                                                const nlohmann::json& args);

/// Removes NUL bytes and replaces invalid UTF-8 (including encoded
/// surrogates) with U+FFFD.
std::string sanitize_utf8(std::string_view text);

} // namespace quarry::core
