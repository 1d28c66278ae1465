// Tests of the fake LLM server (tests/support/fake_llm_server.hpp), driven by
// the host's real HTTP client: wire formats, rules, faults, replay, requests.

#include "quarry/host/http_client.hpp"
#include "quarry/sdk/sse.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace fake_llm_server_test {

using namespace std::chrono_literals;

namespace {

using json = nlohmann::json;
using quarry::core::http_settings;
using quarry::host::curl_http_client;
using quarry::host::fetch;
using quarry::host::http_response;
using quarry::sdk::errc;
using quarry::test::fake_llm_server;
using quarry::test::llm_request;
using quarry::test::replay_options;
namespace sdk = quarry::sdk;

std::string fixture(const std::string& name) {
  return std::string{QUARRY_FIXTURES_DIR} + "/llm/" + name;
}

// Posts `body` as JSON to `url`, with a generous guard against hangs.
http_response post(curl_http_client& client, const std::string& url, const json& body,
                   sdk::http_headers headers = {}, std::chrono::milliseconds stall_timeout = 30s,
                   std::chrono::milliseconds total_timeout = 30s) {
  sdk::http_request req;
  req.method = "POST";
  req.url = url;
  req.headers = std::move(headers);
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  req.stall_timeout = stall_timeout;
  req.total_timeout = total_timeout;
  return fetch(client, std::move(req));
}

// An OpenAI request asking for a stream with usage.
json openai_body(const std::string& user, json extra = json::object()) {
  json body = {
    {"model", "gpt-test"}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  body["messages"] = json::array(
    {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", user}}});
  for (auto& [key, value] : extra.items())
    body[key] = value;
  return body;
}

// An Anthropic streaming request.
json anthropic_body(const std::string& user, json extra = json::object()) {
  json body = {{"model", "claude-test"},
               {"max_tokens", 1024},
               {"stream", true},
               {"system", "You are careful."}};
  body["messages"] = json::array({{{"role", "user"}, {"content", user}}});
  for (auto& [key, value] : extra.items())
    body[key] = value;
  return body;
}

std::vector<sdk::sse_event> parse_sse(const std::string& bytes) {
  std::vector<sdk::sse_event> result;
  sdk::sse_parser parser;
  auto on_event = [&result](const sdk::sse_event& ev) {
    result.push_back(ev);
    return true;
  };
  parser.feed(bytes, on_event);
  parser.finish(on_event);
  return result;
}

// An OpenAI stream assembled the way a client would.
struct openai_stream {
  struct call {
    std::string id;
    std::string type;
    std::string name;
    std::string arguments;
    int pieces = 0;
  };
  std::vector<std::string> content_pieces;
  std::string content;
  std::string reasoning;
  std::string first_role;
  std::map<int, call> calls;
  std::string finish_reason;
  json usage;
  int chunks = 0;
  int null_usage_chunks = 0;
  int invalid = 0;
  int invalid_index = -1;
  bool done = false;
  bool data_after_done = false;
  std::string model;
  std::string id;
};

openai_stream assemble_openai(const std::string& bytes) {
  openai_stream result;
  int index = 0;
  for (const auto& ev : parse_sse(bytes)) {
    auto at = index++;
    if (result.done) {
      result.data_after_done = true;
      continue;
    }
    if (ev.data == "[DONE]") {
      result.done = true;
      continue;
    }
    auto chunk = json::parse(ev.data, nullptr, false);
    if (chunk.is_discarded()) {
      ++result.invalid;
      result.invalid_index = at;
      continue;
    }
    ++result.chunks;
    result.model = chunk.value("model", "");
    result.id = chunk.value("id", "");
    if (auto i = chunk.find("usage"); i != chunk.end()) {
      if (i->is_null())
        ++result.null_usage_chunks;
      else
        result.usage = *i;
    }
    for (const auto& choice : chunk.at("choices")) {
      const auto& delta = choice.at("delta");
      if (delta.contains("role") && result.first_role.empty())
        result.first_role = delta["role"].get<std::string>();
      if (auto i = delta.find("content");
          i != delta.end() && i->is_string() && !i->get<std::string>().empty()) {
        result.content_pieces.push_back(i->get<std::string>());
        result.content += i->get<std::string>();
      }
      if (auto i = delta.find("reasoning_content"); i != delta.end())
        result.reasoning += i->get<std::string>();
      if (auto i = delta.find("tool_calls"); i != delta.end()) {
        for (const auto& tc : *i) {
          auto& x = result.calls[tc.at("index").get<int>()];
          if (tc.contains("id"))
            x.id = tc["id"].get<std::string>();
          if (tc.contains("type"))
            x.type = tc["type"].get<std::string>();
          const auto& fn = tc.at("function");
          if (fn.contains("name"))
            x.name = fn["name"].get<std::string>();
          if (fn.contains("arguments")) {
            x.arguments += fn["arguments"].get<std::string>();
            ++x.pieces;
          }
        }
      }
      if (!choice.at("finish_reason").is_null())
        result.finish_reason = choice["finish_reason"].get<std::string>();
    }
  }
  return result;
}

// An Anthropic stream assembled the way a client would.
struct anthropic_stream {
  struct block {
    std::string type;
    std::string id;
    std::string name;
    std::string text;
    std::string partial_json;
    std::string signature;
    int deltas = 0;
    bool stopped = false;
  };
  std::vector<std::string> types;
  bool type_mismatch = false;
  int invalid = 0;
  int invalid_index = -1;
  std::map<int, block> blocks;
  std::vector<std::string> text_pieces;
  std::string stop_reason;
  int64_t input_tokens = -1;
  int64_t output_tokens = -1;
  std::string model;
};

anthropic_stream assemble_anthropic(const std::string& bytes) {
  anthropic_stream result;
  int index = 0;
  for (const auto& ev : parse_sse(bytes)) {
    auto at = index++;
    result.types.push_back(ev.type);
    auto data = json::parse(ev.data, nullptr, false);
    if (data.is_discarded()) {
      ++result.invalid;
      result.invalid_index = at;
      continue;
    }
    auto type = data.value("type", "");
    if (type != ev.type)
      result.type_mismatch = true;
    if (type == "message_start") {
      result.model = data["message"].value("model", "");
      result.input_tokens = data["message"]["usage"].value("input_tokens", -1);
    } else if (type == "content_block_start") {
      auto& x = result.blocks[data.at("index").get<int>()];
      const auto& cb = data.at("content_block");
      x.type = cb.value("type", "");
      x.id = cb.value("id", "");
      x.name = cb.value("name", "");
    } else if (type == "content_block_delta") {
      auto& x = result.blocks[data.at("index").get<int>()];
      const auto& delta = data.at("delta");
      auto kind = delta.value("type", "");
      ++x.deltas;
      if (kind == "text_delta") {
        x.text += delta.value("text", "");
        result.text_pieces.push_back(delta.value("text", ""));
      } else if (kind == "thinking_delta") {
        x.text += delta.value("thinking", "");
      } else if (kind == "signature_delta") {
        x.signature += delta.value("signature", "");
      } else if (kind == "input_json_delta") {
        x.partial_json += delta.value("partial_json", "");
      }
    } else if (type == "content_block_stop") {
      result.blocks[data.at("index").get<int>()].stopped = true;
    } else if (type == "message_delta") {
      result.stop_reason = data["delta"].value("stop_reason", "");
      result.output_tokens = data["usage"].value("output_tokens", -1);
    }
  }
  return result;
}

std::string content_type(const http_response& res) {
  return sdk::find_header(res.headers, "Content-Type").value_or("");
}

} // namespace

// -- wire formats -------------------------------------------------------------

TEST_CASE("fake_llm_server streams scripted text in the OpenAI format") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"respond": {"text": "The quick brown fox jumps", "chunk_words": 2,
                 "usage": {"input_tokens": 12, "output_tokens": 5}}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("hello"));
  REQUIRE_FALSE(res.failure);
  CHECK(res.status == 200);
  CHECK(content_type(res) == "text/event-stream; charset=utf-8");
  auto s = assemble_openai(res.body);
  CHECK(s.invalid == 0);
  CHECK(s.first_role == "assistant");
  CHECK(s.content == "The quick brown fox jumps");
  CHECK(s.content_pieces == std::vector<std::string>{"The quick", " brown fox", " jumps"});
  CHECK(s.finish_reason == "stop");
  CHECK(s.model == "gpt-test");
  CHECK(s.id == "chatcmpl-fake-1");
  CHECK(s.calls.empty());
  // role chunk + 3 content chunks + finish chunk carry "usage": null, then
  // the usage chunk with "choices": [] and the totals.
  CHECK(s.chunks == 6);
  CHECK(s.null_usage_chunks == 5);
  CHECK(s.usage == json{{"prompt_tokens", 12}, {"completion_tokens", 5}, {"total_tokens", 17}});
  CHECK(s.done);
  CHECK_FALSE(s.data_after_done);
  // Exact framing of the tail.
  auto tail = std::string{"\"choices\":[],\"usage\":{\"prompt_tokens\":12,"
                          "\"completion_tokens\":5,\"total_tokens\":17}}\n\n"
                          "data: [DONE]\n\n"};
  REQUIRE(res.body.size() > tail.size());
  CHECK(res.body.substr(res.body.size() - tail.size()) == tail);
  CHECK(res.body.compare(0, 6, "data: ") == 0);
}

TEST_CASE("fake_llm_server sends usage only when the OpenAI request asks") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([{"respond": {"text": "a b c"}}])")));
  curl_http_client client{http_settings{}};
  auto body = openai_body("hi");
  body.erase("stream_options");
  auto res = post(client, srv.base_url_openai() + "/chat/completions", body);
  REQUIRE_FALSE(res.failure);
  auto s = assemble_openai(res.body);
  CHECK(s.content == "a b c");
  CHECK(s.content_pieces == std::vector<std::string>{"a", " b", " c"});
  CHECK(s.null_usage_chunks == 0);
  CHECK(s.usage.is_null());
  CHECK(res.body.find("\"usage\"") == std::string::npos);
  CHECK(s.done);
}

TEST_CASE("fake_llm_server streams OpenAI tool calls in pieces") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"respond": {
      "reasoning": "I should look this up.",
      "tool_calls": [
        {"name": "web_search", "arguments": {"query": "ünïcode fox", "n": 3},
         "id": "call_given"},
        {"name": "open_url", "arguments": "{\"url\": \"https://x.test\"} junk"}
      ],
      "args_chunk_chars": 5}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("search"));
  REQUIRE_FALSE(res.failure);
  auto s = assemble_openai(res.body);
  CHECK(s.invalid == 0);
  CHECK(s.content.empty());
  CHECK(s.reasoning == "I should look this up.");
  REQUIRE(s.calls.size() == 2);
  CHECK(s.calls[0].id == "call_given");
  CHECK(s.calls[0].type == "function");
  CHECK(s.calls[0].name == "web_search");
  CHECK(json::parse(s.calls[0].arguments) == json{{"query", "ünïcode fox"}, {"n", 3}});
  CHECK(s.calls[0].pieces > 3);
  CHECK(s.calls[1].id == "call_fake_1_1");
  CHECK(s.calls[1].name == "open_url");
  // A raw string goes out as is, even if it is not JSON.
  CHECK(s.calls[1].arguments == "{\"url\": \"https://x.test\"} junk");
  CHECK(s.finish_reason == "tool_calls");
  CHECK(s.done);
}

TEST_CASE("fake_llm_server streams the Anthropic event sequence") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"respond": {"reasoning": "Think first.", "text": "Here it is.",
                 "tool_calls": [{"name": "get_weather",
                                 "arguments": {"city": "Paris"}}],
                 "usage": {"input_tokens": 40, "output_tokens": 9},
                 "args_chunk_chars": 4}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("weather?"),
                  {{"x-api-key", "k"}, {"anthropic-version", "2023-06-01"}});
  REQUIRE_FALSE(res.failure);
  CHECK(res.status == 200);
  CHECK(content_type(res) == "text/event-stream; charset=utf-8");
  auto s = assemble_anthropic(res.body);
  CHECK(s.invalid == 0);
  CHECK_FALSE(s.type_mismatch);
  REQUIRE(s.types.size() >= 6);
  CHECK(s.types.front() == "message_start");
  CHECK(s.types[1] == "ping");
  CHECK(s.types.back() == "message_stop");
  CHECK(s.types[s.types.size() - 2] == "message_delta");
  CHECK(s.model == "claude-test");
  CHECK(s.input_tokens == 40);
  CHECK(s.output_tokens == 9);
  CHECK(s.stop_reason == "tool_use");
  REQUIRE(s.blocks.size() == 3);
  CHECK(s.blocks[0].type == "thinking");
  CHECK(s.blocks[0].text == "Think first.");
  CHECK_FALSE(s.blocks[0].signature.empty());
  CHECK(s.blocks[1].type == "text");
  CHECK(s.blocks[1].text == "Here it is.");
  CHECK(s.text_pieces == std::vector<std::string>{"Here", " it", " is."});
  CHECK(s.blocks[2].type == "tool_use");
  CHECK(s.blocks[2].name == "get_weather");
  CHECK(s.blocks[2].id == "toolu_fake_1_0");
  CHECK(json::parse(s.blocks[2].partial_json) == json{{"city", "Paris"}});
  CHECK(s.blocks[2].deltas > 2);
  for (auto& [index, block] : s.blocks)
    CHECK(block.stopped);
  CHECK(res.body.find("[DONE]") == std::string::npos);
  // Exact framing of the end.
  auto tail = std::string{"event: message_stop\n"
                          "data: {\"type\":\"message_stop\"}\n\n"};
  REQUIRE(res.body.size() > tail.size());
  CHECK(res.body.substr(res.body.size() - tail.size()) == tail);
}

TEST_CASE("fake_llm_server maps finish reasons of either vocabulary to the request's") {
  struct row {
    const char* given;
    const char* openai;
    const char* anthropic;
  };
  for (const auto& r : std::vector<row>{{"stop", "stop", "end_turn"},
                                        {"end_turn", "stop", "end_turn"},
                                        {"stop_sequence", "stop", "stop_sequence"},
                                        {"tool_calls", "tool_calls", "tool_use"},
                                        {"tool_use", "tool_calls", "tool_use"},
                                        {"length", "length", "max_tokens"},
                                        {"max_tokens", "length", "max_tokens"},
                                        {"content_filter", "content_filter", "refusal"},
                                        {"refusal", "content_filter", "refusal"},
                                        {"other", "other", "other"}}) {
    CAPTURE(r.given);
    fake_llm_server srv;
    REQUIRE_FALSE(
      srv.script(json::array({{{"respond", {{"text", "t"}, {"finish_reason", r.given}}}}})));
    curl_http_client client{http_settings{}};
    auto body = openai_body("x");
    body["stream"] = false;
    auto res = post(client, srv.base_url_openai() + "/chat/completions", body);
    REQUIRE_FALSE(res.failure);
    CHECK(json::parse(res.body)["choices"][0]["finish_reason"] == r.openai);
    auto abody = anthropic_body("x");
    abody["stream"] = false;
    res = post(client, srv.base_url_anthropic() + "/v1/messages", abody);
    REQUIRE_FALSE(res.failure);
    CHECK(json::parse(res.body)["stop_reason"] == r.anthropic);
  }
}

TEST_CASE("fake_llm_server answers non-streaming requests with one JSON") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"respond": {"text": "plain", "finish_reason": "max_tokens",
                 "usage": {"input_tokens": 3, "output_tokens": 1}}}
  ])")));
  curl_http_client client{http_settings{}};
  auto body = openai_body("x");
  body["stream"] = false;
  auto res = post(client, srv.base_url_openai() + "/chat/completions", body);
  REQUIRE_FALSE(res.failure);
  CHECK(content_type(res) == "application/json");
  auto doc = json::parse(res.body);
  CHECK(doc["object"] == "chat.completion");
  CHECK(doc["choices"][0]["message"]["content"] == "plain");
  CHECK(doc["choices"][0]["finish_reason"] == "length");
  CHECK(doc["usage"]["total_tokens"] == 4);
  auto abody = anthropic_body("x");
  abody["stream"] = false;
  res = post(client, srv.base_url_anthropic() + "/v1/messages", abody);
  REQUIRE_FALSE(res.failure);
  doc = json::parse(res.body);
  CHECK(doc["type"] == "message");
  CHECK(doc["content"] == json::parse(R"([{"type":"text","text":"plain"}])"));
  CHECK(doc["stop_reason"] == "max_tokens");
  CHECK(doc["usage"]["output_tokens"] == 1);
}

// -- rules --------------------------------------------------------------------

TEST_CASE("fake_llm_server tries rules in order and honours times") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"({"rules": [
    {"match": {"last_user_contains": "alpha", "times": 1},
     "respond": {"text": "first alpha"}},
    {"match": {"last_user_contains": "alpha"}, "respond": {"text": "alpha"}},
    {"match": {"protocol": "anthropic", "system_contains": "careful"},
     "respond": {"text": "anthropic"}},
    {"match": {"tool": "web_search", "tool_choice": "required"},
     "respond": {"text": "must search"}},
    {"match": {"has_tools": true}, "respond": {"text": "tools"}},
    {"match": {"model": "gpt-other", "message_contains": "terse"},
     "respond": {"text": "other model"}},
    {"match": {"protocol": "openai"}, "times": 2,
     "respond": {"text": "fallback"}}
  ]})")));
  curl_http_client client{http_settings{}};
  auto ask = [&](const json& body) {
    auto res = post(client, srv.base_url_openai() + "/chat/completions", body);
    REQUIRE_FALSE(res.failure);
    REQUIRE(res.status == 200);
    return assemble_openai(res.body).content;
  };
  json tools = json::parse(
    R"([{"type":"function","function":{"name":"web_search","parameters":{}}}])");
  CHECK(ask(openai_body("alpha one")) == "first alpha");
  CHECK(ask(openai_body("alpha two")) == "alpha");
  CHECK(ask(openai_body("alpha three")) == "alpha");
  CHECK(ask(openai_body("beta", {{"tools", tools}, {"tool_choice", "required"}})) == "must search");
  CHECK(ask(openai_body("beta", {{"tools", tools}})) == "tools");
  CHECK(ask(openai_body("beta", {{"model", "gpt-other"}})) == "other model");
  CHECK(ask(openai_body("beta")) == "fallback");
  // For Anthropic, the system prompt is the top-level `system`.
  auto res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("beta"));
  REQUIRE_FALSE(res.failure);
  CHECK(assemble_anthropic(res.body).blocks[0].text == "anthropic");
  // The last rule is used up after its second answer.
  CHECK(ask(openai_body("beta")) == "fallback");
  CHECK(srv.rules_left() == 5);
  res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("gamma"));
  REQUIRE_FALSE(res.failure);
  CHECK(res.status == 500);
  auto doc = json::parse(res.body);
  auto message = doc["error"]["message"].get<std::string>();
  CHECK(message.find("no rule matches request #10") != std::string::npos);
  CHECK(message.find("/v1/chat/completions") != std::string::npos);
  CHECK(message.find("gamma") != std::string::npos);
  CHECK(sdk::find_header(res.headers, "x-should-retry") == "false");
  auto requests = srv.requests();
  REQUIRE(requests.size() == 10);
  CHECK(requests[0].rule == 0);
  CHECK(requests[1].rule == 1);
  CHECK(requests[7].rule == 2);
  CHECK(requests[9].rule == -1);
}

TEST_CASE("fake_llm_server matches tool_choice across both protocols") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"tool": "web_search", "tool_choice": "required"},
     "respond": {"text": "required"}},
    {"match": {"tool_choice": "tool:get_weather"}, "respond": {"text": "forced"}},
    {"match": {"tool_choice": "unset"}, "respond": {"text": "unset"}},
    {"match": {"tool_choice": "auto"}, "respond": {"text": "auto"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto openai_tools = json::parse(R"([
    {"type": "function", "function": {"name": "web_search", "parameters": {}}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
  ])");
  auto anthropic_tools = json::parse(
    R"([{"name": "web_search", "input_schema": {}},
        {"name": "get_weather", "input_schema": {}}])");
  auto openai = [&](json extra) {
    extra["tools"] = openai_tools;
    auto res = post(client, srv.base_url_openai() + "/chat/completions",
                    openai_body("x", std::move(extra)));
    REQUIRE(res.status == 200);
    return assemble_openai(res.body).content;
  };
  auto anthropic = [&](json extra) {
    extra["tools"] = anthropic_tools;
    auto res = post(client, srv.base_url_anthropic() + "/v1/messages",
                    anthropic_body("x", std::move(extra)));
    REQUIRE(res.status == 200);
    return assemble_anthropic(res.body).blocks[0].text;
  };
  CHECK(openai({{"tool_choice", "required"}}) == "required");
  CHECK(anthropic({{"tool_choice", {{"type", "any"}}}}) == "required");
  CHECK(openai({{"tool_choice", json::parse(R"({"type": "function",
          "function": {"name": "get_weather"}})")}})
        == "forced");
  CHECK(anthropic({{"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}}) == "forced");
  CHECK(openai(json::object()) == "unset");
  CHECK(anthropic(json::object()) == "unset");
  CHECK(openai({{"tool_choice", "auto"}}) == "auto");
  CHECK(anthropic({{"tool_choice", {{"type", "auto"}}}}) == "auto");
}

TEST_CASE("fake_llm_server accepts any path ending in /chat/completions") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"path_contains": "api-version="}, "respond": {"text": "azure"}},
    {"respond": {"text": "plain"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client,
                  srv.url("/openai/deployments/gpt/chat/completions"
                          "?api-version=2024-02-01"),
                  openai_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(assemble_openai(res.body).content == "azure");
  res = post(client, srv.url("/api/v1beta/openai/chat/completions"), openai_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(assemble_openai(res.body).content == "plain");
  auto first = srv.request_at(0);
  REQUIRE(first);
  CHECK(first->protocol == "openai");
  CHECK(first->path == "/openai/deployments/gpt/chat/completions");
  CHECK(first->target == "/openai/deployments/gpt/chat/completions?api-version=2024-02-01");
  // Other paths are 404s, recorded without a protocol.
  res = post(client, srv.url("/v1/embeddings"), json::object());
  CHECK(res.status == 404);
  REQUIRE(srv.request_count() == 3);
  CHECK(srv.requests()[2].protocol.empty());
}

TEST_CASE("fake_llm_server returns scripted errors with headers") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"protocol": "openai", "times": 1},
     "error": {"status": 429, "headers": {"Retry-After": 1,
                                          "x-ratelimit-remaining-requests": "0"}}},
    {"match": {"protocol": "openai", "times": 1},
     "error": {"status": 429, "body": {"error": {
       "message": "You exceeded your current quota", "type": "insufficient_quota",
       "param": null, "code": "insufficient_quota"}}}},
    {"match": {"protocol": "openai"}, "error": {"status": 400, "body": "not json"}},
    {"match": {"protocol": "anthropic"},
     "error": {"status": 529, "headers": {"x-should-retry": "true"}}}
  ])")));
  curl_http_client client{http_settings{}};
  auto url = srv.base_url_openai() + "/chat/completions";
  auto res = post(client, url, openai_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(res.status == 429);
  CHECK(sdk::find_header(res.headers, "retry-after") == "1");
  CHECK(sdk::find_header(res.headers, "x-ratelimit-remaining-requests") == "0");
  CHECK(content_type(res) == "application/json");
  auto doc = json::parse(res.body);
  CHECK(doc["error"]["code"] == "rate_limit_exceeded");
  CHECK(doc["error"]["type"] == "requests");
  CHECK(res.body.back() == '\n');
  res = post(client, url, openai_body("x"));
  CHECK(res.status == 429);
  CHECK(json::parse(res.body)["error"]["code"] == "insufficient_quota");
  res = post(client, url, openai_body("x"));
  CHECK(res.status == 400);
  CHECK(res.body == "not json");
  res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("x"));
  CHECK(res.status == 529);
  CHECK(sdk::find_header(res.headers, "x-should-retry") == "true");
  doc = json::parse(res.body);
  CHECK(doc["type"] == "error");
  CHECK(doc["error"]["type"] == "overloaded_error");
  CHECK(doc["request_id"] == "req_fake_4");
}

TEST_CASE("fake_llm_server rejects invalid scripts and keeps the old one") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([{"respond": {"text": "kept"}}])")));
  auto err = srv.script(json::parse(R"([{"respond": {"txt": "typo"}}])"));
  REQUIRE(err);
  CHECK(err->message.find("unknown key `txt`") != std::string::npos);
  err = srv.script(json::parse(R"([{"respond": {"text": "a"}, "error": {"status": 500}}])"));
  REQUIRE(err);
  CHECK(err->message.find("exactly one") != std::string::npos);
  err = srv.script(json::parse(R"([{"match": {"protocol": "gemini"}, "respond": {}}])"));
  REQUIRE(err);
  err = srv.script(json::parse(R"([{"replay": "no/such/file.sse"}])"));
  REQUIRE(err);
  CHECK(err->message.find("no/such/file.sse") != std::string::npos);
  CHECK(srv.script_file("no/such/script.json"));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
  CHECK(assemble_openai(res.body).content == "kept");
}

// -- faults -------------------------------------------------------------------

TEST_CASE("fake_llm_server delays the first byte and paces chunks") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"times": 1}, "latency_ms": 60000, "respond": {"text": "late"}},
    {"latency_ms": 20, "chunk_delay_ms": 2, "respond": {"text": "paced words"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto url = srv.base_url_openai() + "/chat/completions";
  // Nothing arrives before the client gives up.
  auto res = post(client, url, openai_body("x"), {}, 30s, 300ms);
  REQUIRE(res.failure);
  CHECK(res.failure->code == errc::timeout);
  CHECK(res.status == 0);
  CHECK(res.body.empty());
  // Latency and pacing do not change the bytes.
  res = post(client, url, openai_body("x"));
  REQUIRE_FALSE(res.failure);
  auto s = assemble_openai(res.body);
  CHECK(s.content == "paced words");
  CHECK(s.done);
}

TEST_CASE("fake_llm_server stalls after the scripted number of bytes") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"stall_after_bytes": 100, "respond": {"text": "one two three four five"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"), {}, 300ms);
  REQUIRE(res.failure);
  CHECK(res.failure->code == errc::stall);
  CHECK(res.status == 200);
  CHECK(res.body.size() == 100);
  CHECK(res.body.compare(0, 29, "data: {\"id\":\"chatcmpl-fake-1\"") == 0);
}

TEST_CASE("fake_llm_server resets the connection after the scripted bytes") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"reset_after_bytes": 150, "respond": {"text": "one two three four"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("x"));
  REQUIRE(res.failure);
  CHECK(res.failure->code == errc::network);
  CHECK(res.body.size() <= 150);
  if (!res.body.empty())
    CHECK(res.body.compare(0, 21, "event: message_start\n") == 0);
}

TEST_CASE("fake_llm_server truncates streams") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"protocol": "openai", "times": 1}, "truncate": true,
     "respond": {"text": "cut short"}},
    {"match": {"protocol": "openai"}, "truncate": 3,
     "respond": {"text": "a b c d e"}},
    {"match": {"protocol": "anthropic"}, "truncate": true,
     "respond": {"text": "cut short"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto url = srv.base_url_openai() + "/chat/completions";
  auto res = post(client, url, openai_body("x"));
  REQUIRE_FALSE(res.failure);
  auto s = assemble_openai(res.body);
  CHECK(s.content == "cut short");
  CHECK(s.finish_reason == "stop");
  CHECK_FALSE(s.done);
  res = post(client, url, openai_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(parse_sse(res.body).size() == 3);
  s = assemble_openai(res.body);
  CHECK(s.content == "a b");
  CHECK(s.finish_reason.empty());
  CHECK_FALSE(s.done);
  res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("x"));
  REQUIRE_FALSE(res.failure);
  auto a = assemble_anthropic(res.body);
  REQUIRE_FALSE(a.types.empty());
  CHECK(a.types.back() == "message_delta");
  CHECK(a.blocks[0].text == "cut short");
}

TEST_CASE("fake_llm_server inserts a malformed event") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script(json::parse(R"([
    {"match": {"protocol": "openai"}, "malformed_chunk": true,
     "respond": {"text": "x y"}},
    {"match": {"protocol": "anthropic"}, "malformed_chunk": 3,
     "respond": {"text": "x y"}}
  ])")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
  REQUIRE_FALSE(res.failure);
  auto s = assemble_openai(res.body);
  CHECK(s.invalid == 1);
  CHECK(s.invalid_index == 1);
  CHECK(s.content == "x y");
  CHECK(s.done);
  res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("x"));
  REQUIRE_FALSE(res.failure);
  auto a = assemble_anthropic(res.body);
  CHECK(a.invalid == 1);
  CHECK(a.invalid_index == 3);
  CHECK(a.types[3] == "content_block_delta");
  CHECK(a.types.back() == "message_stop");
}

// -- replay -------------------------------------------------------------------

TEST_CASE("fake_llm_server replays fixtures byte for byte") {
  auto path = fixture("openai_chat/openai-python__tool_calls_parallel_two.sse");
  auto expected = quarry::test::read_file(path);
  REQUIRE_FALSE(expected.empty());
  curl_http_client client{http_settings{}};
  SUBCASE("in one piece") {
    fake_llm_server srv;
    REQUIRE_FALSE(srv.replay(path));
    auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
    REQUIRE_FALSE(res.failure);
    CHECK(res.status == 200);
    CHECK(content_type(res) == "text/event-stream; charset=utf-8");
    CHECK(res.body == expected);
    // The replay rule answers any number of requests.
    res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
    CHECK(res.body == expected);
  }
  SUBCASE("in small delayed pieces") {
    fake_llm_server srv;
    replay_options opts;
    opts.chunk_bytes = 7;
    opts.chunk_delay = 1ms;
    opts.times = 1;
    REQUIRE_FALSE(srv.replay(path, "text/event-stream", opts));
    auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
    REQUIRE_FALSE(res.failure);
    CHECK(content_type(res) == "text/event-stream");
    CHECK(res.body == expected);
    res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
    CHECK(res.status == 500);
  }
  SUBCASE("raw bytes") {
    fake_llm_server srv;
    REQUIRE_FALSE(srv.replay("data: {\"bogus\":1}\n\ndata: [DONE]\n\n"));
    auto res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
    CHECK(res.body == "data: {\"bogus\":1}\n\ndata: [DONE]\n\n");
  }
}

TEST_CASE("fake_llm_server replays fixtures named in a script file") {
  quarry::test::temp_dir dir;
  auto target = fixture("anthropic_messages/extracted/"
                        "tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-"
                        "2c9673f18e12__0_200.sse");
  auto expected = quarry::test::read_file(target);
  REQUIRE_FALSE(expected.empty());
  dir.write("fixture.sse", expected);
  auto script = dir.write("script.json", R"([
    {"match": {"protocol": "anthropic"},
     "replay": {"file": "fixture.sse", "chunk_bytes": 64}},
    {"replay": {"bytes": "{\"ok\":true}", "content_type": "application/json",
                "status": 201, "headers": {"x-test": "yes"}}}
  ])");
  fake_llm_server srv;
  REQUIRE_FALSE(srv.script_file(script));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(res.body == expected);
  CHECK(assemble_anthropic(res.body).stop_reason == "tool_use");
  res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("x"));
  CHECK(res.status == 201);
  CHECK(res.body == "{\"ok\":true}");
  CHECK(sdk::find_header(res.headers, "x-test") == "yes");
}

// -- recorded requests --------------------------------------------------------

TEST_CASE("fake_llm_server records requests") {
  fake_llm_server srv;
  REQUIRE_FALSE(srv.add_rule(json::parse(R"({"respond": {"text": "ok"}})")));
  curl_http_client client{http_settings{}};
  auto res = post(client, srv.base_url_openai() + "/chat/completions",
                  openai_body("first question"), {{"Authorization", "Bearer sk-test"}});
  REQUIRE_FALSE(res.failure);
  res = post(client, srv.base_url_anthropic() + "/v1/messages", anthropic_body("second question"),
             {{"x-api-key", "ak-test"}, {"anthropic-version", "2023-06-01"}});
  REQUIRE_FALSE(res.failure);
  CHECK(srv.wait_for_requests(2, 10s));
  CHECK(srv.request_count() == 2);
  auto requests = srv.requests();
  REQUIRE(requests.size() == 2);
  const llm_request& a = requests[0];
  CHECK(a.protocol == "openai");
  CHECK(a.method == "POST");
  CHECK(a.path == "/v1/chat/completions");
  CHECK(a.header("authorization") == "Bearer sk-test");
  CHECK(a.body == openai_body("first question"));
  CHECK(a.raw_body == openai_body("first question").dump());
  CHECK(a.rule == 0);
  const llm_request& b = requests[1];
  CHECK(b.protocol == "anthropic");
  CHECK(b.path == "/v1/messages");
  CHECK(b.header("X-API-KEY") == "ak-test");
  CHECK(b.body["messages"][0]["content"] == "second question");
  srv.clear_requests();
  CHECK(srv.request_count() == 0);
  CHECK_FALSE(srv.request_at(0));
  // Without recording, requests are only counted.
  srv.record_requests(false);
  res = post(client, srv.base_url_openai() + "/chat/completions", openai_body("third question"));
  CHECK(res.status == 200);
  CHECK(srv.request_count() == 1);
  CHECK(srv.requests().empty());
}

// -- standalone executable ----------------------------------------------------

namespace {

std::string standalone_path() {
  return std::string{QUARRY_BINARY_DIR} + "/bin/fake_llm_server";
}

// Runs the standalone server with `args`; reads its first line of output.
class standalone {
public:
  explicit standalone(std::vector<std::string> args) {
    args.insert(args.begin(), standalone_path());
    std::vector<char*> argv;
    for (auto& x : args)
      argv.push_back(x.data());
    argv.push_back(nullptr);
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    auto rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
    REQUIRE(rc == 0);
  }

  ~standalone() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }

  standalone(const standalone&) = delete;
  standalone& operator=(const standalone&) = delete;

  // Returns the first line of the child's output (empty on EOF or timeout).
  std::string first_line() {
    std::string line;
    char c = 0;
    while (line.size() < 100) {
      pollfd pfd{out_, POLLIN, 0};
      if (::poll(&pfd, 1, 30000) <= 0 || ::read(out_, &c, 1) != 1 || c == '\n')
        break;
      line += c;
    }
    return line;
  }

  // Sends `sig` and returns the exit status (-1 unless the child exited).
  int stop(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

private:
  pid_t pid_ = -1;
  int out_ = -1;
};

} // namespace

TEST_CASE("fake_llm_server runs standalone with a script"
          * doctest::skip(!std::filesystem::exists(standalone_path()))) {
  quarry::test::temp_dir dir;
  auto script = dir.write("script.json", R"({"rules": [
    {"match": {"protocol": "openai"}, "respond": {"text": "from the file"}}
  ]})");
  standalone child{{"--script", script}};
  auto line = child.first_line();
  REQUIRE_FALSE(line.empty());
  auto port = std::stoi(line);
  REQUIRE(port > 0);
  auto base = "http://127.0.0.1:" + std::to_string(port);
  curl_http_client client{http_settings{}};
  auto res = post(client, base + "/v1/chat/completions", openai_body("x"));
  REQUIRE_FALSE(res.failure);
  CHECK(assemble_openai(res.body).content == "from the file");
  // The control endpoints replace the script and list the requests.
  res = post(client, base + "/_fake/script", json::parse(R"([{"respond": {"text": "replaced"}}])"));
  CHECK(res.status == 200);
  res = post(client, base + "/_fake/script", json::parse(R"([{"bad": 1}])"));
  CHECK(res.status == 400);
  res = post(client, base + "/v1/messages", anthropic_body("y"));
  CHECK(assemble_anthropic(res.body).blocks[0].text == "replaced");
  sdk::http_request get;
  get.url = base + "/_fake/requests";
  res = fetch(client, get);
  REQUIRE(res.status == 200);
  auto list = json::parse(res.body);
  REQUIRE(list.size() == 2);
  CHECK(list[0]["protocol"] == "openai");
  CHECK(list[0]["body"] == openai_body("x"));
  CHECK(list[1]["protocol"] == "anthropic");
  CHECK(list[1]["target"] == "/v1/messages");
  CHECK(child.stop(SIGTERM) == 0);
}

TEST_CASE("fake_llm_server standalone refuses a bad script"
          * doctest::skip(!std::filesystem::exists(standalone_path()))) {
  quarry::test::temp_dir dir;
  auto script = dir.write("script.json", R"([{"respond": {"txt": "x"}}])");
  auto result = quarry::test::run_process({standalone_path(), "--script", script});
  CHECK(result.exit_code == 1);
  CHECK(result.out.empty());
  CHECK(result.err.find("unknown key `txt`") != std::string::npos);
}

TEST_CASE("run_process survives a child that does not read its input") {
  // The child exits at once; writing the rest of 8 MB must fail quietly in
  // the test process, not end it with SIGPIPE.
  quarry::test::process_options opts;
  opts.input = std::string(8 << 20, 'x');
  auto res = quarry::test::run_process({"/bin/true"}, opts);
  CHECK(res.exit_code == 0);
  // And a child that reads gets every byte.
  opts.input = std::string(3 << 20, 'y');
  auto counted = quarry::test::run_process({"/usr/bin/wc", "-c"}, opts);
  CHECK(counted.exit_code == 0);
  CHECK(counted.out.find(std::to_string(3 << 20)) != std::string::npos);
}

} // namespace fake_llm_server_test
