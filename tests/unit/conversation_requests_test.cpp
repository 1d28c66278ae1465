// A session's thread in its requests: the clarification, the plan, the
// orchestrator and the reflective coordinator see the last five user
// messages of the thread (Onyx's MAX_USER_MESSAGES_FOR_CONTEXT), the
// question included, with the answers between them.

#include "quarry/core/reflective_requests.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/lexical/lexical.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace conversation_requests_test {

using namespace quarry;
using sdk::role;

namespace {

sdk::chat_message said(role author, std::string text) {
  sdk::chat_message m;
  m.author = author;
  m.content = std::move(text);
  return m;
}

// `questions` earlier questions ("question 1", ...) each with its report
// ("report 1", ...), oldest first.
std::vector<sdk::chat_message> thread_of(int questions) {
  std::vector<sdk::chat_message> out;
  for (int i = 1; i <= questions; ++i) {
    out.push_back(said(role::user, "question " + std::to_string(i)));
    out.push_back(said(role::assistant, "report " + std::to_string(i)));
  }
  return out;
}

// A session's question as a follow-up states it: the earlier research as
// text, then the question asked.
std::string follow_up_question(const std::string& asked) {
  return "Earlier research in this conversation.\nQuestion: question 6\n\nReport:\nreport 6\n\n"
         + std::string{lexical::follow_up_marker} + asked;
}

std::vector<std::string> texts(const std::vector<sdk::chat_message>& ms, role author) {
  std::vector<std::string> out;
  for (const auto& m : ms)
    if (m.author == author)
      out.push_back(m.content);
  return out;
}

} // namespace

TEST_CASE("conversation: a call sees the thread from its fourth last earlier question on, "
          "with the answers between") {
  CHECK(core::max_user_messages_for_context == 5);
  auto thread = thread_of(6);
  // Other roles and empty messages are not part of it.
  thread.insert(thread.begin() + 5, said(role::system, "system text"));
  thread.insert(thread.begin() + 7, said(role::assistant, "  "));
  auto window = core::conversation_window(thread);
  CHECK(texts(window, role::user)
        == std::vector<std::string>{"question 3", "question 4", "question 5", "question 6"});
  CHECK(texts(window, role::assistant)
        == std::vector<std::string>{"report 3", "report 4", "report 5", "report 6"});
  CHECK(window.front().content == "question 3");
  CHECK(window.back().content == "report 6");
  // A shorter thread is whole; none is empty.
  CHECK(core::conversation_window(thread_of(2)).size() == 4);
  CHECK(core::conversation_window({}).empty());
}

TEST_CASE("conversation: clarification and plan get the thread before the question as asked, "
          "and say it is a follow-up") {
  auto question = follow_up_question("And in Norway?");
  auto clarify = core::clarification_request("system", question, thread_of(6));
  REQUIRE(clarify.messages.size() == 1 + 8 + 1);
  CHECK(clarify.messages[0].author == role::system);
  CHECK(clarify.messages[1].content == "question 3");
  CHECK(clarify.messages[2].author == role::assistant);
  CHECK(clarify.messages[2].content == "report 3");
  // The question as asked: the conversation is in the messages, not again
  // in the text before the follow-up marker.
  CHECK(clarify.messages.back().author == role::user);
  CHECK(clarify.messages.back().content == "And in Norway?");
  CHECK(texts(clarify.messages, role::user).size() == core::max_user_messages_for_context);
  CHECK(clarify.research.question == "And in Norway?");
  CHECK(clarify.research.follow_up);

  // The plan: the same thread and the reminder as a sixth user message.
  auto plan = core::plan_request("system", question, "Write the plan.", thread_of(6));
  auto users = texts(plan.messages, role::user);
  REQUIRE(users.size() == core::max_user_messages_for_context + 1);
  CHECK(users.front() == "question 3");
  CHECK(users[4] == "And in Norway?");
  CHECK(users.back() == "Write the plan.");
  CHECK(plan.research.follow_up);

  // A thread given without the text form still makes a follow-up.
  auto bare = core::clarification_request("system", "And in Norway?", thread_of(1));
  CHECK(bare.messages.size() == 4);
  CHECK(bare.research.follow_up);

  // Without a thread the question goes as it is (a follow-up's text
  // included), as before.
  auto alone = core::clarification_request("system", question);
  REQUIRE(alone.messages.size() == 2);
  CHECK(alone.messages[1].content == question);
  CHECK(alone.research.follow_up);
  auto fresh = core::plan_request("system", "How do heat pumps work?", "Write the plan.");
  REQUIRE(fresh.messages.size() == 3);
  CHECK_FALSE(fresh.research.follow_up);
}

TEST_CASE("conversation: the orchestrator gets the thread before the question and its rounds; "
          "a tight budget drops the oldest messages first") {
  core::orchestrator_input in;
  in.system = "system";
  in.question = follow_up_question("And in Norway?");
  in.conversation = thread_of(6);
  in.plan = "1. Costs";
  sdk::chat_message call;
  call.author = role::assistant;
  call.tool_calls.push_back({"c1", "research_agent", R"({"task": "t"})"});
  sdk::chat_message result;
  result.author = role::tool;
  result.tool_call_id = "c1";
  result.tool_name = "research_agent";
  result.content = "found";
  in.history = {call, result};
  auto built = core::orchestrator_request(in);
  REQUIRE(std::holds_alternative<sdk::chat_request>(built));
  const auto& req = std::get<sdk::chat_request>(built);
  auto users = texts(req.messages, role::user);
  CHECK(users
        == std::vector<std::string>{"question 3", "question 4", "question 5", "question 6",
                                    "And in Norway?"});
  // The rounds follow the question.
  REQUIRE(req.messages.size() >= 3);
  CHECK(req.messages[req.messages.size() - 2].tool_calls.size() == 1);
  CHECK(req.messages.back().content == "found");
  CHECK(req.research.follow_up);
  CHECK(req.research.question == "And in Norway?");

  // Long earlier reports and a small window: the newest messages stay.
  for (auto& m : in.conversation)
    if (m.author == role::assistant)
      m.content = std::string(20000, 'r');
  in.context_tokens = 2000 + in.max_tokens + core::orchestrator_reserve_tokens + 6000;
  auto tight = core::orchestrator_request(in);
  REQUIRE(std::holds_alternative<sdk::chat_request>(tight));
  auto kept = texts(std::get<sdk::chat_request>(tight).messages, role::user);
  REQUIRE_FALSE(kept.empty());
  CHECK(kept.size() < 5);
  CHECK(kept.back() == "And in Norway?");
}

TEST_CASE("conversation: the reflective coordinator reads the same thread and classifies the "
          "question as asked") {
  auto question = follow_up_question("And in Norway?");
  auto text = core::reflective::coordinator_input(question, thread_of(6));
  CHECK(text.find("question 2") == std::string::npos);
  CHECK(text.find("report 2") == std::string::npos);
  CHECK(text.find("User: question 3") != std::string::npos);
  CHECK(text.find("Assistant: report 6") != std::string::npos);
  CHECK(text.find("Earlier research in this conversation") == std::string::npos);
  CHECK(text.substr(text.size() - 14) == "And in Norway?");
  auto context = core::reflective::coordinator_context(question, thread_of(6));
  CHECK(context.follow_up);
  CHECK(context.question == "And in Norway?");
  // A new question without a conversation is no follow-up.
  CHECK_FALSE(core::reflective::coordinator_context("How do heat pumps work?", {}).follow_up);
  CHECK(core::reflective::coordinator_input("How do heat pumps work?", {})
        == "The question to classify:\n\nHow do heat pumps work?");
}

} // namespace conversation_requests_test
