// What later research steps see of earlier ones: the findings digest, tool
// results renumbered to an agent's documents, and the capped plan.

#include "quarry/core/findings.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

using namespace quarry;

namespace {

sdk::document doc(std::string id) {
  sdk::document d;
  d.id = std::move(id);
  return d;
}

} // namespace

TEST_CASE("findings digest: markers removed, one line per task, cut to a share") {
  core::citation_mapping global;
  global.insert(1, core::document_ref{"a", "https://a.example/", "A"});
  CHECK(core::findings_digest({}, global).empty());
  auto one = core::findings_digest(
    {{"Research the cold.", "Efficiency falls [1].\nDefrost helps."}}, global);
  CHECK(one.rfind("Earlier research agents already found the following", 0) == 0);
  CHECK(one.find("\n- Research the cold.: Efficiency falls. Defrost helps.") != std::string::npos);
  CHECK(one.find("[1]") == std::string::npos);
  // Twelve long reports share the budget: each is cut at a word, with "...".
  std::vector<std::pair<std::string, std::string>> many;
  std::string words;
  for (int i = 0; i < 200; ++i)
    words += "word" + std::to_string(i) + " ";
  for (int i = 0; i < 12; ++i)
    many.emplace_back("Task " + std::to_string(i), words);
  auto digest = core::findings_digest(many, global);
  size_t lines = 0;
  for (size_t pos = 0; (pos = digest.find("\n- ", pos)) != std::string::npos; ++pos) {
    ++lines;
    auto end = digest.find('\n', pos + 1);
    auto line = digest.substr(pos + 1,
                              end == std::string::npos ? std::string::npos : end - pos - 1);
    CHECK(line.size() <= 2 + std::string{"Task 11: "}.size() + 200 + 4);
    CHECK(line.substr(line.size() - 4) == " ...");
  }
  CHECK(lines == 12);
}

TEST_CASE("renumber documents: each result gets its document's number") {
  auto text = nlohmann::json{{"results",
                              {{{"document", 1}, {"title", "x"}},
                               {{"document", 2}, {"title", "y"}}}}}
                .dump();
  auto out = core::renumber_documents(text, {doc("a"), doc("b")},
                                      [](const sdk::document& d) { return d.id == "a" ? 7 : 9; });
  auto j = nlohmann::json::parse(out);
  CHECK(j["results"][0]["document"] == 7);
  CHECK(j["results"][1]["document"] == 9);
  CHECK(j["results"][0]["title"] == "x");
  // Fewer documents than results: the rest keep their numbers.
  auto partial = nlohmann::json::parse(
    core::renumber_documents(text, {doc("a")}, [](const sdk::document&) { return 5; }));
  CHECK(partial["results"][0]["document"] == 5);
  CHECK(partial["results"][1]["document"] == 2);
  // Anything else is returned as it is, deep nesting included.
  auto number = [](const sdk::document&) { return 1; };
  CHECK(core::renumber_documents("not json", {doc("a")}, number) == "not json");
  CHECK(core::renumber_documents("[1, 2]", {doc("a")}, number) == "[1, 2]");
  CHECK(core::renumber_documents(R"({"results": 3})", {doc("a")}, number) == R"({"results": 3})");
  auto deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(core::renumber_documents(deep, {doc("a")}, number) == deep);
}

TEST_CASE("plan capping keeps the first steps, also while the plan streams") {
  std::string plan = "Intro line\n1. Cold air\n2. Defrost\n  3. Noise\n4. Prices\n";
  CHECK(core::cap_plan(plan, 2) == "Intro line\n1. Cold air\n2. Defrost");
  CHECK(core::cap_plan(plan, 3) == "Intro line\n1. Cold air\n2. Defrost\n  3. Noise");
  CHECK(core::cap_plan(plan, 6) == "Intro line\n1. Cold air\n2. Defrost\n  3. Noise\n4. Prices");
  CHECK(core::plan_cap_end(plan, 6) == std::string::npos);
  CHECK(core::plan_cap_end(plan, 2) == plan.find("  3. Noise"));
  // While streaming: the third step is known once its first digit arrives.
  CHECK(core::plan_cap_end("1. A\n2. B\n   ", 2) == std::string::npos);
  CHECK(core::plan_cap_end("1. A\n2. B\n   3", 2) == 10);
  CHECK(core::cap_plan("", 2).empty());
}

TEST_CASE("plan capping while streaming shows what cap_plan keeps, however it is split") {
  std::string plan = "Intro line\n1. Cold air\n2. Defrost\n  3. Noise\n4. Prices\n";
  for (size_t step : {size_t{1}, size_t{2}, size_t{5}, plan.size()}) {
    core::plan_stream_cap cap{2};
    std::string shown;
    for (size_t i = 0; i < plan.size(); i += step)
      shown += cap.feed(std::string_view{plan}.substr(i, step));
    CAPTURE(step);
    CHECK(cap.cut());
    CHECK(shown == "Intro line\n1. Cold air\n2. Defrost\n");
  }
  core::plan_stream_cap all{6};
  CHECK(all.feed(plan) == plan);
  CHECK_FALSE(all.cut());
  // A plan of a million one-byte pieces without a step: linear, all shown.
  core::plan_stream_cap long_text{2};
  size_t total = 0;
  for (int i = 0; i < 1000000; ++i)
    total += long_text.feed(i % 80 == 79 ? "\n" : "x").size();
  CHECK(total == 1000000);
}
