// The sessions of `quarry serve`: the session manager actor (starts,
// cancels, answers, resumes and removes sessions, and knows which run in
// this process) and the event stream of one HTTP client (stored packets
// first, then live ones, without gap or repeat).

#pragma once

#include "session_store.hpp"

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/session.hpp"

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::http {
class event_stream;
} // namespace quarry::http

namespace quarry::sdk {
class blocking_pool;
} // namespace quarry::sdk

namespace quarry::app {

class research_engine;

using start_atom = caf::atom_constant<caf::atom("start")>;
using answer_atom = caf::atom_constant<caf::atom("answer")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using actors::remove_atom;
using running_atom = caf::atom_constant<caf::atom("running")>;
using settled_atom = caf::atom_constant<caf::atom("settled")>;

/// The session manager. Commands answer JSON text: `{"id", "state"}`, or
/// `{"error": {"status", "code", "message"}}` with the HTTP status to answer.
/// - `(start_atom, parent_id, options_json)`: a new session (stored_options
///   as JSON; `parent_id` empty, or the session a follow-up follows).
/// - `(cancel_atom, id)`, `(answer_atom, id, answers)`, `(resume_atom, id)`,
///   `(remove_atom, id)`.
/// - `(subscribe_atom, id, sink, from_seq) -> uint64_t`: subscribes `sink`
///   to the live packets of a session running here, from max(from_seq,
///   first live seq), and answers the first seq it will get (those before
///   it are in the store); 0 when the session does not run here (all its
///   packets are in the store).
/// - `(settled_atom, id) -> bool`: answered once session `id` does not run
///   here (at once if it does not): its outcome is stored and its lock is
///   released, so that a client told the run ended can act on it (answer
///   its questions, resume it, remove it). True if it was running.
/// - `(running_atom) -> int64_t`: sessions running now.
/// - `(stop_atom)`: every running session stops (the findings so far become
///   its report; it is stored as interrupted), then the manager quits.
using session_manager_actor = caf::typed_actor<
  caf::replies_to<start_atom, std::string, std::string>::with<std::string>,
  caf::replies_to<actors::cancel_atom, std::string>::with<std::string>,
  caf::replies_to<answer_atom, std::string, std::string>::with<std::string>,
  caf::replies_to<resume_atom, std::string>::with<std::string>,
  caf::replies_to<remove_atom, std::string>::with<std::string>,
  caf::replies_to<actors::subscribe_atom, std::string, actors::line_sink_actor,
                  uint64_t>::with<uint64_t>,
  caf::replies_to<settled_atom, std::string>::with<bool>,
  caf::replies_to<running_atom>::with<int64_t>, caf::reacts_to<actors::stop_atom>>;

/// Settings of the manager.
struct manager_settings {
  /// Sessions researching at once; more are answered 429.
  int max_running = 64;
};

/// Spawns the manager over `engine` (started, with a store). Sessions left
/// `running` by a process that died are stored as interrupted first.
session_manager_actor spawn_session_manager(caf::actor_system& sys, research_engine& engine,
                                            std::string store_file, manager_settings settings);

/// One client's view of a session's packets (an event stream, an
/// OpenAI-compatible completion). Its functions are called by the follower
/// actor, one at a time, never concurrently.
class session_follower {
public:
  virtual ~session_follower() = default;
  /// One packet (its encoded line), in seq order, without gap or repeat.
  /// False: the client is gone and following stops.
  virtual bool packet(uint64_t seq, const std::string& line) = 0;
  /// The run is over (or the session was not running): `state` is its
  /// stored state (`unknown` when the store cannot be read). Called once,
  /// last; it must not block (a store read goes to the blocking pool).
  virtual void end(const std::string& state) = 0;
  /// Arranges for `gone` to be called, from any thread, when the client
  /// goes away (at once if it is gone already). Called once, first.
  virtual void on_gone(std::function<void()> gone) = 0;
};

/// Follows session `id` from `from_seq` for `follower`: the stored packets,
/// then the live ones, then the end with the session's state. Reads the
/// store from `store_file` on a thread of the host's blocking pool. With
/// `cancel_when_gone`, a client that goes away before the end cancels the
/// session.
void follow_session(caf::actor_system& sys, sdk::blocking_pool& pool, session_manager_actor manager,
                    std::string store_file, std::string id, uint64_t from_seq,
                    std::shared_ptr<session_follower> follower, bool cancel_when_gone = false);

/// Streams session `id` to `stream` from `from_seq`: the stored packets,
/// then the live ones, then `event: end` with `{"state": ...}` (see
/// follow_session).
void stream_session(caf::actor_system& sys, sdk::blocking_pool& pool, session_manager_actor manager,
                    std::string store_file, std::string id, uint64_t from_seq,
                    std::shared_ptr<http::event_stream> stream);

/// Runs `job` with a read-only connection to `store_file` (one per pool
/// thread, kept) on the blocking pool; `job` gets null and an error text when
/// the store cannot be opened. False when the pool is full.
bool with_reader(sdk::blocking_pool& pool, const std::string& store_file,
                 std::function<void(store::store*, const std::string&)> job);

} // namespace quarry::app
