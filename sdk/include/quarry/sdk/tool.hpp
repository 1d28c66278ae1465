// This file is part of the Quarry plugin SDK.
// The interface of a tool plugin (web search, open URL, internal search, ...).

#pragma once

#include "quarry/sdk/plugin_object.hpp"
#include "quarry/sdk/types.hpp"
#include "quarry/sdk/version.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::sdk {

/// What a tool is. The host treats every tool of a kind alike, whatever its
/// name: the research agent shows its calls as searches or page reads,
/// remembers the snippets searches found and hands them to page readers.
/// A tool plugin declares its kind with QUARRY_TOOL_KIND (`plugin.hpp`);
/// without it, a tool is `other`.
enum class tool_kind : uint32_t {
  /// Anything else: its result goes to the model as it is.
  other = 0,
  /// Searches the web. Takes `queries` (a list of strings) and returns the
  /// results as documents with `url`, `title` and `snippet`.
  web_search = 1,
  /// Searches documents of the user's own (a corpus, an intranet); the same
  /// arguments and results as `web_search`.
  internal_search = 2,
  /// Reads pages. Takes `urls` (a list of strings) and returns the pages read
  /// as documents. The host adds `_quarry: {snippets: {URL: TEXT}}` to its
  /// arguments: the search snippets of those URLs, to centre what it keeps
  /// of a long page; the model's own `_quarry` never reaches a tool.
  page_reader = 3,
};

/// Returns `other`, `web_search`, `internal_search` or `page_reader`.
inline const char* to_string(tool_kind x) noexcept {
  switch (x) {
    case tool_kind::web_search:
      return "web_search";
    case tool_kind::internal_search:
      return "internal_search";
    case tool_kind::page_reader:
      return "page_reader";
    case tool_kind::other:
      break;
  }
  return "other";
}

/// Returns whether `x` is a search (web or internal).
inline bool is_search(tool_kind x) noexcept {
  return x == tool_kind::web_search || x == tool_kind::internal_search;
}

/// What a tool run produced.
struct tool_result {
  /// The text the LLM sees as the tool's answer. Always set, also on failure
  /// (then it explains the failure in words the model can act on).
  std::string llm_text;
  /// The documents found or read, in the order the LLM sees them.
  std::vector<document> documents;
  /// Set when the run failed.
  std::optional<error> failure;
};

/// Cancels a tool run. Safe to call from any thread, any number of times.
class QUARRY_SDK_API tool_run {
public:
  virtual ~tool_run() = default;

  /// Stops the run; the callback receives a result with errc::cancelled
  /// unless the run already finished.
  virtual void cancel() = 0;
};

/// Called exactly once with the result of a tool run, possibly on the host's
/// I/O thread or a pool thread: must return quickly and never block.
using tool_callback = std::function<void(tool_result)>;

/// A tool the research agents can call.
class QUARRY_SDK_API tool : public plugin_object {
public:
  /// The name the LLM calls the tool by, e.g. `web_search`.
  virtual std::string name() const = 0;

  /// What the tool does, for the LLM.
  virtual std::string description() const = 0;

  /// JSON schema of the arguments (`{"type": "object", ...}`).
  virtual nlohmann::json parameters() const = 0;

  /// Returns the definition in OpenAI function format.
  tool_definition definition() const {
    return {name(), description(), parameters()};
  }

  /// Offers the tool the user's limits for caching its results
  /// (`tools.NAME.limits.cache_ttl` and `cache_entries`; a `ttl` of 0 means
  /// nothing is cached). A tool that keeps a cache of its own, finer than
  /// whole calls and shared by all of them (a search per query, a page
  /// reader per page), applies the limits to it and returns true: the host
  /// then does not cache the tool's calls, so that a call passes one cache.
  /// The default returns false: the host caches whole calls (the same
  /// arguments get the same result). Called by the host before the tool's
  /// first run. Plugin ABI 4.
  virtual bool own_cache(std::chrono::milliseconds ttl, size_t max_entries) {
    (void)ttl;
    (void)max_entries;
    return false;
  }

  /// Starts a run with the arguments the LLM produced and returns at once.
  /// `done` is called exactly once.
  virtual std::shared_ptr<tool_run> run(const nlohmann::json& arguments, tool_callback done) = 0;
};

} // namespace quarry::sdk
