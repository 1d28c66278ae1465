// The extractive LLM provider: configuration, streaming through the sink in
// word-sized pieces, simulated time-to-first-token and token rate, cancel.

#pragma once

#include "extractive.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/llm_provider.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace quarry::plugins::llm_extractive {

/// The model name the provider reports.
inline constexpr const char* model_name = "extractive";

/// The provider's configuration.
struct config {
  /// Largest number of research_agent calls per orchestrator turn.
  int max_parallel = 3;
  /// Simulated delay before the first delta.
  std::chrono::milliseconds ttft{0};
  /// Simulated output rate; 0 means unlimited.
  double tokens_per_second = 0;
  /// Largest number of sentences in an intermediate report.
  int max_sentences = 12;
  /// Reported context window (host key `context_window`).
  int64_t context_window = 1000000;
  /// Reported reasoning support (host key `reasoning`).
  bool reasoning = false;
};

/// Reads the configuration. Throws std::invalid_argument for unknown keys
/// (except the host-level LLM keys) and for invalid values.
config parse_config(const nlohmann::json& cfg);

/// One piece of the stream: text or a tool call.
struct stream_piece {
  /// A text delta, if `is_call` is false.
  std::string text;
  /// Tool call delta, if `is_call` is true.
  sdk::tool_call_delta call;
  /// Whether this piece is a tool call.
  bool is_call = false;
  /// Estimated tokens of this piece (drives the pacing).
  double tokens = 0;
};

/// Splits an answer into word-sized text pieces (each word with the white
/// space after it) followed by one piece per tool call.
std::vector<stream_piece> to_pieces(const answer& x);

/// Builds the assembled result of an answer for `request`: text, tool calls,
/// finish reason, usage (words * 4 / 3, input and output) and model.
sdk::chat_result to_result(const sdk::chat_request& request, const answer& x);

class pacer;

/// The extractive provider. Answers are computed on the host's pool; with
/// pacing configured, deltas are released by one timer thread per provider,
/// so no pool thread sleeps.
class provider final : public sdk::llm_provider {
public:
  /// Creates a provider using `host` for its pool.
  provider(sdk::host_context& host, config cfg);

  /// Stops the timer thread; paced calls still running fail with
  /// errc::cancelled.
  ~provider() override;

  provider(const provider&) = delete;
  provider& operator=(const provider&) = delete;

  /// Model `extractive`, the configured context window (default 1,000,000),
  /// tools supported, no reasoning unless configured.
  sdk::model_info info() const override;

  /// Computes the answer on the host pool and streams it to `sink`.
  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request request,
                                       std::shared_ptr<sdk::chat_sink> sink) override;

  /// The configuration in use.
  const config& settings() const noexcept {
    return cfg_;
  }

private:
  sdk::host_context& host_;
  config cfg_;
  std::shared_ptr<pacer> pacer_;
};

} // namespace quarry::plugins::llm_extractive
