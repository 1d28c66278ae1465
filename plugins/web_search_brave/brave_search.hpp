// The Brave Search backend of the `web_search` tool: request builder,
// response parser and error classification.
#pragma once

#include "web_search_tool.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>

namespace quarry::plugins::web_search_brave {

/// The real endpoint's origin.
constexpr const char* default_base_url = "https://api.search.brave.com";

/// Settings of the plugin.
struct config {
  web_search_common::common_config common;
  /// Optional request parameters; empty means "not sent".
  std::string country;
  std::string search_lang;
  std::string ui_lang;
  std::string safesearch;
  std::string freshness;
};

/// Reads the configuration; throws std::invalid_argument on bad or unknown
/// keys.
config parse_config(const nlohmann::json& cfg);

/// The request for one query.
sdk::http_request make_request(const config& cfg, const std::string& query);

/// Parses a Brave web search response body (`web.results`).
web_search_common::parse_result parse_response(std::string_view body);

/// Creates the `web_search` tool backed by Brave.
std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg);

} // namespace quarry::plugins::web_search_brave
