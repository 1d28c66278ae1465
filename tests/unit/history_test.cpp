// Unit tests of message-history construction, think_tool streaming and
// tool-argument parsing (core, no CAF).

#include "quarry/core/history.hpp"
#include "quarry/core/think_stream.hpp"
#include "quarry/core/tool_args.hpp"

#include <doctest/doctest.h>

#include <random>

namespace history_test {

using namespace quarry;
using sdk::chat_message;
using sdk::role;

namespace {

chat_message msg(role r, std::string text) {
  chat_message m;
  m.author = r;
  m.content = std::move(text);
  return m;
}

chat_message call(std::vector<std::string> ids) {
  chat_message m;
  m.author = role::assistant;
  for (auto& id : ids)
    m.tool_calls.push_back({id, "web_search", "{\"queries\": [\"q\"]}"});
  return m;
}

chat_message result(std::string id, std::string text = "found") {
  chat_message m;
  m.author = role::tool;
  m.tool_call_id = std::move(id);
  m.tool_name = "web_search";
  m.content = std::move(text);
  return m;
}

// One token per message, for exact budgets.
int64_t one(const chat_message&) {
  return 1;
}

std::vector<std::string> texts(const std::vector<chat_message>& xs) {
  std::vector<std::string> out;
  for (const auto& m : xs) {
    if (m.author == role::tool)
      out.push_back("tool:" + m.tool_call_id);
    else if (!m.tool_calls.empty())
      out.push_back("call:" + m.tool_calls.front().id);
    else
      out.push_back(m.content);
  }
  return out;
}

std::vector<chat_message> ok(const std::variant<std::vector<chat_message>, std::string>& x) {
  if (auto* err = std::get_if<std::string>(&x))
    FAIL(*err);
  return std::get<std::vector<chat_message>>(x);
}

} // namespace

TEST_CASE("history orders system, older turns, custom, context, last user, "
          "tail and reminder") {
  core::history_input in;
  in.system = msg(role::system, "sys");
  in.custom = msg(role::user, "custom");
  in.context = {msg(role::user, "file")};
  in.history = {msg(role::user, "u1"), msg(role::assistant, "a1"), msg(role::user, "u2"),
                call({"c1"}), result("c1")};
  in.reminder = core::make_reminder("remember");
  in.available_tokens = 100;
  auto out = ok(core::build_history(in, one));
  CHECK(texts(out)
        == std::vector<std::string>{"sys", "u1", "a1", "custom", "file", "u2", "call:c1", "tool:c1",
                                    "<system-reminder>\nremember\n</system-reminder>"});
  CHECK(out.back().author == role::user);
}

TEST_CASE("history drops the oldest messages first when the budget is short") {
  core::history_input in;
  in.system = msg(role::system, "sys");
  in.history = {msg(role::user, "u1"), msg(role::assistant, "a1"), msg(role::user, "u2"),
                msg(role::assistant, "a2"), msg(role::user, "u3")};
  in.available_tokens = 4; // system + u3 + two older messages
  auto out = ok(core::build_history(in, one));
  CHECK(texts(out) == std::vector<std::string>{"sys", "u2", "a2", "u3"});
  in.available_tokens = 2;
  CHECK(texts(ok(core::build_history(in, one))) == std::vector<std::string>{"sys", "u3"});
  in.available_tokens = 1;
  auto err = core::build_history(in, one);
  REQUIRE(std::holds_alternative<std::string>(err));
  CHECK(std::get<std::string>(err).find("last user message") != std::string::npos);
  in.available_tokens = 0;
  err = core::build_history(in, one);
  REQUIRE(std::holds_alternative<std::string>(err));
  CHECK(std::get<std::string>(err).find("system prompt") != std::string::npos);
}

TEST_CASE("history keeps the tail after the last user message whole") {
  core::history_input in;
  in.system = msg(role::system, "sys");
  in.history = {msg(role::user, "old"),
                msg(role::user, "task"),
                call({"a", "b"}),
                result("a"),
                result("b"),
                call({"c"}),
                result("c")};
  in.available_tokens = 7;
  CHECK(
    texts(ok(core::build_history(in, one)))
    == std::vector<std::string>{"sys", "task", "call:a", "tool:a", "tool:b", "call:c", "tool:c"});
  in.available_tokens = 6;
  CHECK(std::holds_alternative<std::string>(core::build_history(in, one)));
}

TEST_CASE("history keeps only the last n user turns when asked") {
  core::history_input in;
  in.system = msg(role::system, "sys");
  in.history = {msg(role::user, "u1"), msg(role::assistant, "a1"), msg(role::user, "u2"),
                msg(role::assistant, "a2"), msg(role::user, "u3")};
  in.available_tokens = 100;
  in.last_n_user_messages = 2;
  CHECK(texts(ok(core::build_history(in, one)))
        == std::vector<std::string>{"sys", "u2", "a2", "u3"});
  in.history = {msg(role::assistant, "a")};
  CHECK(std::holds_alternative<std::string>(core::build_history(in, one)));
}

TEST_CASE("history pairs every tool call with exactly one result") {
  auto out = core::pair_tool_results({msg(role::user, "task"), result("ghost"), call({"a", "b"}),
                                      result("b"), result("b", "again"), msg(role::user, "next"),
                                      call({"c"})});
  CHECK(
    texts(out)
    == std::vector<std::string>{"task", "call:a", "tool:b", "tool:a", "next", "call:c", "tool:c"});
  CHECK(out[3].content == core::missing_tool_result_text);
  CHECK(out[2].content == "found");
  // Cutting the older part never leaves a result without its call.
  core::history_input in;
  in.system = msg(role::system, "sys");
  in.history = {msg(role::user, "u1"), call({"x"}), result("x"), msg(role::user, "u2")};
  in.available_tokens = 3; // sys, u2 and one older message: the result
  CHECK(texts(ok(core::build_history(in, one))) == std::vector<std::string>{"sys", "u2"});
}

TEST_CASE("history estimates tokens from text and tool calls") {
  auto small = core::estimate_tokens(msg(role::user, "abcd"));
  auto big = core::estimate_tokens(msg(role::user, std::string(4000, 'a')));
  CHECK(big - small == 999);
  CHECK(core::estimate_tokens(call({"a"})) > core::estimate_tokens(chat_message{}));
}

namespace {

sdk::tool_call_delta frag(std::string args, int index = 0, std::string name = {},
                          std::string id = {}) {
  sdk::tool_call_delta d;
  d.index = index;
  d.name = std::move(name);
  d.id = std::move(id);
  d.arguments = std::move(args);
  return d;
}

} // namespace

TEST_CASE("think stream keeps the whole text, last character included") {
  // Spec 19.11's fragments; Onyx loses the final character.
  core::think_stream ts;
  std::string streamed;
  streamed += ts.feed(frag("{\"reas", 0, "think_tool", "call_1"));
  streamed += ts.feed(frag("oning\": \"Hello"));
  streamed += ts.feed(frag(" world.\\nNext"));
  streamed += ts.feed(frag(" line \\\"q\\\""));
  streamed += ts.feed(frag("\"}"));
  streamed += ts.finish();
  CHECK(streamed == "Hello world.\nNext line \"q\"");
  CHECK(ts.reasoning() == streamed);
  REQUIRE(ts.call());
  CHECK(ts.call()->id == "call_1");
  CHECK(ts.call()->arguments == "{\"reasoning\": \"Hello world.\\nNext line \\\"q\\\"\"}");
}

TEST_CASE("think stream streams early and decodes every escape") {
  core::think_stream ts;
  CHECK(ts.feed(frag("{ \"reasoning\" :\n \"ab", 2, "think_tool")) == "ab");
  CHECK(ts.feed(frag("c\\", 2)) == "c");
  CHECK(ts.feed(frag("u00e9\\/\\ud83d", 2)) == "\xC3\xA9/");
  // A fragment of another call in the same response is not think text.
  CHECK(ts.feed(frag("{\"x\": 1}", 0, "web_search")).empty());
  CHECK(ts.feed(frag("\\ude00 \\t\"", 2)) == "\xF0\x9F\x98\x80 \t");
  CHECK(ts.feed(frag("}", 2)).empty());
  CHECK(ts.finish().empty());
  CHECK(ts.reasoning() == "abc\xC3\xA9/\xF0\x9F\x98\x80 \t");
  // Fragments of other calls are ignored.
  core::think_stream other;
  CHECK(other.feed(frag("{\"queries\": [\"x\"]}", 0, "web_search")).empty());
  CHECK_FALSE(other.found());
  CHECK(other.finish().empty());
  CHECK_FALSE(other.call());
}

TEST_CASE("think stream falls back to the whole arguments") {
  core::think_stream ts;
  CHECK(ts.feed(frag("{\"thought\": \"plan the next", 0, "think_tool")).empty());
  CHECK(ts.feed(frag(" step\"}")).empty());
  CHECK(ts.finish() == "plan the next step");
  core::think_stream later_key;
  later_key.feed(frag("{\"note\": 1, \"reasoning\": \"why\"}", 0, "think_tool"));
  CHECK(later_key.finish() == "why");
}

TEST_CASE("think stream gives the same text for any split") {
  const std::string args = "{\"reasoning\": \"Caf\\u00e9 \\\"x\\\" \\ud83d\\ude00 "
                           "line\\nnext \\\\ end\"}";
  core::think_stream whole;
  auto expected = whole.feed(frag(args, 0, "think_tool")) + whole.finish();
  std::mt19937 rng{7};
  for (int round = 0; round < 200; ++round) {
    core::think_stream ts;
    std::string out;
    size_t i = 0;
    bool first = true;
    while (i < args.size()) {
      auto n = std::min<size_t>(args.size() - i, 1 + rng() % 5);
      out += ts.feed(frag(args.substr(i, n), 0, first ? "think_tool" : ""));
      first = false;
      i += n;
    }
    out += ts.finish();
    CHECK(out == expected);
  }
  CHECK(expected == "Caf\xC3\xA9 \"x\" \xF0\x9F\x98\x80 line\nnext \\ end");
}

TEST_CASE("tool arguments are parsed robustly") {
  using nlohmann::json;
  auto obj = [](std::string_view text) {
    auto r = core::parse_tool_arguments(text);
    if (auto* why = std::get_if<std::string>(&r))
      FAIL(*why);
    return std::get<json>(r);
  };
  CHECK(obj(R"({"queries": ["a"]})") == json{{"queries", {"a"}}});
  CHECK(obj("") == json::object());
  CHECK(obj("  \n") == json::object());
  CHECK(obj("null") == json::object());
  CHECK(obj(R"("{\"queries\": [\"a\"]}")") == json{{"queries", {"a"}}});
  CHECK(obj(R"({"queries": "[\"a\", \"b\"]"})") == json{{"queries", {"a", "b"}}});
  CHECK(obj(R"({"queries": "plain text"})") == json{{"queries", "plain text"}});
  CHECK(obj("```json\n{\"urls\": [\"https://a\"]}\n```") == json{{"urls", {"https://a"}}});
  CHECK(obj(std::string{"{\"q\": \"a\0b\"}", 13}) == json{{"q", "ab"}});
  CHECK(obj("{\"q\": \"\xff\"}") == json{{"q", "\xEF\xBF\xBD"}});
  for (auto bad : {"{not json", "[1, 2]", "42", "\"just a string\""}) {
    CAPTURE(bad);
    auto r = core::parse_tool_arguments(bad);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).find("JSON") != std::string::npos);
  }
  CHECK(core::sanitize_utf8("a\xED\xA0\x80z") == "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
  CHECK(core::sanitize_utf8("\xC3\xA9\xF0\x9F\x98\x80") == "\xC3\xA9\xF0\x9F\x98\x80");
}

TEST_CASE("history appends a tool round: the calls, then one result each") {
  std::vector<chat_message> h{msg(role::user, "task")};
  auto c = call({"a", "b"});
  core::append_tool_round(h, c.tool_calls,
                          [](const sdk::tool_call& x) { return "result of " + x.id; });
  CHECK(texts(h) == std::vector<std::string>{"task", "call:a", "tool:a", "tool:b"});
  CHECK(h[2].content == "result of a");
  CHECK(h[3].tool_name == "web_search");
  CHECK(core::pair_tool_results(h).size() == h.size());
}

} // namespace history_test
