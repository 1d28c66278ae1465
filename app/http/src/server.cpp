// The server: an acceptor and one connection object per client, each on its
// own strand of one io_context run by the server's I/O threads.
//
// A connection reads one request at a time (head, then body), hands it to
// the handler and waits for its responder; every byte it sends goes through
// one write queue (responses, 100 Continue, event stream frames), which
// other threads fill under a mutex. Lifetimes: connections, responders and
// streams hold the connection; a connection holds the server core, which
// owns the io_context, so no Asio object outlives its io_context. After
// stop() nothing more is posted (server_core::post), so the io_context's
// queue is empty and no cycle through it remains.

#include "quarry/http/server.hpp"

#include "detail.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <climits>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace quarry::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Bytes read and thrown away after a response that closes the connection
// (so that the client reads the response instead of a reset), and for how
// long at most.
constexpr size_t linger_bytes = 1024 * 1024;
constexpr auto linger_time = std::chrono::milliseconds{2000};
// Bytes a client may send on an event stream (they are ignored).
constexpr size_t stream_input_bytes = 64 * 1024;
// Connections answered 429 at the same time at most; more are closed.
constexpr uint64_t max_rejecting = 256;

std::string endpoint_text(const tcp::endpoint& ep) {
  auto addr = ep.address();
  if (addr.is_v6())
    return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

std::string host_port_text(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool valid_field(std::string_view name, std::string_view value) {
  return detail::is_token(name)
         && value.find_first_of(std::string_view{"\r\n\0", 3}) == std::string_view::npos;
}

bool has_line_break(std::string_view s) {
  return s.find_first_of(std::string_view{"\r\n\0", 3}) != std::string_view::npos;
}

// Appends `prefix` + line + "\n" for every line of `text` (CR LF, CR or LF
// end a line); an empty text is one empty line.
void append_lines(std::string& out, std::string_view prefix, std::string_view text) {
  // The first CR or LF from `from`, by memchr: a packet is one long line,
  // and find_first_of compared every byte with each of the set.
  auto line_break = [text](size_t from) {
    auto lf = text.find('\n', from);
    auto until = lf == std::string_view::npos ? text.size() : lf;
    const void* cr = until > from ? std::memchr(text.data() + from, '\r', until - from) : nullptr;
    return cr != nullptr ? static_cast<size_t>(static_cast<const char*>(cr) - text.data()) : lf;
  };
  size_t start = 0;
  while (true) {
    size_t end = line_break(start);
    out.append(prefix);
    if (end == std::string_view::npos) {
      out.append(text.substr(start));
      out.push_back('\n');
      return;
    }
    out.append(text.substr(start, end - start));
    out.push_back('\n');
    if (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n')
      ++end;
    start = end + 1;
    if (start == text.size())
      return; // a final line break ends the last line, no empty line after it
  }
}

std::string event_frame(std::string_view id, std::string_view event, std::string_view data) {
  std::string out;
  out.reserve(data.size() + id.size() + event.size() + 24);
  if (!id.empty()) {
    out.append("id: ");
    out.append(id);
    out.push_back('\n');
  }
  if (!event.empty()) {
    out.append("event: ");
    out.append(event);
    out.push_back('\n');
  }
  append_lines(out, "data: ", data);
  out.push_back('\n');
  return out;
}

std::string comment_frame(std::string_view text) {
  std::string out;
  append_lines(out, ": ", text);
  out.push_back('\n');
  return out;
}

std::string reason_phrase(int status) {
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  if (reason.empty() || reason.front() == '<')
    return "Status";
  return std::string{reason};
}

bool is_public(const std::vector<std::string>& public_paths, const std::string& path) {
  for (const auto& p : public_paths) {
    if (!p.empty() && p.back() == '*') {
      if (path.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0)
        return true;
    } else if (p == path) {
      return true;
    }
  }
  return false;
}

} // namespace

// -- core ---------------------------------------------------------------------

struct server_core {
  server_options opts;
  handler fn;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer accept_retry{acceptor.get_executor()};
  std::vector<std::thread> threads;
  std::string address;
  uint16_t port = 0;
  /// Whether Host and Origin are checked (server_options::check_host, no
  /// token), the Host values accepted (each with its port) and the origins
  /// accepted besides `http://` and an accepted Host. Set by start.
  bool check_host = false;
  std::vector<detail::authority> hosts;
  std::vector<detail::origin> origins;

  /// The largest body any route takes (max_body_bytes and body_limits):
  /// the parser's limit until the request's path is known.
  size_t largest_body = 0;

  /// The largest body of the route at `path` (server_options::body_limits,
  /// else max_body_bytes).
  size_t body_limit_for(std::string_view path) const {
    for (const auto& [route, most] : opts.body_limits)
      if (route == path)
        return most;
    return opts.max_body_bytes;
  }

  std::atomic<bool> stopping{false};
  /// The data of the end event of streams when the server stops (written
  /// before `stopping` is set).
  std::string end_data;
  std::mutex post_mtx;
  bool posts_open = true;

  std::mutex conns_mtx;
  std::unordered_map<connection*, std::weak_ptr<connection>> conns;
  std::condition_variable conns_cv;

  std::atomic<uint64_t> open_connections{0};
  std::atomic<uint64_t> rejecting{0};
  std::atomic<uint64_t> open_streams{0};
  std::array<std::atomic<uint64_t>, 600> by_status{};

  std::mutex stop_mtx;
  bool stopped = false;
  /// The core itself, for connections to hold (set by server::start).
  std::weak_ptr<server_core> self;

  std::mutex threads_mtx;
  std::condition_variable threads_cv;
  size_t running_threads = 0;

  /// Posts `fn` to `ex` unless the server stopped (then drops it).
  template <class Executor, class F>
  bool post(const Executor& ex, F&& f) {
    std::lock_guard<std::mutex> guard{post_mtx};
    if (!posts_open)
      return false;
    net::post(ex, std::forward<F>(f));
    return true;
  }

  void count_status(int status) {
    if (status >= 100 && status < 600)
      by_status[static_cast<size_t>(status)].fetch_add(1, std::memory_order_relaxed);
  }

  void connection_closed() {
    std::lock_guard<std::mutex> guard{conns_mtx};
    conns_cv.notify_all();
  }

  void do_accept();
  void on_accept(error_code ec, tcp::socket socket);

  bool host_accepted(const detail::authority& at) const {
    const auto port = at.port.value_or(80);
    for (const auto& h : hosts)
      if (h.host == at.host && h.port == port)
        return true;
    return false;
  }

  /// Why a request must be answered 403 (DNS rebinding, cross-site
  /// requests), or nothing: `host`, `origin`: the fields as sent (nothing:
  /// absent); `changes_state`: a method other than GET, HEAD and OPTIONS.
  std::optional<std::string> refusal(std::optional<std::string_view> host,
                                     std::optional<std::string_view> origin,
                                     bool changes_state) const {
    if (!check_host)
      return std::nullopt;
    auto shown = [](std::string_view x) { return std::string{x.substr(0, 100)}; };
    if (!host)
      return std::string{"a request without Host is not answered: without "
                         "server.auth_token only requests that name this server "
                         "are"};
    auto at = detail::parse_authority(*host);
    if (!at || !host_accepted(*at))
      return "Host '" + shown(*host) + "' does not name this server (" + address
             + "): without server.auth_token only its own addresses are answered "
               "(add others to server.allowed_hosts)";
    if (!changes_state || !origin)
      return std::nullopt;
    auto o = detail::parse_origin(*origin);
    bool allowed = false;
    if (o) {
      allowed = o->scheme == "http" && host_accepted(o->at);
      for (const auto& x : origins)
        if (x.scheme == o->scheme && x.at.host == o->at.host && x.at.port == o->at.port)
          allowed = true;
    }
    if (allowed)
      return std::nullopt;
    return "Origin '" + shown(*origin)
           + "' may not change anything on this server: without server.auth_token "
             "only pages of this server's own addresses may (add others to "
             "server.allowed_origins)";
  }
};

// -- connection ---------------------------------------------------------------

class connection : public std::enable_shared_from_this<connection> {
public:
  // `counted`: one of the open connections; otherwise one answered 429.
  connection(std::shared_ptr<server_core> core, tcp::socket socket, bool counted)
    : core_(std::move(core)),
      socket_(std::move(socket)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      heartbeat_timer_(socket_.get_executor()),
      stop_timer_(socket_.get_executor()),
      buffer_(core_->opts.max_header_bytes + 8192),
      counted_(counted),
      rejecting_(!counted) {
  }

  ~connection() {
    std::lock_guard<std::mutex> guard{core_->conns_mtx};
    auto i = core_->conns.find(this);
    if (i != core_->conns.end() && i->second.expired())
      core_->conns.erase(i);
  }

  net::any_io_executor executor() {
    return socket_.get_executor();
  }

  // -- called on the strand -----------------------------------------------

  void start(bool reject) {
    error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) {
      remote_address_ = ep.address().to_string();
      remote_port_ = ep.port();
    }
    if (reject) {
      phase_ = phase::reading;
      keep_alive_ = false;
      auto res = json_error(429, "busy",
                            "too many connections (server.max_connections is "
                              + std::to_string(core_->opts.max_connections) + "); try again later");
      res.headers.emplace_back("Retry-After", std::to_string(core_->opts.retry_after_seconds));
      send_response(std::move(res), serial_);
      return;
    }
    if (core_->stopping.load()) {
      close_now(); // accepted while stop() began
      return;
    }
    read_head(core_->opts.header_timeout);
  }

  void begin_stop(const std::string& end_data) {
    switch (phase_) {
      case phase::waiting:
      case phase::reading:
        close_now();
        break;
      case phase::handling: {
        keep_alive_ = false;
        auto grace = core_->opts.stop_timeout / 2;
        stop_timer_.expires_after(grace);
        auto serial = serial_;
        stop_timer_.async_wait([self = shared_from_this(), serial](error_code ec) {
          if (ec || self->phase_ != phase::handling || self->serial_ != serial)
            return;
          self->send_response(json_error(503, "unavailable", "the server is stopping"), serial);
        });
        break;
      }
      case phase::writing:
        keep_alive_ = false;
        break;
      case phase::events:
        end_events("end", end_data);
        break;
      case phase::closing:
      case phase::closed:
        break;
    }
  }

  void close_now() {
    if (phase_ == phase::closed)
      return;
    phase_ = phase::closed;
    read_timer_.cancel();
    write_timer_.cancel();
    heartbeat_timer_.cancel();
    stop_timer_.cancel();
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    std::function<void()> callback;
    bool stream_counted = false;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      out_closed_ = true;
      out_.clear();
      stream_counted = stream_counted_;
      stream_counted_ = false;
      close_fired_ = true;
      callback.swap(on_close_);
    }
    if (stream_counted)
      core_->open_streams.fetch_sub(1);
    if (counted_) {
      counted_ = false;
      core_->open_connections.fetch_sub(1);
    }
    if (rejecting_) {
      rejecting_ = false;
      core_->rejecting.fetch_sub(1);
    }
    {
      std::lock_guard<std::mutex> guard{core_->conns_mtx};
      core_->conns.erase(this);
      core_->conns_cv.notify_all();
    }
    if (callback) {
      try {
        callback();
      } catch (...) {
        // A callback's failure must not end an I/O thread.
      }
    }
  }

  // -- called from any thread ---------------------------------------------

  void post_response(response res, uint64_t serial) {
    core_->post(executor(), [self = shared_from_this(), res = std::move(res), serial]() mutable {
      self->send_response(std::move(res), serial);
    });
  }

  // Returns nullptr if no stream could start (limit, stopping): the client
  // then got an error response.
  std::shared_ptr<event_stream> begin_events(header_list extra, uint64_t serial) {
    auto self = shared_from_this();
    if (core_->stopping.load()) {
      post_response(json_error(503, "unavailable", "the server is stopping"), serial);
      return nullptr;
    }
    if (core_->open_streams.fetch_add(1) >= core_->opts.max_event_streams) {
      core_->open_streams.fetch_sub(1);
      auto res = json_error(429, "busy",
                            "too many event streams (server.max_event_streams is "
                              + std::to_string(core_->opts.max_event_streams)
                              + "); try again later");
      res.headers.emplace_back("Retry-After", std::to_string(core_->opts.retry_after_seconds));
      post_response(std::move(res), serial);
      return nullptr;
    }
    bool counted = false;
    bool kick = false;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (!out_closed_) {
        stream_counted_ = true;
        counted = true;
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                           "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
                           "Connection: close\r\n";
        for (const auto& [name, value] : extra) {
          if (!valid_field(name, value) || reserved_field(name)
              || detail::iequals(name, "Content-Type") || detail::iequals(name, "Cache-Control"))
            continue;
          head += name + ": " + value + "\r\n";
        }
        head += cors_fields_;
        head += "\r\n";
        out_bytes_ += head.size();
        out_.push_back(std::move(head));
        // on_events_started writes, unless a write (100 Continue) is still
        // in flight: its completion goes on with the queue.
        kick = !writing_;
        writing_ = true;
      }
    }
    if (!counted)
      core_->open_streams.fetch_sub(1);
    else
      core_->post(executor(), [self, serial, kick] { self->on_events_started(serial, kick); });
    return std::make_shared<event_stream>(self);
  }

  enum class enqueue_result { queued, closed, overflow };

  enqueue_result enqueue_event(std::string frame) {
    bool kick = false;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (out_closed_ || ending_)
        return enqueue_result::closed;
      if (out_bytes_ + frame.size() > core_->opts.max_event_queue_bytes) {
        out_closed_ = true;
        overflow_ = true;
        core_->post(executor(), [self = shared_from_this()] { self->close_now(); });
        return enqueue_result::overflow;
      }
      out_bytes_ += frame.size();
      out_.push_back(std::move(frame));
      if (!writing_) {
        writing_ = true;
        kick = true;
      }
    }
    if (kick)
      core_->post(executor(), [self = shared_from_this()] { self->do_write(); });
    return enqueue_result::queued;
  }

  // Queues a last frame (if any) and closes once everything was written.
  bool end_events(std::string_view event, std::string_view data, bool with_frame = true) {
    bool kick = false;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (out_closed_ || ending_)
        return false;
      ending_ = true;
      if (with_frame) {
        auto frame = event_frame({}, event, data);
        out_bytes_ += frame.size();
        out_.push_back(std::move(frame));
      }
      if (!writing_) {
        writing_ = true;
        kick = true;
      }
    }
    if (kick)
      core_->post(executor(), [self = shared_from_this()] { self->do_write(); });
    return true;
  }

  bool stream_closed() {
    std::lock_guard<std::mutex> guard{out_mtx_};
    return out_closed_ || ending_;
  }

  void set_on_close(std::function<void()> callback) {
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (!close_fired_) {
        // The replaced callback is destroyed after the lock is released
        // (it may hold the last reference to the stream).
        on_close_.swap(callback);
        return;
      }
    }
    if (callback)
      callback();
  }

  void close_stream_now() {
    core_->post(executor(), [self = shared_from_this()] { self->close_now(); });
  }

  uint64_t serial() const noexcept {
    return serial_;
  }

  std::shared_ptr<server_core> core() const {
    return core_;
  }

private:
  enum class phase { waiting, reading, handling, writing, events, closing, closed };

  static bool reserved_field(std::string_view name) {
    return detail::iequals(name, "Content-Length") || detail::iequals(name, "Connection")
           || detail::iequals(name, "Transfer-Encoding");
  }

  // -- reading -------------------------------------------------------------

  void arm_read_timer(std::chrono::milliseconds d) {
    auto gen = ++read_gen_;
    read_timer_.expires_after(d);
    read_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec && self->read_gen_ == gen)
        self->close_now();
    });
  }

  void cancel_read_timer() {
    ++read_gen_;
    read_timer_.cancel();
  }

  void wait_for_next() {
    if (buffer_.size() > 0) {
      read_head(core_->opts.header_timeout);
      return;
    }
    phase_ = phase::waiting;
    arm_read_timer(core_->opts.idle_timeout);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (self->phase_ != phase::waiting)
        return;
      self->cancel_read_timer();
      if (ec) {
        self->close_now();
        return;
      }
      self->read_head(self->core_->opts.header_timeout);
    });
  }

  void read_head(std::chrono::milliseconds timeout) {
    phase_ = phase::reading;
    ++serial_;
    cors_fields_.clear();
    parser_.emplace();
    parser_->header_limit(
      static_cast<std::uint32_t>(std::min<size_t>(core_->opts.max_header_bytes, UINT32_MAX)));
    // Narrowed to the route's own limit once the path is known (on_head).
    body_limit_ = core_->largest_body;
    parser_->body_limit(static_cast<std::uint64_t>(body_limit_));
    raw_head_.clear();
    arm_read_timer(timeout);
    parse_head();
  }

  // Feeds what is buffered to the parser and reads more until the head is
  // complete (as bhttp::async_read_header does), keeping the bytes of the
  // head the parser used in raw_head_: Beast joins folded lines into one
  // value, so only the bytes as received show an obs-fold
  // (detail::check_request_head).
  void parse_head() {
    if (buffer_.size() > 0) {
      error_code ec;
      auto data = buffer_.data();
      auto used = parser_->put(data, ec);
      raw_head_.append(static_cast<const char*>(data.data()), used);
      buffer_.consume(used);
      if (ec != bhttp::error::need_more && (ec || parser_->is_header_done())) {
        on_head(ec);
        return;
      }
    }
    const auto size = beast::read_size(buffer_, 65536);
    if (size == 0) {
      on_head(bhttp::error::buffer_overflow);
      return;
    }
    socket_.async_read_some(buffer_.prepare(size),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->on_head_bytes(ec, n);
                            });
  }

  void on_head_bytes(error_code ec, size_t n) {
    if (phase_ != phase::reading)
      return;
    buffer_.commit(n);
    if (ec == net::error::eof)
      ec = parser_->got_some() ? bhttp::error::partial_message : bhttp::error::end_of_stream;
    if (ec) {
      on_head(ec);
      return;
    }
    parse_head();
  }

  void on_head(error_code ec) {
    if (phase_ != phase::reading)
      return;
    cancel_read_timer();
    if (ec) {
      on_read_error(ec, false);
      return;
    }
    auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_request_ = req.method() == bhttp::verb::head;
    if (auto bad = framing_error(req.version())) {
      // The bytes after this head cannot be trusted to start a request.
      keep_alive_ = false;
      send_response(json_error(400, "bad_request", *bad), serial_);
      return;
    }
    head_fields_.clear();
    for (const auto& field : req)
      head_fields_.emplace_back(std::string{field.name_string().data(), field.name_string().size()},
                                std::string{field.value().data(), field.value().size()});
    const auto content_length = parser_->content_length();
    const bool body_expected = parser_->chunked() || (content_length && *content_length > 0);

    // The CORS fields of this request's answers, if its origin is listed.
    if (auto origin = req.find(bhttp::field::origin); origin != req.end()) {
      std::string_view value{origin->value().data(), origin->value().size()};
      for (const auto& allowed : core_->opts.cors_origins) {
        if (allowed == value && !has_line_break(value)) {
          cors_fields_ = "Access-Control-Allow-Origin: " + allowed
                         + "\r\nVary: Origin\r\n"
                           "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
                           "Access-Control-Allow-Headers: Authorization, Content-Type, "
                           "Last-Event-ID\r\n"
                           "Access-Control-Expose-Headers: Location, Retry-After\r\n";
          break;
        }
      }
    }

    // Answers that need no body: the connection stays open only if the
    // request has none to skip.
    auto refuse = [&](response res) {
      if (body_expected)
        keep_alive_ = false;
      send_response(std::move(res), serial_);
    };
    {
      auto field = [&](bhttp::field f) -> std::optional<std::string_view> {
        auto i = req.find(f);
        if (i == req.end())
          return std::nullopt;
        return std::string_view{i->value().data(), i->value().size()};
      };
      const auto m = req.method();
      const bool changes_state = m != bhttp::verb::get && m != bhttp::verb::head
                                 && m != bhttp::verb::options;
      if (auto why = core_->refusal(field(bhttp::field::host), field(bhttp::field::origin),
                                    changes_state)) {
        refuse(json_error(403, "forbidden", *why));
        return;
      }
    }
    std::string target{req.target().data(), req.target().size()};
    auto parsed = detail::parse_target(target);
    if (auto* msg = std::get_if<std::string>(&parsed)) {
      refuse(json_error(400, "bad_request", *msg));
      return;
    }
    target_ = std::move(target);
    parsed_ = std::move(std::get<detail::parsed_target>(parsed));
    // The route's own limit, before any of the body is read (a chunked
    // body is counted against it as it comes).
    body_limit_ = core_->body_limit_for(parsed_.path);
    if (content_length && *content_length > body_limit_) {
      refuse(
        json_error(413, "too_large",
                   "the request body is larger than " + std::to_string(body_limit_) + " bytes"));
      return;
    }
    parser_->body_limit(static_cast<std::uint64_t>(body_limit_));
    if (req.method() == bhttp::verb::options && !cors_fields_.empty()
        && req.find(bhttp::field::access_control_request_method) != req.end()) {
      response res;
      res.status = 204;
      res.content_type.clear();
      res.headers.emplace_back("Access-Control-Max-Age", "600");
      refuse(std::move(res));
      return;
    }
    if (!core_->opts.auth_token.empty() && !is_public(core_->opts.public_paths, parsed_.path)) {
      std::string_view given;
      bool present = false;
      if (auto auth = req.find(bhttp::field::authorization); auth != req.end()) {
        std::string_view value{auth->value().data(), auth->value().size()};
        if (value.size() > 7 && detail::iequals(value.substr(0, 7), "Bearer ")) {
          given = value.substr(7);
          while (!given.empty() && given.front() == ' ')
            given.remove_prefix(1);
          while (!given.empty() && given.back() == ' ')
            given.remove_suffix(1);
          present = true;
        }
      }
      if (!present || !constant_time_equals(given, core_->opts.auth_token)) {
        auto res = json_error(401, "unauthorized",
                              present ? "wrong bearer token"
                                      : "this path needs Authorization: Bearer <token>");
        res.headers.emplace_back("WWW-Authenticate", "Bearer");
        refuse(std::move(res));
        return;
      }
    }
    if (core_->stopping.load()) {
      keep_alive_ = false;
      send_response(json_error(503, "unavailable", "the server is stopping"), serial_);
      return;
    }
    if (parser_->is_done()) {
      on_body({});
      return;
    }
    if (version_ >= 11) {
      if (auto expect = req.find(bhttp::field::expect);
          expect != req.end()
          && detail::iequals({expect->value().data(), expect->value().size()}, "100-continue"))
        queue_bytes("HTTP/1.1 100 Continue\r\n\r\n");
    }
    arm_read_timer(core_->opts.header_timeout);
    bhttp::async_read(socket_, buffer_, *parser_,
                      [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
  }

  // Why the head just read must be answered 400 and the connection closed,
  // or nothing: the rules of detail::check_request_head on the head as
  // received, and the framing Beast chose must be the one those rules found
  // (RFC 9112 section 6.3).
  std::optional<std::string> framing_error(unsigned version) {
    auto checked = detail::check_request_head(raw_head_, version);
    if (auto* msg = std::get_if<std::string>(&checked))
      return std::move(*msg);
    const auto& framing = std::get<detail::request_framing>(checked);
    const auto length = parser_->content_length();
    bool agrees = false;
    switch (framing.framing) {
      case detail::body_framing::none:
        agrees = !parser_->chunked() && !length;
        break;
      case detail::body_framing::content_length:
        agrees = !parser_->chunked() && length && *length == framing.content_length;
        break;
      case detail::body_framing::chunked:
        agrees = parser_->chunked() && !length;
        break;
    }
    if (!agrees)
      return std::string{"the request's message framing is ambiguous (RFC 9112 section 6.3)"};
    return std::nullopt;
  }

  void on_read_error(error_code ec, bool in_body) {
    if (ec == bhttp::error::header_limit || (ec == bhttp::error::buffer_overflow && !in_body)) {
      keep_alive_ = false;
      send_response(json_error(431, "too_large",
                               "the request head is larger than "
                                 + std::to_string(core_->opts.max_header_bytes) + " bytes"),
                    serial_);
      return;
    }
    if (ec == bhttp::error::body_limit) {
      keep_alive_ = false;
      // A Content-Length over every route's limit is refused by the parser
      // with the head: the limit said is still the route's.
      auto most = body_limit_;
      if (!in_body && parser_) {
        const auto& target = parser_->get().target();
        auto parsed = detail::parse_target(std::string_view{target.data(), target.size()});
        if (auto* t = std::get_if<detail::parsed_target>(&parsed))
          most = core_->body_limit_for(t->path);
      }
      send_response(
        json_error(413, "too_large",
                   "the request body is larger than " + std::to_string(most) + " bytes"),
        serial_);
      return;
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message
        || ec.category() != bhttp::make_error_code(bhttp::error::end_of_stream).category()) {
      // The client went away, the read timed out, or the socket failed.
      close_now();
      return;
    }
    keep_alive_ = false;
    send_response(json_error(400, "bad_request", "malformed request: " + ec.message()), serial_);
  }

  void on_body(error_code ec) {
    if (phase_ != phase::reading)
      return;
    cancel_read_timer();
    if (ec) {
      on_read_error(ec, true);
      return;
    }
    auto& msg = parser_->get();
    request req;
    req.method = std::string{msg.method_string().data(), msg.method_string().size()};
    req.target = std::move(target_);
    req.path = std::move(parsed_.path);
    req.query = std::move(parsed_.query);
    // The fields of the head only: Beast adds a chunked body's trailer fields
    // to the message, which must not be merged into the header section
    // (RFC 9110 section 6.5.1); they are dropped (RFC 9112 section 7.1.2).
    req.headers = std::move(head_fields_);
    head_fields_.clear();
    req.body = std::move(msg.body());
    req.remote_address = remote_address_;
    req.remote_port = remote_port_;
    req.version = version_;
    parser_.reset();
    phase_ = phase::handling;
    auto res = std::make_shared<responder>(shared_from_this());
    try {
      if (core_->fn)
        core_->fn(std::move(req), res);
      else
        res->respond(json_error(404, "not_found", "no handler"));
    } catch (const std::exception& e) {
      res->respond(json_error(500, "internal", std::string{"the handler failed: "} + e.what()));
    } catch (...) {
      res->respond(json_error(500, "internal", "the handler failed"));
    }
  }

  // -- writing -------------------------------------------------------------

  void send_response(response res, uint64_t serial) {
    if ((phase_ != phase::reading && phase_ != phase::handling) || serial != serial_)
      return;
    phase_ = phase::writing;
    stop_timer_.cancel();
    if (res.status < 200 || res.status > 599)
      res = json_error(500, "internal",
                       "the handler answered with status " + std::to_string(res.status));
    if (core_->stopping.load())
      keep_alive_ = false;
    core_->count_status(res.status);
    const bool no_body = head_request_ || res.status == 204 || res.status == 304;
    std::string out;
    out.reserve(256 + (no_body ? 0 : res.body.size()));
    out += "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
    if (!res.content_type.empty() && !has_line_break(res.content_type))
      out += "Content-Type: " + res.content_type + "\r\n";
    for (const auto& [name, value] : res.headers) {
      if (!valid_field(name, value) || reserved_field(name)
          || (!res.content_type.empty() && detail::iequals(name, "Content-Type")))
        continue;
      out += name + ": " + value + "\r\n";
    }
    out += cors_fields_;
    if (res.status != 204 && res.status != 304)
      out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    if (!keep_alive_)
      out += "Connection: close\r\n";
    else if (version_ < 11)
      out += "Connection: keep-alive\r\n";
    out += "\r\n";
    if (!no_body)
      out += res.body;
    queue_bytes(std::move(out));
  }

  // Queues bytes from the strand and starts writing if idle.
  void queue_bytes(std::string bytes) {
    bool kick = false;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      out_bytes_ += bytes.size();
      out_.push_back(std::move(bytes));
      if (!writing_) {
        writing_ = true;
        kick = true;
      }
    }
    if (kick)
      do_write();
  }

  void do_write() {
    std::vector<net::const_buffer> buffers;
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (phase_ == phase::closed) {
        writing_ = false;
        out_.clear();
        return;
      }
      if (out_.empty()) {
        writing_ = false;
      } else {
        while (!out_.empty()) {
          inflight_.push_back(std::move(out_.front()));
          out_.pop_front();
        }
      }
    }
    if (inflight_.empty()) {
      on_drained();
      return;
    }
    buffers.reserve(inflight_.size());
    for (const auto& s : inflight_)
      buffers.emplace_back(s.data(), s.size());
    auto gen = ++write_gen_;
    write_timer_.expires_after(core_->opts.idle_timeout);
    write_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec && self->write_gen_ == gen)
        self->close_now();
    });
    net::async_write(socket_, buffers,
                     [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    ++write_gen_;
    write_timer_.cancel();
    size_t bytes = 0;
    for (const auto& s : inflight_)
      bytes += s.size();
    inflight_.clear();
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      out_bytes_ -= std::min(out_bytes_, bytes);
    }
    if (ec) {
      close_now();
      return;
    }
    do_write();
  }

  void on_drained() {
    if (phase_ == phase::writing) {
      if (keep_alive_ && !core_->stopping.load())
        wait_for_next();
      else
        graceful_close();
    } else if (phase_ == phase::events) {
      bool ending = false;
      {
        std::lock_guard<std::mutex> guard{out_mtx_};
        ending = ending_;
      }
      if (ending)
        graceful_close();
    }
  }

  // -- events --------------------------------------------------------------

  void on_events_started(uint64_t serial, bool kick) {
    if (phase_ != phase::handling || serial != serial_) {
      close_now();
      return;
    }
    phase_ = phase::events;
    keep_alive_ = false;
    core_->count_status(200);
    arm_heartbeat();
    discard_read();
    if (kick)
      do_write();
    // stop() began after begin_events checked: its begin_stop saw a request
    // still being handled, so the end event is sent here.
    if (core_->stopping.load())
      end_events("end", core_->end_data);
  }

  void arm_heartbeat() {
    heartbeat_timer_.expires_after(core_->opts.heartbeat);
    heartbeat_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->phase_ != phase::events)
        return;
      self->enqueue_event(comment_frame("heartbeat"));
      self->arm_heartbeat();
    });
  }

  // Reads and ignores what the client sends: on an event stream, to see at
  // once when it goes away; after a response that closes, so that it reads
  // that response before the connection ends.
  void discard_read() {
    if (discarding_)
      return;
    discarding_ = true;
    socket_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->on_discard(ec, n);
                            });
  }

  void on_discard(error_code ec, size_t n) {
    discarding_ = false;
    if (phase_ == phase::closed)
      return;
    discarded_ += n;
    const size_t limit = phase_ == phase::events ? stream_input_bytes : linger_bytes;
    if (ec || discarded_ > limit) {
      close_now();
      return;
    }
    discard_read();
  }

  void graceful_close() {
    if (phase_ == phase::closing || phase_ == phase::closed)
      return;
    phase_ = phase::closing;
    heartbeat_timer_.cancel();
    stop_timer_.cancel();
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      close_now();
      return;
    }
    discarded_ = 0;
    arm_read_timer(std::min(linger_time, core_->opts.idle_timeout));
    discard_read();
  }

  std::shared_ptr<server_core> core_;
  tcp::socket socket_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  net::steady_timer heartbeat_timer_;
  net::steady_timer stop_timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  /// The bytes of the current request's head as received (at most about
  /// max_header_bytes: the parser's header limit).
  std::string raw_head_;
  /// The current request's header fields (not its trailer fields).
  header_list head_fields_;
  /// Where discard_read() puts what it ignores. Small: every event stream
  /// holds one for its life, and a client sends nothing there as a rule.
  std::array<char, 512> scratch_{};

  // Strand state.
  phase phase_ = phase::reading;
  bool counted_ = false;
  bool rejecting_ = false;
  bool keep_alive_ = false;
  bool head_request_ = false;
  bool discarding_ = false;
  unsigned version_ = 11;
  uint64_t read_gen_ = 0;
  uint64_t write_gen_ = 0;
  size_t discarded_ = 0;
  uint64_t serial_ = 0;
  std::string remote_address_;
  uint16_t remote_port_ = 0;
  std::string cors_fields_;
  std::string target_;
  detail::parsed_target parsed_;
  /// The largest body of the request being read (its route's, once its
  /// path is known).
  size_t body_limit_ = 0;
  std::vector<std::string> inflight_;

  // Shared state (out_mtx_).
  std::mutex out_mtx_;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  bool out_closed_ = false;
  bool ending_ = false;
  bool overflow_ = false;
  bool stream_counted_ = false;
  bool close_fired_ = false;
  std::function<void()> on_close_;

  friend struct server_core;
  friend class server;
};

void server_core::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void server_core::on_accept(error_code ec, tcp::socket socket) {
  if (stopping.load() || !acceptor.is_open()) {
    error_code ignored;
    socket.close(ignored);
    return;
  }
  if (ec) {
    if (ec == net::error::operation_aborted)
      return;
    // Out of descriptors or a transient failure: try again shortly.
    accept_retry.expires_after(std::chrono::milliseconds{50});
    accept_retry.async_wait([this](error_code timer_ec) {
      if (!timer_ec && !stopping.load())
        do_accept();
    });
    return;
  }
  bool reject = open_connections.load() >= opts.max_connections;
  if (reject && rejecting.load() >= max_rejecting) {
    error_code ignored;
    socket.close(ignored);
    do_accept();
    return;
  }
  std::shared_ptr<connection> conn;
  try {
    if (reject)
      rejecting.fetch_add(1);
    else
      open_connections.fetch_add(1);
    conn = std::make_shared<connection>(self.lock(), std::move(socket), !reject);
    {
      std::lock_guard<std::mutex> guard{conns_mtx};
      conns.emplace(conn.get(), conn);
    }
    net::post(conn->executor(), [conn, reject] { conn->start(reject); });
  } catch (...) {
    if (conn)
      conn->close_now();
  }
  do_accept();
}

// -- event_stream -------------------------------------------------------------

event_stream::event_stream(std::shared_ptr<connection> conn) : conn_(std::move(conn)) {
}

event_stream::~event_stream() {
  conn_->end_events({}, {}, false);
}

bool event_stream::send(std::string_view id, std::string_view event, std::string_view data) {
  if (has_line_break(id) || has_line_break(event))
    return false;
  return conn_->enqueue_event(event_frame(id, event, data)) == connection::enqueue_result::queued;
}

bool event_stream::comment(std::string_view text) {
  return conn_->enqueue_event(comment_frame(text)) == connection::enqueue_result::queued;
}

bool event_stream::end(std::string_view event, std::string_view data) {
  if (has_line_break(event))
    return false;
  return conn_->end_events(event, data);
}

void event_stream::close() {
  conn_->close_stream_now();
}

bool event_stream::closed() const {
  return conn_->stream_closed();
}

void event_stream::on_close(std::function<void()> callback) {
  conn_->set_on_close(std::move(callback));
}

// -- responder ----------------------------------------------------------------

responder::responder(std::shared_ptr<connection> conn)
  : conn_(std::move(conn)), serial_(conn_->serial()) {
}

responder::~responder() {
  if (!used_.exchange(true))
    conn_->post_response(json_error(500, "internal", "the request was dropped without an answer"),
                         serial_);
}

bool responder::respond(response res) {
  if (used_.exchange(true))
    return false;
  conn_->post_response(std::move(res), serial_);
  return true;
}

std::shared_ptr<event_stream> responder::start_events(header_list extra_headers) {
  if (used_.exchange(true))
    return nullptr;
  return conn_->begin_events(std::move(extra_headers), serial_);
}

bool responder::answered() const noexcept {
  return used_.load();
}

// -- server -------------------------------------------------------------------

server::server(std::shared_ptr<server_core> core) : core_(std::move(core)) {
}

server::~server() {
  stop();
}

uint16_t server::port() const noexcept {
  return core_->port;
}

std::string server::address() const {
  return core_->address;
}

bool server::stopping() const noexcept {
  return core_->stopping.load();
}

server_stats server::stats() const {
  server_stats out;
  out.open_connections = core_->open_connections.load();
  out.open_event_streams = core_->open_streams.load();
  for (size_t i = 0; i < core_->by_status.size(); ++i)
    if (auto n = core_->by_status[i].load(); n > 0)
      out.responses_by_status[static_cast<int>(i)] = n;
  return out;
}

std::variant<std::unique_ptr<server>, sdk::error> server::start(server_options options,
                                                                handler fn) {
  auto fail = [](sdk::errc code, std::string message) {
    sdk::error err;
    err.code = code;
    err.message = std::move(message);
    return err;
  };
  using ms = std::chrono::milliseconds;
  if (options.io_threads == 0 || options.io_threads > 256)
    return fail(sdk::errc::bad_request, "server.io_threads must be 1 to 256");
  if (options.heartbeat <= ms{0} || options.header_timeout <= ms{0} || options.idle_timeout <= ms{0}
      || options.stop_timeout <= ms{0})
    return fail(sdk::errc::bad_request,
                "server timeouts and the heartbeat must be longer than zero");
  if (options.max_connections == 0 || options.max_header_bytes < 256
      || options.max_event_queue_bytes == 0)
    return fail(sdk::errc::bad_request,
                "server.max_connections, max_header_bytes (>= 256) and the event "
                "queue limit must be positive");
  if (options.host.empty())
    return fail(sdk::errc::bad_request, "server: the host to listen on is empty");
  if (has_line_break(options.auth_token))
    return fail(sdk::errc::bad_request, "server.auth_token must not contain line breaks");

  std::vector<detail::authority> extra_hosts;
  for (const auto& h : options.allowed_hosts) {
    auto at = detail::parse_authority(h);
    if (!at)
      return fail(sdk::errc::bad_request,
                  "server.allowed_hosts: '" + h.substr(0, 100)
                    + "' is not a host name or address, with or without a port "
                      "(e.g. quarry.lan or quarry.lan:8700)");
    extra_hosts.push_back(std::move(*at));
  }
  std::vector<detail::origin> origins;
  for (const auto& o : options.allowed_origins) {
    auto parsed = detail::parse_origin(o);
    if (!parsed)
      return fail(sdk::errc::bad_request,
                  "server.allowed_origins: '" + o.substr(0, 100)
                    + "' is not an origin such as http://localhost:3000 (http or "
                      "https, a host, a port, no path)");
    origins.push_back(std::move(*parsed));
  }
  // Listed CORS origins are trusted as well; one that is not an origin
  // only ever matched by its exact text (CORS headers), as before.
  for (const auto& o : options.cors_origins)
    if (auto parsed = detail::parse_origin(o))
      origins.push_back(std::move(*parsed));

  auto core = std::make_shared<server_core>();
  core->opts = std::move(options);
  core->largest_body = core->opts.max_body_bytes;
  for (const auto& [route, most] : core->opts.body_limits)
    core->largest_body = std::max(core->largest_body, most);
  core->fn = std::move(fn);
  core->self = core;
  const auto& opts = core->opts;
  const auto wanted = host_port_text(opts.host, opts.port);

  error_code ec;
  tcp::resolver resolver{core->ioc};
  auto results = resolver.resolve(opts.host, std::to_string(opts.port), tcp::resolver::passive, ec);
  if (ec || results.empty())
    return fail(sdk::errc::not_found, "cannot listen on " + wanted + ": cannot resolve host '"
                                        + opts.host + "': " + (ec ? ec.message() : "no address"));
  // Prefer IPv4 (e.g. for `localhost`).
  tcp::endpoint endpoint = results.begin()->endpoint();
  for (const auto& entry : results) {
    if (entry.endpoint().address().is_v4()) {
      endpoint = entry.endpoint();
      break;
    }
  }
  if (opts.auth_token.empty()) {
    for (const auto& entry : results) {
      if (!entry.endpoint().address().is_loopback())
        return fail(sdk::errc::refused, "refusing to listen on " + endpoint_text(entry.endpoint())
                                          + " without server.auth_token: an address other than "
                                            "loopback needs a bearer token (set server.auth_token, "
                                            "or listen on 127.0.0.1)");
    }
  }
  auto bind_error = [&](const char* what, error_code e) {
    auto code = sdk::errc::network;
    if (e == net::error::address_in_use)
      code = sdk::errc::busy;
    else if (e == net::error::access_denied || e == net::error::no_permission)
      code = sdk::errc::refused;
    return fail(code,
                "cannot listen on " + endpoint_text(endpoint) + ": " + what + ": " + e.message());
  };
  core->acceptor.open(endpoint.protocol(), ec);
  if (ec)
    return bind_error("cannot open a socket", ec);
  core->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  core->acceptor.bind(endpoint, ec);
  if (ec)
    return bind_error("cannot bind", ec);
  core->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return bind_error("cannot listen", ec);
  auto local = core->acceptor.local_endpoint(ec);
  if (ec)
    return bind_error("cannot read the bound address", ec);
  core->port = local.port();
  core->address = endpoint_text(local);
  core->check_host = opts.check_host && opts.auth_token.empty();
  if (core->check_host) {
    auto add = [&](std::string_view host_text, std::optional<uint16_t> port) {
      if (auto at = detail::parse_authority(host_text)) {
        at->port = port.value_or(core->port);
        core->hosts.push_back(std::move(*at));
      }
    };
    add(opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host, std::nullopt);
    auto bound = local.address().to_string();
    add(local.address().is_v6() ? "[" + bound + "]" : bound, std::nullopt);
    add("localhost", std::nullopt);
    add("127.0.0.1", std::nullopt);
    add("[::1]", std::nullopt);
    for (auto& at : extra_hosts) {
      if (!at.port)
        at.port = core->port;
      core->hosts.push_back(std::move(at));
    }
    core->origins = std::move(origins);
  }

  core->work.emplace(net::make_work_guard(core->ioc));
  net::post(core->acceptor.get_executor(), [c = core.get()] { c->do_accept(); });
  core->running_threads = opts.io_threads;
  try {
    for (size_t i = 0; i < opts.io_threads; ++i) {
      core->threads.emplace_back([c = core.get()] {
        for (;;) {
          try {
            c->ioc.run();
            break;
          } catch (...) {
            // A handler threw: keep the thread serving.
          }
        }
        std::lock_guard<std::mutex> guard{c->threads_mtx};
        --c->running_threads;
        c->threads_cv.notify_all();
      });
    }
  } catch (const std::exception& e) {
    std::unique_ptr<server> partial{new server(core)};
    partial.reset(); // stops and joins what started
    return fail(sdk::errc::internal, std::string{"cannot start I/O threads: "} + e.what());
  }
  return std::unique_ptr<server>{new server(std::move(core))};
}

void server::stop(std::string_view end_event_data) {
  auto& c = *core_;
  {
    std::lock_guard<std::mutex> guard{c.stop_mtx};
    if (c.stopped)
      return;
    c.stopped = true;
  }
  c.end_data = std::string{end_event_data};
  c.stopping.store(true);
  const auto deadline = std::chrono::steady_clock::now() + c.opts.stop_timeout;
  c.post(c.acceptor.get_executor(), [cp = &c] {
    error_code ec;
    cp->acceptor.close(ec);
    cp->accept_retry.cancel();
  });
  auto snapshot = [&c] {
    std::vector<std::shared_ptr<connection>> out;
    std::lock_guard<std::mutex> guard{c.conns_mtx};
    for (auto& [ptr, weak] : c.conns)
      if (auto conn = weak.lock())
        out.push_back(std::move(conn));
    return out;
  };
  for (auto& conn : snapshot())
    c.post(conn->executor(), [conn, cp = &c] { conn->begin_stop(cp->end_data); });
  {
    std::unique_lock<std::mutex> guard{c.conns_mtx};
    c.conns_cv.wait_until(guard, deadline, [&c] {
      return c.open_connections.load() == 0 && c.rejecting.load() == 0;
    });
  }
  for (auto& conn : snapshot())
    c.post(conn->executor(), [conn] { conn->close_now(); });
  {
    std::lock_guard<std::mutex> guard{c.post_mtx};
    c.posts_open = false;
  }
  c.work.reset();
  {
    std::unique_lock<std::mutex> guard{c.threads_mtx};
    if (!c.threads_cv.wait_for(guard, std::chrono::seconds{2},
                               [&c] { return c.running_threads == 0; }))
      c.ioc.stop();
  }
  for (auto& t : c.threads)
    if (t.joinable())
      t.join();
  c.threads.clear();
  // Runs what is left (completions of the closing), so that no handler in
  // the queue keeps a connection, and the connection the core, alive.
  c.ioc.restart();
  for (int i = 0; i < 1000 && c.ioc.poll() > 0; ++i) {
  }
  std::lock_guard<std::mutex> guard{c.conns_mtx};
  c.conns.clear();
}

} // namespace quarry::http
