// Research agents across nodes: the agent host a worker publishes, the
// worker directory a session node keeps (connections, heartbeats, placement)
// and the agent runner that stands in for one agent on the session's side
// (places it, relays its packets, places it again when its worker is lost).
// docs/cluster.md describes the whole.

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/cluster/messages.hpp"

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
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

// -- the worker's side ------------------------------------------------------

/// What a worker's agent host runs agents with: its own model and tools.
struct agent_host_setup {
  /// The worker's name in its status (e.g. the address it listens on).
  std::string name;
  /// Agents at once at most.
  int capacity = 8;
  /// The provider of the worker's research role, and its model's name.
  llm_provider_actor llm;
  std::string model;
  /// Every tool of the worker; an agent gets those its session names.
  tool_set tools;
  std::shared_ptr<const core::prompt_library> prompts;
};

/// The agent host with `(stop_atom)` (its agents are stopped, then it
/// quits), for the runtime.
using agent_host_full_actor = cluster::agent_host_actor::extend<caf::reacts_to<stop_atom>>;

/// Spawns an agent host (cluster::agent_host_actor). Whatever a peer sends
/// that is not in the interface is dropped with a log line.
agent_host_full_actor spawn_agent_host(caf::actor_system& sys, agent_host_setup setup);

// -- the session's side -----------------------------------------------------

/// Asks the directory for a worker: `(place_atom, tools, excluded workers)`
/// -> `(host, worker name)`, a null host for none (run it here).
using place_atom = caf::atom_constant<caf::atom("place")>;

/// An agent placed on a worker ended: `(release_atom, worker name)`.
using release_atom = caf::atom_constant<caf::atom("release")>;

/// Tells the directory to report the loss of a worker to a runner:
/// `(watch_atom, worker name, watcher)`; `(unwatch_atom, ...)` undoes it.
using unwatch_atom = caf::atom_constant<caf::atom("unwatch")>;

/// A worker was lost: `(worker_down_atom, worker name, reason)`.
using worker_down_atom = caf::atom_constant<caf::atom("workerdown")>;

/// Asks the directory for its workers as JSON text.
using workers_atom = caf::atom_constant<caf::atom("workers")>;

/// Who is told when a worker is lost.
using worker_watcher_actor
  = caf::typed_actor<caf::reacts_to<worker_down_atom, std::string, std::string>>;

/// The directory of the workers a session node places agents on.
/// - `(place_atom, tools, excluded) -> (host, name)`;
/// - `(release_atom, name)`;
/// - `(watch_atom, name, watcher)`, `(unwatch_atom, name, watcher)`;
/// - `(workers_atom) -> json`: each worker's name, state, capacity,
///   running and outstanding agents;
/// - `(stop_atom)`: quits.
using worker_directory_actor = caf::typed_actor<
  caf::replies_to<place_atom, std::vector<std::string>,
                  std::vector<std::string>>::with<cluster::agent_host_actor, std::string>,
  caf::reacts_to<release_atom, std::string>,
  caf::reacts_to<watch_atom, std::string, worker_watcher_actor>,
  caf::reacts_to<unwatch_atom, std::string, worker_watcher_actor>,
  caf::replies_to<workers_atom>::with<std::string>, caf::reacts_to<stop_atom>>;

/// How a directory reaches its workers.
struct directory_setup {
  /// `HOST:PORT` of every worker, in the order of preference on a tie.
  std::vector<std::string> workers;
  /// Status requests this often; a worker silent this long is lost.
  std::chrono::milliseconds heartbeat{std::chrono::seconds{1}};
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds{5}};
  /// Longest wait for a connection.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds{10}};
};

/// Spawns the directory. It connects to every worker at once and again
/// (with backoff) whenever one is lost or could not be reached, so a worker
/// started later or restarted is used without restarting this node.
worker_directory_actor spawn_worker_directory(caf::actor_system& sys, directory_setup setup);

/// What a runner needs besides what a local agent needs.
struct runner_setup {
  worker_directory_actor directory;
  /// Longest wait for a worker to start the agent.
  std::chrono::milliseconds spawn_timeout{std::chrono::seconds{10}};
  /// Attempts at most (first placement included) before the agent fails.
  int max_attempts = 3;
};

/// Spawns a runner for one agent: it places the agent on a worker of the
/// directory (or runs it here when none can), relays its packets to
/// `emitter` and its result to `parent` exactly once, and places it again
/// when its worker is lost (kill, partition, silence past the heartbeat
/// timeout) or refuses it: the packets of the lost attempt are then marked
/// by an `agent_superseded` packet at the agent's placement, and late
/// packets of a lost attempt are dropped. Behaves toward its parent as a
/// local agent does (report_now, stop, exit).
research_agent_actor
spawn_agent_runner(caf::actor_system& sys, agent_spec spec, llm_provider_actor llm, tool_set tools,
                   packet_sink_actor emitter, std::shared_ptr<const core::prompt_library> prompts,
                   agent_parent_actor parent, runner_setup setup);

} // namespace quarry::actors
