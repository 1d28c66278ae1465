// The per-session emitter: sequence numbers, fan-out to several subscribers,
// replay for late subscribers, malformed packets, and the stop handshake.

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/runtime.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <future>
#include <mutex>

namespace emitter_test {

using namespace quarry;

namespace {

struct collected {
  std::mutex mtx;
  std::vector<std::pair<uint64_t, std::string>> lines;
  std::promise<uint64_t> ended;
};

actors::line_sink_actor collector(caf::actor_system& sys, std::shared_ptr<collected> c) {
  return actors::spawn_line_sink(
    sys,
    [c](const std::string& line, uint64_t seq) {
      std::lock_guard<std::mutex> guard{c->mtx};
      c->lines.emplace_back(seq, line);
    },
    [c](uint64_t count) { c->ended.set_value(count); });
}

} // namespace

TEST_CASE("emitter numbers packets, fans them out and replays them") {
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  actors::runtime rt{cfg};
  auto& sys = rt.system();
  auto em = actors::spawn_emitter(sys, "session-7");
  auto early = std::make_shared<collected>();
  caf::anon_send(em, actors::subscribe_atom::value, collector(sys, early), uint64_t{0});
  caf::scoped_actor self{sys};
  for (int i = 0; i < 50; ++i)
    self->send(em, actors::packet_atom::value,
               actors::make_packet({1, i % 3, i % 2 == 0 ? std::optional<int>{i} : std::nullopt},
                                   core::packets::message_delta(std::to_string(i))));
  auto bad = actors::make_packet({0, 0, std::nullopt}, {});
  bad.obj = "not json";
  self->send(em, actors::packet_atom::value, bad);
  // A late subscriber asking from packet 45 gets 45..51 and nothing before.
  auto late = std::make_shared<collected>();
  self->send(em, actors::subscribe_atom::value, collector(sys, late), uint64_t{45});
  uint64_t count = 0;
  self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
    .receive([&](uint64_t n) { count = n; }, [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(count == 51);
  auto f1 = early->ended.get_future();
  auto f2 = late->ended.get_future();
  REQUIRE(f1.wait_for(std::chrono::seconds{10}) == std::future_status::ready);
  REQUIRE(f2.wait_for(std::chrono::seconds{10}) == std::future_status::ready);
  CHECK(f1.get() == 51);
  CHECK(f2.get() == 51);
  REQUIRE(early->lines.size() == 51);
  for (size_t i = 0; i < 50; ++i) {
    CHECK(early->lines[i].first == i + 1);
    auto p = core::decode(early->lines[i].second);
    REQUIRE(std::holds_alternative<core::packet>(p));
    const auto& pk = std::get<core::packet>(p);
    CHECK(pk.seq == i + 1);
    CHECK(pk.session == "session-7");
    CHECK(pk.where.tab_index == static_cast<int>(i % 3));
    CHECK(pk.where.sub_turn_index.has_value() == (i % 2 == 0));
    CHECK(pk.obj["content"] == std::to_string(i));
  }
  auto last = std::get<core::packet>(core::decode(early->lines[50].second));
  CHECK(last.type() == "error");
  REQUIRE(late->lines.size() == 7);
  CHECK(late->lines.front().first == 45);
  CHECK(late->lines.front().second == early->lines[44].second);
  CHECK(late->lines.back().first == 51);
}

} // namespace emitter_test
