// A host context for plugin tests: the real HTTP client and blocking pool, a
// logger that keeps warnings, and no secrets. Header-only, because only test
// executables that link quarry_host include it.

#pragma once

#include "quarry/host/http_client.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/host.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace quarry::test {

/// Keeps every warning and error line; drops the rest.
class recording_logger final : public sdk::logger {
public:
  void log(sdk::log_level level, std::string_view message) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (level >= sdk::log_level::warn)
      warnings_.emplace_back(message);
  }

  bool enabled(sdk::log_level) const override {
    return true;
  }

  /// The warning and error lines so far.
  std::vector<std::string> warnings() {
    std::lock_guard<std::mutex> guard{mtx_};
    return warnings_;
  }

private:
  std::mutex mtx_;
  std::vector<std::string> warnings_;
};

/// Knows no secrets.
class no_secrets final : public sdk::secret_store {
public:
  std::optional<std::string> get(std::string_view) const override {
    return std::nullopt;
  }
};

/// The host context of plugin tests.
class test_host final : public sdk::host_context {
public:
  /// `http` configures the HTTP client (e.g. a short stall timeout), and the
  /// pool has `threads` threads and room for `queue` waiting jobs.
  explicit test_host(const core::http_settings& http = {}, int threads = 1, int queue = 16)
    : http_(http), pool_(threads, queue) {
    // nop
  }

  /// Ends every transfer and runs the queued jobs first, so that no sink
  /// call or job outlives the logger.
  ~test_host() override {
    http_.shutdown();
    pool_.shutdown();
  }

  sdk::http_client& http() override {
    return http_;
  }

  sdk::logger& log() override {
    return log_;
  }

  sdk::blocking_pool& pool() override {
    return pool_;
  }

  const sdk::secret_store& secrets() const override {
    return secrets_;
  }

  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::now();
  }

  /// The steady clock, moved forward by what advance_steady added.
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::now() + std::chrono::nanoseconds{steady_offset_.load()};
  }

  /// Moves steady_now forward by `d`: a plugin's timed caches expire
  /// without the test waiting.
  void advance_steady(std::chrono::nanoseconds d) {
    steady_offset_ += d.count();
  }

  std::string data_dir() const override {
    return {};
  }

  /// The warnings plugins logged.
  std::vector<std::string> warnings() {
    return log_.warnings();
  }

  /// Queues a job and waits up to `timeout` for it to run: with one pool
  /// thread, every job queued before it has run by then. False when the pool
  /// refused the job or it did not run in time.
  bool run_through_pool(std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
    struct flag {
      std::mutex mtx;
      std::condition_variable cv;
      bool ran = false;
    };
    auto f = std::make_shared<flag>();
    if (!pool_.submit([f] {
          std::lock_guard<std::mutex> guard{f->mtx};
          f->ran = true;
          f->cv.notify_all();
        }))
      return false;
    std::unique_lock<std::mutex> guard{f->mtx};
    return f->cv.wait_for(guard, timeout, [&f] { return f->ran; });
  }

  /// Ends every transfer: no sink call can happen afterwards.
  void shutdown() {
    http_.shutdown();
  }

private:
  host::curl_http_client http_;
  host::bounded_pool pool_;
  recording_logger log_;
  no_secrets secrets_;
  std::atomic<int64_t> steady_offset_{0};
};

} // namespace quarry::test
