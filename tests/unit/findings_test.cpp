// What later research steps see of earlier ones: the findings digest, tool
// results renumbered to an agent's documents, and the capped plan.

#include "quarry/core/findings.hpp"
#include "quarry/core/json_check.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <vector>

#include <string>

namespace findings_test {

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

namespace {

// What renumbering gave when it parsed the text and wrote it again.
std::string renumbered_by_parsing(const std::string& text, const std::vector<sdk::document>& docs,
                                  const std::function<int(const sdk::document&)>& number_of) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("results") || !j["results"].is_array())
    return text;
  size_t i = 0;
  for (auto& entry : j["results"]) {
    if (i >= docs.size() || !entry.is_object() || !entry.contains("document"))
      break;
    entry["document"] = number_of(docs[i++]);
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

TEST_CASE("renumber documents: the tools' text changes in its numbers only, as parsing and "
          "writing it again did") {
  auto number = [](const sdk::document& d) { return d.id == "a" ? 12 : d.id == "b" ? 3 : 100; };
  std::vector<sdk::document> docs{doc("a"), doc("b"), doc("c")};
  // As the web searches, open_url and the internal search write it.
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  results.push_back({{"document", 1},
                     {"title", "Kälte \"quoted\" \\ back"},
                     {"updated_at", "2024-01-02"},
                     {"url", "https://example.org/a?x=1&y=[2]"},
                     {"content", "line\nnext\ttab {\"document\": 9} ] } , \u0001 — ✓ 😀"}});
  results.push_back(
    {{"document", 2}, {"title", ""}, {"score", 0.125}, {"tags", {1, 2.5, nullptr}}});
  results.push_back({{"document", 3}, {"title", "third"}, {"nested", {{"document", 4}}}});
  results.push_back({{"document", 4}, {"title", "more results than documents"}});
  auto text = nlohmann::ordered_json{{"results", results}, {"note", "after"}}.dump(2);
  auto out = core::renumber_documents(text, docs, number);
  CHECK(out == renumbered_by_parsing(text, docs, number));
  auto j = nlohmann::json::parse(out);
  CHECK(j["results"][0]["document"] == 12);
  CHECK(j["results"][1]["document"] == 3);
  CHECK(j["results"][2]["document"] == 100);
  CHECK(j["results"][2]["nested"]["document"] == 4);
  CHECK(j["results"][3]["document"] == 4);
  // Sorted keys (nlohmann::json), no documents, an empty list, a byte order mark.
  auto sorted = nlohmann::json{{"results", {{{"content", "c"}, {"document", 1}, {"url", "u"}}}}}
                  .dump(2);
  CHECK(core::renumber_documents(sorted, docs, number)
        == renumbered_by_parsing(sorted, docs, number));
  CHECK(core::renumber_documents(sorted, {}, number) == sorted);
  auto empty = nlohmann::json{{"results", nlohmann::json::array()}}.dump(2);
  CHECK(core::renumber_documents(empty, docs, number) == empty);
  auto bom = "\xEF\xBB\xBF" + sorted;
  CHECK(nlohmann::json::parse(core::renumber_documents(bom, docs, number))["results"][0]["document"]
        == 12);
  // Written another way (compact, other spacing): only the numbers change.
  CHECK(core::renumber_documents(R"({"results":[{"document":1,"t":"x"},{"document" : 2}]})", docs,
                                 number)
        == R"({"results":[{"document":12,"t":"x"},{"document" : 3}]})");
  // A number given as something else becomes a number.
  CHECK(core::renumber_documents(R"({"results":[{"document":"1"},{"document":{"n":[1]}}]})", docs,
                                 number)
        == R"({"results":[{"document":12},{"document":3}]})");
  // An entry that is not an object, or has no number, ends the renumbering.
  CHECK(core::renumber_documents(R"({"results":[{"document":1},"x",{"document":2}]})", docs, number)
        == R"({"results":[{"document":12},"x",{"document":2}]})");
  CHECK(
    core::renumber_documents(R"({"results":[{"document":1},{"t":1},{"document":2}]})", docs, number)
    == R"({"results":[{"document":12},{"t":1},{"document":2}]})");
  // Keys the parser reads otherwise than they are written (escaped or given
  // twice) are renumbered as the parser reads them.
  for (std::string odd :
       {R"({"res\u0075lts":[{"document":1}]})",
        R"({"results":[{"document":9}],"results":[{"document":1},{"document":2}]})",
        R"({"results":[{"document":1,"document":5}]})", R"({"results":[{"docum\u0065nt":1}]})"}) {
    CAPTURE(odd);
    CHECK(core::renumber_documents(odd, docs, number) == renumbered_by_parsing(odd, docs, number));
    CHECK(core::renumber_documents(odd, docs, number) != odd);
  }
  // Not JSON as the parser reads it: unchanged.
  for (std::string bad : {std::string{R"({"results":[{"document":1}]} x)"},
                          std::string{R"({"results":[{"document":1},]})"},
                          std::string{"{\"results\":[{\"document\":1,\"t\":\"\xC3\x28\"}]}"},
                          std::string{R"({"results":[{"document":1,"t":"\ud800"}]})"},
                          std::string{"{\"results\":[{\"document\":1,\"t\":\"a\nb\"}]}"},
                          std::string{R"({"results":[{"document":01}]})"},
                          std::string{R"({"results":[{"document":1})"}}) {
    CAPTURE(bad);
    CHECK(core::renumber_documents(bad, docs, number) == bad);
  }
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

TEST_CASE("json check: agrees with the parser on valid text and on every kind of damage") {
  std::vector<std::string> valid{
    R"({"results": [{"document": 1, "title": "x", "n": -0.5e+10, "z": 0, "t": true}]})",
    R"([1, 2.25, -3E-2, "a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00", null, false, {}, []])",
    "\xEF\xBB\xBF {\"k\": \"K\xC3\xA4lte \xE2\x9C\x93 \xF0\x9F\x98\x80\"}  \n",
    "\"just a string\"",
    "0",
    "-12",
    " \t\r\n[ ] ",
    "{\"a\":{\"b\":[[[]]]}}"};
  for (const auto& text : valid) {
    CAPTURE(text);
    CHECK(nlohmann::json::accept(text));
    CHECK(core::is_json(text, 256));
  }
  // Numbers the parser reads as doubles must be finite.
  for (const auto& number :
       std::vector<std::string>{"1e400", "-1.5E+309", std::string(400, '7'), "1e-400", "0.1e308",
                                std::string(25, '9'), "-" + std::string(300, '1')}) {
    CAPTURE(number);
    CHECK(core::is_json(number, 256) == nlohmann::json::accept(number));
  }
  // What the fuzz target found: a number, then NUL bytes.
  auto nuls = "9" + std::string(30, '\0');
  CHECK(core::is_json(nuls, 256) == nlohmann::json::accept(nuls));
  CHECK(core::is_json(nuls, 256));
  for (const auto& x :
       {std::string(1, '\0'), " " + std::string(1, '\0'), "[1" + std::string(1, '\0') + "]",
        "{\"a\":1}" + std::string(1, '\0') + "junk"}) {
    CAPTURE(x);
    CHECK(core::is_json(x, 256) == nlohmann::json::accept(x));
  }
  CHECK_FALSE(core::is_json("[[[[1]]]]", 3));
  CHECK(core::is_json("[[[1]]]", 3));
  // Every cut and every one-byte change of the valid texts: the validator
  // says what the parser says.
  // A NUL byte too: the parser takes it as the end of its input where a
  // token may begin.
  const std::string bytes
    = std::string{"\"\\{}[],:0123456789.eE+-tfnu aZ\x01\x7F\x80\xBF\xC3\xED\xF0\xFF"}
      + std::string(1, '\0');
  size_t checked = 0;
  for (const auto& text : valid) {
    for (size_t cut = 0; cut < text.size(); ++cut) {
      auto part = text.substr(0, cut);
      CHECK(core::is_json(part, 256) == nlohmann::json::accept(part));
      for (char b : bytes) {
        auto changed = text;
        changed[cut] = b;
        auto inserted = text;
        inserted.insert(cut, 1, b);
        for (const auto& x : {changed, inserted}) {
          ++checked;
          if (core::is_json(x, 256) != nlohmann::json::accept(x)) {
            CAPTURE(x);
            FAIL_CHECK("the validator and the parser disagree");
          }
        }
      }
    }
  }
  CHECK(checked > 10000);
}

} // namespace findings_test
