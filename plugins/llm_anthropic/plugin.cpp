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
              "Anthropic Messages API (streaming, tools, extended thinking)",
              &make)
