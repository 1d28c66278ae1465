// End-to-end tests of the `openai` plugin: the real provider class against
// the real test HTTP server and the host's curl client, replaying recorded
// streams and error bodies; plus loading the built module through the
// plugin registry.

#include "openai_provider.hpp"

#include "quarry/host/http_client.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"
#include "support/chat_recorder.hpp"
#include "support/http_server.hpp"
#include "support/process.hpp"

#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace openai_provider_test {

using namespace std::chrono_literals;

namespace {

namespace sdk = quarry::sdk;
namespace host = quarry::host;
namespace openai = quarry::plugins::llm_openai;
using nlohmann::json;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;
using sdk::errc;

std::string fixture_path(const std::string& rel) {
  return std::string{QUARRY_FIXTURES_DIR} + "/" + rel;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in.good());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

using quarry::test::test_host;

using quarry::test::chat_recorder;

sdk::chat_request simple_request() {
  sdk::chat_request req;
  req.messages.push_back({sdk::role::user, "What's the weather?", {}, {}, {}, {}, {}});
  return req;
}

// Splits `body` into pieces of `size` bytes, with a short delay every few
// pieces so that they arrive in separate reads.
response_plan split_stream(const std::string& body, size_t size) {
  response_plan plan{200};
  plan.header("Content-Type", "text/event-stream; charset=utf-8");
  plan.chunked();
  size_t n = 0;
  for (size_t i = 0; i < body.size(); i += size) {
    plan.send(body.substr(i, size));
    if (++n % 40 == 0)
      plan.delay(1ms);
  }
  return plan;
}

struct fixture_env {
  http_server server;
  test_host host;

  std::unique_ptr<openai::provider> make(json extra = json::object()) {
    json cfg{{"model", "gpt-4o"}, {"api_key", "sk-test-secret"}, {"base_url", server.url("/v1")}};
    for (auto& [k, v] : extra.items())
      cfg[k] = v;
    return std::make_unique<openai::provider>(host, openai::parse_config(cfg));
  }

  std::shared_ptr<chat_recorder> run(openai::provider& llm,
                                     sdk::chat_request req = simple_request()) {
    auto rec = std::make_shared<chat_recorder>();
    llm.chat(std::move(req), rec);
    REQUIRE(rec->wait());
    return rec;
  }
};

sdk::finish_reason expected_finish(const json& choice) {
  if (choice["refusal"].is_string())
    return sdk::finish_reason::content_filter; // our documented choice
  auto x = choice["finish_reason"].get<std::string>();
  if (x == "tool_calls")
    return sdk::finish_reason::tool_calls;
  if (x == "length")
    return sdk::finish_reason::length;
  return sdk::finish_reason::stop;
}

} // namespace

TEST_CASE_FIXTURE(fixture_env, "openai replays every recorded stream, whole and split") {
  auto dir = fixture_path("llm/openai_chat");
  auto expected = json::parse(read_file(dir + "/EXPECTED_ASSEMBLED.derived.json"));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator{dir})
    if (entry.path().extension() == ".sse")
      files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 12);
  auto llm = make();
  for (const auto& name : files) {
    CAPTURE(name);
    REQUIRE(expected.contains(name));
    auto body = read_file(dir + "/" + name);
    const auto& exp = expected[name];
    const auto& choice = exp["choices"][0];
    for (size_t piece : {size_t{0}, size_t{7}, size_t{64}}) {
      CAPTURE(piece);
      server.route("POST", "/v1/chat/completions", [&](const request&) {
        if (piece == 0)
          return response_plan::text(200, body, "text/event-stream");
        return split_stream(body, piece);
      });
      auto rec = run(*llm);
      REQUIRE_MESSAGE(rec->result.has_value(), (rec->failure ? sdk::to_string(*rec->failure) : ""));
      const auto& res = *rec->result;
      CHECK(rec->finals == 1);
      std::string text;
      if (choice["content"].is_string())
        text = choice["content"].get<std::string>();
      else if (choice["refusal"].is_string())
        text = choice["refusal"].get<std::string>();
      CHECK(res.text == text);
      CHECK(rec->text == text);
      CHECK(res.finish == expected_finish(choice));
      CHECK(res.model == exp["model"].get<std::string>());
      const auto& calls = choice["tool_calls"];
      REQUIRE(res.tool_calls.size() == calls.size());
      auto streamed_calls = rec->assembled_calls();
      REQUIRE(streamed_calls.size() == calls.size());
      for (size_t i = 0; i < calls.size(); ++i) {
        CHECK(res.tool_calls[i].id == calls[i]["id"].get<std::string>());
        CHECK(res.tool_calls[i].name == calls[i]["name"].get<std::string>());
        CHECK(res.tool_calls[i].arguments == calls[i]["arguments"].get<std::string>());
        auto& s = streamed_calls[static_cast<int>(i)];
        CHECK(s.id == res.tool_calls[i].id);
        CHECK(s.name == res.tool_calls[i].name);
        CHECK(s.arguments == res.tool_calls[i].arguments);
      }
      const auto& usage = exp["usage"];
      CHECK(res.usage.input_tokens == usage["prompt_tokens"].get<int64_t>());
      CHECK(res.usage.output_tokens == usage["completion_tokens"].get<int64_t>());
      CHECK(res.usage.reasoning_tokens
            == usage["completion_tokens_details"]["reasoning_tokens"].get<int64_t>());
      REQUIRE(rec->usages.size() == 1);
      CHECK(rec->usages[0].input_tokens == res.usage.input_tokens);
    }
  }
}

TEST_CASE_FIXTURE(fixture_env,
                  "openai classifies every recorded error body served with its status") {
  auto dir = fixture_path("llm/openai_errors");
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator{dir}) {
    auto name = entry.path().filename().string();
    CAPTURE(name);
    auto body = read_file(entry.path().string());
    auto status = name.find("__429_") != std::string::npos ? 429 : 400;
    REQUIRE((status == 429 || name.find("__400_") != std::string::npos));
    server.route("POST", "/v1/chat/completions",
                 [&](const request&) { return response_plan::json(status, body); });
    auto llm = make();
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->finals == 1);
    CHECK_FALSE(rec->streamed);
    CHECK(rec->failure->http_status == status);
    if (status == 400) {
      CHECK(rec->failure->code == errc::context_too_long);
    } else {
      CHECK(rec->failure->code == errc::rate_limited);
      if (name.find("try_again") != std::string::npos)
        CHECK(rec->failure->retry_after_ms == 26604);
      if (name.find("2023_format") != std::string::npos)
        CHECK(rec->failure->retry_after_ms == 6);
    }
    ++seen;
  }
  CHECK(seen == 6);
}

TEST_CASE_FIXTURE(fixture_env, "openai maps HTTP errors with headers") {
  SUBCASE("insufficient_quota") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::json(
        429,
        R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
    });
    auto rec = run(*make());
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::quota);
    CHECK_FALSE(rec->failure->retryable());
  }
  SUBCASE("rate limit with Retry-After") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::
        json(429,
             R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})")
          .header("Retry-After", "7");
    });
    auto rec = run(*make());
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::rate_limited);
    CHECK(rec->failure->retry_after_ms == 7000);
  }
  SUBCASE("401 without leaking the key") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::json(
        401,
        R"({"error":{"message":"Incorrect API key provided: sk-test-secret.","type":"invalid_request_error","code":"invalid_api_key"}})");
    });
    auto rec = run(*make());
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::auth);
    CHECK(rec->failure->message.find("sk-test-secret") == std::string::npos);
    CHECK(rec->failure->message.find("Incorrect API key") != std::string::npos);
  }
  SUBCASE("Google RESOURCE_EXHAUSTED") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::json(
        429,
        R"({"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}})");
    });
    auto rec = run(*make());
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::rate_limited);
    CHECK(rec->failure->retry_after_ms == 34400);
  }
  SUBCASE("503 overloaded, 404 model") {
    server.route("POST", "/v1/chat/completions", [](const request& r) {
      if (r.body.find("missing-model") != std::string::npos)
        return response_plan::json(
          404,
          R"({"error":{"message":"The model `missing-model` does not exist","type":"invalid_request_error","code":"model_not_found"}})");
      return response_plan::text(503, "upstream unavailable");
    });
    auto llm = make();
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::overloaded);
    auto req = simple_request();
    req.model = "missing-model";
    rec = run(*llm, req);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::not_found);
  }
}

TEST_CASE_FIXTURE(fixture_env, "openai sends the expected request") {
  std::mutex mtx;
  std::vector<request> seen;
  auto body = read_file(fixture_path("llm/openai_chat/openai-python__text_basic.sse"));
  auto route = [&](const std::string& path) {
    server.route("POST", path, [&](const request& r) {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back(r);
      return response_plan::text(200, body, "text/event-stream");
    });
  };
  auto last = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE(!seen.empty());
    return seen.back();
  };
  SUBCASE("OpenAI: bearer token, no tools, max_tokens") {
    route("/v1/chat/completions");
    auto llm = make({{"organization", "org-9"}, {"headers", {{"X-Extra", "1"}}}});
    auto req = simple_request();
    req.max_tokens = 321;
    req.temperature = 0.25;
    auto rec = run(*llm, req);
    REQUIRE(rec->result.has_value());
    auto r = last();
    CHECK(r.header("Authorization") == "Bearer sk-test-secret");
    CHECK_FALSE(r.header("api-key").has_value());
    CHECK(r.header("OpenAI-Organization") == "org-9");
    CHECK(r.header("X-Extra") == "1");
    CHECK(r.header("Content-Type") == "application/json");
    auto j = json::parse(r.body);
    CHECK(j["model"] == "gpt-4o");
    CHECK_FALSE(j.contains("tools"));
    CHECK_FALSE(j.contains("tool_choice"));
    CHECK(j["max_tokens"] == 321);
    CHECK(j["temperature"] == 0.25);
    CHECK(j["stream"] == true);
    CHECK(j["stream_options"]["include_usage"] == true);
    CHECK(j["messages"] == json::parse(R"([{"role":"user","content":"What's the weather?"}])"));
  }
  SUBCASE("reasoning model with tools") {
    route("/v1/chat/completions");
    auto llm = make({{"reasoning", true}, {"reasoning_effort", "medium"}});
    auto req = simple_request();
    req.max_tokens = 4000;
    req.temperature = 0.25;
    req.tools.push_back(
      {"web_search", "Search the web",
       json::parse(R"({"type":"object","properties":{"q":{"type":"string"}},"required":["q"]})")});
    req.choice = sdk::tool_choice::automatic;
    auto rec = run(*llm, req);
    REQUIRE(rec->result.has_value());
    auto j = json::parse(last().body);
    CHECK(j["max_completion_tokens"] == 4000);
    CHECK_FALSE(j.contains("max_tokens"));
    CHECK_FALSE(j.contains("temperature"));
    CHECK(j["reasoning_effort"] == "medium");
    CHECK(j["tool_choice"] == "auto");
    CHECK(j["tools"][0] == req.tools[0].to_openai());
  }
  SUBCASE("Azure: api-key header and api-version") {
    route("/openai/deployments/dep1/chat/completions");
    auto llm = make({{"azure", true},
                     {"api_version", "2024-10-21"},
                     {"base_url", server.url("/openai/deployments/dep1")}});
    auto rec = run(*llm);
    REQUIRE(rec->result.has_value());
    auto r = last();
    CHECK(r.header("api-key") == "sk-test-secret");
    CHECK_FALSE(r.header("Authorization").has_value());
    CHECK(r.param("api-version") == "2024-10-21");
  }
  SUBCASE("local server without a key") {
    route("/v1/chat/completions");
    auto llm = std::make_unique<openai::provider>(
      host, openai::parse_config({{"model", "llama3"}, {"base_url", server.url("/v1/")}}));
    auto rec = run(*llm);
    REQUIRE(rec->result.has_value());
    CHECK_FALSE(last().header("Authorization").has_value());
  }
}

TEST_CASE_FIXTURE(fixture_env, "openai cancel mid-stream reports cancelled exactly once") {
  auto body = read_file(fixture_path("llm/openai_chat/openai-python__text_basic.sse"));
  auto cut = body.find("\n\n", body.find("\"content\":\"I")) + 2;
  server.route("POST", "/v1/chat/completions", [&](const request&) {
    response_plan plan{200};
    plan.header("Content-Type", "text/event-stream");
    plan.chunked();
    plan.send(body.substr(0, cut));
    plan.stall();
    return plan;
  });
  auto llm = make();
  auto rec = std::make_shared<chat_recorder>();
  auto call = llm->chat(simple_request(), rec);
  REQUIRE(rec->wait_text());
  call->cancel();
  REQUIRE(rec->wait());
  call->cancel();
  // Concurrent cancels from other threads change nothing either.
  std::thread other{[call] { call->cancel(); }};
  other.join();
  std::this_thread::sleep_for(50ms); // let stray callbacks surface, if any
  REQUIRE(rec->failure.has_value());
  CHECK(rec->failure->code == errc::cancelled);
  CHECK(rec->streamed);
  CHECK(rec->finals == 1);
  CHECK(rec->after_final == 0);
  CHECK_FALSE(rec->result.has_value());
}

TEST_CASE_FIXTURE(fixture_env, "openai reports errors inside a 200 stream and truncated streams") {
  auto llm = make();
  SUBCASE("event: error after text") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::text(
        200,
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
        "event: error\n"
        "data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n",
        "text/event-stream");
    });
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::overloaded);
    CHECK(rec->streamed);
    CHECK(rec->text == "Hel");
    CHECK(rec->finals == 1);
  }
  SUBCASE("data error before anything streamed") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::text(
        200,
        "data: {\"error\":{\"message\":\"Rate limit. Please try again in 1.5s\","
        "\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}\n\n",
        "text/event-stream");
    });
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::rate_limited);
    CHECK(rec->failure->retry_after_ms == 1500);
    CHECK_FALSE(rec->streamed);
  }
  SUBCASE("truncated stream") {
    auto body = read_file(fixture_path("llm/openai_chat/openai-python__text_basic.sse"));
    auto cut = body.find("\n\n", body.size() / 2) + 2;
    server.route("POST", "/v1/chat/completions",
                 [&](const request&) { return split_stream(body.substr(0, cut), 13); });
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::network);
    CHECK(rec->failure->message.find("stream ended early") != std::string::npos);
    CHECK(rec->streamed);
    CHECK(rec->finals == 1);
  }
  SUBCASE("a server that ignores stream:true") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::json(
        200,
        R"({"id":"x","model":"llama3","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7}})");
    });
    auto rec = run(*llm);
    REQUIRE(rec->result.has_value());
    REQUIRE(rec->result->tool_calls.size() == 1);
    CHECK(rec->result->tool_calls[0].arguments == R"({"a":1})");
    CHECK(rec->result->finish == sdk::finish_reason::tool_calls);
    CHECK(rec->result->usage.output_tokens == 7);
    CHECK(rec->result->model == "llama3");
  }
  SUBCASE("malformed chunk") {
    server.route("POST", "/v1/chat/completions", [](const request&) {
      return response_plan::text(200, "data: {not json}\n\n", "text/event-stream");
    });
    auto rec = run(*llm);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::invalid_response);
    CHECK_FALSE(rec->streamed);
  }
  SUBCASE("connection refused") {
    auto port = server.port();
    server.stop();
    auto url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
    auto gone = std::make_unique<openai::provider>(
      host, openai::parse_config({{"model", "m"}, {"base_url", url}}));
    auto rec = run(*gone);
    REQUIRE(rec->failure.has_value());
    CHECK(rec->failure->code == errc::network);
    CHECK_FALSE(rec->streamed);
  }
}

TEST_CASE("openai module loads through the plugin registry and streams") {
  quarry::test::temp_dir tmp;
  quarry::core::settings cfg;
  cfg.runtime.data_dir = tmp.path();
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  registry.load_directories({QUARRY_PLUGIN_DIR});
  auto info = registry.find("openai");
  REQUIRE(info != nullptr);
  CHECK(info->ok);
  CHECK(info->kind == sdk::plugin_kind::llm);
  CHECK(
    std::get<std::string>(registry.make_llm("openai", {{"model", "m"}, {"typo", 1}})).find("typo")
    != std::string::npos);
  http_server server;
  auto body = read_file(fixture_path("llm/openai_chat/openai-python__tool_calls_parallel_two.sse"));
  server.route("POST", "/v1/chat/completions",
               [&](const request&) { return response_plan::text(200, body, "text/event-stream"); });
  auto made = registry.make_llm(
    "openai", {{"model", "gpt-4o"}, {"base_url", server.url("/v1")}, {"context_window", 128000}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
  auto llm = std::get<std::shared_ptr<sdk::llm_provider>>(made);
  CHECK(llm->info().model == "gpt-4o");
  CHECK(llm->info().context_window == 128000);
  auto rec = std::make_shared<chat_recorder>();
  llm->chat(simple_request(), rec);
  REQUIRE(rec->wait());
  REQUIRE(rec->result.has_value());
  REQUIRE(rec->result->tool_calls.size() == 2);
  CHECK(rec->result->tool_calls[1].name == "get_stock_price");
  CHECK(rec->result->finish == sdk::finish_reason::tool_calls);
  // on_done comes at [DONE], possibly before the HTTP exchange completed:
  // stop the HTTP client (which still holds the plugin's sink) while the
  // plugin's library is loaded.
  services.shutdown();
}

TEST_CASE_FIXTURE(fixture_env, "openai cancel racing with completion ends each call exactly once") {
  auto body = read_file(fixture_path("llm/openai_chat/openai-python__text_basic.sse"));
  server.route("POST", "/v1/chat/completions",
               [&](const request&) { return split_stream(body, 97); });
  auto llm = make();
  int done = 0;
  int cancelled = 0;
  for (int i = 0; i < 40; ++i) {
    auto rec = std::make_shared<chat_recorder>();
    auto call = llm->chat(simple_request(), rec);
    // Cancel at varying moments: before, during and after the stream.
    std::this_thread::sleep_for(std::chrono::microseconds{(i % 8) * 400});
    std::thread other{[call] { call->cancel(); }};
    call->cancel();
    other.join();
    REQUIRE(rec->wait());
    std::this_thread::sleep_for(2ms);
    CHECK(rec->finals == 1);
    CHECK(rec->after_final == 0);
    if (rec->result) {
      ++done;
      CHECK(rec->result->text.size() > 100);
    } else {
      REQUIRE(rec->failure.has_value());
      CHECK(rec->failure->code == errc::cancelled);
      ++cancelled;
    }
  }
  CHECK(done + cancelled == 40);
}

} // namespace openai_provider_test
