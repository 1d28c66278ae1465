// The host's asynchronous HTTP client: one I/O thread driving libcurl's multi
// interface, plus a small blocking helper for the CLI and tests.

#pragma once

#include "quarry/core/settings.hpp"
#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace quarry::host {

/// Counters of a @ref curl_http_client, for tests and benchmarks.
struct http_client_stats {
  /// Requests accepted by start() and not completed yet.
  uint64_t active = 0;
  /// Requests accepted by start() since construction.
  uint64_t started = 0;
  /// Requests whose sink received on_complete().
  uint64_t completed = 0;
  /// Connections opened (sockets created for a connect).
  uint64_t connections_opened = 0;
  /// Easy handles created (the rest were reused from the free list).
  uint64_t easy_handles_created = 0;
  /// Easy handles waiting in the free list (unused ones are freed after a
  /// few seconds).
  uint64_t easy_handles_idle = 0;
  /// Redirect hops followed.
  uint64_t redirects_followed = 0;
  /// Bytes of request bodies held by transfers in progress. A body is let
  /// go once it was sent whole and the final response began (a redirect
  /// that is followed keeps it for the next hop): a model call's request
  /// text is not held while its answer streams.
  uint64_t request_body_bytes = 0;
  /// CPU time consumed by the I/O thread so far.
  std::chrono::nanoseconds io_thread_cpu{0};
};

/// The host's implementation of @ref sdk::http_client on libcurl's multi
/// interface. One I/O thread owns the multi handle and runs every transfer;
/// sinks and request hooks are called on that thread. Keep-alive connections
/// are cached and reused across requests.
class curl_http_client final : public sdk::http_client {
public:
  /// Starts the I/O thread. `defaults` fill the zero-valued fields of each
  /// request and set proxy, TLS, user agent and connection cache limits.
  explicit curl_http_client(const core::http_settings& defaults);

  /// Calls shutdown().
  ~curl_http_client() override;

  curl_http_client(const curl_http_client&) = delete;
  curl_http_client& operator=(const curl_http_client&) = delete;

  /// Starts a request. After shutdown(), completes the sink with
  /// errc::cancelled on the calling thread.
  std::shared_ptr<sdk::http_call> start(sdk::http_request request,
                                        std::shared_ptr<sdk::http_response_sink> sink) override;

  /// Fails every pending request with errc::cancelled and joins the I/O
  /// thread. Idempotent.
  void shutdown();

  /// Returns a snapshot of the counters. Thread-safe.
  http_client_stats stats() const;

private:
  class impl;
  std::shared_ptr<impl> impl_;
};

/// A complete HTTP response, collected by @ref fetch.
struct http_response {
  /// The final status, or 0 if no response arrived.
  int status = 0;
  /// The headers of the final response.
  sdk::http_headers headers;
  /// The complete body.
  std::string body;
  /// Why the request failed, if it did.
  std::optional<sdk::error> failure;
};

/// Runs `request` on `client` and blocks the calling thread until it
/// completes. Never call it from the client's I/O thread (deadlock).
http_response fetch(sdk::http_client& client, sdk::http_request request);

} // namespace quarry::host
