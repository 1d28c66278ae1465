// What a session cost and with which models: its usage rows summed for the
// API (`GET /v1/research/{id}` and the list), `quarry sessions show` and the
// closing line of `quarry research` (docs/api.md, "Models, duration and
// cost").

#pragma once

#include "quarry/store/store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace quarry::app {

/// One model (or the offline provider) a session used in one role.
struct session_model {
  std::string role;
  std::string provider;
  /// Empty for the offline provider.
  std::string model;
  /// The offline extractive provider: no model ran.
  bool offline = false;
  /// Every call of it had a price (configured or the shipped table).
  bool priced = true;
  int64_t calls = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  /// US dollars, of its priced calls.
  double cost = 0;
};

/// A session's usage summed.
struct session_usage {
  /// Distinct (role, provider, model), in the order first used. Rows of
  /// stores before schema 4 name neither provider nor model and are counted
  /// in the totals only.
  std::vector<session_model> models;
  /// Every LLM call, the offline provider's included.
  int64_t calls = 0;
  /// Calls of the offline provider (no model ran).
  int64_t offline_calls = 0;
  /// Model calls without a price: their cost is unknown.
  int64_t unpriced_calls = 0;
  /// Tokens of the calls a model answered (the offline provider's estimates
  /// are not tokens).
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  /// US dollars, of the priced calls.
  double cost = 0;

  /// Calls a model answered.
  int64_t model_calls() const {
    return calls - offline_calls;
  }

  /// Whether `cost` is the whole cost: no model call was unpriced.
  bool cost_known() const {
    return unpriced_calls == 0;
  }
};

/// Sums `groups` (store::store::usage_groups).
session_usage summarize_usage(const std::vector<store::usage_group>& groups);

/// `[{"role", "provider", "model", "offline", "calls", "input_tokens",
/// "output_tokens", "cost", "cost_known"}]`: `model` is null and the token
/// counts and cost are left out for the offline provider.
nlohmann::json session_models_json(const session_usage& u);

/// `{"calls", "model_calls", "offline_calls", "unpriced_calls",
/// "input_tokens", "output_tokens", "cost", "cost_known"}`: `cost` in US
/// dollars, of the priced calls; `cost_known` false when a model call had no
/// price (`cost` is then a lower bound).
nlohmann::json session_usage_json(const session_usage& u);

/// Milliseconds a session ran: to its end when it finished, to `now_ms`
/// while it is pending or running, else to its last update (waiting for
/// answers, interrupted).
int64_t session_duration_ms(const store::session_row& row, store::session_state state,
                            int64_t now_ms);

/// The cost as people read it: `$0.0123`, `cost unknown` (no model call
/// had a price), `at least $0.0123 (3 calls unpriced)`; empty when no model
/// ran.
std::string cost_text(const session_usage& u);

} // namespace quarry::app
