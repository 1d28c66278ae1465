// Entry point of the `tavily` web_search plugin: the factory only.

#include "tavily_search.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  return quarry::plugins::web_search_tavily::make_tool(host, config);
}

} // namespace

QUARRY_PLUGIN(tavily, quarry::sdk::plugin_kind::tool, "0.1.0",
              "web_search through the Tavily Search API", &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("api_key", "base_url", "max_results", "timeout", "search_depth", "topic",
                   "country")

// A web search: shown as one, its snippets go to the page reader.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
