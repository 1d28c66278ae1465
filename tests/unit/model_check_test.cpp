// The check of the models' context windows before a research
// (app/model_check.hpp): the window adopted, the refusal below deep
// research's minimum with its remedy, the reduced mode, the user's own
// research.context_tokens, and unknown windows.

#include "model_check.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace model_check_test {

using namespace quarry;

namespace {

app::model_window model(std::string provider, int64_t window, std::string source,
                        std::string plugin = "openai") {
  app::model_window m;
  m.roles = {"orchestrator", "research agents", "final report"};
  m.provider = std::move(provider);
  m.plugin = std::move(plugin);
  m.info.model = "m-1";
  m.info.context_window = window;
  m.info.context_window_source = std::move(source);
  return m;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string notes(const app::context_verdict& v) {
  std::string out;
  for (const auto& n : v.notes)
    out += n + "\n";
  return out;
}

} // namespace

TEST_CASE("context window check: a known window becomes the prompt budget") {
  core::research_settings research;
  auto v = app::check_context_windows(research,
                                      {model("main", 131072, "vllm /models max_model_len")});
  CHECK(v.refusal.empty());
  CHECK(v.context_tokens == 131072);
  CHECK(has(notes(v), "llm.providers.main (m-1) is 131,072 tokens (vllm /models "
                      "max_model_len) for the orchestrator, research agents and final "
                      "report; research uses it"));
}

TEST_CASE("context window check: below 50,000 tokens is refused with the window, its "
          "source and the remedy") {
  core::research_settings research;
  SUBCASE("a server's window") {
    auto v = app::check_context_windows(research,
                                        {model("main", 32768, "vllm /models max_model_len")});
    CHECK(has(v.refusal, "32,768 tokens (vllm /models max_model_len)"));
    CHECK(has(v.refusal, "below the 50,000 tokens deep research needs"));
    CHECK(has(v.refusal, "--max-model-len"));
    CHECK(has(v.refusal, "llm.providers.main.context_window"));
    CHECK(has(v.refusal, "research.allow_small_context: true"));
  }
  SUBCASE("Ollama's") {
    auto v = app::check_context_windows(research,
                                        {model("local", 4096, "ollama /api/ps context_length")});
    CHECK(has(v.refusal, "4,096 tokens"));
    CHECK(has(v.refusal, "OLLAMA_CONTEXT_LENGTH=65536"));
    CHECK(has(v.refusal, "PARAMETER num_ctx 65536"));
  }
  SUBCASE("the configured one") {
    auto v = app::check_context_windows(research, {model("main", 16000, "config")});
    CHECK(has(v.refusal, "(config)"));
    CHECK(has(v.refusal, "raise llm.providers.main.context_window"));
  }
  SUBCASE("the smallest of several models decides") {
    auto big = model("big", 200000, "config");
    big.roles = {"orchestrator", "final report"};
    auto small = model("small", 32768, "server /models context_length");
    small.roles = {"research agents"};
    auto v = app::check_context_windows(research, {big, small});
    CHECK(has(v.refusal, "llm.providers.small (m-1) is 32,768 tokens"));
    CHECK(has(v.refusal, "for the research agents"));
  }
}

TEST_CASE("context window check: research.allow_small_context runs with the small "
          "window and says so") {
  core::research_settings research;
  research.allow_small_context = true;
  auto v = app::check_context_windows(research,
                                      {model("main", 32768, "vllm /models max_model_len")});
  CHECK(v.refusal.empty());
  CHECK(v.context_tokens == 32768);
  CHECK(has(notes(v), "research.allow_small_context is set"));
  CHECK(has(notes(v), "reports may be cut"));
}

TEST_CASE("context window check: research.context_tokens set by the user wins") {
  core::research_settings research;
  research.context_tokens = 64000;
  auto v = app::check_context_windows(research,
                                      {model("main", 32768, "vllm /models max_model_len")});
  CHECK(v.refusal.empty());
  CHECK(v.context_tokens == 64000);
  CHECK(has(notes(v), "larger than the context window of llm.providers.main"));
  // Its own value below the minimum is refused like a server's.
  research.context_tokens = 32000;
  auto low = app::check_context_windows(research, {model("main", 0, "")});
  CHECK(has(low.refusal, "research.context_tokens is 32,000 tokens"));
  research.allow_small_context = true;
  low = app::check_context_windows(research, {model("main", 0, "")});
  CHECK(low.refusal.empty());
  CHECK(low.context_tokens == 32000);
}

TEST_CASE("context window check: an unknown window does not block and says what Quarry "
          "assumes") {
  core::research_settings research;
  SUBCASE("the server says nothing") {
    auto v = app::check_context_windows(research, {model("main", 0, "")});
    CHECK(v.refusal.empty());
    CHECK(v.context_tokens == 128000);
    REQUIRE(v.notes.size() == 1);
    CHECK(has(v.notes[0], "llm.providers.main (m-1) is unknown (the server does not say); "
                          "Quarry assumes research.context_tokens = 128,000"));
  }
  SUBCASE("Ollama's default, with the reason") {
    auto v = app::check_context_windows(
      research, {model("local", 0, "ollama: the model sets no num_ctx ...")});
    CHECK(v.refusal.empty());
    CHECK(has(notes(v), "unknown (ollama: the model sets no num_ctx ...)"));
  }
  SUBCASE("the known one of two decides") {
    auto v = app::check_context_windows(research, {model("a", 0, ""), model("b", 65536, "config")});
    CHECK(v.refusal.empty());
    CHECK(v.context_tokens == 65536);
    CHECK(v.notes.size() == 2);
  }
}

TEST_CASE("context window check: the extractive provider is exempt") {
  core::research_settings research;
  auto v = app::check_context_windows(research, {model("offline", 1000, "", "extractive")});
  CHECK(v.refusal.empty());
  CHECK(v.notes.empty());
  CHECK(v.context_tokens == 128000);
  research.context_tokens = 2000; // nothing to check it against
  CHECK(
    app::check_context_windows(research, {model("offline", 0, "", "extractive")}).refusal.empty());
}

TEST_CASE("context window check: the provider of a role") {
  core::llm_settings llm;
  llm.providers["a"] = {};
  llm.providers["b"] = {};
  llm.roles["research_agent"] = "b";
  llm.roles["final_report"] = "missing";
  CHECK(app::provider_for_role(llm, {"research_agent", "research"}, "a") == "b");
  CHECK(app::provider_for_role(llm, {"final_report", "report"}, "a") == "a");
  CHECK(app::provider_for_role(llm, {"orchestrator"}, "a") == "a");
  CHECK(app::token_count(131072) == "131,072");
  CHECK(app::token_count(999) == "999");
  CHECK(app::token_count(1000000) == "1,000,000");
}

} // namespace model_check_test
