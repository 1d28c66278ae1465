// The parallel limit of research agents, without actors.

#include "quarry/core/agent_dispatch.hpp"

#include <doctest/doctest.h>

namespace agent_dispatch_test {

using quarry::core::agent_dispatch;
using status = agent_dispatch::status;
using v = std::vector<size_t>;

TEST_CASE("agent dispatch: calls beyond the limit wait for a free slot and all run") {
  agent_dispatch d{2};
  for (int i = 0; i < 5; ++i)
    d.add();
  CHECK(d.start() == v{0, 1});
  CHECK(d.start().empty()); // no free slot
  CHECK(d.running() == 2);
  CHECK(d.waiting() == 3);
  CHECK(d.finish(1));
  CHECK_FALSE(d.finish(1)); // once
  CHECK(d.start() == v{2});
  CHECK(d.finish(0));
  CHECK(d.finish(2));
  CHECK(d.start() == v{3, 4});
  CHECK_FALSE(d.all_finished());
  CHECK(d.finish(3));
  CHECK(d.finish(4));
  CHECK(d.all_finished());
  CHECK(d.start().empty());
}

TEST_CASE("agent dispatch: one slot runs the calls one after another") {
  agent_dispatch d{1};
  d.add();
  d.add();
  d.add();
  for (size_t i = 0; i < 3; ++i) {
    CHECK(d.start() == v{i});
    CHECK(d.running() == 1);
    CHECK(d.finish(i));
  }
  CHECK(d.all_finished());
}

TEST_CASE("agent dispatch: waiting calls are dropped near the deadline, running ones finish") {
  agent_dispatch d{1};
  d.add();
  d.add();
  d.add();
  CHECK(d.start() == v{0});
  CHECK(d.drop_waiting() == v{1, 2});
  CHECK(d.at(1) == status::finished);
  CHECK(d.at(0) == status::running);
  CHECK_FALSE(d.all_finished());
  CHECK(d.start().empty());
  CHECK(d.finish(0));
  CHECK(d.all_finished());
  // A call that waits can also finish without running (a stop).
  d.reset(2);
  d.add();
  CHECK(d.finish(0));
  CHECK(d.start().empty());
}

TEST_CASE("agent dispatch: an empty turn is finished, limits below one mean one") {
  agent_dispatch d{0};
  CHECK(d.all_finished());
  d.add();
  d.add();
  CHECK(d.start() == v{0});
  d.finish_all();
  CHECK(d.all_finished());
  CHECK_FALSE(d.finish(7));
  CHECK(d.at(7) == status::finished);
}

} // namespace agent_dispatch_test
