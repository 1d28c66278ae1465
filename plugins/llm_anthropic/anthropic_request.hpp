// Builds the JSON body of a streaming Anthropic Messages request from a
// provider-neutral chat request.

#pragma once

#include "anthropic_config.hpp"

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace quarry::plugins::llm_anthropic {

/// A conversation in Anthropic's shape: the system prompt apart, the other
/// messages as alternating user and assistant messages.
struct converted_messages {
  /// The joined system prompt (empty if none).
  std::string system;
  /// The `messages` array.
  nlohmann::json messages = nlohmann::json::array();
};

/// Converts `messages`: system messages are joined (blank line between) into
/// `system`; assistant text and tool calls become `text` and `tool_use`
/// blocks; tool messages become `tool_result` blocks of a user message;
/// consecutive messages of the same role are merged so that roles alternate,
/// with `tool_result` blocks first. Tool arguments that are not a JSON object
/// are sent as `{}` and reported in `warnings`.
converted_messages convert_messages(const std::vector<sdk::chat_message>& messages,
                                    std::vector<std::string>& warnings);

/// Returns the complete request body for `req` (model, max_tokens, system,
/// messages, tools, tool_choice, temperature, thinking, `stream: true`).
/// Problems that do not prevent the request go to `warnings`.
nlohmann::json build_request_body(const config& cfg, const sdk::chat_request& req,
                                  std::vector<std::string>& warnings);

} // namespace quarry::plugins::llm_anthropic
