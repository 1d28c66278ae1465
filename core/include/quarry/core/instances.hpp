// Plugin instances beyond the file: the embedded defaults taken from the
// environment (one place for every command), and the checks of each
// instance's keys that the YAML schema cannot make (the keys the host reads,
// the keys each plugin accepts).

#pragma once

#include "quarry/core/config.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace quarry::core {

/// Adds the embedded defaults to a loaded configuration, exactly once and for
/// every command:
///
/// - without `llm.providers`: an `openai` provider `default` when
///   OPENAI_API_KEY or OPENAI_BASE_URL is set (OPENAI_MODEL, default
///   `gpt-4.1-mini`; with only OPENAI_BASE_URL no key is sent, for local
///   servers such as Ollama or vLLM), else an `anthropic` provider when
///   ANTHROPIC_API_KEY is set (ANTHROPIC_BASE_URL, ANTHROPIC_MODEL, default
///   `claude-sonnet-4-5`), else the offline `extractive` provider;
/// - without `tools`: `web_search` with Brave (BRAVE_API_KEY) or Tavily
///   (TAVILY_API_KEY), and `open_url` with it.
///
/// Updates `values`, `effective` (so `config show` prints the additions) and
/// `environment_defaults`. Empty variables count as unset. `getenv` empty
/// means the process environment.
void apply_environment_defaults(loaded_config& cfg,
                                const config_getenv_fn& getenv = {});

/// The keys of an LLM provider instance that the host's provider actor reads.
const std::vector<std::string>& host_llm_keys();

/// The keys of a tool instance that the host's tool actor reads.
const std::vector<std::string>& host_tool_keys();

/// Returns the keys the plugin named by the argument accepts besides the
/// host's, or nothing when that is not known (the plugin does not say, or is
/// not loaded): then only the plugin itself checks its keys.
using plugin_keys_fn
  = std::function<std::optional<std::vector<std::string>>(const std::string&)>;

/// Checks every instance of `llm.providers` and `tools` and returns every
/// problem at once, each at the key's own file and line:
///
/// - values of the keys the host reads (`max_retries: -5`,
///   `max_concurrency: -3`, `stall_timeout: 0s`, `timeout: banana`, ...);
/// - keys that nothing reads (`context_window`);
/// - keys that neither the host nor the plugin knows, with a "did you mean"
///   hint, when `plugin_keys` knows the plugin's keys.
///
/// Never shows the value of a secret.
std::vector<config_error> check_instances(const settings& cfg,
                                          const plugin_keys_fn& plugin_keys = {});

} // namespace quarry::core
