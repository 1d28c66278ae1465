// Unit tests of the `anthropic` plugin's logic: configuration, request
// bodies, error classification and stream assembly against recorded streams.

#include "anthropic_config.hpp"
#include "anthropic_errors.hpp"
#include "anthropic_request.hpp"
#include "anthropic_stream.hpp"

#include "anthropic_test_support.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace anthropic_logic_test {

namespace {

namespace sdk = quarry::sdk;
namespace anth = quarry::plugins::llm_anthropic;
using nlohmann::json;

using quarry::test::anthropic_fixture;

// -- an independent oracle: what the `data:` lines of a fixture add up to -----

struct expected_call {
  std::string id;
  std::string name;
  std::string arguments;
};

struct oracle {
  std::string text;
  std::string reasoning;
  std::vector<expected_call> calls;
  std::string stop_reason;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::string model;
  bool saw_stop = false;
};

// Reads a fixture line by line (no SSE parser involved) and sums up the data
// payloads the way the Anthropic documentation describes them.
oracle compute_oracle(const std::string& sse) {
  oracle result;
  std::map<int64_t, size_t> tool_at; // content index -> call
  std::istringstream in{sse};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data:", 0) != 0)
      continue;
    auto payload = line.substr(5);
    auto data = json::parse(payload, nullptr, false);
    if (!data.is_object())
      continue;
    auto type = data.value("type", "");
    if (type == "message_start") {
      result.model = data["message"].value("model", "");
      result.input_tokens = data["message"]["usage"].value("input_tokens", 0);
      result.output_tokens = data["message"]["usage"].value("output_tokens", 0);
    } else if (type == "content_block_start") {
      if (data["content_block"]["type"] == "tool_use") {
        tool_at[data["index"].get<int64_t>()] = result.calls.size();
        result.calls.push_back({data["content_block"]["id"], data["content_block"]["name"], ""});
      }
    } else if (type == "content_block_delta") {
      auto& delta = data["delta"];
      if (delta["type"] == "text_delta")
        result.text += delta["text"].get<std::string>();
      else if (delta["type"] == "thinking_delta")
        result.reasoning += delta["thinking"].get<std::string>();
      else if (delta["type"] == "input_json_delta") {
        auto i = tool_at.find(data["index"].get<int64_t>());
        if (i != tool_at.end())
          result.calls[i->second].arguments += delta["partial_json"].get<std::string>();
      }
    } else if (type == "message_delta") {
      if (data["delta"]["stop_reason"].is_string())
        result.stop_reason = data["delta"]["stop_reason"];
      if (data.contains("usage")) {
        result.input_tokens = data["usage"].value("input_tokens", result.input_tokens);
        result.output_tokens = data["usage"].value("output_tokens", result.output_tokens);
      }
    } else if (type == "message_stop") {
      result.saw_stop = true;
    }
  }
  for (auto& call : result.calls)
    if (call.arguments.empty())
      call.arguments = "{}";
  return result;
}

// -- a listener that records everything --------------------------------------

struct recording_listener : anth::stream_listener {
  std::string text;
  std::string reasoning;
  std::map<int, sdk::tool_call> calls;
  std::vector<int> call_order;
  std::vector<sdk::usage> usages;

  void on_text(std::string_view delta) override {
    CHECK_FALSE(delta.empty());
    text += delta;
  }
  void on_reasoning(std::string_view delta) override {
    CHECK_FALSE(delta.empty());
    reasoning += delta;
  }
  void on_tool_call(const sdk::tool_call_delta& delta) override {
    auto& call = calls[delta.index];
    if (!delta.id.empty())
      call.id = delta.id;
    if (!delta.name.empty())
      call.name = delta.name;
    call.arguments += delta.arguments;
    call_order.push_back(delta.index);
  }
  void on_usage(const sdk::usage& counts) override {
    usages.push_back(counts);
  }
};

// One stream fixture and what it must produce beyond the oracle.
struct stream_case {
  const char* file;
  sdk::finish_reason finish;
  size_t tool_calls;
  int64_t input_tokens;
  int64_t output_tokens;
};

const stream_case stream_cases[] = {
  {"extracted/_parse__TestAsyncMessages__9381e2b7-7fa1-46f7-9f78-46dc8431ea9d"
   "__0_200.sse",
   sdk::finish_reason::stop, 0, 135, 10},
  {"extracted/_parse__TestAsyncStream__a8b7dbb8-2321-4624-abdb-7ba2136b5c38"
   "__2_200.sse",
   sdk::finish_reason::stop, 0, 135, 10},
  {"extracted/tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12"
   "__0_200.sse",
   sdk::finish_reason::tool_calls, 1, 656, 74},
  {"extracted/tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12"
   "__1_200.sse",
   sdk::finish_reason::stop, 0, 770, 38},
  {"extracted/tools__TestSyncRunTools__771c64ff-a0af-4cd9-8080-a5a539da7cb9"
   "__0_200.sse",
   sdk::finish_reason::tool_calls, 1, 656, 74},
  {"extracted/tools__TestSyncRunTools__771c64ff-a0af-4cd9-8080-a5a539da7cb9"
   "__1_200.sse",
   sdk::finish_reason::stop, 0, 770, 27},
  {"sdk_fixtures/fable-fallback__stream-a-refusal.sse", sdk::finish_reason::content_filter, 0, 28,
   106},
  {"sdk_fixtures/fable-fallback__stream-a-toolrefusal.sse", sdk::finish_reason::content_filter, 0,
   28, 106},
  {"sdk_fixtures/fable-fallback__stream-b-fallback.sse", sdk::finish_reason::stop, 0, 31, 547},
  {"sdk_fixtures/fixtures__basic_response.sse", sdk::finish_reason::stop, 0, 11, 6},
  {"sdk_fixtures/fixtures__compaction_response.sse", sdk::finish_reason::stop, 0, 30, 8},
  {"sdk_fixtures/fixtures__fallback_credit_response.sse", sdk::finish_reason::stop, 0, 25, 8},
  {"sdk_fixtures/fixtures__fallback_response.sse", sdk::finish_reason::stop, 0, 25, 8},
  {"sdk_fixtures/fixtures__incomplete_partial_json_response.sse", sdk::finish_reason::length, 1,
   450, 124},
  {"sdk_fixtures/fixtures__refusal_response.sse", sdk::finish_reason::content_filter, 0, 20, 0},
  {"sdk_fixtures/fixtures__tool_use_response.sse", sdk::finish_reason::tool_calls, 1, 377, 65},
};

// Feeds `bytes` in pieces of 1, 2, ... `max_piece` bytes (cycling).
anth::stream_state feed_in_pieces(anth::stream_decoder& dec, const std::string& bytes,
                                  size_t max_piece, anth::stream_listener& out) {
  size_t pos = 0;
  size_t piece = 1;
  auto state = anth::stream_state::running;
  while (pos < bytes.size()) {
    auto n = std::min(piece, bytes.size() - pos);
    state = dec.feed(std::string_view{bytes}.substr(pos, n), out);
    pos += n;
    piece = piece % max_piece + 1;
  }
  return state;
}

void check_against_oracle(const stream_case& c, const sdk::chat_result& res,
                          const recording_listener& rec) {
  auto expected = compute_oracle(anthropic_fixture(c.file));
  CHECK(expected.saw_stop);
  CHECK(res.text == expected.text);
  CHECK(rec.text == expected.text);
  CHECK(res.reasoning == expected.reasoning);
  CHECK(rec.reasoning == expected.reasoning);
  CHECK(res.model == expected.model);
  CHECK(res.finish == c.finish);
  CHECK(res.usage.input_tokens == c.input_tokens);
  CHECK(res.usage.output_tokens == c.output_tokens);
  CHECK(res.usage.input_tokens == expected.input_tokens);
  CHECK(res.usage.output_tokens == expected.output_tokens);
  REQUIRE(res.tool_calls.size() == c.tool_calls);
  REQUIRE(expected.calls.size() == c.tool_calls);
  REQUIRE(rec.calls.size() == c.tool_calls);
  for (size_t i = 0; i < c.tool_calls; ++i) {
    CAPTURE(i);
    const auto& got = res.tool_calls[i];
    CHECK(got.id == expected.calls[i].id);
    CHECK(got.name == expected.calls[i].name);
    CHECK(got.arguments == expected.calls[i].arguments);
    const auto& streamed = rec.calls.at(static_cast<int>(i));
    CHECK(streamed.id == got.id);
    CHECK(streamed.name == got.name);
    if (c.finish == sdk::finish_reason::tool_calls) {
      // Complete calls: the deltas add up to the final, valid arguments.
      CHECK(streamed.arguments == got.arguments);
      CHECK(json::parse(got.arguments) == json::parse(expected.calls[i].arguments));
    }
  }
  REQUIRE_FALSE(rec.usages.empty());
  CHECK(rec.usages.back().output_tokens == c.output_tokens);
}

} // namespace

// -- stream assembly ------------------------------------------------------------

TEST_CASE("anthropic: every stream fixture assembles to what its deltas say") {
  for (const auto& c : stream_cases) {
    CAPTURE(c.file);
    auto bytes = anthropic_fixture(c.file);
    for (size_t max_piece : {0u, 1u, 3u, 17u}) {
      CAPTURE(max_piece);
      anth::stream_decoder dec;
      recording_listener rec;
      auto state = max_piece == 0 ? dec.feed(bytes, rec)
                                  : feed_in_pieces(dec, bytes, max_piece, rec);
      // Some fixtures end without a final newline: only finish() sees the
      // last event then.
      if (state == anth::stream_state::running)
        state = dec.finish(rec);
      REQUIRE(state == anth::stream_state::done);
      CHECK_FALSE(dec.assembler().failure());
      CHECK(dec.assembler().streamed()
            == (!dec.assembler().result().text.empty()
                || !dec.assembler().result().tool_calls.empty()
                || !dec.assembler().result().reasoning.empty()));
      check_against_oracle(c, dec.assembler().result(), rec);
    }
  }
}

TEST_CASE("anthropic: specific contents of recorded streams") {
  auto run = [](const char* file) {
    anth::stream_decoder dec;
    recording_listener rec;
    dec.feed(anthropic_fixture(file), rec);
    dec.finish(rec);
    REQUIRE(dec.assembler().state() == anth::stream_state::done);
    return std::make_pair(dec.assembler().result(), rec);
  };
  SUBCASE("text with padded data lines") {
    auto [res, rec] = run("extracted/_parse__TestAsyncMessages__9381e2b7-7fa1-"
                          "46f7-9f78-46dc8431ea9d__0_200.sse");
    CHECK(res.text == "[12345,67890]");
    CHECK(res.model == "claude-sonnet-4-5-20250929");
    CHECK(res.usage.input_tokens == 135);
    CHECK(res.usage.cached_input_tokens == 0);
    // Usage after message_start (output 1) and after message_delta.
    REQUIRE(rec.usages.size() == 2);
    CHECK(rec.usages[0].output_tokens == 1);
    CHECK(rec.usages[1].output_tokens == 10);
  }
  SUBCASE("tool call split over many input_json_delta pieces") {
    auto [res, rec] = run("extracted/tools__TestSyncRunTools__555fb399-a54c-"
                          "455b-9ac5-2c9673f18e12__0_200.sse");
    REQUIRE(res.tool_calls.size() == 1);
    CHECK(res.tool_calls[0].id == "toolu_018acGYLtfR52q9yDbWaEdQZ");
    CHECK(res.tool_calls[0].name == "get_weather");
    CHECK(json::parse(res.tool_calls[0].arguments)
          == json{{"location", "San Francisco, CA"}, {"units", "f"}});
    CHECK(res.text.empty());
    CHECK(res.finish == sdk::finish_reason::tool_calls);
  }
  SUBCASE("UTF-8 text") {
    auto [res, rec] = run("extracted/tools__TestSyncRunTools__771c64ff-a0af-"
                          "4cd9-8080-a5a539da7cb9__1_200.sse");
    CHECK(res.text
          == "The weather in San Francisco, CA is currently **68\xC2\xB0"
             "F and Sunny**. It's a nice day!");
  }
  SUBCASE("text then a tool call at content index 1 is tool call 0") {
    auto [res, rec] = run("sdk_fixtures/fixtures__tool_use_response.sse");
    CHECK(res.text == "I'll check the current weather in Paris for you.");
    REQUIRE(res.tool_calls.size() == 1);
    CHECK(res.tool_calls[0].id == "toolu_01NRLabsLyVHZPKxbKvkfSMn");
    CHECK(json::parse(res.tool_calls[0].arguments) == json{{"location", "Paris"}});
    for (auto index : rec.call_order)
      CHECK(index == 0);
  }
  SUBCASE("thinking and a refusal") {
    auto [res, rec] = run("sdk_fixtures/fable-fallback__stream-a-refusal.sse");
    CHECK(res.reasoning.rfind("Simple educational question", 0) == 0);
    CHECK(res.reasoning.find("roll with it politely.") != std::string::npos);
    CHECK(res.text == "Hi");
    CHECK(res.finish == sdk::finish_reason::content_filter);
    CHECK(res.usage.reasoning_tokens == 67);
    CHECK(res.model == "claude-fable-5");
  }
  SUBCASE("server tool blocks are not client tool calls") {
    auto [res, rec] = run("sdk_fixtures/fable-fallback__stream-a-toolrefusal.sse");
    CHECK(res.tool_calls.empty());
    CHECK(rec.calls.empty());
    CHECK(res.text == "Here's a summary of this year's solar eclipses and how");
  }
  SUBCASE("a tool call cut by max_tokens keeps its broken arguments") {
    auto [res, rec] = run("sdk_fixtures/fixtures__incomplete_partial_json_response.sse");
    CHECK(res.finish == sdk::finish_reason::length);
    REQUIRE(res.tool_calls.size() == 1);
    CHECK(res.tool_calls[0].name == "make_file");
    CHECK(res.tool_calls[0].arguments.rfind("{\"filename\": \"taxes.txt\"", 0) == 0);
    CHECK(json::parse(res.tool_calls[0].arguments, nullptr, false).is_discarded());
    CHECK(rec.calls.at(0).arguments == res.tool_calls[0].arguments);
  }
  SUBCASE("refusal without text") {
    auto [res, rec] = run("sdk_fixtures/fixtures__refusal_response.sse");
    CHECK(res.text.empty());
    CHECK(res.finish == sdk::finish_reason::content_filter);
  }
}

TEST_CASE("anthropic: an error event fails the stream with its class") {
  anth::stream_decoder dec;
  recording_listener rec;
  auto state = dec.feed(anthropic_fixture("from_test_code/test_streaming__error_overloaded.sse"),
                        rec);
  REQUIRE(state == anth::stream_state::failed);
  const auto& err = *dec.assembler().failure();
  CHECK(err.code == sdk::errc::overloaded);
  CHECK(err.retryable());
  CHECK(err.message.find("Overloaded") != std::string::npos);
  CHECK_FALSE(dec.assembler().streamed());
  // Nothing after the end changes the outcome.
  CHECK(dec.feed("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", rec)
        == anth::stream_state::failed);
  CHECK(dec.finish(rec) == anth::stream_state::failed);
}

TEST_CASE("anthropic: mid-stream error types map to error classes") {
  struct row {
    const char* type;
    const char* message;
    sdk::errc code;
  };
  const row rows[] = {
    {"overloaded_error", "Overloaded", sdk::errc::overloaded},
    {"rate_limit_error", "slow down", sdk::errc::rate_limited},
    {"api_error", "Internal server error", sdk::errc::server_error},
    {"invalid_request_error", "messages: bad", sdk::errc::bad_request},
    {"invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum",
     sdk::errc::context_too_long},
    {"authentication_error", "invalid x-api-key", sdk::errc::auth},
    {"permission_error", "no access", sdk::errc::auth},
    {"not_found_error", "model: nope", sdk::errc::not_found},
    {"request_too_large", "too big", sdk::errc::bad_request},
    {"something_new", "?", sdk::errc::server_error},
  };
  for (const auto& r : rows) {
    CAPTURE(r.type);
    std::string bytes = "event: message_start\ndata: {\"type\":\"message_start\","
                        "\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n"
                        "event: content_block_start\ndata: {\"type\":\"content_block_start\","
                        "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                        "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
                        "event: error\ndata: ";
    bytes += json{{"type", "error"}, {"error", {{"type", r.type}, {"message", r.message}}}}.dump();
    bytes += "  \n\n";
    anth::stream_decoder dec;
    recording_listener rec;
    REQUIRE(dec.feed(bytes, rec) == anth::stream_state::failed);
    CHECK(dec.assembler().failure()->code == r.code);
    CHECK(dec.assembler().failure()->http_status == 0);
    CHECK(dec.assembler().streamed());
    CHECK(rec.text == "Hi");
  }
}

TEST_CASE("anthropic: a stream without message_stop ended early") {
  auto bytes = anthropic_fixture("sdk_fixtures/fixtures__tool_use_response.sse");
  auto cut = bytes.find("event: message_delta");
  REQUIRE(cut != std::string::npos);
  anth::stream_decoder dec;
  recording_listener rec;
  CHECK(dec.feed(bytes.substr(0, cut), rec) == anth::stream_state::running);
  CHECK(dec.finish(rec) == anth::stream_state::failed);
  const auto& err = *dec.assembler().failure();
  CHECK(err.code == sdk::errc::network);
  CHECK(err.message.find("stream ended early") != std::string::npos);
  CHECK(dec.assembler().streamed());
  SUBCASE("an empty body ended early too") {
    anth::stream_decoder empty;
    CHECK(empty.finish(rec) == anth::stream_state::failed);
    CHECK(empty.assembler().failure()->code == sdk::errc::network);
    CHECK_FALSE(empty.assembler().streamed());
  }
}

TEST_CASE("anthropic: tool indices, empty inputs, unknown and malformed events") {
  auto ev = [](const json& data) {
    return "event: " + data["type"].get<std::string>() + "\ndata: " + data.dump() + "\n\n";
  };
  std::string bytes;
  bytes += ev({{"type", "message_start"},
               {"message",
                {{"model", "m1"},
                 {"usage",
                  {{"input_tokens", 10},
                   {"cache_read_input_tokens", 100},
                   {"cache_creation_input_tokens", 5}}}}}});
  bytes += ev({{"type", "content_block_start"},
               {"index", 0},
               {"content_block", {{"type", "text"}, {"text", ""}}}});
  bytes += ev({{"type", "content_block_delta"},
               {"index", 0},
               {"delta", {{"type", "text_delta"}, {"text", "Two calls."}}}});
  bytes += ev({{"type", "content_block_stop"}, {"index", 0}});
  bytes += "event: brand_new_event\ndata: not json at all\n\n";
  bytes += ": a comment\n\n";
  for (int i = 1; i <= 2; ++i) {
    bytes += ev({{"type", "content_block_start"},
                 {"index", i},
                 {"content_block",
                  {{"type", "tool_use"},
                   {"id", "toolu_" + std::to_string(i)},
                   {"name", "t" + std::to_string(i)},
                   {"input", json::object()}}}});
    if (i == 2) {
      bytes += ev({{"type", "content_block_delta"},
                   {"index", i},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"q\":"}}}});
      bytes += ev({{"type", "content_block_delta"},
                   {"index", i},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", "1}"}}}});
    }
    bytes += ev({{"type", "content_block_stop"}, {"index", i}});
  }
  bytes += ev({{"type", "message_delta"},
               {"delta", {{"stop_reason", "tool_use"}}},
               {"usage", {{"output_tokens", 42}}}});
  bytes += ev({{"type", "message_stop"}});
  anth::stream_decoder dec;
  recording_listener rec;
  REQUIRE(dec.feed(bytes, rec) == anth::stream_state::done);
  auto res = dec.assembler().result();
  CHECK(res.text == "Two calls.");
  REQUIRE(res.tool_calls.size() == 2);
  CHECK(res.tool_calls[0].id == "toolu_1");
  CHECK(res.tool_calls[0].arguments == "{}");
  CHECK(res.tool_calls[1].id == "toolu_2");
  CHECK(res.tool_calls[1].name == "t2");
  CHECK(res.tool_calls[1].arguments == "{\"q\":1}");
  CHECK(rec.calls.at(0).arguments == "{}");
  CHECK(rec.calls.at(1).arguments == "{\"q\":1}");
  CHECK(rec.call_order == std::vector<int>{0, 0, 1, 1, 1});
  CHECK(res.finish == sdk::finish_reason::tool_calls);
  CHECK(res.usage.input_tokens == 115);
  CHECK(res.usage.cached_input_tokens == 100);
  CHECK(res.usage.output_tokens == 42);
  SUBCASE("a known event whose data is not JSON is an invalid response") {
    anth::stream_decoder bad;
    CHECK(bad.feed("event: content_block_delta\ndata: {oops\n\n", rec)
          == anth::stream_state::failed);
    CHECK(bad.assembler().failure()->code == sdk::errc::invalid_response);
  }
}

TEST_CASE("anthropic: stop reasons map to finish reasons") {
  CHECK(anth::to_finish_reason("end_turn") == sdk::finish_reason::stop);
  CHECK(anth::to_finish_reason("stop_sequence") == sdk::finish_reason::stop);
  CHECK(anth::to_finish_reason("tool_use") == sdk::finish_reason::tool_calls);
  CHECK(anth::to_finish_reason("max_tokens") == sdk::finish_reason::length);
  CHECK(anth::to_finish_reason("refusal") == sdk::finish_reason::content_filter);
  CHECK(anth::to_finish_reason("model_context_window_exceeded") == sdk::finish_reason::length);
  CHECK(anth::to_finish_reason("pause_turn") == sdk::finish_reason::other);
  CHECK(anth::to_finish_reason("whatever") == sdk::finish_reason::other);
  // No reason sent is never `stop`.
  CHECK(anth::to_finish_reason("") == sdk::finish_reason::unknown);
}

TEST_CASE("anthropic: a non-streamed message assembles like a stream") {
  auto body = json::parse(anthropic_fixture("extracted/tools__TestSyncRunTools__e075a6c2-"
                                            "de4d-4125-9709-f0e178058190__0_200.json"));
  anth::stream_assembler asm_;
  recording_listener rec;
  REQUIRE(asm_.on_message(body, rec) == anth::stream_state::done);
  auto res = asm_.result();
  CHECK(res.text
        == "I'll get the weather for each of those cities. Let me start by "
           "checking San Francisco.");
  REQUIRE(res.tool_calls.size() == 1);
  CHECK(res.tool_calls[0].id == "toolu_01LRanfq6DmHn1yDTB4d1SAh");
  CHECK(json::parse(res.tool_calls[0].arguments)
        == json{{"location", "San Francisco, CA"}, {"units", "f"}});
  CHECK(res.finish == sdk::finish_reason::tool_calls);
  CHECK(res.usage.input_tokens == 701);
  CHECK(res.usage.output_tokens == 93);
  CHECK(res.model == "claude-haiku-4-5-20251001");
  CHECK(rec.text == res.text);
}

// -- errors ---------------------------------------------------------------------

TEST_CASE("anthropic: recorded HTTP error exchanges are classified") {
  for (const char* file : quarry::test::recorded_error_exchanges) {
    CAPTURE(file);
    auto exchanges = json::parse(anthropic_fixture(file));
    size_t errors = 0;
    for (const auto& x : exchanges) {
      const auto& resp = x["response"];
      int status = resp["status_code"];
      if (status < 400)
        continue;
      ++errors;
      sdk::http_headers headers;
      for (const auto& [k, v] : resp["headers"].items())
        headers.emplace_back(k, v.get<std::string>());
      auto err = anth::classify_http_error(status, headers, resp["body"].dump());
      CHECK(err.http_status == status);
      if (status == 429) {
        CHECK(err.code == sdk::errc::rate_limited);
        CHECK(err.retry_hint == std::optional<bool>{true});
        CHECK(err.retryable());
        CHECK_FALSE(err.retry_after_ms);
        CHECK(err.message.find("rate_limit_error") != std::string::npos);
        CHECK(err.message.find("(request " + resp["body"]["request_id"].get<std::string>() + ")")
              != std::string::npos);
      } else {
        CHECK(status == 400);
        CHECK(err.code == sdk::errc::bad_request);
        CHECK(err.retry_hint == std::optional<bool>{false});
        CHECK_FALSE(err.retryable());
        CHECK(err.message.find("tool_use_id") != std::string::npos);
      }
    }
    CHECK(errors > 0);
  }
}

TEST_CASE("anthropic: HTTP errors by status, body and headers") {
  auto body = [](const char* type, const char* message) {
    return json{
      {"type", "error"}, {"error", {{"type", type}, {"message", message}}}, {"request_id", "req_1"}}
      .dump();
  };
  SUBCASE("529 overloaded") {
    auto err = anth::classify_http_error(529, {}, body("overloaded_error", "Overloaded"));
    CHECK(err.code == sdk::errc::overloaded);
    CHECK(err.retryable());
    CHECK(err.http_status == 529);
  }
  SUBCASE("429 with retry-after seconds") {
    auto err = anth::classify_http_error(429, {{"Retry-After", "7"}},
                                         body("rate_limit_error", "slow"));
    CHECK(err.code == sdk::errc::rate_limited);
    CHECK(err.retry_after_ms == std::optional<int64_t>{7000});
  }
  SUBCASE("429 with retry-after-ms") {
    auto err = anth::classify_http_error(429, {{"retry-after-ms", "1500"}, {"retry-after", "2"}},
                                         body("rate_limit_error", "slow"));
    CHECK(err.retry_after_ms == std::optional<int64_t>{1500});
  }
  SUBCASE("400 prompt too long") {
    auto err = anth::classify_http_error(
      400, {}, body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"));
    CHECK(err.code == sdk::errc::context_too_long);
    CHECK_FALSE(err.retryable());
  }
  SUBCASE("401, 403, 404, 413, 500") {
    CHECK(anth::classify_http_error(401, {}, body("authentication_error", "x")).code
          == sdk::errc::auth);
    CHECK(anth::classify_http_error(403, {}, body("permission_error", "x")).code
          == sdk::errc::auth);
    CHECK(anth::classify_http_error(404, {}, body("not_found_error", "x")).code
          == sdk::errc::not_found);
    CHECK(anth::classify_http_error(413, {}, body("request_too_large", "x")).code
          == sdk::errc::bad_request);
    CHECK(anth::classify_http_error(500, {}, body("api_error", "x")).code
          == sdk::errc::server_error);
  }
  SUBCASE("a body that is not JSON falls back to the status") {
    auto err = anth::classify_http_error(502, {}, "<html>Bad gateway</html>");
    CHECK(err.code == sdk::errc::server_error);
    CHECK(err.message.find("Bad gateway") != std::string::npos);
    CHECK(anth::classify_http_error(529, {}, "").code == sdk::errc::overloaded);
    CHECK(anth::classify_http_error(429, {}, "").code == sdk::errc::rate_limited);
  }
  SUBCASE("x-should-retry overrides the class") {
    auto err = anth::classify_http_error(500, {{"x-should-retry", "false"}},
                                         body("api_error", "x"));
    CHECK(err.code == sdk::errc::server_error);
    CHECK_FALSE(err.retryable());
  }
}

// -- configuration --------------------------------------------------------------

TEST_CASE("anthropic: configuration defaults and validation") {
  auto cfg = anth::parse_config({{"api_key", "sk-ant-1"}, {"model", "claude-x"}});
  CHECK(cfg.base_url == "https://api.anthropic.com");
  CHECK(cfg.messages_url() == "https://api.anthropic.com/v1/messages");
  CHECK(cfg.anthropic_version == "2023-06-01");
  CHECK(cfg.max_tokens == 8192);
  CHECK(cfg.context_window == 200000);
  CHECK(cfg.thinking_budget == 0);
  CHECK_FALSE(cfg.reasoning);
  CHECK_FALSE(cfg.temperature);
  CHECK(cfg.beta.empty());

  auto full = anth::parse_config({{"base_url", "http://127.0.0.1:9/prefix/"},
                                  {"model", "m"},
                                  {"anthropic_version", "2024-01-01"},
                                  {"beta", {"a-1", "b-2"}},
                                  {"max_tokens", 100},
                                  {"thinking_budget", 2048},
                                  {"headers", {{"x-extra", "1"}}},
                                  {"context_window", 1000},
                                  {"temperature", 0.5}});
  // Quarry's limits never reach the plugin: refused like any unknown key.
  for (const auto* limit : {"max_retries", "stall_timeout", "prices", "requests_per_minute"})
    CHECK_THROWS_AS(anth::parse_config({{"model", "m"}, {"api_key", "k"}, {limit, 1}}),
                    std::invalid_argument);
  CHECK(full.messages_url() == "http://127.0.0.1:9/prefix/v1/messages");
  CHECK(full.api_key.empty());
  CHECK(full.max_tokens == 100);
  CHECK(full.thinking_budget == 2048);
  CHECK(full.reasoning); // follows the thinking budget
  CHECK(full.thinking_enabled());
  CHECK(full.context_window == 1000);
  CHECK(full.temperature == std::optional<double>{0.5});
  auto headers = anth::make_headers(full);
  CHECK(sdk::find_header(headers, "anthropic-version") == std::optional<std::string>{"2024-01-01"});
  CHECK(sdk::find_header(headers, "anthropic-beta") == std::optional<std::string>{"a-1,b-2"});
  CHECK(sdk::find_header(headers, "x-extra") == std::optional<std::string>{"1"});
  CHECK_FALSE(sdk::find_header(headers, "x-api-key"));
  CHECK(sdk::find_header(anth::make_headers(cfg), "x-api-key")
        == std::optional<std::string>{"sk-ant-1"});

  auto off = anth::parse_config({{"base_url", "http://localhost:1"},
                                 {"model", "m"},
                                 {"thinking_budget", 1024},
                                 {"reasoning", false}});
  CHECK_FALSE(off.thinking_enabled());

  auto rejects = [](const json& x, const char* needle) {
    CAPTURE(x.dump());
    try {
      anth::parse_config(x);
      FAIL("accepted");
    } catch (const std::invalid_argument& ex) {
      CHECK(std::string{ex.what()}.find(needle) != std::string::npos);
    }
  };
  rejects({{"api_key", "k"}}, "`model`");
  rejects({{"model", "m"}}, "`api_key`");
  rejects({{"model", "m"}, {"api_key", ""}}, "`api_key`");
  rejects({{"model", "m"}, {"base_url", "https://api.anthropic.com/"}}, "`api_key`");
  rejects({{"model", "m"}, {"api_key", "k"}, {"max_token", 5}}, "max_token");
  rejects({{"model", "m"}, {"api_key", "k"}, {"max_tokens", 0}}, "max_tokens");
  rejects({{"model", "m"}, {"api_key", "k"}, {"max_tokens", "5"}}, "max_tokens");
  rejects({{"model", 5}, {"api_key", "k"}}, "`model`");
  rejects({{"model", "m"}, {"api_key", "k"}, {"beta", {1}}}, "beta");
  rejects({{"model", "m"}, {"api_key", "k"}, {"headers", {{"a", 1}}}}, "headers");
  rejects({{"model", "m"}, {"api_key", "k"}, {"base_url", "ftp://x"}}, "base_url");
  rejects({{"model", "m"}, {"api_key", "k"}, {"temperature", "hot"}}, "temperature");
  rejects({{"model", "m"}, {"api_key", "k"}, {"thinking_budget", -1}}, "thinking_budget");
  // The API's minimum budget is 1024 tokens.
  rejects({{"model", "m"}, {"api_key", "k"}, {"thinking_budget", 1}}, "1024");
  rejects({{"model", "m"}, {"api_key", "k"}, {"thinking_budget", 1023}}, "1024");
  CHECK(anth::parse_config({{"model", "m"}, {"api_key", "k"}, {"thinking_budget", 1024}})
          .thinking_enabled());
  rejects(json::array(), "object");
}

// -- request bodies -------------------------------------------------------------

namespace {

sdk::chat_message msg(sdk::role author, std::string content) {
  sdk::chat_message result;
  result.author = author;
  result.content = std::move(content);
  return result;
}

sdk::chat_message tool_msg(std::string id, std::string content) {
  auto result = msg(sdk::role::tool, std::move(content));
  result.tool_call_id = std::move(id);
  return result;
}

anth::config test_config() {
  return anth::parse_config({{"api_key", "k"}, {"model", "claude-test"}});
}

} // namespace

TEST_CASE("anthropic: the request body of a recorded tool round trip") {
  auto exchanges = json::parse(anthropic_fixture(
    "recorded_exchanges/tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12.json"));
  const auto& recorded = exchanges.at(1)["request"]["body"];
  sdk::chat_request req;
  req.model = recorded["model"];
  req.max_tokens = recorded["max_tokens"];
  req.messages.push_back(msg(sdk::role::user, recorded["messages"][0]["content"]));
  auto assistant = msg(sdk::role::assistant, "");
  const auto& use = recorded["messages"][1]["content"][0];
  assistant.tool_calls.push_back({use["id"], use["name"], use["input"].dump()});
  req.messages.push_back(assistant);
  const auto& result = recorded["messages"][2]["content"][0];
  req.messages.push_back(tool_msg(result["tool_use_id"], result["content"]));
  const auto& tool = recorded["tools"][0];
  req.tools.push_back({tool["name"], tool["description"], tool["input_schema"]});
  std::vector<std::string> warnings;
  auto body = anth::build_request_body(test_config(), req, warnings);
  CHECK(warnings.empty());
  // The recorded body, minus the SDK's `caller` annotation and plus our
  // explicit `is_error` and `tool_choice`.
  auto expected = recorded;
  expected["messages"][1]["content"][0].erase("caller");
  expected["messages"][2]["content"][0]["is_error"] = false;
  expected["tool_choice"] = {{"type", "auto"}};
  CHECK(body == expected);
}

TEST_CASE("anthropic: request bodies: system, alternation, tool results, options") {
  auto cfg = test_config();
  sdk::chat_request req;
  req.messages.push_back(msg(sdk::role::system, "Be brief."));
  req.messages.push_back(msg(sdk::role::user, "Q1"));
  req.messages.push_back(msg(sdk::role::system, "Cite sources."));
  req.messages.push_back(msg(sdk::role::user, "Q2"));
  auto a = msg(sdk::role::assistant, "Let me look.");
  a.tool_calls.push_back({"toolu_a", "search", R"({"q":"x"})"});
  a.tool_calls.push_back({"toolu_b", "open", "{not json"});
  a.tool_calls.push_back({"toolu_c", "now", ""});
  req.messages.push_back(a);
  req.messages.push_back(tool_msg("toolu_a", "result a"));
  req.messages.push_back(tool_msg("toolu_b", "result b"));
  req.messages.push_back(tool_msg("toolu_c", "result c"));
  req.messages.push_back(msg(sdk::role::user, "Thanks, go on."));
  std::vector<std::string> warnings;
  auto body = anth::build_request_body(cfg, req, warnings);
  CHECK(body["model"] == "claude-test");
  CHECK(body["system"] == "Be brief.\n\nCite sources.");
  CHECK(body["max_tokens"] == 8192);
  CHECK(body["stream"] == true);
  CHECK_FALSE(body.contains("tools"));
  CHECK_FALSE(body.contains("tool_choice"));
  CHECK_FALSE(body.contains("temperature"));
  CHECK_FALSE(body.contains("thinking"));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("toolu_b") != std::string::npos);
  auto expected = json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Q1"},
                                 {"type": "text", "text": "Q2"}]},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"q": "x"}},
      {"type": "tool_use", "id": "toolu_b", "name": "open", "input": {}},
      {"type": "tool_use", "id": "toolu_c", "name": "now", "input": {}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_a", "content": "result a", "is_error": false},
      {"type": "tool_result", "tool_use_id": "toolu_b", "content": "result b", "is_error": false},
      {"type": "tool_result", "tool_use_id": "toolu_c", "content": "result c", "is_error": false},
      {"type": "text", "text": "Thanks, go on."}]}
  ])");
  CHECK(body["messages"] == expected);

  SUBCASE("tool choice, temperature, max tokens, model override") {
    req.tools.push_back({"search", "Searches.", json::object()});
    req.temperature = 0.25;
    req.max_tokens = 300;
    req.model = "claude-other";
    for (auto [choice, name] : {std::pair{sdk::tool_choice::automatic, "auto"},
                                std::pair{sdk::tool_choice::required, "any"},
                                std::pair{sdk::tool_choice::none, "none"}}) {
      req.choice = choice;
      auto b = anth::build_request_body(cfg, req, warnings);
      CHECK(b["tool_choice"] == json{{"type", name}});
      CHECK(b["tools"] == json::parse(R"([{"name": "search", "description": "Searches.",
                  "input_schema": {"type": "object", "properties": {}}}])"));
      CHECK(b["temperature"] == 0.25);
      CHECK(b["max_tokens"] == 300);
      CHECK(b["model"] == "claude-other");
    }
  }
  SUBCASE("configured temperature") {
    auto c = anth::parse_config({{"api_key", "k"}, {"model", "m"}, {"temperature", 0.7}});
    CHECK(anth::build_request_body(c, req, warnings)["temperature"] == 0.7);
  }
  SUBCASE("extended thinking") {
    // Only the questions: the full history continues a tool-use turn that
    // has no thinking blocks, which turns thinking off (see
    // anthropic_thinking_test.cpp).
    req.messages.resize(4);
    auto c = anth::parse_config(
      {{"api_key", "k"}, {"model", "m"}, {"thinking_budget", 4000}, {"temperature", 0.7}});
    req.max_tokens = 1000;
    auto b = anth::build_request_body(c, req, warnings);
    CHECK(b["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 4000}});
    CHECK(b["max_tokens"] == 5000);
    CHECK_FALSE(b.contains("temperature"));
    req.max_tokens = 0;
    CHECK(anth::build_request_body(c, req, warnings)["max_tokens"] == 8192);
  }
}

TEST_CASE("anthropic: every recorded successful exchange assembles") {
  const char* const files[] = {
    "_parse__TestAsyncMessages__9381e2b7-7fa1-46f7-9f78-46dc8431ea9d.json",
    "_parse__TestAsyncMessages__d7092a7d-b723-4470-8fb0-da138cd103a1.json",
    "_parse__TestAsyncParse__924cfccc-c863-44ed-9838-c36b37416eaf.json",
    "_parse__TestAsyncParse__d743d628-16aa-4c9f-ae78-51deb578f746.json",
    "_parse__TestAsyncStream__a8b7dbb8-2321-4624-abdb-7ba2136b5c38.json",
    "_parse__TestSyncParse__bd7029d5-d8d4-4e06-be3a-2ac9c60803a6.json",
    "_parse__TestSyncParse__c11eefc7-fff0-4466-8453-42eef73b8876.json",
    "tools__TestSyncRunTools__092be1de-d3f8-4c22-a4ea-a7ad54689836.json",
    "tools__TestSyncRunTools__10e53c1d-51be-4c64-b5bf-99adb3fa4719.json",
    "tools__TestSyncRunTools__32da0815-2270-4d29-87be-3b5b63ab42e2.json",
    "tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12.json",
    "tools__TestSyncRunTools__771c64ff-a0af-4cd9-8080-a5a539da7cb9.json",
    "tools__TestSyncRunTools__956fa2fe-8752-4f7c-8f9a-33735e62b898.json",
    "tools__TestSyncRunTools__a8ac789b-f856-48cd-9ff3-d5f36799e432.json",
    "tools__TestSyncRunTools__b38bbf6c-9a76-40ca-b09d-7a3911776e0f.json",
    "tools__TestSyncRunTools__e075a6c2-de4d-4125-9709-f0e178058190.json",
    "tools__TestSyncRunTools__f59a9391-643b-422c-96dc-1f28bc7ea4d7.json",
    "tools____module____64fe7974-681a-4023-9848-b32ba39c8664.json",
  };
  size_t streams = 0;
  size_t messages = 0;
  for (const char* file : files) {
    CAPTURE(file);
    auto exchanges = json::parse(anthropic_fixture(std::string{"recorded_exchanges/"} + file));
    for (const auto& x : exchanges) {
      const auto& resp = x["response"];
      if (resp["status_code"] != 200)
        continue;
      const auto& body = resp["body"];
      recording_listener rec;
      if (body.is_string()) {
        // A recorded stream: same checks as for the extracted ones.
        ++streams;
        auto bytes = body.get<std::string>();
        auto expected = compute_oracle(bytes);
        anth::stream_decoder dec;
        dec.feed(bytes, rec);
        REQUIRE(dec.finish(rec) == anth::stream_state::done);
        auto res = dec.assembler().result();
        CHECK(res.text == expected.text);
        CHECK(res.usage.output_tokens == expected.output_tokens);
        REQUIRE(res.tool_calls.size() == expected.calls.size());
        for (size_t i = 0; i < res.tool_calls.size(); ++i)
          CHECK(res.tool_calls[i].arguments == expected.calls[i].arguments);
        continue;
      }
      // A non-streamed answer: compare with its content blocks.
      ++messages;
      std::string text;
      std::vector<json> uses;
      for (const auto& block : body["content"]) {
        if (block["type"] == "text")
          text += block["text"].get<std::string>();
        else if (block["type"] == "tool_use")
          uses.push_back(block);
      }
      anth::stream_assembler a;
      REQUIRE(a.on_message(body, rec) == anth::stream_state::done);
      auto res = a.result();
      CHECK(res.text == text);
      CHECK(rec.text == text);
      CHECK(res.model == body["model"]);
      CHECK(res.usage.input_tokens
            == body["usage"].value("input_tokens", int64_t{0})
                 + body["usage"].value("cache_creation_input_tokens", int64_t{0})
                 + body["usage"].value("cache_read_input_tokens", int64_t{0}));
      CHECK(res.usage.output_tokens == body["usage"]["output_tokens"]);
      CHECK(res.finish
            == (body["stop_reason"] == "tool_use" ? sdk::finish_reason::tool_calls
                                                  : sdk::finish_reason::stop));
      REQUIRE(res.tool_calls.size() == uses.size());
      for (size_t i = 0; i < uses.size(); ++i) {
        CHECK(res.tool_calls[i].id == uses[i]["id"]);
        CHECK(res.tool_calls[i].name == uses[i]["name"]);
        CHECK(json::parse(res.tool_calls[i].arguments) == uses[i]["input"]);
      }
    }
  }
  CHECK(streams == 6);
  CHECK(messages == 21);
}

} // namespace anthropic_logic_test
