// The research agent in process with real plugins loaded from disk: the
// extractive provider and internal_search over a real corpus index, or the
// fake LLM server for failures. Checks the packets, the report, the
// agent-local citations and the failure path.

#include "research_fixture.hpp"

#include "support/fake_llm_server.hpp"

using namespace quarry;
using test::count;

namespace {

struct agent_fixture : test::research_fixture {
  actors::agent_result run(actors::agent_spec spec, actors::llm_provider_actor llm,
                           actors::tool_set tools, actors::emitter_actor em) {
    caf::scoped_actor self{rt->system()};
    actors::spawn_research_agent(rt->system(), std::move(spec), llm, std::move(tools),
                                 em, prompts, caf::actor{self});
    actors::agent_result out;
    self->receive(
      [&](actors::agent_done_atom, actors::agent_result& r) { out = std::move(r); },
      caf::after(std::chrono::seconds{60}) >> [&] { FAIL("agent never finished"); });
    drain(self, em);
    return out;
  }
};

} // namespace

TEST_CASE_FIXTURE(agent_fixture, "research agent searches the corpus and "
                                 "reports with local citations") {
  actors::agent_spec spec;
  spec.call_id = "call_1";
  spec.task = "Why does the efficiency of an air-source heat pump fall in cold "
              "weather, and how do defrost cycles work?";
  spec.turn_index = 3;
  spec.tab_index = 1;
  spec.current_datetime = "Sunday November 22, 2026";
  auto r = run(spec, llm("extractive", nlohmann::json::object()), corpus_tools(),
               emitter());
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  CHECK(r.call_id == "call_1");
  CHECK(r.tab_index == 1);
  CHECK(r.report.find('[') != std::string::npos);
  REQUIRE_FALSE(r.cited.empty());
  for (const auto& [n, doc] : r.cited) {
    CAPTURE(n);
    CHECK(r.report.find("[" + std::to_string(n)) != std::string::npos);
    CHECK(doc.id.rfind("corpus:", 0) == 0);
    CHECK(doc.url.rfind("file://", 0) == 0);
  }
  auto ts = types();
  REQUIRE_FALSE(ts.empty());
  CHECK(ts.front() == "research_agent_start");
  CHECK(count(ts, "search_tool_start") >= 1);
  CHECK(count(ts, "search_tool_queries_delta") == count(ts, "search_tool_start"));
  CHECK(count(ts, "search_tool_documents_delta") == count(ts, "search_tool_start"));
  CHECK(count(ts, "intermediate_report_start") == 1);
  CHECK(count(ts, "intermediate_report_delta") >= 1);
  CHECK(count(ts, "intermediate_report_cited_docs") == 1);
  CHECK(ts.back() == "section_end");
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& p : packets) {
    CAPTURE(p.type());
    CHECK(p.where.turn_index == 3);
    CHECK(p.where.tab_index == 1);
    auto nested = p.type().rfind("search_tool", 0) == 0;
    if (nested)
      CHECK(p.where.sub_turn_index.has_value());
    if (p.type().rfind("intermediate_report", 0) == 0 || p.type() == "research_agent_start")
      CHECK_FALSE(p.where.sub_turn_index.has_value());
  }
}

TEST_CASE_FIXTURE(agent_fixture, "research agent reports a failing model as a "
                                 "failure, with an error packet") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 400, "body": {"error": {"message": "bad request",
     "type": "invalid_request_error"}}}}
  ])")));
  actors::agent_spec spec;
  spec.call_id = "call_9";
  spec.task = "anything";
  auto r = run(spec,
               llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}),
               corpus_tools(), emitter());
  CHECK_FALSE(r.ok);
  CHECK(r.call_id == "call_9");
  CHECK(r.failure.find("model call failed") != std::string::npos);
  auto ts = types();
  CHECK(count(ts, "research_agent_start") == 1);
  CHECK(count(ts, "error") == 1);
}
