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

  /// Returns the settings of the instance `name` with `limits`.
  static llm_actor_settings of(std::string name, const core::llm_limits& limits) {
    llm_actor_settings out;
    static_cast<core::llm_limits&>(out) = limits;
    out.name = std::move(name);
    return out;
  }
};

/// Spawns a provider actor for `provider`. Deltas of a call go to the actor
/// that sent the `chat_atom` request, as `(delta_atom, llm_delta)`.
llm_provider_actor spawn_llm_provider(caf::actor_system& sys,
                                      std::shared_ptr<sdk::llm_provider> provider,
                                      llm_actor_settings settings);

} // namespace quarry::actors
