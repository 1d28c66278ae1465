// The `open_url` tool: reads web pages, PDFs and indexed local documents for
// the research agents, with Onyx's schema, window, budget and messages.
#pragma once

#include "open_url_text.hpp"

#include "quarry/fetch/fetch.hpp"
#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace quarry::plugins::open_url {

/// The tool's configuration.
struct tool_config {
  fetch::fetch_options fetch;
  size_t max_urls = default_max_urls;
  size_t window_chars = default_window_chars;
  size_t budget_chars = default_budget_chars;
  /// The local corpus database for `corpus:<n>` ids and indexed `file://`
  /// URLs; empty disables them.
  std::string corpus_db;
};

/// Validates the configuration: the fetch keys (see
/// fetch::parse_fetch_options), `max_urls` (1-50), `window_chars`,
/// `budget_chars` and `corpus_db` (default: the local_corpus plugin's default
/// database next to this plugin's data folder). Throws std::invalid_argument
/// for bad or unknown keys.
tool_config parse_config(const nlohmann::json& config, const std::string& data_dir);

/// The `open_url` tool.
class open_url_tool final : public sdk::tool {
public:
  open_url_tool(sdk::host_context& host, tool_config config);

  ~open_url_tool() override;

  std::string name() const override;

  std::string description() const override;

  nlohmann::json parameters() const override;

  /// Arguments: `urls` (Onyx's schema). The host may add
  /// `_quarry: {"snippets": {"<url>": "<search snippet>"}}` so that a long
  /// page is windowed around the part the search engine showed.
  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override;

  /// Takes the host's cache limits for the pages read: this tool's calls
  /// pass that one cache, not the host's too.
  bool own_cache(std::chrono::milliseconds ttl, size_t max_entries) override;

  /// Shared with calls still running.
  struct state;

private:
  sdk::host_context& host_;
  std::shared_ptr<state> state_;
};

} // namespace quarry::plugins::open_url
