// This file is part of the Quarry plugin SDK.
// Services the host gives to plugins: an asynchronous HTTP client, a logger,
// a bounded pool for blocking work, secrets and a clock. Plugins never read
// environment variables or files on their own.

#pragma once

#include "quarry/sdk/types.hpp"
#include "quarry/sdk/version.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::sdk {

// -- HTTP ---------------------------------------------------------------------

/// A list of HTTP header fields in the order they appeared.
using http_headers = std::vector<std::pair<std::string, std::string>>;

/// Compares two ASCII strings case-insensitively (header names, schemes).
inline bool iequals(std::string_view x, std::string_view y) noexcept {
  if (x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i) {
    auto a = x[i];
    auto b = y[i];
    if (a >= 'A' && a <= 'Z')
      a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z')
      b = static_cast<char>(b - 'A' + 'a');
    if (a != b)
      return false;
  }
  return true;
}

/// Returns the value of the first header named `name` (case-insensitive).
inline std::optional<std::string> find_header(const http_headers& xs, std::string_view name) {
  for (const auto& [key, value] : xs)
    if (iequals(key, name))
      return value;
  return std::nullopt;
}

/// Information about one redirect, passed to @ref http_request::on_redirect.
struct redirect_hop {
  /// The URL that answered with a redirect.
  std::string from;
  /// The absolute URL the redirect points to.
  std::string to;
  /// The redirect status (301, 302, 303, 307, 308).
  int status = 0;
  /// Number of this hop, starting at 1.
  int hop = 0;
};

/// An HTTP request. Zero timeouts and limits mean "use the host's default";
/// the host's defaults come from the `http` section of the configuration.
struct http_request {
  /// `GET`, `POST`, `PUT`, `DELETE`, `HEAD`, ...
  std::string method = "GET";
  /// An absolute http or https URL.
  std::string url;
  http_headers headers;
  std::string body;
  /// Time to establish the connection (TCP and TLS).
  std::chrono::milliseconds connect_timeout{0};
  /// Time for the whole exchange, redirects included.
  std::chrono::milliseconds total_timeout{0};
  /// Longest time without receiving a byte once connected.
  std::chrono::milliseconds stall_timeout{0};
  /// Largest response body accepted; larger ones fail with errc::too_large.
  int64_t max_response_bytes = 0;
  /// Whether to follow redirects (each hop goes through `on_redirect`).
  bool follow_redirects = true;
  /// Largest number of redirects; -1 means the host's default.
  int max_redirects = -1;
  /// Called on the I/O thread before each redirect is followed. Returning an
  /// error refuses the hop and fails the request with that error.
  std::function<std::optional<error>(const redirect_hop&)> on_redirect;
  /// Called on the I/O thread with the numeric address (`1.2.3.4` or `::1`)
  /// and port of every connection about to be opened, after name resolution.
  /// Returning an error refuses the connection and fails the request.
  std::function<std::optional<error>(std::string_view ip, uint16_t port)> on_connect;
};

/// Receives the response of one HTTP request. All calls happen on the host's
/// I/O thread: implementations must return quickly and never block.
class QUARRY_SDK_API http_response_sink {
public:
  virtual ~http_response_sink() = default;

  /// Called once the final (non-redirect) status and headers are known.
  /// Returning false aborts the request with errc::cancelled.
  virtual bool on_response(int status, const http_headers& headers) = 0;

  /// Called with each piece of the body as it arrives. Returning false aborts
  /// the request with errc::cancelled.
  virtual bool on_data(std::string_view bytes) = 0;

  /// Called exactly once at the end: with no error after the complete body,
  /// or with the reason the request failed. No call follows.
  virtual void on_complete(std::optional<error> failure) = 0;
};

/// Cancels an HTTP request. Safe to call from any thread, any number of times,
/// also after the request finished.
class QUARRY_SDK_API http_call {
public:
  virtual ~http_call() = default;

  /// Stops the request; the sink receives `on_complete(errc::cancelled)`
  /// unless it has already completed.
  virtual void cancel() = 0;
};

/// The host's asynchronous HTTP client. One I/O thread serves all requests of
/// all plugins; requests never block the caller.
class QUARRY_SDK_API http_client {
public:
  virtual ~http_client() = default;

  /// Starts a request. The sink is kept alive until `on_complete` returned.
  virtual std::shared_ptr<http_call>
  start(http_request request, std::shared_ptr<http_response_sink> sink) = 0;
};

// -- logging ------------------------------------------------------------------

/// Severity of a log line.
enum class log_level : uint8_t {
  trace,
  debug,
  info,
  warn,
  error,
};

/// The host's logger. Thread-safe. Plugins must not log secrets.
class QUARRY_SDK_API logger {
public:
  virtual ~logger() = default;

  /// Writes one line, attributed to the plugin that owns this logger.
  virtual void log(log_level level, std::string_view message) = 0;

  /// Returns whether lines of `level` are written at all.
  virtual bool enabled(log_level level) const = 0;
};

// -- blocking work ------------------------------------------------------------

/// A bounded pool of threads for blocking or CPU-heavy work (SQLite, PDF text,
/// large HTML pages). Never block the I/O thread or a caller's thread instead.
class QUARRY_SDK_API blocking_pool {
public:
  virtual ~blocking_pool() = default;

  /// Queues `job`. Returns false when the queue is full (the caller reports
  /// errc::busy) or the pool is shutting down.
  virtual bool submit(std::function<void()> job) = 0;
};

// -- secrets ------------------------------------------------------------------

/// Resolves secrets (API keys, tokens) by name from the host's environment or
/// secret store.
class QUARRY_SDK_API secret_store {
public:
  virtual ~secret_store() = default;

  /// Returns the secret named `name`, if the host has it.
  virtual std::optional<std::string> get(std::string_view name) const = 0;
};

// -- host context -------------------------------------------------------------

/// Everything the host offers to a plugin. Outlives every object the plugin
/// creates.
class QUARRY_SDK_API host_context {
public:
  virtual ~host_context() = default;

  /// The shared asynchronous HTTP client.
  virtual http_client& http() = 0;

  /// A logger attributed to this plugin.
  virtual sdk::logger& log() = 0;

  /// The shared pool for blocking work.
  virtual blocking_pool& pool() = 0;

  /// Secrets from the host.
  virtual const secret_store& secrets() const = 0;

  /// The current time of day (tests may substitute a clock). For dates and
  /// timestamps; to time intervals (a cache's entries, a budget), use
  /// steady_now.
  virtual std::chrono::system_clock::time_point now() const = 0;

  /// The host's monotonic clock: the one its own timers, retries and caches
  /// read, which never goes back (tests may substitute a clock that moves
  /// only when told). Plugin ABI 4.
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;

  /// A folder the plugin may use for persistent data (created by the host).
  virtual std::string data_dir() const = 0;
};

} // namespace quarry::sdk
