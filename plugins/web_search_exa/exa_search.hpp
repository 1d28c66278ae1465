// The Exa backend of the `web_search` tool: request builder, response
// parser and error classification.
#pragma once

#include "web_search_tool.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>

namespace quarry::plugins::web_search_exa {

/// The real endpoint's origin.
constexpr const char* default_base_url = "https://api.exa.ai";

/// Settings of the plugin.
struct config {
  web_search_common::common_config common;
  /// `auto` (default, as Onyx), `neural`, `fast`, `deep` or `instant`.
  std::string type = "auto";
  /// Optional category (`news`, `research paper`, ...); empty: not sent.
  std::string category;
};

/// Reads the configuration; throws std::invalid_argument on bad or unknown
/// keys.
config parse_config(const nlohmann::json& cfg);

/// The request for one query.
sdk::http_request make_request(const config& cfg, const std::string& query);

/// Parses an Exa search response body (`results`); the snippet is the first
/// highlight, else the summary, else the text.
web_search_common::parse_result parse_response(std::string_view body);

/// Creates the `web_search` tool backed by Exa.
std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg);

} // namespace quarry::plugins::web_search_exa
