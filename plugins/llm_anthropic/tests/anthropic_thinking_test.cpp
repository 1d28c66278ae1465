// Unit tests of extended thinking in the `anthropic` plugin: the reasoning
// state recorded from streams and non-streamed answers, sending it back in
// request bodies, thinking with forced tool use, budgets, finish reasons,
// empty answers and the precedence of proven error causes.

#include "anthropic_config.hpp"
#include "anthropic_errors.hpp"
#include "anthropic_request.hpp"
#include "anthropic_stream.hpp"
#include "anthropic_thinking.hpp"

#include "anthropic_test_support.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace anthropic_thinking_test {

namespace {

namespace sdk = quarry::sdk;
namespace anth = quarry::plugins::llm_anthropic;
using nlohmann::json;
using quarry::test::messages_body;
using quarry::test::messages_stream;

struct null_listener : anth::stream_listener {
  std::string reasoning;
  void on_text(std::string_view) override {
    // nop
  }
  void on_reasoning(std::string_view delta) override {
    reasoning += delta;
  }
  void on_tool_call(const sdk::tool_call_delta&) override {
    // nop
  }
  void on_usage(const sdk::usage&) override {
    // nop
  }
};

// Decodes a whole stream, fed in pieces of up to 13 bytes.
anth::stream_decoder decode(const std::string& bytes, null_listener& out) {
  anth::stream_decoder dec;
  size_t piece = 1;
  for (size_t pos = 0; pos < bytes.size(); pos += piece, piece = piece % 13 + 1)
    dec.feed(std::string_view{bytes}.substr(pos, piece), out);
  dec.finish(out);
  return dec;
}

anth::config thinking_config(int64_t budget = 2048) {
  return anth::parse_config(
    {{"api_key", "k"}, {"model", "claude-test"}, {"thinking_budget", budget}});
}

sdk::chat_message message(sdk::role author, std::string content) {
  sdk::chat_message result;
  result.author = author;
  result.content = std::move(content);
  return result;
}

sdk::chat_message tool_result(std::string id, std::string content) {
  auto result = message(sdk::role::tool, std::move(content));
  result.tool_call_id = std::move(id);
  return result;
}

// A research step's request: a question, an assistant tool-use turn
// carrying `state`, its tool result, one tool and a forced tool choice.
sdk::chat_request tool_turn_request(std::string state) {
  sdk::chat_request req;
  req.messages.push_back(message(sdk::role::system, "You research."));
  req.messages.push_back(message(sdk::role::user, "Weather in Paris?"));
  auto a = message(sdk::role::assistant, "");
  a.reasoning = "The user wants Paris weather.";
  a.reasoning_state = std::move(state);
  a.tool_calls.push_back({"toolu_1", "get_weather", R"({"location":"Paris"})"});
  req.messages.push_back(a);
  req.messages.push_back(tool_result("toolu_1", "18C"));
  req.tools.push_back({"get_weather", "Weather.", json{{"type", "object"}}});
  req.choice = sdk::tool_choice::required;
  return req;
}

const json tool_use_block = {{"type", "tool_use"},
                             {"id", "toolu_1"},
                             {"name", "get_weather"},
                             {"input", {{"location", "Paris"}}}};

} // namespace

// -- the reasoning state ----------------------------------------------------------

TEST_CASE("anthropic thinking: a recorded-shape stream yields its signed blocks in order") {
  null_listener out;
  auto dec = decode(quarry::test::thinking_tool_stream, out);
  REQUIRE(dec.assembler().state() == anth::stream_state::done);
  auto res = dec.assembler().result();
  CHECK(res.reasoning == quarry::test::thinking_tool_stream_thinking);
  CHECK(out.reasoning == res.reasoning);
  CHECK(res.finish == sdk::finish_reason::tool_calls);
  REQUIRE(res.tool_calls.size() == 1);
  CHECK(json::parse(res.tool_calls[0].arguments) == json{{"location", "Paris"}});
  REQUIRE_FALSE(res.reasoning_state.empty());
  CHECK(json::parse(res.reasoning_state) == quarry::test::thinking_tool_stream_blocks());
  // It reads back as the same blocks.
  std::string why;
  auto blocks = anth::decode_reasoning_state(res.reasoning_state, why);
  REQUIRE_MESSAGE(blocks, why);
  REQUIRE(blocks->size() == 2);
  CHECK_FALSE((*blocks)[0].redacted);
  CHECK((*blocks)[0].thinking == quarry::test::thinking_tool_stream_thinking);
  CHECK((*blocks)[1].redacted);
  CHECK((*blocks)[1].after_tools == 0);
}

TEST_CASE("anthropic thinking: the recorded refusal stream keeps its signature") {
  null_listener out;
  auto dec = decode(
    quarry::test::anthropic_fixture("sdk_fixtures/fable-fallback__stream-a-refusal.sse"), out);
  REQUIRE(dec.assembler().state() == anth::stream_state::done);
  auto res = dec.assembler().result();
  auto state = json::parse(res.reasoning_state);
  REQUIRE(state.size() == 1);
  CHECK(state[0]["type"] == "thinking");
  CHECK(state[0]["thinking"] == res.reasoning);
  CHECK(state[0]["signature"]
        == "c3ludGhldGljLXNpZ25hdHVyZS1maXh0dXJlLWEtbm90LWEtcmVhbC1zaWduYXR1cmU=");
  // Streams without thinking keep no state.
  null_listener plain;
  auto dec2 = decode(
    quarry::test::anthropic_fixture("sdk_fixtures/fixtures__tool_use_response.sse"), plain);
  CHECK(dec2.assembler().result().reasoning_state.empty());
}

TEST_CASE("anthropic thinking: interleaved blocks remember the tool calls before them") {
  json content = {
    {{"type", "thinking"}, {"thinking", "First."}, {"signature", "s1"}},
    {{"type", "text"}, {"text", "Looking."}},
    {{"type", "tool_use"}, {"id", "toolu_a"}, {"name", "search"}, {"input", {{"q", "a"}}}},
    {{"type", "thinking"}, {"thinking", "Second."}, {"signature", "s2"}},
    {{"type", "redacted_thinking"}, {"data", "r3"}},
    {{"type", "tool_use"}, {"id", "toolu_b"}, {"name", "search"}, {"input", {{"q", "b"}}}}};
  null_listener out;
  auto dec = decode(messages_stream(content, "tool_use"), out);
  REQUIRE(dec.assembler().state() == anth::stream_state::done);
  auto res = dec.assembler().result();
  CHECK(res.reasoning == "First.Second.");
  auto state = json::parse(res.reasoning_state);
  REQUIRE(state.size() == 3);
  CHECK_FALSE(state[0].contains("after_tools"));
  CHECK(state[1]["after_tools"] == 1);
  CHECK(state[2]["after_tools"] == 1);

  // Sent back, the assistant turn is the content as the API sent it.
  sdk::chat_request req;
  req.messages.push_back(message(sdk::role::user, "Go."));
  auto a = message(sdk::role::assistant, res.text);
  a.reasoning_state = res.reasoning_state;
  a.tool_calls = res.tool_calls;
  req.messages.push_back(a);
  req.messages.push_back(tool_result("toolu_a", "A"));
  req.messages.push_back(tool_result("toolu_b", "B"));
  std::vector<std::string> warnings;
  auto body = anth::build_request_body(thinking_config(), req, warnings);
  CHECK(warnings.empty());
  CHECK(body["messages"][1]["content"] == content);
  CHECK(body.contains("thinking"));
}

TEST_CASE("anthropic thinking: a non-streamed answer records the same state") {
  auto content = quarry::test::thinking_tool_stream_blocks();
  content.push_back(tool_use_block);
  anth::stream_assembler a;
  null_listener out;
  REQUIRE(a.on_message(messages_body(content, "tool_use"), out) == anth::stream_state::done);
  auto res = a.result();
  CHECK(res.reasoning == quarry::test::thinking_tool_stream_thinking);
  CHECK(json::parse(res.reasoning_state) == quarry::test::thinking_tool_stream_blocks());
  CHECK(res.finish == sdk::finish_reason::tool_calls);
}

TEST_CASE("anthropic thinking: no state without a signature or beyond the size bound") {
  SUBCASE("a thinking block that never got its signature") {
    json content = {{{"type", "thinking"}, {"thinking", "Unsigned."}},
                    {{"type", "text"}, {"text", "Answer."}}};
    null_listener out;
    auto dec = decode(messages_stream(content, "end_turn"), out);
    REQUIRE(dec.assembler().state() == anth::stream_state::done);
    CHECK(dec.assembler().result().reasoning == "Unsigned.");
    CHECK(dec.assembler().result().reasoning_state.empty());
  }
  SUBCASE("thinking larger than max_reasoning_state") {
    std::string big(anth::max_reasoning_state / 2 + 10, 'x');
    json content = {{{"type", "thinking"}, {"thinking", big}, {"signature", "s1"}},
                    {{"type", "thinking"}, {"thinking", big}, {"signature", "s2"}},
                    {{"type", "text"}, {"text", "Answer."}}};
    anth::stream_assembler a;
    null_listener out;
    REQUIRE(a.on_message(messages_body(content, "end_turn"), out) == anth::stream_state::done);
    CHECK(a.result().reasoning.size() == 2 * big.size());
    CHECK(a.result().reasoning_state.empty());
    // One of them alone fits.
    content.erase(1);
    anth::stream_assembler b;
    REQUIRE(b.on_message(messages_body(content, "end_turn"), out) == anth::stream_state::done);
    CHECK_FALSE(b.result().reasoning_state.empty());
  }
}

TEST_CASE("anthropic thinking: malformed reasoning states decode to nothing") {
  const std::string bad[] = {
    "",
    "not json",
    "{}",
    "[]",
    R"({"type":"thinking","thinking":"a","signature":"s"})",
    R"([1])",
    R"([{"type":"thinking","thinking":"a"}])",
    R"([{"type":"thinking","thinking":"a","signature":""}])",
    R"([{"type":"thinking","thinking":5,"signature":"s"}])",
    R"([{"type":"redacted_thinking"}])",
    R"([{"type":"redacted_thinking","data":""}])",
    R"([{"type":"text","text":"a"}])",
    R"([{"type":"thinking","thinking":"a","signature":"s","extra":1}])",
    R"([{"type":"thinking","thinking":"a","signature":"s","after_tools":-1}])",
    R"([{"type":"thinking","thinking":"a","signature":"s","after_tools":"1"}])",
    R"([{"type":"thinking","thinking":"a","signature":"s","after_tools":2},)"
    R"({"type":"redacted_thinking","data":"d","after_tools":1}])",
    R"([{"type":"thinking","thinking":{"a":[1]},"signature":"s"}])",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]"
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    "[{\"type\":\"thinking\",\"thinking\":\"\xC3\x28\",\"signature\":\"s\"}]",
  };
  for (const auto& text : bad) {
    CAPTURE(text);
    std::string why;
    CHECK_FALSE(anth::decode_reasoning_state(text, why));
    CHECK_FALSE(why.empty());
  }
  std::string huge = R"([{"type":"redacted_thinking","data":")"
                     + std::string(anth::max_reasoning_state, 'd') + "\"}]";
  std::string why;
  CHECK_FALSE(anth::decode_reasoning_state(huge, why));
  CHECK(why.find("larger than") != std::string::npos);
}

// -- request bodies ----------------------------------------------------------------

TEST_CASE("anthropic thinking: tool-use turns send their blocks back first") {
  auto state = json::array({{{"type", "thinking"}, {"thinking", "Plan."}, {"signature", "sig-1"}},
                            {{"type", "redacted_thinking"}, {"data", "enc-2"}}})
                 .dump();
  auto req = tool_turn_request(state);
  std::vector<std::string> warnings;
  auto body = anth::build_request_body(thinking_config(), req, warnings);
  CHECK(warnings.empty());
  auto expected = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Plan.", "signature": "sig-1"},
      {"type": "redacted_thinking", "data": "enc-2"},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
       "input": {"location": "Paris"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C",
       "is_error": false}]}
  ])");
  CHECK(body["messages"] == expected);
  // Forced tool use with thinking: `auto` and thinking on.
  CHECK(body["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 2048}});
  CHECK(body["tool_choice"] == json{{"type", "auto"}});

  SUBCASE("text answers keep their blocks too, before the text") {
    req.messages.push_back(message(sdk::role::user, "And tomorrow?"));
    auto a = message(sdk::role::assistant, "Sunny.");
    a.reasoning_state = state;
    req.messages.insert(req.messages.begin() + 2, a);
    req.messages.insert(req.messages.begin() + 3, message(sdk::role::user, "Thanks."));
    auto b = anth::build_request_body(thinking_config(), req, warnings);
    CHECK(warnings.empty());
    CHECK(b["messages"][1]["content"]
          == json::parse(R"([{"type": "thinking", "thinking": "Plan.", "signature": "sig-1"},
                            {"type": "redacted_thinking", "data": "enc-2"},
                            {"type": "text", "text": "Sunny."}])"));
  }
  SUBCASE("without thinking no block is sent") {
    req.reasoning_effort = "none";
    auto b = anth::build_request_body(thinking_config(), req, warnings);
    CHECK_FALSE(b.contains("thinking"));
    CHECK(b["tool_choice"] == json{{"type", "any"}});
    CHECK(b["messages"][1]["content"] == json::array({tool_use_block}));
    auto plain = anth::parse_config({{"api_key", "k"}, {"model", "claude-test"}});
    req.reasoning_effort.clear();
    CHECK(anth::build_request_body(plain, req, warnings)["messages"][1]["content"]
          == json::array({tool_use_block}));
    CHECK(warnings.empty());
  }
}

TEST_CASE("anthropic thinking: a tool turn without its blocks turns thinking off") {
  const std::string unusable[] = {
    "",                                                                        // never recorded
    "garbage",                                                                 // not JSON
    R"([{"type":"thinking","thinking":"x"}])",                                 // no signature
    R"([{"type":"thinking","thinking":"x","signature":"s","after_tools":1}])", // after the last call
  };
  for (const auto& state : unusable) {
    CAPTURE(state);
    auto req = tool_turn_request(state);
    std::vector<std::string> warnings;
    auto body = anth::build_request_body(thinking_config(), req, warnings);
    // Never a broken block, and thinking off as the API requires.
    CHECK(body["messages"][1]["content"] == json::array({tool_use_block}));
    CHECK_FALSE(body.contains("thinking"));
    CHECK(body["tool_choice"] == json{{"type", "any"}});
    CHECK_FALSE(anth::tool_turn_lacks_thinking(json::array()));
    REQUIRE_FALSE(warnings.empty());
    CHECK(warnings.back().find("without extended thinking") != std::string::npos);
    if (!state.empty()) {
      REQUIRE(warnings.size() == 2);
      CHECK(warnings[0].find("message 2") != std::string::npos);
    }
  }
  SUBCASE("a new user question starts a new turn: thinking stays on") {
    auto req = tool_turn_request("");
    req.messages.push_back(message(sdk::role::assistant, "18C in Paris."));
    req.messages.push_back(message(sdk::role::user, "And Rome?"));
    std::vector<std::string> warnings;
    auto body = anth::build_request_body(thinking_config(), req, warnings);
    CHECK(body.contains("thinking"));
    CHECK(warnings.empty());
  }
  SUBCASE("merged assistant messages keep blocks only at the start") {
    auto state = json::array({{{"type", "thinking"}, {"thinking", "P"}, {"signature", "s"}}})
                   .dump();
    auto req = tool_turn_request(state);
    auto second = message(sdk::role::assistant, "");
    second.reasoning_state = state;
    second.tool_calls.push_back({"toolu_2", "get_weather", "{}"});
    req.messages.insert(req.messages.begin() + 3, second);
    req.messages.push_back(tool_result("toolu_2", "n/a"));
    std::vector<std::string> warnings;
    auto body = anth::build_request_body(thinking_config(), req, warnings);
    const auto& content = body["messages"][1]["content"];
    REQUIRE(content.size() == 3);
    CHECK(content[0]["type"] == "thinking");
    CHECK(content[1]["type"] == "tool_use");
    CHECK(content[2]["type"] == "tool_use");
    CHECK(body.contains("thinking"));
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("merged") != std::string::npos);
  }
}

TEST_CASE("anthropic thinking: budgets and max_tokens make a valid request") {
  sdk::chat_request req;
  req.messages.push_back(message(sdk::role::user, "Hi"));
  std::vector<std::string> warnings;
  struct row {
    int64_t budget;
    int64_t requested;
    int64_t sent;
  };
  // max_tokens must exceed budget_tokens; below budget + 1024 the budget is
  // added on top (the caller's answer room stays).
  const row rows[] = {
    {2048, 1024, 3072}, {2048, 2048, 4096}, {2048, 3071, 5119},
    {2048, 3072, 3072}, {2048, 8192, 8192}, {16000, 0, 24192}, // default 8192
    {1024, 1, 1025},
  };
  for (const auto& r : rows) {
    CAPTURE(r.budget);
    CAPTURE(r.requested);
    req.max_tokens = r.requested;
    auto body = anth::build_request_body(thinking_config(r.budget), req, warnings);
    CHECK(body["max_tokens"] == r.sent);
    CHECK(body["thinking"]["budget_tokens"] == r.budget);
    CHECK(body["max_tokens"].get<int64_t>() > body["thinking"]["budget_tokens"].get<int64_t>());
  }
}

// -- finish reasons and empty answers -----------------------------------------------

TEST_CASE("anthropic thinking: an absent stop reason is unknown, never stop") {
  json content = {{{"type", "text"}, {"text", "Half an answer"}}};
  null_listener out;
  auto dec = decode(messages_stream(content, nullptr), out);
  REQUIRE(dec.assembler().state() == anth::stream_state::done);
  CHECK(dec.assembler().result().finish == sdk::finish_reason::unknown);
  anth::stream_assembler a;
  auto body = messages_body(content, nullptr);
  body.erase("stop_reason");
  REQUIRE(a.on_message(body, out) == anth::stream_state::done);
  CHECK(a.result().finish == sdk::finish_reason::unknown);
  anth::stream_assembler b;
  REQUIRE(b.on_message(messages_body(content, "pause_turn"), out) == anth::stream_state::done);
  CHECK(b.result().finish == sdk::finish_reason::other);
}

TEST_CASE("anthropic thinking: empty answers fail alike streamed and not") {
  auto thinking_only = json::array(
    {{{"type", "thinking"}, {"thinking", "Hmm."}, {"signature", "s"}}});
  struct row {
    json content;
    json stop_reason;
    bool empty;
    const char* says;
  };
  const row rows[] = {
    {thinking_only, "end_turn", true, "4 bytes of thinking only"},
    {json::array(), "end_turn", true, "stop reason `end_turn`"},
    {json::array(), nullptr, true, "stop reason none"},
    {json::array({{{"type", "text"}, {"text", " \n\t"}}}), "end_turn", true, "no text"},
    {json::array({{{"type", "redacted_thinking"}, {"data", "d"}}}), "pause_turn", true,
     "redacted thinking only"},
    // The stop reason explains it: the host decides.
    {thinking_only, "max_tokens", false, ""},
    {json::array(), "refusal", false, ""},
    {json::array({{{"type", "text"}, {"text", "ok"}}}), nullptr, false, ""},
    {json::array({tool_use_block}), "tool_use", false, ""},
  };
  for (const auto& r : rows) {
    CAPTURE(r.content.dump());
    CAPTURE(r.stop_reason.dump());
    null_listener out;
    auto dec = decode(messages_stream(r.content, r.stop_reason), out);
    anth::stream_assembler a;
    a.on_message(messages_body(r.content, r.stop_reason), out);
    const anth::stream_assembler* both[] = {&dec.assembler(), &a};
    for (const auto* x : both) {
      if (!r.empty) {
        CHECK(x->state() == anth::stream_state::done);
        continue;
      }
      REQUIRE(x->state() == anth::stream_state::failed);
      CHECK(x->failure()->code == sdk::errc::empty_response);
      CHECK(x->failure()->retryable());
      CHECK(x->failure()->message.find("the model returned an empty answer") != std::string::npos);
      CHECK(x->failure()->message.find(r.says) != std::string::npos);
    }
  }
}

// -- error causes over wrappers -----------------------------------------------------

TEST_CASE("anthropic thinking: a proven cause wins over the wrapper and is not retried") {
  auto body = [](const char* type, const char* message) {
    return json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump();
  };
  struct row {
    int status;
    std::string body;
    sdk::errc code;
  };
  const row rows[] = {
    {529, body("overloaded_error", "prompt is too long: 210000 tokens > 200000 maximum"),
     sdk::errc::context_too_long},
    {500,
     body("api_error",
          "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000"),
     sdk::errc::context_too_long},
    {400,
     body("invalid_request_error",
          "Your credit balance is too low to access the Anthropic API. Please go "
          "to Plans & Billing to upgrade or purchase credits."),
     sdk::errc::quota},
    {429, body("rate_limit_error", "Your credit balance is too low"), sdk::errc::quota},
    {503, body("api_error", "model not found: claude-nope"), sdk::errc::not_found},
    {502, body("api_error", "upstream said: invalid x-api-key"), sdk::errc::auth},
    {502, "<html><body>Bad gateway: the prompt is too long</body></html>",
     sdk::errc::context_too_long},
    // A gateway's envelope (LiteLLM / OpenRouter shape).
    {502, quarry::test::field_case("gateway-context-overflow/body.json"),
     sdk::errc::context_too_long},
    {500,
     R"({"error":{"message":"Provider returned error","code":500,)"
     R"("metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",)"
     R"(\"message\":\"prompt is too long: 250000 tokens\"}}"}}})",
     sdk::errc::context_too_long},
    // Nothing proven: the wrapper's class stands.
    {529, body("overloaded_error", "Overloaded"), sdk::errc::overloaded},
    {500, body("api_error", "Internal server error"), sdk::errc::server_error},
    {429,
     body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
     sdk::errc::rate_limited},
  };
  for (const auto& r : rows) {
    CAPTURE(r.status);
    CAPTURE(r.body);
    auto err = anth::classify_http_error(r.status, {{"x-should-retry", "true"}}, r.body);
    CHECK(err.code == r.code);
    CHECK(err.http_status == r.status);
    bool proven = r.code != sdk::errc::overloaded && r.code != sdk::errc::server_error
                  && r.code != sdk::errc::rate_limited;
    CHECK(err.retryable() == !proven);
  }
  SUBCASE("inside a 200: a JSON body and a stream event") {
    auto envelope = quarry::test::field_case("gateway-context-overflow/body.json");
    anth::stream_assembler a;
    null_listener out;
    REQUIRE(a.on_message(json::parse(envelope), out) == anth::stream_state::failed);
    CHECK(a.failure()->code == sdk::errc::context_too_long);
    CHECK_FALSE(a.failure()->retryable());
    CHECK(a.failure()->message.find("maximum context length is 32768 tokens") != std::string::npos);
    anth::stream_decoder dec;
    REQUIRE(dec.feed("data: " + json::parse(envelope).dump() + "\n\n", out)
            == anth::stream_state::failed);
    CHECK(dec.assembler().failure()->code == sdk::errc::context_too_long);
    // Relayed 502 without a proven cause: a server error.
    anth::stream_assembler b;
    REQUIRE(b.on_message(json::parse(R"({"error":{"message":"upstream hiccup","code":502}})"), out)
            == anth::stream_state::failed);
    CHECK(b.failure()->code == sdk::errc::server_error);
    CHECK(b.failure()->retryable());
  }
}

} // namespace anthropic_thinking_test
