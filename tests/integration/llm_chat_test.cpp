// `quarry llm chat` end to end: the real binary, the real provider plugins
// loaded from disk, the provider actor, and the fake LLM server speaking the
// real wire formats. Retry rules are checked here.

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace llm_chat_test {

using namespace quarry;

namespace {

struct chat_fixture {
  test::temp_dir home;
  test::fake_llm_server server;

  /// Runs `quarry llm chat --json` against provider `main` = `plugin` at the
  /// fake server, with extra --set overrides.
  test::process_result chat(const std::string& plugin, std::vector<std::string> extra,
                            const std::string& message = "Hello there") {
    auto base = plugin == "anthropic" ? server.base_url_anthropic() : server.base_url_openai();
    std::vector<std::string> args{QUARRY_EXE,
                                  "--set",
                                  "llm.providers.main.plugin=" + plugin,
                                  "--set",
                                  "llm.providers.main.base_url=" + base,
                                  "--set",
                                  "llm.providers.main.model=test-model",
                                  "--set",
                                  "llm.providers.main.api_key=sk-test-secret-key",
                                  "--set",
                                  "llm.providers.main.retry_base=50ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"llm", "chat", "--json", message});
    test::process_options opts;
    opts.env = {
      {"HOME", home.path()}, {"XDG_CONFIG_HOME", std::nullopt}, {"QUARRY_CONFIG", std::nullopt}};
    opts.timeout = std::chrono::seconds{60};
    return test::run_process(args, opts);
  }

  static nlohmann::json parse(const test::process_result& res) {
    INFO(res.out);
    INFO(res.err);
    auto j = nlohmann::json::parse(res.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    return j;
  }
};

std::string fixture(const std::string& rel) {
  return std::string{QUARRY_FIXTURES_DIR} + "/" + rel;
}

} // namespace

TEST_CASE_FIXTURE(chat_fixture, "llm chat replays an OpenAI stream with parallel tool calls") {
  REQUIRE_FALSE(
    server.replay_file(fixture("llm/openai_chat/openai-python__tool_calls_parallel_two.sse")));
  auto res = chat("openai", {});
  CHECK(res.exit_code == 0);
  auto j = parse(res);
  auto expected = nlohmann::json::parse(
    test::read_file(fixture("llm/openai_chat/EXPECTED_ASSEMBLED.derived.json")))
    ["openai-python__tool_calls_parallel_two.sse"];
  const auto& want_calls = expected["choices"][0]["tool_calls"];
  REQUIRE(j["tool_calls"].size() == want_calls.size());
  for (size_t i = 0; i < want_calls.size(); ++i) {
    CHECK(j["tool_calls"][i]["name"] == want_calls[i]["name"]);
    CHECK(j["tool_calls"][i]["id"] == want_calls[i]["id"]);
    CHECK(j["tool_calls"][i]["arguments"]
          == nlohmann::json::parse(want_calls[i]["arguments"].get<std::string>()));
  }
  CHECK(j["finish_reason"] == "tool_calls");
  CHECK(j["usage"]["input_tokens"] == expected["usage"]["prompt_tokens"]);
  CHECK(j["usage"]["output_tokens"] == expected["usage"]["completion_tokens"]);
  CHECK(j["provider"] == "main");
  CHECK(j["attempts"] == 1);
  // The key went out as a bearer token and never came back out.
  auto req = server.request_at(0);
  REQUIRE(req.has_value());
  CHECK(req->header("authorization") == "Bearer sk-test-secret-key");
  CHECK(res.out.find("sk-test-secret-key") == std::string::npos);
  CHECK(res.err.find("sk-test-secret-key") == std::string::npos);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat speaks the Anthropic protocol") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"match": {"protocol": "anthropic"},
     "respond": {"text": "Bonjour from the fake server",
                 "usage": {"input_tokens": 12, "output_tokens": 5}}}
  ])")));
  auto res = chat("anthropic", {});
  CHECK(res.exit_code == 0);
  auto j = parse(res);
  CHECK(j["text"] == "Bonjour from the fake server");
  CHECK(j["finish_reason"] == "stop");
  CHECK(j["usage"]["input_tokens"] == 12);
  CHECK(j["usage"]["output_tokens"] == 5);
  auto req = server.request_at(0);
  REQUIRE(req.has_value());
  CHECK(req->header("x-api-key") == "sk-test-secret-key");
  CHECK(req->body["messages"][0]["role"] == "user");
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat retries a 429 after the Retry-After it was given") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"times": 1, "error": {"status": 429, "headers": {"Retry-After": "1"},
      "body": {"error": {"message": "Rate limit reached. Please try again later.",
                         "type": "requests", "code": "rate_limit_exceeded"}}}},
    {"respond": {"text": "second time lucky"}}
  ])")));
  auto start = std::chrono::steady_clock::now();
  auto res = chat("openai", {});
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(res.exit_code == 0);
  auto j = parse(res);
  CHECK(j["text"] == "second time lucky");
  CHECK(j["attempts"] == 2);
  CHECK(server.request_count() == 2);
  // Behaviour, not speed: the retry did not come before the server allowed.
  CHECK(elapsed >= std::chrono::seconds{1});
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat never retries insufficient_quota") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 429, "headers": {"Retry-After": "1"},
      "body": {"error": {"message": "You exceeded your current quota.",
                         "type": "insufficient_quota", "code": "insufficient_quota"}}}}
  ])")));
  auto res = chat("openai", {});
  CHECK(res.exit_code == 1);
  auto j = parse(res);
  CHECK(j["error"]["class"] == "quota");
  CHECK(j["error"]["status"] == 429);
  CHECK(server.request_count() == 1);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat masks the key in a provider's message, "
                                "and only the whole key") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 401,
      "body": {"error": {"message": "Incorrect API key provided: sk-test-secret-key. invalid_api_key",
                         "type": "invalid_request_error", "code": "invalid_api_key"}}}}
  ])")));
  auto res = chat("openai", {});
  CHECK(res.exit_code == 1);
  auto j = parse(res);
  auto message = j["error"]["message"].get<std::string>();
  CHECK(message.find("sk-test-secret-key") == std::string::npos);
  CHECK(message.find("provided: ***.") != std::string::npos);
  // A one-letter key is no secret worth garbling the message for.
  auto short_key = chat("openai", {"--set", "llm.providers.main.api_key=k"});
  auto k = parse(short_key);
  CHECK(k["error"]["message"].get<std::string>().find("invalid_api_key") != std::string::npos);
  CHECK(short_key.err.find("***") == std::string::npos);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat retries a stall before the first chunk") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"times": 1, "stall_after_bytes": 0, "respond": {"text": "never sent"}},
    {"respond": {"text": "after the stall"}}
  ])")));
  auto res = chat("openai", {"--set", "llm.providers.main.stall_timeout=1s"});
  CHECK(res.exit_code == 0);
  auto j = parse(res);
  CHECK(j["text"] == "after the stall");
  CHECK(j["attempts"] == 2);
  CHECK(server.request_count() == 2);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat does not retry a stall after the first chunk") {
  // Enough bytes for the first content chunk to reach the caller, then
  // silence: the partial answer must not be silently replaced by a retry.
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"chunk_delay_ms": 10, "stall_after_bytes": 600,
     "respond": {"text": "one two three four five six seven eight nine ten eleven twelve", "chunk_words": 1}},
    {"respond": {"text": "a retry that must not happen"}}
  ])")));
  auto res = chat("openai", {"--set", "llm.providers.main.stall_timeout=1s"});
  CHECK(res.exit_code == 1);
  auto j = parse(res);
  CHECK(j["error"]["class"] == "stall");
  CHECK(server.request_count() == 1);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat reports a missing provider and bad options clearly") {
  // Without a provider and without keys in the environment, llm chat uses the
  // same embedded default as research: the offline extractive provider.
  auto none = test::run_process({QUARRY_EXE, "llm", "chat", "hi"},
                                {{{"HOME", home.path()},
                                  {"XDG_CONFIG_HOME", std::nullopt},
                                  {"QUARRY_CONFIG", std::nullopt},
                                  {"OPENAI_API_KEY", std::nullopt},
                                  {"OPENAI_BASE_URL", std::nullopt},
                                  {"ANTHROPIC_API_KEY", std::nullopt}},
                                 "",
                                 "",
                                 std::chrono::seconds{30}});
  CHECK(none.exit_code == 0);
  CHECK(none.err.find("using the offline extractive provider") != std::string::npos);
  auto bad = chat("openai", {"--set", "llm.providers.main.max_retries=-1"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--set: llm.providers.main.max_retries: must be an integer "
                     "from 0 to 100, got -1")
        != std::string::npos);
  auto unknown = chat("openai", {"--set", "llm.providers.main.modle=x"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("llm.providers.main.modle: unknown key; did you mean "
                         "`llm.providers.main.model`?")
        != std::string::npos);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat answers offline with the extractive provider") {
  std::vector<std::string> args{
    QUARRY_EXE, "--set",  "llm.providers.offline.plugin=extractive",     "llm",
    "chat",     "--json", "What is the capital of France? And of Spain?"};
  test::process_options opts;
  opts.env = {
    {"HOME", home.path()}, {"XDG_CONFIG_HOME", std::nullopt}, {"QUARRY_CONFIG", std::nullopt}};
  auto a = test::run_process(args, opts);
  auto b = test::run_process(args, opts);
  CHECK(a.exit_code == 0);
  auto j = parse(a);
  CHECK(j["provider"] == "offline");
  CHECK_FALSE(j["text"].get<std::string>().empty());
  // Deterministic: the same question gives the same answer.
  CHECK(a.out == b.out);
  CHECK(server.request_count() == 0);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat streams the answer to stdout without --json") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"respond": {"text": "streamed word by word", "chunk_words": 1,
                 "usage": {"input_tokens": 3, "output_tokens": 4}}}
  ])")));
  auto base = server.base_url_openai();
  test::process_options opts;
  opts.env = {
    {"HOME", home.path()}, {"XDG_CONFIG_HOME", std::nullopt}, {"QUARRY_CONFIG", std::nullopt}};
  auto res = test::run_process({QUARRY_EXE, "--set", "llm.providers.main.plugin=openai", "--set",
                                "llm.providers.main.base_url=" + base, "--set",
                                "llm.providers.main.model=m", "llm", "chat", "hi"},
                               opts);
  CHECK(res.exit_code == 0);
  // The text arrives through the delta messages, then a final newline.
  CHECK(res.out == "streamed word by word\n");
  CHECK(res.err.find("3 in, 4 out tokens") != std::string::npos);
}

TEST_CASE_FIXTURE(chat_fixture, "llm chat --json with the field cases: thinking in <think> "
                                "tags, an empty answer and a gateway's wrapped error") {
  auto field = [](const std::string& rel) {
    return std::string{QUARRY_FIXTURES_DIR} + "/../field-cases/" + rel;
  };
  REQUIRE_FALSE(server.replay_file(field("think-split/stream.sse")));
  auto thought = chat("openai", {});
  CHECK(thought.exit_code == 0);
  auto j = parse(thought);
  CHECK(j["text"]
        == "A typical air-source heat pump reaches a seasonal COP of about 3.2 in a "
           "mild climate.");
  CHECK(j["reasoning"].get<std::string>().find("SCOP is the yearly average") != std::string::npos);
  CHECK(thought.out.find("<think>") == std::string::npos);

  server.clear_script();
  REQUIRE_FALSE(server.replay_file(field("empty-choices-stream/stream.sse")));
  auto empty = chat("openai", {"--set", "llm.providers.main.max_retries=2"});
  CHECK(empty.exit_code == 1);
  CHECK(parse(empty)["error"]["class"] == "empty_response");
  CHECK(server.request_count() == 1 + 3); // tried again twice

  server.clear_script();
  REQUIRE_FALSE(server.replay_file(field("gateway-context-overflow/body.json")));
  auto wrapped = chat("openai", {});
  CHECK(wrapped.exit_code == 1);
  auto w = parse(wrapped);
  CHECK(w["error"]["class"] == "context_too_long");
  CHECK(server.request_count() == 1 + 3 + 1); // not retried
}

} // namespace llm_chat_test
