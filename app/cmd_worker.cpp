// `quarry worker`: publishes an agent host that runs research agents for
// sessions on other nodes, with this node's own model, tools and limits
// (docs/cluster.md).

#include "cli.hpp"
#include "cluster_publish.hpp"
#include "context.hpp"
#include "research_engine.hpp"

#include "quarry/actors/cluster.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/core/cluster.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <iostream>

namespace quarry::app {

namespace {

/// The research role's provider instance, as `name (plugin)`.
std::string research_model(const core::settings& cfg) {
  std::string name = cfg.llm.default_provider;
  for (const char* role : {"research_agent", "research"})
    if (auto r = cfg.llm.roles.find(role); r != cfg.llm.roles.end()) {
      name = r->second;
      break;
    }
  if (auto p = cfg.llm.providers.find(name); p != cfg.llm.providers.end())
    return name + " (" + p->second.plugin + ")";
  return name;
}

} // namespace

int cmd_worker(context& ctx, const worker_options& opts) {
  auto& cfg = ctx.config.values;
  auto listen = opts.listen.empty() ? cfg.cluster.listen : opts.listen;
  if (listen.empty()) {
    std::cerr << "quarry: worker: say where to listen: --listen HOST:PORT (or "
                 "cluster.listen)\n";
    return exit_usage;
  }
  auto where = core::parse_node_address(listen);
  if (!where) {
    std::cerr << "quarry: --listen: not HOST:PORT: '" << listen << "' (e.g. 127.0.0.1:8701)\n";
    return exit_usage;
  }
  auto tls = cfg.cluster.tls.configured();
  if (auto why = plaintext_refusal(cfg, *where); !why.empty()) {
    std::cerr << "quarry: " << why << "\n";
    return exit_usage;
  }
  // The runtime loads the network layer for a node that listens.
  cfg.cluster.listen = listen;
  auto prepared = research_engine::prepare(ctx, engine_setup{});
  if (auto* rc = std::get_if<int>(&prepared))
    return *rc;
  auto engine = std::get<std::unique_ptr<research_engine>>(std::move(prepared));
  engine->start(nullptr);
  auto& sys = engine->runtime().system();

  actors::agent_host_setup hs;
  hs.capacity = cfg.cluster.max_agents;
  hs.llm = engine->models().research;
  hs.model = research_model(cfg);
  hs.tools = engine->tools();
  hs.prompts = engine->prompts();
  // Named after the address it listens on (completed with the port below).
  hs.name = where->text();
  auto host = actors::spawn_agent_host(sys, hs);
  engine->runtime().add_stoppable(host);
  cluster::agent_host_actor published{host};
  auto published_at = publish_node(sys, published, cfg, *where);
  if (auto* why = std::get_if<std::string>(&published_at)) {
    std::cerr << "quarry: " << *why << "\n";
    host = actors::agent_host_full_actor{};
    published = cluster::agent_host_actor{};
    engine.reset();
    return exit_failure;
  }
  auto port = std::get<uint16_t>(published_at);
  core::node_address actual{where->host, port};
  std::string tools;
  for (const auto& [name, entry] : engine->tools().tools)
    tools += (tools.empty() ? "" : ", ") + name;
  // One write, so a reader never sees half the line.
  std::cerr << ("quarry: worker listening on " + actual.text() + " ("
                + (tls ? "mutual TLS" : "plaintext") + "), " + std::to_string(hs.capacity)
                + " agents at most, model " + hs.model
                + ", tools: " + (tools.empty() ? std::string{"none"} : tools) + "\n")
            << std::flush;

  // Runs until SIGINT or SIGTERM.
  auto signal_number = actors::wait_for_stop_signal();
  // The port closes with the actor system.
  std::cerr << "quarry: worker stopping: running agents are stopped\n";
  host = actors::agent_host_full_actor{};
  published = cluster::agent_host_actor{};
  engine.reset();
  return actors::exit_code_for_signal(signal_number);
}

} // namespace quarry::app
