// The reflective strategy in process with real plugins: scripted runs on the
// fake LLM server (CONTINUE through every step, an ADJUST that keeps the
// completed steps, refused early COMPLETEs at each depth, the plan-iteration
// limit, a structured answer repaired once and a step that fails, web_search
// falling back to a direct answer, a simple question answered directly) and
// the extractive provider over the example corpus at every depth.

#include "research_fixture.hpp"

#include "quarry/actors/session.hpp"

#include "support/fake_llm_server.hpp"

#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

namespace reflective_session_test {

using namespace quarry;
using test::count;
using nlohmann::json;

namespace {

constexpr const char* coordinator = "You are the coordinator of a research assistant";
constexpr const char* queries_writer = "You write web search queries for a research assistant";
constexpr const char* planner = "You are the planner of a research assistant";
constexpr const char* observer = "You are a researcher working on one step";
constexpr const char* reflector = "You are the reflector of a research assistant";
constexpr const char* synthesizer = "You write the final answer of a research task";
constexpr const char* simple_answer = "You answer the user's question directly";
constexpr const char* react_agent = "careful, precise research agent";
constexpr const char* agent_report = "finished its research";

json rule(const char* marker, json respond, int times = 0) {
  json r{{"match", {{"system_contains", marker}}}, {"respond", respond}};
  if (times > 0)
    r["match"]["times"] = times;
  return r;
}

json call(const std::string& name, const json& args) {
  return {{"tool_calls", {{{"name", name}, {"arguments", args.dump()}}}}};
}

json classify(const std::string& complexity, const std::string& depth = "light") {
  return call("classify_question", {{"complexity", complexity},
                                    {"is_ambiguous", false},
                                    {"recommended_depth", depth},
                                    {"reasoning", "Scripted."}});
}

json plan_of(std::vector<std::string> titles) {
  json steps = json::array();
  for (const auto& t : titles)
    steps.push_back({{"title", t}, {"description", t + " in detail."}, {"needs_search", true}});
  return call("write_plan",
              {{"title", "Cold weather"}, {"thought", "Scripted."}, {"steps", steps}});
}

json reflect(const std::string& decision, std::vector<std::string> changes = {}) {
  return call("reflect", {{"decision", decision},
                          {"reasoning", "Scripted " + decision + "."},
                          {"suggested_changes", changes}});
}

// The parts every scripted run shares: queries, the classic researcher's
// observation, the synthesis.
void common_rules(json& rules) {
  rules.push_back(rule(queries_writer,
                       call("search_queries", {{"queries", {"heat pump defrost", "cold coil"}}})));
  rules.push_back(rule(observer, {{"text", "Defrost cycles remove frost from the coil [1]."}}));
  rules.push_back(rule(synthesizer, {{"text", "Heat pumps defrost their coils [1]."}}));
}

struct outcome {
  actors::session_result result;
  std::vector<json> packets;

  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (const auto& p : packets)
      if (p["type"] == type)
        out.push_back(p);
    return out;
  }
};

struct reflective_fixture : test::research_fixture {
  outcome run(actors::session_spec spec, actors::llm_provider_actor llm,
              std::chrono::seconds wait = std::chrono::seconds{120}) {
    return run_with(std::move(spec), std::move(llm), corpus_tools(), wait);
  }

  /// The session with `tools` instead of the example corpus.
  outcome run_with(actors::session_spec spec, actors::llm_provider_actor llm,
                   actors::tool_set tools, std::chrono::seconds wait = std::chrono::seconds{120}) {
    spec.strategy = actors::research_strategy::reflective;
    auto em = emitter(spec.session_id);
    caf::scoped_actor self{rt->system()};
    actors::session_models models{llm, llm, llm, llm, llm};
    actors::spawn_research_session(rt->system(), std::move(spec), models, std::move(tools), em,
                                   prompts, caf::actor_cast<actors::session_requester_actor>(self));
    outcome out;
    self->receive([&](actors::session_done_atom,
                      actors::session_result& r) { out.result = std::move(r); },
                  caf::after(wait) >> [&] { FAIL("the session never finished"); });
    drain(self, em);
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& p : packets)
      out.packets.push_back(p.obj);
    return out;
  }

  outcome run_scripted(test::fake_llm_server& server, actors::session_spec spec) {
    return run(std::move(spec),
               llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}));
  }
};

actors::session_spec reflective_spec(core::reflective::depth d = core::reflective::depth::light) {
  actors::session_spec spec;
  spec.session_id = "reflective";
  spec.question = "How do heat pumps cope with cold weather?";
  spec.clarify = false;
  spec.current_datetime = "Sunday November 22, 2026";
  spec.reflective.depth = d;
  return spec;
}

size_t requests_to(const test::fake_llm_server& server, const char* marker) {
  size_t n = 0;
  for (const auto& r : server.requests())
    if (r.body.is_object() && r.body.contains("messages")
        && r.body["messages"][0]["content"].get<std::string>().find(marker) != std::string::npos)
      ++n;
  return n;
}

std::vector<std::string> statuses(const json& plan_packet) {
  std::vector<std::string> out;
  for (const auto& s : plan_packet["plan"]["steps"])
    out.push_back(s["status"]);
  return out;
}

} // namespace

TEST_CASE_FIXTURE(reflective_fixture, "reflective: CONTINUE through every step, then the "
                                      "synthesis with the session's citations") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Efficiency", "Defrost", "Backup heat"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto o = run_scripted(server, reflective_spec());
  CAPTURE(o.result.failure);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(o.of_type("question_classified").size() == 1);
  CHECK(o.of_type("question_classified")[0]["depth"] == "light");
  CHECK(o.of_type("plan_step_start").size() == 3);
  auto ends = o.of_type("plan_step_end");
  REQUIRE(ends.size() == 3);
  for (const auto& e : ends)
    CHECK(e["status"] == "completed");
  // The first step found the sources; the later ones found nothing new.
  CHECK(ends[0]["new_sources"].get<int>() >= 1);
  // A reflection after every step but the last (its CONTINUE ends the plan).
  auto reflections = o.of_type("reflection");
  REQUIRE(reflections.size() == 3);
  CHECK(reflections[2]["taken"] == "COMPLETE");
  // The plan as a checklist: the last one has every step completed.
  auto plans = o.of_type("reflective_plan");
  REQUIRE(plans.size() >= 7);
  CHECK(statuses(plans.back()) == std::vector<std::string>{"completed", "completed", "completed"});
  CHECK(statuses(plans[1])[0] == "in_progress");
  // The report cites the session's documents, and the Sources list them.
  CHECK(o.result.report.find("[[1]](") != std::string::npos);
  REQUIRE(o.result.sources.size() == 1);
  CHECK(o.of_type("citation_info").size() == 1);
  CHECK(o.packets.back()["type"] == "stop");
  CHECK(requests_to(server, planner) == 1);
  CHECK(requests_to(server, reflector) == 3);
  // The synthesizer got every observation with its global marker.
  for (const auto& r : server.requests())
    if (r.raw_body.find(synthesizer) != std::string::npos)
      CHECK(r.raw_body.find("## Backup heat") != std::string::npos);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: ADJUST keeps the two completed steps "
                                      "unchanged and adds only new ones") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("complex", "medium")));
  rules.push_back(rule(planner, plan_of({"Efficiency", "Defrost", "Noise"}), 1));
  rules.push_back(rule(planner, plan_of({"Costs", "Installers"})));
  // CONTINUE after the first step, ADJUST after the second, then CONTINUE.
  rules.push_back(rule(reflector, reflect("CONTINUE"), 1));
  rules.push_back(rule(reflector, reflect("ADJUST", {"Costs"}), 1));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  // Medium depth: the ReAct agent researches each step.
  json after_search{{"match",
                     {{"system_contains", react_agent}, {"message_contains", "\"document\""}}},
                    {"respond", call("generate_report", json::object())}};
  rules.push_back(after_search);
  rules.push_back(rule(react_agent, call("internal_search", {{"queries", {"heat pump cold"}}})));
  rules.push_back(rule(agent_report, {{"text", "Cold air lowers the output [1]."}}));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto o = run_scripted(server, reflective_spec(core::reflective::depth::medium));
  CAPTURE(o.result.failure);
  REQUIRE(o.result.status == actors::session_status::report);
  // The replan kept s1.1 and s1.2 with their observations, dropped the
  // pending "Noise" step's place to the new ones.
  auto plans = o.of_type("reflective_plan");
  json replan;
  for (const auto& p : plans)
    if (p["plan"]["iteration"] == 2) {
      replan = p;
      break;
    }
  REQUIRE(replan.is_object());
  auto steps = replan["plan"]["steps"];
  REQUIRE(steps.size() >= 4);
  CHECK(steps[0]["id"] == "s1.1");
  CHECK(steps[0]["status"] == "completed");
  CHECK(steps[1]["id"] == "s1.2");
  CHECK(steps[1]["status"] == "completed");
  CHECK(steps[0]["observation"].get<std::string>().find("Cold air lowers the output") == 0);
  std::set<std::string> titles;
  for (const auto& s : steps)
    titles.insert(s["title"]);
  CHECK(titles.count("Costs") == 1);
  CHECK(titles.count("Installers") == 1);
  // The planner was told what was completed and what the reflector wants.
  REQUIRE(requests_to(server, planner) == 2);
  for (const auto& r : server.requests())
    if (r.raw_body.find(planner) != std::string::npos
        && r.raw_body.find("Cold air lowers the output") != std::string::npos)
      CHECK(r.raw_body.find("Costs") != std::string::npos);
  CHECK(o.of_type("research_agent_start").size() >= 4);
  CHECK(o.packets.back()["type"] == "stop");
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: a COMPLETE before the depth's minimum is "
                                      "refused at each depth, visibly") {
  for (auto d : {core::reflective::depth::light, core::reflective::depth::medium,
                 core::reflective::depth::extended}) {
    auto profile = core::reflective::profile_for(d);
    CAPTURE(core::reflective::to_string(d));
    test::fake_llm_server server;
    auto rules = json::array();
    rules.push_back(rule(coordinator, classify("moderate")));
    std::vector<std::string> titles;
    for (int i = 0; i < profile.min_steps; ++i)
      titles.push_back("Step " + std::to_string(i + 1));
    rules.push_back(rule(planner, plan_of(titles)));
    rules.push_back(rule(reflector, reflect("COMPLETE")));
    json after_search{{"match",
                       {{"system_contains", react_agent}, {"message_contains", "\"document\""}}},
                      {"respond", call("generate_report", json::object())}};
    rules.push_back(after_search);
    rules.push_back(rule(react_agent, call("internal_search", {{"queries", {"heat pump"}}})));
    rules.push_back(rule(agent_report, {{"text", "Heat pumps move heat [1]."}}));
    common_rules(rules);
    REQUIRE_FALSE(server.script(rules));
    packets.clear();
    auto o = run_scripted(server, reflective_spec(d));
    REQUIRE(o.result.status == actors::session_status::report);
    auto reflections = o.of_type("reflection");
    REQUIRE(reflections.size() == static_cast<size_t>(profile.min_steps));
    // Every COMPLETE before the minimum was refused and taken as CONTINUE.
    for (int i = 0; i + 1 < profile.min_steps; ++i) {
      CHECK(reflections[i]["decision"] == "COMPLETE");
      CHECK(reflections[i]["refused"] == true);
      CHECK(reflections[i]["taken"] == "CONTINUE");
      CHECK(reflections[i]["why"].get<std::string>().find("COMPLETE refused") == 0);
    }
    CHECK(reflections.back()["refused"] == false);
    CHECK(reflections.back()["taken"] == "COMPLETE");
    CHECK(o.of_type("plan_step_end").size() == static_cast<size_t>(profile.min_steps));
  }
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: ADJUST is refused at the plan-iteration "
                                      "limit") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"One"}), 1));
  rules.push_back(rule(planner, plan_of({"Two"})));
  rules.push_back(rule(reflector, reflect("ADJUST", {"More"})));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto spec = reflective_spec(core::reflective::depth::light);
  spec.reflective.max_plan_iterations = 2;
  auto o = run_scripted(server, spec);
  REQUIRE(o.result.status == actors::session_status::report);
  // Plan 1, one ADJUST to plan 2, then the limit.
  CHECK(requests_to(server, planner) == 2);
  auto reflections = o.of_type("reflection");
  REQUIRE(reflections.size() == 2);
  CHECK(reflections[0]["taken"] == "ADJUST");
  CHECK(reflections[1]["refused"] == true);
  CHECK(reflections[1]["why"].get<std::string>().find("plan 2 of at most 2") != std::string::npos);
  CHECK(o.result.report.find("defrost") != std::string::npos);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: an unusable structured answer is repaired "
                                      "once; a second one fails that step, not the session") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  // The plan: broken JSON, then a usable repair.
  rules.push_back(
    rule(planner, {{"tool_calls", {{{"name", "write_plan"}, {"arguments", "{\"steps\": ["}}}}}, 1));
  rules.push_back(rule(planner, plan_of({"Efficiency", "Defrost"})));
  // The first step's queries: never usable (the step searches its title).
  json unusable{{"match",
                 {{"system_contains", queries_writer},
                  {"message_contains", "Efficiency in detail"},
                  {"times", 2}}},
                {"respond", {{"text", "I would search for things."}}}};
  rules.push_back(unusable);
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto o = run_scripted(server, reflective_spec());
  CAPTURE(o.result.failure);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(requests_to(server, planner) == 2);
  // The repair request carries the problem.
  bool repaired = false;
  for (const auto& r : server.requests())
    if (r.raw_body.find(planner) != std::string::npos
        && r.raw_body.find("write_plan") != std::string::npos && r.body["messages"].size() > 2)
      repaired = true;
  CHECK(repaired);
  CHECK(o.of_type("plan_step_end").size() == 2);
  // The query writer failed twice for the first step, which then searched
  // its title; the notices say so.
  size_t fallback = 0;
  for (const auto& n : o.result.notices)
    if (n.find("No search queries for this step") != std::string::npos)
      ++fallback;
  CHECK(fallback == 1);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: a research step whose model fails is "
                                      "skipped and the research goes on") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Efficiency", "Defrost"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  json broken{{"match", {{"system_contains", observer}, {"times", 1}}},
              {"error", {{"status", 500}, {"body", "boom"}}}};
  rules.push_back(broken);
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto o = run_scripted(server, reflective_spec());
  REQUIRE(o.result.status == actors::session_status::report);
  auto ends = o.of_type("plan_step_end");
  REQUIRE(ends.size() == 2);
  CHECK(ends[0]["status"] == "skipped");
  CHECK(ends[0].contains("failure"));
  CHECK(ends[1]["status"] == "completed");
  CHECK(o.packets.back()["type"] == "stop");
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: web_search mode falls back to a direct "
                                      "answer when its step is too slow") {
  test::fake_llm_server server;
  auto rules = json::array();
  auto slow = rule(queries_writer, call("search_queries", {{"queries", {"x"}}}));
  slow["latency_ms"] = 60000;
  rules.push_back(slow);
  rules.push_back(rule(simple_answer, {{"text", "Heat pumps keep working in the cold."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = reflective_spec();
  spec.reflective.mode = core::reflective::query_mode::web_search;
  spec.reflective.web_search_fallback = std::chrono::milliseconds{600};
  auto o = run_scripted(server, spec);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(o.result.report.find("keep working in the cold") != std::string::npos);
  CHECK(requests_to(server, coordinator) == 0);
  CHECK(requests_to(server, simple_answer) == 1);
  bool said = false;
  for (const auto& n : o.result.notices)
    said = said || n.find("The web search took longer than 600 ms") != std::string::npos;
  CHECK(said);
}

// The background investigator's queries: the searches of the turn before
// the first plan.
std::vector<std::string> background_queries(const outcome& o) {
  for (const auto& p : o.packets)
    if (p["type"] == "search_tool_queries_delta")
      return p["queries"].get<std::vector<std::string>>();
  return {};
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the background investigator is asked for 2 "
                                      "to 3 queries; one is sent back once, more are cut") {
  auto background_rules = [](json repaired) {
    auto rules = json::array();
    rules.push_back(rule(coordinator, classify("moderate")));
    // The first queries request is the background investigator's.
    rules.push_back(rule(queries_writer, call("search_queries", {{"queries", {"heat pump"}}}), 1));
    json repair{{"match",
                 {{"system_contains", queries_writer},
                  {"last_user_contains", "2 to 3 different search queries"},
                  {"times", 1}}},
                {"respond", call("search_queries", {{"queries", repaired}})}};
    rules.push_back(repair);
    rules.push_back(rule(planner, plan_of({"Defrost"})));
    rules.push_back(rule(reflector, reflect("CONTINUE")));
    common_rules(rules);
    return rules;
  };
  SUBCASE("a repair with five: the first three are searched") {
    test::fake_llm_server server;
    REQUIRE_FALSE(server.script(background_rules(
      {"heat pump cold", "defrost cycle", "backup heater", "COP curve", "noise"})));
    auto o = run_scripted(server, reflective_spec());
    CAPTURE(o.result.failure);
    REQUIRE(o.result.status == actors::session_status::report);
    CHECK(background_queries(o)
          == std::vector<std::string>{"heat pump cold", "defrost cycle", "backup heater"});
    auto reqs = server.requests();
    REQUIRE(reqs.size() >= 3);
    // The first request asks for 2 to 3 in its prompt and its tool.
    const auto& first = reqs[1];
    REQUIRE(first.raw_body.find(queries_writer) != std::string::npos);
    CHECK(first.raw_body.find("Write 2 to 3 focused search queries") != std::string::npos);
    const auto& tool = first.body["tools"][0]["function"]["parameters"]["properties"]["queries"];
    CHECK(tool["minItems"] == 2);
    CHECK(tool["maxItems"] == 3);
    // The second is the repair, which says why.
    CHECK(reqs[2].raw_body.find("the answer had 1.") != std::string::npos);
  }
  SUBCASE("a repair with one again: that one is searched, and a notice says so") {
    test::fake_llm_server server;
    REQUIRE_FALSE(server.script(background_rules({"heat pump cold"})));
    auto o = run_scripted(server, reflective_spec());
    CAPTURE(o.result.failure);
    REQUIRE(o.result.status == actors::session_status::report);
    CHECK(background_queries(o) == std::vector<std::string>{"heat pump cold"});
    bool said = false;
    for (const auto& n : o.result.notices)
      said = said || n.find("only 1 query of the 2-3 asked for") != std::string::npos;
    CHECK(said);
  }
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: a simple question is answered directly") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("simple")));
  rules.push_back(rule(simple_answer, {{"text", "A heat pump moves heat from outside in."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = reflective_spec(core::reflective::depth::automatic);
  spec.question = "What does a heat pump do?";
  auto o = run_scripted(server, spec);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(o.result.report == "A heat pump moves heat from outside in.");
  CHECK(o.of_type("question_classified")[0]["mode"] == "simple");
  CHECK(requests_to(server, planner) == 0);
  CHECK(requests_to(server, queries_writer) == 0);
  CHECK(o.of_type("plan_step_start").empty());
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the extractive provider runs the whole "
                                      "strategy over the example corpus at every depth") {
  for (auto d : {core::reflective::depth::light, core::reflective::depth::medium,
                 core::reflective::depth::extended}) {
    CAPTURE(core::reflective::to_string(d));
    packets.clear();
    auto spec = reflective_spec(d);
    spec.question = "Why does a heat pump's efficiency drop in cold weather, and what do "
                    "manufacturers do about it?";
    auto o = run(spec, llm("extractive", json::object()));
    CAPTURE(o.result.failure);
    REQUIRE(o.result.status == actors::session_status::report);
    auto profile = core::reflective::profile_for(d);
    auto ends = o.of_type("plan_step_end");
    CHECK(ends.size() >= static_cast<size_t>(profile.min_steps));
    CHECK(ends.size() <= static_cast<size_t>(profile.max_steps));
    REQUIRE_FALSE(o.result.sources.empty());
    // Every [[n]](url) resolves to a listed source.
    std::regex link{R"(\[\[(\d+)\]\]\(([^)]*)\))"};
    size_t links = 0;
    for (auto it = std::sregex_iterator(o.result.report.begin(), o.result.report.end(), link);
         it != std::sregex_iterator(); ++it) {
      ++links;
      auto n = std::stoi((*it)[1]);
      auto found = std::find_if(o.result.sources.begin(), o.result.sources.end(),
                                [&](const actors::report_source& s) { return s.number == n; });
      REQUIRE(found != o.result.sources.end());
      CHECK(found->url == (*it)[2].str());
    }
    CHECK(links >= 3);
  }
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the report is verified claim by claim, as "
                                      "the orchestrator's is") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Defrost"})));
  rules.push_back(rule(reflector, reflect("COMPLETE")));
  rules.push_back(rule(queries_writer,
                       call("search_queries", {{"queries", {"heat pump defrost", "cold coil"}}})));
  rules.push_back(rule(observer, {{"text", "Defrost cycles remove frost from the coil [1]."}}));
  rules.push_back(
    rule(synthesizer, {{"text", "Heat pumps are made of cheese and chocolate [1]."}}));
  REQUIRE_FALSE(server.script(rules));
  auto spec = reflective_spec();
  spec.verify = true;
  // No judge model: the lexical judge decides.
  auto o = run_scripted(server, spec);
  REQUIRE(o.result.status == actors::session_status::report);
  auto claims = o.of_type("claim_verified");
  REQUIRE(claims.size() == 1);
  CHECK(claims[0]["verdict"] != "supported");
  auto summary = o.of_type("verification_summary");
  REQUIRE(summary.size() == 1);
  CHECK(summary[0]["claims"] == 1);
  CHECK(o.result.report.find("*(unverified)*") != std::string::npos);
  CHECK(o.result.report.find("## Verification") != std::string::npos);
  CHECK(o.packets.back()["type"] == "stop");
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the structured calls work with the "
                                      "Anthropic provider too") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Efficiency", "Defrost"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto o = run(reflective_spec(), llm("anthropic", {{"base_url", server.base_url_anthropic()},
                                                    {"model", "claude-test"},
                                                    {"api_key", "k"}}));
  CAPTURE(o.result.failure);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(o.of_type("question_classified").size() == 1);
  CHECK(o.of_type("plan_step_end").size() == 2);
  CHECK(o.of_type("reflection").size() == 2);
  CHECK(o.result.report.find("[[1]](") != std::string::npos);
  // Every structured call asked for its one tool.
  size_t forced = 0;
  for (const auto& r : server.requests())
    if (r.body.is_object() && r.body.contains("tool_choice")) {
      CHECK(r.body["tool_choice"]["type"] == "any");
      ++forced;
    }
  CHECK(forced >= 5);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: a synthesis cut by the output limit is "
                                      "continued, as the orchestrator's report is (the frame)") {
  test::fake_llm_server server;
  auto rules = json::array();
  // The continuation first: asked to go on where the synthesis stopped.
  rules.push_back({{"match",
                    {{"system_contains", synthesizer},
                     {"last_user_contains", "cut off by the output token limit"}}},
                   {"respond", {{"text", "coils [1]. It melts the frost."}}}});
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Defrost"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  rules.push_back(rule(queries_writer,
                       call("search_queries", {{"queries", {"heat pump defrost", "cold coil"}}})));
  rules.push_back(rule(observer, {{"text", "Defrost cycles remove frost from the coil [1]."}}));
  rules.push_back(
    rule(synthesizer, {{"text", "Heat pumps defrost their "}, {"finish_reason", "length"}}));
  REQUIRE_FALSE(server.script(rules));
  auto o = run_scripted(server, reflective_spec());
  CAPTURE(o.result.failure);
  REQUIRE(o.result.status == actors::session_status::report);
  CHECK(o.result.report.find("Heat pumps defrost their coils [[1]](") != std::string::npos);
  CHECK(o.result.report.find("It melts the frost.") != std::string::npos);
  CHECK_FALSE(o.result.truncated);
  CHECK(requests_to(server, synthesizer) == 2);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the classic researcher's failing tool is "
                                      "said as tool_failed and answered, as an agent's is") {
  // A search tool whose backend refuses every request.
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Defrost"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  auto made = registry->make_tool("searxng", {{"base_url", "http://127.0.0.1:1"}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  auto hdl = actors::spawn_tool_provider(rt->system(), tool,
                                         actors::tool_actor_settings::of("web_search", {}));
  rt->add_stoppable(hdl);
  actors::tool_set tools;
  tools.tools["web_search"] = {hdl, tool->definition(), sdk::tool_kind::web_search};
  auto o = run_with(reflective_spec(),
                    llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}), tools);
  std::vector<json> failed;
  for (const auto& p : o.packets)
    if (p["type"] == "error" && p.value("code", "") == "tool_failed")
      failed.push_back(p);
  CHECK_FALSE(failed.empty());
  // The observation was asked for with the failure as the tool's answer.
  bool told = false;
  for (const auto& r : server.requests())
    if (r.raw_body.find(observer) != std::string::npos
        && r.raw_body.find("\"role\":\"tool\"") != std::string::npos)
      told = true;
  CHECK(told);
  // Nothing was read: the research fails as one that read no source.
  CHECK(o.result.status == actors::session_status::failed);
}

TEST_CASE_FIXTURE(reflective_fixture, "reflective: the classic researcher searches the files "
                                      "attached to the research besides its search tool") {
  test::fake_llm_server server;
  auto rules = json::array();
  rules.push_back(rule(coordinator, classify("moderate")));
  rules.push_back(rule(planner, plan_of({"Ground loop"})));
  rules.push_back(rule(reflector, reflect("CONTINUE")));
  common_rules(rules);
  REQUIRE_FALSE(server.script(rules));
  // The attached files: an index of their own, offered as session_files.
  auto folder = tmp.file("attached");
  std::filesystem::create_directories(folder);
  {
    std::ofstream out{folder + "/brightwater.md"};
    out << "# Brightwater ground loop\n\nThe Brightwater heat pump defrost loop was drilled to "
           "212 metres.\n";
  }
  auto db = tmp.file("attached.db");
  {
    auto opened = corpus::corpus_index::open(db);
    REQUIRE(opened.index);
    auto up = opened.index->update({folder});
    REQUIRE_FALSE(up.failure);
    REQUIRE(up.added == 1);
  }
  auto made = registry->make_tool("local_corpus", {{"db", db}, {"id_prefix", "upload"}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  auto hdl = actors::spawn_tool_provider(rt->system(), tool,
                                         actors::tool_actor_settings::of("session_files", {}));
  rt->add_stoppable(hdl);
  auto tools = corpus_tools();
  tools.tools["session_files"] = {hdl, tool->definition(), sdk::tool_kind::internal_search};
  auto o = run_with(reflective_spec(),
                    llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}), tools);
  REQUIRE(o.result.status == actors::session_status::report);
  // Both were searched with the step's queries: the corpus first (the main
  // search tool), then the attached files, whose document the observer read.
  bool told = false;
  for (const auto& r : server.requests())
    if (r.raw_body.find(observer) != std::string::npos
        && r.raw_body.find("212 metres") != std::string::npos
        && r.raw_body.find("\"name\":\"internal_search\"") != std::string::npos
        && r.raw_body.find("\"name\":\"session_files\"") != std::string::npos)
      told = true;
  CHECK(told);
}

} // namespace reflective_session_test
