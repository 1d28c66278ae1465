// This file is part of the Quarry plugin SDK.
// The interface of a tool plugin (web search, open URL, internal search, ...).

#pragma once

#include "quarry/sdk/plugin_object.hpp"
#include "quarry/sdk/types.hpp"
#include "quarry/sdk/version.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::sdk {

/// The tool-instance keys the host itself reads (concurrency, time limit,
/// result cache). The one list of them.
inline constexpr std::string_view host_tool_keys[] = {
  "max_concurrency", "timeout", "cache_ttl", "cache_entries"};

/// Returns whether `key` is one of the tool-instance keys the host itself
/// reads (concurrency, time limit, result cache). Tool plugins accept these in
/// their configuration and ignore them.
inline bool is_host_tool_key(std::string_view key) noexcept {
  for (auto x : host_tool_keys)
    if (key == x)
      return true;
  return false;
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

  /// Starts a run with the arguments the LLM produced and returns at once.
  /// `done` is called exactly once.
  virtual std::shared_ptr<tool_run> run(const nlohmann::json& arguments,
                                        tool_callback done)
    = 0;
};

} // namespace quarry::sdk
