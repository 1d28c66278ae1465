// One run of a research session, the same for every front end
// (`quarry research`, `quarry serve`): the session row is created (or set
// running again) through the store actor, the emitter and the session are
// spawned, sinks are attached, and at the end every packet, the report and
// the state are in the store before the emitter stops and the owner hears
// of it.

#pragma once

#include "session_store.hpp"

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/session.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <optional>
#include <string>
#include <vector>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::app {

class research_engine;

/// What a run researches and how it starts.
struct run_setup {
  /// The session's id (store::make_session_id(); `cli` without a store).
  std::string id;
  /// A new session: its row is created first (with `parent`, a follow-up's
  /// parent session, or empty).
  bool create = false;
  std::string parent;
  /// The options the session runs with (and that are stored with a new
  /// row).
  stored_options options;
  /// A resumed session: its checkpoint; the row is set running first.
  std::optional<resume_info> resume;
  /// The seq of the run's first packet (the last stored one + 1).
  uint64_t first_seq = 1;
  /// Sinks that get every packet of the run, from its first.
  std::vector<actors::line_sink_actor> sinks;
};

/// How a run ended.
struct run_outcome {
  std::string id;
  /// False: the row could not be created (`store_error` says why) and
  /// nothing ran.
  bool ran = true;
  actors::session_result result;
  /// The state stored: state_after(result), or `cancelled` when the run was
  /// stopped with the reason `user_cancelled`.
  std::string state;
  /// Empty, or why the store could not keep the run.
  std::string store_error;
  /// The seq of the run's last packet (first_seq - 1 when it sent none).
  uint64_t last_seq = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_outcome& x) {
  return f(caf::meta::type_name("run_outcome"), x.id, x.ran, x.result, x.state, x.store_error,
           x.last_seq);
}

/// Sent by a run to its owner once, at its end: `(run_done_atom,
/// run_outcome)`.
using run_done_atom = caf::atom_constant<caf::atom("rundone")>;

/// Sent by a run to its owner when the session's row exists and the
/// session runs (`error` empty), or could not be created: `(run_started_atom,
/// id, error)`.
using run_started_atom = caf::atom_constant<caf::atom("runstart")>;

/// Who is told of a run's start and end.
using run_owner_actor = caf::typed_actor<caf::reacts_to<run_started_atom, std::string, std::string>,
                                         caf::reacts_to<run_done_atom, run_outcome>>;

/// A run: `(stop_atom)` stops its session (the process stops: stored as
/// interrupted), `(stop_atom, reason)` with the reason (`user_cancelled`:
/// stored as cancelled); `(subscribe_atom, sink, from)` attaches a sink to
/// the live packets from seq `from` and returns the first seq the sink will
/// get (`from`, or later: those before it are in the store, written before
/// this run or let go by its emitter once written), or 0 once the run is
/// ending (its packets and
/// outcome are stored; the emitter stops, so the sink would hear nothing).
using research_run_actor = caf::typed_actor<
  caf::reacts_to<actors::stop_atom>, caf::reacts_to<actors::stop_atom, std::string>,
  caf::replies_to<actors::subscribe_atom, actors::line_sink_actor, uint64_t>::with<uint64_t>>;

/// Spawns a run of `setup` with `engine`'s models, tools, prompts and store
/// actor (none: nothing is stored). The owner gets `(run_started_atom, ...)`
/// and then, when the run is over (report, state and packets stored, the
/// emitter stopped and its sinks told), `(run_done_atom, outcome)`; the run
/// then quits. A session that dies without its result ends the run as
/// failed.
research_run_actor spawn_research_run(caf::actor_system& sys, research_engine& engine,
                                      run_setup setup, run_owner_actor owner);

} // namespace quarry::app
