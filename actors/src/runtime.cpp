// The runtime: stop signals on a dedicated thread, and the CAF actor system.

#include "quarry/actors/runtime.hpp"

#include "guarded_network.hpp"

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/message_types.hpp"
#include "quarry/cluster/wire.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace quarry::actors {

// -- signals ------------------------------------------------------------------

struct signal_watcher::impl {
  std::function<void(int)> on_stop;
  std::atomic<int> received{0};
};

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

/// The process's one signal thread and the stack of watchers it serves.
struct signal_hub {
  std::mutex mtx;
  std::condition_variable idle;
  std::vector<std::shared_ptr<signal_watcher::impl>> watchers;
  /// The watcher whose handler is running, if any.
  signal_watcher::impl* calling = nullptr;
  bool first_seen = false;
  std::once_flag started;

  static signal_hub& instance() {
    // Never destroyed: the thread may still wait in sigwait at exit.
    static auto* hub = new signal_hub;
    return *hub;
  }

  void start() {
    std::call_once(started, [this] { std::thread{[this] { run(); }}.detach(); });
  }

  [[noreturn]] static void quit_now(int sig, const char* why) {
    // Only async-signal-safe calls: we may be racing with anything.
    auto n = ::write(STDERR_FILENO, why, std::strlen(why));
    static_cast<void>(n);
    std::_Exit(exit_code_for_signal(sig));
  }

  void run() {
    auto set = stop_signals();
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0)
        continue;
      std::shared_ptr<signal_watcher::impl> target;
      {
        std::lock_guard<std::mutex> guard{mtx};
        if (first_seen)
          quit_now(sig, "quarry: interrupted again, quitting at once\n");
        first_seen = true;
        if (watchers.empty())
          quit_now(sig, sig == SIGINT ? "quarry: interrupted (SIGINT)\n"
                                      : "quarry: terminated (SIGTERM)\n");
        target = watchers.back();
        target->received = sig;
        calling = target.get();
      }
      spdlog::warn("received {}, stopping (send it again to quit at once)",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      if (target->on_stop)
        target->on_stop(sig);
      {
        std::lock_guard<std::mutex> guard{mtx};
        calling = nullptr;
      }
      idle.notify_all();
    }
  }
};

} // namespace

void block_stop_signals() {
  auto set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal_hub::instance().start();
}

signal_watcher::signal_watcher(std::function<void(int)> on_stop) : impl_(std::make_shared<impl>()) {
  impl_->on_stop = std::move(on_stop);
  auto& hub = signal_hub::instance();
  hub.start();
  std::lock_guard<std::mutex> guard{hub.mtx};
  hub.watchers.push_back(impl_);
}

signal_watcher::~signal_watcher() {
  auto& hub = signal_hub::instance();
  std::unique_lock<std::mutex> guard{hub.mtx};
  auto& ws = hub.watchers;
  ws.erase(std::remove(ws.begin(), ws.end(), impl_), ws.end());
  hub.idle.wait(guard, [&] { return hub.calling != impl_.get(); });
}

int signal_watcher::received() const noexcept {
  return impl_->received.load();
}

int wait_for_stop_signal() {
  std::mutex mtx;
  std::condition_variable cv;
  int signal_number = 0;
  signal_watcher watcher{[&](int sig) {
    std::lock_guard<std::mutex> guard{mtx};
    signal_number = sig;
    cv.notify_all();
  }};
  std::unique_lock<std::mutex> lock{mtx};
  cv.wait(lock, [&] { return signal_number != 0; });
  return signal_number;
}

// -- runtime ------------------------------------------------------------------

namespace {

void log_refused_value(const char* what) {
  spdlog::warn("dropped a message from another node: {}", what);
}

struct quarry_system_config : caf::actor_system_config, net::connection_rules_holder {
  explicit quarry_system_config(const core::settings& cfg) {
    // A value another node sent that no Quarry node writes is refused while
    // the message is read (CAF then drops it): say so.
    cluster::wire::on_refused = log_refused_value;
    auto threads = cfg.runtime.scheduler_threads;
    if (threads <= 0)
      threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
    set("scheduler.max-threads", threads);
    // An idle worker goes from its short spin (CAF's aggressive phase: 100
    // polls) straight to waiting on its condition variable, skipping CAF's
    // moderate phase of 500 polls 50 us apart: those sleeps cost about 250
    // ms of CPU per research when one research runs alone (5x the rest of
    // its work), and 40 % of the CPU with 100 at a time, for no measurable
    // gain in latency or throughput (bench/README.md, "Socket API, one-pass
    // chunks, idle workers").
    set("work-stealing.moderate-poll-attempts", size_t{0});
    // Quarry logs through spdlog; CAF's own printing stays quiet.
    set("logger.verbosity", caf::atom("quiet"));
    register_message_types(*this);
    // A node that neither places agents on workers nor listens for other
    // nodes runs without CAF's network layer: no multiplexer thread, and
    // none of the middleman's shutdown races (its BASP broker could be left
    // in a reference cycle at exit).
    const auto& cl = cfg.cluster;
    if (!runtime::networked(cfg))
      return;
    // Nodes: BASP heartbeats, and a connection silent past the heartbeat
    // timeout is closed (a peer that vanished without a FIN is seen too).
    // The multiplexer closes it, not CAF's `middleman.connection-timeout`
    // (left at zero: off), which cuts an outgoing connection whose handshake
    // spans one heartbeat tick (guarded_network.hpp, idle_timeout).
    set("middleman.heartbeat-interval", caf::timespan{cl.heartbeat});
    rules.idle_timeout = cl.heartbeat_timeout;
    // Every connection is bounded: 64 KiB before its handshake,
    // cluster.max_message_size after it, closed without a handshake after
    // cluster.handshake_timeout (guarded_network.hpp).
    rules.max_message_size = static_cast<uint32_t>(
      std::clamp<int64_t>(cl.max_message_size, net::handshake_payload_limit, UINT32_MAX));
    rules.handshake_timeout = cl.handshake_timeout;
    rules.tls = cl.tls.configured();
    net::load_guarded_middleman(*this);
    // Mutual TLS between nodes (checked by the commands before this: all
    // three files, readable), spoken by the connections of the multiplexer
    // above with caf::openssl's sessions. Never CAF's anonymous TLS: without
    // certificates, caf::openssl is not loaded at all.
    if (cl.tls.configured()) {
      openssl_certificate = cl.tls.cert;
      openssl_key = cl.tls.key;
      openssl_cafile = cl.tls.ca;
      load<caf::openssl::manager>();
    }
  }
};

} // namespace

struct runtime::impl {
  explicit impl(const core::settings& cfg) : config(cfg), system(config) {
    // nop
  }

  quarry_system_config config;
  caf::actor_system system;
  std::mutex mtx;
  std::vector<stoppable_actor> stoppables;
  std::atomic<bool> stopping{false};
};

runtime::runtime(const core::settings& cfg) : impl_(std::make_unique<impl>(cfg)) {
  // nop
}

namespace {

/// Bounds the actor system's shutdown: CAF joins its network thread, which
/// runs until its last connection is gone, and a connection that never
/// closes would keep the process alive forever after its work is done. A
/// line after `warn_after`; after `give_up_after`, a line saying so and the
/// process ends with exit status 70 (EX_SOFTWARE): never a silent hang.
class shutdown_watchdog {
public:
  shutdown_watchdog(std::chrono::seconds warn_after, std::chrono::seconds give_up_after)
    : thread_([this, warn_after, give_up_after] {
        std::unique_lock<std::mutex> guard{mtx_};
        if (cv_.wait_for(guard, warn_after, [this] { return done_; }))
          return;
        spdlog::warn("shutting down takes longer than {} s: waiting for the actor "
                     "system's threads (a network connection that does not close?)",
                     warn_after.count());
        if (cv_.wait_for(guard, give_up_after - warn_after, [this] { return done_; }))
          return;
        spdlog::error("the actor system did not shut down within {} s; exiting without it",
                      give_up_after.count());
        spdlog::shutdown();
        std::_Exit(70);
      }) {
    // nop
  }

  ~shutdown_watchdog() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

} // namespace

runtime::~runtime() {
  stop();
  await_stopped(std::chrono::milliseconds{5000});
  // The system's own shutdown (scheduler and network threads) is bounded too.
  shutdown_watchdog watchdog{std::chrono::seconds{10}, std::chrono::seconds{30}};
  impl_.reset();
}

caf::actor_system& runtime::system() noexcept {
  return impl_->system;
}

bool runtime::networked(const core::settings& cfg) {
  return !cfg.cluster.workers.empty() || !cfg.cluster.listen.empty();
}

size_t runtime::scheduler_threads() const {
  return impl_->system.scheduler().num_workers();
}

void runtime::add_stoppable(const stoppable_actor& hdl) {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  impl_->stoppables.push_back(hdl);
  if (impl_->stopping)
    caf::anon_send(hdl, stop_atom::value);
}

void runtime::stop() {
  if (impl_->stopping.exchange(true))
    return;
  std::lock_guard<std::mutex> guard{impl_->mtx};
  for (const auto& hdl : impl_->stoppables)
    caf::anon_send(hdl, stop_atom::value);
}

bool runtime::await_stopped(std::chrono::milliseconds grace) {
  std::vector<stoppable_actor> hdls;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    hdls.swap(impl_->stoppables);
  }
  if (hdls.empty())
    return true;
  caf::scoped_actor self{impl_->system};
  for (const auto& hdl : hdls)
    self->monitor(hdl);
  size_t down = 0;
  auto all_quit = true;
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (down < hdls.size()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      all_quit = false;
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    auto timed_out = false;
    self->receive([&](const caf::down_msg&) { ++down; },
                  caf::after(left) >> [&] { timed_out = true; });
    if (timed_out) {
      all_quit = false;
      break;
    }
  }
  if (!all_quit) {
    spdlog::warn("{} actor(s) did not stop within {} ms; killing them", hdls.size() - down,
                 grace.count());
    for (const auto& hdl : hdls)
      caf::anon_send_exit(hdl, caf::exit_reason::kill);
  }
  return all_quit;
}

} // namespace quarry::actors
