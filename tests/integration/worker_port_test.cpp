// What a stranger can do to a worker's port, with real sockets against a real
// `quarry worker` (docs/cluster.md, "What a listening port accepts"): a BASP
// header announcing 4 GiB before the handshake (the worker runs with a
// 2.5 GB address space limit, so reserving it would kill it), a length that
// lies, a flood of connections that never say anything, and garbage after a
// valid handshake. After each, a real `quarry research` still places its
// agent on the worker.

#include "cluster_support.hpp"
#include "research_script.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include "quarry/cluster/messages.hpp"
#include "quarry/cluster/register.hpp"

#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>
#include <caf/node_id.hpp>
#include <caf/openssl/all.hpp>

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace worker_port_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace std::chrono_literals;
using test::cluster::cluster_fixture;

namespace {

/// BASP operations (caf/io/basp/message_type.hpp).
constexpr uint8_t server_handshake = 0x00;
constexpr uint8_t client_handshake = 0x01;
constexpr uint8_t direct_message = 0x02;
constexpr uint8_t heartbeat = 0x06;
/// The BASP version of CAF 0.17 (caf/io/basp/version.hpp).
constexpr uint64_t basp_version = 3;

void put_be(std::string& out, uint64_t x, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out += static_cast<char>((x >> (8 * i)) & 0xFF);
}

/// A BASP header: operation, two padding bytes, flags, payload length,
/// operation data, source and destination actor (big endian, 32 bytes).
std::string basp_header(uint8_t operation, uint32_t payload_len, uint64_t operation_data = 0,
                        uint64_t source = 0, uint64_t dest = 0) {
  std::string out;
  out += static_cast<char>(operation);
  out += std::string(3, '\0');
  put_be(out, payload_len, 4);
  put_be(out, operation_data, 8);
  put_be(out, source, 8);
  put_be(out, dest, 8);
  return out;
}

/// A client handshake of a made-up node (`n` picks its host id): what a
/// CAF client sends first.
std::string client_hello(uint8_t n) {
  caf::node_id::default_data::host_id_type host{};
  host.fill(n);
  auto node = caf::make_node_id(4242u + n, host);
  std::vector<char> payload;
  caf::binary_serializer sink{nullptr, payload};
  REQUIRE_FALSE(sink(node));
  return basp_header(client_handshake, static_cast<uint32_t>(payload.size()))
         + std::string(payload.begin(), payload.end());
}

/// A socket connected to `address` (`127.0.0.1:PORT`).
int connect_to(const std::string& address) {
  auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  REQUIRE(inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) == 1);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0)
      return; // The worker closed it already: what some tests want.
    done += static_cast<size_t>(n);
  }
}

/// What arrives on `fd` within `wait` (or until it ends).
std::string receive_for(int fd, std::chrono::milliseconds wait) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return out;
    char buf[4096];
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

/// The worker's server handshake (header and payload), read off a fresh
/// connection.
std::string server_hello(int fd) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got.size() < 32 && std::chrono::steady_clock::now() < deadline)
    got += receive_for(fd, 100ms);
  REQUIRE(got.size() >= 32);
  return got;
}

/// Reads and discards until the other end closes `fd` (EOF or reset): true,
/// or false if it is still open after `wait`.
bool closed_within(int fd, std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    auto r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    char buf[4096];
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return true;
  }
}

/// How many of `fds` the other end closes within `wait` (one deadline for
/// all); closes them all.
size_t all_closed_within(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  size_t closed = 0;
  for (auto fd : fds) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (closed_within(fd, std::max(left, std::chrono::milliseconds{1})))
      ++closed;
    ::close(fd);
  }
  return closed;
}

/// Whether the child is still running (it is not reaped).
bool running(const test::child_process& p) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(p.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0
         && info.si_pid == 0;
}

/// Open descriptors of process `pid`.
size_t open_fds(int pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

/// A TCP relay on 127.0.0.1 to `upstream` that holds back what the upstream
/// sends during the first `hold` of each connection (then passes it on), as
/// a slow link or a slow handshake would: the worker's server handshake
/// reaches the client `hold` late.
class delaying_relay {
public:
  delaying_relay(std::string upstream, std::chrono::milliseconds hold)
    : upstream_(std::move(upstream)), hold_(hold) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    socklen_t len = sizeof(sa);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    address_ = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~delaying_relay() {
    stop_ = true;
    acceptor_.join();
    for (auto& t : pumps_)
      t.join();
    ::close(listener_);
  }

  const std::string& address() const {
    return address_;
  }

  size_t connections() const {
    return connections_;
  }

private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0)
        continue;
      ++connections_;
      pumps_.emplace_back([this, client] { pump(client); });
    }
  }

  /// Relays one connection until either side closes it or the relay stops.
  void pump(int client) {
    auto colon = upstream_.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(upstream_.substr(colon + 1))));
    ::inet_pton(AF_INET, upstream_.substr(0, colon).c_str(), &sa.sin_addr);
    int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      ::close(client);
      if (server >= 0)
        ::close(server);
      return;
    }
    auto release_at = std::chrono::steady_clock::now() + hold_;
    std::string held;
    bool open = true;
    while (open && !stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      ::poll(p, 2, 20);
      char buf[16384];
      for (int i = 0; i < 2 && open; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
          continue;
        auto n = ::recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          open = false;
          break;
        }
        if (i == 0)
          send_all(server, std::string(buf, static_cast<size_t>(n)));
        else
          held.append(buf, static_cast<size_t>(n));
      }
      if (!held.empty() && std::chrono::steady_clock::now() >= release_at) {
        send_all(client, held);
        held.clear();
      }
    }
    ::close(client);
    ::close(server);
  }

  std::string upstream_;
  std::chrono::milliseconds hold_;
  int listener_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connections_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

struct worker_port_fixture : cluster_fixture {
  test::fake_llm_server server;

  /// Starts `quarry worker` on a free loopback port with `settings` (pairs of
  /// `--set` values), limited to a 2.5 GB address space where the build
  /// allows it (AddressSanitizer reserves more than that).
  std::unique_ptr<test::cluster::worker> start_limited_worker(std::vector<std::string> settings) {
    std::vector<std::string> args{"/bin/sh",
                                  "-c",
                                  "ulimit -v 2500000 && exec \"$@\"",
                                  "sh",
                                  QUARRY_EXE,
                                  "--plugin-dir",
                                  QUARRY_PLUGIN_DIR,
                                  "--log-level",
                                  "info",
                                  "worker",
                                  "--listen",
                                  "127.0.0.1:0"};
#if defined(QUARRY_TESTS_UNDER_ASAN)
    args[2] = "exec \"$@\"";
#endif
    for (const auto& s : settings) {
      args.push_back("--set");
      args.push_back(s);
    }
    auto w = std::make_unique<test::cluster::worker>();
    w->process = std::make_unique<test::child_process>(
      args, test::isolated_quarry_options(home.path() + "/worker", llm_env(server)));
    auto line = w->process->wait_for_err_line("worker listening on ", 90s);
    INFO(w->process->err());
    REQUIRE(line);
    auto at = line->find("worker listening on ") + 20;
    w->address = line->substr(at, line->find(' ', at) - at);
    return w;
  }

  /// A real research with its agent placed on `w`: finishes, and the agent
  /// ran there.
  void check_serves(test::cluster::worker& w) {
    auto agents_before = count_of(w.process->err(), "worker: agent ");
    REQUIRE_FALSE(server.script(parallel_agents_script(1)));
    auto res = research(server, {"--json", "--set", workers_setting({w.address}),
                                 "How do heat pumps cope with cold weather?"});
    CAPTURE(res.err);
    CAPTURE(w.process->err());
    REQUIRE(res.exit_code == 0);
    CHECK(res.err.find("runs on worker " + w.address) != std::string::npos);
    CHECK(count_of(w.process->err(), "worker: agent ") == agents_before + 1);
    CHECK(running(*w.process));
  }
};

} // namespace

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: a 4 GiB length before the handshake "
                                       "closes that connection and nothing else") {
  auto w = start_limited_worker({});
  auto fd = connect_to(w->address);
  auto hello = server_hello(fd);
  // The worker's own handshake fits the bound before the handshake (64 KiB)
  // with room to spare.
  auto announced = (uint32_t{static_cast<uint8_t>(hello[4])} << 24)
                   | (uint32_t{static_cast<uint8_t>(hello[5])} << 16)
                   | (uint32_t{static_cast<uint8_t>(hello[6])} << 8)
                   | uint32_t{static_cast<uint8_t>(hello[7])};
  MESSAGE("the worker's server handshake payload: " << announced << " bytes");
  CHECK(static_cast<uint8_t>(hello[0]) == server_handshake);
  CHECK(announced > 0);
  CHECK(announced < 16 * 1024);
  send_all(fd, basp_header(client_handshake, 0xFFFFFFFF, basp_version));
  CHECK(closed_within(fd, 30s));
  ::close(fd);
  CHECK(w->process->wait_for_err("announced a 4294967295-byte message before the handshake", 10s));
  CHECK(running(*w->process));
  // The same after a valid handshake header of another kind, and a message
  // that is no handshake at all.
  for (auto bytes : {basp_header(server_handshake, 0xFFFFFFFF, basp_version),
                     basp_header(direct_message, 100, 0, 0, 1)}) {
    auto fd2 = connect_to(w->address);
    server_hello(fd2);
    send_all(fd2, bytes);
    CHECK(closed_within(fd2, 30s));
    ::close(fd2);
  }
  CHECK(w->process->wait_for_err("a BASP message of type 2 before the handshake", 10s));
  check_serves(*w);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: a handshake without payload is refused "
                                       "(CAF would read a null payload)") {
  auto w = start_limited_worker({});
  for (auto op : {client_handshake, server_handshake}) {
    auto fd = connect_to(w->address);
    server_hello(fd);
    send_all(fd, basp_header(op, 0, basp_version));
    CHECK(closed_within(fd, 30s));
    ::close(fd);
  }
  CHECK(w->process->wait_for_err("a handshake without payload", 10s));
  check_serves(*w);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: a length that lies is closed by the "
                                       "handshake timeout") {
  // The BASP connection timeout (cluster.heartbeat_timeout) is far away, so
  // only the handshake timeout can close it.
  auto w = start_limited_worker({"cluster.handshake_timeout=1s", "cluster.heartbeat_timeout=10m"});
  auto fd = connect_to(w->address);
  server_hello(fd);
  send_all(fd, basp_header(client_handshake, 1000, basp_version) + std::string(10, 'x'));
  CHECK(closed_within(fd, 30s));
  ::close(fd);
  CHECK(w->process->wait_for_err("no handshake within 1s", 10s));
  check_serves(*w);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: 200 connections that never say anything "
                                       "are all closed after the handshake timeout") {
  auto w = start_limited_worker({"cluster.handshake_timeout=2s", "cluster.heartbeat_timeout=10m"});
  auto pid = w->process->pid();
  auto before = open_fds(pid);
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i)
    fds.push_back(connect_to(w->address));
  // The worker holds them (accepted)...
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (open_fds(pid) < before + 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK(open_fds(pid) >= before + 200);
  // ... until the timeout: every one is closed (EOF after the worker's
  // handshake) and the descriptors are given back.
  CHECK(all_closed_within(fds, 30s) == fds.size());
  deadline = std::chrono::steady_clock::now() + 30s;
  while (open_fds(pid) > before + 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK(open_fds(pid) <= before + 5);
  CHECK(count_of(w->process->err(), "no handshake within 2s") == fds.size());
  check_serves(*w);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: over mutual TLS, connections that never "
                                       "finish the TLS handshake are closed after the "
                                       "handshake timeout") {
  auto pki = make_pki();
  auto tls = tls_settings(pki.node_cert, pki.node_key, pki.ca);
  auto w = start_limited_worker(
    {"cluster.handshake_timeout=1s", "cluster.heartbeat_timeout=10m", tls[1], tls[3], tls[5]});
  // Silent, half a ClientHello, and plaintext BASP (which is no TLS).
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i)
    fds.push_back(connect_to(w->address));
  send_all(fds[1], std::string("\x16\x03\x01\x02\x00", 5));
  send_all(fds[2], basp_header(client_handshake, 0xFFFFFFFF, basp_version));
  CHECK(all_closed_within(fds, 30s) == fds.size());
  CHECK(w->process->wait_for_err("no handshake within 1s", 10s));
  CHECK(running(*w->process));
  // A CAF program of its own with caf::openssl (the same TLS on the wire)
  // reaches the agent host.
  {
    caf::actor_system_config cfg;
    cfg.set("logger.verbosity", caf::atom("quiet"));
    cfg.set("scheduler.max-threads", 2);
    quarry::cluster::register_types(cfg);
    cfg.openssl_certificate = pki.client_cert;
    cfg.openssl_key = pki.client_key;
    cfg.openssl_cafile = pki.ca;
    cfg.load<caf::io::middleman>();
    cfg.load<caf::openssl::manager>();
    caf::actor_system sys{cfg};
    auto port = static_cast<uint16_t>(std::stoi(w->address.substr(w->address.rfind(':') + 1)));
    auto host = caf::openssl::remote_actor<quarry::cluster::agent_host_actor>(sys, "127.0.0.1",
                                                                              port);
    REQUIRE_MESSAGE(host, sys.render(host.error()));
    caf::scoped_actor self{sys};
    bool answered = false;
    self->request(*host, 10s, quarry::cluster::worker_status_atom::value)
      .receive([&](quarry::cluster::worker_status& st) { answered = st.capacity == 8; },
               [&](const caf::error& e) { FAIL(sys.render(e)); });
    CHECK(answered);
  }
  // A session with a certificate of the cluster still places its agent there.
  auto agents_before = count_of(w->process->err(), "worker: agent ");
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto res = research(server,
                      test::cluster::concat({"--json", "--set", workers_setting({w->address})},
                                            tls_settings(pki.client_cert, pki.client_key, pki.ca),
                                            {"How do heat pumps cope with cold weather?"}));
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("runs on worker " + w->address) != std::string::npos);
  CHECK(count_of(w->process->err(), "worker: agent ") == agents_before + 1);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: garbage after a valid handshake does not "
                                       "stop the worker") {
  auto w = start_limited_worker({"cluster.max_message_size=1MiB", "cluster.heartbeat_timeout=10m"});
  // A valid client handshake is accepted: afterwards a message larger than
  // the bound before the handshake (64 KiB) but within
  // cluster.max_message_size is read (and its garbage dropped), and the
  // connection stays open.
  {
    auto fd = connect_to(w->address);
    server_hello(fd);
    send_all(fd, client_hello(1));
    send_all(fd, basp_header(heartbeat, 0));
    send_all(fd, basp_header(direct_message, 100'000, 0, 0, 1) + std::string(100'000, '\x7f'));
    CHECK_FALSE(closed_within(fd, 2s));
    // More than cluster.max_message_size: closed.
    send_all(fd, basp_header(direct_message, 2 * 1024 * 1024, 0, 0, 1));
    CHECK(closed_within(fd, 30s));
    ::close(fd);
    CHECK(w->process->wait_for_err(
      "announced a 2097152-byte message (cluster.max_message_size: 1048576 bytes)", 10s));
  }
  // A handshake without payload after the handshake: closed, not a crash.
  {
    auto fd = connect_to(w->address);
    server_hello(fd);
    send_all(fd, client_hello(2) + basp_header(client_handshake, 0));
    CHECK(closed_within(fd, 30s));
    ::close(fd);
  }
  // Random bytes, and random headers with random payloads, after a valid
  // handshake (a fixed seed, so a failure can be replayed).
  std::mt19937 rng{20240526};
  auto random_bytes = [&](size_t n) {
    std::string out(n, '\0');
    for (auto& c : out)
      c = static_cast<char>(rng() & 0xFF);
    return out;
  };
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    auto fd = connect_to(w->address);
    server_hello(fd);
    std::string bytes = client_hello(static_cast<uint8_t>(10 + round));
    if (round % 3 == 0) {
      bytes += random_bytes(32 + rng() % 4000);
    } else {
      // A valid operation (up to heartbeat) with a small payload of noise.
      auto op = static_cast<uint8_t>(rng() % 7);
      auto len = static_cast<uint32_t>(rng() % 3000);
      bytes += basp_header(op, len, rng() % 2 ? 0 : rng(), rng() % 2 ? 0 : rng() % 5,
                           rng() % 2 ? 0 : rng() % 5)
               + random_bytes(len);
    }
    send_all(fd, bytes);
    receive_for(fd, 20ms);
    ::close(fd);
    REQUIRE(running(*w->process));
  }
  check_serves(*w);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: a handshake slower than the heartbeat "
                                       "interval still connects") {
  // The worker's handshake reaches the session 700 ms late, seven of the
  // session's heartbeat ticks: CAF 0.17.6's own connection timeout closed
  // such a connection at the first tick (it counts its silence from the
  // clock's epoch), so the agent ran on the session's node instead.
  auto w = start_limited_worker({});
  delaying_relay relay{w->address, 700ms};
  auto agents_before = count_of(w->process->err(), "worker: agent ");
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto res = research(server, {"--json", "--set", workers_setting({relay.address()}), "--set",
                               "cluster.heartbeat=100ms", "--set", "cluster.heartbeat_timeout=5s",
                               "How do heat pumps cope with cold weather?"});
  CAPTURE(res.err);
  CAPTURE(w->process->err());
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("runs on worker " + relay.address()) != std::string::npos);
  CHECK(res.err.find("cannot be used") == std::string::npos);
  CHECK(res.err.find("closed the connection") == std::string::npos);
  CHECK(relay.connections() == 1);
  CHECK(count_of(w->process->err(), "worker: agent ") == agents_before + 1);
}

TEST_CASE_FIXTURE(worker_port_fixture, "worker port: a connection silent past the heartbeat "
                                       "timeout after its handshake is closed") {
  // A client that finishes the handshake and then sends nothing (no BASP
  // heartbeats) is closed after cluster.heartbeat_timeout; one that sends
  // heartbeats stays.
  auto w = start_limited_worker({"cluster.heartbeat=200ms", "cluster.heartbeat_timeout=2s"});
  auto silent = connect_to(w->address);
  auto talking = connect_to(w->address);
  server_hello(silent);
  server_hello(talking);
  send_all(silent, client_hello(1));
  send_all(talking, client_hello(2));
  bool talking_closed = false;
  auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    send_all(talking, basp_header(heartbeat, 0));
    if (closed_within(talking, 100ms)) {
      talking_closed = true;
      break;
    }
  }
  CHECK_FALSE(talking_closed);
  CHECK(closed_within(silent, 10s));
  ::close(silent);
  ::close(talking);
  CHECK(w->process->wait_for_err("nothing received for 2s (cluster.heartbeat_timeout)", 10s));
  check_serves(*w);
}

} // namespace worker_port_test
