// The `openai` LLM provider: Chat Completions over SSE for OpenAI, Azure
// OpenAI and OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio,
// OpenRouter, Groq, DeepSeek, Gemini).

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/llm_provider.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
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
};

/// Validates an instance configuration. Throws std::invalid_argument for a
/// missing model, a wrongly typed value or an unknown key (host-level LLM
/// keys are accepted and ignored).
provider_config parse_config(const nlohmann::json& config);

/// Returns the request URL for `cfg`.
std::string request_url(const provider_config& cfg);

/// Returns the JSON body for `req` under `cfg`.
nlohmann::json request_body(const provider_config& cfg,
                            const sdk::chat_request& req);

/// Returns the complete HTTP request (URL, headers, body) for `req`.
sdk::http_request build_request(const provider_config& cfg,
                                const sdk::chat_request& req);

/// Replaces every occurrence of `secret` in `text` with `***`.
std::string redact(std::string text, const std::string& secret);

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
  std::shared_ptr<sdk::chat_call>
  chat(sdk::chat_request request, std::shared_ptr<sdk::chat_sink> sink) override;

  /// The configuration in use.
  const provider_config& config() const noexcept {
    return cfg_;
  }

private:
  sdk::host_context& host_;
  provider_config cfg_;
};

} // namespace quarry::plugins::llm_openai
