// Whole researches through the real `quarry` binary against model servers as
// people run them (the fake LLM server speaking the OpenAI wire format):
// reasoning written inside the answer, reasoning that must go back with
// tool-call turns, reports cut by the output limit, and researches that
// produce nothing.

#include "research_script.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace model_servers_test {

using namespace quarry;
using namespace quarry::test::script;

namespace {

struct model_fixture {
  test::temp_dir home;
  test::fake_llm_server server;

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

std::vector<nlohmann::json> packets_of(const std::string& out) {
  std::vector<nlohmann::json> packets;
  std::istringstream in{out};
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      packets.push_back(nlohmann::json::parse(line));
  return packets;
}

/// The report text of a run's packets (its message deltas).
std::string report_of(const std::vector<nlohmann::json>& packets) {
  std::string text;
  for (const auto& p : packets)
    if (p["obj"]["type"] == "message_delta")
      text += p["obj"]["content"].get<std::string>();
  return text;
}

/// One research agent that searches the example corpus, then reports; the
/// orchestrator sends it once, then asks for the report.
nlohmann::json one_agent_rules(nlohmann::json final_respond) {
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Defrost"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Explain defrost cycles."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(
    {{"match", {{"system_contains", agent_marker}, {"message_contains", "\"document\""}}},
     {"respond", calls({{"generate_report", nlohmann::json::object()}})}});
  rules.push_back(rule(agent_marker, calls({{"internal_search", {{"queries", {"defrost"}}}}})));
  rules.push_back(
    rule(agent_report_marker, {{"text", "Defrost cycles reverse the refrigerant flow [1]."}}));
  rules.push_back(rule(final_marker, std::move(final_respond)));
  return rules;
}

} // namespace

TEST_CASE_FIXTURE(model_fixture, "a model that writes its thinking inside <think> tags: no "
                                 "thought reaches the report, the packets or the store") {
  const std::string thought = "<think>SECRET-THOUGHT about the user</think>\n\n";
  auto rules = nlohmann::json::array();
  // Every answer of every step starts with a thought (tool calls too).
  for (auto& r : one_agent_rules({{"text", thought + "Defrosting reverses the cycle [1]."}})) {
    auto& respond = r["respond"];
    if (!respond.contains("text"))
      respond["text"] = thought;
    else if (respond["text"].get<std::string>().rfind("<think>", 0) != 0)
      respond["text"] = thought + respond["text"].get<std::string>();
    rules.push_back(r);
  }
  REQUIRE_FALSE(server.script(rules));
  auto res = research("qwen3:8b");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto packets = packets_of(res.out);
  auto report = report_of(packets);
  CHECK(report.find("Defrosting reverses the cycle") != std::string::npos);
  for (const auto& p : packets) {
    auto type = p["obj"]["type"].get<std::string>();
    auto text = p.dump();
    CAPTURE(text);
    CHECK(text.find("<think>") == std::string::npos);
    CHECK(text.find("</think>") == std::string::npos);
    // The thought is reasoning: only reasoning packets may carry it.
    if (type != "reasoning_delta")
      CHECK(text.find("SECRET-THOUGHT") == std::string::npos);
  }
  CHECK(std::count_if(packets.begin(), packets.end(),
                      [](const nlohmann::json& p) {
                        return p["obj"]["type"] == "reasoning_delta"
                               && p.dump().find("SECRET-THOUGHT") != std::string::npos;
                      })
        > 0);
  // Nor in what was stored, nor in the history sent back to the model.
  auto shown = quarry({"sessions", "list", "--json"}, "qwen3:8b");
  REQUIRE(shown.exit_code == 0);
  auto id = nlohmann::json::parse(shown.out)[0]["id"].get<std::string>();
  auto stored = quarry({"sessions", "show", id, "--json"}, "qwen3:8b");
  REQUIRE(stored.exit_code == 0);
  CHECK(stored.out.find("<think>") == std::string::npos);
  for (const auto& r : server.requests())
    CHECK(r.raw_body.find("<think>") == std::string::npos);
}

TEST_CASE_FIXTURE(model_fixture, "a DeepSeek-style server that refuses tool-call turns "
                                 "without their reasoning: the research completes") {
  // The policy first: any request whose history has an assistant tool-call
  // turn without reasoning_content is refused, as DeepSeek's thinking mode
  // does; every answer streams reasoning first.
  auto rules = nlohmann::json::array();
  rules.push_back(
    {{"match", {{"tool_turn_without_reasoning", true}}},
     {"error",
      {{"status", 400},
       {"body",
        {{"error",
          {{"message", "The reasoning_content of earlier assistant turns with tool calls "
                       "has to be sent back"},
           {"type", "invalid_request_error"}}}}}}}});
  for (auto& r : one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}})) {
    r["respond"]["reasoning"] = "Thinking before this step.";
    rules.push_back(r);
  }
  SUBCASE("known by name") {
    REQUIRE_FALSE(server.script(rules));
    auto res = research("deepseek-reasoner");
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    CHECK(report_of(packets_of(res.out)).find("Defrosting reverses the cycle")
          != std::string::npos);
    for (const auto& r : server.requests())
      CHECK(r.rule != 0);
    // The tool-call turns went back with their reasoning.
    size_t with = 0;
    for (const auto& r : server.requests())
      for (const auto& m : r.body["messages"])
        if (m.contains("tool_calls")
            && m.value("reasoning_content", "") == "Thinking before this step.")
          ++with;
    CHECK(with > 0);
  }
  SUBCASE("learned from the refusal") {
    REQUIRE_FALSE(server.script(rules));
    auto res = research("house-reasoner");
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    CHECK(report_of(packets_of(res.out)).find("Defrosting reverses the cycle")
          != std::string::npos);
    size_t refused = 0;
    for (const auto& r : server.requests())
      refused += r.rule == 0 ? 1 : 0;
    CHECK(refused >= 1);
    CHECK(refused <= 2); // the orchestrator and an agent may each meet it once
  }
}

TEST_CASE_FIXTURE(model_fixture, "a final report cut by the output limit is continued, "
                                 "and one still cut is marked so") {
  SUBCASE("continued") {
    auto rules = one_agent_rules(
      {{"text", "Defrosting reverses the refrigerant cy"}, {"finish_reason", "length"}});
    // The continuation: asked to go on where it stopped.
    nlohmann::json continuation{{"match",
                                 {{"system_contains", final_marker},
                                  {"last_user_contains", "cut off by the output token limit"}}},
                                {"respond", {{"text", "cle [1]. It melts the frost."}}}};
    rules.insert(rules.begin(), continuation);
    REQUIRE_FALSE(server.script(rules));
    auto res = research("gpt-4o");
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    auto report = report_of(packets_of(res.out));
    CHECK(report.find("Defrosting reverses the refrigerant cycle") != std::string::npos);
    CHECK(report.find("It melts the frost.") != std::string::npos);
    CHECK(report.find("incomplete") == std::string::npos);
    auto listed = quarry({"sessions", "list", "--json"}, "gpt-4o");
    auto id = nlohmann::json::parse(listed.out)[0]["id"].get<std::string>();
    auto shown = quarry({"sessions", "show", id, "--json"}, "gpt-4o");
    CHECK(nlohmann::json::parse(shown.out)["truncated"] == false);
    // The continuation saw what was written so far.
    auto finals = requests_of(server, final_marker);
    REQUIRE(finals.size() == 2);
    CHECK(finals[1].dump().find("Defrosting reverses the refrigerant cy") != std::string::npos);
  }
  SUBCASE("still cut after the continuations") {
    auto rules = one_agent_rules(
      {{"text", "Defrosting reverses the cy"}, {"finish_reason", "length"}});
    REQUIRE_FALSE(server.script(rules));
    auto res = research("gpt-4o", {"--set", "research.report_continuations=1"});
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    auto packets = packets_of(res.out);
    auto report = report_of(packets);
    CHECK(report.find("this report is incomplete") != std::string::npos);
    CHECK(report.find("research.max_tokens.final_report") != std::string::npos);
    bool notice = false;
    for (const auto& p : packets)
      if (p["obj"]["type"] == "notice"
          && p["obj"]["text"].get<std::string>().find("cut by the model's output limit")
               != std::string::npos)
        notice = true;
    CHECK(notice);
    CHECK(requests_of(server, final_marker).size() == 2);
    // The stored session says it too.
    auto listed = quarry({"sessions", "list", "--json"}, "gpt-4o");
    REQUIRE(listed.exit_code == 0);
    auto id = nlohmann::json::parse(listed.out)[0]["id"].get<std::string>();
    auto shown = quarry({"sessions", "show", id, "--json"}, "gpt-4o");
    REQUIRE(shown.exit_code == 0);
    CHECK(nlohmann::json::parse(shown.out)["truncated"] == true);
    // Without --json, the terminal's notices say it too.
    REQUIRE_FALSE(server.script(rules));
    auto plain = quarry({"research", "How does defrosting work?", "--no-clarify", "--set",
                         "research.report_continuations=0"},
                        "gpt-4o");
    CHECK(plain.exit_code == 0);
    CHECK(plain.err.find("cut by the model's output limit") != std::string::npos);
    CHECK(plain.out.find("this report is incomplete") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(model_fixture, "a research that read no source fails with exit 1 and "
                                 "the reason, and is stored as failed") {
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Defrost"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Explain defrost cycles."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  // Every research agent's model call fails for good.
  rules.push_back({{"match", {{"system_contains", agent_marker}}},
                   {"error", {{"status", 400}, {"message", "the model refuses this"}}}});
  rules.push_back(rule(final_marker, {{"text", "A report from nothing."}}));
  REQUIRE_FALSE(server.script(rules));
  auto res = research("gpt-4o");
  CAPTURE(res.err);
  CHECK(res.exit_code == 1);
  CHECK(res.err.find("read no source") != std::string::npos);
  CHECK(res.err.find("research agent 1 failed") != std::string::npos);
  auto listed = quarry({"sessions", "list", "--json"}, "gpt-4o");
  REQUIRE(listed.exit_code == 0);
  CHECK(nlohmann::json::parse(listed.out)[0]["state"] == "failed");
}

TEST_CASE_FIXTURE(model_fixture, "an answer cut inside its tool call is asked again once, "
                                 "said plainly and with twice the room") {
  auto rules = one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}});
  // The agent's first step is cut by the output limit inside its call.
  nlohmann::json cut{
    {"match", {{"system_contains", agent_marker}, {"times", 1}}},
    {"respond",
     {{"tool_calls", {{{"name", "internal_search"}, {"arguments", "{\"queries\": [\"defr"}}}},
      {"finish_reason", "length"}}}};
  rules.insert(rules.begin(), cut);
  REQUIRE_FALSE(server.script(rules));
  auto res = research("gpt-4o");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto steps = requests_of(server, agent_marker);
  REQUIRE(steps.size() >= 2);
  CHECK(steps[0]["max_tokens"] == 1000);
  // The retry says why, has twice the room, and holds no broken call.
  CHECK(steps[1]["max_tokens"] == 2000);
  CHECK(steps[1].dump().find("cut off by the output token limit in the middle of a tool call")
        != std::string::npos);
  CHECK(steps[1].dump().find("defr\"") == std::string::npos);
  CHECK(steps.size() == 3); // cut, asked again (a search), then the report
}

TEST_CASE_FIXTURE(model_fixture, "an empty answer is retried, and the research goes on") {
  auto rules = one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}});
  // The final report's first answer has no choice at all (the field case).
  nlohmann::json empty{{"match", {{"system_contains", final_marker}, {"times", 1}}},
                       {"replay",
                        QUARRY_FIXTURES_DIR "/../field-cases/empty-choices-stream/stream.sse"}};
  rules.insert(rules.begin(), empty);
  REQUIRE_FALSE(server.script(rules));
  auto res = research("gemini-2.5-flash");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(requests_of(server, final_marker).size() == 2);
  CHECK(report_of(packets_of(res.out)).find("Defrosting reverses the cycle") != std::string::npos);
}

TEST_CASE_FIXTURE(model_fixture, "reasoning models are recognised by name and by their "
                                 "first answer, and the run's first packet says so") {
  auto profile_of = [](const std::vector<nlohmann::json>& packets) {
    std::vector<nlohmann::json> out;
    for (const auto& p : packets)
      if (p["obj"]["type"] == "model_profile")
        out.push_back(p["obj"]);
    return out;
  };
  SUBCASE("by name") {
    REQUIRE_FALSE(server.script(one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}})));
    auto res = research("deepseek-reasoner");
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    auto packets = packets_of(res.out);
    REQUIRE_FALSE(packets.empty());
    CHECK(packets[0]["obj"]["type"] == "model_profile");
    auto profiles = profile_of(packets);
    REQUIRE(profiles.size() == 1);
    CHECK(profiles[0]["reasoning_model"] == true);
    CHECK(profiles[0]["orchestrator_cycles"] == 4);
    CHECK(profiles[0]["reason"].get<std::string>().find("deepseek-reasoner") != std::string::npos);
    // No think_tool for a reasoning model.
    for (const auto& r : requests_of(server, orchestrator_marker))
      CHECK(r.dump().find("think_tool") == std::string::npos);
  }
  SUBCASE("by the first answer") {
    auto rules = one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}});
    rules[0]["respond"]["reasoning"] = "The plan needs one step.";
    REQUIRE_FALSE(server.script(rules));
    auto res = research("house-model");
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    auto profiles = profile_of(packets_of(res.out));
    REQUIRE(profiles.size() == 2);
    CHECK(profiles[0]["reasoning_model"] == false);
    CHECK(profiles[1]["reasoning_model"] == true);
    CHECK(profiles[1]["reason"] == "its first answer carried reasoning");
    for (const auto& r : requests_of(server, orchestrator_marker))
      CHECK(r.dump().find("think_tool") == std::string::npos);
  }
  SUBCASE("turned off") {
    REQUIRE_FALSE(server.script(one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}})));
    auto res = research("deepseek-reasoner", {"--set", "research.reasoning_model=off"});
    REQUIRE(res.exit_code == 0);
    auto profiles = profile_of(packets_of(res.out));
    REQUIRE(profiles.size() == 1);
    CHECK(profiles[0]["reasoning_model"] == false);
    CHECK(profiles[0]["reason"] == "research.reasoning_model: off");
    bool offered = false;
    for (const auto& r : requests_of(server, orchestrator_marker))
      offered = offered || r.dump().find("think_tool") != std::string::npos;
    CHECK(offered);
  }
}

TEST_CASE_FIXTURE(model_fixture, "Claude with extended thinking researches: signed thinking "
                                 "goes back with every tool-use turn, tool use is not forced") {
  auto rules = nlohmann::json::array();
  // The policy first: a tool-use turn sent back without its thinking block
  // is refused, as Anthropic's API refuses it while thinking is on.
  rules.push_back({{"match", {{"tool_turn_without_reasoning", true}}},
                   {"error",
                    {{"status", 400},
                     {"message", "messages.1.content.0.type: Expected `thinking` or "
                                 "`redacted_thinking`, but found `tool_use`."}}}});
  for (auto& r : one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}})) {
    r["respond"]["reasoning"] = "Let me think about this step.";
    rules.push_back(r);
  }
  REQUIRE_FALSE(server.script(rules));
  // clang-format off
  auto cfg = home.write("quarry.yaml",
                        "llm:\n"
                        "  default: claude\n"
                        "  providers:\n"
                        "    claude:\n"
                        "      plugin: anthropic\n"
                        "      api_key: test-key\n"
                        "      base_url: " + server.base_url_anthropic() + "\n"
                        "      model: claude-sonnet-4-5\n"
                        "      max_tokens: 4096\n"
                        "      thinking_budget: 2048\n"
                        "research:\n"
                        "  corpus: " QUARRY_SOURCE_DIR "/examples/corpus\n");
  // clang-format on
  auto res = quarry(
    {"--config", cfg, "research", "How does defrosting work?", "--no-clarify", "--json"}, "unused");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(report_of(packets_of(res.out)).find("Defrosting reverses the cycle") != std::string::npos);
  size_t turns_back = 0;
  for (const auto& r : server.requests()) {
    CHECK(r.rule != 0);
    if (r.body.contains("tools") && r.body.contains("thinking")) {
      // Thinking and forced tool use do not go together.
      CHECK(r.body["tool_choice"]["type"] == "auto");
    }
    for (const auto& m : r.body["messages"])
      if (m["role"] == "assistant" && m["content"].is_array() && !m["content"].empty()
          && m["content"][0]["type"] == "thinking") {
        CHECK_FALSE(m["content"][0]["signature"].get<std::string>().empty());
        ++turns_back;
      }
  }
  CHECK(turns_back > 0);
}

TEST_CASE_FIXTURE(model_fixture, "an agent step answered with text is reminded once to call "
                                 "a tool, and an agent report cut by the limit is continued") {
  auto rules = one_agent_rules({{"text", "Defrosting reverses the cycle [1]."}});
  // The agent's first step answers with text (a model whose tool use could
  // not be forced); its report is cut once.
  nlohmann::json chatty{{"match", {{"system_contains", agent_marker}, {"times", 1}}},
                        {"respond", {{"text", "I would search for defrost cycles."}}}};
  nlohmann::json cut_report{
    {"match", {{"system_contains", agent_report_marker}, {"times", 1}}},
    {"respond", {{"text", "Defrost cycles reverse the refr"}, {"finish_reason", "length"}}}};
  nlohmann::json rest_of_report{{"match",
                                 {{"system_contains", agent_report_marker},
                                  {"last_user_contains", "cut off by the output token limit"}}},
                                {"respond", {{"text", "igerant flow [1]."}}}};
  rules.insert(rules.begin(), rest_of_report);
  rules.insert(rules.begin(), cut_report);
  rules.insert(rules.begin(), chatty);
  REQUIRE_FALSE(server.script(rules));
  auto res = research("gpt-4o");
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto steps = requests_of(server, agent_marker);
  REQUIRE(steps.size() >= 2);
  CHECK(steps[1].dump().find("You answered without calling a tool") != std::string::npos);
  CHECK(steps[1].dump().find("I would search for defrost cycles.") != std::string::npos);
  // The agent's report came whole to the orchestrator's final step.
  std::string intermediate;
  for (const auto& p : packets_of(res.out))
    if (p["obj"]["type"] == "intermediate_report_delta")
      intermediate += p["obj"]["content"].get<std::string>();
  CHECK(intermediate.find("Defrost cycles reverse the refrigerant flow") != std::string::npos);
  CHECK(intermediate.find("incomplete") == std::string::npos);
  // The continuation is the first report request (built again from the
  // agent's history), then what was written and the request to go on.
  auto reports = requests_of(server, agent_report_marker);
  REQUIRE(reports.size() == 2);
  const auto& first = reports[0]["messages"];
  const auto& second = reports[1]["messages"];
  REQUIRE(second.size() == first.size() + 2);
  for (size_t i = 0; i < first.size(); ++i)
    CHECK(second[i] == first[i]);
  CHECK(second[first.size()]["role"] == "assistant");
  CHECK(second[first.size()]["content"] == "Defrost cycles reverse the refr");
  CHECK(reports[1]["max_tokens"] == reports[0]["max_tokens"]);
}

} // namespace model_servers_test
