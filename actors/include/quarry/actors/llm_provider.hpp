// The LLM provider actor: wraps one LLM plugin instance with a concurrency
// cap, rate limits, retries with backoff, stall and total timeouts, adaptive
// concurrency, and usage and cost accounting.

#pragma once

#include "quarry/actors/llm_messages.hpp"
#include "quarry/core/settings.hpp"
#include "quarry/sdk/llm_provider.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Prices in US dollars per million tokens.
using token_prices = core::token_prices;

/// What the provider actor applies: the instance's name and its limits, as
/// the configuration loader read and checked them (`core::llm_limits`).
struct llm_actor_settings : core::llm_limits {
  /// Name of the provider instance, e.g. `main`.
  std::string name;
  /// The instance runs no model (the offline extractive provider): its
  /// calls are reported as `offline` (core::cost_basis) and never priced.
  bool offline = false;

  /// Returns the settings of the instance `name` with `limits`.
  static llm_actor_settings of(std::string name, const core::llm_limits& limits) {
    llm_actor_settings out;
    static_cast<core::llm_limits&>(out) = limits;
    out.name = std::move(name);
    return out;
  }
};

// -- the provider's own messages ----------------------------------------------

/// A plugin's sink has events: `(llm_sink_atom, call key, attempt)`. The
/// sink queues what its plugin reports and posts this once until the actor
/// takes the queue, so a burst of callbacks (a network read holds several
/// stream chunks) costs one message, not one per callback.
using llm_sink_atom = caf::atom_constant<caf::atom("sinkev")>;

/// The one timer of the provider's calls: `(llm_watch_atom, generation)`
/// fires when the first deadline or stall of its calls is due; the calls
/// past their limits fail and the timer is set for the next.
using llm_watch_atom = caf::atom_constant<caf::atom("llmwatch")>;

/// A call's backoff is over: `(llm_retry_atom, call key)`.
using llm_retry_atom = caf::atom_constant<caf::atom("retry")>;

/// The rate limits may admit a waiting call now.
using llm_rate_atom = caf::atom_constant<caf::atom("ratetick")>;

/// The plugin's describe() answered: `(llm_described_atom, model_info)`.
using llm_described_atom = caf::atom_constant<caf::atom("described")>;

/// The plugin's describe() had its time: `(llm_describe_timeout_atom)`.
using llm_describe_timeout_atom = caf::atom_constant<caf::atom("desctime")>;

/// How long the provider actor waits for its plugin's describe() before it
/// answers with the window unknown. The openai plugin's probe gives up
/// after 8 s (openai_models.hpp); 10 s leave it room.
inline constexpr std::chrono::seconds llm_describe_timeout{10};

/// The provider's whole interface: the public one and its own timers and
/// plugin events (sent only by the actor itself and its plugin's sink).
using llm_provider_full_actor = llm_provider_actor::extend<
  caf::reacts_to<llm_sink_atom, uint64_t, uint64_t>, caf::reacts_to<llm_watch_atom, uint64_t>,
  caf::reacts_to<llm_retry_atom, uint64_t>, caf::reacts_to<llm_rate_atom>,
  caf::reacts_to<llm_described_atom, sdk::model_info>, caf::reacts_to<llm_describe_timeout_atom>>;

/// Spawns a provider actor for `provider`. Deltas of a call go to the actor
/// that sent the `chat_atom` request, as `(delta_atom, llm_deltas)`: the
/// requester implements @ref llm_listener_actor.
llm_provider_actor spawn_llm_provider(caf::actor_system& sys,
                                      std::shared_ptr<sdk::llm_provider> provider,
                                      llm_actor_settings settings);

} // namespace quarry::actors
