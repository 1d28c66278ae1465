// Configuration of one `anthropic` provider instance: defaults, validation
// and the derived request headers.

#pragma once

#include "quarry/sdk/host.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quarry::plugins::llm_anthropic {

/// The public Anthropic API endpoint (without path).
inline constexpr const char* default_base_url = "https://api.anthropic.com";

/// The API version sent in `anthropic-version` unless configured otherwise.
inline constexpr const char* default_api_version = "2023-06-01";

/// The `max_tokens` sent when a request leaves it at 0 (Anthropic requires
/// the field).
inline constexpr int64_t default_max_tokens = 8192;

/// The smallest thinking budget the API accepts (`budget_tokens` >= 1024,
/// Anthropic's extended-thinking documentation); parse_config refuses a
/// budget between 1 and 1023.
inline constexpr int64_t min_thinking_budget = 1024;

/// The context window reported when the configuration does not say.
inline constexpr int64_t default_context_window = 200000;

/// A validated instance configuration.
struct config {
  /// Scheme, host and optional path prefix; never ends with `/`.
  std::string base_url = default_base_url;
  /// Sent as `x-api-key`; may be empty for servers other than the public API.
  std::string api_key;
  /// The model to ask unless a request names another one.
  std::string model;
  /// Sent as `anthropic-version`.
  std::string anthropic_version = default_api_version;
  /// Sent comma-joined as `anthropic-beta` when not empty.
  std::vector<std::string> beta;
  /// Used when a request says `max_tokens: 0`.
  int64_t max_tokens = default_max_tokens;
  /// Extended-thinking budget in tokens (`thinking.budget_tokens`); 0
  /// disables thinking, else at least min_thinking_budget.
  int64_t thinking_budget = 0;
  /// Extra headers sent with every request.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Reported through model_info.
  int64_t context_window = default_context_window;
  /// Whether the model reasons (host key `reasoning`); defaults to
  /// `thinking_budget > 0`.
  bool reasoning = false;
  /// Used when a request carries no temperature.
  std::optional<double> temperature;

  /// Returns the URL requests go to: `base_url + "/v1/messages"`.
  std::string messages_url() const;

  /// Returns whether requests ask for extended thinking.
  bool thinking_enabled() const noexcept {
    return thinking_budget > 0 && reasoning;
  }
};

/// Validates `x` and fills in defaults. Throws std::invalid_argument naming
/// the offending key for missing, mistyped, invalid or unknown keys (host-level
/// LLM keys are accepted and ignored, except `context_window` and `reasoning`,
/// which feed model_info).
config parse_config(const nlohmann::json& x);

/// Returns the request headers for `cfg`: content type, accept, x-api-key
/// (when set), anthropic-version, anthropic-beta (when set), then the extra
/// configured headers.
sdk::http_headers make_headers(const config& cfg);

} // namespace quarry::plugins::llm_anthropic
