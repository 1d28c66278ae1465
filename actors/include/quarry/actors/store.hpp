// The store actor: the one writer of the research store. It runs on a thread
// of its own (SQLite blocks), collects what the emitters and sessions send
// for a few milliseconds and writes it as one transaction, so research never
// waits on the disk for more than one batch.

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/cluster/messages.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::store {
class store;
} // namespace quarry::store

namespace quarry::core {
struct research_checkpoint;
} // namespace quarry::core

namespace quarry::actors {

/// A checkpoint of a session's strategy (see core/checkpoint.hpp).
using checkpoint_atom = caf::atom_constant<caf::atom("checkpt")>;

using cluster::packet_fact;

/// A checkpoint as the session took it, shared with the emitter and the
/// store without being encoded on the way: it is encoded once, by the store.
/// Local only (a session, its emitter and the store run in one process).
using checkpoint_ptr = std::shared_ptr<const core::research_checkpoint>;

/// Writes everything received so far; replies with an empty string, or with
/// the first write error since the last flushes were answered.
using flush_atom = caf::atom_constant<caf::atom("flush")>;

/// A session's state changes (`completed`, `failed`, ...).
using state_atom = caf::atom_constant<caf::atom("state")>;

/// A session's final report.
using report_atom = caf::atom_constant<caf::atom("report")>;

/// Tells a session's emitter that its packets can no longer be stored.
using store_failed_atom = caf::atom_constant<caf::atom("storefail")>;

/// Creates a session: written a millisecond later with whatever else is
/// pending (starts come in bursts and share a transaction), and answered
/// once that batch is written.
using create_atom = caf::atom_constant<caf::atom("create")>;

/// Removes a session with everything it holds.
using remove_atom = caf::atom_constant<caf::atom("remove")>;

/// Registers the listener that hears of a session's write failures.
using watch_atom = caf::atom_constant<caf::atom("watch")>;

/// Who hears that a session's writes failed: `(store_failed_atom, session,
/// message)`, once per session. After that the store drops whatever else
/// arrives for the session (a gap in its packets must not be written), but
/// for the end of its run: a state change to any state other than
/// `running` and `pending` is stored as `interrupted`, with an error that
/// says the rest was not saved and why ("... the disk is full ..."), tried
/// again at every later write and flush until it is stored.
using store_listener_actor
  = caf::typed_actor<caf::reacts_to<store_failed_atom, std::string, std::string>>;

/// The store actor's interface.
/// - `(packet_atom, session, seq, line, turn_index, tab_index, fact)`: a
///   stamped packet with its placement and what its maker said the store
///   keeps of it besides the line (a usage row, a piece of an intermediate
///   report; cluster::packet_fact). Emitters send them in seq order; the
///   store never reads a line.
/// - `(checkpoint_atom, session, last_seq, checkpoint)`: a checkpoint; its
///   citations and documents are written in the same transaction (only
///   those when `checkpoint->sources_only`).
/// - `(state_atom, session, state, error)`: a state change
///   (store::session_state by name); `(state_atom, session, state, error,
///   options_json)` also replaces the session's options (its answers to
///   clarifying questions, so a resume runs with them).
/// - `(report_atom, session, markdown)`: the final report;
///   `(report_atom, session, markdown, claims)` with its verified claims
///   (core::verification::claim_records as JSON text; they replace the
///   session's stored claims; objects that are not claims are skipped).
/// - `(create_atom, id, parent_id, question, options_json) -> string`: a new
///   session in state `running`, written at once; the reply is empty, or the
///   error.
/// - `(remove_atom, id) -> string`: removes a session at once (what is
///   pending is written first); empty, `not found`, or the error.
/// - `(watch_atom, session, listener)`: who hears of the session's failures.
/// - `(flush_atom) -> string`: everything before it is written (or failed).
///   Like creates, a flush that follows another within 100 ms waits up to
///   20 ms for more to share the transaction (sessions end one after another,
///   each flushing its outcome); a lone one is written at once.
/// - `(stop_atom)`: writes what is pending and quits.
using store_actor = caf::typed_actor<
  caf::reacts_to<packet_atom, std::string, uint64_t, std::string, int32_t, int32_t, packet_fact>,
  caf::reacts_to<checkpoint_atom, std::string, uint64_t, checkpoint_ptr>,
  caf::reacts_to<state_atom, std::string, std::string, std::string>,
  caf::reacts_to<state_atom, std::string, std::string, std::string, std::string>,
  caf::reacts_to<report_atom, std::string, std::string>,
  caf::reacts_to<report_atom, std::string, std::string, std::string>,
  caf::replies_to<create_atom, std::string, std::string, std::string,
                  std::string>::with<std::string>,
  caf::replies_to<remove_atom, std::string>::with<std::string>,
  caf::reacts_to<watch_atom, std::string, store_listener_actor>,
  caf::replies_to<flush_atom>::with<std::string>, caf::reacts_to<stop_atom>>;

/// How the store actor batches.
struct store_actor_settings {
  /// A batch is written this long after its first write arrived...
  std::chrono::milliseconds batch_delay{20};
  /// ... or at once when it holds this many writes.
  size_t batch_limit = 512;
};

/// Spawns the store actor on a thread of its own; it owns `db` from now on
/// (nothing else may use it). Its `stop_atom` writes what is pending.
store_actor spawn_store(caf::actor_system& sys, std::shared_ptr<store::store> db,
                        store_actor_settings settings = {});

} // namespace quarry::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(quarry::actors::checkpoint_ptr)
