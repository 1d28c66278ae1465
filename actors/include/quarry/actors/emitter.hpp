// The emitter: one per session. Stamps every packet with the session id and
// a sequence number and fans it out to subscribers (terminal view, JSONL
// writer, store, HTTP clients), replaying what a late subscriber missed.

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/cluster/messages.hpp"
#include "quarry/core/packets.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Subscribes an actor to a session's packets.
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;

/// A packet before the emitter stamps it: placement and `obj` as JSON text.
using cluster::packet_fact;
using cluster::packet_msg;

/// Where an agent sends its packets: `(packet_atom, packet_msg)`; the
/// emitter's handle converts to it.
using cluster::packet_sink_actor;

/// Makes a packet message.
packet_msg make_packet(const core::placement& where, const nlohmann::json& obj);

/// Makes a packet message of `type` from its object's text as `dump_json`
/// writes it (e.g. core::documents_packet_text). A type whose store facts
/// are read from the object (`usage`, `intermediate_report_delta`) is
/// parsed and made as above.
packet_msg make_packet(const core::placement& where, std::string type, std::string obj_text);

/// A subscriber of a session's packets.
/// - `(packet_atom, line, seq)`: one encoded packet (a JSON line), in order.
/// - `(stop_atom, last_seq)`: the emitter stopped; `last_seq` was its last.
using cluster::line_sink_actor;

/// The emitter's interface.
/// - `(packet_atom, packet_msg)`: stamps and fans out the packet (and hands
///   it to the store, if the emitter has one).
/// - `(checkpoint_atom, checkpoint)`: hands a checkpoint to the store,
///   stamped with the seq of the last packet before it.
/// - `(subscribe_atom, sink, from_seq) -> first`: the sink receives every
///   packet with seq >= `first`, in order, starting with those the emitter
///   still holds; `first` is from_seq, or the first seq the emitter holds if
///   that is later. Those before it are in the store: the ones before the
///   emitter's first seq, and those it let go once the store had written
///   them (see emitter_options::keep_bytes).
/// - `(store_failed_atom, session, message)`: the store cannot write this
///   session: subscribers get an `error` packet (code `store_failed`), and
///   nothing more goes to the store.
/// - `(flush_atom) -> last_seq`: answered once every packet received before
///   it was handed on (to the store too), so a store write sent after the
///   answer follows the session's packets.
/// - `(stop_atom)`: replies with the last seq emitted; the emitter then
///   quits. Subscribers are told with `(stop_atom, uint64_t last_seq)`.
using emitter_actor = caf::typed_actor<
  caf::reacts_to<packet_atom, packet_msg>, caf::reacts_to<checkpoint_atom, checkpoint_ptr>,
  caf::replies_to<subscribe_atom, line_sink_actor, uint64_t>::with<uint64_t>,
  caf::replies_to<flush_atom>::with<uint64_t>,
  caf::replies_to<stop_atom>::with<uint64_t>>::extend_with<store_listener_actor>;

/// Where an emitter's packets go besides its subscribers.
struct emitter_options {
  /// The store, or a null handle for none.
  store_actor store;
  /// The seq of the first packet: 1 for a new session, the stored last seq
  /// + 1 for a session that goes on (reply to clarification, resume).
  uint64_t first_seq = 1;
  /// Bytes of encoded packets held for late subscribers before the emitter
  /// asks the store to write what it has (a flush) and lets go of the
  /// packets written; a late subscriber reads those from the store. Zero
  /// keeps every packet. Without a store, or once the store failed for the
  /// session, every packet is kept. The default holds the packets of a
  /// short research whole and bounds a long one (a report streamed in
  /// thousands of deltas) to about this much.
  size_t keep_bytes = 64 * 1024;
};

/// Spawns the emitter of session `session_id`. It keeps the encoded packets
/// it emitted for replay, up to options.keep_bytes of those the store has
/// not written.
emitter_actor spawn_emitter(caf::actor_system& sys, std::string session_id,
                            emitter_options options = {});

/// Spawns a subscriber that calls `on_line(line, seq)` for every packet and
/// `on_end(count)` when the emitter stops. Both run in the actor, one at a
/// time.
line_sink_actor spawn_line_sink(caf::actor_system& sys,
                                std::function<void(const std::string&, uint64_t)> on_line,
                                std::function<void(uint64_t)> on_end = {});

} // namespace quarry::actors
