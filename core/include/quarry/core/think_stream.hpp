// Streams the text of a `think_tool` call as reasoning while its arguments
// arrive (for models without native reasoning).
#pragma once

#include "quarry/sdk/types.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace quarry::core {

/// Turns the argument fragments of a `think_tool` call
/// (`{"reasoning": "..."}`) into reasoning text as they stream in.
///
/// Unlike Onyx's processor, the whole text is kept (Onyx never streams or
/// saves the last character), any JSON whitespace around the key and colon is
/// accepted, and every JSON escape is decoded (`\uXXXX` with surrogate pairs,
/// `\/`). When the arguments do not start with the `reasoning` key, nothing is
/// streamed early and @ref finish returns the `reasoning` value (or the text
/// of the arguments) at the end.
class think_stream {
public:
  /// The name of the tool whose calls this class streams.
  static constexpr std::string_view tool_name = "think_tool";

  /// Feeds one tool-call fragment of the model's response. Fragments of
  /// other calls are ignored. Returns the reasoning text that became
  /// available (possibly empty).
  std::string feed(const sdk::tool_call_delta& delta);

  /// Ends the stream. Returns the reasoning text not returned yet.
  std::string finish();

  /// Whether a think_tool call was seen.
  bool found() const noexcept {
    return index_.has_value();
  }

  /// The complete think_tool call (after @ref finish).
  std::optional<sdk::tool_call> call() const;

  /// All reasoning text so far (complete after @ref finish).
  const std::string& reasoning() const noexcept {
    return reasoning_;
  }

private:
  std::string take();
  void scan();

  enum class phase { prefix, value, done, fallback };
  std::optional<int> index_;
  std::string id_;
  std::string arguments_;
  size_t pos_ = 0;
  phase phase_ = phase::prefix;
  std::string reasoning_;
  size_t emitted_ = 0;
  bool finished_ = false;
};

} // namespace quarry::core
