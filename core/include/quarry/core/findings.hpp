// What research agents found, as later steps see it: the digest given to
// later agents, tool results renumbered to an agent's document numbers, and
// the research plan cut to its allowed number of steps.

#pragma once

#include "quarry/core/citations.hpp"
#include "quarry/sdk/types.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::core {

/// Roughly how many characters a findings digest holds in all.
inline constexpr size_t findings_digest_budget = 2400;

/// The digest of `findings` (pairs of task and report) that later research
/// agents get: citation markers removed (resolved against `global`), each
/// report on one line and cut at a word to its share of
/// @ref findings_digest_budget (at least 200 characters). Empty without
/// findings.
std::string findings_digest(const std::vector<std::pair<std::string, std::string>>& findings,
                            const citation_mapping& global);

/// Rewrites the `document` numbers of a tool's LLM-facing JSON
/// (`{"results": [{"document": n, ...}]}`): result i is documents[i]; its
/// number comes from `number_of(documents[i])`. Text that is not such JSON,
/// or is nested deeper than the SDK's default JSON depth, is returned
/// unchanged.
std::string renumber_documents(const std::string& llm_text,
                               const std::vector<sdk::document>& documents,
                               const std::function<int(const sdk::document&)>& number_of);

/// Where the step after the first `max_steps` numbered steps of `plan`
/// begins (a line whose first non-blank character is a digit), or npos when
/// the plan has no more steps than that (so far, while it streams).
size_t plan_cap_end(const std::string& plan, int max_steps);

/// The plan cut to its first `max_steps` steps, trailing blanks removed.
std::string cap_plan(const std::string& plan, int max_steps);

/// Caps a plan while it streams, in time linear in its length however it is
/// split: each piece fed returns the text to show now, which stops before
/// the first line of step `max_steps + 1` (blanks at the start of a line are
/// held until the line shows whether it begins a step).
class plan_stream_cap {
public:
  explicit plan_stream_cap(int max_steps) : max_steps_(max_steps) {
    // nop
  }

  /// Takes the next piece of the plan; returns what to show of it.
  std::string feed(std::string_view piece);

  /// Whether the plan went past `max_steps` steps.
  bool cut() const noexcept {
    return cut_;
  }

private:
  int max_steps_;
  int steps_ = 0;
  bool cut_ = false;
  // Whether the current line's first non-blank character was seen.
  bool line_started_ = false;
  // Blanks at the start of the current line, not shown yet.
  std::string held_;
};

} // namespace quarry::core
