// The `anthropic` LLM provider: streaming chat over the Anthropic Messages
// API through the host's HTTP client.

#pragma once

#include "anthropic_config.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/llm_provider.hpp"
#include "quarry/sdk/plugin_object.hpp"

#include <nlohmann/json.hpp>

#include <memory>

namespace quarry::plugins::llm_anthropic {

/// Largest error or non-streamed response body kept in memory.
inline constexpr size_t max_buffered_body = 32 * 1024 * 1024;

/// One configured Anthropic model. Thread-safe: any number of calls may run
/// at once, each with its own state.
class provider final : public sdk::llm_provider {
public:
  /// Creates a provider that sends requests through `host.http()`.
  provider(sdk::host_context& host, config cfg);

  /// Returns the configured model, context window and reasoning support.
  sdk::model_info info() const override;

  /// POSTs a streaming request to `base_url/v1/messages` (body: see
  /// build_request_body) and returns at once. The sink receives deltas, then
  /// exactly one of on_done (with the recorded thinking blocks in
  /// `reasoning_state`) and on_error (errc::empty_response for an answer
  /// with neither text nor tool call; see stream_assembler). A streamed or a
  /// JSON (`application/json`) answer is read alike.
  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request request,
                                       std::shared_ptr<sdk::chat_sink> sink) override;

  /// The validated configuration.
  const config& settings() const noexcept {
    return cfg_;
  }

private:
  sdk::host_context& host_;
  config cfg_;
};

/// The plugin factory: validates `cfg` (throwing std::invalid_argument) and
/// creates a @ref provider.
std::unique_ptr<sdk::plugin_object> make_provider(sdk::host_context& host,
                                                  const nlohmann::json& cfg);

} // namespace quarry::plugins::llm_anthropic
