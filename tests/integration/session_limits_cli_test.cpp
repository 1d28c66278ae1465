// The designs' time limits through the real binary: the reflective
// strategy's deep_research mode ends at its own deadline
// (research.deep_research_deadline, 300 s by default), not at
// research.deadline.

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace session_limits_cli_test {

using namespace quarry;
using nlohmann::json;

namespace {

// Every model call stalls: only a deadline ends the research.
json stalled() {
  return json::array({{{"respond", {{"text", "never"}}}, {"stall_after_bytes", 0}}});
}

test::process_result run_quarry(const test::temp_dir& home, const test::fake_llm_server& server,
                                std::vector<std::string> args) {
  std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
  argv.insert(argv.end(), args.begin(), args.end());
  auto opts = test::isolated_quarry_options(
    home.path(), {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  opts.timeout = std::chrono::minutes{2};
  return test::run_process(argv, opts);
}

} // namespace

TEST_CASE("session limits: the reflective deep_research mode ends at "
          "research.deep_research_deadline while research.deadline is 30 minutes") {
  test::temp_dir home;
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(stalled()));
  auto started = std::chrono::steady_clock::now();
  auto res = run_quarry(home, server,
                        {"--set", "research.deep_research_deadline=3s", "--set",
                         "research.final_report_timeout=2s", "research", "--strategy", "reflective",
                         "--no-clarify", "--json", "How do heat pumps cope with frost?"});
  auto took = std::chrono::steady_clock::now() - started;
  CAPTURE(res.err);
  // Nothing was read: no report, and the deadline is why.
  CHECK(res.exit_code == 1);
  CHECK(res.out.find("The research deadline was reached") != std::string::npos);
  CHECK(took < std::chrono::seconds{60});
  CHECK(took >= std::chrono::seconds{3});
  // The same setting leaves the web_search mode (as any other session) at
  // research.deadline, here 4 s.
  started = std::chrono::steady_clock::now();
  auto other = run_quarry(home, server,
                          {"--set", "research.deep_research_deadline=1s", "--set",
                           "research.deadline=4s", "--set", "research.final_report_timeout=2s",
                           "--set", "research.web_search_fallback=10m", "research", "--strategy",
                           "reflective", "--mode", "web_search", "--no-clarify", "--json",
                           "How do heat pumps cope with frost?"});
  took = std::chrono::steady_clock::now() - started;
  CAPTURE(other.err);
  CHECK(other.exit_code == 1);
  CHECK(other.out.find("The research deadline was reached") != std::string::npos);
  CHECK(took >= std::chrono::seconds{4});
}

} // namespace session_limits_cli_test
