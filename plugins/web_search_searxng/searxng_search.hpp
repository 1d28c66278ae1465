// The SearXNG backend of the `web_search` tool: request builder, response
// parser and error classification.
#pragma once

#include "web_search_tool.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>

namespace quarry::plugins::web_search_searxng {

/// A local instance (SearXNG has no central endpoint).
constexpr const char* default_base_url = "http://127.0.0.1:8888";

/// Settings of the plugin.
struct config {
  web_search_common::common_config common;
  /// Optional request parameters; empty means "not sent".
  std::string categories;
  std::string language;
  std::string time_range;
  std::string safesearch;
  std::string engines;
};

/// Reads the configuration (no key is required); throws
/// std::invalid_argument on bad or unknown keys.
config parse_config(const nlohmann::json& cfg);

/// The request for one query.
sdk::http_request make_request(const config& cfg, const std::string& query);

/// Parses a SearXNG JSON response body (`results`), keeping at most
/// `limit` results (the API cannot limit them itself).
web_search_common::parse_result parse_response(std::string_view body, size_t limit);

/// Creates the `web_search` tool backed by SearXNG.
std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg);

} // namespace quarry::plugins::web_search_searxng
