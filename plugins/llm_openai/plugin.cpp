// Registration of the `openai` LLM provider plugin: the factory and the entry
// point. The logic lives in the quarry_openai_logic library.

#include "openai_provider.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  namespace openai = quarry::plugins::llm_openai;
  return std::make_unique<openai::provider>(host, openai::parse_config(config));
}

} // namespace

QUARRY_PLUGIN(openai, quarry::sdk::plugin_kind::llm, "0.1.0",
              "Chat Completions (OpenAI, Azure OpenAI and compatible servers)", &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("base_url", "api_key", "model", "azure", "api_version", "organization",
                   "project", "headers", "reasoning", "reasoning_effort", "max_tokens",
                   "temperature", "context_window", "supports_tools")
