// A fixture for in-process research tests: host services, the plugins from
// disk, an actor runtime, provider and tool actors, and an emitter whose
// packets are collected.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace quarry::test {

struct research_fixture {
  temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  std::shared_ptr<const core::prompt_library> prompts = std::make_shared<core::prompt_library>(
    core::prompt_library::embedded());
  std::mutex mtx;
  std::vector<core::packet> packets;
  std::shared_ptr<std::promise<void>> drained;

  research_fixture() : research_fixture(false) {
  }

  /// With `networked`, the runtime loads CAF's network layer, as a node of
  /// a cluster does (actors::runtime::networked).
  explicit research_fixture(bool networked) {
    if (networked)
      cfg.cluster.listen = "127.0.0.1:0";
    cfg.runtime.data_dir = tmp.path();
    cfg.runtime.scheduler_threads = 2;
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({QUARRY_PLUGIN_DIR});
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~research_fixture() {
    rt.reset();
    services->shutdown();
  }

  /// A provider actor for `plugin` (no retries).
  actors::llm_provider_actor llm(const std::string& plugin, nlohmann::json config) {
    auto made = registry->make_llm(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    core::llm_limits limits;
    limits.max_retries = 0;
    auto hdl = actors::spawn_llm_provider(rt->system(),
                                          std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                          actors::llm_actor_settings::of("main", limits));
    rt->add_stoppable(hdl);
    return hdl;
  }

  /// internal_search over a fresh index of examples/corpus.
  actors::tool_set corpus_tools() {
    auto db = tmp.file("corpus.db");
    {
      auto opened = corpus::corpus_index::open(db);
      REQUIRE(opened.index);
      auto up = opened.index->update({std::string{QUARRY_SOURCE_DIR} + "/examples/corpus"});
      REQUIRE_FALSE(up.failure);
      REQUIRE(up.added + up.unchanged > 30);
    }
    auto made = registry->make_tool("local_corpus", {{"db", db}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
    auto hdl = actors::spawn_tool_provider(rt->system(), tool,
                                           actors::tool_actor_settings::of("internal_search", {}));
    rt->add_stoppable(hdl);
    actors::tool_set out;
    out.tools["internal_search"] = {hdl, tool->definition(),
                                    registry->find("local_corpus")->tool_kind};
    return out;
  }

  /// An emitter whose packets land in `packets`.
  actors::emitter_actor emitter(const std::string& session = "s") {
    auto em = actors::spawn_emitter(rt->system(), session);
    drained = std::make_shared<std::promise<void>>();
    auto done = drained;
    auto sink = actors::spawn_line_sink(
      rt->system(),
      [this](const std::string& line, uint64_t) {
        std::lock_guard<std::mutex> guard{mtx};
        packets.push_back(std::get<core::packet>(core::decode(line)));
      },
      [done](uint64_t) { done->set_value(); });
    caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
    return em;
  }

  /// Stops the emitter and waits until the sink has every packet.
  void drain(caf::scoped_actor& self, const actors::emitter_actor& em) {
    self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
    REQUIRE(drained->get_future().wait_for(std::chrono::seconds{10}) == std::future_status::ready);
  }

  /// The types of the collected packets, in order.
  std::vector<std::string> types() {
    std::lock_guard<std::mutex> guard{mtx};
    std::vector<std::string> out;
    for (const auto& p : packets)
      out.push_back(p.type());
    return out;
  }
};

/// How often `x` occurs in `xs`.
inline size_t count(const std::vector<std::string>& xs, const std::string& x) {
  return static_cast<size_t>(std::count(xs.begin(), xs.end(), x));
}

} // namespace quarry::test
