// The text of GET /metrics (Prometheus text format 0.0.4) from what the
// route gathered: session counts from the store, the provider and tool
// actors' stats replies (JSON), and the HTTP server's counters. No CAF:
// tested on its own.

#pragma once

#include "quarry/http/server.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quarry::app {

/// Everything one scrape shows. What could not be read is left empty: its
/// families are still listed (HELP and TYPE), without samples.
struct metrics_snapshot {
  /// Stored sessions by state name (every state, zeros included).
  std::vector<std::pair<std::string, int64_t>> sessions;
  /// Sessions the session manager runs now.
  std::optional<int64_t> sessions_running;
  /// The stats replies of the LLM provider actors that answered (see
  /// `stats_atom` in quarry/actors/llm_messages.hpp).
  std::vector<nlohmann::json> llm_stats;
  /// The stats replies of the tool actors that answered (see
  /// spawn_tool_provider).
  std::vector<nlohmann::json> tool_stats;
  /// The HTTP server's counters.
  std::optional<http::server_stats> http;
};

/// The metric families, in the order they are rendered (docs/api.md).
std::vector<std::string> metrics_family_names();

/// Renders `snap` in the text format 0.0.4 (see docs/api.md for the
/// families). Malformed or missing fields of a stats reply count as zero;
/// a histogram whose buckets do not match the family's is left out.
std::string render_metrics(const metrics_snapshot& snap);

} // namespace quarry::app
