// The HTTP/1.1 test server: request parsing, response plans and the epoll
// event loop that executes them.

#include "support/http_server.hpp"

#include "quarry/sdk/strings.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace quarry::test {

namespace {

using clock_type = std::chrono::steady_clock;

// Epoll tags of the two non-connection descriptors.
constexpr uint64_t listen_tag = 0;
constexpr uint64_t wake_tag = 1;

// Largest request head and body we accept.
constexpr size_t max_head_size = 64 * 1024;
constexpr size_t max_body_size = 256 * 1024 * 1024;

// Output buffered per connection before a `generate` step waits for the
// socket to drain.
constexpr size_t high_water = 1024 * 1024;

using sdk::iequals;

std::string_view trim(std::string_view x) {
  while (!x.empty() && (x.front() == ' ' || x.front() == '\t'))
    x.remove_prefix(1);
  while (!x.empty() && (x.back() == ' ' || x.back() == '\t'))
    x.remove_suffix(1);
  return x;
}

// A form-encoded value: `+` is a space, then %XX escapes.
std::string url_decode(std::string_view x) {
  std::string spaced{x};
  std::replace(spaced.begin(), spaced.end(), '+', ' ');
  return sdk::percent_decode(spaced);
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view x) {
  std::vector<std::pair<std::string, std::string>> result;
  while (!x.empty()) {
    auto amp = x.find('&');
    auto part = x.substr(0, amp);
    x = amp == std::string_view::npos ? std::string_view{} : x.substr(amp + 1);
    if (part.empty())
      continue;
    auto eq = part.find('=');
    if (eq == std::string_view::npos)
      result.emplace_back(url_decode(part), std::string{});
    else
      result.emplace_back(url_decode(part.substr(0, eq)), url_decode(part.substr(eq + 1)));
  }
  return result;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 529:
      return "Overloaded";
    default:
      return "Status";
  }
}

bool body_allowed(int status) {
  return status >= 200 && status != 204 && status != 304;
}

void append_hex(std::string& out, uint64_t value) {
  char buf[32];
  auto n = std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(value));
  out.append(buf, static_cast<size_t>(n));
}

} // namespace

// -- request ------------------------------------------------------------------

std::optional<std::string> request::header(std::string_view name) const {
  return sdk::find_header(headers, name);
}

std::optional<std::string> request::param(std::string_view name) const {
  for (const auto& [key, value] : query)
    if (key == name)
      return value;
  return std::nullopt;
}

int64_t request::param_int(std::string_view name, int64_t fallback) const {
  auto value = param(name);
  if (!value || value->empty())
    return fallback;
  char* end = nullptr;
  auto result = std::strtoll(value->c_str(), &end, 10);
  if (end == nullptr || *end != '\0')
    return fallback;
  return static_cast<int64_t>(result);
}

// -- response_plan ------------------------------------------------------------

response_plan::response_plan(int status_code) : status(status_code) {
  // nop
}

response_plan response_plan::text(int status, std::string body, std::string content_type) {
  response_plan result{status};
  result.header("Content-Type", std::move(content_type));
  result.send(std::move(body));
  return result;
}

response_plan response_plan::json(int status, std::string body) {
  return text(status, std::move(body), "application/json");
}

response_plan response_plan::redirect(int status, std::string location) {
  response_plan result{status};
  result.header("Location", std::move(location));
  return result;
}

response_plan& response_plan::header(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

response_plan& response_plan::chunked(bool value) {
  is_chunked = value;
  return *this;
}

response_plan& response_plan::without_head() {
  has_head = false;
  return *this;
}

namespace {

// A step of `kind` with the other fields at their defaults.
response_plan::step step_of(response_plan::step_kind kind) {
  response_plan::step x;
  x.kind = kind;
  return x;
}

} // namespace

response_plan& response_plan::send(std::string bytes) {
  auto x = step_of(step_kind::send);
  x.bytes = std::move(bytes);
  steps.push_back(std::move(x));
  return *this;
}

response_plan& response_plan::delay(std::chrono::milliseconds duration) {
  auto x = step_of(step_kind::delay);
  x.duration = duration;
  steps.push_back(std::move(x));
  return *this;
}

response_plan& response_plan::stall() {
  steps.push_back(step_of(step_kind::stall));
  return *this;
}

response_plan& response_plan::close() {
  steps.push_back(step_of(step_kind::close));
  return *this;
}

response_plan& response_plan::reset() {
  steps.push_back(step_of(step_kind::reset));
  return *this;
}

response_plan& response_plan::generate(uint64_t total, size_t chunk_size, char fill) {
  auto x = step_of(step_kind::generate);
  x.total = total;
  x.chunk_size = chunk_size == 0 ? 64 * 1024 : chunk_size;
  x.fill = fill;
  steps.push_back(std::move(x));
  return *this;
}

response_plan& response_plan::raw(std::string bytes) {
  auto x = step_of(step_kind::raw);
  x.bytes = std::move(bytes);
  steps.push_back(std::move(x));
  return *this;
}

// -- server internals ---------------------------------------------------------

struct http_server::impl {
  // One accepted connection.
  struct connection {
    int fd = -1;
    uint64_t id = 0;
    // Received bytes not consumed yet.
    std::string in;
    // Bytes to send; `out_off` of them are already sent.
    std::string out;
    size_t out_off = 0;
    // Whether EPOLLOUT is part of the registered events.
    bool watching_out = false;
    // Requests served on this connection.
    uint64_t requests = 0;
    // Whether we answered `Expect: 100-continue` for the pending request.
    bool sent_continue = false;
    // State of the plan being executed.
    bool busy = false;
    response_plan plan;
    size_t step = 0;
    uint64_t generated = 0;
    bool head_sent = false;
    bool head_request = false;
    bool keep_alive = true;
    bool waiting_timer = false;
    bool stalled = false;
    bool close_after_flush = false;

    size_t pending() const noexcept {
      return out.size() - out_off;
    }
  };

  using handler_ptr = std::shared_ptr<const handler>;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool joined = false;
  std::mutex stop_mtx;

  // Routes, keyed by `METHOD path`.
  std::mutex routes_mtx;
  std::unordered_map<std::string, handler_ptr> routes;
  handler_ptr fallback;

  // Owned by the loop thread.
  std::unordered_map<uint64_t, std::unique_ptr<connection>> conns;
  std::multimap<clock_type::time_point, uint64_t> timers;
  uint64_t next_id = 16;
  std::string scratch;

  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> open{0};
  std::atomic<int64_t> final_cpu_ns{-1};

  impl() {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd < 0)
      throw std::runtime_error("http_server: socket() failed");
    int one = 1;
    ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
        || ::listen(listen_fd, 4096) != 0) {
      ::close(listen_fd);
      throw std::runtime_error("http_server: bind/listen failed");
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd < 0 || wake_fd < 0)
      throw std::runtime_error("http_server: epoll/eventfd failed");
    watch(listen_fd, listen_tag, EPOLLIN, EPOLL_CTL_ADD);
    watch(wake_fd, wake_tag, EPOLLIN, EPOLL_CTL_ADD);
    fallback = std::make_shared<const handler>(
      [](const request&) { return response_plan::text(404, "not found\n"); });
    thread = std::thread([this] { run(); });
  }

  ~impl() {
    stop();
  }

  void stop() {
    std::lock_guard<std::mutex> guard{stop_mtx};
    if (joined)
      return;
    joined = true;
    stopping = true;
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof(one));
    if (thread.joinable())
      thread.join();
    ::close(listen_fd);
    ::close(epoll_fd);
    ::close(wake_fd);
  }

  void watch(int fd, uint64_t tag, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epoll_fd, op, fd, &ev);
  }

  // -- event loop -------------------------------------------------------------

  void run() {
    pthread_setname_np(pthread_self(), "http-server");
    std::vector<epoll_event> events(512);
    while (!stopping) {
      auto timeout = -1;
      if (!timers.empty()) {
        auto wait = timers.begin()->first - clock_type::now();
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
        timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
      }
      auto n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR)
        break;
      for (int i = 0; i < n; ++i) {
        auto tag = events[i].data.u64;
        auto what = events[i].events;
        if (tag == listen_tag) {
          accept_all();
        } else if (tag == wake_tag) {
          uint64_t value = 0;
          [[maybe_unused]] auto r = ::read(wake_fd, &value, sizeof(value));
        } else {
          on_event(tag, what);
        }
      }
      run_timers();
    }
    for (auto& [id, conn] : conns)
      ::close(conn->fd);
    open -= conns.size();
    conns.clear();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    final_cpu_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  void accept_all() {
    for (;;) {
      auto fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0)
        return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto conn = std::make_unique<connection>();
      conn->fd = fd;
      conn->id = next_id++;
      watch(fd, conn->id, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      conns.emplace(conn->id, std::move(conn));
      ++accepted;
      ++open;
    }
  }

  connection* find(uint64_t id) {
    auto i = conns.find(id);
    return i == conns.end() ? nullptr : i->second.get();
  }

  void on_event(uint64_t id, uint32_t what) {
    auto* conn = find(id);
    if (conn == nullptr)
      return;
    if (what & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (!on_readable(*conn))
        return;
    }
    if (what & EPOLLOUT)
      on_writable(*conn);
  }

  // Returns false if the connection was closed.
  bool on_readable(connection& conn) {
    char buf[64 * 1024];
    for (;;) {
      auto n = ::read(conn.fd, buf, sizeof(buf));
      if (n > 0) {
        if (!conn.busy || conn.in.size() < max_body_size)
          conn.in.append(buf, static_cast<size_t>(n));
        if (static_cast<size_t>(n) < sizeof(buf))
          break;
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      // EOF or error: the peer is gone.
      close_conn(conn);
      return false;
    }
    if (!conn.busy)
      return process_input(conn);
    return true;
  }

  void on_writable(connection& conn) {
    if (!flush(conn))
      return;
    if (conn.pending() == 0 && conn.close_after_flush) {
      close_conn(conn);
      return;
    }
    if (conn.busy && !conn.waiting_timer && !conn.stalled && !conn.close_after_flush
        && conn.pending() < high_water / 2)
      advance(conn);
  }

  void run_timers() {
    auto now = clock_type::now();
    while (!timers.empty() && timers.begin()->first <= now) {
      auto id = timers.begin()->second;
      timers.erase(timers.begin());
      auto* conn = find(id);
      if (conn == nullptr || !conn->waiting_timer)
        continue;
      conn->waiting_timer = false;
      advance(*conn);
    }
  }

  // -- output -----------------------------------------------------------------

  // Writes as much as the socket takes. Returns false if it closed the
  // connection.
  bool flush(connection& conn) {
    while (conn.pending() > 0) {
      auto n = ::send(conn.fd, conn.out.data() + conn.out_off, conn.pending(), MSG_NOSIGNAL);
      if (n > 0) {
        conn.out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      close_conn(conn);
      return false;
    }
    if (conn.pending() == 0) {
      conn.out.clear();
      conn.out_off = 0;
    } else if (conn.out_off > 4 * high_water) {
      conn.out.erase(0, conn.out_off);
      conn.out_off = 0;
    }
    auto want_out = conn.pending() > 0;
    if (want_out != conn.watching_out) {
      conn.watching_out = want_out;
      watch(conn.fd, conn.id, EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0u), EPOLL_CTL_MOD);
    }
    return true;
  }

  void close_conn(connection& conn) {
    ::close(conn.fd);
    --open;
    conns.erase(conn.id);
  }

  void reset_conn(connection& conn) {
    linger lin{};
    lin.l_onoff = 1;
    lin.l_linger = 0;
    ::setsockopt(conn.fd, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
    close_conn(conn);
  }

  // -- requests ---------------------------------------------------------------

  // Parses and answers complete requests. Returns false if the connection
  // was closed.
  bool process_input(connection& conn) {
    while (!conn.busy) {
      auto head_end = conn.in.find("\r\n\r\n");
      if (head_end == std::string::npos) {
        if (conn.in.size() > max_head_size)
          return refuse(conn, 431);
        return true;
      }
      request req;
      if (!parse_head(std::string_view{conn.in}.substr(0, head_end), req))
        return refuse(conn, 400);
      size_t body_len = 0;
      if (auto te = req.header("Transfer-Encoding"); te && !te->empty())
        return refuse(conn, 501);
      if (auto cl = req.header("Content-Length")) {
        char* end = nullptr;
        auto value = std::strtoull(cl->c_str(), &end, 10);
        if (cl->empty() || end == nullptr || *end != '\0' || value > max_body_size)
          return refuse(conn, value > max_body_size ? 413 : 400);
        body_len = static_cast<size_t>(value);
      }
      auto total = head_end + 4 + body_len;
      if (conn.in.size() < total) {
        auto expect = req.header("Expect");
        if (expect && iequals(*expect, "100-continue") && !conn.sent_continue) {
          conn.sent_continue = true;
          conn.out += "HTTP/1.1 100 Continue\r\n\r\n";
          return flush(conn);
        }
        return true;
      }
      req.body.assign(conn.in, head_end + 4, body_len);
      conn.in.erase(0, total);
      conn.sent_continue = false;
      req.connection_id = conn.id - 15;
      req.index_on_connection = conn.requests++;
      auto connection_hdr = req.header("Connection");
      if (req.version == "HTTP/1.0")
        conn.keep_alive = connection_hdr && iequals(*connection_hdr, "keep-alive");
      else
        conn.keep_alive = !(connection_hdr && iequals(*connection_hdr, "close"));
      conn.head_request = req.method == "HEAD";
      auto plan = dispatch(req);
      ++served;
      auto id = conn.id;
      begin(conn, std::move(plan));
      if (find(id) == nullptr)
        return false;
    }
    return true;
  }

  bool parse_head(std::string_view head, request& req) {
    auto line_end = head.find("\r\n");
    auto line = head.substr(0, line_end);
    auto sp1 = line.find(' ');
    if (sp1 == std::string_view::npos)
      return false;
    auto sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos)
      return false;
    req.method = std::string{line.substr(0, sp1)};
    req.target = std::string{line.substr(sp1 + 1, sp2 - sp1 - 1)};
    req.version = std::string{line.substr(sp2 + 1)};
    if (req.method.empty() || req.target.empty() || req.version.compare(0, 5, "HTTP/") != 0)
      return false;
    auto q = req.target.find('?');
    req.path = req.target.substr(0, q);
    if (q != std::string::npos) {
      req.query_string = req.target.substr(q + 1);
      auto hash = req.query_string.find('#');
      if (hash != std::string::npos)
        req.query_string.resize(hash);
      req.query = parse_query(req.query_string);
    }
    auto rest = line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    while (!rest.empty()) {
      auto end = rest.find("\r\n");
      auto field = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 2);
      if (field.empty())
        continue;
      if ((field.front() == ' ' || field.front() == '\t') && !req.headers.empty()) {
        auto& value = req.headers.back().second;
        value += ' ';
        value += trim(field);
        continue;
      }
      auto colon = field.find(':');
      if (colon == std::string_view::npos || colon == 0)
        return false;
      req.headers.emplace_back(std::string{field.substr(0, colon)},
                               std::string{trim(field.substr(colon + 1))});
    }
    return true;
  }

  response_plan dispatch(const request& req) {
    handler_ptr fn;
    {
      std::lock_guard<std::mutex> guard{routes_mtx};
      scratch.clear();
      scratch += req.method;
      scratch += ' ';
      scratch += req.path;
      auto i = routes.find(scratch);
      if (i == routes.end()) {
        scratch.replace(0, req.method.size(), "*");
        i = routes.find(scratch);
      }
      fn = i != routes.end() ? i->second : fallback;
    }
    try {
      return (*fn)(req);
    } catch (const std::exception& ex) {
      return response_plan::text(500, std::string{"handler failed: "} + ex.what() + "\n");
    } catch (...) {
      return response_plan::text(500, "handler failed\n");
    }
  }

  bool refuse(connection& conn, int status) {
    conn.keep_alive = false;
    conn.head_request = false;
    auto id = conn.id;
    begin(conn, response_plan::text(status, std::string{reason_phrase(status)} + "\n"));
    return find(id) != nullptr;
  }

  // -- plans ------------------------------------------------------------------

  void begin(connection& conn, response_plan plan) {
    conn.busy = true;
    conn.plan = std::move(plan);
    conn.step = 0;
    conn.generated = 0;
    conn.head_sent = false;
    conn.waiting_timer = false;
    conn.stalled = false;
    advance(conn);
  }

  bool body_suppressed(const connection& conn) const {
    return conn.head_request || !body_allowed(conn.plan.status);
  }

  void ensure_head(connection& conn) {
    if (conn.head_sent || !conn.plan.has_head)
      return;
    conn.head_sent = true;
    const auto& plan = conn.plan;
    auto& out = conn.out;
    out += "HTTP/1.1 ";
    out += std::to_string(plan.status);
    out += ' ';
    out += plan.reason.empty() ? reason_phrase(plan.status) : plan.reason;
    out += "\r\n";
    for (const auto& [key, value] : plan.headers) {
      out += key;
      out += ": ";
      out += value;
      out += "\r\n";
    }
    if (body_allowed(plan.status)) {
      if (plan.is_chunked) {
        if (!sdk::find_header(plan.headers, "Transfer-Encoding"))
          out += "Transfer-Encoding: chunked\r\n";
      } else if (!sdk::find_header(plan.headers, "Content-Length")) {
        uint64_t length = 0;
        for (const auto& x : plan.steps) {
          if (x.kind == response_plan::step_kind::send)
            length += x.bytes.size();
          else if (x.kind == response_plan::step_kind::generate)
            length += x.total;
        }
        out += "Content-Length: ";
        out += std::to_string(length);
        out += "\r\n";
      }
    }
    if (!conn.keep_alive)
      out += "Connection: close\r\n";
    out += "\r\n";
  }

  void append_body(connection& conn, std::string_view bytes) {
    if (body_suppressed(conn) || bytes.empty())
      return;
    if (conn.plan.is_chunked) {
      append_hex(conn.out, bytes.size());
      conn.out += "\r\n";
      conn.out += bytes;
      conn.out += "\r\n";
    } else {
      conn.out += bytes;
    }
  }

  void append_fill(connection& conn, size_t n, char fill) {
    if (body_suppressed(conn) || n == 0)
      return;
    if (conn.plan.is_chunked) {
      append_hex(conn.out, n);
      conn.out += "\r\n";
      conn.out.append(n, fill);
      conn.out += "\r\n";
    } else {
      conn.out.append(n, fill);
    }
  }

  // Executes steps until the plan waits (timer, socket, stall) or ends.
  void advance(connection& conn) {
    using kind = response_plan::step_kind;
    while (conn.busy) {
      if (conn.pending() >= high_water) {
        // Resume on EPOLLOUT, which flush() registers while bytes are
        // pending; if the socket took everything, go on right away.
        if (!flush(conn) || conn.pending() > 0)
          return;
      }
      if (conn.step >= conn.plan.steps.size()) {
        finish(conn);
        return;
      }
      auto& x = conn.plan.steps[conn.step];
      switch (x.kind) {
        case kind::send:
          ensure_head(conn);
          append_body(conn, x.bytes);
          ++conn.step;
          break;
        case kind::raw:
          conn.out += x.bytes;
          ++conn.step;
          break;
        case kind::delay:
          ++conn.step;
          if (!flush(conn))
            return;
          conn.waiting_timer = true;
          timers.emplace(clock_type::now() + x.duration, conn.id);
          return;
        case kind::stall:
          conn.stalled = true;
          flush(conn);
          return;
        case kind::close:
          conn.close_after_flush = true;
          if (!flush(conn))
            return;
          if (conn.pending() == 0)
            close_conn(conn);
          return;
        case kind::reset:
          reset_conn(conn);
          return;
        case kind::generate: {
          ensure_head(conn);
          while (conn.generated < x.total && conn.pending() < high_water) {
            auto n = static_cast<size_t>(
              std::min<uint64_t>(x.chunk_size, x.total - conn.generated));
            append_fill(conn, n, x.fill);
            conn.generated += n;
          }
          if (conn.generated >= x.total) {
            conn.generated = 0;
            ++conn.step;
          } else if (!flush(conn)) {
            return;
          }
          break;
        }
      }
    }
  }

  void finish(connection& conn) {
    ensure_head(conn);
    if (conn.plan.is_chunked && conn.head_sent && !body_suppressed(conn))
      conn.out += "0\r\n\r\n";
    conn.busy = false;
    conn.plan = response_plan{};
    if (!conn.keep_alive)
      conn.close_after_flush = true;
    if (!flush(conn))
      return;
    if (conn.close_after_flush) {
      if (conn.pending() == 0)
        close_conn(conn);
      return;
    }
    // Requests pipelined behind this one.
    if (!conn.in.empty())
      process_input(conn);
  }
};

// -- http_server --------------------------------------------------------------

http_server::http_server() : impl_(std::make_unique<impl>()) {
  // nop
}

http_server::~http_server() {
  stop();
}

void http_server::route(std::string method, std::string path, handler fn) {
  auto key = std::move(method);
  key += ' ';
  key += path;
  auto ptr = std::make_shared<const handler>(std::move(fn));
  std::lock_guard<std::mutex> guard{impl_->routes_mtx};
  impl_->routes[key] = std::move(ptr);
}

void http_server::fallback(handler fn) {
  auto ptr = std::make_shared<const handler>(std::move(fn));
  std::lock_guard<std::mutex> guard{impl_->routes_mtx};
  impl_->fallback = std::move(ptr);
}

uint16_t http_server::port() const noexcept {
  return impl_->port;
}

std::string http_server::url(std::string_view path) const {
  auto result = "http://127.0.0.1:" + std::to_string(impl_->port);
  if (path.empty() || path.front() != '/')
    result += '/';
  result += path;
  return result;
}

void http_server::stop() {
  impl_->stop();
}

uint64_t http_server::requests_served() const noexcept {
  return impl_->served.load();
}

uint64_t http_server::connections_accepted() const noexcept {
  return impl_->accepted.load();
}

uint64_t http_server::open_connections() const noexcept {
  return impl_->open.load();
}

std::chrono::nanoseconds http_server::loop_cpu_time() const {
  auto final_ns = impl_->final_cpu_ns.load();
  if (final_ns >= 0)
    return std::chrono::nanoseconds{final_ns};
  std::lock_guard<std::mutex> guard{impl_->stop_mtx};
  if (impl_->joined)
    return std::chrono::nanoseconds{impl_->final_cpu_ns.load()};
  clockid_t cid;
  if (pthread_getcpuclockid(impl_->thread.native_handle(), &cid) != 0)
    return std::chrono::nanoseconds{0};
  timespec ts{};
  clock_gettime(cid, &ts);
  return std::chrono::nanoseconds{static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec};
}

} // namespace quarry::test
