// Entry point of the `open_url` tool plugin: the factory only.

#include "open_url_tool.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  using namespace quarry::plugins::open_url;
  return std::make_unique<open_url_tool>(host, parse_config(config, host.data_dir()));
}

} // namespace

QUARRY_PLUGIN(open_url, quarry::sdk::plugin_kind::tool, "0.1.0",
              "open_url: reads web pages (main content), PDFs, text and "
              "indexed local documents, refusing internal addresses",
              &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("allow", "connect_timeout", "stall_timeout", "call_timeout", "max_redirects",
                   "max_html_size", "max_pdf_size", "user_agent", "max_urls", "window_chars",
                   "budget_chars", "corpus_db")

// Reads pages; gets the search snippets of their URLs.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::page_reader)
