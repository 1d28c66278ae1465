// The research agent in process with real plugins loaded from disk: the
// extractive provider and internal_search over a real corpus index, or the
// fake LLM server for failures. Checks the packets, the report, the
// agent-local citations and the failure path.

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <mutex>

using namespace quarry;

namespace {

struct agent_fixture {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  std::shared_ptr<const core::prompt_library> prompts
    = std::make_shared<core::prompt_library>(core::prompt_library::embedded());
  std::mutex mtx;
  std::vector<core::packet> packets;

  agent_fixture() {
    cfg.runtime.data_dir = tmp.path();
    cfg.runtime.scheduler_threads = 2;
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({QUARRY_PLUGIN_DIR});
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~agent_fixture() {
    rt.reset();
    services->shutdown();
  }

  actors::llm_provider_actor llm(const std::string& plugin, nlohmann::json config) {
    auto made = registry->make_llm(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    auto settings = actors::llm_actor_settings::from_config("main", {{"retries", 0}});
    REQUIRE(std::holds_alternative<actors::llm_actor_settings>(settings));
    auto hdl = actors::spawn_llm_provider(
      rt->system(), std::get<std::shared_ptr<sdk::llm_provider>>(made),
      std::get<actors::llm_actor_settings>(settings));
    rt->add_stoppable(caf::actor_cast<caf::actor>(hdl));
    return hdl;
  }

  actors::tool_set corpus_tools() {
    auto db = tmp.file("corpus.db");
    {
      auto opened = corpus::corpus_index::open(db);
      REQUIRE(opened.index);
      auto up = opened.index->update({std::string{QUARRY_SOURCE_DIR} + "/examples/corpus"});
      REQUIRE_FALSE(up.failure);
      REQUIRE(up.added > 30);
    }
    auto made = registry->make_tool("local_corpus", {{"db", db}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
    auto settings = actors::tool_actor_settings::from_config("internal_search",
                                                             nlohmann::json::object());
    auto hdl = actors::spawn_tool_provider(
      rt->system(), tool, std::get<actors::tool_actor_settings>(settings));
    rt->add_stoppable(caf::actor_cast<caf::actor>(hdl));
    actors::tool_set out;
    out.tools["internal_search"] = {hdl, tool->definition()};
    return out;
  }

  actors::emitter_actor emitter() {
    auto em = actors::spawn_emitter(rt->system(), "s");
    auto sink = actors::spawn_line_sink(rt->system(),
                                        [this](const std::string& line, uint64_t) {
                                          std::lock_guard<std::mutex> guard{mtx};
                                          packets.push_back(std::get<core::packet>(
                                            core::decode(line)));
                                        });
    caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
    return em;
  }

  actors::agent_result run(actors::agent_spec spec, actors::llm_provider_actor llm,
                           actors::tool_set tools, actors::emitter_actor em) {
    caf::scoped_actor self{rt->system()};
    actors::spawn_research_agent(rt->system(), std::move(spec), llm, std::move(tools),
                                 em, prompts, caf::actor{self});
    actors::agent_result out;
    self->receive(
      [&](actors::agent_done_atom, actors::agent_result& r) { out = std::move(r); },
      caf::after(std::chrono::seconds{60}) >> [&] { FAIL("agent never finished"); });
    self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
    // Let the sink drain.
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    return out;
  }

  std::vector<std::string> types() {
    std::lock_guard<std::mutex> guard{mtx};
    std::vector<std::string> out;
    for (const auto& p : packets)
      out.push_back(p.type());
    return out;
  }
};

size_t count(const std::vector<std::string>& xs, const std::string& x) {
  return static_cast<size_t>(std::count(xs.begin(), xs.end(), x));
}

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
