// The cluster's policies without CAF (core/cluster.hpp): node addresses,
// which worker runs the next agent, the time an agent placed again still
// has, and what a worker refuses.

#include "quarry/core/cluster.hpp"

#include <doctest/doctest.h>

namespace cluster_policy_test {

using namespace quarry;
using namespace std::chrono_literals;

TEST_CASE("cluster: node addresses are HOST:PORT, IPv6 in brackets") {
  auto a = core::parse_node_address("127.0.0.1:8701");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 8701);
  CHECK(a->text() == "127.0.0.1:8701");
  auto b = core::parse_node_address("[::1]:0");
  REQUIRE(b);
  CHECK(b->host == "::1");
  CHECK(b->port == 0);
  CHECK(b->text() == "[::1]:0");
  auto c = core::parse_node_address("worker-3.example:65535");
  REQUIRE(c);
  CHECK(c->host == "worker-3.example");
  for (const char* bad : {"", ":80", "host", "host:", "host:65536", "host:-1", "host:8x", "::1:80",
                          "[::1:80", "[]:80", "a b:80", "a/b:80"}) {
    CAPTURE(bad);
    CHECK_FALSE(core::parse_node_address(bad));
  }
}

TEST_CASE("cluster: loopback hosts are told from others") {
  CHECK(core::is_loopback_host("127.0.0.1"));
  CHECK(core::is_loopback_host("127.3.4.5"));
  CHECK(core::is_loopback_host("::1"));
  CHECK_FALSE(core::is_loopback_host("0.0.0.0"));
  CHECK_FALSE(core::is_loopback_host("10.1.2.3"));
  CHECK_FALSE(core::is_loopback_host("::"));
  // A name that does not resolve is not taken as loopback.
  CHECK_FALSE(core::is_loopback_host("no-such-host.invalid"));
}

namespace {

core::worker_view up(int capacity, int running, int outstanding,
                     std::vector<std::string> tools = {"internal_search"}) {
  core::worker_view w;
  w.up = true;
  w.capacity = capacity;
  w.running = running;
  w.outstanding = outstanding;
  w.tools = std::move(tools);
  return w;
}

} // namespace

TEST_CASE("cluster: the next agent goes to the worker with the fewest outstanding agents") {
  std::vector<std::string> needed{"internal_search"};
  std::vector<core::worker_view> ws{up(8, 0, 2), up(8, 0, 1), up(8, 0, 3)};
  CHECK(core::choose_worker(ws, needed) == 1u);
  // The worker's own count (agents of other sessions) counts too.
  ws[1].running = 5;
  CHECK(core::choose_worker(ws, needed) == 0u);
  // A tie goes to the first.
  std::vector<core::worker_view> tie{up(8, 1, 0), up(8, 0, 1)};
  CHECK(core::choose_worker(tie, needed) == 0u);
}

TEST_CASE("cluster: workers that are down, full, excluded, incompatible or lack a tool "
          "are not chosen") {
  std::vector<std::string> needed{"internal_search", "open_url"};
  auto all = std::vector<std::string>{"internal_search", "open_url"};
  std::vector<core::worker_view> ws{up(2, 0, 0, all), up(2, 2, 0, all), up(2, 0, 0, all),
                                    up(2, 0, 0, {"internal_search"}), up(2, 0, 0, all)};
  ws[0].up = false;
  ws[2].compatible = false;
  CHECK(core::choose_worker(ws, needed) == 4u);
  CHECK_FALSE(core::choose_worker(ws, needed, {4}));
  CHECK(core::missing_tools({"internal_search"}, needed) == std::vector<std::string>{"open_url"});
  // No worker at all: the agent runs on the session's node.
  CHECK_FALSE(core::choose_worker({}, needed));
}

TEST_CASE("cluster: an agent placed again keeps the time its first attempt had left") {
  core::agent_time_limits first{10min, 15min};
  auto later = core::limits_after(first, 4min);
  CHECK(later.force_report_after == 6min);
  CHECK(later.hard_timeout == 11min);
  // Past its report time it still gets a second to write the report.
  auto late = core::limits_after(first, 12min);
  CHECK(late.force_report_after == 1s);
  CHECK(late.hard_timeout == 3min);
  auto over = core::limits_after(first, 1h);
  CHECK(over.force_report_after == 1s);
  CHECK(over.hard_timeout == 1s);
  CHECK(core::worker_lost(5s, 5s));
  CHECK_FALSE(core::worker_lost(4999ms, 5s));
}

TEST_CASE("cluster: a worker refuses agent requests out of bounds, saying which") {
  core::agent_request_view ok;
  ok.task = "Why does efficiency drop?";
  ok.max_cycles = 8;
  ok.force_report_after = 12min;
  ok.hard_timeout = 20min;
  ok.context_tokens = 128000;
  ok.step_max_tokens = 1000;
  ok.report_max_tokens = 10000;
  CHECK(core::refuse_agent_request(ok).empty());
  auto bad = ok;
  bad.task = "";
  CHECK(core::refuse_agent_request(bad) == "the task is empty");
  bad = ok;
  bad.max_cycles = 0;
  CHECK(core::refuse_agent_request(bad).find("max_cycles 0") != std::string::npos);
  bad = ok;
  bad.hard_timeout = 48h;
  CHECK(core::refuse_agent_request(bad).find("time limit") != std::string::npos);
  bad = ok;
  bad.context_tokens = -1;
  CHECK(core::refuse_agent_request(bad).find("context_tokens") != std::string::npos);
  bad = ok;
  bad.report_max_tokens = 0;
  CHECK(core::refuse_agent_request(bad).find("token limit") != std::string::npos);
}

} // namespace cluster_policy_test
