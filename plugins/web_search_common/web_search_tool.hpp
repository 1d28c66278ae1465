// The `web_search` tool shared by all search plugins: runs the normalised
// queries in parallel through a provider backend (the SDK's search helper)
// and merges the results.
#pragma once

#include "web_search_common.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/search.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace quarry::plugins::web_search_common {

/// What a search provider contributes: one request per query, the parser of
/// a response body, and the classification of an error response (by default
/// sdk::http_status_error with sdk::http_error_message of the body).
using backend = sdk::search_backend;

/// The `web_search` tool over one backend.
class search_tool final : public sdk::tool {
public:
  /// `cfg` supplies max_results and the timeout.
  search_tool(sdk::host_context& host, std::shared_ptr<const backend> impl, common_config cfg);

  std::string name() const override;

  std::string description() const override;

  nlohmann::json parameters() const override;

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override;

  /// Takes the host's cache limits for the query cache: this tool's calls
  /// pass that one cache, not the host's too.
  bool own_cache(std::chrono::milliseconds ttl, size_t max_entries) override;

  /// Results of recent queries, shared by all runs of this tool (all agents
  /// of all sessions): a query that ran within the cache's time (10 minutes
  /// unless the host says otherwise) is answered without a request.
  /// Failures are not kept.
  struct query_cache;

private:
  sdk::host_context& host_;
  std::shared_ptr<const backend> impl_;
  common_config cfg_;
  std::shared_ptr<query_cache> cache_;
};

/// What a search plugin writes: the request for one query, the parser of a
/// response body, optionally a refinement of the classification of an error
/// response, each over its settings, and what the errors tell users (see
/// `classify_answer`).
template <class Config>
struct backend_parts {
  sdk::http_request (*request)(const Config& cfg, const std::string& query);
  parse_result (*parse)(const Config& cfg, std::string_view body);
  void (*refine_error)(sdk::error& err, int status, std::string_view body) = nullptr;
  /// The service's name and remedies; null: "the search service", none.
  const error_advice* advice = nullptr;
};

/// Classifies an error answer of a search backend: the class from the status
/// and the wait from `Retry-After` (sdk::http_status_error), the message
/// from the body as short readable text (error_text: an HTML page becomes
/// its title and first words), refined by `refine` (the backend's own error
/// codes, which may change the class), then explained with `advice` (see
/// `explain`).
sdk::error classify_answer(int status, const sdk::http_headers& headers, std::string_view body,
                           void (*refine)(sdk::error&, int, std::string_view),
                           const error_advice* advice);

/// A parser of the body alone as a backend part (for a `Parse` that needs no
/// settings).
template <class Config, parse_result (*Parse)(std::string_view)>
parse_result body_only(const Config&, std::string_view body) {
  return Parse(body);
}

/// The backend made of a plugin's parts and settings.
template <class Config>
class parts_backend final : public backend {
public:
  parts_backend(Config cfg, backend_parts<Config> parts) : cfg_(std::move(cfg)), parts_(parts) {
    // nop
  }

  sdk::http_request make_request(const std::string& query) const override {
    return parts_.request(cfg_, query);
  }

  parse_result parse(std::string_view body) const override {
    return parts_.parse(cfg_, body);
  }

  sdk::error classify(int status, const sdk::http_headers& headers,
                      std::string_view body) const override {
    return classify_answer(status, headers, body, parts_.refine_error, parts_.advice);
  }

private:
  Config cfg_;
  backend_parts<Config> parts_;
};

/// Creates the `web_search` tool over a plugin's parts and settings `cfg`
/// (the common settings in `cfg.common`).
template <class Config>
std::unique_ptr<sdk::tool>
make_search_tool(sdk::host_context& host, Config cfg, backend_parts<Config> parts) {
  auto common = cfg.common;
  return std::make_unique<search_tool>(
    host, std::make_shared<parts_backend<Config>>(std::move(cfg), parts), std::move(common));
}

} // namespace quarry::plugins::web_search_common
