// The research session in process with real plugins: the extractive provider
// over the example corpus end to end, and the fake LLM server scripting the
// orchestrator's control flow (parallel limit, empty first turn, failing
// agents, cycle limit, deadline, clarification).

#include "research_fixture.hpp"
#include "research_script.hpp"

#include "quarry/actors/session.hpp"

#include "support/fake_llm_server.hpp"

#include <regex>
#include <set>

namespace session_test {

using namespace quarry;
using test::count;
using namespace quarry::test::script;

namespace {

struct session_fixture : test::research_fixture {
  actors::session_result run(actors::session_spec spec, actors::llm_provider_actor llm,
                             actors::tool_set tools,
                             std::chrono::seconds wait = std::chrono::seconds{120}) {
    auto em = emitter(spec.session_id);
    caf::scoped_actor self{rt->system()};
    actors::session_models models{llm, llm, llm, llm, llm};
    actors::spawn_research_session(rt->system(), std::move(spec), models, std::move(tools), em,
                                   prompts, caf::actor_cast<actors::session_requester_actor>(self));
    actors::session_result out;
    self->receive([&](actors::session_done_atom, actors::session_result& r) { out = std::move(r); },
                  caf::after(wait) >> [&] { FAIL("the session never finished"); });
    drain(self, em);
    return out;
  }

  /// Runs `spec` with the OpenAI plugin pointed at `server` and
  /// internal_search over the example corpus.
  actors::session_result run_scripted(test::fake_llm_server& server, actors::session_spec spec);

  actors::session_result run_scripted(test::fake_llm_server& server);
};

} // namespace

TEST_CASE_FIXTURE(session_fixture, "session researches the example corpus with "
                                   "the extractive provider") {
  actors::session_spec spec;
  spec.session_id = "s1";
  spec.question = "Why does a heat pump's efficiency drop in cold weather, and "
                  "what do manufacturers do about it?";
  spec.current_datetime = "Sunday November 22, 2026";
  auto r = run(spec, llm("extractive", nlohmann::json::object()), corpus_tools());
  CAPTURE(r.failure);
  REQUIRE(r.status == actors::session_status::report);
  CHECK_FALSE(r.plan.empty());
  CHECK_FALSE(r.report.empty());
  REQUIRE_FALSE(r.sources.empty());
  // Every [[n]](url) in the report resolves to a listed source.
  std::regex link{R"(\[\[(\d+)\]\]\(([^)]*)\))"};
  size_t links = 0;
  for (auto it = std::sregex_iterator(r.report.begin(), r.report.end(), link);
       it != std::sregex_iterator(); ++it) {
    ++links;
    auto n = std::stoi((*it)[1]);
    auto found = std::find_if(r.sources.begin(), r.sources.end(),
                              [n](const auto& s) { return s.number == n; });
    REQUIRE(found != r.sources.end());
    CHECK(found->url == (*it)[2].str());
  }
  CHECK(links > 0);
  auto ts = types();
  CHECK(count(ts, "deep_research_plan_start") == 1);
  CHECK(count(ts, "research_agent_start") >= 2);
  CHECK(count(ts, "message_start") == 1);
  CHECK(count(ts, "citation_info") == r.sources.size());
  CHECK(ts.back() == "stop");
  // No more than 3 agents in any round.
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& p : packets)
    if (p.type() == "top_level_branching")
      CHECK(p.obj["num_parallel_branches"].get<int>() <= 3);
}

namespace {

actors::session_spec scripted_spec() {
  actors::session_spec spec;
  spec.session_id = "scripted";
  spec.question = "How do heat pumps cope with cold weather?";
  spec.clarify = false;
  spec.current_datetime = "Sunday November 22, 2026";
  return spec;
}

actors::session_result session_fixture::run_scripted(test::fake_llm_server& server,
                                                     actors::session_spec spec) {
  return run(std::move(spec),
             llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}),
             corpus_tools());
}

actors::session_result session_fixture::run_scripted(test::fake_llm_server& server) {
  return run_scripted(server, scripted_spec());
}

/// A research that read no source fails, with the reason (issue: a report
/// of "No findings" is never a success).
bool failed_without_sources(const actors::session_result& r) {
  return r.status == actors::session_status::failed
         && r.failure.find("the research read no source") != std::string::npos;
}

} // namespace

TEST_CASE_FIXTURE(session_fixture, "session shows and runs only the capped plan") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Cold air\n2. Defrost\n3. Noise\n4. Prices"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(rule(final_marker, {{"text", "Nothing was researched."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = scripted_spec();
  spec.max_plan_steps = 2;
  auto r = run_scripted(server, spec);
  // Nothing was researched: it fails, and says why.
  CAPTURE(r.failure);
  REQUIRE(failed_without_sources(r));
  std::string shown;
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& p : packets)
      if (p.type() == "deep_research_plan_delta")
        shown += p.obj["content"].get<std::string>();
  }
  CHECK(shown.find("2. Defrost") != std::string::npos);
  CHECK(shown.find("3. Noise") == std::string::npos);
  CHECK(shown.find("Prices") == std::string::npos);
  CHECK(r.plan.find("3. Noise") == std::string::npos);
  // The orchestrator sees the same capped plan.
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE_FALSE(orch.empty());
  CHECK(orch[0].dump().find("2. Defrost") != std::string::npos);
  CHECK(orch[0].dump().find("3. Noise") == std::string::npos);
  bool noted = false;
  for (const auto& n : r.notices)
    noted = noted || n.find("more than 2 steps") != std::string::npos;
  CHECK(noted);
}

TEST_CASE_FIXTURE(session_fixture, "session runs the full flow: two parallel "
                                   "agents, a think step, the report") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Efficiency in the cold\n2. Defrost"}}));
  rules.push_back(
    rule(orchestrator_marker,
         calls({{"research_agent", {{"task", "Explain why efficiency falls in the cold."}}},
                {"research_agent", {{"task", "Explain how defrost cycles work."}}}}),
         1));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"think_tool", {{"reasoning", "Both reports cover the plan."}}}}),
                       1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Cold air lowers efficiency [1]. "
                                               "Defrosting clears the coil [2]."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  CAPTURE(r.failure);
  REQUIRE(r.status == actors::session_status::report);
  CHECK(r.plan == "1. Efficiency in the cold\n2. Defrost");
  CHECK(requests_with(server, orchestrator_marker) == 3);
  CHECK(requests_with(server, agent_report_marker) == 2);
  CHECK(r.report.find("[[1]](") != std::string::npos);
  CHECK(r.report.find("[[2]](") != std::string::npos);
  REQUIRE(r.sources.size() == 2);
  auto ts = types();
  CHECK(count(ts, "top_level_branching") == 1);
  CHECK(count(ts, "research_agent_start") == 2);
  CHECK(count(ts, "reasoning_delta") >= 1); // the think step
  CHECK(count(ts, "citation_info") == 2);
  CHECK(ts.back() == "stop");
  // The think step's text was streamed whole.
  std::string reasoning;
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& p : packets)
      if (p.type() == "reasoning_delta" && !p.where.sub_turn_index)
        reasoning += p.obj["reasoning"].get<std::string>();
  }
  CHECK(reasoning.find("Both reports cover the plan.") != std::string::npos);
  // Every tool call of the orchestrator got exactly one result.
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 3);
  std::set<std::string> call_ids;
  std::set<std::string> result_ids;
  for (const auto& m : orch.back()["messages"]) {
    if (m.contains("tool_calls"))
      for (const auto& c : m["tool_calls"])
        call_ids.insert(c["id"].get<std::string>());
    if (m["role"] == "tool")
      result_ids.insert(m["tool_call_id"].get<std::string>());
  }
  CHECK(call_ids.size() == 3);
  CHECK(call_ids == result_ids);
}

TEST_CASE_FIXTURE(session_fixture, "session retries an orchestrator turn "
                                   "without tool calls once, then fails clearly") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(rule(orchestrator_marker, {{"text", "I would research this."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  CHECK(r.status == actors::session_status::failed);
  CHECK(r.failure.find("failed to generate any research tasks") != std::string::npos);
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  CHECK(orch[1].dump().find("You must call a tool now") != std::string::npos);
  CHECK(orch[0].dump().find("You must call a tool now") == std::string::npos);
  auto ts = types();
  CHECK(count(ts, "error") == 1);
  CHECK(ts.back() == "stop");
}

TEST_CASE_FIXTURE(session_fixture, "session survives an agent whose model "
                                   "calls fail") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Research defrost."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(
    {{"match", {{"system_contains", agent_marker}}},
     {"error",
      {{"status", 400},
       {"body",
        {{"error", {{"message", "agent model broke"}, {"type", "invalid_request_error"}}}}}}}});
  rules.push_back(rule(final_marker, {{"text", "Nothing could be researched."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  CAPTURE(r.failure);
  // Every agent failed: the research read nothing, so it fails with the
  // agents' failures as the reason (never a report from nothing).
  REQUIRE(failed_without_sources(r));
  CHECK(r.failure.find("research agent 1 failed") != std::string::npos);
  CHECK(r.failure.find("agent model broke") != std::string::npos);
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  bool synthetic = false;
  for (const auto& m : orch[1]["messages"])
    if (m["role"] == "tool"
        && m["content"].get<std::string>().find("The research agent failed") == 0)
      synthetic = true;
  CHECK(synthetic);
  CHECK(count(types(), "error") == 2); // the agent's, and the session's
  CHECK(types().back() == "stop");
}

TEST_CASE_FIXTURE(session_fixture, "session writes the report after 7 "
                                   "orchestrator calls without generate_report") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"think_tool", {{"reasoning", "Still thinking."}}}})));
  rules.push_back(rule(final_marker, {{"text", "A report without sources."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  CHECK(failed_without_sources(r)); // only thoughts, no source
  CHECK(requests_with(server, orchestrator_marker) == 7);
  CHECK(requests_with(server, final_marker) == 1);
  CHECK(r.sources.empty());
}

TEST_CASE_FIXTURE(session_fixture, "session runs every agent call of a turn, "
                                   "at most the configured number at once") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(5)));
  auto r = run_scripted(server);
  REQUIRE(r.status == actors::session_status::report);
  auto ts = types();
  // Calls beyond the limit waited for a free slot and ran (with one slot
  // fewer than calls, half the plan used to be skipped).
  CHECK(count(ts, "research_agent_start") == 5);
  {
    std::lock_guard<std::mutex> guard{mtx};
    // An agent runs from its start packet to its cited documents.
    std::set<int> running;
    size_t most = 0;
    std::set<int> tabs;
    for (const auto& p : packets) {
      if (p.type() == "top_level_branching")
        CHECK(p.obj["num_parallel_branches"] == 5);
      if (p.type() == "research_agent_start") {
        running.insert(p.where.tab_index);
        tabs.insert(p.where.tab_index);
        most = std::max(most, running.size());
      } else if (p.type() == "intermediate_report_cited_docs") {
        running.erase(p.where.tab_index);
      }
    }
    CHECK(tabs.size() == 5);
    CHECK(most >= 1);
    CHECK(most <= 3);
  }
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  int results = 0;
  for (const auto& m : orch[1]["messages"])
    if (m["role"] == "tool") {
      ++results;
      CHECK(m["content"].get<std::string>().find("Not run") == std::string::npos);
      CHECK(m["content"].get<std::string>().find("failed") == std::string::npos);
    }
  CHECK(results == 5);
}

TEST_CASE_FIXTURE(session_fixture, "session starts no waiting agent once the "
                                   "deadline is near and answers it as not run") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "A slow task."}}},
                              {"research_agent", {{"task", "A waiting task."}}},
                              {"research_agent", {{"task", "Another waiting task."}}}}),
                       1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  auto slow = rule(agent_marker, calls({{"generate_report", nlohmann::json::object()}}));
  slow["latency_ms"] = 120000;
  rules.push_back(slow);
  rules.push_back(rule(final_marker, {{"text", "Report from what was found."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = scripted_spec();
  spec.max_parallel_agents = 1;
  spec.deadline = std::chrono::seconds{3};
  spec.final_report_timeout = std::chrono::seconds{10};
  auto r = run_scripted(server, spec);
  CAPTURE(r.failure);
  REQUIRE(failed_without_sources(r)); // the only agent that ran found nothing
  auto ts = types();
  // The first agent held the only slot until the deadline; the others never
  // started.
  CHECK(count(ts, "research_agent_start") == 1);
  size_t waiting = 0;
  for (const auto& n : r.notices)
    if (n.find("waiting for a free slot") != std::string::npos)
      ++waiting;
  CHECK(waiting == 2);
}

TEST_CASE_FIXTURE(session_fixture, "session ends research at the deadline and "
                                   "still writes the report") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  // A fast agent that reads the corpus, and a slow one the deadline stops.
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "A slow task."}}},
                              {"research_agent", {{"task", "Explain defrost cycles."}}}}),
                       1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  nlohmann::json slow{{"match",
                       {{"system_contains", agent_marker}, {"last_user_contains", "A slow task."}}},
                      {"respond", calls({{"generate_report", nlohmann::json::object()}})},
                      {"latency_ms", 120000}};
  rules.push_back(slow);
  for (auto& x : agent_rules())
    rules.push_back(x);
  rules.push_back(rule(final_marker, {{"text", "Report from what was found."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = scripted_spec();
  spec.deadline = std::chrono::seconds{2};
  spec.final_report_timeout = std::chrono::seconds{10};
  auto start = std::chrono::steady_clock::now();
  auto r = run_scripted(server, spec);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(r.status == actors::session_status::report);
  CHECK(r.report == "Report from what was found.");
  // Bounded by the deadline plus the report's budget, far below the agent's
  // 120 s model call.
  CHECK(took < std::chrono::seconds{2 + 10 + 20});
  CHECK(std::find(r.notices.begin(), r.notices.end(), "the research deadline was reached")
        != r.notices.end());
  CHECK(count(types(), "notice") >= 1);
}

TEST_CASE_FIXTURE(session_fixture, "session asks clarifying questions only "
                                   "when clarification is on") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(clarify_marker, {{"text", "1. Which country do you mean?"}}));
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(rule(final_marker, {{"text", "Short report."}}));
  REQUIRE_FALSE(server.script(rules));
  auto model = llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}});
  auto spec = scripted_spec();
  spec.clarify = true;
  auto asked = run(spec, model, corpus_tools());
  CHECK(asked.status == actors::session_status::clarification);
  CHECK(asked.questions == "1. Which country do you mean?");
  CHECK(requests_with(server, plan_marker) == 0);
  auto ts = types();
  CHECK(count(ts, "clarification") == 1);
  CHECK(ts.back() == "stop");
  spec.clarify = false;
  auto direct = run(spec, model, corpus_tools());
  CHECK(failed_without_sources(direct)); // researched, not asked; found nothing
  CHECK(requests_with(server, clarify_marker) == 1);
}

TEST_CASE_FIXTURE(session_fixture, "session answers a think call and a "
                                   "malformed agent call in one response") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(rule(orchestrator_marker,
                       {{"tool_calls",
                         {{{"name", "think_tool"}, {"arguments", {{"reasoning", "Plan it."}}}},
                          {{"name", "research_agent"}, {"arguments", nlohmann::json::object()}}}}},
                       1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(rule(final_marker, {{"text", "Short."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  CHECK(failed_without_sources(r)); // no agent ran
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  std::vector<std::string> results;
  for (const auto& m : orch[1]["messages"])
    if (m["role"] == "tool")
      results.push_back(m["content"].get<std::string>());
  REQUIRE(results.size() == 2);
  CHECK(results[0] == "Acknowledged, please continue.");
  CHECK(results[1].find("needs a 'task' argument") != std::string::npos);
  CHECK(count(types(), "research_agent_start") == 0);
}

TEST_CASE_FIXTURE(session_fixture, "session gives later agents a digest of "
                                   "what earlier agents found") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Cold\n2. Defrost"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Research the cold."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Research defrosting."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  for (auto& x : agent_rules())
    rules.push_back(x);
  rules.push_back(rule(final_marker, {{"text", "Done [1]."}}));
  REQUIRE_FALSE(server.script(rules));
  auto r = run_scripted(server);
  REQUIRE(r.status == actors::session_status::report);
  auto agents = requests_of(server, agent_marker);
  std::string first_system;
  std::string second_system;
  bool saw_first = false;
  bool saw_second = false;
  for (const auto& req : agents) {
    auto system = req["messages"][0]["content"].get<std::string>();
    auto task = req["messages"][1]["content"].get<std::string>();
    // The task is the orchestrator's task alone: it becomes search queries.
    if (task.rfind("Research the cold.", 0) == 0) {
      CHECK(task == "Research the cold.");
      if (!saw_first)
        first_system = system;
      saw_first = true;
    }
    if (task.rfind("Research defrosting.", 0) == 0) {
      CHECK(task == "Research defrosting.");
      if (!saw_second)
        second_system = system;
      saw_second = true;
    }
  }
  REQUIRE(saw_first);
  REQUIRE(saw_second);
  CHECK(first_system.find("Earlier research agents already found") == std::string::npos);
  CHECK(second_system.find("Earlier research agents already found") != std::string::npos);
  CHECK(second_system.find("- Research the cold.: Heat pump efficiency falls")
        != std::string::npos);
  CHECK(second_system.find("[1]") == std::string::npos); // markers stripped
  // The packets show the task alone.
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& p : packets)
    if (p.type() == "research_agent_start")
      CHECK(p.obj["research_task"].get<std::string>().find("Earlier") == std::string::npos);
}

namespace {

// Runs a scripted session and sends it `stop_atom` (what SIGINT does) once
// the fake server has received `n` requests; returns the result and how long
// the session took after the stop.
std::pair<actors::session_result, std::chrono::steady_clock::duration>
run_and_stop(session_fixture& f, test::fake_llm_server& server, actors::session_spec spec,
             size_t n) {
  auto em = f.emitter(spec.session_id);
  caf::scoped_actor self{f.rt->system()};
  auto llm = f.llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}});
  actors::session_models models{llm, llm, llm, llm, llm};
  auto session = actors::spawn_research_session(
    f.rt->system(), std::move(spec), models, f.corpus_tools(), em, f.prompts,
    caf::actor_cast<actors::session_requester_actor>(self));
  REQUIRE(server.wait_for_requests(n, std::chrono::seconds{30}));
  auto stopped = std::chrono::steady_clock::now();
  self->send(session, actors::stop_atom::value);
  actors::session_result out;
  self->receive([&](actors::session_done_atom, actors::session_result& r) { out = std::move(r); },
                caf::after(std::chrono::seconds{60}) >>
                  [&] { FAIL("the session never finished"); });
  auto took = std::chrono::steady_clock::now() - stopped;
  f.drain(self, em);
  return {std::move(out), took};
}

} // namespace

TEST_CASE_FIXTURE(session_fixture, "the deadline cancels a planning call in flight") {
  test::fake_llm_server server;
  auto slow = rule(plan_marker, {{"text", "1. One step"}});
  slow["latency_ms"] = 120000;
  REQUIRE_FALSE(server.script(nlohmann::json::array({slow})));
  auto spec = scripted_spec();
  spec.deadline = std::chrono::seconds{2};
  spec.final_report_timeout = std::chrono::seconds{2};
  auto start = std::chrono::steady_clock::now();
  auto r = run_scripted(server, spec);
  auto took = std::chrono::steady_clock::now() - start;
  CAPTURE(r.failure);
  // Nothing was found before the deadline: a failure that says so, not a
  // report of "No findings".
  REQUIRE(failed_without_sources(r));
  CHECK_FALSE(r.interrupted);
  CHECK(r.sources.empty());
  CHECK(r.failure.find("the research deadline was reached") != std::string::npos);
  // Far below the planning call's 120 s.
  CHECK(took < std::chrono::seconds{30});
  CHECK(std::find(r.notices.begin(), r.notices.end(), "the research deadline was reached")
        != r.notices.end());
}

TEST_CASE_FIXTURE(session_fixture, "a stop during planning ends the session at once, "
                                   "marked as interrupted") {
  test::fake_llm_server server;
  auto slow = rule(plan_marker, {{"text", "1. One step"}});
  slow["latency_ms"] = 120000;
  REQUIRE_FALSE(server.script(nlohmann::json::array({slow})));
  auto r_took = run_and_stop(*this, server, scripted_spec(), 1);
  auto& r = r_took.first;
  auto& took = r_took.second;
  CHECK(r.status == actors::session_status::failed);
  CHECK(r.interrupted);
  CHECK(took < std::chrono::seconds{20});
  CHECK(server.request_count() == 1);
}

TEST_CASE_FIXTURE(session_fixture, "a stop while agents run starts nothing new and "
                                   "makes no further model call") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step\n2. Another"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "A slow task."}}}})));
  auto slow = rule(agent_marker, calls({{"generate_report", nlohmann::json::object()}}));
  slow["latency_ms"] = 120000;
  rules.push_back(slow);
  rules.push_back(rule(final_marker, {{"text", "A report nobody asked for."}}));
  REQUIRE_FALSE(server.script(rules));
  // Plan, orchestrator, the agent's first step.
  auto r_took = run_and_stop(*this, server, scripted_spec(), 3);
  auto& r = r_took.first;
  auto& took = r_took.second;
  CAPTURE(r.failure);
  CHECK(r.interrupted);
  CHECK(took < std::chrono::seconds{20});
  REQUIRE(r.status == actors::session_status::report);
  CHECK(r.report.find("A report nobody asked for") == std::string::npos);
  CHECK(requests_with(server, final_marker) == 0);
  CHECK(requests_with(server, orchestrator_marker) == 1);
  CHECK(std::find(r.notices.begin(), r.notices.end(), "the research was interrupted")
        != r.notices.end());
}

} // namespace session_test
