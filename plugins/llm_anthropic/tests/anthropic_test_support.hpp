// What the `anthropic` plugin's tests share: its recorded fixtures.

#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace quarry::test {

/// The bytes of a recorded Anthropic Messages fixture, `rel` below the
/// fixtures' `llm/anthropic_messages/` folder; fails the test when missing.
inline std::string anthropic_fixture(const std::string& rel) {
  std::ifstream in{std::string{QUARRY_FIXTURES_DIR} + "/llm/anthropic_messages/" + rel,
                   std::ios::binary};
  REQUIRE_MESSAGE(in.good(), "missing fixture " << rel);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The bytes of a field case, `rel` below `../shared/field-cases/` (beside
/// the fixtures); fails the test when missing.
inline std::string field_case(const std::string& rel) {
  std::ifstream in{std::string{QUARRY_FIXTURES_DIR} + "/../field-cases/" + rel, std::ios::binary};
  REQUIRE_MESSAGE(in.good(), "missing field case " << rel);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// One server-sent event in the wire shape of the Messages API:
/// `event: <type>`, `data: <compact JSON>`, a blank line.
inline std::string sse_event(const nlohmann::json& data) {
  return "event: " + data.at("type").get<std::string>() + "\ndata: " + data.dump() + "\n\n";
}

/// Streams a complete assistant message the way the Messages API does:
/// `message_start` (with `model`, `usage.input_tokens` and a null
/// `stop_reason`), a `ping`, then per content block `content_block_start`,
/// its deltas and `content_block_stop`, then `message_delta` with
/// `stop_reason` (JSON null when `stop_reason` is null) and the output
/// tokens, then `message_stop`. `content` holds the blocks as a non-streamed
/// message would: a `thinking` block streams its text as `thinking_delta`
/// pieces of at most 7 bytes and then one `signature_delta`; a
/// `redacted_thinking` block comes whole in its start; `text` as
/// `text_delta` pieces; `tool_use` as `input_json_delta` pieces of its
/// serialised `input`.
inline std::string messages_stream(const nlohmann::json& content, const nlohmann::json& stop_reason,
                                   const std::string& id = "msg_01Test") {
  using nlohmann::json;
  auto pieces = [](const std::string& x, size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < x.size(); i += n)
      out.push_back(x.substr(i, n));
    return out;
  };
  std::string out;
  out += sse_event({{"type", "message_start"},
                    {"message",
                     {{"id", id},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"content", json::array()},
                      {"model", "claude-sonnet-4-5-20250929"},
                      {"stop_reason", nullptr},
                      {"stop_sequence", nullptr},
                      {"usage", {{"input_tokens", 472}, {"output_tokens", 2}}}}}});
  out += sse_event({{"type", "ping"}});
  int index = 0;
  for (const auto& block : content) {
    auto type = block.at("type").get<std::string>();
    auto delta = [&](json d) {
      out += sse_event({{"type", "content_block_delta"}, {"index", index}, {"delta", d}});
    };
    if (type == "thinking") {
      out += sse_event(
        {{"type", "content_block_start"},
         {"index", index},
         {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
      for (const auto& piece : pieces(block.at("thinking").get<std::string>(), 7))
        delta({{"type", "thinking_delta"}, {"thinking", piece}});
      if (block.contains("signature"))
        delta({{"type", "signature_delta"}, {"signature", block.at("signature")}});
    } else if (type == "redacted_thinking") {
      out += sse_event(
        {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
    } else if (type == "text") {
      out += sse_event({{"type", "content_block_start"},
                        {"index", index},
                        {"content_block", {{"type", "text"}, {"text", ""}}}});
      for (const auto& piece : pieces(block.at("text").get<std::string>(), 5))
        delta({{"type", "text_delta"}, {"text", piece}});
    } else if (type == "tool_use") {
      auto head = block;
      head["input"] = json::object();
      out += sse_event(
        {{"type", "content_block_start"}, {"index", index}, {"content_block", head}});
      delta({{"type", "input_json_delta"}, {"partial_json", ""}});
      for (const auto& piece : pieces(block.at("input").dump(), 6))
        delta({{"type", "input_json_delta"}, {"partial_json", piece}});
    }
    out += sse_event({{"type", "content_block_stop"}, {"index", index}});
    ++index;
  }
  out += sse_event({{"type", "message_delta"},
                    {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", nullptr}}},
                    {"usage", {{"output_tokens", 89}}}});
  out += sse_event({{"type", "message_stop"}});
  return out;
}

/// The same message as a non-streamed (`stream: false`) response body.
inline nlohmann::json messages_body(const nlohmann::json& content,
                                    const nlohmann::json& stop_reason) {
  return {{"id", "msg_01Test"},       {"type", "message"},
          {"role", "assistant"},      {"model", "claude-sonnet-4-5-20250929"},
          {"content", content},       {"stop_reason", stop_reason},
          {"stop_sequence", nullptr}, {"usage", {{"input_tokens", 472}, {"output_tokens", 89}}}};
}

/// A response in the exact shape of a recorded Messages stream with
/// extended thinking and tool use (as in Anthropic's streaming
/// documentation): a thinking block (thinking_delta pieces, then a
/// signature_delta), a redacted_thinking block, and a tool_use block whose
/// input arrives as input_json_delta pieces; stop reason `tool_use`.
inline constexpr const char* thinking_tool_stream = R"(event: message_start
data: {"type":"message_start","message":{"id":"msg_01ThinkTool","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants Paris weather. "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should call get_weather \u2014 caf\u00e9 style."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds="}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

)";

/// The thinking text of thinking_tool_stream.
inline const std::string thinking_tool_stream_thinking
  = "The user wants Paris weather. I should call get_weather \xE2\x80\x94 "
    "caf\xC3\xA9 style.";

/// The thinking blocks of thinking_tool_stream as content blocks: what the
/// plugin records as reasoning state and must send back.
inline nlohmann::json thinking_tool_stream_blocks() {
  return {{{"type", "thinking"},
           {"thinking", thinking_tool_stream_thinking},
           {"signature", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds="}},
          {{"type", "redacted_thinking"},
           {"data", "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}};
}

/// The recorded exchanges that hold HTTP error answers.
inline constexpr const char* recorded_error_exchanges[] = {
  "recorded_exchanges/_parse__TestAsyncParse__d743d628-16aa-4c9f-ae78-"
  "51deb578f746.json",
  "recorded_exchanges/_parse__TestAsyncStream__a8b7dbb8-2321-4624-abdb-"
  "7ba2136b5c38.json",
  "recorded_exchanges/tools__TestSyncRunTools__f59a9391-643b-422c-96dc-"
  "1f28bc7ea4d7.json"};

} // namespace quarry::test
