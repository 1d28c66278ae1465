// The `openai` provider's describe(): the context window read from the real
// test HTTP server speaking the shapes of vLLM, OpenRouter, LM Studio, Ollama
// and llama.cpp, through the host's curl client; the configured window; a
// hostile server; and the cache.

#include "openai_models.hpp"
#include "openai_provider.hpp"

#include "support/http_server.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace openai_models_test {

using namespace std::chrono_literals;

namespace {

namespace sdk = quarry::sdk;
namespace openai = quarry::plugins::llm_openai;
using nlohmann::json;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;

/// Waits for the answers of describe() and counts them.
struct described {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<sdk::model_info> answers;

  std::function<void(sdk::model_info)> callback() {
    return [this](sdk::model_info info) {
      std::lock_guard<std::mutex> guard{mtx};
      answers.push_back(std::move(info));
      cv.notify_all();
    };
  }

  /// The first answer, waiting up to 20 s for `n` answers.
  sdk::model_info wait(size_t n = 1) {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, 20s, [&] { return answers.size() >= n; }));
    return answers.front();
  }
};

struct models_env {
  http_server server;
  quarry::test::test_host host;
  std::atomic<int> models_hits{0};

  std::unique_ptr<openai::provider> make(const std::string& model, json extra = json::object()) {
    json cfg{{"model", model}, {"base_url", server.url("/v1")}};
    for (auto& [k, v] : extra.items())
      cfg[k] = v;
    return std::make_unique<openai::provider>(host, openai::parse_config(cfg));
  }

  void models(std::string body) {
    server.route("GET", "/v1/models", [this, body](const request&) {
      ++models_hits;
      return response_plan::json(200, body);
    });
  }

  sdk::model_info describe(openai::provider& llm) {
    described d;
    llm.describe(d.callback());
    return d.wait();
  }
};

} // namespace

TEST_CASE_FIXTURE(models_env, "context window: vLLM's max_model_len in /v1/models") {
  models(R"({"object": "list", "data": [
    {"id": "other-model", "object": "model", "owned_by": "vllm", "max_model_len": 4096},
    {"id": "Qwen/Qwen2.5-32B-Instruct", "object": "model", "owned_by": "vllm",
     "root": "Qwen/Qwen2.5-32B-Instruct", "max_model_len": 32768}]})");
  auto llm = make("Qwen/Qwen2.5-32B-Instruct");
  auto info = describe(*llm);
  CHECK(info.model == "Qwen/Qwen2.5-32B-Instruct");
  CHECK(info.context_window == 32768);
  CHECK(info.context_window_source == "vllm /models max_model_len");
  CHECK(server.requests_served() == 1);
  CHECK(llm->probe().requests_started() == 1);
}

TEST_CASE_FIXTURE(models_env, "context window: OpenRouter's context_length and "
                              "top_provider.context_length") {
  SUBCASE("context_length") {
    models(R"({"data": [
      {"id": "anthropic/claude-sonnet-4.5", "name": "Anthropic: Claude Sonnet 4.5",
       "context_length": 1000000, "architecture": {"input_modalities": ["text", "image"]},
       "pricing": {"prompt": "0.000003"}, "top_provider": {"context_length": 200000,
       "max_completion_tokens": 64000, "is_moderated": true}}]})");
    auto info = describe(*make("anthropic/claude-sonnet-4.5"));
    CHECK(info.context_window == 1000000);
    CHECK(info.context_window_source == "server /models context_length");
  }
  SUBCASE("only the top provider's") {
    models(R"({"data": [{"id": "meta-llama/llama-3.3-70b-instruct",
                         "top_provider": {"context_length": 131072}}]})");
    auto info = describe(*make("meta-llama/llama-3.3-70b-instruct"));
    CHECK(info.context_window == 131072);
    CHECK(info.context_window_source == "server /models top_provider.context_length");
  }
  SUBCASE("Groq's context_window") {
    models(R"({"object": "list", "data": [{"id": "llama-3.3-70b-versatile",
               "owned_by": "Meta", "active": true, "context_window": 131072}]})");
    auto info = describe(*make("llama-3.3-70b-versatile"));
    CHECK(info.context_window == 131072);
    CHECK(info.context_window_source == "server /models context_window");
  }
}

TEST_CASE_FIXTURE(models_env, "context window: LM Studio's REST API, loaded or not") {
  // Its /v1/models says no window; `owned_by: organization_owner` says LM
  // Studio, whose own API does.
  models(R"({"object": "list", "data": [
    {"id": "qwen3-8b", "object": "model", "owned_by": "organization_owner"}]})");
  std::atomic<int> rest_hits{0};
  SUBCASE("loaded: the length it was loaded with") {
    server.route("GET", "/api/v0/models", [&](const request&) {
      ++rest_hits;
      return response_plan::json(200, R"({"object": "list", "data": [
        {"id": "qwen3-8b", "object": "model", "type": "llm", "state": "loaded",
         "max_context_length": 131072, "loaded_context_length": 8192}]})");
    });
    auto info = describe(*make("qwen3-8b"));
    CHECK(info.context_window == 8192);
    CHECK(info.context_window_source == "lm studio /api/v0/models loaded_context_length");
  }
  SUBCASE("not loaded: its maximum") {
    server.route("GET", "/api/v0/models", [&](const request&) {
      ++rest_hits;
      return response_plan::json(200, R"({"object": "list", "data": [
        {"id": "qwen3-8b", "state": "not-loaded", "max_context_length": 131072}]})");
    });
    auto info = describe(*make("qwen3-8b"));
    CHECK(info.context_window == 131072);
    CHECK(info.context_window_source.rfind("lm studio /api/v0/models max_context_length", 0) == 0);
  }
  CHECK(rest_hits == 1);
  CHECK(models_hits == 1);
}

TEST_CASE_FIXTURE(models_env, "context window: Ollama's num_ctx, its loaded model, or "
                              "its default said as unknown") {
  models(R"({"object": "list", "data": [
    {"id": "qwen3:8b", "object": "model", "created": 1, "owned_by": "library"}]})");
  std::vector<std::string> shown;
  std::mutex mtx;
  auto show = [&](std::string body) {
    server.route("POST", "/api/show", [&, body](const request& req) {
      std::lock_guard<std::mutex> guard{mtx};
      shown.push_back(req.body);
      return response_plan::json(200, body);
    });
  };
  const std::string model_info = R"("model_info": {"general.architecture": "qwen3",
    "qwen3.context_length": 40960, "qwen3.embedding_length": 4096})";
  SUBCASE("num_ctx in the Modelfile's parameters") {
    show(
      R"({"modelfile": "FROM qwen3", "parameters": "repeat_penalty 1\nstop \"<|im_start|>\"\nnum_ctx                        65536\ntemperature 0.6",
             "details": {"family": "qwen3"}, )"
      + model_info + "}");
    auto info = describe(*make("qwen3:8b"));
    CHECK(info.context_window == 65536);
    CHECK(info.context_window_source == "ollama /api/show num_ctx");
    REQUIRE(shown.size() == 1);
    CHECK(json::parse(shown[0])["model"] == "qwen3:8b");
    CHECK(server.requests_served() == 2);
  }
  SUBCASE("no num_ctx, the model loaded: /api/ps") {
    show(R"({"parameters": "temperature 0.6", )" + model_info + "}");
    server.route("GET", "/api/ps", [](const request&) {
      return response_plan::json(200, R"({"models": [{"name": "qwen3:8b", "model": "qwen3:8b",
        "size": 6000000000, "size_vram": 6000000000, "context_length": 4096,
        "expires_at": "2030-01-01T00:00:00Z"}]})");
    });
    auto info = describe(*make("qwen3:8b"));
    CHECK(info.context_window == 4096);
    CHECK(info.context_window_source == "ollama /api/ps context_length (the loaded model)");
  }
  SUBCASE("no num_ctx, not loaded: unknown, naming Ollama's default and the remedy") {
    show(R"({"parameters": "temperature 0.6", )" + model_info + "}");
    server.route("GET", "/api/ps",
                 [](const request&) { return response_plan::json(200, R"({"models": []})"); });
    auto info = describe(*make("qwen3:8b"));
    CHECK(info.context_window == 0);
    CHECK(info.context_window_source.find("default context") != std::string::npos);
    CHECK(info.context_window_source.find("OLLAMA_CONTEXT_LENGTH=65536") != std::string::npos);
    CHECK(info.context_window_source.find("PARAMETER num_ctx 65536") != std::string::npos);
    // The trained length is said, not taken for the window.
    CHECK(info.context_window_source.find("40,960") != std::string::npos);
    CHECK(server.requests_served() == 3);
  }
  SUBCASE("a model name without a tag matches `:latest`") {
    models(R"({"data": [{"id": "llama3.2:latest", "owned_by": "library"}]})");
    show(R"({"parameters": "num_ctx 16384", "model_info": {}})");
    auto info = describe(*make("llama3.2"));
    CHECK(info.context_window == 16384);
  }
}

TEST_CASE_FIXTURE(models_env, "context window: llama.cpp's /props") {
  models(R"({"object": "list", "data": [{"id": "gguf", "object": "model",
             "owned_by": "llamacpp", "meta": {"n_ctx_train": 131072}}]})");
  server.route("GET", "/props", [](const request&) {
    return response_plan::json(200, R"({"default_generation_settings": {"n_ctx": 65536,
      "params": {"n_predict": -1}}, "total_slots": 1})");
  });
  auto info = describe(*make("gguf"));
  CHECK(info.context_window == 65536);
  CHECK(info.context_window_source == "llama.cpp /props n_ctx");
}

TEST_CASE_FIXTURE(models_env, "context window: a server that says nothing is unknown, "
                              "after one request") {
  SUBCASE("listed without a window") {
    models(R"({"object": "list", "data": [{"id": "gpt-4o", "object": "model",
               "owned_by": "system"}]})");
  }
  SUBCASE("not listed") {
    models(R"({"object": "list", "data": []})");
  }
  SUBCASE("no /models at all") {
    // The server's 404.
  }
  auto llm = make("gpt-4o");
  auto info = describe(*llm);
  CHECK(info.context_window == 0);
  CHECK(info.context_window_source.empty());
  CHECK(info.model == "gpt-4o");
  // Nothing hints at a server with its own API: no more requests.
  CHECK(server.requests_served() == 1);
}

TEST_CASE_FIXTURE(models_env, "context window: the configured one wins, without a request") {
  models(R"({"data": [{"id": "m", "max_model_len": 32768}]})");
  auto llm = make("m", {{"context_window", 200000}});
  auto info = describe(*llm);
  CHECK(info.context_window == 200000);
  CHECK(info.context_window_source == "config");
  CHECK(server.requests_served() == 0);
  CHECK(llm->probe().requests_started() == 0);
}

TEST_CASE_FIXTURE(models_env, "context window: a hostile server leaves it unknown") {
  auto unknown_after = [&](response_plan plan) {
    http_server hostile;
    hostile.route("GET", "/v1/models", [plan](const request&) { return plan; });
    // Any follow-up request gets the same treatment.
    hostile.fallback([plan](const request&) { return plan; });
    json cfg{{"model", "qwen3:8b"}, {"base_url", hostile.url("/v1")}};
    openai::provider llm{host, openai::parse_config(cfg)};
    described d;
    llm.describe(d.callback());
    auto info = d.wait();
    CHECK(info.context_window == 0);
    CHECK(info.model == "qwen3:8b");
  };
  SUBCASE("larger than the bound") {
    response_plan huge{200};
    huge.header("Content-Type", "application/json");
    huge.send(R"({"data": [{"id": "qwen3:8b", "max_model_len": 32768, "pad": ")");
    huge.generate(static_cast<uint64_t>(openai::max_probe_body) + 1024);
    huge.send("\"}]}");
    unknown_after(huge);
  }
  SUBCASE("nested far too deep") {
    unknown_after(response_plan::json(200, std::string(200000, '[') + std::string(200000, ']')));
    unknown_after(
      response_plan::json(200, R"({"data": [{"id": "qwen3:8b", "max_model_len": 32768, "x": )"
                                 + std::string(100, '[') + std::string(100, ']') + "}]}"));
  }
  SUBCASE("windows of the wrong type or out of range") {
    for (const char* value : {R"("32768")", "-5", "0", "1e300", "32768.5", "true", "null",
                              R"({"a": 1})", "[32768]", "100000000000"})
      unknown_after(response_plan::json(
        200, std::string{R"({"data": [{"id": "qwen3:8b", "max_model_len": )"} + value
               + R"(, "context_length": )" + value + R"(, "context_window": )" + value + "}]}"));
  }
  SUBCASE("the wrong shapes everywhere, Ollama's endpoints too") {
    for (const char* body :
         {"[]", R"({"data": {"id": "qwen3:8b"}})", R"({"data": [1, "x", null]})", "not json at all",
          R"({"data": [{"id": 5, "owned_by": ["library"]}]})"})
      unknown_after(response_plan::json(200, body));
    // Ollama by owner, then /api/show and /api/ps with the wrong types.
    http_server ollama;
    ollama.route("GET", "/v1/models", [](const request&) {
      return response_plan::json(200, R"({"data": [{"id": "qwen3:8b", "owned_by": "library"}]})");
    });
    ollama.route("POST", "/api/show", [](const request&) {
      return response_plan::json(200, R"({"parameters": ["num_ctx", 65536],
        "model_info": {"general.architecture": 7, "qwen3.context_length": "40960"}})");
    });
    ollama.route("GET", "/api/ps", [](const request&) {
      return response_plan::json(200, R"({"models": [{"model": "qwen3:8b",
        "context_length": "4096"}]})");
    });
    json cfg{{"model", "qwen3:8b"}, {"base_url", ollama.url("/v1")}};
    openai::provider llm{host, openai::parse_config(cfg)};
    described d;
    llm.describe(d.callback());
    auto info = d.wait();
    CHECK(info.context_window == 0);
    CHECK(ollama.requests_served() == 3);
  }
  SUBCASE("a server that never answers: the probe's own time limit") {
    auto start = std::chrono::steady_clock::now();
    response_plan stall{200};
    stall.stall();
    unknown_after(stall);
    CHECK(std::chrono::steady_clock::now() - start < openai::probe_budget + 5s);
  }
}

TEST_CASE_FIXTURE(models_env, "context window: probed once per provider, concurrent "
                              "callers share the probe") {
  server.route("GET", "/v1/models", [this](const request&) {
    ++models_hits;
    // Slow enough that the second caller arrives while the probe runs.
    response_plan plan{200};
    plan.header("Content-Type", "application/json");
    plan.delay(200ms);
    plan.send(R"({"data": [{"id": "m", "max_model_len": 65536}]})");
    return plan;
  });
  auto llm = make("m");
  described d;
  llm->describe(d.callback());
  llm->describe(d.callback());
  d.wait(2);
  // After the probe: answered at once, from the cache.
  described later;
  llm->describe(later.callback());
  CHECK(later.wait().context_window == 65536);
  std::this_thread::sleep_for(50ms);
  CHECK(d.answers.size() == 2);
  for (const auto& x : d.answers)
    CHECK(x.context_window == 65536);
  CHECK(models_hits == 1);
  CHECK(llm->probe().requests_started() == 1);
  // Another provider object asks again.
  auto other = make("m");
  CHECK(describe(*other).context_window == 65536);
  CHECK(models_hits == 2);
}

TEST_CASE("context window: the parts of a probe") {
  CHECK(openai::num_ctx_of("num_ctx 8192") == 8192);
  CHECK(openai::num_ctx_of("stop \"x\"\n  num_ctx\t\t32768  \r\ntemperature 1") == 32768);
  CHECK_FALSE(openai::num_ctx_of("num_ctx_extra 5\nnum_predict 10"));
  CHECK_FALSE(openai::num_ctx_of("num_ctx -1"));
  CHECK_FALSE(openai::num_ctx_of("num_ctx 99999999999999999999"));
  CHECK_FALSE(openai::num_ctx_of(""));
  CHECK(openai::server_root("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434");
  CHECK(openai::server_root("http://h/v1/") == "http://h");
  CHECK(openai::server_root("https://openrouter.ai/api/v1") == "https://openrouter.ai/api");
  CHECK(openai::kind_by_url("http://127.0.0.1:11434/v1") == openai::server_kind::ollama);
  CHECK(openai::kind_by_url("http://user:pw@[::1]:1234/v1") == openai::server_kind::lm_studio);
  CHECK(openai::kind_by_url("https://api.openai.com/v1") == openai::server_kind::unknown);
  CHECK(openai::kind_by_url("http://host:99999999/v1") == openai::server_kind::unknown);
  auto show = openai::read_ollama_show(R"({"parameters": "num_ctx 4096",
    "model_info": {"llama.context_length": 131072}})");
  REQUIRE(show);
  CHECK(show->num_ctx == 4096);
  CHECK(show->trained == 131072);
  CHECK_FALSE(openai::read_ollama_show(R"({"error": "model 'x' not found"})"));
}

} // namespace openai_models_test
