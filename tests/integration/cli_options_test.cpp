// Command-line options in every position, and bad values refused with exit 2.

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace cli_options_test {

using namespace quarry;

namespace {

test::process_result quarry_run(const test::temp_dir& home, std::vector<std::string> args) {
  std::vector<std::string> argv{QUARRY_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  test::process_options opts;
  opts.env = test::isolated_quarry_env(home.path());
  return test::run_process(argv, opts);
}

} // namespace

TEST_CASE("global options work after the subcommand without swallowing the question") {
  test::temp_dir home;
  for (auto args : std::vector<std::vector<std::string>>{
         {"research", "--set", "research.max_cycles=2", "What is a heat pump?", "--no-clarify"},
         {"research", "--no-clarify", "--set", "research.max_cycles=2", "--plugin-dir",
          QUARRY_PLUGIN_DIR, "What is a heat pump?"},
         {"--set", "research.max_cycles=2", "research", "--no-clarify", "What is a heat pump?"}}) {
    auto res = quarry_run(home, args);
    CAPTURE(res.err);
    CHECK(res.exit_code == 0);
    CHECK(res.out.find("# What is a heat pump?") == 0);
  }
}

TEST_CASE("bad option values are refused with exit 2 and a clear message") {
  test::temp_dir home;
  struct bad {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& b : std::vector<bad>{
         {{"--plugin-dir", home.file("no-such-folder"), "plugins"}, "no-such-folder"},
         {{"research", "--deadline", "0", "q"}, "--deadline must be longer than 0"},
         {{"research", "--deadline", "soon", "q"}, "not a duration"},
         {{"research", "--max-agents", "0", "q"}, "--max-agents must be between 1 and 16"},
         {{"research", "--max-agents", "17", "q"}, "--max-agents must be between 1 and 16"}}) {
    auto res = quarry_run(home, b.args);
    CAPTURE(b.args);
    CAPTURE(res.err);
    CHECK(res.exit_code == 2);
    CHECK(res.err.find(b.message) != std::string::npos);
  }
}

TEST_CASE("research --help lists the global options, exit codes and environment") {
  test::temp_dir home;
  auto res = quarry_run(home, {"research", "--help"});
  CHECK(res.exit_code == 0);
  for (const auto* text : {"--config FILE", "--set KEY=VALUE", "--plugin-dir DIR", "--log-level",
                           "Exit codes:", "130", "143", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                           "BRAVE_API_KEY", "TAVILY_API_KEY", "--answer", "--answers"}) {
    CAPTURE(text);
    CHECK(res.out.find(text) != std::string::npos);
  }
}

TEST_CASE("tool run --help lists the configured tools") {
  test::temp_dir home;
  auto cfg = home.write("quarry.yaml", "tools:\n"
                                       "  my_search:\n"
                                       "    plugin: searxng\n"
                                       "    base_url: http://127.0.0.1:9\n");
  auto res = quarry_run(home, {"--config", cfg, "tool", "run", "--help"});
  CHECK(res.exit_code == 0);
  CHECK(res.out.find("Configured tools:") != std::string::npos);
  CHECK(res.out.find("my_search  (plugin searxng)") != std::string::npos);
  auto none = quarry_run(home, {"tool", "run", "--help"});
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("Configured tools: none") != std::string::npos);
}

TEST_CASE("log lines look like the command's messages unless --log-level is given") {
  test::temp_dir home;
  // A configuration naming an unset variable: a warning after loading.
  auto cfg = home.write("quarry.yaml", "log:\n  format: \"text${QUARRY_NO_SUCH_VARIABLE}\"\n");
  auto plain = quarry_run(home, {"--config", cfg, "config", "show"});
  CAPTURE(plain.err);
  CHECK(plain.exit_code == 0);
  CHECK(plain.err.find("quarry: warning: ") == 0);
  CHECK(plain.err.find("QUARRY_NO_SUCH_VARIABLE") != std::string::npos);
  CHECK(plain.err.find("Z warn ") == std::string::npos);
  auto detailed = quarry_run(home, {"--log-level", "info", "--config", cfg, "config", "show"});
  CAPTURE(detailed.err);
  CHECK(detailed.err.find("Z warn ") != std::string::npos);
}

} // namespace cli_options_test
