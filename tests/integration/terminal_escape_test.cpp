// Text from outside never drives the terminal: the real `quarry` runs in a
// tmux window while a scripted model answers with escape sequences (window
// title, clipboard, clear screen, 8-bit CSI and OSC), and a question full of
// them is stored over the HTTP API of a real `quarry serve`. tmux must keep
// the title it set, no paste buffer may appear, the screen must not be
// cleared, and the bytes the pane received (pipe-pane) must hold none of the
// sequences; --json output, --out files and reports into a pipe keep them.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace terminal_escape_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace std::chrono_literals;
using test::shell_quote;

namespace {

// What a model or a client sends: OSC 0 (window title), OSC 52 (clipboard
// write) with BEL and with ST, ESC[2J (clear screen), 8-bit CSI and OSC
// (U+009B, U+009D as UTF-8), and a BEL. `tag` names where it came from.
std::string hostile(const std::string& tag) {
  return "\x1b]0;pwned-" + tag + "\x07" + "\x1b]52;c;cHduZWQt" + tag + "\x1b\\"
         + "\x1b]52;c;cHduZWQ=\x07" + "\x1b[2J\x1b[H"
         + "\xC2\x9B"
           "31m"
         + "\xC2\x9D" + "0;pwned-c1-" + tag + "\xC2\x9C" + "\x07";
}

const std::string tmux_title = "quarry-escape-test";

// `quarry args...` as a shell command with the environment of
// isolated_quarry_options(home, env) (`env -u NAME NAME=value ...`).
std::string
quarry_command(const std::string& home, const std::vector<std::string>& args,
               const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  std::string unset;
  std::string set;
  for (const auto& [name, value] : test::isolated_quarry_options(home, env).env) {
    if (value)
      set += " " + name + "=" + shell_quote(*value);
    else
      unset += " -u " + name;
  }
  // env takes its -u options before the assignments.
  auto cmd = "env" + unset + set + " " + shell_quote(QUARRY_EXE) + " --plugin-dir "
             + shell_quote(QUARRY_PLUGIN_DIR);
  for (const auto& a : args)
    cmd += " " + shell_quote(a);
  return cmd;
}

/// A tmux server of its own (socket in a temporary folder) running one
/// window whose bytes are copied to a file, and whose title and clipboard
/// would show what an escape sequence did. 100 rows: everything the commands
/// print stays on the screen, so a line gone from it was cleared.
struct tmux_window {
  test::temp_dir dir;
  std::string socket = dir.file("tmux.sock");
  std::string raw_log = dir.file("pane.raw");
  std::string go = dir.file("go");

  test::process_result tmux(std::vector<std::string> args) {
    std::vector<std::string> argv{"tmux", "-S", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    test::process_options opts;
    opts.timeout = 20s;
    return test::run_process(argv, opts);
  }

  /// Starts `commands` (shell) in the window once the pane's bytes are
  /// being copied; a line BEFORE-QUARRY comes first, `EXIT=<status>` last.
  void run(const std::string& commands) {
    auto version = test::run_process({"sh", "-c", "command -v tmux && tmux -V"});
    if (version.exit_code != 0)
      FAIL("tmux is not installed: this test needs it (scripts/setup installs the Debian "
           "package tmux)");
    auto wait = "while [ ! -e " + shell_quote(go) + " ]; do sleep 0.05; done; "
                + "echo BEFORE-QUARRY; " + commands + "; echo EXIT=$?; sleep 600";
    auto started = tmux({"new-session", "-d", "-s", "q", "-x", "200", "-y", "100", wait});
    REQUIRE_MESSAGE(started.exit_code == 0, "tmux new-session: " << started.err);
    // OSC 52 from a program would become a tmux paste buffer.
    CHECK(tmux({"set-option", "-g", "set-clipboard", "on"}).exit_code == 0);
    CHECK(tmux({"select-pane", "-t", "q", "-T", tmux_title}).exit_code == 0);
    REQUIRE(tmux({"pipe-pane", "-t", "q", "-o", "cat >> " + shell_quote(raw_log)}).exit_code == 0);
    REQUIRE(title() == tmux_title);
    // The file the commands wait for.
    REQUIRE(std::ofstream{go}.good());
  }

  // Wrapped lines joined (-J): a long path must not split what is checked.
  std::string screen() {
    return tmux({"capture-pane", "-p", "-J", "-t", "q"}).out;
  }

  std::string title() {
    auto out = tmux({"display-message", "-p", "-t", "q", "#{pane_title}"}).out;
    while (!out.empty() && out.back() == '\n')
      out.pop_back();
    return out;
  }

  /// Waits until the commands have ended; returns the screen then.
  std::string wait_for_exit(std::chrono::seconds timeout) {
    std::string s;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      s = screen();
      if (s.find("EXIT=") != std::string::npos)
        break;
      std::this_thread::sleep_for(200ms);
    }
    // pipe-pane copies through `cat`: give it a moment to catch up.
    std::this_thread::sleep_for(300ms);
    return s;
  }

  ~tmux_window() {
    tmux({"kill-server"});
  }
};

// What the terminal must not have received or done; `screen` is the visible
// screen at the end.
void check_terminal_untouched(tmux_window& t, const std::string& screen) {
  auto raw = test::read_file(t.raw_log);
  CAPTURE(screen);
  REQUIRE_FALSE(raw.empty());
  // The window title is still the one tmux set (OSC 0 and 2 would change it).
  CHECK(t.title() == tmux_title);
  // No paste buffer (OSC 52 with set-clipboard on would make one).
  CHECK(t.tmux({"list-buffers"}).out.empty());
  // The screen was not cleared: the line before Quarry ran is still there.
  CHECK(screen.find("BEFORE-QUARRY") != std::string::npos);
  // None of the sequences, nor what was inside them, reached the pane.
  for (std::string bad : {std::string{"\x1b]"}, std::string{"\x1b[2J"}, std::string{"\x1b\\"},
                          std::string{"\x07"}, std::string{"\xC2\x9B"}, std::string{"\xC2\x9C"},
                          std::string{"\xC2\x9D"}, std::string{"pwned"}, std::string{"cHduZWQ"}}) {
    CAPTURE(bad);
    CHECK(raw.find(bad) == std::string::npos);
  }
}

} // namespace

TEST_CASE("terminal escapes: a model's escape sequences never reach the terminal in "
          "quarry research") {
  test::fake_llm_server server;
  // A little latency, so the live view draws the plan and the agents' lanes.
  auto slow = [](nlohmann::json r) {
    r["latency_ms"] = 300;
    return r;
  };
  auto rules = nlohmann::json::array();
  rules.push_back(slow(rule(plan_marker, {{"text", "1. Measure the cold" + hostile("plan")
                                                     + "\n2. Explain defrost cycles"}})));
  rules.push_back(
    slow({{"match", {{"system_contains", orchestrator_marker}, {"message_contains", "\"tool\""}}},
          {"respond", calls({{"generate_report", nlohmann::json::object()}})}}));
  auto task = "Find cold-weather numbers" + hostile("task");
  rules.push_back(slow(rule(orchestrator_marker, calls({{"research_agent", {{"task", task}}}}))));
  rules.push_back(
    slow({{"match", {{"system_contains", agent_marker}, {"message_contains", "\"document\""}}},
          {"respond", calls({{"generate_report", nlohmann::json::object()}})}}));
  rules.push_back(
    slow(rule(agent_marker,
              calls({{"internal_search", {{"queries", {"heat pump cold" + hostile("query")}}}}}))));
  rules.push_back(slow(
    rule(agent_report_marker, {{"text", "Efficiency falls in the cold [1]." + hostile("agent")}})));
  rules.push_back(
    slow(rule(final_marker, {{"text", "Efficiency falls in the cold [1]." + hostile("report")
                                        + " Defrosting costs energy [1]."}})));
  REQUIRE_FALSE(server.script(rules));

  test::temp_dir home;
  auto report_file = home.file("report.md");
  std::vector<std::pair<std::string, std::optional<std::string>>> env{
    {"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
  tmux_window t;
  // stdout and stderr are the terminal: the live view and the report.
  t.run(quarry_command(home.path(),
                       {"research", "--no-clarify", "--out", report_file,
                        "Why do heat pumps lose efficiency in the cold?"},
                       env));
  auto screen = t.wait_for_exit(90s);
  CAPTURE(screen);
  REQUIRE(screen.find("EXIT=0") != std::string::npos);
  check_terminal_untouched(t, screen);
  // What the model wrote is there, cleaned, as the text a terminal shows
  // (citations as [n]).
  CHECK(screen.find("Efficiency falls in the cold [1].") != std::string::npos);
  CHECK(screen.find(" Defrosting costs energy [1]") != std::string::npos);
  CHECK(screen.find("file://") == std::string::npos);
  CHECK(screen.find("quarry: done in") != std::string::npos);
  // The live view drew the plan and the agent's task (cleaned) while it ran.
  auto raw = test::read_file(t.raw_log);
  CHECK(raw.find("Measure the cold") != std::string::npos);
  CHECK(raw.find("Find cold-weather numbers") != std::string::npos);

  // The --out file is data: it keeps the model's text byte for byte.
  auto file = test::read_file(report_file);
  CHECK(file.find(hostile("report") + " Defrosting costs energy") != std::string::npos);

  // --json keeps it too, as JSON escapes (the 8-bit forms as UTF-8).
  auto json_run = test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "research",
                                     "--no-clarify", "--json", "--no-store",
                                     "Why do heat pumps lose efficiency in the cold?"},
                                    test::isolated_quarry_options(home.path(), env));
  CAPTURE(json_run.err);
  REQUIRE(json_run.exit_code == 0);
  CHECK(json_run.out.find("\\u001b]0;pwned-plan\\u0007") != std::string::npos);
  CHECK(json_run.out.find("\\u001b[2J\\u001b[H\xC2\x9B"
                          "31m\xC2\x9D"
                          "0;pwned-c1-report")
        != std::string::npos);
}

TEST_CASE("terminal escapes: a question sent over HTTP is shown clean by quarry sessions "
          "list and show") {
  test::temp_dir home;
  test::serve::server_process srv{home, {}};
  auto question = "How loud is a heat pump" + hostile("question") + " at night?";
  auto posted = test::serve::call(
    "POST", srv.url("/v1/research"),
    nlohmann::json{{"question", question}, {"clarify", false}}.dump());
  CAPTURE(posted.body);
  REQUIRE(posted.status == 202);
  auto id = posted.as_json()["id"].get<std::string>();
  test::serve::wait_until(
    [&] {
      auto state = test::serve::state_of(srv, id);
      return state != "running" && state != "pending";
    },
    "the research to end");
  REQUIRE(test::serve::state_of(srv, id) == "completed");

  tmux_window t;
  t.run(quarry_command(home.path(), {"sessions", "list"}) + " && "
        + quarry_command(home.path(), {"sessions", "show", id}) + " && "
        + quarry_command(home.path(), {"sessions", "show", id, "--md"}));
  auto screen = t.wait_for_exit(60s);
  CAPTURE(screen);
  REQUIRE(screen.find("EXIT=0") != std::string::npos);
  check_terminal_untouched(t, screen);
  // The list line and the show lines hold the question, cleaned.
  CHECK(screen.find(id + "  completed") != std::string::npos);
  CHECK(screen.find("How loud is a heat pump at night?") != std::string::npos);
  CHECK(screen.find("Question  How loud is a heat pump at night?") != std::string::npos);
  CHECK(screen.find("# How loud is a heat pump at night?") != std::string::npos);
  CHECK(screen.rfind("# How loud is a heat pump at night?")
        > screen.find("# How loud is a heat pump at night?"));

  // --json keeps the characters, as JSON escapes.
  auto quarry = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = test::run_process(argv, test::isolated_quarry_options(home.path()));
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  auto escaped = "heat pump\\u001b]0;pwned-question\\u0007\\u001b]52;c;cHduZWQtquestion"
                 "\\u001b\\\\";
  auto list = quarry({"sessions", "list", "--json"});
  CHECK(list.find(escaped) != std::string::npos);
  auto shown = nlohmann::json::parse(quarry({"sessions", "show", id, "--json"}));
  CHECK(shown["question"] == question);
  CHECK(quarry({"sessions", "show", id, "--json"}).find(escaped) != std::string::npos);
  // The report into a pipe is data: byte for byte.
  CHECK(quarry({"sessions", "show", id, "--md"}).find("# " + question) != std::string::npos);
}

TEST_CASE("terminal escapes: a streamed answer split inside its sequences, and a server's "
          "error text, reach the terminal clean in quarry llm chat") {
  test::fake_llm_server server;
  // One word per streamed delta, and spaces inside the sequences: each
  // sequence arrives in several deltas, as a hostile model can send it.
  auto split = "Heat pumps \x1b]0;pwned title of the window\x07 lose \x1b]52;c;cHduZWQt "
               "Y2xpcA==\x1b\\ efficiency \xC2\x9D"
               "0;pwned c1 title\xC2\x9C in the "
               "\x1b]2;pwned again\x1b\\ cold.";
  auto rules = nlohmann::json::array();
  rules.push_back({{"match", {{"message_contains", "stream"}}},
                   {"respond", {{"text", split}, {"chunk_words", 1}}}});
  nlohmann::json failure{{"error", {{"message", "overloaded" + hostile("error") + " retry"}}}};
  rules.push_back(
    {{"match", {{"message_contains", "fail"}}}, {"error", {{"status", 400}, {"body", failure}}}});
  REQUIRE_FALSE(server.script(rules));

  test::temp_dir home;
  std::vector<std::pair<std::string, std::optional<std::string>>> env{
    {"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
  tmux_window t;
  t.run(quarry_command(home.path(), {"llm", "chat", "stream please"}, env) + "; "
        + quarry_command(home.path(), {"llm", "chat", "fail please"}, env));
  auto screen = t.wait_for_exit(60s);
  CAPTURE(screen);
  REQUIRE(screen.find("EXIT=1") != std::string::npos);
  check_terminal_untouched(t, screen);
  // The words between the sequences arrived, in order.
  CHECK(screen.find("Heat pumps  lose  efficiency  in the  cold.") != std::string::npos);
  // The server's error text is there, without its sequences.
  CHECK(screen.find("overloaded") != std::string::npos);
  CHECK(screen.find("retry") != std::string::npos);

  // Into a pipe, the answer is data, byte for byte.
  auto piped = test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "llm", "chat",
                                  "stream please"},
                                 test::isolated_quarry_options(home.path(), env));
  CAPTURE(piped.err);
  REQUIRE(piped.exit_code == 0);
  CHECK(piped.out.find(split) != std::string::npos);
}

} // namespace terminal_escape_test
