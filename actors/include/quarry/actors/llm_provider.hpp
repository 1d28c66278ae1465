// The LLM provider actor: wraps one LLM plugin instance with a concurrency
// cap, rate limits, retries with backoff, stall and total timeouts, adaptive
// concurrency, and usage and cost accounting.

#pragma once

#include "quarry/actors/llm_messages.hpp"
#include "quarry/sdk/llm_provider.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <variant>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Prices in US dollars per million tokens.
struct token_prices {
  double input = 0;
  double output = 0;
};

/// What the provider actor reads from a provider instance's configuration
/// (the keys of sdk::is_host_llm_key).
struct llm_actor_settings {
  /// Name of the provider instance, e.g. `main`.
  std::string name;
  /// Largest number of calls in flight (also the ceiling of the adaptive
  /// limit).
  int max_concurrency = 16;
  /// Requests per minute; 0 means unlimited.
  double requests_per_minute = 0;
  /// Tokens per minute (estimated input plus requested output); 0 means
  /// unlimited.
  double tokens_per_minute = 0;
  /// Retries after the first attempt, for retryable failures only.
  int max_retries = 4;
  /// First backoff step; doubles per attempt (full jitter).
  std::chrono::milliseconds retry_base{500};
  /// Largest backoff step.
  std::chrono::milliseconds retry_max{30000};
  /// Longest time without a streamed piece.
  std::chrono::milliseconds stall_timeout{60000};
  /// Longest time for a whole call, retries included.
  std::chrono::milliseconds total_timeout{600000};
  /// Prices for any model.
  token_prices default_prices;
  /// Prices by model name (override `default_prices`).
  std::map<std::string, token_prices> model_prices;

  /// Reads the host-level keys of an instance's configuration. Returns the
  /// settings, or a message naming the bad key.
  static std::variant<llm_actor_settings, std::string>
  from_config(const std::string& name, const nlohmann::json& config);
};

/// Spawns a provider actor for `provider`. Deltas of a call go to the actor
/// that sent the `chat_atom` request, as `(delta_atom, llm_delta)`.
llm_provider_actor spawn_llm_provider(caf::actor_system& sys,
                                      std::shared_ptr<sdk::llm_provider> provider,
                                      llm_actor_settings settings);

} // namespace quarry::actors
