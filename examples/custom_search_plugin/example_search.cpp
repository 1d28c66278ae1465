// An example search tool plugin for Quarry. It runs each query against a
// SearXNG-compatible JSON endpoint through the host's HTTP client, merges the
// results, and answers the LLM with a numbered JSON list of documents.
//
// Configuration (in quarry.yaml):
//
//   tools:
//     custom_search:
//       plugin: example_search
//       endpoint: "https://search.example.org/search"
//       api_key: "${EXAMPLE_SEARCH_KEY:-}"   # optional, sent as a bearer token
//       max_results: 10
//
// The SDK's search helper (quarry/sdk/search.hpp) does the rest: reading the
// queries, one request per query in parallel, error statuses, merging and
// de-duplicating, the text for the model and the documents for the host.

#include <quarry/sdk/plugin.hpp>
#include <quarry/sdk/search.hpp>
#include <quarry/sdk/strings.hpp>

#include <memory>
#include <stdexcept>
#include <string>

namespace example_search {

using namespace quarry;

/// How to ask the search service one query, and how to read its answer.
class searxng_backend final : public sdk::search_backend {
public:
  searxng_backend(std::string endpoint, std::string api_key)
    : endpoint_(std::move(endpoint)), api_key_(std::move(api_key)) {
    // nop
  }

  sdk::http_request make_request(const std::string& query) const override {
    sdk::http_request req;
    req.url = endpoint_ + "?q=" + sdk::url_encode(query) + "&format=json";
    req.headers.emplace_back("Accept", "application/json");
    if (!api_key_.empty())
      req.headers.emplace_back("Authorization", "Bearer " + api_key_);
    return req;
  }

  sdk::search_page parse(std::string_view body) const override {
    sdk::search_page page;
    auto json = sdk::parse_json(body);
    if (!json.is_object() || !json.contains("results") || !json["results"].is_array()) {
      page.failure = sdk::make_error(sdk::errc::invalid_response,
                                     "the response is not SearXNG JSON");
      return page;
    }
    for (const auto& r : json["results"]) {
      if (!r.is_object() || !r.contains("url") || !r["url"].is_string())
        continue;
      sdk::search_result result;
      result.url = r["url"].get<std::string>();
      result.title = r.value("title", std::string{});
      result.snippet = r.value("content", std::string{});
      if (r.contains("publishedDate") && r["publishedDate"].is_string())
        result.published = r["publishedDate"].get<std::string>();
      page.results.push_back(std::move(result));
    }
    return page;
  }

private:
  std::string endpoint_;
  std::string api_key_;
};

/// Checks the configuration (throwing rejects it; the host reports the
/// message with the plugin's file) and creates the tool.
std::unique_ptr<sdk::plugin_object> make(sdk::host_context& host, const nlohmann::json& config) {
  if (!config.contains("endpoint") || !config["endpoint"].is_string())
    throw std::invalid_argument("'endpoint' (the search URL) is required");
  auto endpoint = config["endpoint"].get<std::string>();
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0)
    throw std::invalid_argument("'endpoint' must be an http or https URL");
  auto max_results = config.value("max_results", 10);
  if (max_results < 1 || max_results > 50)
    throw std::invalid_argument("'max_results' must be between 1 and 50");
  sdk::search_tool_info info;
  info.name = "custom_search";
  info.description = "Searches the configured search service. Give one or "
                     "more short queries; results are merged and numbered.";
  info.options.max_results = static_cast<size_t>(max_results);
  info.max_total_results = static_cast<size_t>(max_results);
  auto backend = std::make_shared<searxng_backend>(endpoint,
                                                   config.value("api_key", std::string{}));
  return std::make_unique<sdk::search_tool>(host, std::move(backend), std::move(info));
}

} // namespace example_search

QUARRY_PLUGIN(example_search, quarry::sdk::plugin_kind::tool, "1.0.0",
              "Searches a SearXNG-compatible JSON endpoint (example plugin)", &example_search::make)

// A web search: Quarry shows its calls as searches and hands the snippets it
// finds to open_url, as for the search backends that come with Quarry.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
