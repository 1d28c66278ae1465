// Checks of the configured plugin instances that need the plugins (their
// keys, the tool names they provide), and the reachability probe of
// `quarry config check`.

#pragma once

#include "context.hpp"

#include "quarry/core/config.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace quarry::app {

/// What to create while checking the instances.
struct instance_check_options {
  /// Create every tool, to report factory errors at the instance's line and
  /// two instances that provide a tool of the same name.
  bool make_tools = false;
  /// Create every LLM provider, to report factory errors at the instance's
  /// line.
  bool make_llms = false;
};

/// Checks every configured provider and tool instance and returns every
/// problem at once, each as `file:line: key: message`: the options each
/// plugin declares (QUARRY_PLUGIN_KEYS, with "did you mean";
/// core::check_instances), and, as asked by `options`, the plugins' own
/// checks and duplicate tool names. Limits written beside the options, as
/// older files did, are moved under `limits` and a warning for each is
/// appended to `ctx.config.warnings`. Loads the plugins.
std::vector<core::config_error> check_configured_instances(context& ctx,
                                                           const instance_check_options& options);

/// Prints configuration errors (of the file, or of
/// @ref check_configured_instances) as `quarry: invalid configuration:` and
/// one indented line each, on stderr.
void print_config_errors(const std::vector<core::config_error>& errors);

/// How a probed instance answered.
enum class probe_status {
  /// The endpoint answered as its API does.
  reachable,
  /// Nothing to reach (an offline or local plugin).
  local,
  /// The host does not know how to probe this plugin.
  not_probed,
  /// Nobody listens at the address (connection refused).
  refused,
  /// Name resolution, TLS or another network failure.
  unreachable,
  /// No answer within the probe's time limit.
  timeout,
  /// The server rejected the credentials (HTTP 401 or 403).
  unauthorised,
  /// Something answered, but not the expected API (an HTML page, a body that
  /// is not JSON, HTTP 404 for the API's path).
  wrong_protocol,
  /// Any other failure (HTTP 5xx, an unexpected status).
  failed,
};

/// Returns `reachable`, `not probed`, `wrong protocol`, ...
const char* to_string(probe_status x) noexcept;

/// Returns whether `x` counts as a failed probe.
bool is_probe_failure(probe_status x) noexcept;

/// The outcome of probing one instance.
struct probe_result {
  /// `llm.providers.<name>` or `tools.<name>`.
  std::string key;
  std::string plugin;
  /// What was asked, e.g. `GET http://127.0.0.1:11434/v1/models`; may be
  /// empty.
  std::string target;
  probe_status status = probe_status::not_probed;
  /// One line of detail (HTTP status, error message); never a secret.
  std::string detail;
};

/// Reaches every configured provider and tool once, all at the same time,
/// each within `timeout`. For the plugins that come with Quarry only: an
/// OpenAI-compatible server is asked for `GET {base_url}/models`, Anthropic
/// for `GET {base_url}/v1/models`, a web search (any plugin that declares
/// `sdk::tool_kind::web_search`) for one search (`quarry`); the extractive provider, `local_corpus` and `open_url` have
/// nothing to reach, other plugins are not probed. Needs the plugins loaded.
std::vector<probe_result> probe_instances(context& ctx, std::chrono::milliseconds timeout);

} // namespace quarry::app
