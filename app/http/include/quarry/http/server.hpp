// quarry_http: the HTTP/1.1 server under `quarry serve` (Boost.Beast on
// Asio, its own I/O threads, no CAF).
//
// Usage:
//
//   http::server_options opts;           // 127.0.0.1, port 0 = any free port
//   auto started = http::server::start(opts, [](http::request req,
//                                               std::shared_ptr<http::responder> r) {
//     r->respond(http::json_response(200, {{"status", "ok"}}));
//   });
//   if (auto* err = std::get_if<sdk::error>(&started)) ...;
//   auto& srv = std::get<0>(started);     // srv->port(), srv->stats(), srv->stop()
//
// The handler runs on an I/O thread and must not block: it answers through
// its responder, at once or later from any thread (exactly once), or turns
// the request into a Server-Sent Events stream (`responder::start_events`).
// A responder dropped without an answer answers 500.
//
// The server itself answers, with JSON errors (`json_error`, the table of
// docs/api.md): malformed requests (400, then closes), requests whose
// framing is invalid or ambiguous (400, then closes: the rules of RFC 9112
// listed under "Request framing" in docs/api.md), bad paths (400), a
// missing or wrong bearer token (401), without a token a Host that does not
// name the server or a foreign Origin on a state-changing request (403,
// `server_options::check_host`), bodies over `max_body_bytes` (413,
// from Content-Length before reading, or while reading a chunked body),
// heads over `max_header_bytes` (431), connections over `max_connections`
// and streams over `max_event_streams` (429 `busy` with Retry-After), and
// requests that arrive while it stops (503). CORS preflights of listed
// origins are answered 204. `Expect: 100-continue` is honoured.
//
// Every buffer is bounded: the head, the body, the send queue of a stream
// (`max_event_queue_bytes`; a client that does not read is cut off), the
// bytes read from a client after a response that closes.

#pragma once

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace quarry::http {

/// Header fields in the order they came or will be sent (name, value).
using header_list = std::vector<std::pair<std::string, std::string>>;

/// Settings of a server. Durations of zero are not allowed (`start` refuses
/// them).
struct server_options {
  /// Host name or address to listen on. Only loopback addresses may be
  /// used without `auth_token`.
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks any free port (see server::port()).
  uint16_t port = 8700;
  /// Threads that run the I/O and the handler (at least 1).
  size_t io_threads = 2;
  /// Largest request body; larger ones are answered 413.
  size_t max_body_bytes = 1024 * 1024;
  /// Routes whose bodies may be larger (or must be smaller) than
  /// `max_body_bytes`: an exact path (no query) and its largest body, in
  /// bytes, for every method (e.g. `{"/v1/uploads", 20 MiB}` for file
  /// uploads). Bodies over it are answered 413 as above.
  std::vector<std::pair<std::string, size_t>> body_limits;
  /// Largest request head (request line and header fields); larger: 431.
  size_t max_header_bytes = 16 * 1024;
  /// Open connections at most; more are answered 429 and closed.
  size_t max_connections = 2048;
  /// Open event streams at most; more are answered 429.
  size_t max_event_streams = 4096;
  /// Bytes an event stream may hold unsent (queued and being written);
  /// a client that lets more pile up is cut off (its stream closes).
  size_t max_event_queue_bytes = 8 * 1024 * 1024;
  /// A `: heartbeat` comment is sent on every open stream this often.
  std::chrono::milliseconds heartbeat{15'000};
  /// Time allowed to read a request's head once it started (slowloris),
  /// and again to read its body.
  std::chrono::milliseconds header_timeout{30'000};
  /// Time a keep-alive connection may wait for its next request, and the
  /// time allowed to write a response.
  std::chrono::milliseconds idle_timeout{60'000};
  /// Longest time `server::stop` takes: in-flight requests get half of it
  /// to be answered (then 503), streams the rest to flush their end event.
  std::chrono::milliseconds stop_timeout{5'000};
  /// Seconds sent in Retry-After with 429 answers.
  int retry_after_seconds = 5;
  /// Bearer token every non-public path needs; empty: none needed.
  std::string auth_token;
  /// Paths that need no token: exact paths, or prefixes ending in `*`
  /// (e.g. `/assets/*`).
  std::vector<std::string> public_paths = {"/healthz", "/", "/index.html", "/favicon.ico",
                                           "/assets/*"};
  /// Origins (e.g. `http://localhost:3000`) that get CORS headers; empty:
  /// no CORS headers at all. They may also send requests that change state
  /// (see `check_host`).
  std::vector<std::string> cors_origins;
  /// Without `auth_token`, guards against DNS rebinding and cross-site
  /// requests (docs/api.md, "Host and Origin"): every request must carry a
  /// Host that names this server (`host`, its bound address, `localhost`,
  /// `127.0.0.1` or `[::1]`, with the server's port; a Host without a port
  /// means port 80) or one of `allowed_hosts`; and a request with a method
  /// other than GET, HEAD and OPTIONS that carries an Origin needs an
  /// allowed one: `http://` and an accepted Host, or one of
  /// `allowed_origins` and `cors_origins` (`null` never is). Anything else
  /// is answered 403 `forbidden`. With a token nothing is checked; false
  /// turns the checks off (for tests that send other Hosts).
  bool check_host = true;
  /// Further Host values: `name` (with the server's port) or `name:port`;
  /// an IPv6 address in brackets. `start` refuses entries that are not.
  std::vector<std::string> allowed_hosts;
  /// Further origins, `http[s]://host[:port]` (no path); `start` refuses
  /// entries that are not.
  std::vector<std::string> allowed_origins;
};

/// A request as the handler sees it. The head and body were read in full
/// and checked.
struct request {
  /// The method as sent, e.g. `GET` (upper case for the standard ones).
  std::string method;
  /// The request target as sent, e.g. `/v1/research?limit=5`.
  std::string target;
  /// The path, percent-decoded and checked: starts with `/`, valid UTF-8,
  /// no NUL, no `.` or `..` segment. `%2F` decodes to `/`.
  std::string path;
  /// Query parameters, decoded (`+` is a space). A name given twice keeps
  /// its first value.
  std::map<std::string, std::string> query;
  /// Header fields as sent; see header().
  header_list headers;
  /// The body (at most server_options::max_body_bytes bytes).
  std::string body;
  /// The client's address (e.g. `127.0.0.1`) and port.
  std::string remote_address;
  uint16_t remote_port = 0;
  /// HTTP version: 10 or 11.
  unsigned version = 11;
  /// Parameters of the route that matched (`{id}` segments); filled by
  /// router.
  std::map<std::string, std::string> params;

  /// The value of the first header field named `name` (case-insensitive),
  /// or nothing.
  std::optional<std::string_view> header(std::string_view name) const;

  /// The value of a query parameter, or nothing.
  std::optional<std::string_view> query_param(std::string_view name) const;

  /// The value of a route parameter, or an empty view.
  std::string_view param(std::string_view name) const;
};

/// A complete response.
struct response {
  /// HTTP status code (100-599).
  int status = 200;
  /// The Content-Type field (omitted when empty).
  std::string content_type = "application/json";
  /// Further header fields. Fields with CR, LF or NUL, or a name that is
  /// not a token, are dropped; Content-Length, Connection and
  /// Transfer-Encoding are the server's.
  header_list headers;
  /// The body (not sent for HEAD requests, nor for 204 and 304).
  std::string body;
};

/// A JSON response: `json.dump()` with Content-Type application/json.
/// Invalid UTF-8 in strings is replaced, never thrown.
response json_response(int status, const nlohmann::json& json);

/// A JSON error as in docs/api.md: `{"error":{"code":..,"message":..}}`.
response json_error(int status, std::string_view code, std::string_view message);

/// Compares two strings in time that depends only on their lengths, not on
/// where they differ (for secrets such as the bearer token).
bool constant_time_equals(std::string_view a, std::string_view b) noexcept;

class connection;

/// A Server-Sent Events stream (text/event-stream) to one client.
/// Thread-safe: every member may be called from any thread.
///
/// The stream closes when the client goes away (seen at once, also while the
/// stream is idle), after end(), when its send queue exceeds
/// server_options::max_event_queue_bytes, when the server stops (clients get
/// `event: end` with the data given to server::stop), and when the last
/// shared_ptr to it is dropped.
class event_stream {
public:
  /// Use responder::start_events.
  explicit event_stream(std::shared_ptr<connection> conn);
  ~event_stream();
  event_stream(const event_stream&) = delete;
  event_stream& operator=(const event_stream&) = delete;

  /// Queues one event: `id:` (if not empty), `event:` (if not empty), and
  /// one `data:` line per line of `data` (CR LF, CR or LF end a line).
  /// Returns false, sending nothing, if the stream is closed, if `id` or
  /// `event` contain CR, LF or NUL, or if the queue would exceed its limit
  /// (the stream then closes).
  bool send(std::string_view id, std::string_view event, std::string_view data);

  /// Queues a comment line per line of `text` (`: text`), which clients
  /// ignore. Returns false as send does.
  bool comment(std::string_view text);

  /// Sends a last event (as send, without id) and closes the stream once it
  /// was written (or after server_options::idle_timeout if the client does
  /// not read). Returns false if the stream was closed already.
  bool end(std::string_view event, std::string_view data);

  /// Closes the stream now, without a last event; what is queued is
  /// dropped.
  void close();

  /// Whether the stream is closed (or closing after end()).
  bool closed() const;

  /// Sets the function called once when the stream closes, for whatever
  /// reason. It runs on an I/O thread and must not block; if the stream is
  /// closed already it runs at once on the caller's thread. A new call
  /// replaces a callback not yet called.
  void on_close(std::function<void()> callback);

private:
  std::shared_ptr<connection> conn_;
};

/// Answers one request, exactly once. Thread-safe: may be used from any
/// thread, at any later time; only the first answer counts.
class responder {
public:
  /// Made by the server.
  explicit responder(std::shared_ptr<connection> conn);
  /// Answers 500 `internal` if nothing was answered.
  ~responder();
  responder(const responder&) = delete;
  responder& operator=(const responder&) = delete;

  /// Sends `res`. Returns false if this responder answered already (the
  /// response is then dropped). A response that can no longer be delivered
  /// (client gone, server stopped) is dropped silently and still returns
  /// true.
  bool respond(response res);

  /// Starts a Server-Sent Events stream: status 200, Content-Type
  /// text/event-stream, Cache-Control no-cache, X-Accel-Buffering no, the
  /// CORS fields if any, and `extra_headers`. Returns nullptr if this
  /// responder answered already, or if server_options::max_event_streams
  /// streams are open (the client then gets 429 busy), or the server is
  /// stopping (503).
  std::shared_ptr<event_stream> start_events(header_list extra_headers = {});

  /// Whether an answer was given (respond or start_events).
  bool answered() const noexcept;

private:
  std::shared_ptr<connection> conn_;
  uint64_t serial_ = 0;
  std::atomic<bool> used_{false};
};

/// Called for every request that passed the server's checks, on an I/O
/// thread. Must not block; exceptions are caught and answered 500.
using handler = std::function<void(request, std::shared_ptr<responder>)>;

/// Counters the service reads (e.g. for /metrics).
struct server_stats {
  /// Connections open now.
  uint64_t open_connections = 0;
  /// Event streams open now.
  uint64_t open_event_streams = 0;
  /// Responses sent so far, by status code (event streams count as 200;
  /// 100 Continue is not counted).
  std::map<int, uint64_t> responses_by_status;
};

struct server_core;

/// An HTTP/1.1 server on its own I/O threads. See the comment at the top of
/// this file.
class server {
public:
  /// Resolves `options.host`, refuses a non-loopback address without
  /// `options.auth_token`, binds, listens and starts the I/O threads.
  /// Errors name the address and the reason (address in use, cannot
  /// resolve, permission denied), or the entry of `allowed_hosts` or
  /// `allowed_origins` that is not a host or an origin.
  static std::variant<std::unique_ptr<server>, sdk::error> start(server_options options,
                                                                 handler fn);

  /// Stops (see stop()).
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The port the server listens on.
  uint16_t port() const noexcept;

  /// The address the server listens on, e.g. `127.0.0.1:8700` or
  /// `[::1]:8700`.
  std::string address() const;

  /// A snapshot of the counters.
  server_stats stats() const;

  /// Whether stop() was called.
  bool stopping() const noexcept;

  /// Stops: accepts no more connections; every open event stream gets
  /// `event: end` with `end_event_data` and closes; requests still waiting
  /// for their responder get their answer or, after half of
  /// server_options::stop_timeout, 503; idle connections close; the I/O
  /// threads are joined. Takes at most about stop_timeout. Idempotent.
  /// Must not be called from a handler or on_close callback (an I/O thread).
  /// Responders and streams that outlive the server do nothing.
  void stop(std::string_view end_event_data = R"({"state":"interrupted"})");

private:
  explicit server(std::shared_ptr<server_core> core);
  std::shared_ptr<server_core> core_;
};

} // namespace quarry::http
