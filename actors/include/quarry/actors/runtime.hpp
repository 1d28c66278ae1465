// The process runtime: signal handling and the CAF actor system. Of CAF,
// this file includes only the typed handle of a stoppable actor (never
// caf/all.hpp); the actor system itself is behind a pimpl.

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/core/settings.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// What every long-lived actor that the runtime stops accepts: `(stop_atom)`
/// (finish or fail what is pending, then quit). The provider actors'
/// handles convert to it.
using stoppable_actor = caf::typed_actor<caf::reacts_to<stop_atom>>;

/// Blocks SIGINT and SIGTERM in the calling thread, so that every thread
/// created afterwards inherits the mask and only the process's signal thread
/// sees them, and starts that thread. Call first thing in `main`, before any
/// other thread exists.
///
/// From then on the process always answers SIGINT and SIGTERM: while a
/// @ref signal_watcher is alive its handler is called for the first signal;
/// while none is, the process says it was interrupted on stderr and exits
/// at once with 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
/// A second signal always ends the process at once the same way.
void block_stop_signals();

/// Returns the exit code of a process ended by `sig`: 128 + `sig`.
constexpr int exit_code_for_signal(int sig) noexcept {
  return 128 + sig;
}

/// Routes the first SIGINT or SIGTERM to `on_stop` while it is alive.
/// Watchers nest: the newest one gets the signal. The handler runs on the
/// process's signal thread; the destructor waits for a handler call in
/// progress to return, so the handler may capture locals of the scope that
/// owns the watcher. Starts the signal thread if @ref block_stop_signals has
/// not (the calling thread must have the signals blocked).
class signal_watcher {
public:
  explicit signal_watcher(std::function<void(int)> on_stop);

  /// Unregisters the handler.
  ~signal_watcher();

  signal_watcher(const signal_watcher&) = delete;
  signal_watcher& operator=(const signal_watcher&) = delete;

  /// Returns the signal that requested the stop, or 0.
  int received() const noexcept;

  /// Implementation detail, shared with the signal thread.
  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

/// Blocks until the first SIGINT or SIGTERM (through a @ref signal_watcher)
/// and returns its number: how a long-running command (`serve`, `worker`)
/// waits for its stop.
int wait_for_stop_signal();

/// Owns the CAF actor system. Create it after the configuration, the host
/// services and the plugin registry, so that those outlive every actor.
class runtime {
public:
  /// Builds the actor system with `cfg.runtime.scheduler_threads` scheduler
  /// threads (0: one per core) and Quarry's message types registered.
  explicit runtime(const core::settings& cfg);

  /// Stops every registered actor (see @ref stop), then waits for all actors
  /// to finish and destroys the system.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// The actor system.
  caf::actor_system& system() noexcept;

  /// Whether a runtime for `cfg` loads CAF's network layer (the middleman,
  /// and TLS when configured): only for a node of a cluster, one with
  /// `cluster.workers` or `cluster.listen` (a worker sets the latter).
  static bool networked(const core::settings& cfg);

  /// Number of scheduler threads the system runs.
  size_t scheduler_threads() const;

  /// Registers a long-lived actor to be told to stop (a `stop_atom` message)
  /// by @ref stop, and killed if it has not quit after the grace period.
  void add_stoppable(const stoppable_actor& hdl);

  /// Tells every registered actor to stop. Safe from any thread, idempotent.
  void stop();

  /// Blocks until every registered actor has quit or `grace` passed; then
  /// kills the ones still running. Returns whether all quit on their own.
  bool await_stopped(std::chrono::milliseconds grace);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace quarry::actors
