// The `openai` provider's model facts: the context window the server serves,
// read where OpenAI-compatible servers say it (vLLM, OpenRouter, Groq, LM
// Studio, Ollama, llama.cpp), once per provider object.

#pragma once

#include "openai_provider.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_openai {

// -- bounds -------------------------------------------------------------------

/// Largest answer a probe reads, in bytes. OpenRouter's `/models` lists some
/// hundreds of models (about 1 MiB in 2025); others are far smaller.
inline constexpr int64_t max_probe_body = 4 * 1024 * 1024;

/// Deepest JSON nesting a probe accepts. The answers read here nest four or
/// five levels deep.
inline constexpr size_t max_probe_depth = 32;

/// Time for all requests of one probe together (the host waits 10 s for an
/// answer, see docs/architecture.md).
inline constexpr std::chrono::milliseconds probe_budget{8000};

/// Time to connect, per request of a probe.
inline constexpr std::chrono::milliseconds probe_connect_timeout{3000};

/// The largest window believed, in tokens; a larger number is a bad value.
inline constexpr int64_t max_plausible_window = 100'000'000;

// -- reading answers ------------------------------------------------------------

/// A context window and where it comes from (see
/// sdk::model_info::context_window_source).
struct window_fact {
  int64_t tokens = 0;
  std::string source;
};

/// What kind of server a base URL or a `/models` answer suggests; it decides
/// which server-specific endpoint is asked after `/models`.
enum class server_kind : uint8_t {
  unknown,
  /// Ollama: port 11434, or `owned_by: library` / `ollama` in `/models`.
  ollama,
  /// LM Studio: port 1234, or `owned_by: organization_owner`.
  lm_studio,
  /// llama.cpp's server: `owned_by: llamacpp`.
  llama_cpp,
  /// vLLM: `owned_by: vllm` (it says the window in `/models` itself).
  vllm,
};

/// Returns `ollama`, `lm studio`, `llama.cpp`, `vllm` or `server`.
const char* to_string(server_kind x) noexcept;

/// Returns the server's root: `base_url` without a trailing `/v1` (Ollama's,
/// LM Studio's and llama.cpp's own endpoints live there).
std::string server_root(const std::string& base_url);

/// Returns the kind the URL's port suggests: 11434 Ollama, 1234 LM Studio.
server_kind kind_by_url(const std::string& base_url);

/// What a `/models` answer says about `model`.
struct models_answer {
  /// The window of the model's entry, if the entry has one.
  std::optional<window_fact> window;
  /// The kind its `owned_by` suggests.
  server_kind kind = server_kind::unknown;
  /// Whether an entry with the model's id was found.
  bool listed = false;
};

/// Reads a `GET {base_url}/models` answer (`{"data": [{"id": ...}, ...]}`):
/// in the entry whose `id` is `model` (or `model:latest`), the first of
/// `loaded_context_length`, `max_model_len` (vLLM), `context_window` (Groq
/// and others), `context_length` (OpenRouter and others),
/// `top_provider.context_length` (OpenRouter), `max_context_length` (LM
/// Studio) that is a whole number from 1 to max_plausible_window. `host`
/// names the server in the source (`openrouter` for openrouter.ai). Nothing
/// for a body that is not bounded JSON of that shape.
models_answer read_models(std::string_view body, const std::string& model,
                          const std::string& base_url);

/// Reads LM Studio's `GET /api/v0/models/{model}` (one object) or
/// `/api/v0/models` (`data` list): `loaded_context_length` if loaded, else
/// `max_context_length`.
std::optional<window_fact> read_lm_studio(std::string_view body, const std::string& model);

/// What Ollama's `POST /api/show` says.
struct ollama_show {
  /// `num_ctx` of the model's `parameters` text (a Modelfile's
  /// `PARAMETER num_ctx`), if set.
  std::optional<int64_t> num_ctx;
  /// The length the model was trained for (`model_info["<arch>.context_length"]`),
  /// 0 if absent; NOT the window the server uses.
  int64_t trained = 0;
};

/// Reads an `/api/show` answer; nothing for a body of another shape.
std::optional<ollama_show> read_ollama_show(std::string_view body);

/// Returns the value of the `num_ctx` line of Ollama's `parameters` text
/// (lines of `name value`), if it has a valid one.
std::optional<int64_t> num_ctx_of(std::string_view parameters);

/// Reads Ollama's `GET /api/ps` (`{"models": [{"name", "model",
/// "context_length"}]}`): the window the loaded `model` runs with, if it is
/// loaded.
std::optional<int64_t> read_ollama_ps(std::string_view body, const std::string& model);

/// Reads llama.cpp's `GET /props`: `default_generation_settings.n_ctx` (the
/// window of one slot), else a top-level `n_ctx`.
std::optional<int64_t> read_llama_cpp_props(std::string_view body);

/// The source text of an Ollama model whose window the server does not
/// say: no `num_ctx`, not loaded. Names Ollama's default and the remedy.
std::string ollama_default_source(int64_t trained);

// -- the probe ------------------------------------------------------------------

/// Learns a model's window from its server, at most once: the first call of
/// describe() starts the requests, later calls wait for the same result or
/// get it at once. Requests (each bounded by max_probe_body,
/// max_probe_depth and what is left of probe_budget):
/// 1. `GET {base_url}/models`; done if the model's entry has a window.
/// 2. By the kind of server (kind_by_url, else the entries' `owned_by`):
///    LM Studio `GET {root}/api/v0/models/{model}`; Ollama
///    `POST {root}/api/show` and, without `num_ctx`, `GET {root}/api/ps`;
///    llama.cpp `GET {root}/props`. Other servers: nothing more.
/// Azure OpenAI is not asked (its deployments say no window). Any failure
/// ends the probe with the window unknown. Thread-safe.
class model_probe : public std::enable_shared_from_this<model_probe> {
public:
  /// Creates a probe that sends its requests through `host.http()`.
  model_probe(sdk::host_context& host, provider_config cfg);

  /// Calls `done` once with `base` plus the window learned (see
  /// sdk::llm_provider::describe), at once when the probe is over, else
  /// when it ends (from the host's I/O thread).
  void describe(sdk::model_info base, std::function<void(sdk::model_info)> done);

  /// Number of HTTP requests started so far (for tests and logs).
  size_t requests_started() const;

private:
  enum class step : uint8_t { models, lm_studio, ollama_show, ollama_ps, llama_cpp };

  friend class probe_sink;

  void start(step what);
  void on_answer(step what, int status, std::string body, bool failed);
  void finish(std::optional<window_fact> found);

  sdk::host_context& host_;
  provider_config cfg_;
  mutable std::mutex mtx_;
  enum class phase : uint8_t { idle, running, done } phase_ = phase::idle;
  std::chrono::steady_clock::time_point deadline_;
  server_kind kind_ = server_kind::unknown;
  int64_t ollama_trained_ = 0;
  size_t requests_ = 0;
  sdk::model_info base_;
  std::optional<window_fact> result_;
  std::vector<std::function<void(sdk::model_info)>> waiting_;
};

} // namespace quarry::plugins::llm_openai
