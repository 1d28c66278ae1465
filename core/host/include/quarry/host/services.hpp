// The services the host gives to plugins (a blocking-work pool, loggers,
// secrets) and the per-plugin host context built from them.

#pragma once

#include "quarry/core/settings.hpp"
#include "quarry/sdk/host.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace quarry::host {

class curl_http_client;

/// A fixed set of threads with a bounded queue. `submit` never blocks: it
/// refuses work when the queue is full.
class bounded_pool final : public sdk::blocking_pool {
public:
  // -- constructors, destructors, and assignment operators --------------------

  /// Starts `threads` threads that take jobs from a queue of at most
  /// `capacity` entries.
  bounded_pool(int threads, int capacity);

  /// Runs the queued jobs, then joins the threads.
  ~bounded_pool() override;

  bounded_pool(const bounded_pool&) = delete;
  bounded_pool& operator=(const bounded_pool&) = delete;

  // -- sdk::blocking_pool ------------------------------------------------------

  bool submit(std::function<void()> job) override;

  // -- properties -------------------------------------------------------------

  /// Number of worker threads.
  size_t threads() const noexcept {
    return workers_.size();
  }

  /// Largest number of queued jobs.
  size_t capacity() const noexcept {
    return capacity_;
  }

  // -- control ----------------------------------------------------------------

  /// Stops accepting work, runs what is queued, joins the threads.
  void shutdown();

private:
  void run();

  size_t capacity_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

/// Resolves secrets from the process environment.
class env_secret_store final : public sdk::secret_store {
public:
  std::optional<std::string> get(std::string_view name) const override;
};

/// A logger that writes through spdlog under a plugin's name.
class plugin_logger final : public sdk::logger {
public:
  explicit plugin_logger(std::string name);

  void log(sdk::log_level level, std::string_view message) override;

  bool enabled(sdk::log_level level) const override;

private:
  std::string name_;
};

/// Everything shared by all plugins of one process. Created before the plugin
/// registry and the actor system, destroyed after both.
class host_services {
public:
  /// Creates the HTTP client, the blocking pool and the secret store from
  /// the configuration.
  explicit host_services(const core::settings& cfg);

  ~host_services();

  host_services(const host_services&) = delete;
  host_services& operator=(const host_services&) = delete;

  /// The shared HTTP client.
  sdk::http_client& http() noexcept;

  /// The shared blocking-work pool.
  bounded_pool& pool() noexcept {
    return *pool_;
  }

  /// The secret store.
  const sdk::secret_store& secrets() const noexcept {
    return secrets_;
  }

  /// The data folder (created on first use by @ref make_context).
  const std::string& data_dir() const noexcept {
    return data_dir_;
  }

  /// Returns a host context whose logger is attributed to `plugin_name` and
  /// whose data folder is `<data_dir>/plugins/<plugin_name>`.
  std::shared_ptr<sdk::host_context> make_context(const std::string& plugin_name);

  /// Cancels in-flight HTTP requests and drains the pool. Idempotent.
  void shutdown();

private:
  std::unique_ptr<curl_http_client> http_;
  std::unique_ptr<bounded_pool> pool_;
  env_secret_store secrets_;
  std::string data_dir_;
};

/// Returns the per-user data folder: $XDG_DATA_HOME/quarry, or
/// ~/.local/share/quarry, or ./.quarry when neither is known.
std::string default_data_dir();

} // namespace quarry::host
