// Checkpoints of the orchestrator strategy (core, no actors).

#include "quarry/core/checkpoint.hpp"

#include <doctest/doctest.h>

namespace checkpoint_test {

using namespace quarry;
using nlohmann::json;

namespace {

core::research_checkpoint sample() {
  core::research_checkpoint c;
  c.phase = core::checkpoint_phase::orchestrate;
  c.plan = "1. Find the sources\n2. Compare them";
  c.plan_turn = 1;
  c.start_turn = 2;
  c.cycle = 2;
  c.reasoning_cycles = 1;
  c.retried_empty = true;
  sdk::chat_message call;
  call.author = sdk::role::assistant;
  call.tool_calls.push_back({"call_1", "research_agent", R"({"task":"CRDTs"})"});
  sdk::chat_message answer;
  answer.author = sdk::role::tool;
  answer.tool_call_id = "call_1";
  answer.tool_name = "research_agent";
  answer.content = "CRDTs converge [1]. \xff bytes stay";
  c.orchestration = {call, answer};
  sdk::document doc;
  doc.id = "https://example.org/crdt";
  doc.url = "https://example.org/crdt";
  doc.title = "CRDTs";
  doc.content = "Conflict-free replicated data types converge.";
  doc.kind = sdk::source_kind::web;
  c.documents[doc.id] = doc;
  c.global.insert(1, core::make_document_ref(doc));
  c.findings.emplace_back("CRDTs", "CRDTs converge [1].");
  c.notices.push_back("the plan had more than 6 steps");
  c.elapsed_ms = 93'000;
  return c;
}

core::research_checkpoint parsed(const json& j) {
  auto r = core::checkpoint_from_json(j);
  if (auto* why = std::get_if<std::string>(&r))
    FAIL("refused: " << *why);
  return std::get<core::research_checkpoint>(std::move(r));
}

std::string refusal(const json& j) {
  auto r = core::checkpoint_from_json(j);
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

} // namespace

TEST_CASE("checkpoint: every field survives JSON, through text too") {
  auto c = sample();
  auto text = core::to_json(c).dump(-1, ' ', false, json::error_handler_t::replace);
  auto back = parsed(json::parse(text));
  CHECK(back.phase == c.phase);
  CHECK(back.plan == c.plan);
  CHECK(back.plan_turn == 1);
  CHECK(back.start_turn == 2);
  CHECK(back.cycle == 2);
  CHECK(back.reasoning_cycles == 1);
  CHECK(back.retried_empty);
  REQUIRE(back.orchestration.size() == 2);
  CHECK(back.orchestration[0].author == sdk::role::assistant);
  REQUIRE(back.orchestration[0].tool_calls.size() == 1);
  CHECK(back.orchestration[0].tool_calls[0].id == "call_1");
  CHECK(back.orchestration[0].tool_calls[0].arguments == R"({"task":"CRDTs"})");
  CHECK(back.orchestration[1].tool_call_id == "call_1");
  CHECK(back.orchestration[1].content.rfind("CRDTs converge [1].", 0) == 0);
  CHECK(back.global == c.global);
  REQUIRE(back.documents.size() == 1);
  CHECK(back.documents.begin()->second.content == c.documents.begin()->second.content);
  CHECK(back.findings == c.findings);
  CHECK(back.notices == c.notices);
  CHECK(back.elapsed_ms == 93'000);
  auto final = c;
  final.phase = core::checkpoint_phase::final_report;
  CHECK(parsed(core::to_json(final)).phase == core::checkpoint_phase::final_report);
}

TEST_CASE("checkpoint: another version, a missing field or a wrong type is refused") {
  auto j = core::to_json(sample());
  auto v = j;
  v["version"] = 2;
  CHECK(refusal(v).find("version 2") != std::string::npos);
  for (const char* key :
       {"plan", "cycle", "orchestration", "citations", "phase", "elapsed_ms", "retried_empty"}) {
    CAPTURE(key);
    auto missing = j;
    missing.erase(key);
    CHECK(refusal(missing).find(key) != std::string::npos);
    auto wrong = j;
    wrong[key] = json::object({{"x", 1}});
    CHECK(refusal(wrong).find(key) != std::string::npos);
  }
  auto negative = j;
  negative["cycle"] = -1;
  CHECK(refusal(negative).find("cycle: out of range") != std::string::npos);
  auto huge = j;
  huge["cycle"] = 1ULL << 40;
  CHECK(refusal(huge).find("cycle: out of range") != std::string::npos);
  auto phase = j;
  phase["phase"] = "dance";
  CHECK(refusal(phase).find("unknown 'dance'") != std::string::npos);
  CHECK(refusal(json::array()).find("object") != std::string::npos);
}

TEST_CASE("checkpoint: a citation numbered twice or naming no stored document is refused") {
  auto j = core::to_json(sample());
  auto twice = j;
  twice["citations"].push_back(twice["citations"][0]);
  CHECK(refusal(twice).find("has two numbers") != std::string::npos);
  auto same_number = j;
  auto other = same_number["citations"][0];
  other["document_id"] = "doc-2";
  same_number["citations"].push_back(other);
  same_number["documents"].push_back({{"key", "doc-2"}, {"id", "doc-2"}});
  CHECK(refusal(same_number).find("number 1 is used twice") != std::string::npos);
  auto unknown = j;
  unknown["citations"][0]["document_id"] = "nowhere";
  unknown["citations"][0]["link"] = "https://nowhere.example";
  CHECK(refusal(unknown).find("not in documents") != std::string::npos);
  auto zero = j;
  zero["citations"][0]["number"] = 0;
  CHECK(refusal(zero).find("below 1") != std::string::npos);
  auto dup_doc = j;
  dup_doc["documents"].push_back(dup_doc["documents"][0]);
  CHECK(refusal(dup_doc).find("twice") != std::string::npos);
}

TEST_CASE("checkpoint: a resumed session gets what was left, but never nothing") {
  // 30 minutes, 10 used: 20 left.
  CHECK(core::resume_deadline_ms(1'800'000, 600'000) == 1'200'000);
  // All used: a tenth of the deadline.
  CHECK(core::resume_deadline_ms(1'800'000, 1'800'000) == 180'000);
  CHECK(core::resume_deadline_ms(1'800'000, 9'000'000) == 180'000);
  // Short deadlines: at least a minute, never more than the deadline.
  CHECK(core::resume_deadline_ms(120'000, 119'000) == 60'000);
  CHECK(core::resume_deadline_ms(30'000, 30'000) == 30'000);
  CHECK(core::resume_deadline_ms(0, 0) == 0);
}

} // namespace checkpoint_test
