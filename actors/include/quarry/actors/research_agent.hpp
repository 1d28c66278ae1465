// The research agent: works on one task with the search and reading tools,
// then writes an intermediate report with agent-local citation numbers.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/cluster/messages.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::core {
class prompt_library;
} // namespace quarry::core

namespace quarry::actors {

/// Sent by an agent to its parent when it is done: `(agent_done_atom,
/// agent_result)`.
using cluster::agent_done_atom;

/// Tells an agent to stop researching and write its report now.
using cluster::report_now_atom;

/// The tools a session offers its agents, by name.
struct tool_set {
  struct entry {
    tool_provider_actor actor;
    sdk::tool_definition definition;
    /// What the tool is (its plugin's QUARRY_TOOL_KIND): searches and page
    /// readers are treated alike whatever their names.
    sdk::tool_kind kind = sdk::tool_kind::other;
  };
  /// By the name the model calls them, e.g. `web_search`, `open_url`,
  /// `internal_search` or a plugin's own.
  std::map<std::string, entry> tools;

  /// Returns whether a tool of `kind` is in the set.
  bool has(sdk::tool_kind kind) const {
    for (const auto& [name, e] : tools)
      if (e.kind == kind)
        return true;
    return false;
  }
};

/// What an agent is asked to do and within which limits.
using cluster::agent_spec;

/// What an agent produced.
using cluster::agent_result;

/// What an agent's parent receives: `(agent_done_atom, agent_result)`, once.
using cluster::agent_parent_actor;

/// The interface of a research agent: `(report_now_atom)` from its parent,
/// `(stop_atom)` (it cancels its model call and quits without a result), and
/// the deltas of its LLM calls. Converts to the `remote_agent_actor` that
/// another node sees.
using research_agent_actor = cluster::remote_agent_actor::extend_with<llm_listener_actor>;

/// The agent's hard time limit expired.
using agent_timeout_atom = caf::atom_constant<caf::atom("agenttime")>;

/// The agent's whole interface: the public one and its own timer and step
/// trigger (`caf::tick_atom`).
using research_agent_full_actor = research_agent_actor::extend<caf::reacts_to<caf::tick_atom>,
                                                               caf::reacts_to<agent_timeout_atom>>;

/// Spawns an agent that starts at once, sends its packets to `packets` and
/// `(agent_done_atom, agent_result)` to `parent` exactly once, then quits
/// (unless it is stopped, which sends no result).
research_agent_actor spawn_research_agent(caf::actor_system& sys, agent_spec spec,
                                          llm_provider_actor llm, tool_set tools,
                                          packet_sink_actor packets,
                                          std::shared_ptr<const core::prompt_library> prompts,
                                          agent_parent_actor parent);

} // namespace quarry::actors
