// The `internal_search` tool: BM25 search over the local corpus index, with
// Onyx's schema and the same LLM-facing JSON as web_search.

#pragma once

#include "quarry/corpus/index.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace quarry::plugins::local_corpus {

using corpus::corpus_index;
using corpus::search_hit;

/// Default number of documents a call returns.
inline constexpr size_t default_max_results = 10;

/// The documents whose best passages widen a query when feedback is on
/// (Anserini's default for RM3).
inline constexpr size_t feedback_documents = 10;

/// The tool's configuration.
struct tool_config {
  /// The database file.
  std::string db;
  /// Largest number of documents per call (1-100).
  size_t max_results = default_max_results;
  /// Whether each query is widened by pseudo-relevance feedback (RM3 with
  /// feedback_documents documents; corpus::search_options).
  bool feedback = true;
  /// Documents are `<id_prefix>:<n>` (letters, digits and `_`): `corpus`,
  /// whose ids open_url reads; another for an index of its own (a
  /// research's uploaded files, `upload`), so that its documents never
  /// share an id with the corpus's.
  std::string id_prefix = "corpus";
};

/// Validates the configuration (keys `db`, `max_results`; the database
/// defaults to `<data_dir>/corpus.db`). Throws std::invalid_argument for
/// missing, invalid or unknown keys.
tool_config parse_config(const nlohmann::json& config, const std::string& data_dir);

/// Normalises the `queries` argument like Onyx: a bare string is one query;
/// control characters removed, whitespace folded, empties and duplicates
/// dropped. Returns nothing when the argument is missing or of the wrong type.
std::optional<std::vector<std::string>> normalize_queries(const nlohmann::json& arguments);

/// Runs every query (each widened by pseudo-relevance feedback if
/// `feedback`) and interleaves the hits round-robin, one per document, at
/// most `max_results`. Fills `llm_text` with `{"results": [...]}`.
/// Blocking: call it on the host's pool.
sdk::tool_result search_corpus(corpus_index& index, const std::vector<std::string>& queries,
                               size_t max_results, bool feedback = true,
                               const std::string& id_prefix = "corpus");

/// The `internal_search` tool. Opens the database on first use, in the
/// host's blocking pool.
class internal_search_tool final : public sdk::tool {
public:
  internal_search_tool(sdk::host_context& host, tool_config config);

  ~internal_search_tool() override;

  std::string name() const override;

  std::string description() const override;

  nlohmann::json parameters() const override;

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override;

  /// Shared with jobs still in the pool.
  struct state;

private:
  sdk::host_context& host_;
  std::shared_ptr<state> state_;
};

} // namespace quarry::plugins::local_corpus
