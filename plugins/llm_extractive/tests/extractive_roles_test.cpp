// The extractive provider plays the reflective strategy's structured roles
// and the verification judge: requests built as the strategy builds them
// (each with its research context), answers read as the strategy reads
// them.

#include "extractive.hpp"

#include "quarry/core/reflective.hpp"
#include "quarry/core/reflective_requests.hpp"
#include "quarry/core/verification.hpp"

#include <doctest/doctest.h>

namespace extractive_roles_test {

using namespace quarry;
using namespace quarry::core::reflective;
using quarry::plugins::llm_extractive::respond;
using quarry::plugins::llm_extractive::respond_structured;

namespace {

nlohmann::json args_of(const sdk::chat_request& req) {
  auto a = respond(req, {});
  sdk::chat_result r;
  r.text = a.text;
  r.tool_calls = a.tool_calls;
  auto parsed = structured_arguments(r.tool_calls, req.tools.front().name);
  REQUIRE(std::holds_alternative<nlohmann::json>(parsed));
  return std::get<nlohmann::json>(parsed);
}

} // namespace

TEST_CASE("extractive roles: classification follows the question's shape") {
  auto classify = [](const std::string& q) {
    auto req = structured_request("sys", coordinator_input(q, {}), classify_tool(3), "classify",
                                  coordinator_context(q, {}));
    auto c = read_classification(args_of(req), 3);
    REQUIRE(std::holds_alternative<classification>(c));
    return std::get<classification>(c);
  };
  CHECK(classify("What is a heat pump?").complexity == complexity::simple);
  CHECK(classify("How do heat pumps defrost and what does it cost in winter?").complexity
        == complexity::moderate);
  auto complex = classify("Compare air-source and ground-source heat pumps for cold climates");
  CHECK(complex.complexity == complexity::complex);
  CHECK(complex.recommended_depth == depth::extended);
  CHECK_FALSE(complex.is_ambiguous);
  // A follow-up: classified by its own question, as one.
  std::vector<sdk::chat_message> conversation(1);
  conversation[0].author = sdk::role::user;
  conversation[0].content = "How do heat pumps work?";
  auto req = structured_request("sys", coordinator_input("And in Norway?", conversation),
                                classify_tool(3), "classify",
                                coordinator_context("And in Norway?", conversation));
  auto c = read_classification(args_of(req), 3);
  REQUIRE(std::holds_alternative<classification>(c));
  CHECK(std::get<classification>(c).follow_up_type == follow_up::complex_follow_up);
}

TEST_CASE("extractive roles: fixed plans reach each depth's minimum and respect the room") {
  for (auto d : {depth::light, depth::medium, depth::extended}) {
    CAPTURE(to_string(d));
    auto prof = profile_for(d);
    auto room = room_for(nullptr, prof);
    const std::string q = "How do heat pumps work in cold weather?";
    auto req = structured_request("sys", planner_input(q, "", nullptr, nullptr, room, d),
                                  plan_tool(room.at_least, room.room), "plan",
                                  planner_context(q, nullptr, room));
    auto draft = read_plan(args_of(req), room.at_least, room.room);
    REQUIRE(std::holds_alternative<plan_draft>(draft));
    auto n = static_cast<int>(std::get<plan_draft>(draft).steps.size());
    CHECK(n >= prof.min_steps);
    CHECK(n <= prof.max_steps);
  }
  // A replan adds new steps only, none with a completed step's title.
  auto prof = profile_for(depth::medium);
  plan p;
  p.iteration = 1;
  plan_step done;
  done.id = "s1.1";
  done.title = "Background and key facts";
  done.status = step_status::completed;
  done.observation = "x [1]";
  p.steps = {done};
  auto room = room_for(&p, prof);
  reflection fb;
  fb.reasoning = "more";
  auto req = structured_request("sys", planner_input("Q?", "", &p, &fb, room, depth::medium),
                                plan_tool(room.at_least, room.room), "plan",
                                planner_context("Q?", &p, room));
  auto draft = read_plan(args_of(req), room.at_least, room.room);
  REQUIRE(std::holds_alternative<plan_draft>(draft));
  for (const auto& s : std::get<plan_draft>(draft).steps)
    CHECK(s.title != "Background and key facts");
  CHECK(static_cast<int>(std::get<plan_draft>(draft).steps.size()) >= room.at_least);
}

TEST_CASE("extractive roles: the reflector completes when a step found no new source") {
  plan p;
  p.iteration = 1;
  p.steps.resize(2);
  p.steps[0].id = "s1.1";
  p.steps[0].title = "A";
  p.steps[0].status = step_status::completed;
  p.steps[1].id = "s1.2";
  p.steps[1].title = "B";
  auto ask = [&](size_t fresh) {
    auto req = structured_request("sys", reflector_input("Q?", p, 0, 4, fresh), reflect_tool(),
                                  "reflect", reflector_context("Q?", fresh));
    auto r = read_reflection(args_of(req));
    REQUIRE(std::holds_alternative<reflection>(r));
    return std::get<reflection>(r).decision;
  };
  CHECK(ask(3) == decision::continue_plan);
  CHECK(ask(0) == decision::complete);
}

TEST_CASE("extractive roles: search queries and the lexical judge") {
  sdk::research_context step;
  step.question = "How do heat pumps cope with frost?";
  step.task = "Defrost cycles of heat pumps";
  auto req = structured_request("sys", "Defrost cycles of heat pumps\n\n(This is one step)",
                                queries_tool(3), "queries", step);
  auto q = read_queries(args_of(req), 3);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(q));
  CHECK(std::get<std::vector<std::string>>(q).front() == "Defrost cycles of heat pumps");
  // The background investigator's tool asks for 2 to 3: a short question,
  // whose keywords are the question itself, still gets two.
  for (std::string question : {"Heat pumps", "How do heat pumps cope with frost?"}) {
    CAPTURE(question);
    sdk::research_context background;
    background.question = question;
    auto bg = structured_request("sys", question,
                                 queries_tool(background_max_queries, background_min_queries),
                                 "plan", background);
    auto got = read_queries(args_of(bg), background_max_queries, background_min_queries);
    REQUIRE(std::holds_alternative<std::vector<std::string>>(got));
    CHECK(std::get<std::vector<std::string>>(got).size() >= 2);
    CHECK(std::get<std::vector<std::string>>(got).front() == question);
  }

  namespace v = core::verification;
  std::vector<v::claim> claims(3);
  claims[0].text = "A defrost cycle lasts two to ten minutes.";
  claims[1].text = "Heat pumps are made of cheese.";
  claims[2].text = "Nothing backs this.";
  std::vector<std::optional<v::evidence>> ev{
    v::evidence{2, "A defrost cycle lasts two to ten minutes.", 1.0, true},
    v::evidence{2, "Reverse-cycle defrost melts frost on the coil.", 0.1, true}, std::nullopt};
  auto jreq = structured_request("sys", v::judge_prompt(claims, ev), v::judge_tool(), "judge",
                                 v::judge_context(claims, ev));
  auto read = v::read_judgements(args_of(jreq), ev);
  REQUIRE(std::holds_alternative<std::vector<v::judgement>>(read));
  auto& js = std::get<std::vector<v::judgement>>(read);
  CHECK(js[0].result == v::verdict::supported);
  CHECK(js[1].result == v::verdict::unsupported);
  CHECK(js[2].result == v::verdict::no_evidence);
}

TEST_CASE("extractive roles: other requests are not structured calls") {
  sdk::chat_request plain;
  plain.role_tag = "plan";
  CHECK_FALSE(respond_structured(plain).has_value());
  auto two = structured_request("s", "u", reflect_tool(), "reflect", {});
  two.tools.push_back(classify_tool(1));
  CHECK_FALSE(respond_structured(two).has_value());
}

TEST_CASE("extractive roles: the synthesis writes a section per completed step") {
  plan p;
  p.title = "Heat pumps";
  p.steps.resize(3);
  p.steps[0].title = "How heat pumps work";
  p.steps[0].status = step_status::completed;
  p.steps[0].observation = "A heat pump moves heat from a cold place to a warm one [1].";
  p.steps[1].title = "What heat pumps cost";
  p.steps[1].status = step_status::completed;
  p.steps[1].observation = "## Prices\n\nA heat pump costs 9,000 euros to install [2].";
  p.steps[2].title = "Skipped step";
  p.steps[2].status = step_status::skipped;
  const std::string q = "How do heat pumps work and what do they cost?";
  sdk::chat_request req;
  req.role_tag = "synthesize";
  req.messages.resize(1);
  req.messages[0].author = sdk::role::user;
  req.messages[0].content = synthesizer_input(q, p);
  req.research = synthesizer_context(q, p);
  auto report = respond(req, {}).text;
  CHECK(report.find("This report answers the question \"" + q + "\"") == 0);
  // A heading inside an observation is no step of its own.
  CHECK(report.find("\n## How heat pumps work\n") != std::string::npos);
  CHECK(report.find("\n## What heat pumps cost\n") != std::string::npos);
  CHECK(report.find("\n## Prices") == std::string::npos);
  CHECK(report.find("Skipped step") == std::string::npos);
  CHECK(report.find("9,000 euros to install [2].") != std::string::npos);
}

} // namespace extractive_roles_test
