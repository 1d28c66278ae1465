// Entry point of the `anthropic` plugin: the factory and the descriptor.

#include "anthropic_provider.hpp"

#include "quarry/sdk/plugin.hpp"

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& cfg) {
  return quarry::plugins::llm_anthropic::make_provider(host, cfg);
}

} // namespace

QUARRY_PLUGIN(anthropic, quarry::sdk::plugin_kind::llm, "0.1.0",
              "Anthropic Messages API (streaming, tools, extended thinking)", &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("base_url", "api_key", "model", "anthropic_version", "beta", "max_tokens",
                   "thinking_budget", "headers", "context_window", "temperature", "reasoning")
