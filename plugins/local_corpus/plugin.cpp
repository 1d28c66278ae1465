// Entry point of the `local_corpus` tool plugin (`internal_search`): the
// factory only.

#include "local_corpus_tool.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>

namespace {

std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context& host,
                                                 const nlohmann::json& config) {
  using namespace quarry::plugins::local_corpus;
  return std::make_unique<internal_search_tool>(host, parse_config(config, host.data_dir()));
}

} // namespace

QUARRY_PLUGIN(local_corpus, quarry::sdk::plugin_kind::tool, "0.1.0",
              "internal_search over a local SQLite FTS5 index of Markdown, "
              "text, HTML and PDF files",
              &make)

// Every key the factory accepts (the host reports others before creating it).
QUARRY_PLUGIN_KEYS("db", "max_results", "feedback", "id_prefix")

// A search of the user's own documents.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::internal_search)
