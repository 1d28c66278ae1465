// The verifier actor (also under ThreadSanitizer): a report checked claim by
// claim against the text of its sources, judged lexically, by the extractive
// provider, and by a model on the fake LLM server (repaired once, then
// judged lexically when it still fails), and cut by its time budget.

#include "research_fixture.hpp"

#include "quarry/actors/verifier.hpp"

#include "support/fake_llm_server.hpp"

#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include <future>

namespace verifier_test {

using namespace quarry;
using namespace std::chrono_literals;
namespace v = core::verification;

namespace {

const char* const report = "Reverse-cycle defrost briefly runs the heat pump backwards to melt "
                           "frost on the outdoor coil [2]. At -15 C a typical unit still "
                           "reaches a COP of about 2 [1]. Heat pumps are made of cheese and "
                           "chocolate [1]. Cold-climate models use variable-speed compressors "
                           "[2].\n";

v::source_text source(int number, std::string title, std::string url, std::string text) {
  v::source_text s;
  s.number = number;
  s.title = std::move(title);
  s.document_id = url;
  s.url = std::move(url);
  s.text = std::move(text);
  return s;
}

std::vector<v::source_text> sources() {
  return {source(1, "Cold climate", "https://a.example/cold",
                 "Air-source heat pumps lose efficiency as the outdoor air gets colder. At -15 C "
                 "a typical unit still reaches a COP of about 2. Cold-climate models use "
                 "variable-speed compressors.\n\nDefrost cycles run when frost builds up on "
                 "the outdoor coil."),
          source(2, "Defrost", "https://b.example/defrost",
                 "Reverse-cycle defrost briefly runs the heat pump backwards to melt frost on "
                 "the outdoor coil. A defrost cycle lasts two to ten minutes.")};
}

struct outcome {
  std::vector<nlohmann::json> claims;
  std::string report;
  nlohmann::json summary;
  /// The claim records of the end (claim_records).
  nlohmann::json records;
};

struct verifier_fixture : test::research_fixture {
  outcome verify(actors::llm_provider_actor judge, std::chrono::milliseconds budget = 60s) {
    auto done = std::make_shared<std::promise<outcome>>();
    auto got = std::make_shared<outcome>();
    auto listener = rt->system().spawn(
      [done, got]() -> actors::verification_listener_actor::behavior_type {
        return {
          [got](actors::verified_claim_atom, const std::string& packet) {
            got->claims.push_back(nlohmann::json::parse(packet));
          },
          [done, got](actors::verified_atom, const std::string& text, const std::string& sum,
                      const std::string& records) {
            got->report = text;
            got->summary = nlohmann::json::parse(sum);
            got->records = nlohmann::json::parse(records);
            done->set_value(*got);
          },
        };
      });
    actors::verifier_spec spec;
    spec.report = report;
    spec.sources = sources();
    spec.budget = budget;
    spec.batch = 2;
    auto rendered = prompts->render("verification_judge", {});
    REQUIRE(std::holds_alternative<std::string>(rendered));
    spec.judge_system = std::get<std::string>(rendered);
    actors::spawn_verifier(rt->system(), spec, std::move(judge), listener);
    auto f = done->get_future();
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    caf::anon_send_exit(listener, caf::exit_reason::user_shutdown);
    return f.get();
  }
};

std::string verdict_of(const outcome& o, size_t i) {
  REQUIRE(i < o.claims.size());
  return o.claims[i]["verdict"].get<std::string>();
}

} // namespace

TEST_CASE_FIXTURE(verifier_fixture, "verifier: lexical judging, re-citing and marking") {
  auto o = verify({});
  REQUIRE(o.claims.size() == 4);
  CHECK(verdict_of(o, 0) == "supported");
  CHECK(verdict_of(o, 1) == "supported");
  CHECK(verdict_of(o, 2) == "unsupported");
  // Cites [2], but [1] says it.
  CHECK(verdict_of(o, 3) == "supported");
  CHECK(o.claims[3]["citations"] == nlohmann::json::array({2}));
  CHECK(o.claims[3]["recited_to"] == 1);
  CHECK(o.claims[0]["evidence"].get<std::string>().find("Reverse-cycle defrost")
        != std::string::npos);
  CHECK(o.report.find("cheese and chocolate [1] *(unverified)*.") != std::string::npos);
  CHECK(o.report.find("variable-speed compressors [1].") != std::string::npos);
  CHECK(o.report.find("## Verification") != std::string::npos);
  CHECK(o.summary["type"] == "verification_summary");
  CHECK(o.summary["claims"] == 4);
  CHECK(o.summary["supported"] == 3);
  CHECK(o.summary["recited"] == 1);
  CHECK(o.summary["unsupported"] == 1);
  // The records of the end: each claim's range in the delivered report and
  // its evidence's range in the source's text.
  REQUIRE(o.records.size() == 4);
  auto texts = sources();
  for (size_t i = 0; i < 4; ++i) {
    const auto& r = o.records[i];
    CAPTURE(r.dump());
    CHECK(r["id"] == i);
    REQUIRE(r["report_begin"].is_number());
    auto b = r["report_begin"].get<size_t>();
    auto e = r["report_end"].get<size_t>();
    REQUIRE(e <= o.report.size());
    CHECK(o.report.substr(b, e - b).find(r["claim"].get<std::string>().substr(0, 10))
          != std::string::npos);
    if (r["source"].is_null())
      continue;
    auto n = r["source"].get<int>();
    const auto& doc = texts.at(static_cast<size_t>(n - 1));
    CHECK(r["document_id"] == doc.document_id);
    auto eb = r["evidence_begin"].get<size_t>();
    auto ee = r["evidence_end"].get<size_t>();
    REQUIRE(ee <= doc.text.size());
    CHECK(doc.text.substr(eb, ee - eb).find(r["evidence"].get<std::string>()) == 0);
  }
  CHECK(
    o.report
      .substr(o.records[2]["report_begin"].get<size_t>(),
              o.records[2]["report_end"].get<size_t>() - o.records[2]["report_begin"].get<size_t>())
      .find("*(unverified)*")
    != std::string::npos);
  CHECK(o.records[3]["recited_to"] == 1);
}

TEST_CASE_FIXTURE(verifier_fixture, "verifier: the extractive provider judges as the lexical "
                                    "judge does") {
  auto o = verify(llm("extractive", nlohmann::json::object()));
  REQUIRE(o.claims.size() == 4);
  CHECK(verdict_of(o, 0) == "supported");
  CHECK(verdict_of(o, 2) == "unsupported");
  CHECK_FALSE(o.summary.contains("judged_lexically"));
}

TEST_CASE_FIXTURE(verifier_fixture, "verifier: a model's verdicts count; an unusable answer is "
                                    "repaired once, then the batch is judged lexically") {
  test::fake_llm_server server;
  auto call = [](const std::string& args) {
    return nlohmann::json{{"tool_calls", {{{"name", "judge_claims"}, {"arguments", args}}}}};
  };
  auto rules = nlohmann::json::array();
  // First batch (claims 0, 1): broken JSON, then a usable repair that calls
  // claim 0 unsupported (the model's word counts, not the lexical one).
  rules.push_back({{"match", {{"message_contains", "Reverse-cycle"}, {"times", 1}}},
                   {"respond", call("{\"verdicts\": [")}});
  rules.push_back({{"match", {{"message_contains", "Reverse-cycle"}}},
                   {"respond", call(R"({"verdicts": [{"id": 0, "verdict": "unsupported",
                      "quote": "melt frost"}, {"id": 1, "verdict": "supported",
                      "quote": "reaches a COP of about 2"}]})")}});
  // Second batch: never usable.
  rules.push_back({{"match", {{"message_contains", "cheese"}}},
                   {"respond", {{"text", "I cannot judge these."}}}});
  REQUIRE_FALSE(server.script(rules));
  auto o = verify(llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}));
  REQUIRE(o.claims.size() == 4);
  // Claim 0: the model said unsupported, and no other source says it.
  CHECK(verdict_of(o, 0) == "unsupported");
  CHECK(verdict_of(o, 1) == "supported");
  // The second batch was judged lexically after the failed repair.
  CHECK(verdict_of(o, 2) == "unsupported");
  CHECK(o.claims[3]["recited_to"] == 1);
  CHECK(o.summary["judged_lexically"] == 1);
  // Two requests for the first batch, two for the second.
  CHECK(server.request_count() == 4);
}

TEST_CASE_FIXTURE(verifier_fixture, "verifier: what the budget does not reach is unverified, "
                                    "and the report still comes") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({{{"respond", {{"text", "late"}}}, {"latency_ms", 20000}}})));
  auto o = verify(llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}), 500ms);
  REQUIRE(o.claims.size() == 4);
  for (size_t i = 0; i < 4; ++i)
    CHECK(verdict_of(o, i) == "unverified");
  CHECK(o.summary["unverified"] == 4);
  CHECK(o.report.find("4 not checked before the deadline") != std::string::npos);
  // Nothing marked: unverified is not unsupported.
  auto body = o.report.substr(0, o.report.find("## Verification"));
  CHECK(body.find("*(unverified)*") == std::string::npos);
  CHECK(body.find("cheese and chocolate [1].") != std::string::npos);
}

} // namespace verifier_test
