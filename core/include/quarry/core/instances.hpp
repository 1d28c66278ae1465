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
///   `claude-sonnet-4-5`), else an `openai` provider for a local Ollama
///   server when OLLAMA_HOST or OLLAMA_MODEL is set (ollama_base_url; model
///   OLLAMA_MODEL, default @ref default_ollama_model; no key), else the
///   offline `extractive` provider;
/// - without `tools`: `web_search` with the first of Brave (BRAVE_API_KEY),
///   Tavily (TAVILY_API_KEY), Exa (EXA_API_KEY), Serper (SERPER_API_KEY) or
///   SearXNG (SEARXNG_URL, the instance's address), and `open_url` with it.
///
/// Updates `values`, `effective` (so `config show` prints the additions) and
/// `environment_defaults`. Empty variables count as unset. `getenv` empty
/// means the process environment.
void apply_environment_defaults(loaded_config& cfg, const config_getenv_fn& getenv = {});

/// The model of a local Ollama server when OLLAMA_MODEL is not set (the
/// model of Ollama's own quick start).
inline constexpr const char* default_ollama_model = "llama3.2";

/// The OpenAI-compatible base URL (`.../v1`) of the Ollama server that
/// OLLAMA_HOST names, read as Ollama's client reads it: `HOST`, `HOST:PORT`
/// or `SCHEME://HOST[:PORT]`, with http, 127.0.0.1 and 11434 for what is
/// missing (empty: `http://127.0.0.1:11434/v1`).
std::string ollama_base_url(const std::string& host);

/// Returns the options the plugin named by the argument declares
/// (`QUARRY_PLUGIN_KEYS`), or nothing when that is not known (the plugin does
/// not say, or is not loaded): then only the plugin itself checks its options.
using plugin_keys_fn = std::function<std::optional<std::vector<std::string>>(const std::string&)>;

/// Checks the options of every instance of `llm.providers` and `tools` (their
/// `limits:` were checked when the file was loaded) and returns every problem
/// at once, each at the key's own file and line:
///
/// - options the plugin does not declare, with a "did you mean" hint over the
///   plugin's options and Quarry's limits, when `plugin_keys` knows them;
/// - a limit written beside the options as older files did (`max_retries: 2`
///   next to `model:`) that the plugin does not declare as its own option: it
///   is checked like a key of `limits:` and moved there, with a warning in
///   `warnings` saying what to write instead (an error if `limits:` sets it
///   too).
///
/// Never shows the value of a secret.
std::vector<config_error> check_instances(settings& cfg, const plugin_keys_fn& plugin_keys = {},
                                          std::vector<config_error>* warnings = nullptr);

} // namespace quarry::core
