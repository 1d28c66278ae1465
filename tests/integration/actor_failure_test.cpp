// An actor whose handler throws fails the requests it still owes an answer,
// instead of leaving its requesters waiting forever.

#include "quarry/actors/actor_failure.hpp"
#include "quarry/actors/runtime.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

namespace actor_failure_test {

using namespace quarry;

namespace {

using hold_atom = caf::atom_constant<caf::atom("hold")>;
using boom_atom = caf::atom_constant<caf::atom("boom")>;

using holder_actor
  = caf::typed_actor<caf::replies_to<hold_atom>::with<bool>, caf::reacts_to<boom_atom>>;

struct holder_state {
  std::vector<caf::typed_response_promise<bool>> pending;
  static inline const char* name = "test.holder";
};

holder_actor::behavior_type holder(holder_actor::stateful_pointer<holder_state> self) {
  actors::detail::on_exception_fail_pending(self, "test holder", [self](const std::string& why) {
    for (auto& rp : self->state.pending)
      rp.deliver(caf::make_error(caf::sec::runtime_error, "holder failed: " + why));
    self->state.pending.clear();
  });
  return {
    [=](hold_atom) -> caf::result<bool> {
      // Answered later, or never.
      auto rp = self->make_response_promise<bool>();
      self->state.pending.push_back(rp);
      return rp;
    },
    [=](boom_atom) { throw std::runtime_error("a handler threw"); },
  };
}

} // namespace

TEST_CASE("an actor that dies of an exception fails its pending requests") {
  core::settings cfg;
  actors::runtime rt{cfg};
  auto h = rt.system().spawn(holder);
  caf::scoped_actor self{rt.system()};
  self->monitor(h);
  // A request waits for an answer the holder never gives on its own; then
  // a handler throws.
  auto pending = self->request(h, std::chrono::seconds{10}, hold_atom::value);
  self->send(h, boom_atom::value);
  std::string failure;
  pending.receive([&](bool) { FAIL("the holder answered"); },
                  [&](caf::error& err) { failure = caf::to_string(err); });
  CHECK(failure.find("holder failed: a handler threw") != std::string::npos);
  self->receive(
    [&](const caf::down_msg& dm) { CHECK(dm.reason == caf::exit_reason::unhandled_exception); },
    caf::after(std::chrono::seconds{10}) >> [&] { FAIL("the holder did not end"); });
}

} // namespace actor_failure_test
