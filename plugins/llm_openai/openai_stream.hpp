// Decoding of OpenAI-style Chat Completions streams: SSE events, chunk JSON,
// tool-call accumulation and error classification.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/reasoning_tags.hpp"
#include "quarry/sdk/sse.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_openai {

/// Assembles tool calls from streamed fragments, tolerating the quirks of
/// OpenAI-compatible servers: missing `index` (calls are matched by id or
/// position), indices starting at 1 (calls are numbered by order of
/// appearance), repeated empty names, whole arguments in one piece, and empty
/// pieces after the end.
class tool_call_accumulator {
public:
  /// The parts of one element of a delta's `tool_calls` array that matter.
  struct fields {
    /// The server's `index`, if it sent a number.
    std::optional<int64_t> index;
    /// `id`, or empty.
    std::string_view id;
    /// `function.name`, or empty.
    std::string_view name;
    /// `function.arguments` (a JSON value other than a string is dumped).
    std::string_view arguments;
  };

  /// Adds one element given as its parts (see the overload below).
  std::optional<sdk::tool_call_delta> add(const fields& item, size_t position, size_t count);

  /// Adds one element of a delta's `tool_calls` array; `position` is its
  /// place in that array and `count` the array's size. Returns the fragment
  /// to report (index normalised to order of appearance), or nothing if the
  /// element carried no information.
  std::optional<sdk::tool_call_delta> add(const nlohmann::json& item, size_t position,
                                          size_t count);

  /// Returns whether any call was seen.
  bool empty() const noexcept {
    return calls_.empty();
  }

  /// Returns the calls in order of appearance; a missing id becomes
  /// `call_<n>` (n from 1) and missing arguments become `{}`.
  std::vector<sdk::tool_call> calls() const;

private:
  struct entry {
    // The server's index, or -1 if it sent none.
    int64_t server_index = -1;
    std::string id;
    std::string name;
    std::string arguments;
    // Whether id / name were reported to the sink already.
    bool id_reported = false;
    bool name_reported = false;
  };

  size_t select(const fields& item, size_t position, size_t count);

  std::vector<entry> calls_;
};

/// Classifies an error response (HTTP status >= 400, or an error inside a 200
/// stream when `status` is 0) from its status, headers and body. Understands
/// OpenAI (`{"error":{"message","type","code"}}`), Google
/// (`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[...]}}`),
/// Groq / OpenRouter in-stream errors and plain-text bodies.
sdk::error classify_error(int status, const sdk::http_headers& headers, std::string_view body);

/// Same as above for an already parsed body.
sdk::error classify_error(int status, const sdk::http_headers& headers, const nlohmann::json& body);

/// Extracts a retry delay from a message such as `Please try again in 6ms.` or
/// `... try again in 26.604s`.
std::optional<int64_t> retry_hint_from_message(std::string_view message);

/// Receives what a @ref stream_decoder decodes.
class stream_handler {
public:
  virtual ~stream_handler() = default;

  /// A piece of answer text (refusal text included).
  virtual void on_text(std::string_view delta) = 0;

  /// A piece of reasoning text.
  virtual void on_reasoning(std::string_view delta) = 0;

  /// A tool-call fragment.
  virtual void on_tool_call(const sdk::tool_call_delta& delta) = 0;

  /// Token counts.
  virtual void on_usage(const sdk::usage& counts) = 0;
};

/// Decodes the body of a streaming Chat Completions response, fed in pieces
/// of any size. Bytes that are not UTF-8 become U+FFFD; chunks nested deeper
/// than sdk::default_max_json_depth fail the stream (errc::invalid_response).
/// The stream is done at `[DONE]`, or as soon as both a finish reason and
/// the usage arrived. Only choice 0 is used (`n > 1` streams deliver the other
/// choices' deltas too; they are ignored). Refusals (`delta.refusal`) are
/// delivered as text and turn the finish reason into `content_filter`.
///
/// Answer text (`delta.content`) passes through a
/// sdk::reasoning_tag_splitter: a leading `<think>` block (or the text before
/// a leading orphan `</think>`) reaches the handler and the result as
/// reasoning, never as text. A finish reason `error` fails the stream
/// (errc::server_error); an absent finish reason is
/// sdk::finish_reason::unknown in the result, never `stop`.
class stream_decoder {
public:
  /// A decoder that splits `<think>` and `<thinking>` blocks off the text.
  stream_decoder() = default;

  /// A decoder whose answer text passes through `splitter` (one without
  /// tags splits nothing).
  explicit stream_decoder(sdk::reasoning_tag_splitter splitter) : splitter_(std::move(splitter)) {
    // nop
  }

  /// The state of the decoder.
  enum class state {
    /// More bytes are expected.
    running,
    /// `[DONE]` arrived, a finish reason and the usage arrived, or the body
    /// ended after a finish reason.
    done,
    /// The stream carried an error or something unparseable.
    failed,
  };

  /// Consumes `bytes`. Returns the state afterwards; once it is not
  /// `running`, further input is ignored.
  state feed(std::string_view bytes, stream_handler& handler);

  /// Ends the body: a stream without `[DONE]` counts as done if a finish
  /// reason arrived; a body that is not an event stream at all (e.g. an HTML
  /// page served with status 200) fails with errc::invalid_response, and any
  /// other stream with errc::network.
  state finish(stream_handler& handler);

  /// Ends a body that was one JSON document (a server that ignored
  /// `stream`), decoded as the one event of a stream: its end is the
  /// answer's end, with or without a finish reason.
  state finish_document(stream_handler& handler);

  /// Returns the current state.
  state current() const noexcept {
    return state_;
  }

  /// The failure, once the state is `failed`.
  const std::optional<sdk::error>& failure() const noexcept {
    return failure_;
  }

  /// Returns whether a text, reasoning or tool-call delta was delivered.
  bool streamed() const noexcept {
    return streamed_;
  }

  /// Returns whether a finish reason arrived.
  bool finished() const noexcept {
    return finish_.has_value();
  }

  /// Returns whether the stream ended with `[DONE]` (rather than with a
  /// finish reason plus usage, which also makes the state `done`).
  bool done_marker_seen() const noexcept {
    return done_marker_;
  }

  /// Returns the assembled result (meaningful once the state is `done`;
  /// call @ref end_text first when the state became `done` outside this
  /// decoder's own transitions).
  sdk::chat_result result() const;

  /// Releases the answer text the reasoning splitter still holds (at most a
  /// tag's length, or a whole answer that an opener-in-prompt model never
  /// closed). Idempotent; the decoder calls it itself when it reaches
  /// `done`.
  void end_text(stream_handler& handler);

  /// Whether any choice arrived (a stream of usage only has none).
  bool choice_seen() const noexcept {
    return choice_seen_;
  }

  /// The splitter (whether it found an orphan closing tag, for instance).
  const sdk::reasoning_tag_splitter& splitter() const noexcept {
    return splitter_;
  }

  /// Processes one SSE event (exposed for tests and the fuzzer). Returns
  /// false once the decoder stops.
  bool on_event(const sdk::sse_event& ev, stream_handler& handler);

  /// Reads every chunk into a JSON tree (`true`) instead of reading the
  /// common ones (text, reasoning, finish reason) in one pass first.
  /// Both give the same callbacks and result; the tree is the reference the
  /// tests and the fuzzer compare the quicker reader with.
  void read_chunks_as_trees(bool on) noexcept {
    trees_only_ = on;
  }

private:
  bool on_chunk(std::string_view data, stream_handler& handler);

  void apply_delta(std::string_view content, std::string_view refusal, std::string_view reasoning,
                   stream_handler& handler);

  void apply_usage(const nlohmann::json& u, stream_handler& handler);
  void apply_usage(const sdk::usage& counts, stream_handler& handler);
  // Keeps a choice's finish reason; false (failed) for "error".
  bool on_finish_reason(std::string_view reason);

  /// Delivers what the splitter produced.
  void emit(const sdk::reasoning_tag_splitter::output& out, stream_handler& handler);

  /// Sets the state to done (releasing held text first). Returns false.
  bool complete(stream_handler& handler);

  bool fail(sdk::error err);

  // Bytes of the body kept to recognise (and quote) a body that is not an
  // event stream.
  static constexpr size_t max_head_size = 512;

  sdk::sse_parser sse_;
  std::string head_;
  size_t events_ = 0;
  bool done_marker_ = false;
  bool usage_seen_ = false;
  state state_ = state::running;
  std::optional<sdk::error> failure_;
  bool streamed_ = false;
  bool refused_ = false;
  bool choice_seen_ = false;
  bool trees_only_ = false;
  bool text_ended_ = false;
  sdk::reasoning_tag_splitter splitter_;
  std::string text_;
  /// Reasoning from the server's own channel (`reasoning_content`).
  std::string reasoning_;
  /// Reasoning the splitter found inside the answer text.
  std::string tag_reasoning_;
  tool_call_accumulator tools_;
  std::optional<std::string> finish_;
  sdk::usage usage_;
  std::string model_;
};

/// Maps a Chat Completions `finish_reason` to the SDK's enum, given whether
/// tool calls were seen and whether the model refused. An empty `reason`
/// (none sent) is sdk::finish_reason::unknown.
sdk::finish_reason map_finish_reason(std::string_view reason, bool saw_tools, bool refused);

} // namespace quarry::plugins::llm_openai
