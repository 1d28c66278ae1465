// Hostile input to the OpenAI and Anthropic stream decoders: bytes that are
// not UTF-8 inside deltas, deeply nested JSON, bodies that are not event
// streams, streams without [DONE], and a second message inside an Anthropic
// stream.

#include "anthropic_stream.hpp"
#include "openai_stream.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace llm_stream_hostile_test {

namespace {

namespace sdk = quarry::sdk;
namespace openai = quarry::plugins::llm_openai;
namespace anth = quarry::plugins::llm_anthropic;

struct openai_collector : openai::stream_handler {
  std::string text;
  std::string reasoning;
  std::string arguments;
  void on_text(std::string_view x) override {
    text += x;
  }
  void on_reasoning(std::string_view x) override {
    reasoning += x;
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    arguments += x.arguments;
  }
  void on_usage(const sdk::usage&) override {
    // nop
  }
};

struct anthropic_collector : anth::stream_listener {
  std::string text;
  std::string arguments;
  void on_text(std::string_view x) override {
    text += x;
  }
  void on_reasoning(std::string_view) override {
    // nop
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    arguments += x.arguments;
  }
  void on_usage(const sdk::usage&) override {
    // nop
  }
};

// An OpenAI stream in the recorded format with `content` pieces given raw.
std::string openai_stream(const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces)
    out += "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
           "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{"
           "\"content\":\""
           + p + "\"},\"finish_reason\":null}]}\n\n";
  out += "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o\",\"choices\":[{"
         "\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
         "data: [DONE]\n\n";
  return out;
}

// An Anthropic stream in the recorded format with text pieces given raw.
std::string anthropic_stream(const std::vector<std::string>& pieces) {
  std::string out = "event: message_start\n"
                    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
                    "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\","
                    "\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
                    "event: content_block_start\n"
                    "data: {\"type\":\"content_block_start\",\"index\":0,"
                    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
  for (const auto& p : pieces)
    out += "event: content_block_delta\n"
           "data: {\"type\":\"content_block_delta\",\"index\":0,"
           "\"delta\":{\"type\":\"text_delta\",\"text\":\""
           + p + "\"}}\n\n";
  out += "event: content_block_stop\n"
         "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
         "event: message_delta\n"
         "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
         "\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n"
         "event: message_stop\n"
         "data: {\"type\":\"message_stop\"}\n\n";
  return out;
}

const std::string fffd{sdk::utf8_replacement};

std::string nested_arguments(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

} // namespace

TEST_CASE("openai decoder repairs bytes that are not UTF-8 inside deltas") {
  // 0xFF, a truncated three-byte sequence (E2 82 before the closing quote),
  // and an encoded surrogate, each inside a delta; fed whole and byte by byte.
  auto body = openai_stream({"a\xFF"
                             "b",
                             "euro \xE2\x82", "\xED\xA0\x80z"});
  for (size_t piece : {body.size(), size_t{1}}) {
    CAPTURE(piece);
    openai::stream_decoder dec;
    openai_collector out;
    for (size_t i = 0; i < body.size(); i += piece)
      dec.feed(std::string_view{body}.substr(i, piece), out);
    REQUIRE(dec.current() == openai::stream_decoder::state::done);
    auto expected = "a" + fffd + "b" + "euro " + fffd + fffd + fffd + fffd + fffd + "z";
    CHECK(out.text == expected);
    auto result = dec.result();
    CHECK(result.text == expected);
    CHECK(sdk::is_valid_utf8(result.text));
    // What used to throw type_error.316 now serialises.
    nlohmann::json j{{"text", result.text}};
    CHECK_NOTHROW(j.dump());
  }
}

TEST_CASE("openai decoder repairs invalid UTF-8 in tool-call arguments and errors") {
  std::string body
    = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
      "\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"q\\\":\\\"x\xC3\"}}]}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
      "\"function\":{\"arguments\":\"\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
      "data: [DONE]\n\n";
  openai::stream_decoder dec;
  openai_collector out;
  REQUIRE(dec.feed(body, out) == openai::stream_decoder::state::done);
  auto result = dec.result();
  REQUIRE(result.tool_calls.size() == 1);
  CHECK(result.tool_calls[0].arguments == "{\"q\":\"x" + fffd + "\"}");
  // An error event whose message holds a stray byte.
  openai::stream_decoder failing;
  failing.feed("event: error\ndata: {\"error\":{\"message\":\"bad \xFE byte\","
               "\"type\":\"server_error\"}}\n\n",
               out);
  REQUIRE(failing.current() == openai::stream_decoder::state::failed);
  CHECK(sdk::is_valid_utf8(failing.failure()->message));
  CHECK(failing.failure()->message.find("bad " + fffd + " byte") != std::string::npos);
  // A chunk that is not JSON and holds invalid UTF-8: the message is valid.
  openai::stream_decoder broken;
  broken.feed("data: {not json \xFF\xFE}\n\n", out);
  REQUIRE(broken.current() == openai::stream_decoder::state::failed);
  CHECK(broken.failure()->code == sdk::errc::invalid_response);
  CHECK(sdk::is_valid_utf8(broken.failure()->message));
}

TEST_CASE("anthropic decoder repairs bytes that are not UTF-8 inside deltas") {
  auto body = anthropic_stream({"a\xFF"
                                "b",
                                "euro \xE2\x82", "ok"});
  for (size_t piece : {body.size(), size_t{1}}) {
    CAPTURE(piece);
    anth::stream_decoder dec;
    anthropic_collector out;
    for (size_t i = 0; i < body.size(); i += piece)
      dec.feed(std::string_view{body}.substr(i, piece), out);
    REQUIRE(dec.assembler().state() == anth::stream_state::done);
    auto expected = "a" + fffd + "b" + "euro " + fffd + fffd + "ok";
    CHECK(out.text == expected);
    CHECK(dec.assembler().result().text == expected);
  }
  // An error event with a stray byte in its message.
  anth::stream_decoder failing;
  anthropic_collector out;
  failing.feed("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
               "\"overloaded_error\",\"message\":\"busy \xFF\"}}\n\n",
               out);
  REQUIRE(failing.assembler().state() == anth::stream_state::failed);
  CHECK(failing.assembler().failure()->code == sdk::errc::overloaded);
  CHECK(sdk::is_valid_utf8(failing.assembler().failure()->message));
}

TEST_CASE("stream decoders reject chunks nested 60,000 deep without crashing") {
  auto deep = nested_arguments(60000);
  SUBCASE("openai: nested JSON value as arguments") {
    openai::stream_decoder dec;
    openai_collector out;
    std::string body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{"
                       "\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\","
                       "\"arguments\":"
                       + deep + "}}]}}]}\n\n";
    dec.feed(body, out);
    REQUIRE(dec.current() == openai::stream_decoder::state::failed);
    CHECK(dec.failure()->code == sdk::errc::invalid_response);
    CHECK(dec.failure()->message.find("nested deeper than") != std::string::npos);
  }
  SUBCASE("openai: nested text inside the arguments string passes as text") {
    // Inside a JSON string the brackets are just characters.
    openai::stream_decoder dec;
    openai_collector out;
    std::string body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{"
                       "\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\","
                       "\"arguments\":\""
                       + deep
                       + "\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
                         "data: [DONE]\n\n";
    REQUIRE(dec.feed(body, out) == openai::stream_decoder::state::done);
    CHECK(dec.result().tool_calls.at(0).arguments == deep);
  }
  SUBCASE("openai: deep usage and error bodies") {
    openai::stream_decoder dec;
    openai_collector out;
    dec.feed("data: {\"choices\":[],\"usage\":" + deep + "}\n\n", out);
    CHECK(dec.current() == openai::stream_decoder::state::failed);
    auto err = openai::classify_error(400, {}, std::string_view{deep});
    CHECK(err.code == sdk::errc::bad_request);
  }
  SUBCASE("anthropic") {
    anth::stream_decoder dec;
    anthropic_collector out;
    std::string body = "event: content_block_delta\n"
                       "data: {\"type\":\"content_block_delta\",\"index\":0,"
                       "\"delta\":"
                       + deep + "}\n\n";
    dec.feed(body, out);
    REQUIRE(dec.assembler().state() == anth::stream_state::failed);
    CHECK(dec.assembler().failure()->code == sdk::errc::invalid_response);
    CHECK(dec.assembler().failure()->message.find("nested deeper than") != std::string::npos);
  }
}

TEST_CASE("openai decoder tells a body that is not an event stream from a "
          "truncated one") {
  openai_collector out;
  SUBCASE("an HTML page") {
    openai::stream_decoder dec;
    dec.feed("<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n"
             "<body>Please sign in</body></html>\n",
             out);
    REQUIRE(dec.finish(out) == openai::stream_decoder::state::failed);
    CHECK(dec.failure()->code == sdk::errc::invalid_response);
    CHECK_FALSE(dec.failure()->retryable());
    CHECK(dec.failure()->message.find("not an event stream") != std::string::npos);
    CHECK(dec.failure()->message.find("Sign in") != std::string::npos);
  }
  SUBCASE("a stream cut before its end") {
    openai::stream_decoder dec;
    dec.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n", out);
    REQUIRE(dec.finish(out) == openai::stream_decoder::state::failed);
    CHECK(dec.failure()->code == sdk::errc::network);
  }
}

TEST_CASE("openai decoder ends a stream at finish reason plus usage without "
          "[DONE]") {
  openai::stream_decoder dec;
  openai_collector out;
  auto state = dec.feed(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    out);
  CHECK(state == openai::stream_decoder::state::running);
  state = dec.feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                   "\"completion_tokens\":1}}\n\n",
                   out);
  REQUIRE(state == openai::stream_decoder::state::done);
  CHECK_FALSE(dec.done_marker_seen());
  CHECK(dec.result().text == "Hi");
  CHECK(dec.result().usage.output_tokens == 1);
}

TEST_CASE("anthropic: a message_start for another message fails the stream") {
  std::string start1 = "event: message_start\n"
                       "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":"
                       "\"claude\",\"content\":[],\"usage\":{\"input_tokens\":5}}}\n\n";
  std::string tool_part
    = "event: content_block_start\n"
      "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
      "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"search\",\"input\":{}}}\n\n"
      "event: content_block_delta\n"
      "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
      "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": \\\"heat pu\"}}\n\n";
  std::string rest
    = "event: content_block_delta\n"
      "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
      "{\"type\":\"input_json_delta\",\"partial_json\":\"mps\\\"}\"}}\n\n"
      "event: content_block_stop\n"
      "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
      "event: message_delta\n"
      "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n"
      "event: message_stop\n"
      "data: {\"type\":\"message_stop\"}\n\n";
  SUBCASE("a different message") {
    auto start2 = start1;
    start2.replace(start2.find("msg_1"), 5, "msg_2");
    anth::stream_decoder dec;
    anthropic_collector out;
    dec.feed(start1 + tool_part + start2 + rest, out);
    REQUIRE(dec.assembler().state() == anth::stream_state::failed);
    CHECK(dec.assembler().failure()->code == sdk::errc::invalid_response);
    CHECK(dec.assembler().failure()->message.find("msg_2") != std::string::npos);
    CHECK(dec.assembler().failure()->message.find("msg_1") != std::string::npos);
  }
  SUBCASE("the same message again") {
    anth::stream_decoder dec;
    anthropic_collector out;
    dec.feed(start1 + tool_part + start1 + rest, out);
    REQUIRE(dec.assembler().state() == anth::stream_state::done);
    auto result = dec.assembler().result();
    REQUIRE(result.tool_calls.size() == 1);
    CHECK(result.tool_calls[0].arguments == "{\"q\": \"heat pumps\"}");
    CHECK(result.finish == sdk::finish_reason::tool_calls);
  }
}

namespace {

// Every callback of an OpenAI decoding in order, with the end state.
struct openai_log : openai::stream_handler {
  std::string log;
  void on_text(std::string_view x) override {
    log += "T[";
    log += x;
    log += "]";
  }
  void on_reasoning(std::string_view x) override {
    log += "R[";
    log += x;
    log += "]";
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    log += "C[" + std::to_string(x.index) + "|" + x.id + "|" + x.name + "|" + x.arguments + "]";
  }
  void on_usage(const sdk::usage& x) override {
    log += "U[" + std::to_string(x.input_tokens) + "," + std::to_string(x.output_tokens) + ","
           + std::to_string(x.reasoning_tokens) + "," + std::to_string(x.cached_input_tokens) + "]";
  }
};

// Decodes `body` (an SSE body) and describes everything that came out.
std::string decode_openai(std::string_view body, bool trees_only) {
  openai_log seen;
  openai::stream_decoder dec;
  dec.read_chunks_as_trees(trees_only);
  dec.feed(body, seen);
  dec.finish(seen);
  auto r = dec.result();
  std::string out = seen.log;
  out += "|state " + std::to_string(static_cast<int>(dec.current()));
  if (dec.failure())
    out += "|failure " + std::to_string(static_cast<int>(dec.failure()->code)) + " "
           + dec.failure()->message;
  out += "|text " + r.text + "|reasoning " + r.reasoning + "|model " + r.model + "|finish "
         + std::to_string(static_cast<int>(r.finish)) + "|choice "
         + std::to_string(dec.choice_seen()) + "|streamed " + std::to_string(dec.streamed());
  for (const auto& c : r.tool_calls)
    out += "|call " + c.id + " " + c.name + " " + c.arguments;
  return out;
}

} // namespace

TEST_CASE("openai decoder: the one-pass chunk reader gives what reading each chunk into a tree "
          "gives") {
  // Odd chunks, each followed by a normal end: members given twice (the last
  // one counts), values of other types, `message` instead of `delta`,
  // indices of every number type, elements that are not objects, errors
  // that are null or not, nesting, and things the tree must decode.
  std::vector<std::string> chunks = {
    R"({"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]})",
    R"({"model":"m","model":"n","choices":[{"delta":{"content":"a","content":"b"}}]})",
    R"({"model":7,"choices":[{"delta":{"content":null,"refusal":"no"}}]})",
    R"({"choices":[{"delta":"x","message":{"content":"from message"}}]})",
    R"({"choices":[{"delta":{"content":"d"},"message":{"content":"m"}}]})",
    R"({"choices":[{"message":{"content":"m"},"delta":{"content":"d"},"delta":null}]})",
    R"({"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]})",
    R"({"choices":[{"index":0.0,"delta":{"content":"a"}},{"index":-0.5,"delta":{"content":"b"}}]})",
    R"({"choices":[{"index":18446744073709551615,"delta":{"content":"big"}}]})",
    R"({"choices":[{"index":1e300,"delta":{"content":"huge"}}]})",
    R"({"choices":[{"index":"0","delta":{"content":"string index"}}]})",
    R"({"choices":[{"index":0,"index":2,"delta":{"content":"last index"}}]})",
    R"({"choices":[1,"x",null,[{"delta":{"content":"nested"}}],{"delta":{"content":"ok"}}]})",
    R"({"choices":{"0":{"delta":{"content":"object"}}}})",
    R"({"choices":[{"delta":{"content":"first"}}],"choices":[{"delta":{"content":"second"}}]})",
    R"({"choices":[{"delta":{"reasoning_content":"rc","reasoning":"r","content":"c"}}]})",
    R"({"choices":[{"delta":{"reasoning":"r only"}}]})",
    R"({"choices":[{"delta":{"reasoning_content":"","reasoning":"r"}}]})",
    R"({"choices":[{"delta":{"content":{"text":"obj"},"extra":[[[{"content":"deep"}]]]}}]})",
    R"({"choices":[{"delta":{},"finish_reason":"stop"}]})",
    R"({"choices":[{"delta":{},"finish_reason":"stop","finish_reason":null}]})",
    R"({"choices":[{"delta":{},"finish_reason":"ERROR"}]})",
    R"({"choices":[{"delta":{},"finish_reason":"length"}],"usage":null})",
    R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}})",
    R"({"error":null,"choices":[{"delta":{"content":"fine"}}]})",
    R"({"error":false,"choices":[{"delta":{"content":"no"}}]})",
    R"({"error":{"message":"boom","type":"server_error"}})",
    R"({"error":{"message":"boom"},"error":null,"choices":[{"delta":{"content":"x"}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":"not an array","content":"t"}}]})",
    // Tool calls in every shape the accumulator takes: pieces without an
    // id, several in one delta, non-objects among them, ids and indices of
    // other types, names given twice, arguments as JSON values (the tree
    // dumps them), `function` twice or not an object, calls in `message`.
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}},{"index":1,"id":"b","function":{"name":"g","arguments":"{\"x\":1}"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[1,null,{"function":{"name":"f"}},"x"]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"id":7,"index":"0","function":{"name":3,"arguments":null}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0.5,"function":{"name":"f"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":99999999999999999999,"function":{"name":"f"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"name":"f"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","name":"g","arguments":"a","arguments":"b"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":{"q":"as object"}}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":["as","array"]}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"},"function":"not an object"}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"}}],"tool_calls":null}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"f"}}],"tool_calls":[{"id":"y","function":{"name":"g"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"id":"x","id":"y","function":{"name":"f"}}]}}]})",
    R"({"choices":[{"message":{"tool_calls":[{"id":"m","function":{"name":"f","arguments":"{}"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"id":"d","function":{"name":"f"}}]},"message":{"tool_calls":[{"id":"m","function":{"name":"g"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"extra_content":{"google":{"thought_signature":"s"}}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[],"content":"no calls"}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\u00e9\n"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":"tool_calls"}]})",
    // Usage in every shape: details, types, repeats, a null after an object.
    R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens_details":{"cached_tokens":1}}})",
    R"({"choices":[],"usage":{"prompt_tokens":"3","completion_tokens":null,"completion_tokens_details":null,"prompt_tokens_details":7}})",
    R"({"choices":[],"usage":{"prompt_tokens":3.5,"completion_tokens":4}})",
    R"({"choices":[],"usage":{"prompt_tokens":1e3}})",
    R"({"choices":[],"usage":{"prompt_tokens":18446744073709551615}})",
    R"({"choices":[],"usage":{"prompt_tokens":-4,"prompt_tokens":5}})",
    R"({"choices":[],"usage":{"prompt_tokens":3},"usage":null})",
    R"({"choices":[],"usage":null,"usage":{"completion_tokens":9}})",
    R"({"choices":[],"usage":"many"})",
    R"({"choices":[],"usage":[1,2]})",
    R"({"usage":{"prompt_tokens":2},"choices":[{"delta":{"content":"usage first"}}]})",
    R"({"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":2},"completion_tokens_details":{}}})",
    R"({"choices":[{"delta":{"content":"\u00e9\ud83d\ude00\n\"q\""}}]})",
    R"({"choices":[{"delta":{"content":"<think>hm</think>answer"}}]})",
    R"([{"choices":[]}])",
    R"("text")",
    R"({"choices":[{"delta":{"content":"cut")",
    R"({"choices":[]} trailing)",
    R"({"a":)" + std::string(300, '[') + std::string(300, ']') + "}",
    R"({"a":)" + std::string(255, '[') + std::string(255, ']')
      + R"(,"choices":[{"delta":{"content":"deep ok"}}]})",
    // Hostile text: bad escapes, lone surrogates, raw control bytes,
    // numbers JSON does not allow, a byte order mark, an unclosed container.
    R"({"choices":[{"delta":{"content":"bad \x escape"}}]})",
    R"({"choices":[{"delta":{"content":"lone \ud800 high"}}]})",
    R"({"choices":[{"delta":{"content":"lone \udc00 low"}}]})",
    R"({"choices":[{"delta":{"content":"pair \ud800\u0041"}}]})",
    R"({"choices":[{"delta":{"content":"short \u12"}}]})",
    "{\"choices\":[{\"delta\":{\"content\":\"raw \x01 byte\"}}]}",
    R"({"choices":[{"delta":{"content":"nul \u0000 escaped"}}]})",
    R"({"choices":[{"index":01,"delta":{"content":"leading zero"}}]})",
    R"({"choices":[{"index":-,"delta":{"content":"sign only"}}]})",
    R"({"choices":[{"index":1.,"delta":{"content":"dot"}}]})",
    R"({"choices":[{"index":1e,"delta":{"content":"exponent"}}]})",
    R"({"choices":[{"index":123456789012345678901234567890,"delta":{"content":"long"}}]})",
    R"({"created":-0,"choices":[{"index":-0,"delta":{"content":"minus zero"}}]})",
    "\xEF\xBB\xBF{\"choices\":[{\"delta\":{\"content\":\"bom\"}}]}",
    R"({"choices":[{"delta":{"content":"x"}},]})",
    R"({"choices":[{"delta":{"content":"x"}}],})",
    R"({"choices":[{"delta":{"content":"x"})",
    R"({"model":tru,"choices":[]})",
    R"({"model":nullx})",
    R"({"choices":[{"delta":{"content":"x")" + std::string(2000, ' ') + "}}]}",
    // Keys with escapes (read through the decoding path, not in place).
    R"({"choices":[{"delta":{"con\u0074ent":"escaped key"}}]})",
    R"({"choices":[{"de\"lta":{"content":"quote in a key"}}]})",
    R"({"choices":[{"delta":{"content\n":"newline in a key","content":"c"}}]})",
    "{\"choices\":[{\"delta\":{\"con\x01tent\":\"raw byte in a key\"}}]}",
  };
  // Strings read sixteen and eight bytes at a time: an escape, a quote,
  // UTF-8 and a raw control byte at every offset within two blocks, in
  // content and in a skipped member.
  for (size_t at = 0; at < 34; ++at)
    for (const char* odd : {"\\n", "\\\"", "\xC3\xA9", "\xF0\x9F\x98\x80", "\\u00e9", "\x02"}) {
      auto text = std::string(at, 'a') + odd + std::string(at % 9, 'b') + odd + "tail";
      chunks.push_back(R"({"id":")" + text + R"(","choices":[{"delta":{"content":")" + text
                       + R"("}}]})");
    }
  const std::string end = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                          "data: [DONE]\n\n";
  for (const auto& chunk : chunks) {
    CAPTURE(chunk);
    auto body = "data: " + chunk + "\n\n" + end;
    auto fast = decode_openai(body, false);
    auto tree = decode_openai(body, true);
    CHECK(fast == tree);
  }
  // Two calls streamed side by side, their pieces told apart by index, by
  // id, or by neither; with usage at the end.
  const std::vector<std::vector<std::string>> two_calls = {
    {R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":""}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":1}"}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"q\":2}"}}]}}]})",
     R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}})"},
    {R"({"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f"}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g"}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"tail"}}]}}]})"},
    {R"({"choices":[{"delta":{"tool_calls":[{"index":3,"id":"x","function":{"name":"f"}},{"index":3,"id":"y","function":{"name":"g"}}]}}]})",
     R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1"}},{"function":{"arguments":"2"}}]}}]})"},
  };
  for (const auto& stream : two_calls) {
    std::string body;
    for (const auto& chunk : stream)
      body += "data: " + chunk + "\n\n";
    CAPTURE(body);
    auto fast = decode_openai(body + end, false);
    CHECK(fast == decode_openai(body + end, true));
    CHECK(fast.find("|call ") != std::string::npos);
  }
  // A thought split across chunks at every byte (the think-split kind).
  const std::string thought = "<think>plan it</think>The answer.";
  for (size_t cut = 1; cut < thought.size(); ++cut) {
    std::string body;
    for (const auto& piece : {thought.substr(0, cut), thought.substr(cut)})
      body += "data: {\"choices\":[{\"delta\":{\"content\":" + nlohmann::json(piece).dump()
              + "}}]}\n\n";
    CAPTURE(cut);
    CHECK(decode_openai(body + end, false) == decode_openai(body + end, true));
  }
  // The recorded streams and the field cases' streams, whole.
  size_t streams = 0;
  auto compare_file = [&](const std::filesystem::path& file) {
    std::ifstream in{file, std::ios::binary};
    std::string body{std::istreambuf_iterator<char>{in}, {}};
    CAPTURE(file.string());
    auto fast = decode_openai(body, false);
    CHECK(fast == decode_openai(body, true));
    ++streams;
    return fast;
  };
  auto dir = std::filesystem::path{QUARRY_FIXTURES_DIR} / "llm" / "openai_chat";
  for (const auto& entry : std::filesystem::directory_iterator{dir})
    if (entry.path().extension() == ".sse")
      CHECK(compare_file(entry.path()).find("|state 1") != std::string::npos); // done
  CHECK(streams >= 12);
  auto cases = std::filesystem::path{QUARRY_FIXTURES_DIR} / ".." / "field-cases";
  for (const char* name : {"empty-choices-stream", "think-split"})
    compare_file(cases / name / "stream.sse");
  CHECK(streams >= 14);
}

} // namespace llm_stream_hostile_test
