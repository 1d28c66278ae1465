// The research agent: works on one task with the search and reading tools,
// then writes an intermediate report with agent-local citation numbers.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/tool_provider.hpp"

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
using agent_done_atom = caf::atom_constant<caf::atom("agentdone")>;

/// Tells an agent to stop researching and write its report now.
using report_now_atom = caf::atom_constant<caf::atom("reportnow")>;

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
struct agent_spec {
  /// The orchestrator's tool call id (echoed in the result).
  std::string call_id;
  std::string task;
  /// What earlier agents found, appended to the agent's system prompt (never
  /// to the task, which becomes search queries); empty for none.
  std::string context;
  /// Placement of the agent's packets: turn and tab.
  int turn_index = 0;
  int tab_index = 0;
  /// Research cycles (LLM steps with tools; think steps do not count).
  int max_cycles = 8;
  /// The model reasons natively (no think_tool then).
  bool reasoning_model = false;
  /// After this long the agent stops researching and writes its report.
  std::chrono::milliseconds force_report_after{std::chrono::minutes{12}};
  /// After this long the agent gives up, report or not.
  std::chrono::milliseconds hard_timeout{std::chrono::minutes{20}};
  /// Prompt tokens the model accepts.
  int64_t context_tokens = 128000;
  /// Output limits of a research step and of the report.
  int64_t step_max_tokens = 1000;
  int64_t report_max_tokens = 10000;
  /// The date as the prompts state it.
  std::string current_datetime;
};

/// What an agent produced.
struct agent_result {
  std::string call_id;
  int tab_index = 0;
  /// Whether a report was written.
  bool ok = false;
  /// The intermediate report with agent-local `[n]` markers.
  std::string report;
  /// The documents the report cites, by agent-local number (first-cited
  /// order is the order of `cited`).
  std::vector<std::pair<int, sdk::document>> cited;
  /// Why the agent failed (when `ok` is false).
  std::string failure;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agent_result& x) {
  return f(caf::meta::type_name("quarry.agent_result"), x.call_id, x.tab_index,
           x.ok, x.report, x.cited, x.failure);
}

/// What an agent's parent receives: `(agent_done_atom, agent_result)`, once.
using agent_parent_actor
  = caf::typed_actor<caf::reacts_to<agent_done_atom, agent_result>>;

/// The interface of a research agent: `(report_now_atom)` from its parent,
/// and the deltas of its LLM calls.
using research_agent_actor = caf::typed_actor<caf::reacts_to<report_now_atom>>::
  extend_with<llm_listener_actor>;

/// The agent's hard time limit expired.
using agent_timeout_atom = caf::atom_constant<caf::atom("agenttime")>;

/// The agent's whole interface: the public one and its own timer and step
/// trigger (`caf::tick_atom`).
using research_agent_full_actor = research_agent_actor::extend<
  caf::reacts_to<caf::tick_atom>, caf::reacts_to<agent_timeout_atom>>;

/// Spawns an agent that starts at once and sends `(agent_done_atom,
/// agent_result)` to `parent` exactly once, then quits.
research_agent_actor
spawn_research_agent(caf::actor_system& sys, agent_spec spec,
                     llm_provider_actor llm, tool_set tools, emitter_actor emitter,
                     std::shared_ptr<const core::prompt_library> prompts,
                     agent_parent_actor parent);

} // namespace quarry::actors
