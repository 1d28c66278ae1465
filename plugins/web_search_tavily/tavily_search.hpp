// The Tavily backend of the `web_search` tool: request builder, response
// parser and error classification.
#pragma once

#include "web_search_tool.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>

namespace quarry::plugins::web_search_tavily {

/// The real endpoint's origin.
constexpr const char* default_base_url = "https://api.tavily.com";

/// Settings of the plugin.
struct config {
  web_search_common::common_config common;
  /// `basic` (default), `advanced`, `fast` or `ultra-fast`.
  std::string search_depth = "basic";
  /// `general` (default), `news` or `finance`.
  std::string topic = "general";
  /// Optional; empty means "not sent".
  std::string country;
};

/// Reads the configuration; throws std::invalid_argument on bad or unknown
/// keys.
config parse_config(const nlohmann::json& cfg);

/// The request for one query.
sdk::http_request make_request(const config& cfg, const std::string& query);

/// Parses a Tavily search response body (`results`).
web_search_common::parse_result parse_response(std::string_view body);

/// Creates the `web_search` tool backed by Tavily.
std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg);

} // namespace quarry::plugins::web_search_tavily
