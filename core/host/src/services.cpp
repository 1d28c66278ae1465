// Host services: blocking pool, secrets, plugin loggers, host contexts.

#include "quarry/host/services.hpp"

#include "quarry/host/http_client.hpp"
#include "quarry/core/clock.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>

namespace quarry::host {

// -- bounded_pool -------------------------------------------------------------

bounded_pool::bounded_pool(int threads, int capacity)
  : capacity_(static_cast<size_t>(capacity > 0 ? capacity : 1)) {
  auto n = threads > 0 ? threads : 1;
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    workers_.emplace_back([this] { run(); });
}

bounded_pool::~bounded_pool() {
  shutdown();
}

bool bounded_pool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_ || queue_.size() >= capacity_)
      return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void bounded_pool::shutdown() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_ && workers_.empty())
      return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& worker : workers_)
    if (worker.joinable())
      worker.join();
  workers_.clear();
}

void bounded_pool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& ex) {
      spdlog::error("blocking job threw: {}", ex.what());
    } catch (...) {
      spdlog::error("blocking job threw an unknown exception");
    }
  }
}

// -- env_secret_store ---------------------------------------------------------

std::optional<std::string> env_secret_store::get(std::string_view name) const {
  std::string key{name};
  if (const auto* value = std::getenv(key.c_str()); value != nullptr)
    return std::string{value};
  return std::nullopt;
}

// -- plugin_logger ------------------------------------------------------------

namespace {

spdlog::level::level_enum to_spdlog(sdk::log_level level) {
  switch (level) {
    case sdk::log_level::trace:
      return spdlog::level::trace;
    case sdk::log_level::debug:
      return spdlog::level::debug;
    case sdk::log_level::info:
      return spdlog::level::info;
    case sdk::log_level::warn:
      return spdlog::level::warn;
    case sdk::log_level::error:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

} // namespace

plugin_logger::plugin_logger(std::string name) : name_(std::move(name)) {
  // nop
}

void plugin_logger::log(sdk::log_level level, std::string_view message) {
  auto lvl = to_spdlog(level);
  if (!spdlog::should_log(lvl))
    return;
  spdlog::log(lvl, "[{}] {}", name_, message);
}

bool plugin_logger::enabled(sdk::log_level level) const {
  return spdlog::should_log(to_spdlog(level));
}

// -- host_context -------------------------------------------------------------

namespace {

class context_impl final : public sdk::host_context {
public:
  context_impl(host_services& services, std::string name, std::string dir)
    : services_(services), logger_(std::move(name)), dir_(std::move(dir)) {
    // nop
  }

  sdk::http_client& http() override {
    return services_.http();
  }

  sdk::logger& log() override {
    return logger_;
  }

  sdk::blocking_pool& pool() override {
    return services_.pool();
  }

  const sdk::secret_store& secrets() const override {
    return services_.secrets();
  }

  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::now();
  }

  std::chrono::steady_clock::time_point steady_now() const override {
    return core::real_clock().now();
  }

  std::string data_dir() const override {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    return dir_;
  }

private:
  host_services& services_;
  plugin_logger logger_;
  std::string dir_;
};

} // namespace

// -- host_services ------------------------------------------------------------

host_services::host_services(const core::settings& cfg)
  : http_(std::make_unique<curl_http_client>(cfg.http)),
    pool_(std::make_unique<bounded_pool>(cfg.runtime.blocking_threads, cfg.runtime.blocking_queue)),
    data_dir_(cfg.runtime.data_dir.empty() ? default_data_dir() : cfg.runtime.data_dir) {
  // nop
}

host_services::~host_services() {
  shutdown();
}

sdk::http_client& host_services::http() noexcept {
  return *http_;
}

std::shared_ptr<sdk::host_context> host_services::make_context(const std::string& plugin_name) {
  auto dir = (std::filesystem::path{data_dir_} / "plugins" / plugin_name).string();
  return std::make_shared<context_impl>(*this, plugin_name, std::move(dir));
}

void host_services::shutdown() {
  if (http_)
    http_->shutdown();
  if (pool_)
    pool_->shutdown();
}

std::string default_data_dir() {
  namespace fs = std::filesystem;
  if (const auto* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg)
    return (fs::path{xdg} / "quarry").string();
  if (const auto* home = std::getenv("HOME"); home && *home)
    return (fs::path{home} / ".local" / "share" / "quarry").string();
  return ".quarry";
}

} // namespace quarry::host
