// Follow-up conversations through the real binary and the fake LLM server:
// a chain of follow-ups (`quarry research --follow-up`, the API's
// follow-up) gives the clarification, the plan, the orchestrator and the
// reflective coordinator the thread's last five questions (the follow-up's
// own included) with the reports between them, as chat messages.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace follow_up_thread_test {

using namespace quarry;
using namespace quarry::test::script;
using nlohmann::json;

namespace {

constexpr const char* coordinator_marker = "You are the coordinator of a research assistant";
constexpr const char* simple_marker = "You answer the user's question directly";

struct thread_fixture {
  test::temp_dir home;

  test::process_result
  quarry(std::vector<std::string> args,
         std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_process(argv, test::isolated_quarry_options(home.path(), env));
  }
};

using test::serve::llm_env;

std::string session_in(const std::string& err) {
  auto at = err.find("quarry: session q");
  REQUIRE(at != std::string::npos);
  return err.substr(at + 16, 17);
}

// The orchestrator strategy's script, the final report numbered `n`; the
// clarification asks nothing (it calls generate_plan).
json numbered_script(int n) {
  auto rules = two_agent_script();
  rules.back()["respond"]["text"] = "Report number " + std::to_string(n)
                                    + ": cold air lowers efficiency [1]. Defrosting clears the "
                                      "coil [2].";
  rules.insert(rules.begin(), rule(clarify_marker, calls({{"generate_plan", json::object()}})));
  return rules;
}

std::string question(int n) {
  return "Question number " + std::to_string(n) + ": how do heat pumps cope with frost?";
}

// The role and text of each message of a recorded OpenAI request.
std::vector<std::pair<std::string, std::string>> messages_of(const json& body) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : body["messages"])
    out.emplace_back(m["role"].get<std::string>(),
                     m["content"].is_string() ? m["content"].get<std::string>() : std::string{});
  return out;
}

std::vector<std::string> of_role(const std::vector<std::pair<std::string, std::string>>& ms,
                                 const std::string& role) {
  std::vector<std::string> out;
  for (const auto& [r, text] : ms)
    if (r == role)
      out.push_back(text);
  return out;
}

// The first request since `from` whose system prompt holds `marker`.
json first_request(const test::fake_llm_server& server, size_t from, const char* marker) {
  auto reqs = server.requests();
  for (size_t i = from; i < reqs.size(); ++i)
    if (reqs[i].body.is_object() && reqs[i].body.contains("messages")
        && reqs[i].body["messages"][0]["content"].get<std::string>().find(marker)
             != std::string::npos)
      return reqs[i].body;
  FAIL("no request with " << marker);
  return {};
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

TEST_CASE_FIXTURE(thread_fixture, "follow-up thread: the sixth research of a chain of "
                                  "follow-ups gives its clarification, plan and orchestrator "
                                  "the last five questions with the reports between them") {
  test::fake_llm_server server;
  std::string parent;
  size_t before = 0;
  for (int n = 1; n <= 6; ++n) {
    CAPTURE(n);
    REQUIRE_FALSE(server.script(numbered_script(n)));
    before = server.requests().size();
    std::vector<std::string> args{"research"};
    if (!parent.empty())
      args.insert(args.end(), {"--follow-up", parent});
    args.push_back(question(n));
    auto res = quarry(args, llm_env(server));
    CAPTURE(res.err);
    REQUIRE(res.exit_code == 0);
    parent = session_in(res.err);
  }
  // Questions 2 to 5 with their reports, then the question of the sixth.
  auto expect_thread = [](const std::vector<std::pair<std::string, std::string>>& ms) {
    auto users = of_role(ms, "user");
    REQUIRE(users.size() >= 5);
    for (int n = 2; n <= 6; ++n)
      CHECK(starts_with(users[static_cast<size_t>(n - 2)], question(n)));
    auto reports = of_role(ms, "assistant");
    REQUIRE(reports.size() >= 4);
    for (int n = 2; n <= 5; ++n) {
      CHECK(starts_with(reports[static_cast<size_t>(n - 2)],
                        "Report number " + std::to_string(n) + ":"));
      // Each report comes with the sources it cites.
      CHECK(reports[static_cast<size_t>(n - 2)].find("Sources of that report:")
            != std::string::npos);
    }
    for (const auto& [role, text] : ms) {
      CHECK(text.find("Question number 1:") == std::string::npos);
      CHECK(text.find("Report number 1:") == std::string::npos);
    }
    // The question of the sixth is the one asked, not the earlier research
    // written before it again.
    CHECK(users[4] == question(6));
  };
  auto clarify = messages_of(first_request(server, before, clarify_marker));
  expect_thread(clarify);
  CHECK(of_role(clarify, "user").size() == 5);
  CHECK(clarify.back().second == question(6));
  auto plan = messages_of(first_request(server, before, plan_marker));
  expect_thread(plan);
  // The plan's reminder is a sixth user message (Onyx's N + 1).
  CHECK(of_role(plan, "user").size() == 6);
  auto orchestrate = messages_of(first_request(server, before, orchestrator_marker));
  expect_thread(orchestrate);
  CHECK(of_role(orchestrate, "user").size() == 5);
}

TEST_CASE_FIXTURE(thread_fixture, "follow-up thread: the reflective coordinator classifies a "
                                  "follow-up with the conversation before it") {
  test::fake_llm_server server;
  auto simple = [](const std::string& answer, const std::string& follow_up) {
    auto rules = json::array();
    rules.push_back(rule(coordinator_marker, calls({{"classify_question",
                                                     {{"complexity", "simple"},
                                                      {"follow_up_type", follow_up},
                                                      {"is_ambiguous", false},
                                                      {"recommended_depth", "light"},
                                                      {"reasoning", "Scripted."}}}})));
    rules.push_back(rule(simple_marker, {{"text", answer}}));
    return rules;
  };
  REQUIRE_FALSE(server.script(simple("A heat pump moves heat from outside in.", "new_topic")));
  auto first = quarry({"research", "--strategy", "reflective", "What does a heat pump do?"},
                      llm_env(server));
  CAPTURE(first.err);
  REQUIRE(first.exit_code == 0);
  auto parent = session_in(first.err);
  REQUIRE_FALSE(server.script(simple("Less well in deep frost.", "complex_follow_up")));
  auto before = server.requests().size();
  auto second = quarry({"research", "--strategy", "reflective", "--json", "--follow-up", parent,
                        "And in the cold?"},
                       llm_env(server));
  CAPTURE(second.err);
  REQUIRE(second.exit_code == 0);
  auto coordinator = messages_of(first_request(server, before, coordinator_marker));
  auto users = of_role(coordinator, "user");
  REQUIRE(users.size() == 1);
  const auto& text = users[0];
  CHECK(text.find("The conversation so far (most recent last):\n\nUser: What does a heat pump "
                  "do?\n\nAssistant: A heat pump moves heat from outside in.")
        == 0);
  CHECK(text.find("The question to classify:\n\nAnd in the cold?") != std::string::npos);
  CHECK(text.find("Earlier research in this conversation") == std::string::npos);
  // The classification as the packets show it.
  bool classified = false;
  std::istringstream lines{second.out};
  for (std::string line; std::getline(lines, line);) {
    auto p = json::parse(line, nullptr, false);
    if (p.is_object() && p.contains("obj") && p["obj"].value("type", "") == "question_classified") {
      classified = true;
      CHECK(p["obj"]["follow_up_type"] == "complex_follow_up");
    }
  }
  CHECK(classified);
  // The direct answer sees the conversation too.
  auto answer = messages_of(first_request(server, before, simple_marker));
  CHECK(of_role(answer, "user").back().find("User: What does a heat pump do?")
        != std::string::npos);
}

TEST_CASE_FIXTURE(thread_fixture, "follow-up thread: offline, the extractive coordinator "
                                  "classifies a follow-up as one") {
  auto first = quarry({"research", "--strategy", "reflective", "--json",
                       "How do heat pumps cope with cold weather?"});
  CAPTURE(first.err);
  REQUIRE(first.exit_code == 0);
  auto classified = [](const std::string& out) {
    std::istringstream lines{out};
    for (std::string line; std::getline(lines, line);) {
      auto p = json::parse(line, nullptr, false);
      if (p.is_object() && p.contains("obj") && p["obj"].value("type", "") == "question_classified")
        return p["obj"]["follow_up_type"].get<std::string>();
    }
    return std::string{};
  };
  CHECK(classified(first.out) == "new_topic");
  auto second = quarry({"research", "--strategy", "reflective", "--json", "--follow-up",
                        session_in(first.err), "And what about noise?"});
  CAPTURE(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(classified(second.out) == "complex_follow_up");
}

TEST_CASE("follow-up thread: the API's follow-up of a follow-up gives the models both earlier "
          "questions and reports") {
  using namespace quarry::test::serve;
  test::temp_dir home;
  test::fake_llm_server llm;
  server_process srv{home, {}, llm_env(llm)};
  auto wait_done = [&](const std::string& id) {
    auto r = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                  std::chrono::seconds{90});
    REQUIRE(r.status == 200);
    auto evs = parse_sse(r.body);
    REQUIRE_FALSE(evs.empty());
    CHECK(json::parse(evs.back().data)["state"] == "completed");
  };
  REQUIRE_FALSE(llm.script(numbered_script(1)));
  auto started = call("POST", srv.url("/v1/research"),
                      json{{"question", question(1)}, {"clarify", false}}.dump());
  REQUIRE(started.status == 202);
  auto id = started.as_json()["id"].get<std::string>();
  wait_done(id);
  for (int n = 2; n <= 3; ++n) {
    REQUIRE_FALSE(llm.script(numbered_script(n)));
    auto follow = call("POST", srv.url("/v1/research/" + id + "/follow-up"),
                       json{{"question", question(n)}, {"clarify", false}}.dump());
    CAPTURE(follow.body);
    REQUIRE(follow.status == 202);
    id = follow.as_json()["id"].get<std::string>();
    wait_done(id);
  }
  // The third session's plan: question 1, report 1, question 2, report 2,
  // question 3, the reminder.
  json plan;
  for (const auto& r : llm.requests())
    if (r.raw_body.find(plan_marker) != std::string::npos
        && r.raw_body.find(question(3)) != std::string::npos)
      plan = r.body;
  REQUIRE(plan.is_object());
  auto ms = messages_of(plan);
  auto users = of_role(ms, "user");
  REQUIRE(users.size() == 4);
  CHECK(users[0] == question(1));
  CHECK(users[1] == question(2));
  CHECK(users[2] == question(3));
  auto reports = of_role(ms, "assistant");
  REQUIRE(reports.size() == 2);
  CHECK(starts_with(reports[0], "Report number 1:"));
  CHECK(starts_with(reports[1], "Report number 2:"));
}

} // namespace follow_up_thread_test
