// Building the message list of an LLM call from a session's history within a
// token budget (Onyx's construct_message_history, with its gaps closed).
#pragma once

#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace quarry::core {

/// Counts the tokens of one message.
using token_counter = std::function<int64_t(const sdk::chat_message&)>;

/// A cheap estimate: about four characters per token for the text, the
/// reasoning and each tool call as `{"function_name": ..., "arguments": ...}`,
/// plus a few tokens of framing per message.
int64_t estimate_tokens(const sdk::chat_message& message);

/// Wraps a reminder for the model: a user message
/// `<system-reminder>\n...\n</system-reminder>`.
sdk::chat_message make_reminder(const std::string& text);

/// What goes into one LLM call.
struct history_input {
  sdk::chat_message system;
  /// An extra instruction placed right before the last user message.
  std::optional<sdk::chat_message> custom;
  /// Files or documents the user attached, placed before the last user
  /// message.
  std::vector<sdk::chat_message> context;
  /// The conversation so far.
  std::vector<sdk::chat_message> history;
  /// A reminder appended at the very end (see make_reminder).
  std::optional<sdk::chat_message> reminder;
  /// The tokens the prompt may use in all.
  int64_t available_tokens = 0;
  /// Keep only the history from the n-th last user message on.
  std::optional<size_t> last_n_user_messages;
};

/// Builds [system] + older history (newest first while it fits; the first
/// message that does not fit is dropped with everything older) + [custom] +
/// [context] + last user message and what follows it + [reminder].
///
/// The result is always well-formed for the provider APIs: tool results
/// without an earlier assistant call of that id are dropped (Onyx does
/// this), and an assistant tool call without a result gets a short synthetic
/// one saying it was not run (Onyx leaves it, which some APIs reject).
/// Errors (messages naming the numbers): the fixed parts do not fit, no user
/// message when `last_n_user_messages` is set, or the last user message and
/// what follows it do not fit. The messages are moved out of `input` (pass
/// it with std::move where the caller keeps no use for it: a research's
/// history is tens of kilobytes, copied otherwise).
std::variant<std::vector<sdk::chat_message>, std::string>
build_history(history_input input, const token_counter& count = estimate_tokens);

/// Drops tool results whose call is not in an earlier assistant message and
/// adds a synthetic result right after the assistant message's other
/// results for each call that has none.
std::vector<sdk::chat_message> pair_tool_results(std::vector<sdk::chat_message> messages);

/// The reasoning of the assistant turn that made a round of tool calls,
/// kept in the history because some providers need it back (DeepSeek's
/// `reasoning_content`, Anthropic's signed thinking blocks).
struct turn_reasoning {
  /// sdk::chat_result::reasoning of the turn.
  std::string text;
  /// sdk::chat_result::reasoning_state of the turn.
  std::string state;
};

/// Appends one assistant message carrying `calls` (and the turn's
/// `reasoning`) and, for each call in order, a tool message with the text
/// `result_of(call)`.
void append_tool_round(std::vector<sdk::chat_message>& history,
                       const std::vector<sdk::tool_call>& calls,
                       const std::function<std::string(const sdk::tool_call&)>& result_of,
                       turn_reasoning reasoning = {});

/// The text of a synthetic result for a tool call that was not run.
inline constexpr const char* missing_tool_result_text
  = "This tool call was not run and has no result.";

} // namespace quarry::core
