// The models' context windows through the real `quarry` binary and the real
// `openai` plugin, against the fake LLM server with the model-list endpoints
// of vLLM and Ollama routed: a window below deep research's minimum refuses
// the research (exit 2, or an error answer of `quarry serve`) with the
// window, its source and the remedy; research.allow_small_context runs it;
// a large window becomes the sessions' prompt budget.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <string>
#include <vector>

namespace context_window_test {

using namespace quarry;
using namespace quarry::test::script;

namespace {

struct window_fixture {
  test::temp_dir home;
  std::atomic<int> listed{0};
  test::fake_llm_server server;

  /// The server lists `model` with vLLM's `max_model_len`.
  void vllm_window(const std::string& model, int64_t window) {
    auto body = nlohmann::json{{"object", "list"},
                               {"data",
                                {{{"id", model},
                                  {"object", "model"},
                                  {"owned_by", "vllm"},
                                  {"max_model_len", window}}}}}
                  .dump();
    server.server().route("GET", "/v1/models", [this, body](const test::request&) {
      ++listed;
      return test::response_plan::json(200, body);
    });
  }

  test::process_result quarry(std::vector<std::string> args, const std::string& model) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_process(argv, test::isolated_quarry_options(
                                     home.path(), {{"OPENAI_API_KEY", "test-key"},
                                                   {"OPENAI_BASE_URL", server.base_url_openai()},
                                                   {"OPENAI_MODEL", model}}));
  }

  test::process_result research(const std::string& model, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"research", "How does defrosting work?", "--no-clarify",
                                  "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return quarry(args, model);
  }
};

/// One research agent that searches the example corpus, then reports.
nlohmann::json one_agent_rules() {
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Defrost"}}));
  rules.push_back(
    {{"match", {{"system_contains", orchestrator_marker}, {"message_contains", "\"tool\""}}},
     {"respond", calls({{"generate_report", nlohmann::json::object()}})}});
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Explain defrost cycles."}}}})));
  rules.push_back(
    {{"match", {{"system_contains", agent_marker}, {"message_contains", "\"document\""}}},
     {"respond", calls({{"generate_report", nlohmann::json::object()}})}});
  rules.push_back(rule(agent_marker, calls({{"internal_search", {{"queries", {"defrost"}}}}})));
  rules.push_back(
    rule(agent_report_marker, {{"text", "Defrost cycles reverse the refrigerant flow [1]."}}));
  rules.push_back(rule(final_marker, {{"text", "Defrosting reverses the cycle [1]."}}));
  return rules;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE_FIXTURE(window_fixture, "context window: a 32,768-token server refuses the "
                                  "research with exit 2, the window, its source and the "
                                  "remedy") {
  vllm_window("qwen2.5-32b", 32768);
  REQUIRE_FALSE(server.script(one_agent_rules()));
  auto res = research("qwen2.5-32b");
  CAPTURE(res.err);
  CHECK(res.exit_code == 2);
  CHECK(has(res.err, "quarry: cannot research: the context window of "
                     "llm.providers.default (qwen2.5-32b) is 32,768 tokens (vllm /models "
                     "max_model_len)"));
  CHECK(has(res.err, "below the 50,000 tokens deep research needs"));
  CHECK(has(res.err, "--max-model-len"));
  CHECK(has(res.err, "research.allow_small_context: true"));
  // Refused before anything ran or was stored.
  CHECK(server.request_count() == 0);
  CHECK(listed == 1);
  auto listed_sessions = quarry({"sessions", "list", "--json"}, "qwen2.5-32b");
  REQUIRE(listed_sessions.exit_code == 0);
  CHECK(nlohmann::json::parse(listed_sessions.out).empty());
}

TEST_CASE_FIXTURE(window_fixture, "context window: research.allow_small_context runs the "
                                  "research with the small window, and says so") {
  vllm_window("qwen2.5-32b", 32768);
  REQUIRE_FALSE(server.script(one_agent_rules()));
  auto res = research("qwen2.5-32b", {"--set", "research.allow_small_context=true"});
  CAPTURE(res.err);
  CHECK(res.exit_code == 0);
  CHECK(has(res.err, "32,768 tokens (vllm /models max_model_len)"));
  CHECK(has(res.err, "research.allow_small_context is set"));
  CHECK(has(res.err, "reports may be cut"));
  CHECK(has(res.out, "Defrosting reverses the cycle"));
  CHECK(requests_with(server, final_marker) >= 1);
}

TEST_CASE_FIXTURE(window_fixture, "context window: a 131,072-token server runs the "
                                  "research with that window as its budget") {
  vllm_window("qwen2.5-72b", 131072);
  REQUIRE_FALSE(server.script(one_agent_rules()));
  auto res = research("qwen2.5-72b");
  CAPTURE(res.err);
  CHECK(res.exit_code == 0);
  CHECK(has(res.err, "quarry: the context window of llm.providers.default (qwen2.5-72b) "
                     "is 131,072 tokens (vllm /models max_model_len) for the orchestrator, "
                     "research agents and final report; research uses it as its prompt "
                     "budget"));
  CHECK(has(res.out, "Defrosting reverses the cycle"));
  // Asked once per process.
  CHECK(listed == 1);
  SUBCASE("research.context_tokens set by the user wins over the server") {
    listed = 0;
    REQUIRE_FALSE(server.script(one_agent_rules()));
    auto own = research("qwen2.5-72b", {"--set", "research.context_tokens=64000"});
    CAPTURE(own.err);
    CHECK(own.exit_code == 0);
    CHECK_FALSE(has(own.err, "research uses it as its prompt budget"));
  }
}

TEST_CASE_FIXTURE(window_fixture, "context window: Ollama's num_ctx below the minimum "
                                  "names Ollama's remedy; without num_ctx it is unknown "
                                  "and the research runs") {
  server.server().route("GET", "/v1/models", [](const test::request&) {
    return test::response_plan::json(
      200, R"({"object": "list", "data": [{"id": "qwen3:8b", "owned_by": "library"}]})");
  });
  SUBCASE("num_ctx 8192") {
    server.server().route("POST", "/api/show", [](const test::request&) {
      return test::response_plan::json(
        200, R"({"parameters": "num_ctx 8192", "model_info": {"qwen3.context_length": 40960}})");
    });
    auto res = research("qwen3:8b");
    CAPTURE(res.err);
    CHECK(res.exit_code == 2);
    CHECK(has(res.err, "8,192 tokens (ollama /api/show num_ctx)"));
    CHECK(has(res.err, "OLLAMA_CONTEXT_LENGTH=65536"));
    CHECK(has(res.err, "PARAMETER num_ctx 65536"));
  }
  SUBCASE("no num_ctx, not loaded") {
    server.server().route("POST", "/api/show", [](const test::request&) {
      return test::response_plan::json(
        200,
        R"({"parameters": "temperature 0.6", "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}})");
    });
    server.server().route("GET", "/api/ps", [](const test::request&) {
      return test::response_plan::json(200, R"({"models": []})");
    });
    REQUIRE_FALSE(server.script(one_agent_rules()));
    auto res = research("qwen3:8b");
    CAPTURE(res.err);
    CHECK(res.exit_code == 0);
    CHECK(has(res.err, "the context window of llm.providers.default (qwen3:8b) is unknown "
                       "(ollama: the model sets no num_ctx"));
    CHECK(has(res.err, "Quarry assumes research.context_tokens = 128,000"));
  }
}

TEST_CASE_FIXTURE(window_fixture, "context window: quarry serve answers a research start "
                                  "with an error naming the window") {
  vllm_window("qwen2.5-32b", 32768);
  test::serve::server_process srv{home,
                                  {},
                                  {{"OPENAI_API_KEY", "k"},
                                   {"OPENAI_BASE_URL", server.base_url_openai()},
                                   {"OPENAI_MODEL", "qwen2.5-32b"}}};
  auto r = test::serve::call(
    "POST", srv.url("/v1/research"),
    nlohmann::json{{"question", "How loud is a heat pump?"}, {"clarify", false}}.dump());
  CAPTURE(r.body);
  CHECK(r.status == 503);
  auto message = r.as_json()["error"]["message"].get<std::string>();
  CHECK(has(message, "32,768 tokens (vllm /models max_model_len)"));
  CHECK(has(message, "research.allow_small_context"));
  CHECK(server.request_count() == 0);
  CHECK(has(srv.proc->err(), "every research will be refused"));
}

TEST_CASE_FIXTURE(window_fixture, "context window: llm chat --json shows the window and "
                                  "its source") {
  vllm_window("qwen2.5-72b", 131072);
  REQUIRE_FALSE(server.add_rule(nlohmann::json::parse(R"({"respond": {"text": "Hi"}})")));
  auto res = quarry({"llm", "chat", "--json", "Hello"}, "qwen2.5-72b");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["text"] == "Hi");
  CHECK(j["context_window"]["tokens"] == 131072);
  CHECK(j["context_window"]["source"] == "vllm /models max_model_len");
  CHECK(server.request_count() == 1); // the chat call; the model list is not counted
}

} // namespace context_window_test
