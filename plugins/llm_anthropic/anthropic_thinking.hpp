// The signed thinking of one assistant turn: what the plugin records from a
// response (sdk::chat_result::reasoning_state) and sends back with the turn
// (sdk::chat_message::reasoning_state), as Anthropic requires for tool use
// with extended thinking.

#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_anthropic {

/// Largest reasoning state the plugin records or reads back, in bytes of
/// JSON text. A signed block cannot be shortened, so a turn whose thinking
/// exceeds it keeps no state (its next request runs without thinking, see
/// build_request_body). 2 MiB holds a 128k-token thinking budget (about
/// 512 KiB of text) four times over.
inline constexpr size_t max_reasoning_state = 2 * 1024 * 1024;

/// Most thinking blocks recorded for one turn (interleaved thinking emits
/// one per tool call; real turns stay far below).
inline constexpr size_t max_thinking_blocks = 256;

/// One `thinking` or `redacted_thinking` content block of an assistant turn,
/// exactly as the API sent it.
struct thinking_block {
  /// Whether this is a `redacted_thinking` block (`data` only).
  bool redacted = false;
  /// The thinking text of a `thinking` block (may be empty when the API
  /// omits it; the signature still covers it).
  std::string thinking;
  /// The signature of a `thinking` block; never empty in a valid block.
  std::string signature;
  /// The encrypted payload of a `redacted_thinking` block; never empty in a
  /// valid block.
  std::string data;
  /// Number of client `tool_use` blocks of the turn that came before this
  /// block (0 for the usual thinking before everything; more with
  /// interleaved thinking). Puts the block back where it was.
  size_t after_tools = 0;

  /// Returns whether the block can be sent back: a thinking block with a
  /// signature, or a redacted block with data.
  bool complete() const noexcept {
    return redacted ? !data.empty() : !signature.empty();
  }
};

/// Encodes the blocks of one turn as reasoning-state text: a JSON array of
/// `{"type":"thinking","thinking":...,"signature":...}` and
/// `{"type":"redacted_thinking","data":...}` objects in order, each with
/// `"after_tools": n` when n > 0. Returns an empty string when `blocks` is
/// empty, holds an incomplete block (a partial sequence cannot be sent
/// back), holds more than max_thinking_blocks, or encodes to more than
/// max_reasoning_state bytes.
std::string encode_reasoning_state(const std::vector<thinking_block>& blocks);

/// Decodes reasoning-state text written by encode_reasoning_state. Anything
/// else (not JSON, invalid UTF-8, nesting deeper than 2, too large, an
/// empty array, an entry of another shape or type, an unknown key, an
/// incomplete block) gives nothing and a one-line reason in `why`: the
/// caller then sends no thinking block of that turn at all.
std::optional<std::vector<thinking_block>> decode_reasoning_state(std::string_view text,
                                                                  std::string& why);

/// Returns the API content block of `block`: `{"type":"thinking",
/// "thinking","signature"}` or `{"type":"redacted_thinking","data"}`.
nlohmann::json to_content_block(const thinking_block& block);

} // namespace quarry::plugins::llm_anthropic
