// Unit tests of the SDK's ttl_cache: expiry, replacement, the size bound and
// concurrent use.

#include "quarry/sdk/ttl_cache.hpp"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

namespace sdk_ttl_cache_test {

using quarry::sdk::ttl_cache;

TEST_CASE("sdk ttl_cache keeps values until they expire") {
  ttl_cache<std::string> cache{std::chrono::hours{1}, 8};
  CHECK_FALSE(cache.get("a"));
  cache.put("a", "one");
  CHECK(cache.get("a") == std::optional<std::string>{"one"});
  cache.put("a", "uno");
  CHECK(cache.get("a") == std::optional<std::string>{"uno"});
  CHECK(cache.size() == 1);
  ttl_cache<int> expired{std::chrono::milliseconds{0}, 8};
  expired.put("x", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds{2});
  CHECK_FALSE(expired.get("x"));
  CHECK(expired.size() == 0); // an expired entry is dropped when read
}

TEST_CASE("sdk ttl_cache drops the oldest entry when full") {
  ttl_cache<int> cache{std::chrono::hours{1}, 3};
  cache.put("a", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds{1});
  cache.put("b", 2);
  std::this_thread::sleep_for(std::chrono::milliseconds{1});
  cache.put("c", 3);
  cache.put("b", 20); // replacing keeps the size
  CHECK(cache.size() == 3);
  cache.put("d", 4);
  CHECK(cache.size() == 3);
  CHECK_FALSE(cache.get("a"));
  CHECK(cache.get("b") == std::optional<int>{20});
  CHECK(cache.get("d") == std::optional<int>{4});
  ttl_cache<int> tiny{std::chrono::hours{1}, 0}; // at least one entry
  tiny.put("x", 1);
  tiny.put("y", 2);
  CHECK(tiny.size() == 1);
  CHECK(tiny.get("y") == std::optional<int>{2});
}

TEST_CASE("sdk ttl_cache is safe to use from several threads") {
  ttl_cache<int> cache{std::chrono::hours{1}, 64};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        auto key = std::to_string((i * 7 + t) % 100);
        cache.put(key, i);
        (void)cache.get(key);
      }
    });
  for (auto& th : threads)
    th.join();
  CHECK(cache.size() <= 64);
}

} // namespace sdk_ttl_cache_test
