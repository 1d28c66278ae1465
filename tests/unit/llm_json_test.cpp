// JSON forms of the SDK's LLM types and tool-definition parsing.

#include "quarry/core/llm_json.hpp"

#include <doctest/doctest.h>

namespace llm_json_test {

using namespace quarry;

TEST_CASE("llm_json round-trips a chat request") {
  sdk::chat_request req;
  req.messages.push_back({sdk::role::system, "be brief", {}, {}, {}, {}, {}});
  sdk::chat_message assistant;
  assistant.author = sdk::role::assistant;
  assistant.reasoning = "thinking";
  assistant.tool_calls.push_back({"call_1", "web_search", "{\"queries\":[\"a\"]}"});
  req.messages.push_back(assistant);
  req.messages.push_back({sdk::role::tool, "results", {}, {}, "call_1", "web_search", {}});
  req.tools.push_back({"web_search", "Searches", {{"type", "object"}}});
  req.choice = sdk::tool_choice::required;
  req.max_tokens = 100;
  req.temperature = 0.5;
  req.reasoning_effort = "low";
  req.role_tag = "research";
  req.model = "m";
  auto back = nlohmann::json(req).get<sdk::chat_request>();
  CHECK(nlohmann::json(back) == nlohmann::json(req));
  REQUIRE(back.messages.size() == 3);
  CHECK(back.messages[1].tool_calls[0].arguments == "{\"queries\":[\"a\"]}");
  CHECK(back.messages[2].tool_call_id == "call_1");
  CHECK(back.choice == sdk::tool_choice::required);
  REQUIRE(back.temperature.has_value());
  CHECK(*back.temperature == 0.5);
  // Without a research context, the JSON has none; with one, it round-trips.
  CHECK_FALSE(nlohmann::json(req).contains("research"));
  req.research.question = "Q?";
  req.research.follow_up = true;
  req.research.task = "T";
  req.research.plan = {"one", "two"};
  req.research.max_parallel_agents = 3;
  req.research.min_steps = 1;
  req.research.max_steps = 4;
  req.research.new_sources = 0;
  req.research.findings = {{"one", "found [1]"}};
  req.research.claims = {{"claim", "evidence"}, {"claim 2", ""}};
  auto again = nlohmann::json(req).get<sdk::chat_request>();
  CHECK(nlohmann::json(again) == nlohmann::json(req));
  CHECK(again.research.new_sources == 0);
  CHECK(again.research.claims.size() == 2);
  CHECK(again.research.findings[0].report == "found [1]");
}

TEST_CASE("llm_json round-trips results and errors") {
  sdk::chat_result res;
  res.text = "hi";
  res.finish = sdk::finish_reason::tool_calls;
  res.usage.input_tokens = 3;
  res.usage.output_tokens = 4;
  res.tool_calls.push_back({"id", "n", "{}"});
  auto back = nlohmann::json(res).get<sdk::chat_result>();
  CHECK(nlohmann::json(back) == nlohmann::json(res));
  auto err = sdk::make_error(sdk::errc::rate_limited, "slow down", 429);
  err.retry_after_ms = 1000;
  err.retry_hint = true;
  auto err2 = nlohmann::json(err).get<sdk::error>();
  CHECK(err2.code == sdk::errc::rate_limited);
  CHECK(err2.http_status == 429);
  CHECK(err2.retry_after_ms == 1000);
  CHECK(err2.retry_hint == true);
}

TEST_CASE("llm_json parses every errc name and rejects unknown ones") {
  for (int i = static_cast<int>(sdk::errc_first); i <= static_cast<int>(sdk::errc_last); ++i) {
    auto code = static_cast<sdk::errc>(i);
    CHECK(core::parse_errc(sdk::to_string(code)) == code);
  }
  CHECK_FALSE(core::parse_errc("nope").has_value());
  CHECK_FALSE(core::parse_tool_choice("maybe").has_value());
}

TEST_CASE("llm_json reads tool definitions in both formats") {
  std::vector<sdk::tool_definition> out;
  auto j = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "a", "description": "A",
      "parameters": {"type": "object"}}},
    {"name": "b"}
  ])");
  REQUIRE_FALSE(core::parse_tool_definitions(j, out).has_value());
  REQUIRE(out.size() == 2);
  CHECK(out[0].name == "a");
  CHECK(out[0].description == "A");
  CHECK(out[1].parameters["type"] == "object");
  std::vector<sdk::tool_definition> bad;
  CHECK(core::parse_tool_definitions(nlohmann::json::object(), bad)
        == std::string{"expected a JSON array of tool definitions"});
  CHECK(core::parse_tool_definitions(nlohmann::json::parse(R"([{"x": 1}])"), bad)
        == std::string{"tool 0: missing \"name\""});
  CHECK(
    core::parse_tool_definitions(nlohmann::json::parse(R"([{"name": "a", "parameters": 3}])"), bad)
    == std::string{"tool 0: \"parameters\" must be a JSON schema object"});
}

TEST_CASE("llm_json: errors honour the server's retry hint but never retry quota") {
  auto e = sdk::make_error(sdk::errc::server_error, "x");
  CHECK(e.retryable());
  e.retry_hint = false;
  CHECK_FALSE(e.retryable());
  auto q = sdk::make_error(sdk::errc::quota, "insufficient_quota", 429);
  q.retry_hint = true;
  CHECK_FALSE(q.retryable());
  auto b = sdk::make_error(sdk::errc::bad_request, "x");
  b.retry_hint = true;
  CHECK(b.retryable());
}

} // namespace llm_json_test
