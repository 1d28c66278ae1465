// Entry point of the `extractive` LLM provider plugin: the factory only.

#include "provider.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  using namespace quarry::plugins::llm_extractive;
  return std::make_unique<provider>(host, parse_config(config));
}

} // namespace

QUARRY_PLUGIN(extractive, quarry::sdk::plugin_kind::llm, "0.1.0",
              "Offline extractive provider: no model, deterministic answers quoted "
              "from the sources (for machines without an LLM and for benchmarks)",
              &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("max_parallel", "ttft_ms", "tokens_per_second", "max_sentences",
                   "context_window", "reasoning")
