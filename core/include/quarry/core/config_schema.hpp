// The configuration schema: every key Quarry understands, with its type,
// default, limits and documentation. The table itself is in config_schema.cpp.

#pragma once

#include "quarry/core/settings.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core {

/// The type of a configuration key.
enum class config_type {
  /// A whole number (`42`).
  integer,
  /// `true`/`false`, `yes`/`no` or `on`/`off`.
  boolean,
  /// Any scalar, taken as text.
  string,
  /// A duration such as `500ms`, `10s`, `2m`, `1h` (bare number: seconds).
  duration,
  /// A byte size such as `64MiB`, `512KiB`, `1GB` (bare number: bytes).
  size,
  /// A list of strings.
  string_list,
  /// A map from names to strings.
  string_map,
  /// A map from instance names to plugin instances (`{plugin: NAME, limits:
  /// {...}, ...}`): LLM providers or tools, as the binding says.
  instances,
};

/// Returns the name used for `x` in messages and documentation: `int`,
/// `bool`, `string`, `duration`, `size`, `list`, `map` or `instances`.
const char* to_string(config_type x) noexcept;

/// A typed configuration value. `integer` and `size` keys use `int64_t`.
using config_value
  = std::variant<int64_t, bool, std::string, std::chrono::milliseconds, std::vector<std::string>,
                 std::map<std::string, std::string>, std::map<std::string, llm_instance>,
                 std::map<std::string, tool_instance>>;

/// Connects a key to its field in @ref settings.
struct config_binding {
  /// Writes a value of the key's type into the field.
  std::function<void(settings&, config_value)> store;
  /// Reads the field.
  std::function<config_value(const settings&)> load;
  /// Smallest value the field's C++ type can hold (integer keys only).
  int64_t type_min = 0;
  /// Largest value the field's C++ type can hold (integer keys only).
  int64_t type_max = 0;
};

/// Everything known about one configuration key. The default value is the
/// field's initializer in @ref settings, read through the binding.
struct config_key {
  /// Full dotted path, e.g. `http.connect_timeout`.
  std::string path;
  /// The value's type.
  config_type type = config_type::string;
  /// One line of documentation.
  std::string doc;
  /// Whether the value is a secret: never printed, never part of messages.
  bool secret = false;
  /// The only values a string key accepts; empty means any value.
  std::vector<std::string> allowed;
  /// Smallest accepted value (`integer`, `size`: the number; `duration`:
  /// milliseconds).
  std::optional<int64_t> min;
  /// Largest accepted value, in the same unit as @ref min.
  std::optional<int64_t> max;
  /// Reads and writes the field in @ref settings.
  config_binding binding;
};

/// Returns the schema: every key, in documentation order.
const std::vector<config_key>& config_schema();

/// Returns the key with the path `path`, or `nullptr`.
const config_key* find_config_key(std::string_view path);

/// Returns whether `path` names a section, i.e. a proper prefix of at least
/// one key path (`http`, `llm`, but not `http.proxy`).
bool is_config_section(std::string_view path);

/// Converts a value of type `type` to its JSON form in the effective
/// configuration: durations become strings such as `"10s"`, sizes become
/// integers (bytes), plugin instances become `{"plugin": NAME, "limits":
/// {...every limit}, ...the plugin's options}`.
nlohmann::json to_json(const config_value& value, config_type type);

/// Converts settings to the effective configuration tree (same nesting as the
/// YAML file). Contains secrets in clear text.
nlohmann::json to_json(const settings& values);

/// Returns the default of `key` as it would be written in YAML, e.g. `10s`,
/// `64MiB`, `info`, `""`, `[]`, `{}`.
std::string default_as_yaml(const config_key& key);

} // namespace quarry::core
