// The live view of `quarry research` in a real terminal: tmux runs Quarry in
// an 80-column window, the window shrinks while the research runs, and the
// screen is read back with capture-pane.

#include "research_script.hpp"
#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace live_view_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace std::chrono_literals;
using test::shell_quote;

namespace {

/// A tmux server of its own (socket in a temporary folder).
struct tmux_session {
  test::temp_dir dir;
  std::string socket = dir.file("tmux.sock");

  test::process_result tmux(std::vector<std::string> args) {
    std::vector<std::string> argv{"tmux", "-S", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    test::process_options opts;
    opts.timeout = 20s;
    return test::run_process(argv, opts);
  }

  std::string screen() {
    return tmux({"capture-pane", "-p", "-t", "q"}).out;
  }

  ~tmux_session() {
    tmux({"kill-server"});
  }
};

} // namespace

TEST_CASE("the live view fits the terminal, survives a resize and leaves a summary") {
  test::fake_llm_server server;
  auto slow = [](nlohmann::json r) {
    r["latency_ms"] = 400;
    return r;
  };
  auto rules = nlohmann::json::array();
  rules.push_back(slow(rule(plan_marker, {{"text", "1. How cold weather lowers the "
                                                   "coefficient of performance of air "
                                                   "source heat pumps in winter\n"
                                                   "2. How defrost cycles work"}})));
  rules.push_back(
    slow({{"match", {{"system_contains", orchestrator_marker}, {"message_contains", "\"tool\""}}},
          {"respond", calls({{"generate_report", nlohmann::json::object()}})}}));
  rules.push_back(slow(
    rule(orchestrator_marker, calls({{"research_agent",
                                      {{"task", "Find out how much the efficiency of an air "
                                                "source heat pump falls between 7 C and -15 C, "
                                                "with numbers from field measurements"}}},
                                     {"research_agent",
                                      {{"task", "Explain defrost cycles and how manufacturers "
                                                "shorten them"}}}}))));
  for (auto r : agent_rules())
    rules.push_back(slow(r));
  rules.push_back(slow(rule(final_marker, {{"text", "Efficiency falls in the cold [1]."}})));
  REQUIRE_FALSE(server.script(rules));

  test::temp_dir home;
  tmux_session t;
  std::string cmd = "env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u QUARRY_CONFIG"
                    " -u BRAVE_API_KEY -u TAVILY_API_KEY -u EXA_API_KEY -u SERPER_API_KEY"
                    " -u SEARXNG_URL -u OLLAMA_HOST -u OLLAMA_MODEL HOME="
                    + shell_quote(home.path()) + " OPENAI_API_KEY=k OPENAI_BASE_URL="
                    + shell_quote(server.base_url_openai()) + " " + shell_quote(QUARRY_EXE)
                    + " --plugin-dir " + shell_quote(QUARRY_PLUGIN_DIR)
                    + " research --no-clarify 'Why do heat pumps lose efficiency in the "
                      "cold?' >/dev/null; echo EXIT=$?; sleep 60";
  auto started = t.tmux({"new-session", "-d", "-s", "q", "-x", "80", "-y", "40", cmd});
  REQUIRE(started.exit_code == 0);
  // Shrink the window while the agents run.
  if (!server.wait_for_requests(3, 30s))
    FAIL("Quarry did not get going: " << t.screen());
  auto resized = t.tmux({"resize-window", "-t", "q", "-x", "50", "-y", "40"});
  CHECK(resized.exit_code == 0);
  std::string screen;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    screen = t.screen();
    if (screen.find("EXIT=") != std::string::npos)
      break;
    std::this_thread::sleep_for(200ms);
  }
  CAPTURE(screen);
  REQUIRE(screen.find("EXIT=0") != std::string::npos);
  // No frame is left behind: neither status lines nor the plan box.
  CHECK(screen.find("| sources:") == std::string::npos);
  CHECK(screen.find("Plan (") == std::string::npos);
  CHECK(screen.find("[agent") == std::string::npos);
  // The summary line is there, with the cost of the model (gpt-4.1-mini,
  // priced by the table Quarry ships); its wrapped lines joined.
  CHECK(screen.find("quarry: done in") != std::string::npos);
  auto joined = screen;
  joined.erase(std::remove(joined.begin(), joined.end(), '\n'), joined.end());
  CHECK(joined.find("$0.0") != std::string::npos);
  CHECK(joined.find("cost unknown") == std::string::npos);
  CHECK(joined.find("no model") == std::string::npos);
}

TEST_CASE("a finished report is printed for reading at the terminal's width") {
  for (int width : {80, 120}) {
    CAPTURE(width);
    test::temp_dir home;
    tmux_session t;
    // Offline: the extractive provider over the example corpus.
    std::string cmd = "env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u QUARRY_CONFIG -u OPENAI_API_KEY"
                      " -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY -u BRAVE_API_KEY -u TAVILY_API_KEY"
                      " -u EXA_API_KEY -u SERPER_API_KEY -u SEARXNG_URL -u OLLAMA_HOST"
                      " -u OLLAMA_MODEL HOME="
                      + shell_quote(home.path()) + " " + shell_quote(QUARRY_EXE) + " --plugin-dir "
                      + shell_quote(QUARRY_PLUGIN_DIR)
                      + " research --no-clarify 'Why does a heat pump lose efficiency in cold "
                        "weather?' 2>/dev/null; echo EXIT=$?; sleep 60";
    auto started = t.tmux(
      {"new-session", "-d", "-s", "q", "-x", std::to_string(width), "-y", "50", cmd});
    REQUIRE(started.exit_code == 0);
    // The whole history, lines that the pane wrapped joined again.
    std::string screen;
    auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      screen = t.tmux({"capture-pane", "-p", "-J", "-S", "-", "-t", "q"}).out;
      if (screen.find("EXIT=") != std::string::npos)
        break;
      std::this_thread::sleep_for(200ms);
    }
    CAPTURE(screen);
    REQUIRE(screen.find("EXIT=0") != std::string::npos);
    std::istringstream lines{screen};
    size_t longest = 0;
    for (std::string line; std::getline(lines, line);) {
      // Columns: code points, trailing blanks of the pane left out.
      auto end = line.find_last_not_of(' ');
      size_t columns = 0;
      for (size_t i = 0; end != std::string::npos && i <= end; ++i)
        if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80)
          ++columns;
      longest = std::max(longest, columns);
    }
    CHECK(longest <= static_cast<size_t>(width));
    CHECK(screen.find("[1]") != std::string::npos);
    CHECK(screen.find("[[") == std::string::npos);
    CHECK(screen.find("file://") == std::string::npos);
    CHECK(screen.find("\nSources\n-------\n") != std::string::npos);
  }
}

} // namespace live_view_test
