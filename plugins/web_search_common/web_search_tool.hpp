// The `web_search` tool shared by all search plugins: runs the normalised
// queries in parallel through a provider backend and merges the results.
#pragma once

#include "web_search_common.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace quarry::plugins::web_search_common {

/// What a search provider contributes: one request per query, the parser of
/// a response body, and the classification of an error response.
class backend {
public:
  virtual ~backend() = default;

  /// Builds the HTTP request for one query.
  virtual sdk::http_request make_request(const std::string& query) const = 0;

  /// Parses one successful response body into cleaned results.
  virtual parse_result parse(std::string_view body) const = 0;

  /// Classifies an error response (status outside 2xx). The default uses
  /// classify_status with error_message_of(body).
  virtual sdk::error classify(int status, const sdk::http_headers& headers,
                              std::string_view body) const;
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

} // namespace quarry::plugins::web_search_common
