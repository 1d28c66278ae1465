// Unit tests of the `openai` plugin's logic: stream decoding, tool-call
// accumulation, error classification, configuration and request bodies.

#include "openai_provider.hpp"
#include "openai_stream.hpp"

#include "quarry/sdk/json.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace openai_stream_test {

namespace {

namespace sdk = quarry::sdk;
namespace openai = quarry::plugins::llm_openai;
using nlohmann::json;
using sdk::errc;

std::string fixture(const std::string& rel) {
  std::ifstream in{std::string{QUARRY_FIXTURES_DIR} + "/" + rel, std::ios::binary};
  REQUIRE(in.good());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Records everything a decoder delivers.
struct collector : openai::stream_handler {
  std::string text;
  std::string reasoning;
  std::vector<sdk::tool_call_delta> calls;
  std::vector<sdk::usage> usages;

  void on_text(std::string_view x) override {
    text += x;
  }
  void on_reasoning(std::string_view x) override {
    reasoning += x;
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    calls.push_back(x);
  }
  void on_usage(const sdk::usage& x) override {
    usages.push_back(x);
  }
};

// Wraps each JSON text as one `data:` event.
std::string sse(const std::vector<std::string>& chunks, bool done = true) {
  std::string result;
  for (const auto& x : chunks)
    result += "data: " + x + "\n\n";
  if (done)
    result += "data: [DONE]\n\n";
  return result;
}

struct decoded {
  openai::stream_decoder::state state;
  sdk::chat_result result;
  std::optional<sdk::error> failure;
  bool streamed = false;
  collector seen;
};

decoded decode(const std::string& bytes, size_t piece = 0) {
  decoded out;
  openai::stream_decoder dec;
  if (piece == 0) {
    dec.feed(bytes, out.seen);
  } else {
    for (size_t i = 0; i < bytes.size(); i += piece)
      dec.feed(std::string_view{bytes}.substr(i, piece), out.seen);
  }
  out.state = dec.finish(out.seen);
  out.result = dec.result();
  out.failure = dec.failure();
  out.streamed = dec.streamed();
  return out;
}

} // namespace

TEST_CASE("openai decoder assembles the gemini chunk without tool-call index") {
  auto chunk = fixture(
    "llm/gemini_openai_compat/issue-OpenMAIC-1556__measured_tool_call_chunk_no_index.json");
  while (!chunk.empty() && (chunk.back() == '\n' || chunk.back() == '\r'))
    chunk.pop_back();
  // Gemini ends a tool-call turn with "stop".
  auto bytes = sse({chunk, R"({"choices":[{"delta":{},"finish_reason":"stop","index":0}]})"});
  for (size_t piece : {0, 1, 7}) {
    auto out = decode(bytes, piece);
    REQUIRE(out.state == openai::stream_decoder::state::done);
    REQUIRE(out.result.tool_calls.size() == 1);
    CHECK(out.result.tool_calls[0].id == "call_297140");
    CHECK(out.result.tool_calls[0].name == "read");
    CHECK(
      out.result.tool_calls[0].arguments
      == R"({"offset":1,"limit":100,"path":"/app/skills/agent-runtime/stage-design/SKILL.md"})");
    CHECK(out.result.finish == sdk::finish_reason::tool_calls);
    CHECK(out.result.model == "gemini-3.8-flash");
    REQUIRE(out.seen.calls.size() == 1);
    CHECK(out.seen.calls[0].index == 0);
    CHECK(out.seen.calls[0].name == "read");
    CHECK(out.streamed);
  }
}

TEST_CASE("openai decoder tolerates tool-call quirks of compatible servers") {
  SUBCASE("missing index: a new id starts a new call, no id continues the last") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"}));
    REQUIRE(out.result.tool_calls.size() == 2);
    CHECK(out.result.tool_calls[0].arguments == R"({"x":1})");
    CHECK(out.result.tool_calls[0].name == "f");
    CHECK(out.result.tool_calls[1].id == "b");
    CHECK(out.result.tool_calls[1].name == "g");
    REQUIRE(out.seen.calls.size() == 3);
    CHECK(out.seen.calls[1].index == 0);
    CHECK(out.seen.calls[1].name.empty());
    CHECK(out.seen.calls[2].index == 1);
  }
  SUBCASE("repeated empty names do not overwrite, indices from 1 are normalised") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"web_search","arguments":""}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"","arguments":"{\"q\":"}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"","arguments":"\"a\"}"}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"index":2,"id":"c2","function":{"name":"open_url","arguments":"{\"url\":\"u\"}"}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})",
       // An empty piece after the finish reason.
       R"({"choices":[{"delta":{"tool_calls":[{"index":2,"function":{"arguments":""}}]}}]})"}));
    REQUIRE(out.state == openai::stream_decoder::state::done);
    REQUIRE(out.result.tool_calls.size() == 2);
    CHECK(out.result.tool_calls[0].name == "web_search");
    CHECK(out.result.tool_calls[0].arguments == R"({"q":"a"})");
    CHECK(out.result.tool_calls[1].name == "open_url");
    CHECK(out.result.tool_calls[1].arguments == R"({"url":"u"})");
    REQUIRE(out.seen.calls.size() == 4);
    CHECK(out.seen.calls[0].index == 0);
    CHECK(out.seen.calls[0].id == "c1");
    CHECK(out.seen.calls[1].name.empty());
    CHECK(out.seen.calls[3].index == 1);
  }
  SUBCASE("a server reusing index 0 with new ids gets separate calls") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"k\":2}"}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"stop"}]})"}));
    REQUIRE(out.result.tool_calls.size() == 2);
    CHECK(out.result.tool_calls[1].name == "g");
    CHECK(out.result.tool_calls[1].arguments == R"({"k":2})");
    CHECK(out.result.finish == sdk::finish_reason::tool_calls);
  }
  SUBCASE("arguments sent as a JSON object and a call without id") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":{"a":[1,2]}}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"}));
    REQUIRE(out.result.tool_calls.size() == 1);
    CHECK(out.result.tool_calls[0].id == "call_1");
    CHECK(out.result.tool_calls[0].arguments == R"({"a":[1,2]})");
  }
  SUBCASE("metadata-only elements create no call") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"extra_content":{"google":{}}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"id":"k","function":{"name":"f","arguments":"{}"}}]}}]})",
       R"({"choices":[{"delta":{"tool_calls":[{"extra_content":{"google":{}}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"stop"}]})"}));
    REQUIRE(out.result.tool_calls.size() == 1);
    CHECK(out.result.tool_calls[0].arguments == "{}");
    REQUIRE(out.seen.calls.size() == 1);
    CHECK(out.seen.calls[0].index == 0);
    CHECK(out.result.finish == sdk::finish_reason::tool_calls);
  }
  SUBCASE("a call without arguments gets {}") {
    auto out = decode(sse(
      {R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"z","function":{"name":"now"}}]}}]})",
       R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"}));
    REQUIRE(out.result.tool_calls.size() == 1);
    CHECK(out.result.tool_calls[0].arguments == "{}");
  }
}

TEST_CASE("openai decoder reads reasoning from reasoning_content or reasoning") {
  auto out = decode(sse(
    {R"({"model":"m","choices":[{"delta":{"role":"assistant","reasoning_content":"think "}}]})",
     R"({"choices":[{"delta":{"reasoning":"more"}}]})",
     R"({"choices":[{"delta":{"content":"answer"},"logprobs":null}],"obfuscation":"xyz","service_tier":"default"})",
     R"({"choices":[{"delta":{},"finish_reason":"stop"}]})",
     R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"completion_tokens_details":{"reasoning_tokens":5},"prompt_tokens_details":{"cached_tokens":3}}})"}));
  REQUIRE(out.state == openai::stream_decoder::state::done);
  CHECK(out.result.reasoning == "think more");
  CHECK(out.seen.reasoning == "think more");
  CHECK(out.result.text == "answer");
  CHECK(out.result.finish == sdk::finish_reason::stop);
  CHECK(out.result.usage.input_tokens == 10);
  CHECK(out.result.usage.output_tokens == 20);
  CHECK(out.result.usage.reasoning_tokens == 5);
  CHECK(out.result.usage.cached_input_tokens == 3);
  CHECK(out.seen.usages.size() == 1);
}

TEST_CASE("openai decoder uses choice 0 only") {
  auto out = decode(
    sse({R"({"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]})",
         R"({"choices":[{"index":2,"delta":{"content":"C"},"finish_reason":"length"}]})",
         R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"}));
  CHECK(out.result.text == "A");
  CHECK(out.result.finish == sdk::finish_reason::stop);
}

TEST_CASE("openai decoder fails on malformed chunks and early ends") {
  SUBCASE("malformed JSON") {
    auto out = decode("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
                      "data: {\"choices\":[\n\n");
    REQUIRE(out.state == openai::stream_decoder::state::failed);
    CHECK(out.failure->code == errc::invalid_response);
    CHECK(out.streamed);
  }
  SUBCASE("no finish reason and no [DONE]") {
    auto out = decode(sse({R"({"choices":[{"delta":{"content":"a"}}]})"}, false));
    REQUIRE(out.state == openai::stream_decoder::state::failed);
    CHECK(out.failure->code == errc::network);
    CHECK(out.failure->message.find("stream ended early") != std::string::npos);
  }
  SUBCASE("a finish reason without [DONE] is enough") {
    auto out = decode(
      sse({R"({"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]})"}, false));
    REQUIRE(out.state == openai::stream_decoder::state::done);
    CHECK(out.result.finish == sdk::finish_reason::length);
  }
  SUBCASE("nothing at all") {
    auto out = decode("");
    CHECK(out.state == openai::stream_decoder::state::failed);
    CHECK_FALSE(out.streamed);
  }
}

TEST_CASE("openai decoder classifies errors inside a 200 stream") {
  SUBCASE("event: error") {
    auto out = decode("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
                      "event: error\ndata: {\"error\":{\"message\":\"Overloaded\","
                      "\"type\":\"overloaded_error\"}}\n\n");
    REQUIRE(out.state == openai::stream_decoder::state::failed);
    CHECK(out.failure->code == errc::overloaded);
    CHECK(out.streamed);
  }
  SUBCASE("Groq-style status_code") {
    auto out = decode("event: error\ndata: {\"error\":{\"message\":\"bad tool\","
                      "\"type\":\"invalid_request_error\",\"status_code\":400}}\n\n");
    REQUIRE(out.failure.has_value());
    CHECK(out.failure->code == errc::bad_request);
    CHECK_FALSE(out.streamed);
  }
  SUBCASE("OpenRouter-style error chunk with choices") {
    auto out = decode(sse(
      {R"({"error":{"code":429,"message":"Rate limited. Please try again in 2s."},"choices":[{"delta":{"content":""},"finish_reason":"error"}]})"}));
    REQUIRE(out.failure.has_value());
    CHECK(out.failure->code == errc::rate_limited);
    CHECK(out.failure->retry_after_ms == 2000);
  }
  SUBCASE("plain data error") {
    auto out = decode(
      sse({R"({"error":{"message":"The server had an error","type":"server_error"}})"}));
    REQUIRE(out.failure.has_value());
    CHECK(out.failure->code == errc::server_error);
    CHECK(out.failure->message.find("The server had an error") != std::string::npos);
  }
}

TEST_CASE("openai decoder maps refusals to text with content_filter") {
  auto out = decode(fixture("llm/openai_chat/openai-python__refusal.sse"), 5);
  REQUIRE(out.state == openai::stream_decoder::state::done);
  CHECK(out.result.text == "I'm sorry, I can't assist with that request.");
  CHECK(out.result.finish == sdk::finish_reason::content_filter);
}

TEST_CASE("openai error classification of the recorded error bodies") {
  struct expectation {
    std::string file;
    int status;
    errc code;
    std::optional<int64_t> retry_after;
  };
  std::vector<expectation> cases{
    {"issue-chatbot-ui-102__400_context_length_exceeded__raw_body.json", 400,
     errc::context_too_long, std::nullopt},
    {"issue-climb-13__429_request_too_large_tpm.json", 429, errc::rate_limited, std::nullopt},
    {"issue-crewAI-examples-121__400_context_length_exceeded.json", 400, errc::context_too_long,
     std::nullopt},
    {"issue-deepwiki-open-144__400_context_length_exceeded_128k.json", 400, errc::context_too_long,
     std::nullopt},
    {"issue-gpt-newspaper-10__429_rate_limit_tokens_try_again.json", 429, errc::rate_limited,
     26604},
    {"issue-gpt-pilot-17__429_rate_limit_tokens_2023_format.json", 429, errc::rate_limited, 6},
  };
  for (const auto& c : cases) {
    CAPTURE(c.file);
    auto err = openai::classify_error(c.status, {},
                                      std::string_view{fixture("llm/openai_errors/" + c.file)});
    CHECK(err.code == c.code);
    CHECK(err.http_status == c.status);
    CHECK(err.retry_after_ms == c.retry_after);
    CHECK_FALSE(err.message.empty());
  }
}

TEST_CASE("openai error classification of other shapes") {
  SUBCASE("insufficient_quota is never retried") {
    auto err = openai::classify_error(
      429, {{"x-should-retry", "true"}},
      std::string_view{
        R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})"});
    CHECK(err.code == errc::quota);
    CHECK_FALSE(err.retryable());
  }
  SUBCASE("Retry-After and retry-after-ms headers win over the message") {
    auto body = std::string_view{
      R"({"error":{"message":"Please try again in 6ms.","type":"requests","code":"rate_limit_exceeded"}})"};
    CHECK(openai::classify_error(429, {{"Retry-After", "3"}}, body).retry_after_ms == 3000);
    CHECK(openai::classify_error(429, {{"retry-after-ms", "250"}}, body).retry_after_ms == 250);
    CHECK(openai::classify_error(429, {}, body).retry_after_ms == 6);
  }
  SUBCASE("Google RESOURCE_EXHAUSTED with RetryInfo") {
    auto body = std::string_view{
      R"([{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}}])"};
    auto err = openai::classify_error(429, {}, body);
    CHECK(err.code == errc::rate_limited);
    CHECK(err.retry_after_ms == 34400);
    CHECK(err.message.find("Resource has been exhausted") != std::string::npos);
  }
  SUBCASE("statuses") {
    CHECK(
      openai::classify_error(
        401, {},
        std::string_view{
          R"({"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}})"})
        .code
      == errc::auth);
    CHECK(openai::classify_error(403, {}, std::string_view{"forbidden"}).code == errc::auth);
    CHECK(
      openai::classify_error(
        404, {},
        std::string_view{
          R"({"error":{"message":"The model `x` does not exist","type":"invalid_request_error","code":"model_not_found"}})"})
        .code
      == errc::not_found);
    CHECK(openai::classify_error(
            400, {},
            std::string_view{
              R"({"error":{"message":"The model `x` does not exist","code":"model_not_found"}})"})
            .code
          == errc::not_found);
    CHECK(openai::classify_error(
            500, {}, std::string_view{R"({"error":{"message":"oops","type":"server_error"}})"})
            .code
          == errc::server_error);
    CHECK(openai::classify_error(502, {}, std::string_view{"<html>Bad Gateway</html>"}).code
          == errc::server_error);
    CHECK(openai::classify_error(503, {}, std::string_view{"{}"}).code == errc::overloaded);
    CHECK(openai::classify_error(529, {}, std::string_view{""}).code == errc::overloaded);
    CHECK(
      openai::classify_error(
        400, {},
        std::string_view{
          R"({"error":{"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","code":400}})"})
        .code
      == errc::context_too_long);
    CHECK(
      openai::classify_error(
        400, {},
        std::string_view{
          R"({"error":{"message":"Unsupported parameter: 'max_tokens'","code":"unsupported_parameter"}})"})
        .code
      == errc::bad_request);
  }
  SUBCASE("x-should-retry") {
    auto err = openai::classify_error(500, {{"x-should-retry", "false"}}, std::string_view{"{}"});
    CHECK(err.retry_hint == false);
    CHECK_FALSE(err.retryable());
  }
  SUBCASE("retry hints in messages") {
    CHECK(openai::retry_hint_from_message("Please try again in 26.604s. Visit") == 26604);
    CHECK(openai::retry_hint_from_message("please try again in 1m30s") == 90000);
    CHECK(openai::retry_hint_from_message("no hint here") == std::nullopt);
    // Found by the fuzzer: a huge number must not overflow.
    CHECK(openai::retry_hint_from_message("try again in 11111111111111111111111110555")
          == std::nullopt);
  }
}

TEST_CASE("openai configuration validation") {
  auto cfg = openai::parse_config({{"model", "gpt-4o"},
                                   {"base_url", "http://localhost:11434/v1/"},
                                   {"context_window", 128000},
                                   {"reasoning", true},
                                   {"headers", {{"X-Title", "quarry"}}}});
  CHECK(cfg.base_url == "http://localhost:11434/v1");
  CHECK(cfg.context_window == 128000);
  CHECK(cfg.reasoning);
  CHECK(cfg.supports_tools);
  REQUIRE(cfg.headers.size() == 1);
  CHECK(cfg.headers[0].first == "X-Title");
  CHECK_THROWS_AS(openai::parse_config(json::object()), std::invalid_argument);
  // Quarry's limits never reach the plugin: refused like any unknown key.
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"max_concurrency", 4}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"prices", {{"input", 1.0}}}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"modle", "x"}}), std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"azure", "yes"}}), std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"max_tokens", -1}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"base_url", "ftp://x"}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(openai::parse_config({{"model", "m"}, {"headers", {{"a", 1}}}}),
                  std::invalid_argument);
  try {
    openai::parse_config({{"model", "m"}, {"api_kye", "x"}});
    FAIL("no exception");
  } catch (const std::invalid_argument& ex) {
    CHECK(std::string{ex.what()}.find("api_kye") != std::string::npos);
  }
}

TEST_CASE("openai request bodies") {
  sdk::chat_request req;
  req.messages.push_back({sdk::role::system, "be brief", {}, {}, {}, {}, {}});
  req.messages.push_back({sdk::role::user, "weather?", {}, {}, {}, {}, {}});
  sdk::chat_message call_msg;
  call_msg.author = sdk::role::assistant;
  call_msg.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  req.messages.push_back(call_msg);
  sdk::chat_message result_msg;
  result_msg.author = sdk::role::tool;
  result_msg.tool_call_id = "call_1";
  result_msg.tool_name = "get_weather";
  result_msg.content = "sunny";
  req.messages.push_back(result_msg);
  SUBCASE("plain model without tools") {
    auto cfg = openai::parse_config(
      {{"model", "gpt-4o"}, {"temperature", 0.5}, {"max_tokens", 100}});
    auto body = openai::request_body(cfg, req);
    CHECK(body["model"] == "gpt-4o");
    CHECK_FALSE(body.contains("tools"));
    CHECK_FALSE(body.contains("tool_choice"));
    CHECK(body["stream"] == true);
    CHECK(body["stream_options"] == json{{"include_usage", true}});
    CHECK(body["max_tokens"] == 100);
    CHECK_FALSE(body.contains("max_completion_tokens"));
    CHECK(body["temperature"] == 0.5);
    CHECK_FALSE(body.contains("reasoning_effort"));
    auto& msgs = body["messages"];
    REQUIRE(msgs.size() == 4);
    CHECK(msgs[0] == json{{"role", "system"}, {"content", "be brief"}});
    CHECK(msgs[2]["role"] == "assistant");
    CHECK(msgs[2]["content"].is_null());
    CHECK(
      msgs[2]["tool_calls"]
      == json::parse(
        R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}])"));
    CHECK(msgs[3] == json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  }
  SUBCASE("tools and tool_choice") {
    auto cfg = openai::parse_config({{"model", "gpt-4o"}});
    req.tools.push_back({"web_search", "Searches", {{"type", "object"}}});
    req.choice = sdk::tool_choice::required;
    auto body = openai::request_body(cfg, req);
    REQUIRE(body["tools"].size() == 1);
    CHECK(body["tools"][0]["function"]["name"] == "web_search");
    CHECK(body["tool_choice"] == "required");
    CHECK_FALSE(body.contains("max_tokens"));
    CHECK_FALSE(body.contains("temperature"));
    auto off = openai::parse_config({{"model", "m"}, {"supports_tools", false}});
    CHECK_FALSE(openai::request_body(off, req).contains("tools"));
  }
  SUBCASE("reasoning models") {
    auto cfg = openai::parse_config(
      {{"model", "o3"}, {"reasoning", true}, {"reasoning_effort", "low"}, {"temperature", 0.2}});
    req.max_tokens = 5000;
    req.temperature = 0.7;
    auto body = openai::request_body(cfg, req);
    CHECK(body["max_completion_tokens"] == 5000);
    CHECK_FALSE(body.contains("max_tokens"));
    CHECK_FALSE(body.contains("temperature"));
    CHECK(body["reasoning_effort"] == "low");
    CHECK(body["messages"][0]["role"] == "system");
    req.reasoning_effort = "high";
    req.model = "o4-mini";
    body = openai::request_body(cfg, req);
    CHECK(body["reasoning_effort"] == "high");
    CHECK(body["model"] == "o4-mini");
  }
  SUBCASE("URLs and headers") {
    auto cfg = openai::parse_config(
      {{"model", "m"}, {"api_key", "sk-1"}, {"organization", "org-1"}, {"project", "p-1"}});
    auto http = openai::build_request(cfg, req);
    CHECK(http.method == "POST");
    CHECK(http.url == "https://api.openai.com/v1/chat/completions");
    CHECK(sdk::find_header(http.headers, "authorization") == "Bearer sk-1");
    CHECK(sdk::find_header(http.headers, "OpenAI-Organization") == "org-1");
    CHECK(sdk::find_header(http.headers, "OpenAI-Project") == "p-1");
    CHECK(json::parse(http.body) == openai::request_body(cfg, req));
    auto azure = openai::parse_config(
      {{"model", "gpt-4o"},
       {"api_key", "az"},
       {"azure", true},
       {"api_version", "2024-10-21"},
       {"base_url", "https://r.openai.azure.com/openai/deployments/d1"}});
    auto ahttp = openai::build_request(azure, req);
    CHECK(ahttp.url
          == "https://r.openai.azure.com/openai/deployments/d1/chat/completions"
             "?api-version=2024-10-21");
    CHECK(sdk::find_header(ahttp.headers, "api-key") == "az");
    CHECK_FALSE(sdk::find_header(ahttp.headers, "authorization").has_value());
    auto local = openai::parse_config(
      {{"model", "llama3"}, {"base_url", "http://127.0.0.1:8080/v1"}});
    CHECK_FALSE(
      sdk::find_header(openai::build_request(local, req).headers, "authorization").has_value());
  }
  CHECK(openai::redact("key sk-abc123 and sk-abc123", "sk-abc123") == "key *** and ***");
  // A short key garbled the provider's own words ("invalid_api_***ey").
  CHECK(openai::redact("invalid_api_key", "k") == "invalid_api_key");
}

TEST_CASE("openai request text is the request body as dump_json writes it, byte for byte") {
  // Every key, every role, text that needs escaping (quotes, backslashes,
  // each control character, DEL, non-ASCII), invalid UTF-8, empty fields.
  std::string controls;
  for (int c = 0; c < 0x20; ++c)
    controls += static_cast<char>(c);
  std::vector<std::string> texts{"",
                                 "plain",
                                 "quote \" backslash \\ slash / tab\t",
                                 controls,
                                 "del \x7f",
                                 "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80",
                                 "bad \xff\xfe byte",
                                 "cut \xe2\x80",
                                 std::string(70000, 'x') + "\n"};
  // One byte that needs an escape (or is next to those that do) at every
  // place of the eight-byte words the writer reads at once.
  for (std::string special : {"\"", "\\", "\n", "\x01", "\x1f", " ", "!", "\x7f", "\xc3\xa9"})
    for (size_t at = 0; at < 18; ++at)
      texts.push_back(std::string(at, 'a') + special + std::string(17 - at, 'b'));
  for (const auto& text : texts) {
    sdk::chat_request req;
    req.messages.push_back({sdk::role::system, text, {}, {}, {}, {}, {}});
    req.messages.push_back({sdk::role::user, text, {}, {}, {}, {}, {}});
    sdk::chat_message call_msg;
    call_msg.author = sdk::role::assistant;
    call_msg.content = text;
    call_msg.reasoning = text;
    call_msg.tool_calls.push_back({"call_" + text, "search", text});
    call_msg.tool_calls.push_back({"call_2", "read", ""});
    req.messages.push_back(call_msg);
    sdk::chat_message empty_call;
    empty_call.author = sdk::role::assistant;
    req.messages.push_back(empty_call);
    sdk::chat_message result_msg;
    result_msg.author = sdk::role::tool;
    result_msg.tool_call_id = text;
    result_msg.content = text;
    req.messages.push_back(result_msg);
    req.tools.push_back({"web_search", text, {{"type", "object"}}});
    std::vector<json> configs{
      {{"model", "gpt-4o"}, {"temperature", 0.1}, {"max_tokens", 100}},
      {{"model", "o3"}, {"reasoning", true}, {"reasoning_effort", "low"}, {"max_tokens", 7}},
      {{"model", "m"}, {"supports_tools", false}},
      {{"model", "m\"x"}}};
    for (const auto& c : configs) {
      auto cfg = openai::parse_config(c);
      for (bool round_trip : {false, true}) {
        for (auto temperature : {std::optional<double>{}, std::optional<double>{1.0 / 3}}) {
          req.temperature = temperature;
          req.model = text.size() < 100 ? text : std::string{};
          req.reasoning_effort = text.size() < 100 ? text : std::string{};
          CAPTURE(c.dump());
          CAPTURE(round_trip);
          CHECK(openai::request_text(cfg, req, round_trip)
                == sdk::dump_json(openai::request_body(cfg, req, round_trip)));
        }
      }
    }
  }
}

TEST_CASE("openai request text holds little more memory than its bytes") {
  // The text is held while the call runs: neither the writer's margins nor
  // escapes beyond the size guessed leave it at twice its length. Tool
  // results as indented JSON (many escapes), plain text, and text that is
  // nearly all escapes.
  auto cfg = openai::parse_config({{"model", "m"}});
  std::string indented;
  for (int i = 0; i < 200; ++i)
    indented += "  {\n    \"title\": \"Heat pumps\",\n    \"document\": " + std::to_string(i)
                + "\n  },\n";
  for (const auto& result : {indented, std::string(20000, 'x'), std::string(8000, '\x01')}) {
    sdk::chat_request req;
    req.messages.push_back({sdk::role::system, "You research.", {}, {}, {}, {}, {}});
    req.messages.push_back({sdk::role::user, "Heat pumps in the cold?", {}, {}, {}, {}, {}});
    sdk::chat_message call_msg;
    call_msg.author = sdk::role::assistant;
    call_msg.tool_calls.push_back({"call_1", "web_search", "{\"query\":\"heat pumps\"}"});
    req.messages.push_back(call_msg);
    sdk::chat_message result_msg;
    result_msg.author = sdk::role::tool;
    result_msg.tool_call_id = "call_1";
    result_msg.content = result;
    req.messages.push_back(result_msg);
    auto text = openai::request_text(cfg, req, false);
    CHECK(text == sdk::dump_json(openai::request_body(cfg, req, false)));
    CAPTURE(text.size());
    CHECK(text.capacity() <= text.size() + text.size() / 4);
  }
}

TEST_CASE("openai request text: tools written once are written again when any of them changes") {
  auto cfg = openai::parse_config({{"model", "m"}});
  sdk::chat_request req;
  req.messages.push_back({sdk::role::user, "q", {}, {}, {}, {}, {}});
  json schema = {
    {"type", "object"}, {"properties", {{"query", {{"type", "string"}}}}}, {"required", {"query"}}};
  req.tools.push_back({"web_search", "Searches the web.", schema});
  req.tools.push_back({"open_url", "Reads pages.", {{"type", "object"}}});
  auto same = [&] {
    return openai::request_text(cfg, req, false)
           == sdk::dump_json(openai::request_body(cfg, req, false));
  };
  CHECK(same());
  CHECK(same()); // the kept text
  // Each part of a tool, changed alone, and then changed back; more sets
  // than are kept; and no tools at all.
  req.tools[0].parameters["properties"]["query"]["type"] = "array";
  CHECK(same());
  CHECK(openai::request_text(cfg, req, false).find("\"array\"") != std::string::npos);
  req.tools[0].parameters = schema;
  CHECK(same());
  req.tools[1].name = "read_page";
  CHECK(same());
  req.tools[1].description = "Reads a page.";
  CHECK(same());
  for (int i = 0; i < 20; ++i) {
    req.tools.push_back({"tool_" + std::to_string(i), "t", {{"type", "object"}}});
    CHECK(same());
  }
  req.tools.resize(1);
  CHECK(same());
  req.tools.clear();
  CHECK(same());
  CHECK(openai::request_text(cfg, req, false).find("\"tools\"") == std::string::npos);
}

TEST_CASE("openai decoder reads every recording and unusual chunk shapes alike in any pieces") {
  std::vector<std::string> streams;
  for (const auto& entry :
       std::filesystem::directory_iterator{std::string{QUARRY_FIXTURES_DIR} + "/llm/openai_chat"})
    if (entry.path().extension() == ".sse")
      streams.push_back(fixture("llm/openai_chat/" + entry.path().filename().string()));
  REQUIRE(streams.size() >= 12);
  // Unusual shapes: duplicate keys, `message` instead of `delta`, several
  // choices with index 0, non-integer indices, arguments as a JSON value, a
  // byte-order mark, nulls and wrong types, trailing garbage.
  streams.push_back(sse(
    {R"({"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]})",
     R"({"choices":[{"index":0,"message":{"content":"whole"}}]})",
     R"({"choices":[{"delta":{"content":"x"}},{"index":0,"delta":{"content":"y"}}]})",
     R"({"choices":[{"index":0.0,"delta":{"content":"f"}}]})",
     R"({"choices":[{"index":"0","delta":{"content":"s\u00e9\ud83d\ude00"}}]})",
     R"({"choices":[{"index":0,"delta":{"tool_calls":[1,{"id":"q","function":{"name":"n","arguments":{"k":1}}}]}}]})",
     R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"function":{"arguments":"{}"}}]}}]})",
     "\xEF\xBB\xBF{\"choices\":[{\"delta\":{\"content\":\"bom\"}}]}",
     R"({"choices":[{"index":0,"delta":{"content":null,"refusal":7,"reasoning":"r"},"finish_reason":null}],"usage":null,"error":null})",
     R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]} trailing)"}));
  for (const auto& bytes : streams) {
    // Byte by byte and whole: the same callbacks and the same result.
    auto bytewise = decode(bytes, 1);
    auto whole = decode(bytes, 0);
    CHECK(bytewise.state == whole.state);
    CHECK(bytewise.result.text == whole.result.text);
    CHECK(bytewise.result.reasoning == whole.result.reasoning);
    CHECK(bytewise.result.finish == whole.result.finish);
    CHECK(bytewise.result.model == whole.result.model);
    CHECK(bytewise.seen.calls.size() == whole.seen.calls.size());
    REQUIRE(bytewise.result.tool_calls.size() == whole.result.tool_calls.size());
    for (size_t i = 0; i < bytewise.result.tool_calls.size(); ++i) {
      CHECK(bytewise.result.tool_calls[i].id == whole.result.tool_calls[i].id);
      CHECK(bytewise.result.tool_calls[i].arguments == whole.result.tool_calls[i].arguments);
    }
    CHECK(bytewise.result.usage.input_tokens == whole.result.usage.input_tokens);
    CHECK(bytewise.failure.has_value() == whole.failure.has_value());
  }
  // The last stream ends with a chunk that is not JSON.
  auto last = decode(streams.back());
  CHECK(last.state == openai::stream_decoder::state::failed);
  CHECK(last.failure->code == errc::invalid_response);
  CHECK(last.result.text
        == "bwholexyfs\xc3\xa9\xf0\x9f\x98\x80"
           "bom");
  CHECK(last.result.reasoning == "r");
  REQUIRE(last.result.tool_calls.size() == 1);
  CHECK(last.result.tool_calls[0].arguments == R"({"k":1}{})");
}

} // namespace openai_stream_test
