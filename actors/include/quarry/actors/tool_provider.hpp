// The tool provider actor: wraps one tool plugin instance with a concurrency
// cap, a time limit per run, retries of retryable failures (the LLM
// providers' policy, core::retry_policy), and a cache of recent identical
// runs.

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/inspect.hpp"
#include "quarry/core/settings.hpp"
#include "quarry/sdk/tool.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <variant>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Runs a tool: `(run_atom, tool_call_msg)` -> `tool_reply`.
using run_atom = caf::atom_constant<caf::atom("run")>;

/// A tool run requested by an agent.
struct tool_call_msg {
  tool_call_msg() = default;

  tool_call_msg(uint64_t id, std::string arguments,
                std::shared_ptr<const nlohmann::json> parsed = nullptr)
    : id(id), arguments(std::move(arguments)), parsed(std::move(parsed)) {
    // nop
  }

  /// Chosen by the requester; echoed in the reply.
  uint64_t id = 0;
  /// The arguments as the requester sends them: a JSON text (the LLM's own
  /// when it is not JSON; the tool explains). Also the key of the cache.
  std::string arguments;
  /// `arguments` as the requester already parsed them, when it did; shared,
  /// never changed. With it, `arguments` must be `parsed->dump()` (the key
  /// of the cache). Not sent to other nodes (see inspect below): a provider
  /// without it parses `arguments` itself.
  std::shared_ptr<const nlohmann::json> parsed;
};

/// The outcome of a tool run. Failures are results too: the LLM always gets
/// `llm_text`.
struct tool_reply {
  uint64_t id = 0;
  sdk::tool_result result;
  /// Whether the result came from the cache.
  bool cached = false;
};

/// The interface of a tool provider actor.
/// - `(run_atom, tool_call_msg)` -> `tool_reply`: a run (failures are
///   replies too).
/// - `(stats_atom)` -> JSON text: the counters (see @ref spawn_tool_provider).
/// - `(stop_atom)`: answers every run "shutting down" and quits.
using tool_provider_actor
  = caf::typed_actor<caf::replies_to<run_atom, tool_call_msg>::with<tool_reply>,
                     caf::replies_to<stats_atom>::with<std::string>, caf::reacts_to<stop_atom>>;

/// A run's plugin callback: `(tool_done_atom, tool_done_event)`.
using tool_done_atom = caf::atom_constant<caf::atom("tooldone")>;

/// A run's time limit: `(tool_timeout_atom, run key)`.
using tool_timeout_atom = caf::atom_constant<caf::atom("tooltime")>;

/// A failed run's backoff is over: `(tool_retry_atom, run key)`.
using tool_retry_atom = caf::atom_constant<caf::atom("toolretry")>;

/// A finished run, posted by the plugin's callback.
struct tool_done_event {
  /// The provider's key of the run.
  uint64_t key = 0;
  sdk::tool_result result;
};

/// The tool provider's whole interface: the public one and its own timers
/// and plugin callbacks.
using tool_provider_full_actor = tool_provider_actor::extend<
  caf::reacts_to<tool_done_atom, tool_done_event>, caf::reacts_to<tool_timeout_atom, uint64_t>,
  caf::reacts_to<tool_retry_atom, uint64_t>>;

/// What the tool provider actor applies: the tool's name and its limits, as
/// the configuration loader read and checked them (`core::tool_limits`).
struct tool_actor_settings : core::tool_limits {
  std::string name;

  /// Returns the settings of the tool `name` with `limits`.
  static tool_actor_settings of(std::string name, const core::tool_limits& limits) {
    tool_actor_settings out;
    static_cast<core::tool_limits&>(out) = limits;
    out.name = std::move(name);
    return out;
  }
};

/// Spawns a provider actor for `tool`.
///
/// A run whose result fails with a retryable class (sdk::is_retryable: a
/// search service's 429 or 503, a network error, a timeout of the plugin's
/// own request) runs again after a backoff decided by core::retry_policy
/// from `max_retries`, `retry_base` and `retry_max`: full jitter, doubling,
/// at least the server's Retry-After, and never past the run's `timeout`,
/// which counts from the first attempt and covers every retry. The run
/// gives up its concurrency slot while it waits and goes first when the
/// wait is over. A failure that is not retried says why in its message
/// ("after 4 attempts"). A run ends at once, waiting or not, when its
/// requester terminates (the plugin run is cancelled; outcome `cancelled`)
/// and on `stop_atom`.
///
/// Its `stats_atom` reply: `{"tool": name, "calls": n, "runs": plugin runs
/// started, "active", "queued", "outcomes": {"ok", "cached", "error",
/// "timeout", "cancelled"}, "errors": {"<errc name>": n}, "call_seconds":
/// {"bounds", "counts", "sum", "count"}, "retries": n}`. Every call has one
/// outcome: a cache hit is `cached`, a run over its time limit `timeout`
/// (also counted in errors), one ended by the shutdown or by its requester's
/// end `cancelled`, other failures (bad arguments included) `error`;
/// `retries` counts the attempts made again. The histogram holds the
/// durations of the plugin runs that ended (not cache hits; from the first
/// attempt, retries included), on the actor system's clock.
tool_provider_actor spawn_tool_provider(caf::actor_system& sys, std::shared_ptr<sdk::tool> tool,
                                        tool_actor_settings settings);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call_msg& x) {
  // `parsed` stays in this process: the text carries the same arguments.
  return f(caf::meta::type_name("quarry.tool_call"), x.id, x.arguments);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_reply& x) {
  return f(caf::meta::type_name("quarry.tool_reply"), x.id, x.result, x.cached);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_done_event& x) {
  return f(caf::meta::type_name("quarry.tool_done_event"), x.key, x.result);
}

} // namespace quarry::actors
