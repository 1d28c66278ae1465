// The research session in process with real plugins: the extractive provider
// over the example corpus end to end, and the fake LLM server scripting the
// orchestrator's control flow (parallel limit, empty first turn, failing
// agents, cycle limit, deadline, clarification).

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/session.hpp"
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
#include <regex>

using namespace quarry;

namespace {

struct session_fixture {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  std::shared_ptr<const core::prompt_library> prompts
    = std::make_shared<core::prompt_library>(core::prompt_library::embedded());
  std::mutex mtx;
  std::vector<core::packet> packets;

  session_fixture() {
    cfg.runtime.data_dir = tmp.path();
    cfg.runtime.scheduler_threads = 2;
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({QUARRY_PLUGIN_DIR});
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~session_fixture() {
    rt.reset();
    services->shutdown();
  }

  actors::llm_provider_actor llm(const std::string& plugin, nlohmann::json config) {
    auto made = registry->make_llm(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    auto settings = actors::llm_actor_settings::from_config("main", {{"retries", 0}});
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

  actors::session_result run(actors::session_spec spec, actors::llm_provider_actor llm,
                             actors::tool_set tools,
                             std::chrono::seconds wait = std::chrono::seconds{120}) {
    auto em = actors::spawn_emitter(rt->system(), spec.session_id);
    auto sink = actors::spawn_line_sink(rt->system(),
                                        [this](const std::string& line, uint64_t) {
                                          std::lock_guard<std::mutex> guard{mtx};
                                          packets.push_back(std::get<core::packet>(
                                            core::decode(line)));
                                        });
    caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
    caf::scoped_actor self{rt->system()};
    actors::session_models models{llm, llm, llm, llm, llm};
    actors::spawn_session(rt->system(), std::move(spec), models, std::move(tools), em,
                          prompts, caf::actor{self});
    actors::session_result out;
    self->receive(
      [&](actors::session_done_atom, actors::session_result& r) { out = std::move(r); },
      caf::after(wait) >> [&] { FAIL("the session never finished"); });
    self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
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

TEST_CASE_FIXTURE(session_fixture, "session researches the example corpus with "
                                   "the extractive provider") {
  actors::session_spec spec;
  spec.session_id = "s1";
  spec.question = "Why does a heat pump's efficiency drop in cold weather, and "
                  "what do manufacturers do about it?";
  spec.current_datetime = "Sunday November 22, 2026";
  auto r = run(spec, llm("extractive", nlohmann::json::object()), corpus_tools());
  CAPTURE(r.failure);
  REQUIRE(r.status == actors::session_status::report);
  CHECK_FALSE(r.plan.empty());
  CHECK_FALSE(r.report.empty());
  REQUIRE_FALSE(r.sources.empty());
  // Every [[n]](url) in the report resolves to a listed source.
  std::regex link{R"(\[\[(\d+)\]\]\(([^)]*)\))"};
  size_t links = 0;
  for (auto it = std::sregex_iterator(r.report.begin(), r.report.end(), link);
       it != std::sregex_iterator(); ++it) {
    ++links;
    auto n = std::stoi((*it)[1]);
    auto found = std::find_if(r.sources.begin(), r.sources.end(),
                              [n](const auto& s) { return s.number == n; });
    REQUIRE(found != r.sources.end());
    CHECK(found->url == (*it)[2].str());
  }
  CHECK(links > 0);
  auto ts = types();
  CHECK(count(ts, "deep_research_plan_start") == 1);
  CHECK(count(ts, "research_agent_start") >= 2);
  CHECK(count(ts, "message_start") == 1);
  CHECK(count(ts, "citation_info") == r.sources.size());
  CHECK(ts.back() == "stop");
  // No more than 3 agents in any round.
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& p : packets)
    if (p.type() == "top_level_branching")
      CHECK(p.obj["num_parallel_branches"].get<int>() <= 3);
}
