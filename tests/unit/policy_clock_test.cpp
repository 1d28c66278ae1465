// The clocks, the rate limiter, adaptive concurrency and the call queue,
// in virtual time.

#include "quarry/core/call_queue.hpp"
#include "quarry/core/clock.hpp"
#include "quarry/core/concurrency.hpp"
#include "quarry/core/rate_limit.hpp"

#include <doctest/doctest.h>

#include <thread>

namespace policy_clock_test {

using namespace std::chrono_literals;
using quarry::core::adaptive_limit;
using quarry::core::manual_clock;
using quarry::core::rate_limiter;
using std::chrono::milliseconds;

TEST_CASE("clock: the manual clock moves only when told and never back") {
  manual_clock clk;
  auto t0 = clk.now();
  CHECK(clk.now() == t0);
  clk.advance(250ms);
  CHECK(clk.now() - t0 == 250ms);
  clk.advance(-10s);
  CHECK(clk.now() - t0 == 250ms);
  clk.advance(2h);
  CHECK(clk.now() - t0 == 2h + 250ms);
  manual_clock later{t0 + 1h};
  CHECK(later.now() - t0 == 1h);
}

TEST_CASE("clock: the real clock is steady") {
  const auto& clk = quarry::core::real_clock();
  auto a = clk.now();
  auto b = clk.now();
  CHECK(b >= a);
  CHECK(&clk == &quarry::core::real_clock());
}

TEST_CASE("rate limiter: no limits means no wait") {
  manual_clock clk;
  rate_limiter r{0, 0, clk};
  CHECK_FALSE(r.limited());
  for (int i = 0; i < 1000; ++i) {
    CHECK(r.wait_for(1'000'000) == 0ms);
    r.consume(1'000'000);
  }
}

TEST_CASE("rate limiter: requests per minute refill one request at a time") {
  manual_clock clk;
  rate_limiter r{60, 0, clk}; // one a second
  CHECK(r.limited());
  for (int i = 0; i < 60; ++i) {
    REQUIRE(r.wait_for(0) == 0ms);
    r.consume(0);
  }
  // The bucket is empty: the next request waits a whole second.
  CHECK(r.wait_for(0) == 1000ms);
  clk.advance(400ms);
  CHECK(r.wait_for(0) == 600ms);
  clk.advance(600ms);
  CHECK(r.wait_for(0) == 0ms);
  r.consume(0);
  CHECK(r.wait_for(0) == 1000ms);
  // A long pause never fills the bucket beyond its size.
  clk.advance(1h);
  CHECK(r.requests_available() == doctest::Approx(60));
}

TEST_CASE("rate limiter: tokens per minute wait for what the call takes") {
  manual_clock clk;
  rate_limiter r{0, 6000, clk}; // 100 tokens a second
  CHECK(r.wait_for(5000) == 0ms);
  r.consume(5000);
  CHECK(r.tokens_available() == doctest::Approx(1000));
  CHECK(r.wait_for(1000) == 0ms);
  // 2000 tokens with 1000 in the bucket: ten more seconds.
  CHECK(r.wait_for(2000) == 10000ms);
  clk.advance(5s);
  CHECK(r.wait_for(2000) == 5000ms);
  clk.advance(5s);
  CHECK(r.wait_for(2000) == 0ms);
}

TEST_CASE("rate limiter: a call larger than the whole bucket waits for a full bucket and runs") {
  manual_clock clk;
  rate_limiter r{0, 1000, clk};
  // Full at the start: the huge call may start now and empties the bucket.
  CHECK(r.wait_for(50'000) == 0ms);
  r.consume(50'000);
  CHECK(r.tokens_available() == doctest::Approx(0));
  // The next huge call waits one minute (a full bucket), not 50 minutes.
  CHECK(r.wait_for(50'000) == 60000ms);
  clk.advance(60s);
  CHECK(r.wait_for(50'000) == 0ms);
}

TEST_CASE("rate limiter: both limits: the longer wait wins, and waits round up") {
  manual_clock clk;
  rate_limiter r{2, 600, clk};
  r.consume(600); // one request left, no tokens
  CHECK(r.wait_for(0) == 0ms);
  CHECK(r.wait_for(1) == 100ms); // 10 tokens a second
  r.consume(0);
  // No request left: 30 s for the next one; 1 token would need 100 ms.
  CHECK(r.wait_for(1) == 30000ms);
  // 7 requests a minute: one request takes 8571.43 ms, rounded up.
  rate_limiter seven{7, 0, clk};
  for (int i = 0; i < 7; ++i)
    seven.consume(0);
  CHECK(seven.wait_for(0) == milliseconds{8572});
}

TEST_CASE("rate limiter: consuming overdraws the buckets, later calls wait longer") {
  manual_clock clk;
  rate_limiter r{60, 0, clk};
  for (int i = 0; i < 62; ++i)
    r.consume(0); // callers that did not ask
  CHECK(r.requests_available() == doctest::Approx(-2));
  CHECK(r.wait_for(0) == 3000ms);
}

TEST_CASE("rate limiter: a limit close to zero waits at most a year") {
  manual_clock clk;
  rate_limiter r{1e-300, 1e-300, clk};
  r.consume(10);
  CHECK(r.wait_for(10) == quarry::core::longest_rate_wait);
  rate_limiter negative{-5, -1, clk};
  CHECK_FALSE(negative.limited());
  CHECK(negative.wait_for(10) == 0ms);
}

TEST_CASE("rate limiter: the token estimate counts text, reasoning, tools and output") {
  quarry::sdk::chat_request req;
  CHECK(quarry::core::estimate_call_tokens(req) == 0);
  quarry::sdk::chat_message m;
  m.content = std::string(400, 'a');
  m.reasoning = std::string(40, 'b');
  req.messages.push_back(m);
  CHECK(quarry::core::estimate_call_tokens(req) == 110);
  req.max_tokens = 1000;
  CHECK(quarry::core::estimate_call_tokens(req) == 1110);
  req.max_tokens = -5; // unset
  CHECK(quarry::core::estimate_call_tokens(req) == 110);
  quarry::sdk::tool_definition t;
  t.description = std::string(38, 'c');
  t.parameters = nlohmann::json::object(); // "{}"
  req.tools.push_back(t);
  CHECK(quarry::core::estimate_call_tokens(req) == 120);
  // A schema with bytes that are not UTF-8 (a plugin's own schema) is
  // counted as written with U+FFFD, not thrown on.
  quarry::sdk::tool_definition bad;
  bad.parameters = nlohmann::json{{"x", std::string(37, 'd') + "\xff"}}; // {"x":"ddd...\uFFFD"}
  req.tools.push_back(bad);
  CHECK(quarry::core::estimate_call_tokens(req) == 132);
}

TEST_CASE("adaptive concurrency: halves on 429, never below 1, creeps back to the ceiling") {
  adaptive_limit l{16};
  CHECK(l.slots() == 16);
  l.on_rate_limited();
  CHECK(l.slots() == 8);
  l.on_rate_limited();
  l.on_rate_limited();
  l.on_rate_limited();
  CHECK(l.slots() == 1);
  l.on_rate_limited();
  CHECK(l.value() == doctest::Approx(1));
  CHECK(l.slots() == 1);
  // Additive increase: 1 -> 2 after one success, then about one slot per
  // `limit` successes.
  l.on_success();
  CHECK(l.value() == doctest::Approx(2));
  l.on_success();
  CHECK(l.slots() == 2); // 2.5
  l.on_success();
  CHECK(l.slots() == 2); // 2.9
  l.on_success();
  CHECK(l.slots() == 3); // 3.24...
  for (int i = 0; i < 1000; ++i)
    l.on_success();
  CHECK(l.value() == doctest::Approx(16));
  CHECK(l.slots() == 16);
}

TEST_CASE("adaptive concurrency: the ceiling is at least 1") {
  adaptive_limit zero{0};
  CHECK(zero.ceiling() == 1);
  CHECK(zero.slots() == 1);
  zero.on_success();
  CHECK(zero.slots() == 1);
  zero.on_rate_limited();
  CHECK(zero.slots() == 1);
  adaptive_limit three{3};
  three.on_rate_limited(); // 1.5
  CHECK(three.slots() == 1);
  three.on_success(); // 1.5 + 0.667
  CHECK(three.slots() == 2);
}

TEST_CASE("call queue: calls start in order while slots are free") {
  manual_clock clk;
  quarry::core::call_queue q{2, 0, 0, clk};
  for (uint64_t k = 1; k <= 4; ++k)
    q.push_back(k, 100);
  CHECK(q.next().start == std::optional<uint64_t>{1});
  CHECK(q.next().start == std::optional<uint64_t>{2});
  auto full = q.next();
  CHECK_FALSE(full.start);
  CHECK(full.wait == 0ms); // waits for a slot, not for the rate
  CHECK(q.running() == 2);
  CHECK(q.waiting() == 2);
  q.release();
  CHECK(q.next().start == std::optional<uint64_t>{3});
  // A retry goes to the front.
  q.release();
  q.push_front(9, 100);
  CHECK(q.next().start == std::optional<uint64_t>{9});
  CHECK_FALSE(q.next().start);
  CHECK(q.remove(4));
  CHECK_FALSE(q.remove(4));
  q.release();
  CHECK_FALSE(q.next().start); // empty
  q.release();
  q.release();
  q.release(); // never below zero
  CHECK(q.running() == 0);
}

TEST_CASE("call queue: a 429 halves the slots and successes bring them back") {
  manual_clock clk;
  quarry::core::call_queue q{4, 0, 0, clk};
  for (uint64_t k = 1; k <= 10; ++k)
    q.push_back(k, 1);
  for (int i = 0; i < 4; ++i)
    REQUIRE(q.next().start);
  // Two calls hit a rate limit: the limit goes 4 -> 2 -> 1.
  q.release();
  q.on_rate_limited();
  q.release();
  q.on_rate_limited();
  CHECK(q.limit().slots() == 1);
  CHECK_FALSE(q.next().start); // two still run
  q.release();
  q.release();
  CHECK(q.next().start == std::optional<uint64_t>{5});
  CHECK_FALSE(q.next().start); // one slot only
  q.release();
  q.on_success(); // 1 -> 2
  CHECK(q.next().start);
  CHECK(q.next().start);
  CHECK_FALSE(q.next().start);
}

TEST_CASE("call queue: the rate limits hold the first call and say for how long") {
  manual_clock clk;
  quarry::core::call_queue q{8, 60, 0, clk}; // one request a second
  for (uint64_t k = 1; k <= 62; ++k)
    q.push_back(k, 0);
  for (uint64_t k = 1; k <= 60; ++k) {
    auto s = q.next();
    REQUIRE(s.start == std::optional<uint64_t>{k});
    q.release();
  }
  auto held = q.next();
  CHECK_FALSE(held.start);
  CHECK(held.wait == 1000ms);
  clk.advance(500ms);
  CHECK(q.next().wait == 500ms);
  clk.advance(500ms);
  CHECK(q.next().start == std::optional<uint64_t>{61});
  // A full slot list reports no rate wait, whatever the buckets hold.
  quarry::core::call_queue one{1, 1, 0, clk};
  one.push_back(1, 0);
  one.push_back(2, 0);
  CHECK(one.next().start);
  auto s = one.next();
  CHECK_FALSE(s.start);
  CHECK(s.wait == 0ms);
  one.release();
  CHECK(one.next().wait == 60000ms);
}

TEST_CASE("call queue: a call larger than the token bucket still runs, after a full minute") {
  manual_clock clk;
  quarry::core::call_queue q{8, 0, 1000, clk};
  q.push_back(1, 5000);
  q.push_back(2, 5000);
  CHECK(q.next().start == std::optional<uint64_t>{1});
  auto s = q.next();
  CHECK_FALSE(s.start);
  CHECK(s.wait == 60000ms);
  clk.advance(60s);
  CHECK(q.next().start == std::optional<uint64_t>{2});
}

TEST_CASE("clock: a deadline however far away never wraps around") {
  manual_clock clk;
  using quarry::core::time_after;
  CHECK(time_after(clk, 5s) - clk.now() == 5s);
  CHECK(time_after(clk, -5s) == clk.now());
  CHECK(time_after(clk, milliseconds::max()) == quarry::core::clock::time_point::max());
  CHECK(time_after(clk, milliseconds{INT64_MAX / 1000}) // beyond nanoseconds' range
        == quarry::core::clock::time_point::max());
  CHECK(time_after(clk, 24h * 365) > clk.now());
}

} // namespace policy_clock_test
