// Turns the events of a streaming Anthropic Messages response into deltas
// and one assembled chat result.

#pragma once

#include "anthropic_thinking.hpp"

#include "quarry/sdk/sse.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_anthropic {

/// Receives what a @ref stream_assembler extracts, as soon as it arrives.
class stream_listener {
public:
  virtual ~stream_listener() = default;

  /// A piece of the answer text.
  virtual void on_text(std::string_view delta) = 0;

  /// A piece of thinking text.
  virtual void on_reasoning(std::string_view delta) = 0;

  /// A piece of a tool call; `index` counts tool calls only (0, 1, ...).
  virtual void on_tool_call(const sdk::tool_call_delta& delta) = 0;

  /// The token counts so far (after `message_start` and `message_delta`).
  virtual void on_usage(const sdk::usage& counts) = 0;
};

/// Where a stream stands.
enum class stream_state {
  /// More events are expected.
  running,
  /// `message_stop` arrived; @ref stream_assembler::result is complete.
  done,
  /// An `error` event or a malformed event arrived; see
  /// @ref stream_assembler::failure.
  failed,
};

/// Maps Anthropic's `stop_reason` to a finish reason: end_turn and
/// stop_sequence -> stop, tool_use -> tool_calls, max_tokens and
/// model_context_window_exceeded -> length, refusal -> content_filter, an
/// empty string (no stop reason sent) -> unknown, anything else
/// (pause_turn, ...) -> other. Never `stop` for a missing reason.
sdk::finish_reason to_finish_reason(std::string_view stop_reason);

/// Assembles the events of one response. Text blocks feed the text,
/// `thinking` blocks the reasoning, `tool_use` blocks the tool calls (their
/// `input_json_delta` pieces concatenated; no piece at all means `{}`).
/// Every `thinking` block (its `thinking_delta` text and `signature_delta`)
/// and `redacted_thinking` block (its `data`) is also recorded, in order,
/// for sdk::chat_result::reasoning_state (see encode_reasoning_state; at
/// most max_reasoning_state bytes, else no state at all).
/// `ping`, unknown event types, unknown block and delta types and
/// server-side tool blocks are ignored. A repeated `message_start` of the
/// same message is ignored; one for another message while the first is
/// still open fails the stream (errc::invalid_response). An event without a
/// type that carries an `error` member (a gateway's error envelope) fails
/// the stream with its classified error. Event data that is not UTF-8 is
/// repaired (U+FFFD); nesting deeper than sdk::default_max_json_depth fails
/// the stream.
///
/// At `message_stop`, an answer without text (white space is none) and
/// without a tool call fails with errc::empty_response ("the model returned
/// an empty answer ..."), unless the stop reason explains it (max_tokens,
/// model_context_window_exceeded, refusal: the host decides about those).
/// A thinking-only answer is empty. Not thread-safe.
class stream_assembler {
public:
  /// Processes one SSE event (the `type` inside the data wins over the
  /// `event:` field). Events after the end are ignored.
  stream_state on_event(const sdk::sse_event& ev, stream_listener& out);

  /// Processes one event given as parsed JSON.
  stream_state on_json(const nlohmann::json& data, stream_listener& out);

  /// Processes a complete, non-streamed Messages response (the body of a
  /// `stream: false` answer) as if it had streamed, with the same rules
  /// (empty answers included). A body of `"type": "error"`, or an `error`
  /// member without `content` (a gateway's envelope inside an HTTP 200),
  /// fails with its classified error.
  stream_state on_message(const nlohmann::json& message, stream_listener& out);

  /// Fails a running stream with `err` (e.g. when the transport broke).
  /// Does nothing once the stream ended.
  stream_state abort(sdk::error err);

  /// Returns where the stream stands.
  stream_state state() const noexcept {
    return state_;
  }

  /// The reason of a failed stream.
  const std::optional<sdk::error>& failure() const noexcept {
    return failure_;
  }

  /// Returns whether any text, reasoning or tool-call delta was emitted.
  bool streamed() const noexcept {
    return streamed_;
  }

  /// Returns the result assembled so far (complete once done). Tool calls
  /// whose block never stopped keep their (possibly broken) arguments. The
  /// finish reason is sdk::finish_reason::unknown until a `stop_reason`
  /// arrives. `reasoning_state` holds the recorded thinking blocks, or is
  /// empty (none, one without its signature, or too large).
  sdk::chat_result result() const;

  /// Returns the token counts so far.
  sdk::usage usage() const;

private:
  enum class block_kind { text, tool, thinking, redacted_thinking, other };

  struct block {
    block_kind kind = block_kind::other;
    /// Position among tool calls, for tool blocks.
    size_t tool = 0;
    /// Position in thinking_, for thinking blocks.
    size_t thinking = 0;
  };

  // Records a new thinking or redacted thinking block; returns its position
  // in thinking_.
  size_t add_thinking(thinking_block x);

  // Appends to the recorded block at `pos` (text or signature), within
  // max_reasoning_state.
  void grow_thinking(size_t pos, std::string thinking_block::*field, const std::string& piece);

  // Why the finished answer is empty, if it is.
  std::optional<std::string> empty_answer() const;

  void handle_message_start(const nlohmann::json& data, stream_listener& out);

  void handle_block_start(const nlohmann::json& data, stream_listener& out);

  void handle_block_delta(const nlohmann::json& data, stream_listener& out);

  void handle_block_stop(const nlohmann::json& data, stream_listener& out);

  void handle_message_delta(const nlohmann::json& data, stream_listener& out);

  void read_usage(const nlohmann::json& x);

  stream_state state_ = stream_state::running;
  std::optional<sdk::error> failure_;
  // Whether `message_start` arrived, and the id it named.
  bool started_ = false;
  std::string message_id_;
  bool streamed_ = false;
  std::map<int64_t, block> blocks_;
  std::string text_;
  std::string reasoning_;
  std::vector<sdk::tool_call> calls_;
  std::vector<bool> calls_closed_;
  // The thinking blocks in order; cleared for good once they exceed
  // max_reasoning_state (thinking_dropped_).
  std::vector<thinking_block> thinking_;
  size_t thinking_bytes_ = 0;
  bool thinking_dropped_ = false;
  sdk::finish_reason finish_ = sdk::finish_reason::unknown;
  // The `stop_reason` as sent (for messages), empty if none.
  std::string stop_reason_;
  std::string model_;
  int64_t input_tokens_ = 0;
  int64_t cache_creation_tokens_ = 0;
  int64_t cache_read_tokens_ = 0;
  int64_t output_tokens_ = 0;
  int64_t thinking_tokens_ = 0;
};

/// Feeds raw `text/event-stream` bytes through an SSE parser into a
/// @ref stream_assembler.
class stream_decoder {
public:
  /// Consumes the next piece of the body.
  stream_state feed(std::string_view bytes, stream_listener& out);

  /// Ends the body: dispatches a last unterminated event, and fails the
  /// stream with errc::network ("stream ended early") if it did not end with
  /// `message_stop`.
  stream_state finish(stream_listener& out);

  /// The assembler.
  const stream_assembler& assembler() const noexcept {
    return assembler_;
  }

  /// The assembler, e.g. to abort it.
  stream_assembler& assembler() noexcept {
    return assembler_;
  }

private:
  stream_state parsed(bool ok);

  sdk::sse_parser parser_;
  stream_assembler assembler_;
};

} // namespace quarry::plugins::llm_anthropic
