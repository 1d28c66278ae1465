// Builds the JSON body of a streaming Anthropic Messages request from a
// provider-neutral chat request.

#pragma once

#include "anthropic_config.hpp"

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace quarry::plugins::llm_anthropic {

/// The answer room kept beyond the thinking budget: when a request's
/// `max_tokens` is below `budget + min_answer_tokens`, the budget is added
/// on top of it (the API counts thinking in `max_tokens` and requires
/// `max_tokens > budget_tokens`).
inline constexpr int64_t min_answer_tokens = 1024;

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
///
/// With `with_thinking`, an assistant message whose `reasoning_state` decodes
/// (decode_reasoning_state) gets its thinking blocks back unmodified and in
/// order: those recorded before any tool call first (before the text), each
/// later one (interleaved thinking) before the tool call it preceded. A
/// state that does not decode, that places a block after the message's last
/// tool call, that belongs to a message with neither text nor tool calls,
/// or that would land in the middle of a merged message is not sent at all
/// (a warning says which turn and why). Without `with_thinking` no thinking
/// block is sent.
converted_messages convert_messages(const std::vector<sdk::chat_message>& messages,
                                    std::vector<std::string>& warnings, bool with_thinking = false);

/// Returns whether `messages` (converted) ends in the middle of a tool-use
/// turn whose assistant message does not start with a thinking block: the
/// last message is a user message with `tool_result` blocks and the
/// assistant message before it has `tool_use` blocks but no leading
/// `thinking` / `redacted_thinking` block. With thinking enabled the API
/// refuses such a request (HTTP 400: "a final `assistant` message must start
/// with a thinking block ... To avoid this requirement, disable `thinking`").
bool tool_turn_lacks_thinking(const nlohmann::json& messages);

/// Returns the complete request body for `req` (model, max_tokens, system,
/// messages, tools, tool_choice, temperature, thinking, `stream: true`).
/// Problems that do not prevent the request go to `warnings`.
///
/// Extended thinking is on when the configuration enables it and the
/// request's `reasoning_effort` is not `none`; then:
/// - thinking blocks of the history go back with their turns (see
///   convert_messages);
/// - when the conversation is inside a tool-use turn whose assistant message
///   lacks its thinking blocks (tool_turn_lacks_thinking), thinking is
///   turned off for this request only, as the API requires, with a warning;
/// - `tool_choice::required` is sent as `{"type":"auto"}`: the API allows
///   only `auto` and `none` with thinking, so the caller must check that a
///   tool was called (the host reminds the model and retries once);
/// - `temperature` is not sent (the API refuses it with thinking);
/// - `max_tokens` grows by the budget when it leaves less than
///   min_answer_tokens beyond it (see min_answer_tokens).
/// Without thinking, `tool_choice::required` is `{"type":"any"}`.
nlohmann::json build_request_body(const config& cfg, const sdk::chat_request& req,
                                  std::vector<std::string>& warnings);

} // namespace quarry::plugins::llm_anthropic
