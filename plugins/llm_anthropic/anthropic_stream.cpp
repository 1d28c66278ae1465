// Assembly of streaming Anthropic Messages responses.

#include "anthropic_stream.hpp"

#include "anthropic_errors.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <cstdint>
#include <utility>

namespace quarry::plugins::llm_anthropic {

namespace {

using nlohmann::json;

// Returns the string member `key` of `x`, or an empty string.
std::string str(const json& x, const char* key) {
  if (!x.is_object())
    return {};
  auto i = x.find(key);
  return i != x.end() && i->is_string() ? i->get<std::string>() : std::string{};
}

// Returns the integer member `key` of `x`, if it is one.
std::optional<int64_t> integer(const json& x, const char* key) {
  if (!x.is_object())
    return std::nullopt;
  auto i = x.find(key);
  if (i == x.end())
    return std::nullopt;
  if (i->is_number_integer())
    return i->get<int64_t>();
  if (i->is_number_unsigned())
    return static_cast<int64_t>(i->get<uint64_t>() & INT64_MAX);
  return std::nullopt;
}

// Returns whether `x` carries an error: an `error` member that is an object
// or a string (Anthropic's error event, a gateway's envelope).
bool carries_error(const json& x) {
  if (!x.is_object())
    return false;
  auto i = x.find("error");
  return i != x.end() && (i->is_object() || i->is_string());
}

// Returns the object member `key` of `x`, or nullptr.
const json* object(const json& x, const char* key) {
  if (!x.is_object())
    return nullptr;
  auto i = x.find(key);
  return i != x.end() && i->is_object() ? &*i : nullptr;
}

} // namespace

sdk::finish_reason to_finish_reason(std::string_view stop_reason) {
  if (stop_reason.empty())
    return sdk::finish_reason::unknown;
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence")
    return sdk::finish_reason::stop;
  if (stop_reason == "tool_use")
    return sdk::finish_reason::tool_calls;
  if (stop_reason == "max_tokens" || stop_reason == "model_context_window_exceeded")
    return sdk::finish_reason::length;
  if (stop_reason == "refusal")
    return sdk::finish_reason::content_filter;
  return sdk::finish_reason::other;
}

// -- stream_assembler ---------------------------------------------------------

stream_state stream_assembler::abort(sdk::error err) {
  if (state_ != stream_state::running)
    return state_;
  failure_ = std::move(err);
  state_ = stream_state::failed;
  return state_;
}

stream_state stream_assembler::on_event(const sdk::sse_event& ev, stream_listener& out) {
  if (state_ != stream_state::running)
    return state_;
  if (ev.type == "ping")
    return state_;
  // Bytes that are not UTF-8 become U+FFFD before anything is decoded.
  auto text = sdk::repair_utf8(ev.data);
  std::string why;
  auto data = sdk::parse_json(text, &why);
  if (data.is_discarded() || !data.is_object()) {
    if (ev.type == "error")
      return abort(classify_error_body(text, 0));
    static constexpr std::string_view known[] = {"message_start",       "content_block_start",
                                                 "content_block_delta", "content_block_stop",
                                                 "message_delta",       "message_stop"};
    auto type = sdk::repair_utf8(sdk::utf8_prefix(ev.type, 64));
    for (auto name : known)
      if (ev.type == name)
        return abort(sdk::make_error(sdk::errc::invalid_response,
                                     "anthropic: `" + type + "` event without a JSON object"
                                       + (why.empty() ? "" : " (" + why + ")")));
    return state_; // unknown event types may carry anything
  }
  if (!data.contains("type") && !ev.type.empty())
    data["type"] = ev.type;
  return on_json(data, out);
}

stream_state stream_assembler::on_json(const json& data, stream_listener& out) {
  if (state_ != stream_state::running)
    return state_;
  auto type = str(data, "type");
  if (type == "message_start") {
    handle_message_start(data, out);
    return state_;
  } else if (type == "content_block_start") {
    handle_block_start(data, out);
  } else if (type == "content_block_delta") {
    handle_block_delta(data, out);
  } else if (type == "content_block_stop") {
    handle_block_stop(data, out);
  } else if (type == "message_delta") {
    handle_message_delta(data, out);
  } else if (type == "message_stop") {
    if (auto why = empty_answer())
      return abort(sdk::make_error(sdk::errc::empty_response, std::move(*why)));
    state_ = stream_state::done;
  } else if (type == "error" || (type.empty() && carries_error(data))) {
    // Anthropic's error event, or a gateway's error envelope relayed as an
    // event without a type.
    return abort(classify_error_body(sdk::dump_json(data), 0));
  }
  // `ping` and unknown types: nothing to do.
  return state_;
}

stream_state stream_assembler::on_message(const json& message, stream_listener& out) {
  if (state_ != stream_state::running)
    return state_;
  if (!message.is_object())
    return abort(
      sdk::make_error(sdk::errc::invalid_response, "anthropic: the response is not a JSON object"));
  auto content = message.find("content");
  auto has_content = content != message.end() && content->is_array();
  if (str(message, "type") == "error" || (!has_content && carries_error(message)))
    return abort(classify_error_body(sdk::dump_json(message), 0));
  // Replays the message as the events a stream would have carried.
  auto start = message;
  start["content"] = json::array();
  on_json({{"type", "message_start"}, {"message", std::move(start)}}, out);
  int64_t index = 0;
  if (has_content) {
    for (const auto& item : *content) {
      if (!item.is_object())
        continue;
      auto kind = str(item, "type");
      auto head = item;
      if (kind == "text") {
        head["text"] = "";
      } else if (kind == "thinking") {
        head["thinking"] = "";
        head["signature"] = "";
      } else if (kind == "tool_use") {
        head["input"] = json::object();
      }
      on_json(
        {{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(head)}},
        out);
      json delta;
      if (kind == "text")
        delta = {{"type", "text_delta"}, {"text", str(item, "text")}};
      else if (kind == "thinking")
        delta = {{"type", "thinking_delta"}, {"thinking", str(item, "thinking")}};
      else if (kind == "tool_use" && item.contains("input"))
        delta = {{"type", "input_json_delta"}, {"partial_json", sdk::dump_json(item["input"])}};
      if (!delta.is_null())
        on_json({{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}},
                out);
      if (kind == "thinking")
        on_json({{"type", "content_block_delta"},
                 {"index", index},
                 {"delta", {{"type", "signature_delta"}, {"signature", str(item, "signature")}}}},
                out);
      on_json({{"type", "content_block_stop"}, {"index", index}}, out);
      ++index;
    }
  }
  json delta = {{"type", "message_delta"},
                {"delta", {{"stop_reason", message.value("stop_reason", json())}}}};
  if (auto u = object(message, "usage"))
    delta["usage"] = *u;
  on_json(delta, out);
  return on_json({{"type", "message_stop"}}, out);
}

void stream_assembler::handle_message_start(const json& data, stream_listener& out) {
  auto msg = object(data, "message");
  if (msg == nullptr)
    return;
  auto id = str(*msg, "id");
  if (started_) {
    // A repeat of the open message's start changes nothing; another message
    // starting before this one stopped means the stream is broken (e.g. a
    // proxy that spliced two responses) and its half-built tool calls must
    // not be returned.
    if (id == message_id_)
      return;
    abort(sdk::make_error(sdk::errc::invalid_response,
                          "anthropic: message `" + std::string{sdk::utf8_prefix(id, 100)}
                            + "` started before message `"
                            + std::string{sdk::utf8_prefix(message_id_, 100)} + "` ended"));
    return;
  }
  started_ = true;
  message_id_ = id;
  if (auto model = str(*msg, "model"); !model.empty())
    model_ = std::move(model);
  if (auto u = object(*msg, "usage")) {
    read_usage(*u);
    out.on_usage(usage());
  }
}

void stream_assembler::handle_block_start(const json& data, stream_listener& out) {
  auto index = integer(data, "index").value_or(-1);
  auto cb = object(data, "content_block");
  auto kind = cb != nullptr ? str(*cb, "type") : std::string{};
  block b;
  if (kind == "text") {
    b.kind = block_kind::text;
    // The start block may already carry text (it never does today).
    if (auto text = str(*cb, "text"); !text.empty()) {
      text_ += text;
      streamed_ = true;
      out.on_text(text);
    }
  } else if (kind == "thinking") {
    b.kind = block_kind::thinking;
    thinking_block x;
    x.after_tools = calls_.size();
    b.thinking = add_thinking(std::move(x));
    if (auto text = str(*cb, "thinking"); !text.empty()) {
      grow_thinking(b.thinking, &thinking_block::thinking, text);
      reasoning_ += text;
      streamed_ = true;
      out.on_reasoning(text);
    }
    // The start block carries `"signature": ""`; the signature comes as a
    // signature_delta (a non-empty one here is kept all the same).
    if (auto sig = str(*cb, "signature"); !sig.empty())
      grow_thinking(b.thinking, &thinking_block::signature, sig);
  } else if (kind == "redacted_thinking") {
    // Encrypted thinking: all of it in the start block, nothing to show.
    b.kind = block_kind::redacted_thinking;
    thinking_block x;
    x.redacted = true;
    x.after_tools = calls_.size();
    b.thinking = add_thinking(std::move(x));
    grow_thinking(b.thinking, &thinking_block::data, str(*cb, "data"));
  } else if (kind == "tool_use") {
    // The `input: {}` of the start block is a placeholder: arguments come
    // as input_json_delta pieces.
    b.kind = block_kind::tool;
    b.tool = calls_.size();
    sdk::tool_call call;
    call.id = str(*cb, "id");
    call.name = str(*cb, "name");
    calls_.push_back(call);
    calls_closed_.push_back(false);
    sdk::tool_call_delta delta;
    delta.index = static_cast<int>(b.tool);
    delta.id = call.id;
    delta.name = call.name;
    streamed_ = true;
    out.on_tool_call(delta);
  }
  blocks_[index] = b;
}

void stream_assembler::handle_block_delta(const json& data, stream_listener& out) {
  auto index = integer(data, "index").value_or(-1);
  auto delta = object(data, "delta");
  if (delta == nullptr)
    return;
  auto kind = str(*delta, "type");
  auto i = blocks_.find(index);
  if (kind == "text_delta") {
    if (i != blocks_.end() && i->second.kind != block_kind::text)
      return;
    auto text = str(*delta, "text");
    if (text.empty())
      return;
    text_ += text;
    streamed_ = true;
    out.on_text(text);
  } else if (kind == "thinking_delta") {
    if (i != blocks_.end() && i->second.kind != block_kind::thinking)
      return;
    auto text = str(*delta, "thinking");
    if (text.empty())
      return;
    if (i != blocks_.end())
      grow_thinking(i->second.thinking, &thinking_block::thinking, text);
    reasoning_ += text;
    streamed_ = true;
    out.on_reasoning(text);
  } else if (kind == "signature_delta") {
    if (i == blocks_.end() || i->second.kind != block_kind::thinking)
      return;
    grow_thinking(i->second.thinking, &thinking_block::signature, str(*delta, "signature"));
  } else if (kind == "input_json_delta") {
    if (i == blocks_.end() || i->second.kind != block_kind::tool)
      return; // e.g. a server tool's input
    auto tool = i->second.tool;
    if (calls_closed_[tool])
      return;
    auto piece = str(*delta, "partial_json");
    if (piece.empty())
      return;
    calls_[tool].arguments += piece;
    sdk::tool_call_delta out_delta;
    out_delta.index = static_cast<int>(tool);
    out_delta.arguments = std::move(piece);
    streamed_ = true;
    out.on_tool_call(out_delta);
  }
  // citations_delta, compaction_delta, ...: ignored.
}

void stream_assembler::handle_block_stop(const json& data, stream_listener& out) {
  auto index = integer(data, "index").value_or(-1);
  auto i = blocks_.find(index);
  if (i == blocks_.end() || i->second.kind != block_kind::tool)
    return;
  auto tool = i->second.tool;
  if (calls_closed_[tool])
    return;
  calls_closed_[tool] = true;
  if (calls_[tool].arguments.empty()) {
    // A call without arguments: say so explicitly, so that the deltas add
    // up to the final arguments.
    calls_[tool].arguments = "{}";
    sdk::tool_call_delta delta;
    delta.index = static_cast<int>(tool);
    delta.arguments = "{}";
    out.on_tool_call(delta);
  }
}

void stream_assembler::handle_message_delta(const json& data, stream_listener& out) {
  if (auto delta = object(data, "delta")) {
    // `null` or absent: no reason yet (unknown unless a later delta says).
    if (auto i = delta->find("stop_reason"); i != delta->end() && i->is_string()) {
      stop_reason_ = sdk::repair_utf8(sdk::utf8_prefix(i->get<std::string>(), 64));
      finish_ = to_finish_reason(stop_reason_);
    }
  }
  if (auto u = object(data, "usage")) {
    read_usage(*u);
    out.on_usage(usage());
  }
}

void stream_assembler::read_usage(const json& x) {
  // Every count is cumulative: a present field replaces the previous value.
  if (auto n = integer(x, "input_tokens"))
    input_tokens_ = *n;
  if (auto n = integer(x, "cache_creation_input_tokens"))
    cache_creation_tokens_ = *n;
  if (auto n = integer(x, "cache_read_input_tokens"))
    cache_read_tokens_ = *n;
  if (auto n = integer(x, "output_tokens"))
    output_tokens_ = *n;
  if (auto details = object(x, "output_tokens_details"))
    if (auto n = integer(*details, "thinking_tokens"))
      thinking_tokens_ = *n;
}

sdk::usage stream_assembler::usage() const {
  // Anthropic's input_tokens excludes cached tokens; ours include them.
  sdk::usage result;
  result.input_tokens = input_tokens_ + cache_creation_tokens_ + cache_read_tokens_;
  result.cached_input_tokens = cache_read_tokens_;
  result.output_tokens = output_tokens_;
  result.reasoning_tokens = thinking_tokens_;
  return result;
}

sdk::chat_result stream_assembler::result() const {
  sdk::chat_result result;
  result.text = text_;
  result.reasoning = reasoning_;
  result.tool_calls = calls_;
  for (auto& call : result.tool_calls)
    if (call.arguments.empty())
      call.arguments = "{}";
  result.finish = finish_;
  result.usage = usage();
  result.model = model_;
  if (!thinking_dropped_)
    result.reasoning_state = encode_reasoning_state(thinking_);
  return result;
}

size_t stream_assembler::add_thinking(thinking_block x) {
  if (thinking_dropped_)
    return 0;
  if (thinking_.size() >= max_thinking_blocks) {
    thinking_dropped_ = true;
    thinking_.clear();
    return 0;
  }
  thinking_.push_back(std::move(x));
  thinking_bytes_ += thinking_.back().data.size();
  return thinking_.size() - 1;
}

void stream_assembler::grow_thinking(size_t pos, std::string thinking_block::*field,
                                     const std::string& piece) {
  if (thinking_dropped_ || pos >= thinking_.size() || piece.empty())
    return;
  thinking_bytes_ += piece.size();
  if (thinking_bytes_ > max_reasoning_state) {
    // A signed block cannot be cut: keep no state rather than a broken one.
    thinking_dropped_ = true;
    thinking_.clear();
    thinking_.shrink_to_fit();
    return;
  }
  thinking_[pos].*field += piece;
}

std::optional<std::string> stream_assembler::empty_answer() const {
  if (!calls_.empty() || text_.find_first_not_of(" \t\r\n") != std::string::npos
      || finish_ == sdk::finish_reason::length || finish_ == sdk::finish_reason::content_filter)
    return std::nullopt;
  std::string why = "anthropic: the model returned an empty answer (no text, "
                    "no tool call, stop reason ";
  why += stop_reason_.empty() ? std::string{"none"} : "`" + stop_reason_ + "`";
  if (!reasoning_.empty())
    why += ", " + std::to_string(reasoning_.size()) + " bytes of thinking only";
  else if (!thinking_.empty())
    why += ", redacted thinking only";
  why += ")";
  return why;
}

// -- stream_decoder -----------------------------------------------------------

stream_state stream_decoder::parsed(bool ok) {
  if (!ok && parser_.overflowed())
    return assembler_.abort(
      sdk::make_error(sdk::errc::invalid_response, "anthropic: stream event too large"));
  return assembler_.state();
}

stream_state stream_decoder::feed(std::string_view bytes, stream_listener& out) {
  if (assembler_.state() != stream_state::running)
    return assembler_.state();
  auto ok = parser_.feed(bytes, [this, &out](const sdk::sse_event& ev) {
    return assembler_.on_event(ev, out) == stream_state::running;
  });
  return parsed(ok);
}

stream_state stream_decoder::finish(stream_listener& out) {
  if (assembler_.state() != stream_state::running)
    return assembler_.state();
  auto ok = parser_.finish([this, &out](const sdk::sse_event& ev) {
    return assembler_.on_event(ev, out) == stream_state::running;
  });
  parsed(ok);
  if (assembler_.state() == stream_state::running)
    return assembler_.abort(sdk::make_error(sdk::errc::network, "anthropic: stream ended early "
                                                                "(no message_stop)"));
  return assembler_.state();
}

} // namespace quarry::plugins::llm_anthropic
