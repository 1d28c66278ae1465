// The configuration seen by every command, end to end with the real `quarry`
// binary: the embedded defaults from the environment (config show, config
// check, llm chat, tool run), OPENAI_BASE_URL without a key, the checks of
// plugin instances (all errors at once, at their lines) and the reachability
// probe of `config check` against real servers on 127.0.0.1.

#include "support/fake_llm_server.hpp"
#include "support/http_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <mutex>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace config_cli_test {

using namespace quarry;

namespace {

/// Runs quarry with no user configuration and none of the provider variables
/// of the caller's environment, plus `env`.
struct config_cli_fixture {
  test::temp_dir home;
  test::temp_dir dir;

  test::process_result quarry(std::vector<std::string> args,
                              std::map<std::string, std::optional<std::string>> env = {}) {
    args.insert(args.begin(), QUARRY_EXE);
    auto opts = test::isolated_quarry_options(home.path(), {env.begin(), env.end()});
    opts.timeout = std::chrono::seconds{60};
    return test::run_process(args, opts);
  }
};

/// A port on 127.0.0.1 where nothing listens: bound, then closed.
uint16_t free_port() {
  auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// An HTTP server that records the requests it gets.
struct recording_server {
  test::http_server server;
  std::mutex mtx;
  std::vector<test::request> seen;

  void answer(const std::string& method, const std::string& path, test::response_plan plan) {
    server.route(method, path, [this, plan](const test::request& req) {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back(req);
      return plan;
    });
  }

  std::vector<test::request> requests() {
    std::lock_guard<std::mutex> guard{mtx};
    return seen;
  }
};

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

const std::string models_json
  = R"({"object": "list", "data": [{"id": "llama3.2", "object": "model"}]})";

} // namespace

// -- the embedded defaults for every command -----------------------------------

TEST_CASE_FIXTURE(
  config_cli_fixture,
  "config show shows the providers and tools from the environment, masked, with their origin") {
  auto res = quarry({"config", "show"}, {{"OPENAI_API_KEY", "sk-env-show-secret-42"},
                                         {"OPENAI_MODEL", "gpt-show"},
                                         {"TAVILY_API_KEY", "tvly-show-secret-43"}});
  INFO(res.err);
  CHECK(res.exit_code == 0);
  CHECK_FALSE(contains(res.out, "sk-env-show-secret-42"));
  CHECK_FALSE(contains(res.out, "tvly-show-secret-43"));
  CHECK(contains(res.out, "# llm.providers.default: added by the embedded defaults: "
                          "OpenAI (gpt-show) from OPENAI_API_KEY"));
  CHECK(contains(res.out, "# tools.web_search: added by the embedded defaults: web "
                          "search with Tavily (TAVILY_API_KEY)"));
  CHECK(contains(res.out, "plugin: openai"));
  CHECK(contains(res.out, "plugin: tavily"));
  CHECK(contains(res.out, "plugin: open_url"));
  CHECK(contains(res.out, "model: gpt-show"));
  CHECK(contains(res.out, "***"));
  // Without variables: the offline provider, said so.
  auto offline = quarry({"config", "show"});
  CHECK(contains(offline.out, "plugin: extractive"));
  CHECK(contains(offline.out, "the offline extractive provider"));
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check and tool run see the tools from the environment") {
  auto check = quarry({"config", "check", "--offline"}, {{"BRAVE_API_KEY", "brave-key-12345"}});
  INFO(check.out);
  INFO(check.err);
  CHECK(check.exit_code == 0);
  CHECK(contains(check.out, "tools.web_search: added by the embedded defaults: web "
                            "search with Brave (BRAVE_API_KEY)"));
  CHECK(contains(check.out, "configuration OK"));
  // The tool exists for `tool run` too: its arguments are checked against
  // the tool's schema (and refused before anything is sent).
  auto run = quarry({"tool", "run", "web_search", "{}", "--json"},
                    {{"BRAVE_API_KEY", "brave-key-12345"}});
  INFO(run.out);
  INFO(run.err);
  CHECK(run.exit_code == 2);
  CHECK_FALSE(contains(run.err, "no tool named"));
  CHECK(contains(run.err, "using web search with Brave"));
  CHECK(contains(run.err, "invalid arguments for web_search"));
  auto none = quarry({"tool", "run", "web_search", "{}"});
  CHECK(none.exit_code == 2);
  CHECK(contains(none.err, "no tool named 'web_search'"));
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "llm chat uses OPENAI_BASE_URL without a key and sends no Authorization header") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.add_rule(
    nlohmann::json::parse(R"({"respond": {"text": "Hello from the local server"}})")));
  auto res = quarry({"llm", "chat", "--json", "Hi"},
                    {{"OPENAI_BASE_URL", server.base_url_openai()}, {"OPENAI_MODEL", "llama3.2"}});
  INFO(res.out);
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["text"] == "Hello from the local server");
  CHECK(j["provider"] == "default");
  CHECK(contains(res.err, "no key is sent"));
  REQUIRE(server.requests().size() == 1);
  auto req = server.requests().front();
  CHECK(req.path == "/v1/chat/completions");
  CHECK(req.body["model"] == "llama3.2");
  CHECK_FALSE(req.header("Authorization").has_value());
  // With a key, the key is sent.
  server.clear_requests();
  REQUIRE_FALSE(server.add_rule(nlohmann::json::parse(R"({"respond": {"text": "Hello again"}})")));
  auto keyed = quarry({"llm", "chat", "--json", "Hi"},
                      {{"OPENAI_BASE_URL", server.base_url_openai()},
                       {"OPENAI_API_KEY", "sk-local-key-777"}});
  INFO(keyed.err);
  REQUIRE(keyed.exit_code == 0);
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests().front().header("Authorization") == "Bearer sk-local-key-777");
}

// -- checks of plugin instances --------------------------------------------------

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check and every command report every bad instance key at its line") {
  auto cfg = dir.write("quarry.yaml",
                       "llm:\n"                      // 1
                       "  providers:\n"              // 2
                       "    main:\n"                 // 3
                       "      plugin: openai\n"      // 4
                       "      model: m\n"            // 5
                       "      retries: 0\n"          // 6
                       "      max_retries: -5\n"     // 7
                       "      max_concurrency: -3\n" // 8
                       "      stall_timeout: 0s\n"   // 9
                       "      context_windw: 8000\n" // 10
                       "      temprature: 0.2\n"     // 11
                       "tools:\n"                    // 12
                       "  web_search:\n"             // 13
                       "    plugin: searxng\n"       // 14
                       "    cache_ttl: banana\n"     // 15
                       "    max_result: 3\n");       // 16
  auto res = quarry({"--config", cfg, "config", "check", "--offline"});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 2);
  CHECK(contains(res.err, cfg
                            + ":6: llm.providers.main.retries: unknown key; did "
                              "you mean `llm.providers.main.limits.max_retries`?"));
  // Limits beside the options (older files) are checked like limits.
  CHECK(contains(res.err, cfg
                            + ":7: llm.providers.main.max_retries: must be an "
                              "integer from 0 to 100, got -5"));
  CHECK(contains(res.err, cfg
                            + ":8: llm.providers.main.max_concurrency: must be an "
                              "integer from 1 to 10000, got -3"));
  CHECK(contains(res.err, cfg
                            + ":9: llm.providers.main.stall_timeout: must be "
                              "longer than 0"));
  CHECK(contains(res.err, cfg
                            + ":10: llm.providers.main.context_windw: unknown key; "
                              "did you mean `llm.providers.main.context_window`?"));
  CHECK(contains(res.err, cfg
                            + ":11: llm.providers.main.temprature: unknown key; "
                              "did you mean `llm.providers.main.temperature`?"));
  CHECK(contains(res.err, cfg
                            + ":15: tools.web_search.cache_ttl: expected a duration "
                              "such as 30s or 500ms, got \"banana\""));
  CHECK(contains(res.err, cfg
                            + ":16: tools.web_search.max_result: unknown key; did "
                              "you mean `tools.web_search.max_results`?"));
  CHECK(contains(res.err, "configuration invalid: 8 errors"));
  // The same checks run before every command that uses the configuration.
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"llm", "chat", "hi"},
        std::vector<std::string>{"tool", "run", "web_search", R"({"queries": ["x"]})"},
        std::vector<std::string>{"research", "--no-clarify", "--json", "a question"}}) {
    std::vector<std::string> args{"--config", cfg};
    args.insert(args.end(), cmd.begin(), cmd.end());
    auto other = quarry(args);
    CAPTURE(cmd.front());
    INFO(other.err);
    CHECK(other.exit_code == 2);
    CHECK(other.out.empty());
    CHECK(contains(other.err, cfg + ":7: llm.providers.main.max_retries: "));
    CHECK(contains(other.err, cfg + ":15: tools.web_search.cache_ttl: "));
  }
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "limits: every bad limit at its line, before any command runs") {
  auto cfg = dir.write("quarry.yaml",
                       "llm:\n"                            // 1
                       "  providers:\n"                    // 2
                       "    main:\n"                       // 3
                       "      plugin: openai\n"            // 4
                       "      model: m\n"                  // 5
                       "      limits:\n"                   // 6
                       "        max_retries: -5\n"         // 7
                       "        max_concurency: 3\n"       // 8
                       "        stall_timeout: 0s\n"       // 9
                       "tools:\n"                          // 10
                       "  web_search:\n"                   // 11
                       "    plugin: searxng\n"             // 12
                       "    limits: {timeout: banana}\n"); // 13
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"config", "check", "--offline"},
        std::vector<std::string>{"config", "show"}, std::vector<std::string>{"llm", "chat", "hi"},
        std::vector<std::string>{"tool", "run", "web_search", R"({"queries": ["x"]})"}}) {
    std::vector<std::string> args{"--config", cfg};
    args.insert(args.end(), cmd.begin(), cmd.end());
    auto res = quarry(args);
    CAPTURE(cmd.front());
    INFO(res.err);
    CHECK(res.exit_code == 2);
    CHECK(res.out.empty());
    CHECK(contains(res.err, cfg
                              + ":7: llm.providers.main.limits.max_retries: must be "
                                "an integer from 0 to 100, got -5"));
    CHECK(contains(res.err, cfg
                              + ":8: llm.providers.main.limits.max_concurency: "
                                "unknown key; did you mean "
                                "`llm.providers.main.limits.max_concurrency`?"));
    CHECK(contains(res.err, cfg
                              + ":9: llm.providers.main.limits.stall_timeout: must "
                                "be longer than 0"));
    CHECK(contains(res.err, cfg
                              + ":13: tools.web_search.limits.timeout: expected a "
                                "duration such as 30s or 500ms, got \"banana\""));
  }
}

TEST_CASE_FIXTURE(
  config_cli_fixture,
  "limits: an older file's limits beside the options work, with a warning at their line") {
  auto cfg = dir.write("quarry.yaml",
                       "llm:\n"                                  // 1
                       "  providers:\n"                          // 2
                       "    main:\n"                             // 3
                       "      plugin: openai\n"                  // 4
                       "      model: m\n"                        // 5
                       "      base_url: http://127.0.0.1:9/v1\n" // 6
                       "      max_retries: 0\n"                  // 7
                       "tools:\n"                                // 8
                       "  web_search:\n"                         // 9
                       "    plugin: searxng\n"                   // 10
                       "    base_url: http://127.0.0.1:9\n"      // 11
                       "    cache_ttl: 0s\n");                   // 12
  auto res = quarry({"--config", cfg, "config", "check", "--offline"});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 0);
  CHECK(contains(res.out, "warning: " + cfg
                            + ":7: llm.providers.main.max_retries: "
                              "Quarry's limits now go under `limits:`; write `limits: "
                              "{max_retries: 0}` instead (read as "
                              "llm.providers.main.limits.max_retries until then)"));
  CHECK(contains(res.out, "warning: " + cfg + ":12: tools.web_search.cache_ttl: "));
  // config show prints them where they take effect: under `limits`.
  auto show = quarry({"--config", cfg, "config", "show"});
  INFO(show.out);
  CHECK(show.exit_code == 0);
  CHECK(contains(show.err, cfg + ":7: llm.providers.main.max_retries: Quarry's limits"));
  CHECK(contains(show.out, "      limits:\n        max_concurrency: 16\n        max_retries: 0\n"));
  // Once in the provider (under limits, not beside them too); tools have
  // their own max_retries.
  auto llm_at = show.out.find("\nllm:");
  auto tools_at = show.out.find("\ntools:", llm_at == std::string::npos ? 0 : llm_at);
  REQUIRE(llm_at != std::string::npos);
  auto llm_part = show.out.substr(llm_at, tools_at == std::string::npos ? std::string::npos
                                                                        : tools_at - llm_at);
  CHECK(llm_part.find("max_retries:") == llm_part.rfind("max_retries:"));
  // Every command says so on stderr, and runs: the refused connection is
  // not retried (max_retries: 0 was read).
  auto chat = quarry({"--config", cfg, "llm", "chat", "hi"});
  INFO(chat.err);
  CHECK(chat.exit_code == 1);
  CHECK(contains(chat.err, "quarry: warning: " + cfg
                             + ":7: llm.providers.main.max_retries: "
                               "Quarry's limits now go under `limits:`"));
  CHECK_FALSE(contains(chat.err, "retrying"));
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "two tools with the same tool name are an error at the second one's line") {
  auto cfg = dir.write("quarry.yaml",
                       "tools:\n"              // 1
                       "  search:\n"           // 2
                       "    plugin: searxng\n" // 3
                       "  web_search:\n"       // 4
                       "    plugin: searxng\n" // 5
                       "    base_url: http://127.0.0.1:9\n");
  auto res = quarry({"--config", cfg, "config", "check", "--offline"});
  INFO(res.err);
  CHECK(res.exit_code == 2);
  CHECK(contains(res.err, cfg
                            + ":4: tools.web_search: provides the tool "
                              "`web_search`, like tools.search ("
                            + cfg + ":2)"));
  auto run = quarry({"--config", cfg, "tool", "run", "search", R"({"queries": ["x"]})"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, cfg + ":4: tools.web_search: provides the tool"));
}

// -- the probe of config check -----------------------------------------------------

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check reaches an OpenAI-compatible server without a key") {
  recording_server server;
  server.answer("GET", "/v1/models", test::response_plan::json(200, models_json));
  auto res = quarry({"config", "check"},
                    {{"OPENAI_BASE_URL", server.server.url("/v1")}, {"OPENAI_MODEL", "llama3.2"}});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 0);
  CHECK(contains(res.out, "llm.providers.default (openai): reachable, GET "
                            + server.server.url("/v1/models")));
  CHECK(contains(res.out, "configuration OK"));
  auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK_FALSE(seen[0].header("Authorization").has_value());
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check says refused when nothing listens, and --offline skips the probe") {
  auto base = "http://127.0.0.1:" + std::to_string(free_port()) + "/v1";
  auto res = quarry({"config", "check"}, {{"OPENAI_BASE_URL", base}});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 1);
  CHECK(contains(res.out, "llm.providers.default (openai): refused"));
  CHECK_FALSE(contains(res.out, "configuration OK"));
  CHECK(contains(res.err, "1 provider or tool is not reachable"));
  auto offline = quarry({"config", "check", "--offline"}, {{"OPENAI_BASE_URL", base}});
  CHECK(offline.exit_code == 0);
  CHECK_FALSE(contains(offline.out, "refused"));
  CHECK(contains(offline.out, "configuration OK"));
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check says unauthorised for a 401 and sends the key") {
  recording_server server;
  server.answer("GET", "/v1/models",
                test::response_plan::json(401, R"({"error": {"message": "Incorrect API key"}})"));
  auto res = quarry({"config", "check"}, {{"OPENAI_BASE_URL", server.server.url("/v1")},
                                          {"OPENAI_API_KEY", "sk-wrong-key-123456"}});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 1);
  CHECK(contains(res.out, "llm.providers.default (openai): unauthorised"));
  CHECK_FALSE(contains(res.out, "sk-wrong-key-123456"));
  auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].header("Authorization") == "Bearer sk-wrong-key-123456");
}

TEST_CASE_FIXTURE(config_cli_fixture,
                  "config check says wrong protocol for an HTML page and a 404") {
  recording_server html;
  html.answer("GET", "/v1/models",
              test::response_plan::text(200, "<!DOCTYPE html><html><body>Welcome</body></html>",
                                        "text/html"));
  auto res = quarry({"config", "check"}, {{"OPENAI_BASE_URL", html.server.url("/v1")}});
  INFO(res.out);
  CHECK(res.exit_code == 1);
  CHECK(contains(res.out, "llm.providers.default (openai): wrong protocol"));
  CHECK(contains(res.out, "text/html"));
  // A server without the API's path (here: base_url without /v1).
  recording_server other;
  auto missing = quarry({"config", "check"}, {{"OPENAI_BASE_URL", other.server.url("")}});
  INFO(missing.out);
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.out, "wrong protocol"));
  CHECK(contains(missing.out, "HTTP 404"));
}

TEST_CASE_FIXTURE(config_cli_fixture, "config check survives a hostile answer: "
                                      "JSON nested 500,000 deep") {
  recording_server deep;
  deep.answer("GET", "/v1/models",
              test::response_plan::json(200, std::string(500000, '[') + std::string(500000, ']')));
  auto res = quarry({"config", "check"}, {{"OPENAI_BASE_URL", deep.server.url("/v1")}});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 1);
  CHECK(contains(res.out, "llm.providers.default (openai): wrong protocol"));
}

TEST_CASE_FIXTURE(config_cli_fixture, "config check probes Anthropic and a SearXNG search tool") {
  recording_server server;
  server.answer("GET", "/v1/models", test::response_plan::json(200, R"({"data": []})"));
  server.answer("GET", "/search", test::response_plan::json(200, R"({"results": [
    {"url": "https://example.org/quarry", "title": "Quarry", "content": "A quarry."}]})"));
  // clang-format off
  auto cfg = dir.write("quarry.yaml",
                       "llm:\n"
                       "  providers:\n"
                       "    claude:\n"
                       "      plugin: anthropic\n"
                       "      model: claude-test\n"
                       "      api_key: sk-ant-probe-1234\n"
                       "      base_url: " + server.server.url("") + "\n"
                       "tools:\n"
                       "  web_search:\n"
                       "    plugin: searxng\n"
                       "    base_url: " + server.server.url("") + "\n"
                       "  open_url:\n"
                       "    plugin: open_url\n");
  // clang-format on
  auto res = quarry({"--config", cfg, "config", "check"});
  INFO(res.out);
  INFO(res.err);
  CHECK(res.exit_code == 0);
  CHECK(contains(res.out, "llm.providers.claude (anthropic): reachable"));
  CHECK(contains(res.out, "tools.web_search (searxng): reachable"));
  CHECK(contains(res.out, "tools.open_url (open_url): local"));
  bool anthropic_key = false;
  bool searched = false;
  for (const auto& req : server.requests()) {
    if (req.path == "/v1/models")
      anthropic_key = req.header("x-api-key") == "sk-ant-probe-1234";
    if (req.path == "/search")
      searched = req.param("q") == "quarry";
  }
  CHECK(anthropic_key);
  CHECK(searched);
  // The search backend down: the tool is reported, not only the providers.
  server.server.stop();
  auto down = quarry({"--config", cfg, "config", "check"});
  INFO(down.out);
  CHECK(down.exit_code == 1);
  CHECK(contains(down.out, "tools.web_search (searxng): refused"));
  CHECK(contains(down.out, "llm.providers.claude (anthropic): refused"));
}

} // namespace config_cli_test
