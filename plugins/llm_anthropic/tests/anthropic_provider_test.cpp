// End-to-end tests of the `anthropic` provider: recorded streams and errors
// replayed by the real test HTTP server through the real host HTTP client,
// request bodies, cancellation, truncation, and loading the built module.

#include "anthropic_errors.hpp"
#include "anthropic_provider.hpp"
#include "anthropic_request.hpp"
#include "anthropic_stream.hpp"

#include "anthropic_test_support.hpp"

#include "quarry/core/settings.hpp"
#include "quarry/host/http_client.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"

#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace anthropic_provider_test {

using namespace std::chrono_literals;

namespace {

namespace sdk = quarry::sdk;
namespace anth = quarry::plugins::llm_anthropic;
using nlohmann::json;
using quarry::test::http_server;
using quarry::test::response_plan;

// Only guards against a hanging test; never a timing assertion.
constexpr auto hang_guard = 20s;

using quarry::test::anthropic_fixture;

// -- a host context of our own --------------------------------------------------

using quarry::test::test_host;

// -- a sink that records everything ---------------------------------------------

class recording_sink final : public sdk::chat_sink {
public:
  void on_text(std::string_view delta) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      after_completion_ += completions_;
      text_ += delta;
      cv_.notify_all();
      hook = std::move(on_first_text);
    }
    if (hook)
      hook();
  }
  void on_reasoning(std::string_view delta) override {
    std::lock_guard<std::mutex> guard{mtx_};
    after_completion_ += completions_;
    reasoning_ += delta;
  }
  void on_tool_call(const sdk::tool_call_delta& delta) override {
    std::lock_guard<std::mutex> guard{mtx_};
    after_completion_ += completions_;
    auto& call = calls_[delta.index];
    if (!delta.id.empty())
      call.id = delta.id;
    if (!delta.name.empty())
      call.name = delta.name;
    call.arguments += delta.arguments;
  }
  void on_usage(const sdk::usage& counts) override {
    std::lock_guard<std::mutex> guard{mtx_};
    after_completion_ += completions_;
    usage_ = counts;
  }
  void on_done(const sdk::chat_result& result) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++completions_;
    result_ = result;
    cv_.notify_all();
  }
  void on_error(const sdk::error& failure, bool streamed) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++completions_;
    failure_ = failure;
    streamed_ = streamed;
    cv_.notify_all();
  }

  // Waits for a completion; returns false if none came.
  bool wait() {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard, [this] { return completions_ > 0; });
  }

  // Waits until the text streamed so far is `expected`.
  bool wait_for_text(const std::string& expected) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard, [&] { return text_ == expected; });
  }

  // Called once, without the lock, after the first text delta.
  std::function<void()> on_first_text;

  std::mutex mtx_;
  std::condition_variable cv_;
  std::string text_;
  std::string reasoning_;
  std::map<int, sdk::tool_call> calls_;
  std::optional<sdk::usage> usage_;
  int completions_ = 0;
  int after_completion_ = 0;
  std::optional<sdk::chat_result> result_;
  std::optional<sdk::error> failure_;
  bool streamed_ = false;
};

// A server answering POST /v1/messages with a plan, recording the requests.
struct fake_api {
  http_server server;
  std::mutex mtx;
  std::vector<quarry::test::request> requests;
  std::function<response_plan()> plan;

  fake_api() {
    server.route("POST", "/v1/messages", [this](const quarry::test::request& req) {
      std::lock_guard<std::mutex> guard{mtx};
      requests.push_back(req);
      return plan();
    });
  }

  json config(json extra = json::object()) const {
    json result = {
      {"base_url", server.url("")}, {"api_key", "sk-ant-test-secret"}, {"model", "claude-test"}};
    result.update(extra);
    return result;
  }
};

response_plan sse_whole(const std::string& bytes) {
  return response_plan::text(200, bytes, "text/event-stream; charset=utf-8");
}

// Splits `bytes` into chunks of 1 to 23 bytes with short pauses between
// groups, so that events, lines and UTF-8 sequences arrive in pieces.
response_plan sse_pieces(const std::string& bytes) {
  response_plan plan{200};
  plan.header("Content-Type", "text/event-stream; charset=utf-8").chunked();
  size_t pos = 0;
  size_t size = 1;
  int count = 0;
  while (pos < bytes.size()) {
    auto n = std::min(size, bytes.size() - pos);
    plan.send(bytes.substr(pos, n));
    pos += n;
    size = size % 23 + 1;
    if (++count % 8 == 0)
      plan.delay(1ms);
  }
  return plan;
}

sdk::chat_request simple_request(std::string question = "Hi?") {
  sdk::chat_request req;
  sdk::chat_message m;
  m.author = sdk::role::user;
  m.content = std::move(question);
  req.messages.push_back(m);
  return req;
}

// Runs one chat with configuration `cfg` and returns the finished sink.
std::shared_ptr<recording_sink> run_chat(json cfg, sdk::chat_request req = simple_request()) {
  test_host host;
  anth::provider prov{host, anth::parse_config(cfg)};
  auto sink = std::make_shared<recording_sink>();
  auto call = prov.chat(std::move(req), sink);
  REQUIRE(call != nullptr);
  REQUIRE(sink->wait());
  host.shutdown();
  CHECK(sink->completions_ == 1);
  CHECK(sink->after_completion_ == 0);
  return sink;
}

const char* const stream_fixtures[] = {
  "extracted/_parse__TestAsyncMessages__9381e2b7-7fa1-46f7-9f78-46dc8431ea9d__0_200.sse",
  "extracted/_parse__TestAsyncStream__a8b7dbb8-2321-4624-abdb-7ba2136b5c38__2_200.sse",
  "extracted/tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12__0_200.sse",
  "extracted/tools__TestSyncRunTools__555fb399-a54c-455b-9ac5-2c9673f18e12__1_200.sse",
  "extracted/tools__TestSyncRunTools__771c64ff-a0af-4cd9-8080-a5a539da7cb9__0_200.sse",
  "extracted/tools__TestSyncRunTools__771c64ff-a0af-4cd9-8080-a5a539da7cb9__1_200.sse",
  "sdk_fixtures/fable-fallback__stream-a-refusal.sse",
  "sdk_fixtures/fable-fallback__stream-a-toolrefusal.sse",
  "sdk_fixtures/fable-fallback__stream-b-fallback.sse",
  "sdk_fixtures/fixtures__basic_response.sse",
  "sdk_fixtures/fixtures__compaction_response.sse",
  "sdk_fixtures/fixtures__fallback_credit_response.sse",
  "sdk_fixtures/fixtures__fallback_response.sse",
  "sdk_fixtures/fixtures__incomplete_partial_json_response.sse",
  "sdk_fixtures/fixtures__refusal_response.sse",
  "sdk_fixtures/fixtures__tool_use_response.sse",
};

// What the decoder (checked against the fixtures' own deltas in the logic
// tests) makes of a whole stream.
sdk::chat_result decode(const std::string& bytes) {
  struct ignore : anth::stream_listener {
    void on_text(std::string_view) override {
      // nop
    }
    void on_reasoning(std::string_view) override {
      // nop
    }
    void on_tool_call(const sdk::tool_call_delta&) override {
      // nop
    }
    void on_usage(const sdk::usage&) override {
      // nop
    }
  } out;
  anth::stream_decoder dec;
  dec.feed(bytes, out);
  REQUIRE(dec.finish(out) == anth::stream_state::done);
  return dec.assembler().result();
}

void check_same(const sdk::chat_result& got, const sdk::chat_result& want,
                const recording_sink& sink) {
  CHECK(got.text == want.text);
  CHECK(sink.text_ == want.text);
  CHECK(got.reasoning == want.reasoning);
  CHECK(sink.reasoning_ == want.reasoning);
  CHECK(got.finish == want.finish);
  CHECK(got.model == want.model);
  CHECK(got.usage.input_tokens == want.usage.input_tokens);
  CHECK(got.usage.output_tokens == want.usage.output_tokens);
  CHECK(got.usage.reasoning_tokens == want.usage.reasoning_tokens);
  REQUIRE(sink.usage_);
  CHECK(sink.usage_->output_tokens == want.usage.output_tokens);
  REQUIRE(got.tool_calls.size() == want.tool_calls.size());
  REQUIRE(sink.calls_.size() == want.tool_calls.size());
  for (size_t i = 0; i < want.tool_calls.size(); ++i) {
    CHECK(got.tool_calls[i].id == want.tool_calls[i].id);
    CHECK(got.tool_calls[i].name == want.tool_calls[i].name);
    CHECK(got.tool_calls[i].arguments == want.tool_calls[i].arguments);
    const auto& streamed = sink.calls_.at(static_cast<int>(i));
    CHECK(streamed.id == want.tool_calls[i].id);
    CHECK(streamed.name == want.tool_calls[i].name);
    CHECK(streamed.arguments == want.tool_calls[i].arguments);
  }
}

} // namespace

TEST_CASE("anthropic: provider replays every recorded stream over HTTP") {
  fake_api api;
  for (const char* file : stream_fixtures) {
    CAPTURE(file);
    auto bytes = anthropic_fixture(file);
    auto want = decode(bytes);
    for (bool pieces : {false, true}) {
      CAPTURE(pieces);
      api.plan = [&] { return pieces ? sse_pieces(bytes) : sse_whole(bytes); };
      auto sink = run_chat(api.config());
      REQUIRE_MESSAGE(sink->result_,
                      (sink->failure_ ? to_string(*sink->failure_) : std::string{"no result"}));
      check_same(*sink->result_, want, *sink);
    }
  }
  // Spot checks against the fixtures themselves.
  api.plan = [&] { return sse_pieces(anthropic_fixture(stream_fixtures[2])); };
  auto sink = run_chat(api.config());
  REQUIRE(sink->result_);
  REQUIRE(sink->result_->tool_calls.size() == 1);
  CHECK(sink->result_->tool_calls[0].id == "toolu_018acGYLtfR52q9yDbWaEdQZ");
  CHECK(json::parse(sink->result_->tool_calls[0].arguments)
        == json{{"location", "San Francisco, CA"}, {"units", "f"}});
  CHECK(sink->result_->finish == sdk::finish_reason::tool_calls);
  CHECK(sink->result_->usage.input_tokens == 656);
  CHECK(sink->result_->usage.output_tokens == 74);
}

TEST_CASE("anthropic: provider classifies recorded HTTP errors") {
  fake_api api;
  size_t errors = 0;
  for (const char* file : quarry::test::recorded_error_exchanges) {
    CAPTURE(file);
    for (const auto& x : json::parse(anthropic_fixture(file))) {
      const auto& resp = x["response"];
      int status = resp["status_code"];
      if (status < 400)
        continue;
      ++errors;
      api.plan = [&] {
        auto plan = response_plan::json(status, resp["body"].dump());
        for (const auto& [k, v] : resp["headers"].items())
          if (k != "content-length" && k != "connection" && k != "content-type")
            plan.header(k, v.get<std::string>());
        return plan;
      };
      auto sink = run_chat(api.config());
      REQUIRE(sink->failure_);
      CHECK_FALSE(sink->streamed_);
      CHECK(sink->failure_->http_status == status);
      if (status == 429) {
        CHECK(sink->failure_->code == sdk::errc::rate_limited);
        CHECK(sink->failure_->retry_hint == std::optional<bool>{true});
        CHECK(sink->failure_->retryable());
      } else {
        CHECK(sink->failure_->code == sdk::errc::bad_request);
        CHECK(sink->failure_->retry_hint == std::optional<bool>{false});
        CHECK_FALSE(sink->failure_->retryable());
      }
    }
  }
  CHECK(errors == 5);
}

TEST_CASE("anthropic: provider maps 529, 429 with Retry-After, and 401") {
  fake_api api;
  SUBCASE("529 overloaded") {
    api.plan = [] {
      return response_plan::json(
        529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::overloaded);
    CHECK(sink->failure_->retryable());
  }
  SUBCASE("429 with retry-after") {
    api.plan = [] {
      return response_plan::json(
               429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow"}})")
        .header("retry-after", "12");
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::rate_limited);
    CHECK(sink->failure_->retry_after_ms == std::optional<int64_t>{12000});
  }
  SUBCASE("401 never leaks the key") {
    api.plan = [] {
      return response_plan::json(401, R"({"type":"error","error":{"type":"authentication_error",)"
                                      R"("message":"invalid x-api-key sk-ant-test-secret"}})");
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::auth);
    CHECK(sink->failure_->message.find("sk-ant-test-secret") == std::string::npos);
    CHECK_FALSE(sink->failure_->retryable());
  }
}

TEST_CASE("anthropic: provider reports error events inside a 200 stream") {
  fake_api api;
  SUBCASE("before any delta") {
    api.plan = [] {
      return sse_whole(anthropic_fixture("from_test_code/test_streaming__error_overloaded.sse"));
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::overloaded);
    CHECK_FALSE(sink->streamed_);
  }
  SUBCASE("after text") {
    auto bytes = anthropic_fixture("sdk_fixtures/fixtures__basic_response.sse");
    bytes = bytes.substr(0, bytes.find("event: content_block_stop"));
    bytes += anthropic_fixture("from_test_code/test_streaming__error_overloaded.sse");
    api.plan = [&] { return sse_pieces(bytes); };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::overloaded);
    CHECK(sink->streamed_);
    CHECK(sink->text_ == "Hello there!");
  }
}

TEST_CASE("anthropic: provider fails a truncated stream") {
  fake_api api;
  auto bytes = anthropic_fixture("sdk_fixtures/fixtures__tool_use_response.sse");
  auto cut = bytes.substr(0, bytes.find("event: message_delta"));
  SUBCASE("body complete but no message_stop") {
    api.plan = [&] { return sse_whole(cut); };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::network);
    CHECK(sink->failure_->message.find("stream ended early") != std::string::npos);
    CHECK(sink->streamed_);
    CHECK(sink->failure_->retryable());
  }
  SUBCASE("connection closed in the middle of a chunked body") {
    api.plan = [&] {
      response_plan plan{200};
      plan.header("Content-Type", "text/event-stream").chunked();
      plan.send(cut.substr(0, 300)).delay(5ms).close();
      return plan;
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::network);
    CHECK_FALSE(sink->result_);
  }
}

TEST_CASE("anthropic: provider accepts a non-streamed JSON answer") {
  fake_api api;
  auto body = anthropic_fixture("extracted/tools__TestSyncRunTools__a8ac789b-f856-48cd-9ff3-"
                                "d5f36799e432__1_200.json");
  api.plan = [&] { return response_plan::json(200, body); };
  auto sink = run_chat(api.config());
  REQUIRE(sink->result_);
  CHECK(sink->result_->text
        == "The weather in SF is currently **20\xC2\xB0"
           "C** (68\xC2\xB0"
           "F) and **Sunny**!");
  CHECK(sink->result_->finish == sdk::finish_reason::stop);
  CHECK(sink->result_->usage.input_tokens == 705);
  CHECK(sink->result_->usage.output_tokens == 25);
}

TEST_CASE("anthropic: provider sends the documented request") {
  fake_api api;
  api.plan = [] {
    return sse_whole(anthropic_fixture("sdk_fixtures/fixtures__basic_response.sse"));
  };
  sdk::chat_request req;
  auto add = [&](sdk::role author, std::string content) {
    sdk::chat_message m;
    m.author = author;
    m.content = std::move(content);
    req.messages.push_back(m);
    return &req.messages.back();
  };
  add(sdk::role::system, "You research.");
  add(sdk::role::user, "Weather in SF?");
  add(sdk::role::assistant, "")
    ->tool_calls.push_back({"toolu_1", "get_weather", "{\"location\":\"SF\"}"});
  add(sdk::role::assistant, "")->tool_calls.push_back({"toolu_2", "broken", "{oops"});
  add(sdk::role::tool, "68F")->tool_call_id = "toolu_1";
  add(sdk::role::tool, "n/a")->tool_call_id = "toolu_2";
  req.tools.push_back({"get_weather", "Weather.", json{{"type", "object"}}});
  req.choice = sdk::tool_choice::required;
  test_host host;
  auto cfg = api.config({{"beta", {"tools-2024-05-16", "prompt-caching-2024-07-31"}},
                         {"headers", {{"x-trace", "t1"}}},
                         {"max_tokens", 777}});
  anth::provider prov{host, anth::parse_config(cfg)};
  CHECK(prov.info().model == "claude-test");
  CHECK(prov.info().context_window == 200000);
  CHECK(prov.info().supports_tools);
  auto sink = std::make_shared<recording_sink>();
  auto call = prov.chat(req, sink);
  REQUIRE(sink->wait());
  host.shutdown();
  REQUIRE(sink->result_);
  CHECK(sink->result_->text == "Hello there!");
  auto warnings = host.warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("toolu_2") != std::string::npos);

  std::lock_guard<std::mutex> guard{api.mtx};
  REQUIRE(api.requests.size() == 1);
  const auto& got = api.requests[0];
  CHECK(got.method == "POST");
  CHECK(got.path == "/v1/messages");
  CHECK(got.header("x-api-key") == std::optional<std::string>{"sk-ant-test-secret"});
  CHECK(got.header("anthropic-version") == std::optional<std::string>{"2023-06-01"});
  CHECK(got.header("anthropic-beta")
        == std::optional<std::string>{"tools-2024-05-16,prompt-caching-2024-07-31"});
  CHECK(got.header("content-type") == std::optional<std::string>{"application/json"});
  CHECK(got.header("x-trace") == std::optional<std::string>{"t1"});
  CHECK_FALSE(got.header("authorization"));
  auto body = json::parse(got.body);
  auto expected = json::parse(R"({
    "model": "claude-test",
    "max_tokens": 777,
    "stream": true,
    "system": "You research.",
    "tools": [{"name": "get_weather", "description": "Weather.",
               "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"},
    "messages": [
      {"role": "user", "content": "Weather in SF?"},
      {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
         "input": {"location": "SF"}},
        {"type": "tool_use", "id": "toolu_2", "name": "broken", "input": {}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "68F",
         "is_error": false},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "n/a",
         "is_error": false}]}
    ]
  })");
  CHECK(body == expected);
}

TEST_CASE("anthropic: provider cancels mid-stream exactly once") {
  fake_api api;
  auto bytes = anthropic_fixture("sdk_fixtures/fixtures__basic_response.sse");
  auto head = bytes.substr(0, bytes.find("event: content_block_stop"));
  api.plan = [&] {
    response_plan plan{200};
    plan.header("Content-Type", "text/event-stream").chunked();
    plan.send(head).stall();
    return plan;
  };
  SUBCASE("from another thread") {
    test_host host;
    anth::provider prov{host, anth::parse_config(api.config())};
    auto sink = std::make_shared<recording_sink>();
    auto call = prov.chat(simple_request(), sink);
    REQUIRE(sink->wait_for_text("Hello there!"));
    call->cancel();
    call->cancel();
    REQUIRE(sink->wait());
    host.shutdown();
    call->cancel();
    CHECK(sink->completions_ == 1);
    CHECK(sink->after_completion_ == 0);
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::cancelled);
    CHECK_FALSE(sink->failure_->retryable());
    CHECK(sink->streamed_);
    CHECK(sink->text_ == "Hello there!");
  }
  SUBCASE("from inside the sink") {
    // The server answers only once the test holds the call handle, so that
    // the sink can use it from its first callback.
    std::mutex call_mtx;
    std::condition_variable call_cv;
    std::shared_ptr<sdk::chat_call> call;
    api.plan = [&] {
      std::unique_lock<std::mutex> guard{call_mtx};
      call_cv.wait_for(guard, hang_guard, [&] { return call != nullptr; });
      response_plan plan{200};
      plan.header("Content-Type", "text/event-stream").chunked();
      plan.send(head).stall();
      return plan;
    };
    test_host host;
    anth::provider prov{host, anth::parse_config(api.config())};
    auto sink = std::make_shared<recording_sink>();
    sink->on_first_text = [&] {
      std::shared_ptr<sdk::chat_call> handle;
      {
        std::lock_guard<std::mutex> guard{call_mtx};
        handle = call;
      }
      CHECK(handle != nullptr);
      if (handle)
        handle->cancel();
    };
    auto started = prov.chat(simple_request(), sink);
    {
      std::lock_guard<std::mutex> guard{call_mtx};
      call = started;
    }
    call_cv.notify_all();
    REQUIRE(sink->wait());
    host.shutdown();
    CHECK(sink->completions_ == 1);
    CHECK(sink->after_completion_ == 0);
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::cancelled);
    CHECK(sink->streamed_);
    CHECK(sink->text_ == "Hello");
  }
  SUBCASE("after completion does nothing") {
    api.plan = [&] { return sse_whole(bytes); };
    test_host host;
    anth::provider prov{host, anth::parse_config(api.config())};
    auto sink = std::make_shared<recording_sink>();
    auto call = prov.chat(simple_request(), sink);
    REQUIRE(sink->wait());
    call->cancel();
    host.shutdown();
    CHECK(sink->completions_ == 1);
    CHECK(sink->result_);
    CHECK_FALSE(sink->failure_);
  }
}

TEST_CASE("anthropic: the built module loads through the plugin registry") {
  fake_api api;
  api.plan = [] {
    return sse_pieces(anthropic_fixture("sdk_fixtures/fixtures__tool_use_response.sse"));
  };
  quarry::core::settings cfg;
  cfg.runtime.data_dir = std::string{QUARRY_BINARY_DIR} + "/anthropic_test_data";
  quarry::host::host_services services{cfg};
  quarry::host::plugin_registry registry{services};
  auto failure = registry.load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_anthropic.so");
  REQUIRE_MESSAGE(!failure, *failure);
  const auto* info = registry.find("anthropic");
  REQUIRE(info != nullptr);
  CHECK(info->ok);
  CHECK(info->kind == sdk::plugin_kind::llm);
  CHECK(info->version == "0.1.0");

  auto bad = registry.make_llm("anthropic", api.config({{"max_tokns", 5}}), "a");
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("max_tokns") != std::string::npos);

  auto made = registry.make_llm("anthropic", api.config({{"context_window", 100000}}), "claude");
  REQUIRE_MESSAGE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made),
                  std::get<std::string>(made));
  auto prov = std::get<std::shared_ptr<sdk::llm_provider>>(made);
  CHECK(prov->info().context_window == 100000);
  auto sink = std::make_shared<recording_sink>();
  auto call = prov->chat(simple_request(), sink);
  REQUIRE(sink->wait());
  services.shutdown();
  REQUIRE(sink->result_);
  CHECK(sink->result_->text == "I'll check the current weather in Paris for you.");
  REQUIRE(sink->result_->tool_calls.size() == 1);
  CHECK(sink->result_->tool_calls[0].name == "get_weather");
  CHECK(json::parse(sink->result_->tool_calls[0].arguments) == json{{"location", "Paris"}});
  CHECK(sink->result_->finish == sdk::finish_reason::tool_calls);
}

// -- extended thinking over HTTP ---------------------------------------------------

namespace {

// A policy server that enforces what the Messages API enforces for extended
// thinking, answering HTTP 400 in Anthropic's error shape otherwise:
// - thinking with a `tool_choice` that forces tool use is refused;
// - `max_tokens` must exceed `thinking.budget_tokens`, which must be >= 1024;
// - with thinking, an assistant tool-use message that the request continues
//   (the last message holds tool results) must start with a thinking block;
// - every thinking block sent back must be one this server signed, with the
//   very text it signed, and every redacted block one it issued.
// Each valid request is answered with `next()` (SSE); each signature it
// issues is remembered.
struct thinking_policy_api {
  http_server server;
  std::mutex mtx;
  std::vector<json> bodies;
  std::map<std::string, std::string> signed_texts; // signature -> thinking
  std::vector<std::string> redacted_issued;
  int refused = 0;
  std::function<json()> next_content; // content blocks of the next answer
  json next_stop = "tool_use";

  thinking_policy_api() {
    server.route("POST", "/v1/messages", [this](const quarry::test::request& req) {
      std::lock_guard<std::mutex> guard{mtx};
      auto body = json::parse(req.body);
      bodies.push_back(body);
      if (auto why = check(body); !why.empty()) {
        ++refused;
        return response_plan::json(
          400, json{{"type", "error"},
                    {"error", {{"type", "invalid_request_error"}, {"message", why}}},
                    {"request_id", "req_011Policy"}}
                 .dump());
      }
      auto content = next_content();
      for (auto& block : content) {
        if (block["type"] == "thinking") {
          auto sig = "sig-" + std::to_string(signed_texts.size() + 1);
          block["signature"] = sig;
          signed_texts[sig] = block["thinking"];
        } else if (block["type"] == "redacted_thinking") {
          redacted_issued.push_back(block["data"]);
        }
      }
      return response_plan::text(200, quarry::test::messages_stream(content, next_stop),
                                 "text/event-stream; charset=utf-8");
    });
  }

  // Why the API would refuse `body`, or an empty string.
  std::string check(const json& body) {
    bool thinking = body.contains("thinking") && body["thinking"]["type"] == "enabled";
    if (!thinking)
      return {};
    if (auto tc = body.value("tool_choice", json::object()).value("type", "auto");
        tc == "any" || tc == "tool")
      return "Thinking may not be enabled when tool_choice forces tool use.";
    auto budget = body["thinking"]["budget_tokens"].get<int64_t>();
    if (budget < 1024)
      return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024";
    if (body["max_tokens"].get<int64_t>() <= budget)
      return "`max_tokens` must be greater than `thinking.budget_tokens`.";
    const auto& messages = body["messages"];
    for (size_t i = 0; i < messages.size(); ++i) {
      const auto& content = messages[i]["content"];
      if (!content.is_array())
        continue;
      for (size_t k = 0; k < content.size(); ++k) {
        const auto& block = content[k];
        auto at = "messages." + std::to_string(i) + ".content." + std::to_string(k);
        if (block["type"] == "thinking") {
          auto sig = block.value("signature", "");
          auto known = signed_texts.find(sig);
          if (known == signed_texts.end() || known->second != block.value("thinking", ""))
            return at + ": Invalid `signature` in `thinking` block";
        } else if (block["type"] == "redacted_thinking") {
          if (std::find(redacted_issued.begin(), redacted_issued.end(), block.value("data", ""))
              == redacted_issued.end())
            return at + ": Invalid `data` in `redacted_thinking` block";
        }
      }
    }
    if (messages.size() >= 2) {
      const auto& last = messages.back();
      const auto& prev = messages[messages.size() - 2];
      auto has = [](const json& content, const char* type) {
        if (!content.is_array())
          return false;
        for (const auto& block : content)
          if (block["type"] == type)
            return true;
        return false;
      };
      if (last["role"] == "user" && has(last["content"], "tool_result")
          && prev["role"] == "assistant" && has(prev["content"], "tool_use")) {
        auto first = prev["content"][0]["type"];
        if (first != "thinking" && first != "redacted_thinking")
          return "messages." + std::to_string(messages.size() - 2)
                 + ".content.0.type: Expected `thinking` or `redacted_thinking`, but "
                   "found `"
                 + first.get<std::string>()
                 + "`. When `thinking` is enabled, a final `assistant` message must "
                   "start with a thinking block (preceeding the lastmost set of "
                   "`tool_use` and `tool_result` blocks). We recommend you include "
                   "thinking blocks from previous turns. To avoid this requirement, "
                   "disable `thinking`. Please consult our documentation at "
                   "https://docs.claude.com/en/docs/build-with-claude/extended-thinking";
      }
    }
    return {};
  }

  json config() const {
    return {{"base_url", server.url("")},
            {"api_key", "sk-ant-test-secret"},
            {"model", "claude-test"},
            {"thinking_budget", 2048}};
  }
};

// Runs one chat against `cfg` and returns the finished sink and the
// warnings the plugin logged.
std::pair<std::shared_ptr<recording_sink>, std::vector<std::string>>
run_logged(json cfg, sdk::chat_request req) {
  test_host host;
  anth::provider prov{host, anth::parse_config(cfg)};
  auto sink = std::make_shared<recording_sink>();
  auto call = prov.chat(std::move(req), sink);
  REQUIRE(sink->wait());
  host.shutdown();
  CHECK(sink->completions_ == 1);
  return {sink, host.warnings()};
}

sdk::chat_request research_step() {
  sdk::chat_request req;
  sdk::chat_message sys;
  sys.author = sdk::role::system;
  sys.content = "You research. Always call a tool.";
  req.messages.push_back(sys);
  sdk::chat_message q;
  q.author = sdk::role::user;
  q.content = "Weather in Paris?";
  req.messages.push_back(q);
  req.tools.push_back({"get_weather", "Weather.", json{{"type", "object"}}});
  req.choice = sdk::tool_choice::required;
  req.max_tokens = 1024;
  return req;
}

// Appends the assistant turn of `res` (as the host keeps it) and a tool
// result for each of its calls.
void continue_with(sdk::chat_request& req, const sdk::chat_result& res, bool keep_state = true) {
  sdk::chat_message a;
  a.author = sdk::role::assistant;
  a.content = res.text;
  a.reasoning = res.reasoning;
  if (keep_state)
    a.reasoning_state = res.reasoning_state;
  a.tool_calls = res.tool_calls;
  req.messages.push_back(a);
  for (const auto& call : res.tool_calls) {
    sdk::chat_message t;
    t.author = sdk::role::tool;
    t.content = "18C, sunny";
    t.tool_call_id = call.id;
    req.messages.push_back(t);
  }
}

} // namespace

TEST_CASE("anthropic: a recorded-shape thinking stream round-trips its blocks over HTTP") {
  fake_api api;
  api.plan = [] { return sse_pieces(quarry::test::thinking_tool_stream); };
  auto cfg = api.config({{"thinking_budget", 2048}});
  auto req = research_step();
  auto first_warnings1 = run_logged(cfg, req);
  auto& first = first_warnings1.first;
  auto& warnings1 = first_warnings1.second;
  REQUIRE_MESSAGE(first->result_,
                  (first->failure_ ? to_string(*first->failure_) : std::string{"no result"}));
  CHECK(warnings1.empty());
  const auto& res = *first->result_;
  CHECK(first->reasoning_ == quarry::test::thinking_tool_stream_thinking);
  CHECK(res.reasoning == quarry::test::thinking_tool_stream_thinking);
  CHECK(json::parse(res.reasoning_state) == quarry::test::thinking_tool_stream_blocks());
  CHECK(res.finish == sdk::finish_reason::tool_calls);
  {
    std::lock_guard<std::mutex> guard{api.mtx};
    auto body = json::parse(api.requests.at(0).body);
    // Forced tool use with thinking: thinking on, tool choice `auto`.
    CHECK(body["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 2048}});
    CHECK(body["tool_choice"] == json{{"type", "auto"}});
    CHECK(body["max_tokens"] == 3072);
  }

  // The next step sends the blocks back, in order, before the tool_use.
  api.plan = [] {
    return sse_whole(anthropic_fixture("sdk_fixtures/fixtures__basic_response.sse"));
  };
  continue_with(req, res);
  auto second_warnings2 = run_logged(cfg, req);
  auto& second = second_warnings2.first;
  auto& warnings2 = second_warnings2.second;
  REQUIRE(second->result_);
  CHECK(warnings2.empty());
  std::lock_guard<std::mutex> guard{api.mtx};
  REQUIRE(api.requests.size() == 2);
  auto body = json::parse(api.requests[1].body);
  CHECK(body.contains("thinking"));
  const auto& turn = body["messages"][1];
  CHECK(turn["role"] == "assistant");
  auto expected = quarry::test::thinking_tool_stream_blocks();
  expected.push_back({{"type", "tool_use"},
                      {"id", "toolu_01T1x1fJ34qAmk2tNTrN7Up6"},
                      {"name", "get_weather"},
                      {"input", {{"location", "Paris"}}}});
  CHECK(turn["content"] == expected);
  // The signed text went back byte for byte.
  CHECK(api.requests[1].body.find(
          R"("signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=")")
        != std::string::npos);
}

TEST_CASE("anthropic: a two-step research conversation passes the thinking policy") {
  thinking_policy_api api;
  int step = 0;
  api.next_content = [&] {
    ++step;
    json content = json::array();
    content.push_back({{"type", "thinking"},
                       {"thinking", "Step " + std::to_string(step) + ": I need the weather."}});
    if (step == 1)
      content.push_back({{"type", "redacted_thinking"}, {"data", "ENCRYPTED-1"}});
    content.push_back({{"type", "tool_use"},
                       {"id", "toolu_" + std::to_string(step)},
                       {"name", "get_weather"},
                       {"input", {{"location", "Paris"}}}});
    return content;
  };
  auto req = research_step();
  auto first_w1 = run_logged(api.config(), req);
  auto& first = first_w1.first;
  auto& w1 = first_w1.second;
  REQUIRE_MESSAGE(first->result_,
                  (first->failure_ ? to_string(*first->failure_) : std::string{"no result"}));
  CHECK(w1.empty());
  REQUIRE(first->result_->tool_calls.size() == 1);

  SUBCASE("with the reasoning state kept, every step thinks") {
    continue_with(req, *first->result_);
    auto second_w2 = run_logged(api.config(), req);
    auto& second = second_w2.first;
    auto& w2 = second_w2.second;
    REQUIRE_MESSAGE(second->result_,
                    (second->failure_ ? to_string(*second->failure_) : std::string{"no result"}));
    CHECK(w2.empty());
    continue_with(req, *second->result_);
    api.next_stop = "end_turn";
    api.next_content = [] {
      return json::array({{{"type", "thinking"}, {"thinking", "Done."}},
                          {{"type", "text"}, {"text", "It is 18C and sunny in Paris."}}});
    };
    auto third_w3 = run_logged(api.config(), req);
    auto& third = third_w3.first;
    auto& w3 = third_w3.second;
    REQUIRE_MESSAGE(third->result_,
                    (third->failure_ ? to_string(*third->failure_) : std::string{"no result"}));
    CHECK(third->result_->text == "It is 18C and sunny in Paris.");
    CHECK(third->result_->finish == sdk::finish_reason::stop);
    CHECK(w3.empty());
    std::lock_guard<std::mutex> guard{api.mtx};
    CHECK(api.refused == 0);
    REQUIRE(api.bodies.size() == 3);
    for (const auto& body : api.bodies)
      CHECK(body.contains("thinking"));
    // The third request carries both earlier turns with their blocks first.
    const auto& messages = api.bodies[2]["messages"];
    CHECK(messages[1]["content"][0]["signature"] == "sig-1");
    CHECK(messages[1]["content"][1]
          == json({{"type", "redacted_thinking"}, {"data", "ENCRYPTED-1"}}));
    CHECK(messages[1]["content"][2]["type"] == "tool_use");
    CHECK(messages[3]["content"][0]["signature"] == "sig-2");
    CHECK(messages[3]["content"][1]["type"] == "tool_use");
  }
  SUBCASE("without the state, the step runs without thinking instead of failing") {
    continue_with(req, *first->result_, false);
    auto second_w2 = run_logged(api.config(), req);
    auto& second = second_w2.first;
    auto& w2 = second_w2.second;
    REQUIRE_MESSAGE(second->result_,
                    (second->failure_ ? to_string(*second->failure_) : std::string{"no result"}));
    REQUIRE(w2.size() == 1);
    CHECK(w2[0].find("without extended thinking") != std::string::npos);
    std::lock_guard<std::mutex> guard{api.mtx};
    CHECK(api.refused == 0);
    CHECK_FALSE(api.bodies.back().contains("thinking"));
    CHECK(api.bodies.back()["tool_choice"] == json{{"type", "any"}});
  }
  SUBCASE("a tampered thinking block is refused by the server, not retried") {
    auto res = *first->result_;
    auto state = json::parse(res.reasoning_state);
    state[0]["thinking"] = "Step 1: I need the weather!"; // changed text, same signature
    res.reasoning_state = state.dump();
    continue_with(req, res);
    auto second_w2 = run_logged(api.config(), req);
    auto& second = second_w2.first;
    REQUIRE(second->failure_);
    CHECK(second->failure_->code == sdk::errc::bad_request);
    CHECK(second->failure_->http_status == 400);
    CHECK(second->failure_->message.find("Invalid `signature`") != std::string::npos);
    CHECK_FALSE(second->failure_->retryable());
    std::lock_guard<std::mutex> guard{api.mtx};
    CHECK(api.refused == 1);
  }
  SUBCASE("the policy refuses a tool turn without its thinking block") {
    // What the plugin never sends (checked by the subcase above): the
    // server's rule is live, and its answer is a bad request.
    continue_with(req, *first->result_, false);
    std::vector<std::string> ignored;
    auto body = anth::build_request_body(anth::parse_config(api.config()), req, ignored);
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
    body["max_tokens"] = 4096;
    body["tool_choice"] = {{"type", "auto"}};
    {
      std::lock_guard<std::mutex> guard{api.mtx};
      CHECK(api.check(body).find("must start with a thinking block") != std::string::npos);
    }
    auto err = anth::classify_http_error(
      400, {},
      json{{"type", "error"},
           {"error", {{"type", "invalid_request_error"}, {"message", api.check(body)}}}}
        .dump());
    CHECK(err.code == sdk::errc::bad_request);
    CHECK_FALSE(err.retryable());
  }
}

TEST_CASE("anthropic: finish reasons and empty answers over HTTP") {
  fake_api api;
  auto thinking_only = json::array(
    {{{"type", "thinking"}, {"thinking", "Let me think."}, {"signature", "sig"}}});
  SUBCASE("no stop reason is unknown") {
    auto content = json::array({{{"type", "text"}, {"text", "Partial"}}});
    api.plan = [&] { return sse_pieces(quarry::test::messages_stream(content, nullptr)); };
    auto sink = run_chat(api.config());
    REQUIRE(sink->result_);
    CHECK(sink->result_->finish == sdk::finish_reason::unknown);
    CHECK(sink->result_->text == "Partial");
  }
  SUBCASE("a thinking-only answer is empty, streamed") {
    api.plan = [&] { return sse_pieces(quarry::test::messages_stream(thinking_only, "end_turn")); };
    auto sink = run_chat(api.config({{"thinking_budget", 2048}}));
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::empty_response);
    CHECK(sink->failure_->retryable());
    CHECK(sink->failure_->message.find("the model returned an empty answer") != std::string::npos);
    CHECK(sink->reasoning_ == "Let me think.");
    CHECK(sink->streamed_); // the thinking went out before the verdict
  }
  SUBCASE("a thinking-only answer is empty, as JSON") {
    api.plan = [&] {
      return response_plan::json(200,
                                 quarry::test::messages_body(thinking_only, "end_turn").dump());
    };
    auto sink = run_chat(api.config({{"thinking_budget", 2048}}));
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::empty_response);
    CHECK(sink->failure_->message.find("the model returned an empty answer") != std::string::npos);
  }
  SUBCASE("thinking cut by max_tokens is a result the host judges") {
    api.plan = [&] {
      return sse_whole(quarry::test::messages_stream(thinking_only, "max_tokens"));
    };
    auto sink = run_chat(api.config({{"thinking_budget", 2048}}));
    REQUIRE(sink->result_);
    CHECK(sink->result_->finish == sdk::finish_reason::length);
  }
}

TEST_CASE("anthropic: proven error causes win over wrappers over HTTP") {
  fake_api api;
  SUBCASE("529 overloaded_error whose message says the prompt is too long") {
    api.plan = [] {
      return response_plan::json(
               529, R"({"type":"error","error":{"type":"overloaded_error",)"
                    R"("message":"prompt is too long: 215000 tokens > 200000 maximum"}})")
        .header("x-should-retry", "true");
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::context_too_long);
    CHECK(sink->failure_->http_status == 529);
    CHECK_FALSE(sink->failure_->retryable());
  }
  SUBCASE("a gateway's 200 envelope relaying a context overflow as 502") {
    api.plan = [] {
      return response_plan::json(200,
                                 quarry::test::field_case("gateway-context-overflow/body.json"));
    };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::context_too_long);
    CHECK_FALSE(sink->failure_->retryable());
    CHECK(sink->failure_->message.find("maximum context length") != std::string::npos);
  }
  SUBCASE("an api_error event mid-stream saying the credit balance is too low") {
    auto bytes = anthropic_fixture("sdk_fixtures/fixtures__basic_response.sse");
    bytes = bytes.substr(0, bytes.find("event: content_block_stop"));
    bytes += "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
             "\"message\":\"Your credit balance is too low to access the Anthropic API.\"}}\n\n";
    api.plan = [&] { return sse_pieces(bytes); };
    auto sink = run_chat(api.config());
    REQUIRE(sink->failure_);
    CHECK(sink->failure_->code == sdk::errc::quota);
    CHECK_FALSE(sink->failure_->retryable());
  }
}

} // namespace anthropic_provider_test
