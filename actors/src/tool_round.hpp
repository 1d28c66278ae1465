// The tool calls of a research step, run as a research agent runs them:
// packets by the tool's kind (not its name), the search engines' snippets
// centring later page reads, documents numbered per document id, and every
// failure said (a `tool_failed` packet) and answered. Shared by the research
// agent and the reflective strategy's classic researcher. Internal to
// quarry_actors.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/core/document_numbers.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>

namespace caf {
class error;
} // namespace caf

namespace quarry::actors::detail {

/// One researcher's tool calls (a research agent's, or a reflective step's).
class tool_round {
public:
  /// What the tool actor is sent.
  struct started {
    /// The tool; null: `result` answers the call at once (no such tool).
    const tool_set::entry* tool = nullptr;
    /// The arguments as the tool gets them: the model's, with the snippets
    /// of earlier searches for a page reader (`_quarry.snippets`) and any
    /// `_quarry` the model wrote removed; the model's own text when it is
    /// not JSON (the tool explains).
    std::string arguments;
    /// `arguments` parsed (null when they are not JSON), for the tool
    /// provider, which then does not parse them again.
    std::shared_ptr<const nlohmann::json> parsed;
    sdk::tool_result result;
  };

  /// Announces `call` at `at` (search: start and queries; page reader:
  /// start and URLs) and returns what to send to which tool.
  started start(const tool_set& tools, const sdk::tool_call& call, const packet_sink_actor& emitter,
                const core::placement& at);

  /// The tool answered: its documents get this researcher's numbers (in
  /// `r.llm_text` too), search snippets are kept, and its packets are sent
  /// (documents, a `tool_failed` error for a failure without documents,
  /// the section's end).
  void answered(sdk::tool_kind kind, sdk::tool_result& r, const packet_sink_actor& emitter,
                const core::placement& at);

  /// The tool actor failed: the result the model reads, and its packets.
  sdk::tool_result failed(const std::string& name, const caf::error& err,
                          const packet_sink_actor& emitter, const core::placement& at);

  /// This researcher's citation numbers.
  core::document_numbers numbers;

private:
  // Search snippets by URL, for the page reader's window.
  std::map<std::string, std::string> snippets_;
};

} // namespace quarry::actors::detail
