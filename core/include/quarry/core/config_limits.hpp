// The limits Quarry itself applies to a provider or tool instance (the
// `limits:` map of an instance): one table of their keys, one reader that
// checks and converts them. The configuration loader uses it for `limits:`,
// the instance checks for keys of older files written beside the plugin's
// options, and the actors receive its typed result.

#pragma once

#include "quarry/core/settings.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace quarry::core {

/// What an instance is an instance of.
enum class instance_kind {
  /// An entry of `llm.providers`.
  llm,
  /// An entry of `tools`.
  tool,
};

/// One key of a `limits:` map, for messages and documentation.
struct limit_key {
  /// The key, e.g. `max_retries`.
  std::string name;
  /// The default as written in YAML, e.g. `4` or `500ms`.
  std::string default_yaml;
  /// What values are allowed, e.g. `integer 0-100`.
  std::string allowed;
  /// One line of documentation.
  std::string doc;
};

/// Returns the keys of the `limits:` map of an instance of `kind`, in
/// documentation order.
const std::vector<limit_key>& limit_keys(instance_kind kind);

/// Returns whether `name` is a key of the `limits:` map of `kind`.
bool is_limit_key(instance_kind kind, const std::string& name);

/// A problem with one key of a `limits:` map. Never shows a secret (limits
/// hold none).
struct limit_problem {
  /// The key inside the map, e.g. `max_retries`.
  std::string key;
  /// What is wrong, e.g. `must be an integer from 0 to 100, got -5`.
  std::string message;
};

/// Reads a `limits:` map (values typed the YAML way: numbers, strings such as
/// `30s`) into `out`. Every valid key is stored; every problem is returned
/// (unknown keys with a "did you mean" hint naming `prefix.KEY`, where
/// `prefix` is e.g. `llm.providers.main.limits`). Null values keep the
/// default. A `limits` that is not a map is one problem with an empty key.
std::vector<limit_problem> read_limits(const nlohmann::json& limits, llm_limits& out,
                                       const std::string& prefix = "limits");

/// Reads a tool's `limits:` map; see the overload for providers.
std::vector<limit_problem> read_limits(const nlohmann::json& limits, tool_limits& out,
                                       const std::string& prefix = "limits");

/// Returns the `limits:` map of a provider as it appears in the effective
/// configuration (every key, durations as `30s`, prices as written).
nlohmann::json to_json(const llm_limits& x);

/// Returns the `limits:` map of a tool as it appears in the effective
/// configuration.
nlohmann::json to_json(const tool_limits& x);

} // namespace quarry::core
