// The agent host of a worker node (quarry/actors/cluster.hpp): starts research
// agents for sessions on other nodes, within its capacity and tools, and stops
// them when their parent goes away.
//
// CAF 0.17 does not fail a pending request when the node that should answer
// goes away, and has no node monitoring (see docs/cluster.md): every request
// to another node here has a finite timeout.

#include "quarry/actors/cluster.hpp"

#include "quarry/cluster/messages.hpp"
#include "quarry/core/cluster.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/core/prompts.hpp"

#include "cluster_tools.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace quarry::actors {

namespace {

using namespace std::chrono_literals;
using detail::tool_names;

// -- the agent host ---------------------------------------------------------

struct host_state {
  agent_host_setup setup;
  /// Running agents, by address.
  std::map<caf::actor_addr, research_agent_actor> running;
  /// The agents of each parent: a parent that goes away (its node lost, or
  /// its session gave up on the attempt) takes its agents with it.
  std::multimap<caf::actor_addr, research_agent_actor> by_parent;
  static inline const char* name = "quarry.agent_host";
};

using host_ptr = agent_host_full_actor::stateful_pointer<host_state>;

std::string node_of(const caf::strong_actor_ptr& sender) {
  if (!sender)
    return "an anonymous sender";
  return "node " + to_string(sender->node());
}

cluster::spawn_reply refuse(host_ptr self, const std::string& why) {
  spdlog::warn("worker: refused an agent from {}: {}", node_of(self->current_sender()), why);
  cluster::spawn_reply r;
  r.refusal = why;
  return r;
}

agent_host_full_actor::behavior_type host_impl(host_ptr self, agent_host_setup setup) {
  self->state.setup = std::move(setup);
  self->set_default_handler([](caf::scheduled_actor* me, caf::message_view& x) {
    spdlog::warn("worker: dropped a message outside the agent host's interface "
                 "from {}: {}",
                 node_of(me->current_sender()),
                 x.content().empty() ? std::string{"(empty)"}
                                     : to_string(x.content()).substr(0, 200));
    return caf::drop(me, x);
  });
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.running.erase(dm.source) > 0) {
      for (auto i = st.by_parent.begin(); i != st.by_parent.end();)
        i = i->second.address() == dm.source ? st.by_parent.erase(i) : std::next(i);
      return;
    }
    auto [first, last] = st.by_parent.equal_range(dm.source);
    for (auto i = first; i != last; ++i) {
      spdlog::info("worker: the parent of an agent went away ({}); stopping the agent",
                   self->system().render(dm.reason));
      self->send(i->second, stop_atom::value);
    }
    st.by_parent.erase(first, last);
  });
  return {
    [=](cluster::spawn_agent_atom, int32_t protocol, agent_spec& spec, agent_parent_actor& parent,
        packet_sink_actor& sink) -> cluster::spawn_reply {
      auto& st = self->state;
      if (protocol != cluster::protocol_version)
        return refuse(self, "the session speaks protocol " + std::to_string(protocol)
                              + ", this worker " + std::to_string(cluster::protocol_version));
      if (!parent || !sink)
        return refuse(self, "the request names no parent or no packet sink");
      core::agent_request_view view;
      view.task = spec.task;
      view.max_cycles = spec.max_cycles;
      view.force_report_after = spec.force_report_after;
      view.hard_timeout = spec.hard_timeout;
      view.context_tokens = spec.context_tokens;
      view.step_max_tokens = spec.step_max_tokens;
      view.report_max_tokens = spec.report_max_tokens;
      if (auto why = core::refuse_agent_request(view); !why.empty())
        return refuse(self, why);
      auto have = tool_names(st.setup.tools);
      if (auto missing = core::missing_tools(have, spec.tools); !missing.empty()) {
        std::string list;
        for (const auto& m : missing)
          list += (list.empty() ? "" : ", ") + m;
        std::string mine;
        for (const auto& h : have)
          mine += (mine.empty() ? "" : ", ") + h;
        return refuse(self, "this worker has no tool " + list
                              + " (it has: " + (mine.empty() ? std::string{"none"} : mine) + ")");
      }
      if (static_cast<int>(st.running.size()) >= st.setup.capacity)
        return refuse(self,
                      "this worker is full (" + std::to_string(st.setup.capacity) + " agents)");
      tool_set given;
      if (spec.tools.empty()) {
        given = st.setup.tools;
      } else {
        for (const auto& name : spec.tools)
          given.tools[name] = st.setup.tools.tools.at(name);
      }
      auto call_id = spec.call_id;
      auto parent_addr = parent.address();
      auto agent = spawn_research_agent(self->system(), std::move(spec), st.setup.llm,
                                        std::move(given), std::move(sink), st.setup.prompts,
                                        std::move(parent));
      self->monitor(agent);
      st.running.emplace(agent.address(), agent);
      if (st.by_parent.count(parent_addr) == 0)
        self->monitor(parent_addr);
      st.by_parent.emplace(parent_addr, agent);
      spdlog::info("worker: agent {} started for {} ({} running)", call_id,
                   node_of(self->current_sender()), st.running.size());
      cluster::spawn_reply r;
      r.agent = agent;
      return r;
    },
    [=](cluster::worker_status_atom) {
      auto& st = self->state;
      cluster::worker_status s;
      s.name = st.setup.name;
      s.version = QUARRY_VERSION_STRING;
      s.protocol = cluster::protocol_version;
      s.capacity = st.setup.capacity;
      s.running = static_cast<int32_t>(st.running.size());
      s.tools = tool_names(st.setup.tools);
      s.model = st.setup.model;
      return s;
    },
    [=](stop_atom) {
      for (auto& [addr, agent] : self->state.running)
        self->send(agent, stop_atom::value);
      self->state.running.clear();
      self->quit();
    },
  };
}

} // namespace

agent_host_full_actor spawn_agent_host(caf::actor_system& sys, agent_host_setup setup) {
  return sys.spawn(host_impl, std::move(setup));
}

} // namespace quarry::actors
