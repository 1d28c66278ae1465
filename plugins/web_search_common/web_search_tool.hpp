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

/// A backend that keeps its plugin's settings `Config` (the common ones in
/// `Config::common`) for the requests it makes.
template <class Config>
class configured_backend : public backend {
public:
  explicit configured_backend(Config cfg) : cfg_(std::move(cfg)) {
    // nop
  }

protected:
  Config cfg_;
};

/// The `web_search` tool over one backend.
class search_tool final : public sdk::tool {
public:
  /// `cfg` supplies max_results and the timeout.
  search_tool(sdk::host_context& host, std::shared_ptr<const backend> impl,
              common_config cfg);

  std::string name() const override;

  std::string description() const override;

  nlohmann::json parameters() const override;

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override;

  /// Results of recent queries, shared by all runs of this tool (all agents
  /// of all sessions): a query that ran in the last 10 minutes is answered
  /// without a request. Failures are not kept.
  struct query_cache;

private:
  sdk::host_context& host_;
  std::shared_ptr<const backend> impl_;
  common_config cfg_;
  std::shared_ptr<query_cache> cache_;
};

/// Creates the `web_search` tool over a `Backend` made from `cfg` (a
/// backend's configuration, with the common settings in `cfg.common`).
template <class Backend, class Config>
std::unique_ptr<sdk::tool> make_search_tool(sdk::host_context& host,
                                            Config cfg) {
  auto common = cfg.common;
  return std::make_unique<search_tool>(
    host, std::make_shared<Backend>(std::move(cfg)), std::move(common));
}

} // namespace quarry::plugins::web_search_common
