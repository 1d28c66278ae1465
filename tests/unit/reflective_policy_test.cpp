// The reflective strategy's rules, enforced in code whatever the models
// answer: depths, structured outputs and their repair, completed steps kept
// on ADJUST, no COMPLETE before the minimum, the plan-iteration limit.

#include "quarry/core/reflective.hpp"
#include "quarry/core/reflective_requests.hpp"

#include <doctest/doctest.h>

namespace reflective_policy_test {

using namespace quarry;
using namespace quarry::core::reflective;
using nlohmann::json;

namespace {

plan_step done_step(std::string id, std::string title, std::string observation) {
  plan_step s;
  s.id = std::move(id);
  s.title = std::move(title);
  s.description = s.title;
  s.status = step_status::completed;
  s.observation = std::move(observation);
  return s;
}

plan_step pending_step(std::string id, std::string title) {
  plan_step s;
  s.id = std::move(id);
  s.title = std::move(title);
  s.description = s.title;
  return s;
}

json steps_json(int n) {
  json steps = json::array();
  for (int i = 1; i <= n; ++i)
    steps.push_back(
      {{"title", "Step " + std::to_string(i)}, {"description", "Find " + std::to_string(i)}});
  return steps;
}

reflection said(decision d) {
  reflection r;
  r.decision = d;
  r.reasoning = "because";
  return r;
}

} // namespace

TEST_CASE("reflective: names round-trip and unknown names are refused") {
  for (auto d : {depth::automatic, depth::light, depth::medium, depth::extended})
    CHECK(parse_depth(to_string(d)) == d);
  for (auto m : {query_mode::simple, query_mode::web_search, query_mode::deep_research})
    CHECK(parse_query_mode(to_string(m)) == m);
  for (auto d : {decision::continue_plan, decision::adjust, decision::complete})
    CHECK(parse_decision(to_string(d)) == d);
  CHECK(parse_decision(" complete ") == decision::complete);
  CHECK_FALSE(parse_decision("STOP").has_value());
  CHECK_FALSE(parse_depth("deep").has_value());
  CHECK_FALSE(parse_query_mode("").has_value());
  CHECK_FALSE(parse_complexity("hard").has_value());
}

TEST_CASE("reflective: step limits per depth, and auto resolved from complexity") {
  auto light = profile_for(depth::light);
  CHECK(light.min_steps == 1);
  CHECK(light.max_steps == 3);
  CHECK_FALSE(light.react);
  auto medium = profile_for(depth::medium);
  CHECK(medium.min_steps == 3);
  CHECK(medium.max_steps == 6);
  CHECK(medium.react);
  auto extended = profile_for(depth::extended, 4, 5);
  CHECK(extended.min_steps == 5);
  CHECK(extended.max_steps == 10);
  CHECK(extended.max_search_queries == 4);
  CHECK(extended.max_urls_to_crawl == 5);
  CHECK(resolve_depth(depth::automatic, complexity::simple) == depth::light);
  CHECK(resolve_depth(depth::automatic, complexity::moderate) == depth::medium);
  CHECK(resolve_depth(depth::automatic, complexity::complex) == depth::extended);
  CHECK(resolve_depth(depth::light, complexity::complex) == depth::light);
}

TEST_CASE("reflective: structured output is the one call to the named tool") {
  std::vector<sdk::tool_call> calls;
  auto none = structured_arguments(calls, "reflect");
  REQUIRE(std::holds_alternative<invalid_output>(none));
  CHECK(std::get<invalid_output>(none).problem.find("no call to reflect") != std::string::npos);
  calls.push_back({"c1", "web_search", R"({"queries": ["x"]})"});
  auto other = structured_arguments(calls, "reflect");
  REQUIRE(std::holds_alternative<invalid_output>(other));
  CHECK(std::get<invalid_output>(other).problem.find("web_search, not to reflect")
        != std::string::npos);
  calls.push_back({"c2", "reflect", R"({"decision": "COMPLETE", "reasoning": )"});
  auto broken = structured_arguments(calls, "reflect");
  CHECK(std::holds_alternative<invalid_output>(broken));
  calls.back().arguments = "```json\n{\"decision\": \"COMPLETE\", \"reasoning\": \"ok\"}\n```";
  auto fenced = structured_arguments(calls, "reflect");
  REQUIRE(std::holds_alternative<json>(fenced));
  CHECK(std::get<json>(fenced)["decision"] == "COMPLETE");
  auto msg = repair_message("reflect", "decision is required");
  CHECK(msg.find("reflect") != std::string::npos);
  CHECK(msg.find("decision is required") != std::string::npos);
}

TEST_CASE("reflective: the coordinator's classification") {
  auto ok = read_classification(
    {{"complexity", "Complex"},
     {"follow_up_type", "complex_follow_up"},
     {"is_ambiguous", true},
     {"clarifying_questions", {"Which region?", "", "Which year?", "Which model?", "Budget?"}},
     {"recommended_depth", "extended"},
     {"reasoning", "many parts"}},
    3);
  REQUIRE(std::holds_alternative<classification>(ok));
  auto c = std::get<classification>(ok);
  CHECK(c.complexity == complexity::complex);
  CHECK(c.follow_up_type == follow_up::complex_follow_up);
  CHECK(c.is_ambiguous);
  CHECK(c.clarifying_questions
        == std::vector<std::string>{"Which region?", "Which year?", "Which model?"});
  CHECK(c.recommended_depth == depth::extended);
  // Ambiguous without a question is not ambiguous.
  auto quiet = read_classification({{"complexity", "simple"}, {"is_ambiguous", "true"}}, 3);
  REQUIRE(std::holds_alternative<classification>(quiet));
  CHECK_FALSE(std::get<classification>(quiet).is_ambiguous);
  // No questions allowed: none kept, not ambiguous.
  auto none = read_classification(
    {{"complexity", "simple"}, {"is_ambiguous", true}, {"clarifying_questions", {"Why?"}}}, 0);
  REQUIRE(std::holds_alternative<classification>(none));
  CHECK(std::get<classification>(none).clarifying_questions.empty());
  auto bad = read_classification({{"complexity", "very"}}, 3);
  REQUIRE(std::holds_alternative<invalid_output>(bad));
  CHECK(std::get<invalid_output>(bad).problem.find("simple, moderate or complex")
        != std::string::npos);
  CHECK(std::holds_alternative<invalid_output>(read_classification(json::array(), 3)));
  CHECK(classify_tool(3).parameters["properties"].contains("clarifying_questions"));
}

TEST_CASE("reflective: search queries are trimmed, unique and bounded") {
  auto q = read_queries(
    {{"queries", {" heat pump COP ", "Heat pump cop", "", "defrost", 7, "cold climate", "fourth"}}},
    3);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(q));
  CHECK(std::get<std::vector<std::string>>(q)
        == std::vector<std::string>{"heat pump COP", "defrost", "cold climate"});
  // One string instead of a list is taken as one query.
  auto one = read_queries({{"queries", "heat pumps"}}, 3);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(one));
  CHECK(std::get<std::vector<std::string>>(one).size() == 1);
  auto long_one = read_queries({{"queries", {std::string(5000, 'q')}}}, 3);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(long_one));
  CHECK(std::get<std::vector<std::string>>(long_one)[0].size() == 400);
  CHECK(std::holds_alternative<invalid_output>(read_queries({{"queries", json::array()}}, 3)));
  CHECK(std::holds_alternative<invalid_output>(read_queries({{"q", {"x"}}}, 3)));
}

TEST_CASE("reflective: the background investigator's queries are 2 to 3, in the tool's schema "
          "and in what is read from the model") {
  auto tool = queries_tool(background_max_queries, background_min_queries);
  const auto& q = tool.parameters["properties"]["queries"];
  CHECK(q["minItems"] == 2);
  CHECK(q["maxItems"] == 3);
  CHECK(q["description"].get<std::string>().find("2 to 3") == 0);
  CHECK(query_count_text(3, 2) == "2 to 3");
  CHECK(query_count_text(2) == "at most 2");
  CHECK(query_count_text(3, 3) == "3");
  // The classic researcher's tool keeps its 1 to max.
  CHECK(queries_tool(2).parameters["properties"]["queries"]["minItems"] == 1);
  auto read = [](json queries) {
    return read_queries({{"queries", std::move(queries)}}, background_max_queries,
                        background_min_queries);
  };
  // One query, or two that are the same but for case, is too few.
  for (auto few : {json{"heat pump defrost"}, json{"heat pump COP", "Heat Pump cop", " "}}) {
    CAPTURE(few.dump());
    auto got = read(few);
    REQUIRE(std::holds_alternative<invalid_output>(got));
    CHECK(std::get<invalid_output>(got).problem.find("2 to 3 different search queries")
          != std::string::npos);
  }
  auto two = read({"heat pump COP", "defrost cycle"});
  REQUIRE(std::holds_alternative<std::vector<std::string>>(two));
  CHECK(std::get<std::vector<std::string>>(two).size() == 2);
  // Five are cut to the first three.
  auto five = read({"a b", "c d", "e f", "g h", "i j"});
  REQUIRE(std::holds_alternative<std::vector<std::string>>(five));
  CHECK(std::get<std::vector<std::string>>(five) == std::vector<std::string>{"a b", "c d", "e f"});
}

TEST_CASE("reflective: a plan needs the depth's minimum of steps, and code cuts it to the "
          "maximum") {
  auto medium = profile_for(depth::medium);
  auto first = room_for(nullptr, medium);
  CHECK(first.at_least == 3);
  CHECK(first.room == 6);
  auto short_plan = read_plan({{"title", "P"}, {"steps", steps_json(2)}}, first.at_least,
                              first.room);
  REQUIRE(std::holds_alternative<invalid_output>(short_plan));
  CHECK(std::get<invalid_output>(short_plan).problem.find("has 2 steps; it needs at least 3")
        != std::string::npos);
  auto no_title = read_plan({{"steps", {{{"description", "x"}}}}}, 1, 3);
  CHECK(std::holds_alternative<invalid_output>(no_title));
  auto long_plan = read_plan({{"title", "P"}, {"steps", steps_json(9)}}, first.at_least,
                             first.room);
  REQUIRE(std::holds_alternative<plan_draft>(long_plan));
  auto update = merge_plan(nullptr, std::get<plan_draft>(long_plan), medium);
  CHECK(update.next.iteration == 1);
  CHECK(update.next.steps.size() == 6);
  CHECK(update.next.steps[0].id == "s1.1");
  CHECK(update.next.steps[5].id == "s1.6");
  REQUIRE(update.notices.size() == 1);
  CHECK(update.notices[0].find("9 new steps; 6 fit") != std::string::npos);
  // needs_search follows the step type unless given.
  auto typed = read_plan({{"title", "P"},
                          {"steps",
                           {{{"title", "A"}, {"step_type", "analysis"}},
                            {{"title", "B"}},
                            {{"title", "C"}, {"step_type", "analysis"}, {"needs_search", true}}}}},
                         1, 3);
  REQUIRE(std::holds_alternative<plan_draft>(typed));
  auto& steps = std::get<plan_draft>(typed).steps;
  CHECK(steps[0].type == step_type::analysis);
  CHECK_FALSE(steps[0].needs_search);
  CHECK(steps[1].needs_search);
  CHECK(steps[2].needs_search);
  CHECK(steps[0].description == "A");
}

TEST_CASE("reflective: ADJUST keeps completed steps unchanged and adds only new ones") {
  auto medium = profile_for(depth::medium);
  plan previous;
  previous.iteration = 1;
  previous.id = "plan-1";
  previous.steps = {done_step("s1.1", "Efficiency", "COP falls below 0 C [1]."),
                    done_step("s1.2", "Defrost", "Reverse-cycle defrost [2]."),
                    pending_step("s1.3", "Costs"), pending_step("s1.4", "Noise")};
  auto room = room_for(&previous, medium);
  CHECK(room.room == 4);
  CHECK(room.at_least == 1);
  // The model tries to rewrite a completed step: it is a new step, the old
  // one stays as it was.
  auto draft = read_plan({{"title", "Adjusted"},
                          {"steps",
                           {{{"title", "Efficiency"}, {"description", "again"}},
                            {{"title", "Cold-climate models"}, {"description", "which ones"}}}}},
                         room.at_least, room.room);
  REQUIRE(std::holds_alternative<plan_draft>(draft));
  auto update = merge_plan(&previous, std::get<plan_draft>(draft), medium);
  auto& next = update.next;
  CHECK(next.iteration == 2);
  CHECK(next.id == "plan-2");
  REQUIRE(next.steps.size() == 4);
  CHECK(next.steps[0].id == "s1.1");
  CHECK(next.steps[0].observation == "COP falls below 0 C [1].");
  CHECK(next.steps[0].status == step_status::completed);
  CHECK(next.steps[1].id == "s1.2");
  CHECK(next.steps[1].observation == "Reverse-cycle defrost [2].");
  CHECK(next.steps[2].id == "s2.1");
  CHECK(next.steps[2].status == step_status::pending);
  CHECK(next.steps[3].title == "Cold-climate models");
  CHECK(next_step(next) == size_t{2});
  CHECK(completed_steps(next) == 2);
  CHECK(update.notices.empty());
}

TEST_CASE("reflective: a plan survives a checkpoint round trip; broken ones are refused") {
  plan p;
  p.id = "plan-2";
  p.title = "T";
  p.iteration = 2;
  p.steps = {done_step("s1.1", "A", "found [1]"), pending_step("s2.1", "B")};
  auto back = plan_from_json(to_json(p));
  REQUIRE(back.has_value());
  CHECK(back->iteration == 2);
  REQUIRE(back->steps.size() == 2);
  CHECK(back->steps[0].observation == "found [1]");
  CHECK(back->steps[1].status == step_status::pending);
  auto j = to_json(p);
  j["steps"][0]["status"] = "done";
  CHECK_FALSE(plan_from_json(j).has_value());
  CHECK_FALSE(plan_from_json(json{{"steps", 3}}).has_value());
  CHECK_FALSE(plan_from_json(json::array()).has_value());
}

TEST_CASE("reflective: premature COMPLETE is refused at each depth") {
  for (auto d : {depth::light, depth::medium, depth::extended}) {
    CAPTURE(to_string(d));
    auto prof = profile_for(d);
    plan p;
    p.iteration = 1;
    for (int i = 0; i < prof.max_steps; ++i)
      p.steps.push_back(pending_step("s1." + std::to_string(i + 1), "S"));
    // Complete all but the last of the minimum.
    for (int i = 0; i + 1 < prof.min_steps; ++i)
      p.steps[static_cast<size_t>(i)].status = step_status::completed;
    if (prof.min_steps > 1) {
      auto early = enforce(said(decision::complete), p, prof, 3);
      CHECK(early.refused);
      CHECK(early.taken == decision::continue_plan);
      CHECK(early.why.find("COMPLETE refused") != std::string::npos);
    }
    p.steps[static_cast<size_t>(prof.min_steps - 1)].status = step_status::completed;
    auto in_time = enforce(said(decision::complete), p, prof, 3);
    CHECK_FALSE(in_time.refused);
    CHECK(in_time.taken == decision::complete);
  }
}

TEST_CASE("reflective: the plan-iteration limit, the step limit and a plan that runs out") {
  auto medium = profile_for(depth::medium);
  plan p;
  p.iteration = 3;
  p.steps = {done_step("s1.1", "A", "a"), pending_step("s3.1", "B")};
  auto adjust = enforce(said(decision::adjust), p, medium, 3);
  CHECK(adjust.refused);
  CHECK(adjust.taken == decision::continue_plan);
  CHECK(adjust.why.find("plan 3 of at most 3") != std::string::npos);
  p.iteration = 2;
  CHECK(enforce(said(decision::adjust), p, medium, 3).taken == decision::adjust);
  // Out of pending steps below the minimum: another plan, if allowed.
  p.steps = {done_step("s1.1", "A", "a")};
  auto ran_out = enforce(said(decision::continue_plan), p, medium, 3);
  CHECK_FALSE(ran_out.refused);
  CHECK(ran_out.taken == decision::adjust);
  // COMPLETE below the minimum with no step left but a plan left: ADJUST.
  auto early = enforce(said(decision::complete), p, medium, 3);
  CHECK(early.refused);
  CHECK(early.taken == decision::adjust);
  // At the last plan, the research completes with what it has.
  p.iteration = 3;
  CHECK(enforce(said(decision::continue_plan), p, medium, 3).taken == decision::complete);
  CHECK(enforce(said(decision::complete), p, medium, 3).taken == decision::complete);
  // A full plan cannot grow.
  p.iteration = 1;
  p.steps.clear();
  for (int i = 0; i < 6; ++i)
    p.steps.push_back(done_step("s1." + std::to_string(i + 1), "S", "o"));
  auto full = enforce(said(decision::adjust), p, medium, 3);
  CHECK(full.refused);
  CHECK(full.taken == decision::complete);
  CHECK(full.why.find("holds the 6 steps") != std::string::npos);
  skip_pending(p);
  CHECK(completed_steps(p) == 6);
}

TEST_CASE("reflective: a reflection needs a known decision") {
  auto ok = read_reflection(
    {{"decision", "adjust"}, {"reasoning", "gap"}, {"suggested_changes", {"add costs"}}});
  REQUIRE(std::holds_alternative<reflection>(ok));
  CHECK(std::get<reflection>(ok).decision == decision::adjust);
  CHECK(std::get<reflection>(ok).suggested_changes == std::vector<std::string>{"add costs"});
  auto bad = read_reflection({{"decision", "STOP"}});
  REQUIRE(std::holds_alternative<invalid_output>(bad));
  CHECK(std::get<invalid_output>(bad).problem.find("CONTINUE, ADJUST or COMPLETE")
        != std::string::npos);
  CHECK(std::holds_alternative<invalid_output>(read_reflection({{"reasoning", "x"}})));
}

// -- requests -------------------------------------------------------------------

TEST_CASE("reflective requests: a structured call offers one tool and requires it; the repair "
          "answers the bad call and asks once more") {
  sdk::research_context context;
  context.new_sources = 2;
  auto r = structured_request("sys", "user text", reflect_tool(), "reflect", context);
  CHECK(r.research.new_sources == 2);
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].author == sdk::role::system);
  CHECK(r.messages[1].content == "user text");
  REQUIRE(r.tools.size() == 1);
  CHECK(r.tools[0].name == "reflect");
  CHECK(r.choice == sdk::tool_choice::required);
  CHECK(r.role_tag == "reflect");
  sdk::chat_result bad;
  bad.text = "thinking";
  bad.tool_calls.push_back({"c1", "reflect", "{\"decision\": \"MAYBE\"}"});
  auto fix = repair_request(r, bad, "reflect", "decision must be CONTINUE, ADJUST or COMPLETE");
  REQUIRE(fix.messages.size() == 5);
  CHECK(fix.messages[2].author == sdk::role::assistant);
  CHECK(fix.messages[2].tool_calls.size() == 1);
  CHECK(fix.messages[3].author == sdk::role::tool);
  CHECK(fix.messages[3].tool_call_id == "c1");
  CHECK(fix.messages[4].author == sdk::role::user);
  CHECK(fix.messages[4].content.find("decision must be") != std::string::npos);
  CHECK(fix.tools.size() == 1);
  CHECK(fix.research.new_sources == 2);
}

TEST_CASE("reflective requests: what each role reads") {
  std::vector<sdk::chat_message> conversation;
  for (int i = 0; i < 12; ++i) {
    sdk::chat_message m;
    m.author = i % 2 == 0 ? sdk::role::user : sdk::role::assistant;
    m.content = "message " + std::to_string(i);
    conversation.push_back(m);
  }
  // The last four earlier user messages (4, 6, 8, 10) and their answers.
  auto coord = coordinator_input("And in Norway?", conversation);
  CHECK(coord.find("message 3") == std::string::npos);
  CHECK(coord.find("message 4") != std::string::npos);
  CHECK(coord.find("message 11") != std::string::npos);
  CHECK(coord.rfind("And in Norway?") == coord.size() - 14);

  plan p;
  p.iteration = 1;
  p.title = "Heat pumps";
  p.steps = {done_step("s1.1", "Efficiency", "COP falls [1]."), pending_step("s1.2", "Costs")};
  reflection fb;
  fb.reasoning = "costs are missing";
  fb.suggested_changes = {"installation costs"};
  auto room = room_for(&p, profile_for(depth::medium));
  auto planner = planner_input("Q?", "bg results", &p, &fb, room, depth::medium);
  CHECK(planner.find("COP falls [1].") != std::string::npos);
  CHECK(planner.find("installation costs") != std::string::npos);
  CHECK(planner.find("Write 2 to 5 new steps.") != std::string::npos);
  CHECK(planner.find("bg results") != std::string::npos);
  auto first = planner_input("Q?", "", nullptr, nullptr,
                             room_for(nullptr, profile_for(depth::light)), depth::light);
  CHECK(first.find("Write 1 to 3 steps.") != std::string::npos);
  CHECK(step_range(profile_for(depth::extended)) == "5 to 10");

  auto task = step_task("Q?", p, 1);
  CHECK(task.rfind("Costs", 0) == 0);
  CHECK(task.find("Q?") != std::string::npos);

  auto refl = reflector_input("Q?", p, 0, 7, 0);
  CHECK(refl.find("[x] s1.1 Efficiency") != std::string::npos);
  CHECK(refl.find("[ ] s1.2 Costs") != std::string::npos);
  CHECK(refl.find("New sources found by this step: 0") != std::string::npos);
  CHECK(refl.find("Sources found so far: 7") != std::string::npos);

  p.steps[0].observation = std::string(1000, 'a');
  p.steps[1] = done_step("s1.2", "Costs", std::string(1000, 'b'));
  auto synth = synthesizer_input("Q?", p, 600);
  CHECK(synth.find("## Efficiency") != std::string::npos);
  CHECK(synth.find("## Costs") != std::string::npos);
  CHECK(synth.find(std::string(301, 'a')) == std::string::npos);
  CHECK(synth.find(std::string(300, 'b')) != std::string::npos);
}

TEST_CASE("reflective requests: each role's research context states what its text does") {
  std::vector<sdk::chat_message> conversation(1);
  conversation[0].author = sdk::role::user;
  conversation[0].content = "How do heat pumps work?";
  auto coord = coordinator_context("And in Norway?", conversation);
  CHECK(coord.question == "And in Norway?");
  CHECK(coord.follow_up);
  CHECK_FALSE(coordinator_context("And in Norway?", {}).follow_up);

  plan p;
  p.iteration = 1;
  p.steps = {done_step("s1.1", "Efficiency", "COP falls [1]."), pending_step("s1.2", "Costs")};
  p.steps[1].description = "What installing one costs";
  auto room = room_for(&p, profile_for(depth::medium));
  auto planner = planner_context("Q?", &p, room);
  CHECK(planner.question == "Q?");
  CHECK(planner.plan == std::vector<std::string>{"Efficiency", "Costs"});
  REQUIRE(planner.findings.size() == 1);
  CHECK(planner.findings[0].task == "Efficiency");
  CHECK(planner.findings[0].report == "COP falls [1].");
  CHECK(planner.min_steps == room.at_least);
  CHECK(planner.max_steps == room.room);
  auto first = planner_context("Q?", nullptr, room_for(nullptr, profile_for(depth::light)));
  CHECK(first.plan.empty());
  CHECK(first.min_steps == 1);
  CHECK(first.max_steps == 3);

  CHECK(step_text(p, 1) == "Costs: What installing one costs");
  CHECK(step_text(p, 2).empty());
  CHECK(reflector_context("Q?", 0).new_sources == 0);

  p.steps[0].observation = std::string(1000, 'a');
  p.steps[1] = done_step("s1.2", "Costs", std::string(1000, 'b'));
  auto synth = synthesizer_context("Q?", p, 600);
  REQUIRE(synth.findings.size() == 2);
  CHECK(synth.findings[1].task == "Costs");
  // Cut as the synthesizer's text cuts it.
  CHECK(synthesizer_input("Q?", p, 600).find(synth.findings[0].report) != std::string::npos);
  CHECK(synth.findings[0].report.size() < 400);
}

} // namespace reflective_policy_test
