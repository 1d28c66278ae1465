// The `openai` LLM provider: Chat Completions over SSE for OpenAI, Azure
// OpenAI and OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio,
// OpenRouter, Groq, DeepSeek, Gemini).

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/llm_provider.hpp"
#include "quarry/sdk/reasoning_tags.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quarry::plugins::llm_openai {

/// The validated instance configuration.
struct provider_config {
  /// API root; requests go to `base_url + "/chat/completions"`.
  std::string base_url = "https://api.openai.com/v1";
  /// Sent as `Authorization: Bearer` (or `api-key` for Azure); may be empty.
  std::string api_key;
  /// Model (or Azure deployment's model) name.
  std::string model;
  /// Azure OpenAI: `api-key` header instead of a bearer token.
  bool azure = false;
  /// Appended as `?api-version=` when not empty.
  std::string api_version;
  /// `OpenAI-Organization` header, if set.
  std::string organization;
  /// `OpenAI-Project` header, if set.
  std::string project;
  /// Extra headers sent with every request.
  sdk::http_headers headers;
  /// A reasoning model: `max_completion_tokens`, no temperature.
  bool reasoning = false;
  /// Default reasoning effort when the request names none.
  std::string reasoning_effort;
  /// Default output token limit when the request sets none (0: none).
  int64_t max_tokens = 0;
  /// Default temperature when the request sets none.
  std::optional<double> temperature;
  /// Context window reported by info().
  int64_t context_window = 0;
  /// Whether tools are sent to the model.
  bool supports_tools = true;
  /// The tags whose leading block in the answer text is reasoning
  /// (`reasoning_tags`: true for sdk::default_reasoning_tags(), false for
  /// none, or a list of `[open, close]` pairs).
  std::vector<sdk::reasoning_tag> reasoning_tags = sdk::default_reasoning_tags();
  /// `reasoning_opener_in_prompt`: whether the chat template puts the
  /// opening tag into the prompt, so that the answer starts inside the
  /// thought. Unset (`auto`): yes for DeepSeek-R1 style model names, and
  /// from the first answer that closes a thought it never opened.
  std::optional<bool> opener_in_prompt;
  /// `reasoning_round_trip`: whether an assistant turn with tool calls is
  /// sent back with its reasoning as `reasoning_content` (DeepSeek's
  /// thinking mode requires it). Unset (`auto`): yes for DeepSeek's API and
  /// model names, and after the server said it needs it.
  std::optional<bool> reasoning_round_trip;
};

/// Whether `model` names a DeepSeek-R1 style model whose chat template puts
/// `<think>` into the prompt (`deepseek-r1`, `r1-distill`, `...-r1:...`).
bool opener_in_prompt_by_name(std::string_view model);

/// Whether the server or model is DeepSeek's (its API host or a model
/// name starting with `deepseek`), whose thinking mode needs the reasoning
/// of tool-call turns back.
bool round_trip_by_default(const std::string& base_url, const std::string& model);

/// Whether an error message says the server wants earlier turns'
/// `reasoning_content` back.
bool asks_for_reasoning_back(std::string_view message);

/// What a provider learned from its answers (shared by its calls).
struct learned_facts {
  /// An answer closed a thought it never opened.
  std::atomic<bool> opener_in_prompt{false};
  /// The server asked for `reasoning_content` back.
  std::atomic<bool> round_trip{false};
};

/// Validates an instance configuration. Throws std::invalid_argument for a
/// missing model, a wrongly typed value or an unknown key (host-level LLM
/// keys are accepted and ignored).
provider_config parse_config(const nlohmann::json& config);

/// Returns the request URL for `cfg`.
std::string request_url(const provider_config& cfg);

/// Returns the JSON body for `req` under `cfg`. `round_trip`: assistant
/// turns with tool calls carry their reasoning as `reasoning_content`.
nlohmann::json request_body(const provider_config& cfg, const sdk::chat_request& req,
                            bool round_trip = false);

/// Returns request_body() as sdk::dump_json() writes it, byte for byte, but
/// written directly: the conversation is copied once, into the text.
std::string request_text(const provider_config& cfg, const sdk::chat_request& req,
                         bool round_trip = false);

/// Returns the complete HTTP request (URL, headers, body) for `req`.
sdk::http_request build_request(const provider_config& cfg, const sdk::chat_request& req,
                                bool round_trip = false);

/// Replaces every occurrence of `secret` in `text` with `***`.
std::string redact(std::string text, const std::string& secret);

class model_probe; // openai_models.hpp

/// The provider object created by the plugin's factory.
class provider final : public sdk::llm_provider {
public:
  /// Creates a provider that sends its requests through `host.http()`.
  provider(sdk::host_context& host, provider_config cfg);

  /// Returns the model, context window, tool and reasoning support from
  /// the configuration.
  sdk::model_info info() const override;

  /// Starts a streaming Chat Completions request and returns at once; the
  /// returned handle cancels it.
  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request request,
                                       std::shared_ptr<sdk::chat_sink> sink) override;

  /// info() with the context window: `context_window` of the configuration
  /// when set (source `config`), else what the server says, probed once per
  /// provider object (see model_probe in openai_models.hpp).
  void describe(std::function<void(sdk::model_info)> done) override;

  /// The probe of describe() (for tests: its request count).
  const model_probe& probe() const noexcept {
    return *probe_;
  }

  /// The configuration in use.
  const provider_config& config() const noexcept {
    return cfg_;
  }

  /// Whether requests send reasoning back now (configured, by default, or
  /// learned).
  bool round_trip() const noexcept;

private:
  sdk::host_context& host_;
  provider_config cfg_;
  std::shared_ptr<learned_facts> learned_ = std::make_shared<learned_facts>();
  std::shared_ptr<model_probe> probe_;
};

} // namespace quarry::plugins::llm_openai
