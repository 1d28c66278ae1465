// A real HTTP/1.1 server for tests and benchmarks: one epoll event loop on its
// own thread, on 127.0.0.1 and an ephemeral port, answering with scripted
// plans.

#pragma once

#include "quarry/sdk/host.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::test {

/// A request as the server received it.
struct request {
  /// `GET`, `POST`, ...
  std::string method;
  /// The request target as sent, e.g. `/search?q=a+b`.
  std::string target;
  /// The path part of the target, not decoded, e.g. `/search`.
  std::string path;
  /// The query part of the target without `?`, not decoded.
  std::string query_string;
  /// The decoded query parameters in order.
  std::vector<std::pair<std::string, std::string>> query;
  /// `HTTP/1.1` or `HTTP/1.0`.
  std::string version;
  /// Header fields in the order received.
  sdk::http_headers headers;
  /// The body (Content-Length bodies only).
  std::string body;
  /// Number of the connection that carried the request, starting at 1.
  uint64_t connection_id = 0;
  /// Number of earlier requests on the same connection.
  uint64_t index_on_connection = 0;

  /// Returns the first header named `name` (case-insensitive).
  std::optional<std::string> header(std::string_view name) const;

  /// Returns the first decoded query parameter named `name`.
  std::optional<std::string> param(std::string_view name) const;

  /// Returns the query parameter `name` as an integer, or `fallback`.
  int64_t param_int(std::string_view name, int64_t fallback) const;
};

/// What the server does to answer one request: a status line and headers,
/// then a sequence of steps the event loop executes with timers.
///
/// Framing: unless the plan is chunked or sets its own `Content-Length`, the
/// server declares the sum of all `send` and `generate` sizes as
/// Content-Length. A chunked plan sends each `send` as one chunk, `generate`
/// as chunks of its chunk size, and the last chunk when the plan ends. The
/// status line and headers go out right before the first `send` or
/// `generate` step, or when the plan ends; steps before that (a delay, a
/// stall, a close) happen before the head. `raw` bytes are written as they
/// are, without framing. Answers to HEAD requests and 1xx/204/304 statuses
/// carry no body bytes.
class response_plan {
public:
  /// The kind of a step.
  enum class step_kind {
    /// Send body bytes (one chunk if chunked).
    send,
    /// Wait before the next step.
    delay,
    /// Keep the connection open and never send anything again.
    stall,
    /// Send what is pending, then close the connection.
    close,
    /// Abort the connection with a TCP reset (pending bytes are dropped).
    reset,
    /// Send `total` bytes of `fill`, produced lazily in pieces of
    /// `chunk_size` (one chunk each if chunked).
    generate,
    /// Send bytes as they are (for malformed responses).
    raw,
  };

  /// One step of a plan.
  struct step {
    /// What the step does.
    step_kind kind = step_kind::send;
    /// Bytes of a `send` or `raw` step.
    std::string bytes;
    /// Duration of a `delay` step.
    std::chrono::milliseconds duration{0};
    /// Number of bytes a `generate` step sends.
    uint64_t total = 0;
    /// Size of the pieces a `generate` step produces.
    size_t chunk_size = 0;
    /// The byte a `generate` step repeats.
    char fill = 'x';
  };

  /// Creates a plan answering 200 with no body.
  response_plan() = default;

  /// Creates a plan answering `status` with no body.
  explicit response_plan(int status);

  /// Returns a plan answering `status` with `body` of type `content_type`.
  static response_plan text(int status, std::string body, std::string content_type = "text/plain");

  /// Returns a plan answering `status` with a JSON body.
  static response_plan json(int status, std::string body);

  /// Returns a redirect to `location` with `status` (301, 302, 303, ...).
  static response_plan redirect(int status, std::string location);

  /// Adds a header field.
  response_plan& header(std::string name, std::string value);

  /// Selects chunked transfer encoding.
  response_plan& chunked(bool value = true);

  /// Sends no status line and no headers: the plan writes raw bytes only.
  response_plan& without_head();

  /// Appends a `send` step.
  response_plan& send(std::string bytes);

  /// Appends a `delay` step.
  response_plan& delay(std::chrono::milliseconds duration);

  /// Appends a `stall` step.
  response_plan& stall();

  /// Appends a `close` step.
  response_plan& close();

  /// Appends a `reset` step.
  response_plan& reset();

  /// Appends a `generate` step.
  response_plan& generate(uint64_t total, size_t chunk_size = 64 * 1024, char fill = 'x');

  /// Appends a `raw` step.
  response_plan& raw(std::string bytes);

  /// The status code of the response.
  int status = 200;
  /// The reason phrase; empty means the standard one.
  std::string reason;
  /// Header fields sent after the status line.
  sdk::http_headers headers;
  /// Whether the body uses chunked transfer encoding.
  bool is_chunked = false;
  /// Whether the status line and headers are sent at all.
  bool has_head = true;
  /// The steps, in order.
  std::vector<step> steps;
};

/// A real HTTP/1.1 server on 127.0.0.1 with an ephemeral port. One thread
/// runs an epoll loop over all connections; handlers run on that thread and
/// must return quickly (a plan's delays are timers, never sleeps).
class http_server {
public:
  /// Computes the answer to a request.
  using handler = std::function<response_plan(const request&)>;

  /// Binds 127.0.0.1:0 and starts the event loop.
  http_server();

  /// Calls stop().
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Answers requests with `method` (or any method if `*`) and exactly
  /// `path` (the query string does not take part). Thread-safe.
  void route(std::string method, std::string path, handler fn);

  /// Answers requests no route matches (default: 404). Thread-safe.
  void fallback(handler fn);

  /// The port the server listens on.
  uint16_t port() const noexcept;

  /// Returns `http://127.0.0.1:PORT` followed by `path`.
  std::string url(std::string_view path = "/") const;

  /// Closes all connections and joins the event loop. Idempotent.
  void stop();

  /// Number of requests handed to handlers so far.
  uint64_t requests_served() const noexcept;

  /// Number of connections accepted so far.
  uint64_t connections_accepted() const noexcept;

  /// Number of connections currently open.
  uint64_t open_connections() const noexcept;

  /// CPU time consumed by the event loop thread so far.
  std::chrono::nanoseconds loop_cpu_time() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace quarry::test
