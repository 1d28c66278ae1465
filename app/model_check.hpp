// The check of the models' context windows before a research starts: the
// window of each model a research uses (as its provider's describe() found
// it), the design's minimum for deep research, and the prompt budget the
// sessions get. Plain C++ (no CAF): research_engine asks the provider actors
// and hands their answers to check_context_windows().

#pragma once

#include "quarry/core/settings.hpp"
#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace quarry::app {

/// The smallest context window deep research runs with, in tokens: Onyx's
/// dr_loop.py refuses an LLM with `max_input_tokens < 50000`
/// (../shared/reference/onyx-deep-research-spec.md, section 2).
inline constexpr int64_t min_research_context = 50'000;

/// A model a research uses and what its provider said about it.
struct model_window {
  /// The research roles it serves: `orchestrator`, `research`, `report`.
  std::vector<std::string> roles;
  /// The instance name (`llm.providers.NAME`) and its plugin.
  std::string provider;
  std::string plugin;
  /// The facts from the provider actor (`describe_atom`): the window in
  /// tokens (0: unknown) and where it comes from.
  sdk::model_info info;
};

/// What the check decided.
struct context_verdict {
  /// The prompt budget of the sessions (`session_spec::context_tokens`):
  /// research.context_tokens when set to other than its default, else the
  /// smallest known window of the models, else the default.
  int64_t context_tokens = 0;
  /// Why no research may start (exit 2, or an error answer of `quarry
  /// serve`): the window, its source and the remedy. Empty when it may.
  std::string refusal;
  /// One line each, for people (stderr or the log): a window adopted, a
  /// window unknown and what Quarry assumes, the reduced mode.
  std::vector<std::string> notes;
};

/// Decides from `models` (the extractive provider is exempt: it has no
/// window) under `research`:
/// - research.context_tokens set to other than its default (128,000) is the
///   window: below min_research_context it is refused like a server's;
/// - else the smallest known window becomes the budget; below
///   min_research_context the research is refused with the window, its
///   source and the remedy, unless research.allow_small_context;
/// - an unknown window never refuses: a note says so and what Quarry
///   assumes.
context_verdict check_context_windows(const core::research_settings& research,
                                      const std::vector<model_window>& models);

/// The provider instance that serves the first of `roles` found in
/// `llm.roles` (as research_engine assigns them), else `fallback`.
std::string provider_for_role(const core::llm_settings& llm,
                              std::initializer_list<const char*> roles,
                              const std::string& fallback);

/// Returns `n` with thousands separators, e.g. `131,072`.
std::string token_count(int64_t n);

} // namespace quarry::app
