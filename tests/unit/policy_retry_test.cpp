// Retries, backoff, stalls and deadline planning, in virtual time.

#include "quarry/core/clock.hpp"
#include "quarry/core/deadline.hpp"
#include "quarry/core/retry.hpp"

#include <doctest/doctest.h>

namespace policy_retry_test {

using namespace std::chrono_literals;
using quarry::core::manual_clock;
using quarry::core::retry_policy;
using quarry::core::retry_settings;
using quarry::sdk::errc;
using quarry::sdk::make_error;
using std::chrono::milliseconds;

namespace {

// A jitter source that always draws the same fraction of the bound.
quarry::core::jitter_source fraction(double f) {
  return [f](double bound) { return bound * f; };
}

} // namespace

TEST_CASE("retry: the backoff bound doubles per attempt up to the maximum") {
  manual_clock clk;
  retry_policy p{retry_settings{10, 500ms, 30s}, clk};
  CHECK(p.backoff_bound(1) == 500ms);
  CHECK(p.backoff_bound(2) == 1000ms);
  CHECK(p.backoff_bound(3) == 2000ms);
  CHECK(p.backoff_bound(6) == 16000ms);
  CHECK(p.backoff_bound(7) == 30000ms);
  CHECK(p.backoff_bound(100000) == 30000ms);
  retry_policy zero{retry_settings{10, 0ms, 30s}, clk};
  CHECK(zero.backoff_bound(100000) == 0ms); // never 0 * infinity
}

TEST_CASE("retry: full jitter stays within the bound and is reproducible from a seed") {
  manual_clock clk;
  auto deadline = clk.now() + 1h;
  retry_policy a{retry_settings{100, 1000ms, 8s}, clk, quarry::core::seeded_jitter(42)};
  retry_policy b{retry_settings{100, 1000ms, 8s}, clk, quarry::core::seeded_jitter(42)};
  bool varied = false;
  milliseconds first{-1};
  for (int attempt = 1; attempt <= 50; ++attempt) {
    auto x = a.after_failure(make_error(errc::server_error, "boom"), attempt, false, deadline);
    auto y = b.after_failure(make_error(errc::server_error, "boom"), attempt, false, deadline);
    REQUIRE(x.retry);
    CHECK(x.delay == y.delay);
    CHECK(x.delay >= 0ms);
    CHECK(x.delay <= a.backoff_bound(attempt));
    if (first.count() < 0)
      first = x.delay;
    else if (x.delay != first)
      varied = true;
  }
  CHECK(varied);
}

TEST_CASE("retry: retryable classes are retried until max_retries, then say how often") {
  manual_clock clk;
  retry_policy p{retry_settings{2, 100ms, 1s}, clk, fraction(1)};
  auto deadline = clk.now() + 10min;
  for (auto code : {errc::rate_limited, errc::overloaded, errc::server_error, errc::timeout,
                    errc::stall, errc::network}) {
    CAPTURE(quarry::sdk::to_string(code));
    auto d1 = p.after_failure(make_error(code, "x"), 1, false, deadline);
    CHECK(d1.retry);
    CHECK(d1.delay == 100ms);
    auto d2 = p.after_failure(make_error(code, "x"), 2, false, deadline);
    CHECK(d2.retry);
    CHECK(d2.delay == 200ms);
    auto d3 = p.after_failure(make_error(code, "x"), 3, false, deadline);
    CHECK_FALSE(d3.retry);
    CHECK(d3.failure.code == code);
    CHECK(d3.failure.message == "x (after 3 attempts)");
  }
}

TEST_CASE("retry: quota, cancellation and permanent classes are never retried") {
  manual_clock clk;
  retry_policy p{retry_settings{5, 100ms, 1s}, clk, fraction(0)};
  auto deadline = clk.now() + 10min;
  auto quota = make_error(errc::quota, "You exceeded your current quota", 429);
  quota.retry_hint = true; // even when the server says so
  quota.retry_after_ms = 10;
  auto d = p.after_failure(quota, 1, false, deadline);
  CHECK_FALSE(d.retry);
  CHECK(d.failure.message == "You exceeded your current quota"); // no note
  for (auto code :
       {errc::auth, errc::bad_request, errc::not_found, errc::context_too_long, errc::cancelled}) {
    CAPTURE(quarry::sdk::to_string(code));
    CHECK_FALSE(p.after_failure(make_error(code, "no"), 1, false, deadline).retry);
  }
  // The server's hint overrides the class's default otherwise.
  auto hinted = make_error(errc::server_error, "not this one");
  hinted.retry_hint = false;
  CHECK_FALSE(p.after_failure(hinted, 1, false, deadline).retry);
  auto empty = make_error(errc::auth, "");
  CHECK(p.after_failure(empty, 1, false, deadline).failure.message
        == quarry::sdk::to_string(errc::auth));
}

TEST_CASE("retry: nothing is retried once part of the answer streamed") {
  manual_clock clk;
  retry_policy p{retry_settings{5, 100ms, 1s}, clk, fraction(0)};
  auto d = p.after_failure(make_error(errc::network, "connection reset"), 1, true,
                           clk.now() + 10min);
  CHECK_FALSE(d.retry);
  CHECK(d.failure.message
        == "connection reset (not retried: part of the answer had already streamed)");
  // A stall after the first pieces is not retried either.
  auto s = p.after_failure(make_error(errc::stall, "no data for 60s"), 1, true, clk.now() + 10min);
  CHECK_FALSE(s.retry);
}

TEST_CASE("retry: Retry-After is honoured as the least delay") {
  manual_clock clk;
  retry_policy p{retry_settings{5, 100ms, 1s}, clk, fraction(1)};
  auto deadline = clk.now() + 10min;
  auto e = make_error(errc::rate_limited, "slow down", 429);
  e.retry_after_ms = 20000; // longer than any backoff step
  auto d = p.after_failure(e, 1, false, deadline);
  CHECK(d.retry);
  CHECK(d.delay == 20s);
  e.retry_after_ms = 10; // shorter: the backoff wins
  CHECK(p.after_failure(e, 1, false, deadline).delay == 100ms);
  e.retry_after_ms = -5; // nonsense from outside counts as none
  CHECK(p.after_failure(e, 1, false, deadline).delay == 100ms);
}

TEST_CASE("retry: never past the call's deadline") {
  manual_clock clk;
  retry_policy p{retry_settings{5, 1s, 1s}, clk, fraction(1)};
  auto deadline = clk.now() + 30s;
  auto e = make_error(errc::rate_limited, "slow down", 429);
  e.retry_after_ms = 60000; // Retry-After longer than the time left
  auto d = p.after_failure(e, 1, false, deadline);
  CHECK_FALSE(d.retry);
  CHECK(d.failure.code == errc::rate_limited);
  CHECK(d.failure.message == "slow down");
  // As time passes, even the plain backoff no longer fits.
  auto plain = make_error(errc::server_error, "oops");
  CHECK(p.after_failure(plain, 1, false, deadline).retry);
  clk.advance(29s);
  CHECK_FALSE(p.after_failure(plain, 1, false, deadline).retry); // 1 s == 1 s left
  clk.advance(999ms);
  CHECK_FALSE(p.after_failure(plain, 1, false, deadline).retry);
  // A huge Retry-After does not overflow.
  e.retry_after_ms = INT64_MAX;
  CHECK_FALSE(p.after_failure(e, 1, false, clk.now() + 1h).retry);
}

TEST_CASE("retry: zero retries means one attempt") {
  manual_clock clk;
  retry_policy p{retry_settings{0, 1s, 1s}, clk, fraction(0)};
  auto d = p.after_failure(make_error(errc::overloaded, "busy"), 1, false, clk.now() + 1h);
  CHECK_FALSE(d.retry);
  CHECK(d.failure.message == "busy (after 1 attempts)");
}

TEST_CASE("stall watch: an attempt stalls after the limit without a piece") {
  manual_clock clk;
  quarry::core::stall_watch w{60s, clk};
  CHECK_FALSE(w.stalled());
  CHECK(w.remaining() == 60s);
  clk.advance(45s);
  CHECK(w.idle() == 45s);
  CHECK(w.remaining() == 15s);
  w.activity(); // a piece arrived: the silence starts again
  CHECK(w.remaining() == 60s);
  clk.advance(59999ms);
  CHECK_FALSE(w.stalled());
  CHECK(w.remaining() == 1ms);
  clk.advance(1ms);
  CHECK(w.stalled());
  CHECK(w.remaining() == 0ms);
  clk.advance(1h);
  CHECK(w.remaining() == 0ms);
  auto e = w.failure();
  CHECK(e.code == errc::stall);
  CHECK(e.message == "no data for 1m"); // format_duration
  CHECK(e.retryable());
}

TEST_CASE("stall watch: a zero or negative limit stalls at once") {
  manual_clock clk;
  quarry::core::stall_watch zero{0ms, clk};
  CHECK(zero.stalled());
  quarry::core::stall_watch negative{-5s, clk};
  CHECK(negative.stalled());
  CHECK(negative.limit() == 0ms);
}

TEST_CASE("deadline: orchestrator cycles and the cycle kept for the report") {
  using quarry::core::final_cycle;
  using quarry::core::orchestrator_cycles;
  CHECK(orchestrator_cycles(0, false) == 8);
  CHECK(orchestrator_cycles(0, true) == 4);
  CHECK(orchestrator_cycles(-3, false) == 8);
  CHECK(orchestrator_cycles(5, true) == 5);
  CHECK_FALSE(final_cycle(0, 8));
  CHECK_FALSE(final_cycle(6, 8));
  CHECK(final_cycle(7, 8));
  CHECK(final_cycle(0, 1));
  CHECK(final_cycle(9, 8));
}

TEST_CASE("deadline: agents are told to report a fifth before the deadline, at most two minutes") {
  manual_clock clk;
  quarry::core::research_deadline thirty{30min, clk};
  CHECK(thirty.report_margin() == 2min);
  CHECK(thirty.report_after() == 28min);
  CHECK(thirty.deadline() == 30min);
  quarry::core::research_deadline five{5min, clk};
  CHECK(five.report_margin() == 1min);
  CHECK(five.report_after() == 4min);
  quarry::core::research_deadline tiny{1s, clk};
  CHECK(tiny.report_margin() == 200ms);
  CHECK(tiny.report_after() == 800ms);
  quarry::core::research_deadline none{0ms, clk};
  CHECK(none.report_after() == 0ms);
  CHECK(none.passed());
}

TEST_CASE("deadline: time left, elapsed seconds and an agent's budget") {
  manual_clock clk;
  quarry::core::research_deadline d{30min, clk};
  quarry::core::agent_time_limits configured{12min, 20min};
  auto early = d.agent_limits(configured);
  CHECK(early.force_report_after == 12min);
  CHECK(early.hard_timeout == 20min);
  clk.advance(25min);
  CHECK(d.elapsed() == 25min);
  CHECK(d.elapsed_seconds() == doctest::Approx(1500));
  CHECK(d.left() == 5min);
  CHECK_FALSE(d.passed());
  // An agent started late gets no more than the time left (and gives up a
  // second after the deadline).
  auto late = d.agent_limits(configured);
  CHECK(late.force_report_after == 5min);
  CHECK(late.hard_timeout == 5min + 1s);
  clk.advance(5min);
  CHECK(d.passed());
  clk.advance(1min);
  CHECK(d.left() == 0ms);
  auto after = d.agent_limits(configured);
  CHECK(after.force_report_after == 0ms);
  CHECK(after.hard_timeout == 1s);
}

TEST_CASE("deadline: an agent must report once its time is up") {
  manual_clock clk;
  quarry::core::agent_deadline a{{12min, 20min}, clk};
  CHECK(a.hard_timeout() == 20min);
  CHECK_FALSE(a.must_report());
  clk.advance(12min - 1ms);
  CHECK_FALSE(a.must_report());
  clk.advance(1ms);
  CHECK(a.must_report());
  CHECK(a.elapsed() == 12min);
  quarry::core::agent_deadline now{{0ms, 1s}, clk};
  CHECK(now.must_report());
}

TEST_CASE("deadline: limits far beyond the clock's range do not overflow") {
  manual_clock clk;
  quarry::core::agent_deadline a{{milliseconds::max(), milliseconds::max()}, clk};
  clk.advance(24h);
  CHECK_FALSE(a.must_report());
  quarry::core::research_deadline d{milliseconds::max(), clk};
  CHECK_FALSE(d.passed());
  CHECK(d.left() > 24h);
  auto limits = d.agent_limits({12min, 20min});
  CHECK(limits.force_report_after == 12min);
  CHECK(limits.hard_timeout == 20min);
  // A retry against a deadline at the end of time still decides.
  retry_policy p{retry_settings{3, 1s, 1s}, clk, fraction(1)};
  auto far = quarry::core::time_after(clk, milliseconds::max());
  CHECK(p.after_failure(make_error(errc::overloaded, "busy"), 1, false, far).retry);
}

} // namespace policy_retry_test
