// Entry point of the `brave` web_search plugin: the factory only.

#include "brave_search.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  return quarry::plugins::web_search_brave::make_tool(host, config);
}

} // namespace

QUARRY_PLUGIN(brave, quarry::sdk::plugin_kind::tool, "0.1.0",
              "web_search through the Brave Search API", &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("api_key", "base_url", "max_results", "timeout", "country", "search_lang",
                   "ui_lang", "safesearch", "freshness")

// A web search: shown as one, its snippets go to the page reader.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
