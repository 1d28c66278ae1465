// The host's asynchronous HTTP client: one I/O thread runs every transfer on a
// libcurl multi handle, with manual redirects, stall detection and hooks.

#include "quarry/host/http_client.hpp"
#include "quarry/host/curl_epoll.hpp"
#include "quarry/fetch/url.hpp"
#include "quarry/sdk/strings.hpp"

#include <curl/curl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace quarry::host {

namespace {

using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using std::chrono::milliseconds;

// Easy handles kept for reuse at most.
constexpr size_t max_free_handles = 4096;

// How often idle easy handles are freed: those the free list did not need
// during a whole period.
constexpr auto trim_period = std::chrono::seconds{5};

// Receive buffer of a transfer that is not an event stream: libcurl's
// default (CURL_MAX_WRITE_SIZE, 16 KiB). Each running transfer holds one
// from its connect on; at 64 KiB they were half the heap a running research
// owned (bench/README.md, "memory per running research"; mostly pages never
// touched, so the resident size hardly changed).
constexpr long receive_buffer_size = 16 * 1024;

// Receive buffer of an event stream (a request that accepts
// `text/event-stream`: model answers streamed token by token). Its events
// come a few hundred bytes at a time, and a stream runs as long as the model
// writes; libcurl's minimum is 1 KiB (CURLOPT_BUFFERSIZE). A read of a
// larger burst takes more than one call.
constexpr long stream_receive_buffer_size = 4 * 1024;

// True when `req` accepts an event stream (media types are case-blind). An
// MCP request, which accepts JSON or a stream, counts too.
bool accepts_event_stream(const sdk::http_request& req) {
  auto accept = sdk::find_header(req.headers, "Accept");
  return accept && sdk::contains(sdk::to_lower(*accept), "text/event-stream");
}

// Request bodies above this size count upload progress as activity for the
// stall timer.
constexpr size_t large_upload = 64 * 1024;

// Socket events taken from the kernel per wait.
constexpr int max_events = 256;

std::once_flag curl_init_flag;

void init_curl_once() {
  std::call_once(curl_init_flag, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

using sdk::iequals;

bool is_redirect_status(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

using sdk::make_error;

// Headers that carry credentials: dropped when a redirect leaves the origin.
bool is_sensitive_header(std::string_view name) {
  static constexpr std::string_view exact[] = {
    "authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-goog-api-key",
  };
  for (auto x : exact)
    if (iequals(name, x))
      return true;
  auto lowered = sdk::to_lower(name);
  return lowered.find("token") != std::string::npos || lowered.find("secret") != std::string::npos
         || lowered.find("auth") != std::string::npos;
}

// Returns `scheme://host:port` of an absolute URL, with the default port
// filled in, or an empty string.
std::string origin_of(const std::string& url) {
  auto parsed = fetch::parse_url(url);
  auto* u = std::get_if<fetch::url>(&parsed);
  return u != nullptr ? u->origin() : std::string{};
}

int response_code(CURL* easy) {
  long code = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
  return static_cast<int>(code);
}

int64_t thread_cpu_ns(clockid_t cid) {
  timespec ts{};
  if (clock_gettime(cid, &ts) != 0)
    return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

// -- the engine ---------------------------------------------------------------

class curl_http_client::impl : public std::enable_shared_from_this<impl> {
public:
  explicit impl(const core::http_settings& defaults) : defaults_(defaults) {
    init_curl_once();
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS,
                      static_cast<long>(std::max(1, defaults_.max_connections)));
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS,
                      static_cast<long>(std::max(0, defaults_.max_host_connections)));
    // libcurl tells which sockets to watch and when to call it back; the I/O
    // thread waits on them with epoll and hands only the ready ones over, so
    // a wake-up costs the transfers that have work, not all of them.
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &impl::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &impl::on_curl_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      setup_error_ = std::string{"cannot create an epoll instance: "} + std::strerror(errno);
      return;
    }
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) {
      setup_error_ = std::string{"cannot create an eventfd: "} + std::strerror(errno);
      return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0)
      setup_error_ = std::string{"cannot watch the wake-up eventfd: "} + std::strerror(errno);
  }

  ~impl() {
    // The I/O thread cleans the multi handle up; this only runs if it never
    // started.
    if (multi_ != nullptr)
      curl_multi_cleanup(multi_);
    if (wake_fd_ >= 0)
      ::close(wake_fd_);
    if (epoll_fd_ >= 0)
      ::close(epoll_fd_);
  }

  void launch() {
    if (!setup_error_.empty())
      return; // start() fails every request with the reason.
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
    io_thread_id_ = thread_.get_id();
  }

  std::shared_ptr<sdk::http_call> start(sdk::http_request request,
                                        std::shared_ptr<sdk::http_response_sink> sink);

  void cancel(uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopped_)
      return;
    command cmd;
    cmd.id = id;
    post(std::move(cmd));
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!stopped_) {
        stopped_ = true;
        wake();
      }
    }
    std::lock_guard<std::mutex> guard{join_mtx_};
    if (!thread_.joinable())
      return;
    if (std::this_thread::get_id() == thread_.get_id())
      thread_.detach();
    else
      thread_.join();
  }

  http_client_stats stats() const {
    http_client_stats result;
    result.started = started_.load();
    result.completed = completed_.load();
    result.active = result.started - result.completed;
    result.connections_opened = connections_opened_.load();
    result.easy_handles_created = easy_created_.load();
    result.easy_handles_idle = easy_idle_.load();
    result.redirects_followed = redirects_.load();
    result.request_body_bytes = body_bytes_.load();
    std::lock_guard<std::mutex> guard{mtx_};
    if (exited_) {
      result.io_thread_cpu = std::chrono::nanoseconds{final_cpu_ns_};
    } else if (cpu_clock_valid_) {
      result.io_thread_cpu = std::chrono::nanoseconds{thread_cpu_ns(cpu_clock_)};
    }
    return result;
  }

private:
  // One request, across all its redirect hops.
  struct transfer {
    impl* owner = nullptr;
    uint64_t id = 0;
    sdk::http_request req;
    std::shared_ptr<sdk::http_response_sink> sink;
    // Effective limits.
    milliseconds connect_timeout{0};
    milliseconds total_timeout{0};
    milliseconds stall_timeout{0};
    int64_t max_bytes = 0;
    int max_redirects = 0;
    time_point deadline;
    // Current hop.
    CURL* easy = nullptr;
    curl_slist* header_list = nullptr;
    std::string url;
    int hops = 0;
    bool request_sent = false;
    bool opened_socket = false;
    time_point last_activity;
    curl_off_t uploaded = 0;
    int status = 0;
    sdk::http_headers headers;
    bool redirecting = false;
    bool delivered = false;
    int64_t received = 0;
    // The body's bytes counted in impl::body_bytes_ (0 once let go).
    uint64_t body_counted = 0;
    // Set by callbacks to abort the transfer with this error.
    std::optional<sdk::error> abort;
    // Entry in the timer set, if armed.
    bool timer_armed = false;
    time_point timer_at;
    char errbuf[CURL_ERROR_SIZE];

    std::string describe() const {
      return req.method + " " + fetch::redact_url(url);
    }
  };

  // A queued start (job set) or cancel (id set).
  struct command {
    std::unique_ptr<transfer> job;
    uint64_t id = 0;
  };

  // An http_call that posts a cancel command.
  class call_handle : public sdk::http_call {
  public:
    call_handle(std::weak_ptr<impl> owner, uint64_t id) : owner_(std::move(owner)), id_(id) {
      // nop
    }

    void cancel() override {
      if (auto owner = owner_.lock())
        owner->cancel(id_);
    }

  private:
    std::weak_ptr<impl> owner_;
    uint64_t id_;
  };

  // Requires mtx_.
  void post(command cmd) {
    auto was_empty = queue_.empty();
    queue_.push_back(std::move(cmd));
    if (was_empty && std::this_thread::get_id() != io_thread_id_)
      wake();
  }

  // Interrupts the I/O thread's wait.
  void wake() {
    if (wake_fd_ < 0)
      return;
    uint64_t one = 1;
    // EAGAIN: the counter is full, so a wake-up is pending anyway.
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  }

  // -- I/O thread -------------------------------------------------------------

  void run();
  void collect_done();
  void add_transfer(std::unique_ptr<transfer> job);
  std::optional<sdk::error> begin_hop(transfer& t);
  void configure(transfer& t);
  void on_done(transfer& t, CURLcode rc);
  void follow_redirect(transfer& t);
  void finish(transfer& t, std::optional<sdk::error> failure);
  void check_timers();
  void arm_timer(transfer& t);
  void disarm_timer(transfer& t);
  CURL* acquire_easy();
  void release_easy(CURL* easy);
  void trim_free_handles(time_point now);
  sdk::error classify(transfer& t, CURLcode rc) const;

  bool deliver_response(transfer& t);

  static size_t on_header(char* buf, size_t size, size_t n, void* ud);
  // Frees the request body and uncounts it.
  void let_go_of_body(transfer& t);
  static size_t on_write(char* buf, size_t size, size_t n, void* ud);
  static curl_socket_t on_open_socket(void* ud, curlsocktype purpose, curl_sockaddr* addr);
  static int on_prereq(void* ud, char* primary_ip, char* local_ip, int primary_port,
                       int local_port);
  static int on_progress(void* ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                         curl_off_t ulnow);

  static std::optional<sdk::error> check_connect(transfer& t, std::string_view ip, uint16_t port);

  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int on_curl_timer(CURLM* multi, long timeout_ms, void* userp);

  core::http_settings defaults_;
  CURLM* multi_ = nullptr;
  // The I/O thread's wait: sockets libcurl asked for, plus wake_fd_.
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  // Why the poller could not be set up (every request then fails with it).
  std::string setup_error_;
  std::thread thread_;
  std::thread::id io_thread_id_;
  std::mutex join_mtx_;

  // Guards queue_, stopped_, exited_, final_cpu_ns_ and the cpu clock.
  mutable std::mutex mtx_;
  std::vector<command> queue_;
  bool stopped_ = false;
  bool exited_ = false;
  int64_t final_cpu_ns_ = 0;
  bool cpu_clock_valid_ = false;
  clockid_t cpu_clock_{};

  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> completed_{0};
  // Bytes of the bodies the transfers hold (transfer::body_counted).
  std::atomic<uint64_t> body_bytes_{0};
  std::atomic<uint64_t> connections_opened_{0};
  std::atomic<uint64_t> easy_created_{0};
  std::atomic<uint64_t> easy_idle_{0};
  std::atomic<uint64_t> redirects_{0};

  // Owned by the I/O thread.
  std::unordered_map<uint64_t, std::unique_ptr<transfer>> transfers_;
  // The last URLs found to be well-formed http(s) URLs, so that the calls
  // to one endpoint (a model's, every call of a research) are parsed once:
  // parsing through libcurl's URL API cost about 17,000 instructions a
  // request (bench/README.md, "thirteenth step").
  std::array<std::string, 8> checked_urls_;
  size_t next_checked_ = 0;
  std::set<std::pair<time_point, uint64_t>> timers_;
  // When libcurl wants to be called for its own timeouts, if at all.
  bool curl_timer_set_ = false;
  time_point curl_due_;
  std::vector<std::pair<uint64_t, CURLcode>> done_;
  std::vector<CURL*> free_handles_;
  // Smallest size of the free list since the last trim.
  size_t free_low_water_ = 0;
  time_point next_trim_;
};

std::shared_ptr<sdk::http_call>
curl_http_client::impl::start(sdk::http_request request,
                              std::shared_ptr<sdk::http_response_sink> sink) {
  auto id = next_id_++;
  auto call = std::make_shared<call_handle>(weak_from_this(), id);
  if (!sink)
    return call;
  auto job = std::make_unique<transfer>();
  job->owner = this;
  job->id = id;
  job->connect_timeout = request.connect_timeout.count() > 0 ? request.connect_timeout
                                                             : defaults_.connect_timeout;
  job->total_timeout = request.total_timeout.count() > 0 ? request.total_timeout
                                                         : defaults_.total_timeout;
  job->stall_timeout = request.stall_timeout.count() > 0 ? request.stall_timeout
                                                         : defaults_.stall_timeout;
  job->max_bytes = request.max_response_bytes > 0 ? request.max_response_bytes
                                                  : defaults_.max_response_bytes;
  job->max_redirects = request.max_redirects >= 0 ? request.max_redirects : defaults_.max_redirects;
  if (request.method.empty())
    request.method = "GET";
  for (auto& c : request.method)
    c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  job->url = request.url;
  job->req = std::move(request);
  job->sink = sink;
  if (!setup_error_.empty()) {
    sink->on_complete(make_error(sdk::errc::internal, job->describe() + ": " + setup_error_));
    return call;
  }
  {
    std::unique_lock<std::mutex> guard{mtx_};
    if (!stopped_) {
      ++started_;
      command cmd;
      cmd.job = std::move(job);
      post(std::move(cmd));
      return call;
    }
  }
  sink->on_complete(
    make_error(sdk::errc::cancelled, job->describe() + ": the HTTP client is shut down"));
  return call;
}

void curl_http_client::impl::run() {
  pthread_setname_np(pthread_self(), "quarry-http");
  {
    std::lock_guard<std::mutex> guard{mtx_};
    cpu_clock_valid_ = pthread_getcpuclockid(pthread_self(), &cpu_clock_) == 0;
  }
  std::vector<command> cmds;
  epoll_event events[max_events];
  auto stopping = false;
  int running = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      cmds.swap(queue_);
      stopping = stopped_;
    }
    for (auto& cmd : cmds) {
      if (cmd.job) {
        if (stopping) {
          auto& t = *cmd.job;
          transfers_.emplace(t.id, std::move(cmd.job));
          finish(t, make_error(sdk::errc::cancelled, t.describe() + ": the HTTP client shut down"));
        } else {
          add_transfer(std::move(cmd.job));
        }
      } else if (auto i = transfers_.find(cmd.id); i != transfers_.end()) {
        auto& t = *i->second;
        finish(t, make_error(sdk::errc::cancelled, t.describe() + ": cancelled"));
      }
    }
    cmds.clear();
    if (stopping)
      break;
    // libcurl's own timeouts (connects, new handles, its retries), then ours.
    if (curl_timer_set_ && clock_type::now() >= curl_due_) {
      curl_timer_set_ = false;
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      collect_done();
    }
    auto now = clock_type::now();
    check_timers();
    trim_free_handles(now);
    // Sleep until a socket is ready, a command arrives, curl's own timeout
    // or our nearest deadline.
    auto due = now + milliseconds{1000};
    if (!timers_.empty())
      due = std::min(due, timers_.begin()->first);
    if (curl_timer_set_)
      due = std::min(due, curl_due_);
    auto wait_ms = static_cast<int>(
      std::clamp<int64_t>(std::chrono::ceil<milliseconds>(due - now).count(), 0, 1000));
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!queue_.empty() || stopped_)
        wait_ms = 0;
    }
    auto n = epoll_wait(epoll_fd_, events, max_events, wait_ms);
    for (int i = 0; i < n; ++i) {
      auto fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count = 0;
        [[maybe_unused]] auto got = ::read(wake_fd_, &count, sizeof(count));
        continue;
      }
      curl_multi_socket_action(multi_, fd, curl_select_flags(events[i].events), &running);
    }
    if (n > 0)
      collect_done();
  }
  // Shutting down: fail everything still running.
  std::vector<uint64_t> ids;
  ids.reserve(transfers_.size());
  for (auto& [id, t] : transfers_)
    ids.push_back(id);
  for (auto id : ids) {
    auto i = transfers_.find(id);
    if (i == transfers_.end())
      continue;
    auto& t = *i->second;
    finish(t, make_error(sdk::errc::cancelled, t.describe() + ": the HTTP client shut down"));
  }
  for (auto* easy : free_handles_)
    curl_easy_cleanup(easy);
  free_handles_.clear();
  easy_idle_ = 0;
  std::lock_guard<std::mutex> guard{mtx_};
  curl_multi_cleanup(multi_);
  multi_ = nullptr;
  exited_ = true;
  final_cpu_ns_ = thread_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}

void curl_http_client::impl::collect_done() {
  // Collect all messages before handling any: removing a handle scans the
  // multi handle's message list.
  int left = 0;
  while (auto* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
    if (t != nullptr)
      done_.emplace_back(t->id, msg->data.result);
  }
  for (auto [id, rc] : done_)
    if (auto i = transfers_.find(id); i != transfers_.end())
      on_done(*i->second, rc);
  done_.clear();
}

int curl_http_client::impl::on_socket(CURL*, curl_socket_t fd, int what, void* userp,
                                      void* socketp) {
  auto& self = *static_cast<impl*>(userp);
  watch_curl_socket(self.multi_, self.epoll_fd_, fd, what, socketp, &self);
  return 0;
}

int curl_http_client::impl::on_curl_timer(CURLM*, long timeout_ms, void* userp) {
  auto& self = *static_cast<impl*>(userp);
  if (timeout_ms < 0) {
    self.curl_timer_set_ = false;
  } else {
    self.curl_timer_set_ = true;
    self.curl_due_ = clock_type::now() + milliseconds{timeout_ms};
  }
  return 0;
}

void curl_http_client::impl::add_transfer(std::unique_ptr<transfer> job) {
  auto& t = *job;
  transfers_.emplace(t.id, std::move(job));
  t.body_counted = t.req.body.size();
  body_bytes_ += t.body_counted;
  t.deadline = clock_type::now() + t.total_timeout;
  if (!t.url.empty()
      && std::find(checked_urls_.begin(), checked_urls_.end(), t.url) != checked_urls_.end()) {
    if (auto err = begin_hop(t))
      finish(t, std::move(*err));
    return;
  }
  auto parsed = fetch::parse_url(t.url);
  auto scheme = sdk::to_lower(t.url.substr(0, 8));
  auto* err = std::get_if<std::string>(&parsed);
  if (err != nullptr
      && (sdk::starts_with(scheme, "http://") || sdk::starts_with(scheme, "https://"))) {
    // A malformed HTTP URL, as libcurl would class it, with the reason.
    finish(t, make_error(sdk::errc::bad_request, t.describe() + ": " + *err));
    return;
  }
  if (err != nullptr
      || (std::get<fetch::url>(parsed).scheme != "http"
          && std::get<fetch::url>(parsed).scheme != "https")) {
    finish(t,
           make_error(sdk::errc::refused, t.describe() + ": only http and https URLs are allowed"));
    return;
  }
  if (t.url.size() <= 512) {
    checked_urls_[next_checked_] = t.url;
    next_checked_ = (next_checked_ + 1) % checked_urls_.size();
  }
  if (auto err = begin_hop(t))
    finish(t, std::move(*err));
}

std::optional<sdk::error> curl_http_client::impl::begin_hop(transfer& t) {
  t.request_sent = false;
  t.opened_socket = false;
  t.uploaded = 0;
  t.status = 0;
  t.headers.clear();
  t.redirecting = false;
  t.delivered = false;
  t.received = 0;
  t.last_activity = clock_type::now();
  if (t.easy == nullptr)
    t.easy = acquire_easy();
  if (t.easy == nullptr)
    return make_error(sdk::errc::internal, t.describe() + ": cannot create a curl handle");
  configure(t);
  if (curl_multi_add_handle(multi_, t.easy) != CURLM_OK)
    return make_error(sdk::errc::internal, t.describe() + ": cannot add the transfer");
  arm_timer(t);
  return std::nullopt;
}

void curl_http_client::impl::configure(transfer& t) {
  auto* e = t.easy;
  const auto& req = t.req;
  t.errbuf[0] = '\0';
  curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(e, CURLOPT_URL, t.url.c_str());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
                   accepts_event_stream(req) ? stream_receive_buffer_size : receive_buffer_size);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &impl::on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &impl::on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &impl::on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, &impl::on_prereq);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, &t);
  // Connect timeout, bounded by what is left of the total timeout.
  auto left = std::chrono::duration_cast<milliseconds>(t.deadline - clock_type::now());
  auto connect = std::min(t.connect_timeout, std::max(left, milliseconds{1}));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect.count()));
  if (t.max_bytes > 0)
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.max_bytes));
  // Settings: proxy (an empty string disables environment proxies), TLS,
  // user agent, content encodings.
  curl_easy_setopt(e, CURLOPT_PROXY, defaults_.proxy.c_str());
  if (!defaults_.no_proxy.empty())
    curl_easy_setopt(e, CURLOPT_NOPROXY, defaults_.no_proxy.c_str());
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, defaults_.verify_tls ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, defaults_.verify_tls ? 2L : 0L);
  if (!defaults_.ca_file.empty())
    curl_easy_setopt(e, CURLOPT_CAINFO, defaults_.ca_file.c_str());
  if (!defaults_.ca_path.empty())
    curl_easy_setopt(e, CURLOPT_CAPATH, defaults_.ca_path.c_str());
  if (!defaults_.user_agent.empty())
    curl_easy_setopt(e, CURLOPT_USERAGENT, defaults_.user_agent.c_str());
  if (!sdk::find_header(req.headers, "Accept-Encoding"))
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  // Method and body.
  const auto& method = req.method;
  auto has_body = !req.body.empty();
  if (method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (method == "GET" && !has_body) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    if (method == "POST")
      curl_easy_setopt(e, CURLOPT_POST, 1L);
    else
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (has_body || method == "POST" || method == "PUT" || method == "PATCH") {
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.data());
    }
    if (req.body.size() > large_upload) {
      curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &impl::on_progress);
      curl_easy_setopt(e, CURLOPT_XFERINFODATA, &t);
    }
  }
  // Header fields.
  if (t.header_list != nullptr) {
    curl_slist_free_all(t.header_list);
    t.header_list = nullptr;
  }
  std::string line;
  auto add = [&t](const std::string& x) {
    if (auto* next = curl_slist_append(t.header_list, x.c_str()))
      t.header_list = next;
  };
  for (const auto& [key, value] : req.headers) {
    line = key;
    if (value.empty()) {
      line += ';';
    } else {
      line += ": ";
      line += value;
    }
    add(line);
  }
  // Never wait for `100 Continue`.
  if (!sdk::find_header(req.headers, "Expect"))
    add("Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.header_list);
}

void curl_http_client::impl::let_go_of_body(transfer& t) {
  body_bytes_ -= t.body_counted;
  t.body_counted = 0;
  std::string{}.swap(t.req.body);
}

bool curl_http_client::impl::deliver_response(transfer& t) {
  t.delivered = true;
  // The final response began: no hop follows. Once the body was sent whole,
  // libcurl reads it no more (it sends a body again only for a request
  // that got no answer), so it is let go: a model's answer may stream for
  // minutes after its request text went out.
  if (!t.req.body.empty()) {
    curl_off_t sent = 0;
    if (curl_easy_getinfo(t.easy, CURLINFO_SIZE_UPLOAD_T, &sent) == CURLE_OK && sent >= 0
        && static_cast<uint64_t>(sent) >= t.req.body.size())
      let_go_of_body(t);
  }
  auto ok = false;
  try {
    ok = t.sink->on_response(t.status, t.headers);
  } catch (...) {
    t.abort = make_error(sdk::errc::internal, t.describe() + ": the response sink threw");
    return false;
  }
  if (!ok)
    t.abort = make_error(sdk::errc::cancelled, t.describe() + ": aborted by the response sink");
  return ok;
}

size_t curl_http_client::impl::on_header(char* buf, size_t size, size_t n, void* ud) {
  auto& t = *static_cast<transfer*>(ud);
  auto len = size * n;
  t.last_activity = clock_type::now();
  if (t.delivered)
    return len; // Trailers.
  auto line = sdk::trim(std::string_view{buf, len});
  if (iequals(line.substr(0, 5), "HTTP/")) {
    t.headers.clear();
    t.status = 0;
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      auto code = 0;
      for (auto i = sp + 1; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
        code = code * 10 + (line[i] - '0');
      t.status = code;
    }
    return len;
  }
  if (line.empty()) {
    // End of a header block.
    if (t.status == 0)
      t.status = response_code(t.easy);
    if (t.status >= 100 && t.status < 200) {
      t.headers.clear();
      return len;
    }
    if (t.req.follow_redirects && is_redirect_status(t.status)
        && sdk::find_header(t.headers, "Location")) {
      t.redirecting = true;
      return len;
    }
    return t.owner->deliver_response(t) ? len : 0;
  }
  if ((buf[0] == ' ' || buf[0] == '\t') && !t.headers.empty()) {
    auto& value = t.headers.back().second;
    value += ' ';
    value += line;
    return len;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos)
    return len;
  t.headers.emplace_back(std::string{sdk::trim(line.substr(0, colon))},
                         std::string{sdk::trim(line.substr(colon + 1))});
  return len;
}

size_t curl_http_client::impl::on_write(char* buf, size_t size, size_t n, void* ud) {
  auto& t = *static_cast<transfer*>(ud);
  auto len = size * n;
  t.last_activity = clock_type::now();
  t.received += static_cast<int64_t>(len);
  if (t.max_bytes > 0 && t.received > t.max_bytes) {
    t.abort = make_error(sdk::errc::too_large, t.describe() + ": the response exceeds "
                                                 + std::to_string(t.max_bytes) + " bytes");
    return 0;
  }
  if (t.redirecting)
    return len;
  if (!t.delivered) {
    if (t.status == 0)
      t.status = response_code(t.easy);
    if (!t.owner->deliver_response(t))
      return 0;
  }
  auto ok = false;
  try {
    ok = t.sink->on_data(std::string_view{buf, len});
  } catch (...) {
    t.abort = make_error(sdk::errc::internal, t.describe() + ": the response sink threw");
    return 0;
  }
  if (!ok) {
    t.abort = make_error(sdk::errc::cancelled, t.describe() + ": aborted by the response sink");
    return 0;
  }
  return len;
}

std::optional<sdk::error> curl_http_client::impl::check_connect(transfer& t, std::string_view ip,
                                                                uint16_t port) {
  if (!t.req.on_connect)
    return std::nullopt;
  try {
    return t.req.on_connect(ip, port);
  } catch (...) {
    return make_error(sdk::errc::internal, t.describe() + ": the connect hook threw");
  }
}

curl_socket_t curl_http_client::impl::on_open_socket(void* ud, curlsocktype purpose,
                                                     curl_sockaddr* addr) {
  auto& t = *static_cast<transfer*>(ud);
  if (t.abort)
    return CURL_SOCKET_BAD;
  if (purpose == CURLSOCKTYPE_IPCXN && t.req.on_connect) {
    char ip[INET6_ADDRSTRLEN] = {0};
    uint16_t port = 0;
    if (addr->family == AF_INET) {
      sockaddr_in sin{};
      std::memcpy(&sin, &addr->addr, sizeof(sin));
      inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
      port = ntohs(sin.sin_port);
    } else if (addr->family == AF_INET6) {
      sockaddr_in6 sin6{};
      std::memcpy(&sin6, &addr->addr, sizeof(sin6));
      inet_ntop(AF_INET6, &sin6.sin6_addr, ip, sizeof(ip));
      port = ntohs(sin6.sin6_port);
    }
    if (auto err = check_connect(t, ip, port)) {
      t.abort = std::move(err);
      return CURL_SOCKET_BAD;
    }
  }
  auto fd = ::socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
  if (fd >= 0) {
    t.opened_socket = true;
    ++t.owner->connections_opened_;
  }
  return fd;
}

int curl_http_client::impl::on_prereq(void* ud, char* primary_ip, char*, int primary_port, int) {
  auto& t = *static_cast<transfer*>(ud);
  // A reused connection was vetted when it was opened, but possibly by
  // another request's hook: check it again.
  if (!t.opened_socket && t.req.on_connect && primary_ip != nullptr) {
    if (auto err = check_connect(t, primary_ip, static_cast<uint16_t>(primary_port))) {
      t.abort = std::move(err);
      return CURL_PREREQFUNC_ABORT;
    }
  }
  t.request_sent = true;
  t.last_activity = clock_type::now();
  return CURL_PREREQFUNC_OK;
}

int curl_http_client::impl::on_progress(void* ud, curl_off_t, curl_off_t, curl_off_t,
                                        curl_off_t ulnow) {
  auto& t = *static_cast<transfer*>(ud);
  if (ulnow != t.uploaded) {
    t.uploaded = ulnow;
    t.last_activity = clock_type::now();
  }
  return 0;
}

void curl_http_client::impl::on_done(transfer& t, CURLcode rc) {
  if (t.abort) {
    auto err = std::move(*t.abort);
    t.abort.reset();
    finish(t, std::move(err));
    return;
  }
  if (rc != CURLE_OK) {
    finish(t, classify(t, rc));
    return;
  }
  if (t.redirecting) {
    follow_redirect(t);
    return;
  }
  if (!t.delivered) {
    if (t.status == 0)
      t.status = response_code(t.easy);
    if (!deliver_response(t)) {
      auto err = std::move(*t.abort);
      t.abort.reset();
      finish(t, std::move(err));
      return;
    }
  }
  finish(t, std::nullopt);
}

void curl_http_client::impl::follow_redirect(transfer& t) {
  char* location = nullptr;
  curl_easy_getinfo(t.easy, CURLINFO_REDIRECT_URL, &location);
  if (location == nullptr || *location == '\0') {
    finish(t,
           make_error(sdk::errc::invalid_response, t.describe() + ": unusable redirect location"));
    return;
  }
  std::string target = location;
  if (!fetch::is_http_url(target)) {
    finish(t, make_error(sdk::errc::refused, t.describe() + ": redirect to a non-HTTP URL ("
                                               + fetch::redact_url(target) + ")"));
    return;
  }
  if (t.hops + 1 > t.max_redirects) {
    finish(t, make_error(sdk::errc::too_many_redirects, t.describe() + ": more than "
                                                          + std::to_string(t.max_redirects)
                                                          + " redirects"));
    return;
  }
  sdk::redirect_hop hop;
  hop.from = t.url;
  hop.to = target;
  hop.status = t.status;
  hop.hop = t.hops + 1;
  if (t.req.on_redirect) {
    std::optional<sdk::error> err;
    try {
      err = t.req.on_redirect(hop);
    } catch (...) {
      err = make_error(sdk::errc::internal, t.describe() + ": the redirect hook threw");
    }
    if (err) {
      finish(t, std::move(*err));
      return;
    }
  }
  ++t.hops;
  ++redirects_;
  // 301/302 turn POST into GET, 303 turns everything but HEAD into GET.
  auto to_get = (t.status == 303 && t.req.method != "HEAD")
                || ((t.status == 301 || t.status == 302) && t.req.method == "POST");
  auto& hs = t.req.headers;
  if (to_get) {
    t.req.method = "GET";
    let_go_of_body(t);
    hs.erase(std::remove_if(hs.begin(), hs.end(),
                            [](const auto& x) {
                              return iequals(x.first, "Content-Type")
                                     || iequals(x.first, "Content-Length");
                            }),
             hs.end());
  }
  if (origin_of(t.url) != origin_of(target))
    hs.erase(std::remove_if(hs.begin(), hs.end(),
                            [](const auto& x) { return is_sensitive_header(x.first); }),
             hs.end());
  curl_multi_remove_handle(multi_, t.easy);
  curl_easy_reset(t.easy);
  disarm_timer(t);
  t.url = std::move(target);
  if (auto err = begin_hop(t))
    finish(t, std::move(*err));
}

void curl_http_client::impl::finish(transfer& t, std::optional<sdk::error> failure) {
  if (t.easy != nullptr) {
    curl_multi_remove_handle(multi_, t.easy);
    release_easy(t.easy);
    t.easy = nullptr;
  }
  if (t.header_list != nullptr) {
    curl_slist_free_all(t.header_list);
    t.header_list = nullptr;
  }
  disarm_timer(t);
  let_go_of_body(t);
  auto i = transfers_.find(t.id);
  if (i == transfers_.end())
    return;
  auto keep = std::move(i->second);
  transfers_.erase(i);
  auto sink = std::move(keep->sink);
  ++completed_;
  try {
    sink->on_complete(std::move(failure));
  } catch (...) {
    // nop: nobody is left to tell
  }
}

void curl_http_client::impl::arm_timer(transfer& t) {
  disarm_timer(t);
  // Before the request is sent, `last_activity` is the start of the hop (or
  // of the last check): the check then finds out whether the request went
  // out meanwhile and measures the stall from that moment.
  auto at = t.deadline;
  if (t.stall_timeout.count() > 0)
    at = std::min(at, t.last_activity + t.stall_timeout);
  t.timer_at = at;
  t.timer_armed = true;
  timers_.emplace(at, t.id);
}

void curl_http_client::impl::disarm_timer(transfer& t) {
  if (t.timer_armed) {
    timers_.erase({t.timer_at, t.id});
    t.timer_armed = false;
  }
}

void curl_http_client::impl::check_timers() {
  auto now = clock_type::now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto id = timers_.begin()->second;
    timers_.erase(timers_.begin());
    auto i = transfers_.find(id);
    if (i == transfers_.end())
      continue;
    auto& t = *i->second;
    t.timer_armed = false;
    if (now >= t.deadline) {
      finish(t,
             make_error(sdk::errc::timeout, t.describe() + ": no complete response within "
                                              + std::to_string(t.total_timeout.count()) + " ms"));
      continue;
    }
    if (t.stall_timeout.count() > 0 && now - t.last_activity >= t.stall_timeout) {
      if (t.request_sent) {
        finish(t,
               make_error(sdk::errc::stall, t.describe() + ": no data received for "
                                              + std::to_string(t.stall_timeout.count()) + " ms"));
        continue;
      }
      // Still connecting (the connect timeout covers that): look again later.
      t.last_activity = now;
    }
    arm_timer(t);
  }
}

CURL* curl_http_client::impl::acquire_easy() {
  if (!free_handles_.empty()) {
    auto* result = free_handles_.back();
    free_handles_.pop_back();
    free_low_water_ = std::min(free_low_water_, free_handles_.size());
    easy_idle_ = free_handles_.size();
    return result;
  }
  free_low_water_ = 0;
  auto* result = curl_easy_init();
  if (result != nullptr)
    ++easy_created_;
  return result;
}

void curl_http_client::impl::release_easy(CURL* easy) {
  curl_easy_reset(easy);
  // The reset turned signals back on; cleanup must not touch them either.
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  if (free_handles_.size() < max_free_handles)
    free_handles_.push_back(easy);
  else
    curl_easy_cleanup(easy);
  easy_idle_ = free_handles_.size();
}

void curl_http_client::impl::trim_free_handles(time_point now) {
  if (now < next_trim_)
    return;
  next_trim_ = now + trim_period;
  // Handles that stayed in the free list for the whole period are surplus.
  auto surplus = std::min(free_low_water_, free_handles_.size());
  for (size_t i = 0; i < surplus; ++i) {
    curl_easy_cleanup(free_handles_.back());
    free_handles_.pop_back();
  }
  free_low_water_ = free_handles_.size();
  easy_idle_ = free_handles_.size();
}

sdk::error curl_http_client::impl::classify(transfer& t, CURLcode rc) const {
  auto code = sdk::errc::internal;
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      code = sdk::errc::timeout;
      break;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR:
    case CURLE_PROXY:
    case CURLE_SEND_FAIL_REWIND:
      code = sdk::errc::network;
      break;
    case CURLE_FILESIZE_EXCEEDED:
      code = sdk::errc::too_large;
      break;
    case CURLE_TOO_MANY_REDIRECTS:
      code = sdk::errc::too_many_redirects;
      break;
    case CURLE_UNSUPPORTED_PROTOCOL:
      // Before sending: a scheme we do not speak. After: an HTTP/0.9 answer.
      code = t.request_sent ? sdk::errc::invalid_response : sdk::errc::refused;
      break;
    case CURLE_URL_MALFORMAT:
      code = sdk::errc::bad_request;
      break;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
      code = sdk::errc::invalid_response;
      break;
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_WRITE_ERROR:
      code = sdk::errc::cancelled;
      break;
    default:
      break;
  }
  std::string detail = t.errbuf[0] != '\0' ? t.errbuf : curl_easy_strerror(rc);
  if (code == sdk::errc::timeout && !t.request_sent)
    detail = "no connection within " + std::to_string(t.connect_timeout.count()) + " ms (" + detail
             + ")";
  else if (code == sdk::errc::too_large)
    detail = "the response exceeds " + std::to_string(t.max_bytes) + " bytes";
  return make_error(code, t.describe() + ": " + detail);
}

// -- curl_http_client ---------------------------------------------------------

curl_http_client::curl_http_client(const core::http_settings& defaults)
  : impl_(std::make_shared<impl>(defaults)) {
  impl_->launch();
}

curl_http_client::~curl_http_client() {
  shutdown();
}

std::shared_ptr<sdk::http_call>
curl_http_client::start(sdk::http_request request, std::shared_ptr<sdk::http_response_sink> sink) {
  return impl_->start(std::move(request), std::move(sink));
}

void curl_http_client::shutdown() {
  impl_->shutdown();
}

http_client_stats curl_http_client::stats() const {
  return impl_->stats();
}

// -- fetch --------------------------------------------------------------------

namespace {

// Collects a whole response and wakes up the waiting caller.
class collecting_sink : public sdk::http_response_sink {
public:
  bool on_response(int status, const sdk::http_headers& headers) override {
    result.status = status;
    result.headers = headers;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    result.body.append(bytes.data(), bytes.size());
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    result.failure = std::move(failure);
    done.set_value();
  }

  http_response result;
  std::promise<void> done;
};

} // namespace

http_response fetch(sdk::http_client& client, sdk::http_request request) {
  auto sink = std::make_shared<collecting_sink>();
  auto finished = sink->done.get_future();
  client.start(std::move(request), sink);
  finished.wait();
  return std::move(sink->result);
}

} // namespace quarry::host
