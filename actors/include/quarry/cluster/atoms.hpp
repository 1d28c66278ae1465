// The atoms of Quarry's node interfaces (CAF 0.17: at most 10 characters).
// Part of the installed `quarry-cluster` header set.

#pragma once

#include <caf/atom.hpp>

namespace quarry::cluster {

/// Asks a long-lived actor (or a remote agent) to stop.
using stop_atom = caf::atom_constant<caf::atom("stop")>;

/// A packet on its way to an emitter or a subscriber.
using packet_atom = caf::atom_constant<caf::atom("packet")>;

/// Sent by an agent to its parent when it is done: `(agent_done_atom,
/// agent_result)`.
using agent_done_atom = caf::atom_constant<caf::atom("agentdone")>;

/// Tells an agent to stop researching and write its report now.
using report_now_atom = caf::atom_constant<caf::atom("reportnow")>;

/// Asks an agent host to start an agent.
using spawn_agent_atom = caf::atom_constant<caf::atom("spawnagent")>;

/// Asks an agent host for its status.
using worker_status_atom = caf::atom_constant<caf::atom("wstatus")>;

/// Starts a research on a session node.
using research_atom = caf::atom_constant<caf::atom("research")>;

/// Asks a session node for a research's result (answered when it ends).
using result_atom = caf::atom_constant<caf::atom("result")>;

/// Cancels a research on a session node.
using cancel_research_atom = caf::atom_constant<caf::atom("rcancel")>;

} // namespace quarry::cluster
