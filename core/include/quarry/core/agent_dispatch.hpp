// The parallel limit of research agents as a policy of its own: the
// research_agent calls of one orchestrator turn wait for one of `limit`
// slots, run, and finish; all of them finish before the next turn.

#pragma once

#include <cstddef>
#include <vector>

namespace quarry::core {

/// Which research agents of one orchestrator turn may run. Calls are
/// numbered in the order they were added; every call ends `finished`, by
/// running or by being dropped while it waited.
class agent_dispatch {
public:
  /// Where a call is.
  enum class status { waiting, running, finished };

  /// At most `limit` calls run at once (at least 1).
  explicit agent_dispatch(int limit = 3);

  /// Forgets every call: a new turn with `limit` slots.
  void reset(int limit);

  /// Adds a call that waits for a slot and returns its number.
  size_t add();

  /// Marks as running, and returns, the waiting calls that fit in the free
  /// slots, in the order they were added.
  std::vector<size_t> start();

  /// Marks call `i` finished (it ran, failed or was stopped). Returns false
  /// if it was finished already or does not exist.
  bool finish(size_t i);

  /// Finishes every waiting call without running it (the deadline is near,
  /// the research was stopped) and returns their numbers.
  std::vector<size_t> drop_waiting();

  /// Finishes every call, running ones included.
  void finish_all();

  status at(size_t i) const;
  size_t size() const noexcept {
    return calls_.size();
  }
  size_t running() const noexcept;
  size_t waiting() const noexcept;
  /// Whether every call has finished (true for a turn without calls).
  bool all_finished() const noexcept;

private:
  int limit_;
  std::vector<status> calls_;
};

} // namespace quarry::core
