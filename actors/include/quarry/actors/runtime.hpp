// The process runtime: signal handling and the CAF actor system. CAF headers
// stay out of this file; include "quarry/actors/caf_runtime.hpp" where the
// actor system itself is needed.

#pragma once

#include "quarry/core/settings.hpp"

#include <chrono>
#include <functional>
#include <memory>

namespace caf {
class actor_system;
class actor;
} // namespace caf

namespace quarry::actors {

/// Blocks SIGINT and SIGTERM in the calling thread, so that every thread
/// created afterwards inherits the mask and only the runtime's signal thread
/// sees them. Call first thing in `main`, before any thread exists.
void block_stop_signals();

/// Watches SIGINT and SIGTERM on its own thread (sigwait). The first signal
/// calls the stop handler once; a second signal ends the process at once
/// with exit code 130.
class signal_watcher {
public:
  /// Starts the watcher thread. Call @ref block_stop_signals before.
  explicit signal_watcher(std::function<void(int)> on_stop);

  /// Stops the watcher thread.
  ~signal_watcher();

  signal_watcher(const signal_watcher&) = delete;
  signal_watcher& operator=(const signal_watcher&) = delete;

  /// Returns the signal that requested the stop, or 0.
  int received() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

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

  /// Number of scheduler threads the system runs.
  size_t scheduler_threads() const;

  /// Registers a long-lived actor to be told to stop (a `stop_atom` message)
  /// by @ref stop, and killed if it has not quit after the grace period.
  void add_stoppable(const caf::actor& hdl);

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
