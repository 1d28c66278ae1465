// This file is part of the Quarry plugin SDK.
// A small thread-safe cache whose entries expire, for plugins that remember
// recent answers (search results, pages read).

#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace quarry::sdk {

/// Maps string keys to values for at most `ttl` each; when full, adding a
/// new key drops the oldest entry. All member functions are thread-safe.
template <class Value>
class ttl_cache {
public:
  using clock_type = std::chrono::steady_clock;

  /// Where the cache reads the time (a test's or an actor system's clock).
  using now_function = std::function<clock_type::time_point()>;

  /// Keeps entries for `ttl`, at most `max_entries` of them (at least 1),
  /// timed by `now` (by default `std::chrono::steady_clock::now`).
  ttl_cache(clock_type::duration ttl, size_t max_entries, now_function now = nullptr)
    : ttl_(ttl),
      max_entries_(max_entries > 0 ? max_entries : 1),
      now_(now ? std::move(now) : now_function{&clock_type::now}) {
    // nop
  }

  /// Changes the limits and drops every entry: entries are kept for `ttl`,
  /// at most `max_entries` of them; a `ttl` of zero or less or no entries
  /// keeps nothing (every get misses, every put is dropped).
  void limit(clock_type::duration ttl, size_t max_entries) {
    std::lock_guard<std::mutex> guard{mtx_};
    ttl_ = ttl;
    max_entries_ = max_entries;
    entries_.clear();
  }

  /// Returns a copy of the value of `key` if it is there and fresh; drops it
  /// if it expired.
  std::optional<Value> get(const std::string& key) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!keeps())
      return std::nullopt;
    auto i = entries_.find(key);
    if (i == entries_.end())
      return std::nullopt;
    if (now_() - i->second.second > ttl_) {
      entries_.erase(i);
      return std::nullopt;
    }
    return i->second.first;
  }

  /// Stores `value` under `key` (replacing and refreshing an existing one).
  void put(const std::string& key, Value value) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!keeps())
      return;
    if (entries_.size() >= max_entries_ && entries_.count(key) == 0) {
      auto oldest = entries_.begin();
      for (auto i = entries_.begin(); i != entries_.end(); ++i)
        if (i->second.second < oldest->second.second)
          oldest = i;
      entries_.erase(oldest);
    }
    entries_[key] = {std::move(value), now_()};
  }

  /// Number of entries, fresh or not.
  size_t size() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return entries_.size();
  }

private:
  bool keeps() const {
    return ttl_.count() > 0 && max_entries_ > 0;
  }

  clock_type::duration ttl_;
  size_t max_entries_;
  now_function now_;
  mutable std::mutex mtx_;
  std::map<std::string, std::pair<Value, clock_type::time_point>> entries_;
};

} // namespace quarry::sdk
