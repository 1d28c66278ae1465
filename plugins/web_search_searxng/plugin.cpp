// Entry point of the `searxng` web_search plugin: the factory only.

#include "searxng_search.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  return quarry::plugins::web_search_searxng::make_tool(host, config);
}

} // namespace

QUARRY_PLUGIN(searxng, quarry::sdk::plugin_kind::tool, "0.1.0",
              "web_search through a self-hosted SearXNG instance (format=json)", &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("api_key", "base_url", "max_results", "timeout", "categories", "language",
                   "time_range", "safesearch", "engines")

// A web search: shown as one, its snippets go to the page reader.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
