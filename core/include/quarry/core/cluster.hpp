// The policies of a cluster of nodes, without CAF: node addresses, which
// worker runs the next research agent, when a silent worker counts as lost,
// how much time an agent placed again still has, and the checks a worker
// makes before it runs an agent for a session.

#pragma once

#include "quarry/core/deadline.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::core {

/// `HOST:PORT` of a node (`[v6 address]:PORT` for IPv6).
struct node_address {
  std::string host;
  uint16_t port = 0;

  /// Returns `HOST:PORT` (brackets around an IPv6 address).
  std::string text() const;
};

/// Parses `HOST:PORT` (port 0 to 65535; 0 means any free port where that
/// makes sense); nullopt if `x` is not of that form.
std::optional<node_address> parse_node_address(std::string_view x);

/// Whether every address `host` resolves to is a loopback address (false
/// when it does not resolve).
bool is_loopback_host(const std::string& host);

/// What a session knows of one worker when it places an agent.
struct worker_view {
  /// Connected and answering its heartbeats.
  bool up = false;
  /// Compatible: it speaks this node's interface and protocol version.
  bool compatible = true;
  /// Agents it runs at most, and runs now by its last status (agents of
  /// every session, this node's and others').
  int capacity = 0;
  int running = 0;
  /// Agents this node placed on it that have not finished.
  int outstanding = 0;
  /// Its tools by name.
  std::vector<std::string> tools;
};

/// The tools of `needed` that `have` lacks, in the order of `needed`.
std::vector<std::string> missing_tools(const std::vector<std::string>& have,
                                       const std::vector<std::string>& needed);

/// Chooses the worker for the next agent: among the workers that are up,
/// compatible, not in `excluded`, have every tool of `needed` and are not
/// full, the one with the fewest outstanding agents (the larger of this
/// node's count and the worker's own); the first such on a tie. nullopt
/// when none qualifies (the agent then runs on this node).
std::optional<size_t> choose_worker(const std::vector<worker_view>& workers,
                                    const std::vector<std::string>& needed,
                                    const std::set<size_t>& excluded = {});

/// Whether a worker whose last answer came `silent_for` ago is lost, given
/// the heartbeat timeout.
inline bool worker_lost(std::chrono::milliseconds silent_for,
                        std::chrono::milliseconds timeout) noexcept {
  return silent_for >= timeout;
}

/// The limits of an agent placed again after `elapsed` of its first start:
/// it reports and gives up when the first attempt would have (at least a
/// second from now, so the new attempt can still write a report).
agent_time_limits limits_after(const agent_time_limits& first,
                               std::chrono::milliseconds elapsed) noexcept;

/// What a worker accepts of an agent's limits before it runs it.
struct agent_bounds {
  int max_cycles = 100;
  std::chrono::milliseconds max_time{std::chrono::hours{24}};
  int64_t max_context_tokens = 100'000'000;
  int64_t max_output_tokens = 10'000'000;
};

/// The plain fields of an agent request a worker checks (the text fields
/// are bounded on the wire already).
struct agent_request_view {
  std::string_view task;
  int max_cycles = 0;
  std::chrono::milliseconds force_report_after{0};
  std::chrono::milliseconds hard_timeout{0};
  int64_t context_tokens = 0;
  int64_t step_max_tokens = 0;
  int64_t report_max_tokens = 0;
};

/// Returns why a worker refuses to run an agent with these fields, or an
/// empty string if it accepts them.
std::string refuse_agent_request(const agent_request_view& x, const agent_bounds& bounds = {});

} // namespace quarry::core
