// Loading and validating Quarry's YAML configuration (file lookup, ${VAR},
// --set overrides) and rendering it with secrets redacted.

#pragma once

#include "quarry/core/config_schema.hpp"
#include "quarry/core/settings.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::core {

/// The `file` of errors that come from `--set` overrides.
inline constexpr std::string_view config_override_label = "--set";

/// The `source` of a configuration that was not read from a file.
inline constexpr std::string_view config_embedded_label = "embedded defaults";

/// The largest configuration file read, in bytes (1 MiB); a larger one is an
/// error.
inline constexpr size_t max_config_file_size = 1024 * 1024;

/// One problem found while loading the configuration. Never contains the
/// value of a secret.
struct config_error {
  /// The file (or `--set` for overrides).
  std::string file;
  /// 1-based line; 0 if unknown.
  int line = 0;
  /// Full dotted key path, e.g. `http.connect_timeout`; may be empty.
  std::string key;
  /// What is wrong.
  std::string message;

  /// Renders `file:line: key: message`, leaving out the line if 0 and the
  /// key if empty.
  std::string to_string() const;
};

/// Looks up an environment variable.
using config_getenv_fn = std::function<std::optional<std::string>(const std::string&)>;

/// What to load.
struct load_options {
  /// The `--config` file. If unset, the loader tries $QUARRY_CONFIG, then
  /// $XDG_CONFIG_HOME/quarry/quarry.yaml (or ~/.config/quarry/quarry.yaml),
  /// then uses the embedded defaults. However it is named, the file must be
  /// a regular file (or a symbolic link to one) of at most
  /// @ref max_config_file_size bytes; anything else is an error.
  std::optional<std::string> file;
  /// `key.path=value` overrides from `--set`, applied in order after the file.
  std::vector<std::string> overrides;
  /// Looks up environment variables (for the file lookup and for `${VAR}`);
  /// empty means the process environment.
  config_getenv_fn getenv;
};

/// A plugin instance that the configuration did not name but that was added
/// from the environment (the embedded defaults), e.g. an OpenAI provider from
/// OPENAI_API_KEY.
struct environment_default {
  /// The instance's key, e.g. `llm.providers.default`.
  std::string key;
  /// What was added and from which variables, e.g. `OpenAI (gpt-4.1-mini)
  /// from OPENAI_API_KEY`. Never contains a secret.
  std::string description;
};

/// A valid configuration.
struct loaded_config {
  /// The typed values.
  settings values;
  /// The full effective tree with defaults filled in, same nesting as the
  /// YAML file. Contains secrets in clear text.
  nlohmann::json effective;
  /// The file the configuration came from, or "embedded defaults".
  std::string source;
  /// Things worth telling the user, e.g. unset environment variables, as
  /// `file:line: key: message`.
  std::vector<std::string> warnings;
  /// Instances added from the environment, in the order they were added
  /// (see apply_environment_defaults in `quarry/core/instances.hpp`).
  std::vector<environment_default> environment_defaults;
  /// The keys of the secrets whose value the file itself holds, not only
  /// `${NAME}` references (`${NAME:-default}` with a default counts; a URL
  /// counts only with credentials), e.g. `llm.providers.main.api_key`.
  /// When the file is readable by its group or others, @ref load_config adds
  /// a warning naming them and the file's mode.
  std::vector<std::string> literal_secrets;

  /// Returns @ref effective with every non-empty secret replaced by `***`.
  nlohmann::json redacted() const;

  /// Returns every non-empty secret value (schema keys flagged secret and
  /// secret-named keys inside plugin instances), e.g. for masking logs.
  std::vector<std::string> secret_values() const;

  /// Returns the effective configuration as YAML with every non-empty secret
  /// replaced by `***`. Loading the result again gives the same effective
  /// configuration (except for the redacted secrets).
  std::string render_yaml() const;
};

/// The outcome of loading: either a configuration or at least one error.
struct load_result {
  /// Set if and only if `errors` is empty.
  std::optional<loaded_config> config;
  /// Every problem found, in the order of the input.
  std::vector<config_error> errors;
};

/// Finds, reads, substitutes, overrides and validates the configuration.
/// The file is opened without blocking: a FIFO, a folder, a device, a
/// dangling symbolic link or a link loop is an error naming what it is, as
/// is a file larger than @ref max_config_file_size.
load_result load_config(const load_options& options);

/// Like @ref load_config but reads `yaml` instead of a file; `file_label`
/// names it in errors and becomes the `source`. `options.file` is ignored.
load_result load_config_text(std::string_view yaml, std::string file_label,
                             const load_options& options = {});

/// Returns the file @ref load_config would read given `options`, or
/// `std::nullopt` if it would use the embedded defaults: only when no
/// `--config` or $QUARRY_CONFIG is given and nothing at all (not even a
/// dangling link) is at the default location.
std::optional<std::string> find_config_file(const load_options& options);

/// Returns the candidate closest to `name` (edit distance with adjacent
/// transpositions, case-insensitive), or an empty string if none is close
/// enough to be a likely typo. Used for "did you mean" hints.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

/// Returns whether a key inside a plugin instance holds a secret: `api_key`,
/// or a name ending with `_key`, `token`, `password` or `secret`
/// (case-insensitive).
bool is_secret_key_name(std::string_view name);

} // namespace quarry::core
