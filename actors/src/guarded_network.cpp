// Quarry's multiplexer for CAF's middleman: every TCP connection of the BASP
// broker (accepted by a published port, or opened to another node) is a
// guarded scribe that reads the BASP headers before the broker does.
//
// CAF 0.17.6 reserves whatever payload a header announces
// (`configure_read(receive_policy::exactly(payload_len))`), before and after
// the handshake, keeps a connection that never sends a byte forever, and
// dereferences a null payload for a handshake header announcing none. The
// scribe therefore closes the connection, with one log line, when a header
//  - announces more than 64 KiB before the handshake, or more than
//    `cluster.max_message_size` after it,
//  - is anything but a handshake before the handshake, or
//  - is a handshake without payload;
// and the multiplexer closes every connection whose handshake has not been
// accepted by the broker `cluster.handshake_timeout` after it was opened, and
// every connection past its handshake on which no complete header or payload
// arrived for `cluster.heartbeat_timeout` (a timerfd in the event loop, so no
// thread waits anywhere).
//
// The second is CAF's own connection timeout (`middleman.connection-timeout`),
// done here because CAF 0.17.6 gets it wrong for outgoing connections: the
// broker starts their silence at the clock's epoch and only updates it on the
// first read, so its next heartbeat tick closes a connection whose TLS and BASP
// handshakes take longer than the time to that tick (`connection_timeout`),
// and the first connect to a worker over a slow link never succeeds.
//
// With cluster certificates the scribe speaks TLS itself (a caf::openssl
// session, the same code and settings as caf::openssl's own scribes), so TLS
// connections follow the same rules and the TLS handshake counts against the
// handshake timeout.

#include "guarded_network.hpp"

#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/io/abstract_broker.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/event_handler.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/receive_policy.hpp>
#include <caf/io/scribe.hpp>
#include <caf/openssl/session.hpp>
#include <caf/policy/tcp.hpp>
#include <caf/sec.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace quarry::actors::net {

namespace {

namespace io = caf::io;
namespace network = caf::io::network;
using network::native_socket;
using network::rw_state;
using std::chrono::steady_clock;

/// `500ms`, `10s`, `1.5s`.
std::string duration_text(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms < 1000)
    return std::to_string(ms) + "ms";
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + "s";
  auto text = std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 + 1000).substr(1);
  while (text.back() == '0')
    text.pop_back();
  return text + "s";
}

/// `HOST:PORT` of the other end of `fd` (`[HOST]:PORT` for IPv6), or `?`.
std::string peer_of(native_socket fd) {
  auto host = network::remote_addr_of_fd(fd);
  auto port = network::remote_port_of_fd(fd);
  if (!host || !port)
    return "?";
  auto text = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
  return text + ":" + std::to_string(*port);
}

/// Reads a BASP header's operation and payload length (big endian, at
/// offsets 0 and 4 of the 32 bytes; see caf/io/basp/header.hpp).
struct header_view {
  uint8_t operation = 0;
  uint32_t payload_len = 0;
};

header_view view_header(const void* data) {
  auto b = static_cast<const unsigned char*>(data);
  header_view out;
  out.operation = b[0];
  out.payload_len = (uint32_t{b[4]} << 24) | (uint32_t{b[5]} << 16) | (uint32_t{b[6]} << 8)
                    | uint32_t{b[7]};
  return out;
}

bool is_handshake(uint8_t operation) {
  return operation == static_cast<uint8_t>(io::basp::message_type::server_handshake)
         || operation == static_cast<uint8_t>(io::basp::message_type::client_handshake);
}

/// A TLS session as the stream policy of a scribe (what caf::openssl's own
/// scribes use). Without a session (it could not be made) every read and
/// write fails, which closes the connection.
struct tls_policy {
  explicit tls_policy(caf::openssl::session_ptr ptr) : session(std::move(ptr)) {
    // nop
  }

  rw_state read_some(size_t& result, native_socket fd, void* buf, size_t len) {
    result = 0;
    return session ? session->read_some(result, fd, buf, len) : rw_state::failure;
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf, size_t len) {
    result = 0;
    return session ? session->write_some(result, fd, buf, len) : rw_state::failure;
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return session && session->must_read_more(fd, threshold);
  }

  caf::openssl::session_ptr session;
};

class guarded_multiplexer;

// -- the scribe ---------------------------------------------------------------

/// A connection of the BASP broker that checks every BASP header before the
/// broker reads it. Runs in the multiplexer's thread once launched.
class guarded_scribe : public io::scribe {
public:
  guarded_scribe(guarded_multiplexer& mpx, native_socket fd, std::string peer, bool outgoing,
                 bool tls);

  // -- scribe interface -------------------------------------------------------

  void configure_read(io::receive_policy::config config) override;

  void ack_writes(bool enable) override {
    stream().ack_writes(enable);
  }

  std::vector<char>& wr_buf() override {
    return stream().wr_buf();
  }

  std::vector<char>& rd_buf() override {
    return stream().rd_buf();
  }

  void graceful_shutdown() override {
    stream().graceful_shutdown();
    detach(&stream().backend(), false);
  }

  void flush() override {
    stream().flush(this);
  }

  std::string addr() const override {
    auto x = network::remote_addr_of_fd(fd_);
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = network::remote_port_of_fd(fd_);
    return x ? *x : uint16_t{0};
  }

  void add_to_loop() override {
    stream().activate(this);
  }

  void remove_from_loop() override {
    stream().passivate();
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t num_bytes) override;

  // -- the guard --------------------------------------------------------------

  /// Nothing is left to watch: the handshake was accepted or the connection
  /// is gone.
  bool settled() const noexcept {
    return handshake_done_ || dropped_ || (launched_ && detached());
  }

  steady_clock::time_point deadline() const noexcept {
    return deadline_;
  }

  bool handshake_done() const noexcept {
    return handshake_done_;
  }

  /// When the last complete header or payload arrived (or the handshake
  /// was accepted).
  steady_clock::time_point last_read() const noexcept {
    return last_read_;
  }

  /// Gone: dropped, or closed by either side after it was launched.
  bool gone() const noexcept {
    return dropped_ || (launched_ && detached());
  }

  /// Closes the connection (the broker sees it closed) and logs `why`.
  void drop(caf::execution_unit* ctx, const std::string& why);

protected:
  virtual network::stream& stream() = 0;

  /// Leaves the broker (closed by either side): the multiplexer lets go of
  /// it soon, so that its descriptor is closed without waiting for a tick.
  void detach_from(io::abstract_broker* ptr) override;

private:
  /// The largest payload accepted now.
  uint32_t bound() const noexcept;

  /// Why a header of `operation` announcing `len` bytes closes the
  /// connection, or empty.
  std::string refusal(uint8_t operation, uint32_t len) const;

  void launch();

  guarded_multiplexer& mpx_;
  native_socket fd_;
  /// `from HOST:PORT` or `to HOST:PORT`.
  std::string peer_;
  bool tls_;
  steady_clock::time_point deadline_;
  steady_clock::time_point last_read_;
  bool launched_ = false;
  bool handshake_done_ = false;
  bool dropped_ = false;
  /// The next read is a payload (of a message of `operation_`).
  bool in_payload_ = false;
  uint8_t operation_ = 0;
  /// Inside consume (the broker runs): a drop waits until it returns.
  bool consuming_ = false;
  std::string drop_after_consume_;
};

template <class Policy>
class scribe_on final : public guarded_scribe {
public:
  template <class... Ts>
  scribe_on(guarded_multiplexer& mpx, native_socket fd, std::string peer, bool outgoing, bool tls,
            Ts&&... xs);

protected:
  network::stream& stream() override {
    return stream_;
  }

private:
  network::stream_impl<Policy> stream_;
};

// -- the multiplexer ----------------------------------------------------------

/// Wakes the multiplexer's loop periodically while connections are watched
/// (a timerfd).
class tick_source final : public network::event_handler {
public:
  tick_source(guarded_multiplexer& mpx, native_socket fd);

  void handle_event(network::operation op) override;

  void removed_from_loop(network::operation) override {
    // nop
  }

  void graceful_shutdown() override {
    // nop
  }

private:
  guarded_multiplexer& mpx_;
};

class guarded_multiplexer final : public network::default_multiplexer {
public:
  explicit guarded_multiplexer(caf::actor_system* sys);

  ~guarded_multiplexer() override;

  /// A connection accepted by a published port.
  io::scribe_ptr new_scribe(native_socket fd) override;

  /// A connection to another node.
  caf::expected<io::scribe_ptr> new_tcp_scribe(const std::string& host, uint16_t port) override;

  supervisor_ptr make_supervisor() override;

  const connection_rules& rules() const noexcept {
    return rules_;
  }

  /// Watches `ptr` until it is gone: its handshake deadline, then (with an
  /// idle timeout) its silence. Called in the multiplexer's thread.
  void watch(caf::intrusive_ptr<guarded_scribe> ptr);

  /// Closes the connections past their handshake deadline or silent past
  /// the idle timeout, and lets go of those that are gone (or settled, when
  /// there is no idle timeout). Multiplexer's thread.
  void sweep();

  /// Runs a sweep soon (once, however often it is asked before it runs).
  /// Multiplexer's thread.
  void sweep_soon();

  /// Stops watching (shutdown). Multiplexer's thread.
  void stop_watching();

private:
  void arm(bool on);

  caf::openssl::session_ptr tls_session(native_socket fd, bool accepted, const std::string& peer);

  connection_rules rules_;
  std::unique_ptr<tick_source> ticks_;
  bool armed_ = false;
  bool sweep_queued_ = false;
  std::vector<caf::intrusive_ptr<guarded_scribe>> watched_;
};

/// Keeps the loop alive like the default supervisor and, when destroyed,
/// takes the tick source out of the loop first (else the loop never ends).
class guarded_supervisor final : public network::multiplexer::supervisor {
public:
  guarded_supervisor(guarded_multiplexer& mpx, network::multiplexer::supervisor_ptr inner)
    : mpx_(mpx), inner_(std::move(inner)) {
    // nop
  }

  ~guarded_supervisor() override {
    auto* mpx = &mpx_;
    mpx->dispatch([mpx] { mpx->stop_watching(); });
    // Queued after the line above: ends the loop.
    inner_.reset();
  }

private:
  guarded_multiplexer& mpx_;
  network::multiplexer::supervisor_ptr inner_;
};

// -- scribe implementation ----------------------------------------------------

guarded_scribe::guarded_scribe(guarded_multiplexer& mpx, native_socket fd, std::string peer,
                               bool outgoing, bool tls)
  : io::scribe(network::conn_hdl_from_socket(fd)),
    mpx_(mpx),
    fd_(fd),
    peer_((outgoing ? "to " : "from ") + peer),
    tls_(tls),
    deadline_(steady_clock::now() + mpx.rules().handshake_timeout),
    last_read_(steady_clock::now()) {
  // nop
}

template <class Policy>
template <class... Ts>
scribe_on<Policy>::scribe_on(guarded_multiplexer& mpx, native_socket fd, std::string peer,
                             bool outgoing, bool tls, Ts&&... xs)
  : guarded_scribe(mpx, fd, std::move(peer), outgoing, tls),
    stream_(mpx, fd, std::forward<Ts>(xs)...) {
  // nop
}

uint32_t guarded_scribe::bound() const noexcept {
  return handshake_done_ ? mpx_.rules().max_message_size : handshake_payload_limit;
}

std::string guarded_scribe::refusal(uint8_t operation, uint32_t len) const {
  if (!handshake_done_ && !is_handshake(operation))
    return "a BASP message of type " + std::to_string(operation) + " before the handshake";
  if (is_handshake(operation) && len == 0)
    return "a handshake without payload";
  if (len > bound()) {
    if (!handshake_done_)
      return "it announced a " + std::to_string(len)
             + "-byte message before the handshake (at most "
             + std::to_string(handshake_payload_limit) + " bytes)";
    return "it announced a " + std::to_string(len) + "-byte message (cluster.max_message_size: "
           + std::to_string(mpx_.rules().max_message_size) + " bytes)";
  }
  return {};
}

void guarded_scribe::configure_read(io::receive_policy::config config) {
  // The headers were checked in consume; this only catches what would slip
  // past that check: never reserve more than the bound.
  if (config.second > bound()) {
    auto why = "a read of " + std::to_string(config.second) + " bytes (at most "
               + std::to_string(bound()) + ")";
    if (consuming_) {
      drop_after_consume_ = why;
    } else {
      caf::intrusive_ptr<guarded_scribe> self{this};
      auto* mpx = &mpx_;
      mpx_.post([self, mpx, why] { self->drop(mpx, why); });
    }
    return;
  }
  stream().configure_read(config);
  if (!launched_)
    launch();
}

void guarded_scribe::launch() {
  launched_ = true;
  stream().start(this);
  // A TLS session still has to call SSL_accept or SSL_connect: a first
  // (empty) write drives it, as in caf::openssl.
  if (tls_)
    stream().force_empty_write(this);
  mpx_.watch(this);
}

bool guarded_scribe::consume(caf::execution_unit* ctx, const void* buf, size_t num_bytes) {
  if (dropped_ || detached())
    return false;
  auto was_payload = in_payload_;
  auto operation = operation_;
  if (!in_payload_) {
    if (num_bytes != io::basp::header_size) {
      drop(ctx, "a read of " + std::to_string(num_bytes) + " bytes where a BASP header belongs");
      return false;
    }
    auto hdr = view_header(buf);
    if (auto why = refusal(hdr.operation, hdr.payload_len); !why.empty()) {
      drop(ctx, why);
      return false;
    }
    if (hdr.payload_len > 0) {
      in_payload_ = true;
      operation_ = hdr.operation;
    }
  } else {
    in_payload_ = false;
  }
  consuming_ = true;
  auto result = io::scribe::consume(ctx, buf, num_bytes);
  consuming_ = false;
  if (!drop_after_consume_.empty()) {
    drop(ctx, drop_after_consume_);
    return false;
  }
  // The broker accepted a handshake if it kept the connection open.
  if (was_payload && is_handshake(operation) && result && !detached())
    handshake_done_ = true;
  last_read_ = steady_clock::now();
  return result;
}

void guarded_scribe::detach_from(io::abstract_broker* ptr) {
  io::scribe::detach_from(ptr);
  if (launched_ && (!handshake_done_ || mpx_.rules().idle_timeout.count() > 0))
    mpx_.sweep_soon();
}

void guarded_scribe::drop(caf::execution_unit* ctx, const std::string& why) {
  if (dropped_)
    return;
  dropped_ = true;
  if (detached())
    return;
  spdlog::warn("cluster: closed the connection {}: {}", peer_, why);
  // The peer sees the end at once, whoever still holds this scribe.
  ::shutdown(fd_, SHUT_RDWR);
  // As on a socket error: the broker gets connection_closed_msg.
  detach(ctx, true);
}

// -- tick source --------------------------------------------------------------

tick_source::tick_source(guarded_multiplexer& mpx, native_socket fd)
  : network::event_handler(mpx, fd), mpx_(mpx) {
  // nop
}

void tick_source::handle_event(network::operation op) {
  if (op != network::operation::read)
    return;
  uint64_t expirations = 0;
  auto n = ::read(fd(), &expirations, sizeof(expirations));
  static_cast<void>(n);
  mpx_.sweep();
}

// -- multiplexer implementation -----------------------------------------------

connection_rules rules_of(caf::actor_system* sys) {
  connection_rules out;
  if (auto* holder = dynamic_cast<const connection_rules_holder*>(&sys->config()))
    out = holder->rules;
  out.max_message_size = std::max(out.max_message_size, handshake_payload_limit);
  out.idle_timeout = std::max(out.idle_timeout, std::chrono::milliseconds{0});
  return out;
}

guarded_multiplexer::guarded_multiplexer(caf::actor_system* sys)
  : network::default_multiplexer(sys), rules_(rules_of(sys)) {
  auto fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) {
    spdlog::error("cluster: no timer for handshake deadlines (timerfd_create failed): "
                  "connections that never finish their handshake stay open");
    return;
  }
  ticks_ = std::make_unique<tick_source>(*this, fd);
}

guarded_multiplexer::~guarded_multiplexer() {
  // The loop has ended (or never ran): nothing else touches these.
  watched_.clear();
}

io::scribe_ptr guarded_multiplexer::new_scribe(native_socket fd) {
  network::keepalive(fd, true);
  auto peer = peer_of(fd);
  if (!rules_.tls)
    return caf::make_counted<scribe_on<caf::policy::tcp>>(*this, fd, std::move(peer), false, false);
  network::nonblocking(fd, true);
  auto session = tls_session(fd, true, peer);
  return caf::make_counted<scribe_on<tls_policy>>(*this, fd, std::move(peer), false, true,
                                                  std::move(session));
}

caf::expected<io::scribe_ptr> guarded_multiplexer::new_tcp_scribe(const std::string& host,
                                                                  uint16_t port) {
  auto fd = network::new_tcp_connection(host, port);
  if (!fd)
    return std::move(fd.error());
  network::keepalive(*fd, true);
  auto peer = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  peer += ":" + std::to_string(port);
  if (!rules_.tls)
    return io::scribe_ptr{
      caf::make_counted<scribe_on<caf::policy::tcp>>(*this, *fd, std::move(peer), true, false)};
  network::nonblocking(*fd, true);
  auto session = tls_session(*fd, false, peer);
  if (!session) {
    network::close_socket(*fd);
    return caf::make_error(caf::sec::cannot_connect_to_node);
  }
  return io::scribe_ptr{caf::make_counted<scribe_on<tls_policy>>(*this, *fd, std::move(peer), true,
                                                                 true, std::move(session))};
}

caf::openssl::session_ptr guarded_multiplexer::tls_session(native_socket fd, bool accepted,
                                                           const std::string& peer) {
  try {
    if (auto ptr = caf::openssl::make_session(system(), fd, accepted))
      return ptr;
  } catch (const std::exception& e) {
    spdlog::warn("cluster: no TLS session for the connection {} {}: {}", accepted ? "from" : "to",
                 peer, e.what());
    return nullptr;
  }
  spdlog::warn("cluster: no TLS session for the connection {} {}", accepted ? "from" : "to", peer);
  return nullptr;
}

network::multiplexer::supervisor_ptr guarded_multiplexer::make_supervisor() {
  if (ticks_) {
    auto* ticks = ticks_.get();
    dispatch([this, ticks] { add(network::operation::read, ticks->fd(), ticks); });
  }
  return supervisor_ptr{new guarded_supervisor(*this, default_multiplexer::make_supervisor())};
}

void guarded_multiplexer::watch(caf::intrusive_ptr<guarded_scribe> ptr) {
  if (!ticks_)
    return;
  watched_.push_back(std::move(ptr));
  arm(true);
}

void guarded_multiplexer::sweep() {
  auto now = steady_clock::now();
  auto idle = rules_.idle_timeout;
  std::vector<std::pair<caf::intrusive_ptr<guarded_scribe>, bool>> expired;
  auto last = std::remove_if(watched_.begin(), watched_.end(),
                             [&](const caf::intrusive_ptr<guarded_scribe>& s) {
                               if (s->gone() || (idle.count() == 0 && s->settled()))
                                 return true;
                               if (!s->handshake_done()) {
                                 if (now < s->deadline())
                                   return false;
                                 expired.emplace_back(s, true);
                                 return true;
                               }
                               // Silent for longer than the timeout: a
                               // peer whose heartbeats come exactly that
                               // often stays.
                               if (now - s->last_read() <= idle)
                                 return false;
                               expired.emplace_back(s, false);
                               return true;
                             });
  watched_.erase(last, watched_.end());
  for (auto& [s, in_handshake] : expired)
    s->drop(this, in_handshake ? "no handshake within " + duration_text(rules_.handshake_timeout)
                               : "nothing received for " + duration_text(idle)
                                   + " (cluster.heartbeat_timeout)");
  if (watched_.empty())
    arm(false);
}

void guarded_multiplexer::sweep_soon() {
  if (sweep_queued_ || watched_.empty())
    return;
  sweep_queued_ = true;
  post([this] {
    sweep_queued_ = false;
    sweep();
  });
}

void guarded_multiplexer::stop_watching() {
  if (ticks_) {
    arm(false);
    del(network::operation::read, ticks_->fd(), ticks_.get());
  }
  watched_.clear();
}

void guarded_multiplexer::arm(bool on) {
  if (!ticks_ || armed_ == on)
    return;
  armed_ = on;
  // A deadline is seen at most a quarter of the timeout (and 1 s) late.
  auto shortest = rules_.handshake_timeout;
  if (rules_.idle_timeout.count() > 0)
    shortest = std::min(shortest, rules_.idle_timeout);
  auto period = std::clamp(shortest / 4, std::chrono::milliseconds{10},
                           std::chrono::milliseconds{1000});
  itimerspec spec{};
  if (on) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(period).count();
    spec.it_interval.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    spec.it_interval.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    spec.it_value = spec.it_interval;
  }
  ::timerfd_settime(ticks_->fd(), 0, &spec, nullptr);
}

} // namespace

void load_guarded_middleman(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman, guarded_multiplexer>();
}

} // namespace quarry::actors::net
