// A JSON-RPC 2.0 connection to one MCP server (the client side of the Model
// Context Protocol, revision 2025-11-25): over stdio, a child process that
// Quarry starts, supervises and restarts; over Streamable HTTP, POST
// requests answered with JSON or an event stream. Requests wait behind the
// `initialize` handshake; every request ends exactly once: answered, failed,
// timed out or cancelled.

#pragma once

#include "mcp_config.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace quarry::plugins::mcp {

/// The protocol revision Quarry asks for.
inline constexpr const char* protocol_version = "2025-11-25";

/// Whether Quarry speaks the revision a server answered with.
bool supported_version(const std::string& version);

/// The answer to one request: its `result`, or why there is none.
struct rpc_outcome {
  nlohmann::json result;
  std::optional<sdk::error> failure;
};

/// Receives the outcome of a request, exactly once, on the connection's
/// thread (stdio) or the host's I/O thread (HTTP): must not block.
using rpc_callback = std::function<void(rpc_outcome)>;

/// First wait before a crashed stdio server is started again; it doubles
/// with each crash up to @ref max_restart_backoff and starts over once a
/// server has run for @ref stable_run.
inline constexpr std::chrono::milliseconds first_restart_backoff{1000};
inline constexpr std::chrono::milliseconds max_restart_backoff{60000};
inline constexpr std::chrono::milliseconds stable_run{60000};

/// How long a stdio server has to end after its input closes, and again
/// after SIGTERM, before it is killed (the specification's stdio shutdown:
/// close the input, wait, SIGTERM, SIGKILL).
inline constexpr std::chrono::milliseconds shutdown_grace{2000};

/// A connection. Thread-safe.
class client {
public:
  virtual ~client() = default;

  /// Makes the connection an instance's configuration asks for; nothing is
  /// started yet.
  static std::shared_ptr<client> make(sdk::host_context& host, server_config config);

  /// Sends a request (starting or restarting the server and its handshake
  /// first when needed). Returns the request's handle for @ref cancel.
  virtual uint64_t request(std::string method, nlohmann::json params,
                           std::chrono::milliseconds timeout, rpc_callback done)
    = 0;

  /// Ends a request with errc::cancelled and tells the server
  /// (`notifications/cancelled`). Does nothing once it ended.
  virtual void cancel(uint64_t handle, std::string reason) = 0;

  /// Ends every request (errc::cancelled) and stops the server. Blocks for
  /// at most twice @ref shutdown_grace. Called by the destructor too.
  virtual void close() = 0;

  /// The server's `serverInfo` and `instructions` from the last handshake
  /// (null before one).
  virtual nlohmann::json server_info() const = 0;

  /// Sends a request and waits for its outcome, at most `timeout`.
  rpc_outcome request_blocking(std::string method, nlohmann::json params,
                               std::chrono::milliseconds timeout);

  /// Lists the server's tools (following `nextCursor`, at most
  /// max_list_pages pages and max_listed_tools tools), waiting at most
  /// `timeout` in all.
  std::variant<std::vector<nlohmann::json>, sdk::error>
  list_tools(std::chrono::milliseconds timeout);
};

} // namespace quarry::plugins::mcp
