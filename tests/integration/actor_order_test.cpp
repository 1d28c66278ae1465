// Orderings that the real scheduler leaves to chance, pinned down with CAF's
// deterministic test coordinator (caf/test/dsl.hpp): which message an actor
// handles next is chosen by the test, and time moves only when the test
// advances the clock. The plugins are fakes that hold on to their sinks, so
// a test decides when a plugin's answer arrives relative to a cancel, a stop
// or a time limit.

#define CAF_SUITE actor_order
#include "caf_dsl.hpp"

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/message_types.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/research_requests.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace quarry;
using namespace std::chrono_literals;

namespace {

// -- fakes --------------------------------------------------------------------

struct fake_call final : sdk::chat_call {
  int cancels = 0;

  void cancel() override {
    ++cancels;
  }
};

// An LLM plugin that answers only when the test calls its sinks.
struct fake_llm final : sdk::llm_provider {
  std::vector<std::pair<std::shared_ptr<sdk::chat_sink>, std::shared_ptr<fake_call>>> calls;
  /// The role tag of each call (`plan`, `orchestrate`, `final`, ...).
  std::vector<std::string> roles;

  sdk::model_info info() const override {
    return {"fake", 1000, true, false, ""};
  }

  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request req,
                                       std::shared_ptr<sdk::chat_sink> sink) override {
    roles.push_back(req.role_tag);
    auto call = std::make_shared<fake_call>();
    calls.emplace_back(std::move(sink), call);
    return call;
  }
};

struct fake_run final : sdk::tool_run {
  int cancels = 0;

  void cancel() override {
    ++cancels;
  }
};

// A tool plugin that finishes a run only when the test calls its callback.
struct fake_tool final : sdk::tool {
  std::vector<std::pair<sdk::tool_callback, std::shared_ptr<fake_run>>> runs;

  std::string name() const override {
    return "slow_tool";
  }

  std::string description() const override {
    return "Finishes when the test says so.";
  }

  nlohmann::json parameters() const override {
    return nlohmann::json::object();
  }

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json&, sdk::tool_callback done) override {
    auto r = std::make_shared<fake_run>();
    runs.emplace_back(std::move(done), r);
    return r;
  }
};

struct order_config : caf::actor_system_config {
  order_config() {
    actors::register_message_types(*this);
  }
};

// Collects what a line sink receives.
struct lines {
  std::vector<std::pair<uint64_t, std::string>> got;
  std::vector<uint64_t> ends;
};

struct order_fixture : test_coordinator_fixture<order_config> {
  order_fixture() {
    sys.await_actors_before_shutdown(false);
  }

  actors::line_sink_actor sink_into(const std::shared_ptr<lines>& out) {
    return actors::spawn_line_sink(
      sys, [out](const std::string& line, uint64_t seq) { out->got.emplace_back(seq, line); },
      [out](uint64_t n) { out->ends.push_back(n); });
  }

  static actors::packet_msg packet(const std::string& content) {
    return actors::make_packet({1, 0, std::nullopt}, core::packets::message_delta(content));
  }

  static sdk::chat_request hello() {
    sdk::chat_request req;
    sdk::chat_message m;
    m.content = "Hallo";
    req.messages.push_back(m);
    return req;
  }

  actors::llm_provider_actor llm(std::shared_ptr<fake_llm> plugin, int concurrency) {
    actors::llm_actor_settings s;
    s.name = "fake";
    s.max_concurrency = concurrency;
    s.max_retries = 0;
    // Longer than any session test advances the clock: only the session's
    // own deadline ends a call.
    s.stall_timeout = std::chrono::hours{2};
    s.total_timeout = std::chrono::hours{2};
    return actors::spawn_llm_provider(sys, std::move(plugin), s);
  }

  // A session without clarification or tools, every role on `model`; its
  // result comes to the scoped actor.
  actors::session_actor session(const actors::llm_provider_actor& model,
                                const actors::emitter_actor& em,
                                std::chrono::milliseconds deadline) {
    actors::session_spec spec;
    spec.session_id = "virtual";
    spec.question = "Wie kommen Wärmepumpen mit Kälte zurecht?";
    spec.clarify = false;
    spec.deadline = deadline;
    spec.final_report_timeout = std::chrono::minutes{5};
    spec.current_datetime = "Sunday November 22, 2026";
    actors::session_models models{model, model, model, model, model};
    return actors::spawn_research_session(
      sys, std::move(spec), models, actors::tool_set{}, em,
      std::make_shared<core::prompt_library>(core::prompt_library::embedded()),
      caf::actor_cast<actors::session_requester_actor>(self));
  }

  // Handles the next message in the scoped actor's mailbox with `f`; fails
  // the test if there is none (nothing is pending once the coordinator has
  // run).
  template <class... Fs>
  void next(Fs... fs) {
    self->receive(
      fs..., caf::after(0s) >> [] { CAF_FAIL("an expected message is missing"); });
  }

  // Whether the scoped actor's mailbox is empty.
  bool nothing_more() {
    return self->mailbox().empty();
  }

  sdk::error next_error() {
    sdk::error out;
    next([&](caf::error& err) { out = actors::from_caf_error(err); });
    return out;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(actor_order_tests, order_fixture)

// -- emitter ------------------------------------------------------------------

QUARRY_CAF_TEST(emitter numbers packets in mailbox order and a late subscriber misses nothing) {
  auto em = actors::spawn_emitter(sys, "s-1");
  auto early = std::make_shared<lines>();
  auto late = std::make_shared<lines>();
  auto a = sink_into(early);
  auto b = sink_into(late);
  self->send(em, actors::subscribe_atom::value, a, uint64_t{0});
  self->send(em, actors::packet_atom::value, packet("eins"));
  self->send(em, actors::packet_atom::value, packet("zwei"));
  expect((actors::subscribe_atom, actors::line_sink_actor, uint64_t),
         from(self).to(em).with(_, a, uint64_t{0}));
  expect((actors::packet_atom, actors::packet_msg), from(self).to(em));
  expect((actors::packet_atom, std::string, uint64_t), from(_).to(a).with(_, _, uint64_t{1}));
  expect((actors::packet_atom, actors::packet_msg), from(self).to(em));
  expect((actors::packet_atom, std::string, uint64_t), from(_).to(a).with(_, _, uint64_t{2}));
  // The late subscriber asks from 2 while packet 3 waits behind its
  // subscription: it gets 2 replayed, then 3 live, and nothing twice.
  self->send(em, actors::subscribe_atom::value, b, uint64_t{2});
  self->send(em, actors::packet_atom::value, packet("drei"));
  expect((actors::subscribe_atom, actors::line_sink_actor, uint64_t),
         from(self).to(em).with(_, b, uint64_t{2}));
  expect((actors::packet_atom, std::string, uint64_t), from(_).to(b).with(_, _, uint64_t{2}));
  expect((actors::packet_atom, actors::packet_msg), from(self).to(em));
  expect((actors::packet_atom, std::string, uint64_t), from(_).to(a).with(_, _, uint64_t{3}));
  expect((actors::packet_atom, std::string, uint64_t), from(_).to(b).with(_, _, uint64_t{3}));
  // Stop: the count goes to the requester and to every subscriber, after
  // the last packet.
  self->send(em, actors::stop_atom::value);
  expect((actors::stop_atom), from(self).to(em));
  expect((actors::stop_atom, uint64_t), from(_).to(a).with(_, uint64_t{3}));
  expect((actors::stop_atom, uint64_t), from(_).to(b).with(_, uint64_t{3}));
  // The answers: the first seq each subscriber gets, then the count.
  next([](uint64_t n) { CAF_CHECK_EQUAL(n, 1u); });
  next([](uint64_t n) { CAF_CHECK_EQUAL(n, 2u); });
  next([](uint64_t n) { CAF_CHECK_EQUAL(n, 3u); });
  CAF_REQUIRE_EQUAL(early->got.size(), 3u);
  CAF_REQUIRE_EQUAL(late->got.size(), 2u);
  CAF_CHECK_EQUAL(late->got[0].second, early->got[1].second);
  CAF_CHECK_EQUAL(late->got[1].second, early->got[2].second);
  CAF_CHECK(early->got[2].second.find("drei") != std::string::npos);
  CAF_CHECK_EQUAL(early->ends, std::vector<uint64_t>{3});
  CAF_CHECK_EQUAL(late->ends, std::vector<uint64_t>{3});
}

// -- citation collector -------------------------------------------------------

QUARRY_CAF_TEST(citation collector answers rounds and digests in the order they were asked) {
  auto coll = actors::spawn_citation_collector(sys);
  auto doc = [](const std::string& id) {
    sdk::document d;
    d.id = id;
    d.url = "https://example.org/" + id;
    d.title = "Doc " + id;
    return d;
  };
  auto round = [&](const std::string& task, const std::string& text,
                   std::vector<std::pair<int, sdk::document>> cited) {
    actors::collapse_request req;
    actors::agent_result r;
    r.ok = true;
    r.report = text;
    r.cited = std::move(cited);
    req.reports.emplace_back(task, std::move(r));
    return req;
  };
  // Round B is asked for before round A's digest is read: the digest sent
  // between them must hold A only, and B's numbers continue A's.
  self->send(coll, actors::collapse_atom::value,
             round("Aufgabe A", "Erstens [1].", {{1, doc("a")}}));
  self->send(coll, actors::digest_atom::value);
  self->send(coll, actors::collapse_atom::value,
             round("Aufgabe B", "Neu [1], alt [2].", {{1, doc("b")}, {2, doc("a")}}));
  self->send(coll, actors::digest_atom::value);
  expect((actors::collapse_atom, actors::collapse_request), from(self).to(coll));
  expect((actors::digest_atom), from(self).to(coll));
  expect((actors::collapse_atom, actors::collapse_request), from(self).to(coll));
  expect((actors::digest_atom), from(self).to(coll));
  next([](actors::collapse_reply& r) {
    CAF_REQUIRE_EQUAL(r.texts.size(), 1u);
    CAF_CHECK_EQUAL(r.texts[0], "Erstens [1].");
  });
  next([](std::string& digest) {
    CAF_CHECK(digest.find("Aufgabe A") != std::string::npos);
    CAF_CHECK(digest.find("Aufgabe B") == std::string::npos);
  });
  next([](actors::collapse_reply& r) {
    CAF_REQUIRE_EQUAL(r.texts.size(), 1u);
    CAF_CHECK_EQUAL(r.texts[0], "Neu [2], alt [1].");
    CAF_CHECK_EQUAL(r.global.size(), 2u);
    CAF_CHECK_EQUAL(r.findings.size(), 2u);
  });
  next([](std::string& digest) {
    CAF_CHECK(digest.find("Aufgabe A") != std::string::npos);
    CAF_CHECK(digest.find("Aufgabe B") != std::string::npos);
  });
  CAF_CHECK(nothing_more());
  anon_send_exit(coll, caf::exit_reason::user_shutdown);
}

// -- LLM provider: cancel and stop races --------------------------------------

QUARRY_CAF_TEST(llm provider a cancel that overtakes the answer fails the call once and the late
                  answer is dropped) {
  auto plugin = std::make_shared<fake_llm>();
  auto hdl = llm(plugin, 4);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, hello()});
  expect((actors::chat_atom, actors::llm_call), from(self).to(hdl));
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto sink_call = plugin->calls[0];
  auto& sink = sink_call.first;
  auto& call = sink_call.second;
  sink->on_text("Hal");
  // The actor takes what the sink queued ("Hal"); the answer comes after
  // the cancel and posts anew.
  expect((actors::llm_sink_atom, uint64_t, uint64_t), from(_).to(hdl));
  self->send(hdl, actors::cancel_atom::value, uint64_t{1});
  sdk::chat_result done;
  done.text = "Hallo zurück";
  sink->on_done(done); // arrives after the cancel
  expect((actors::cancel_atom, uint64_t), from(self).to(hdl).with(_, uint64_t{1}));
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1); // cancel() may repeat
  expect((actors::llm_sink_atom, uint64_t, uint64_t), from(_).to(hdl));
  next([](actors::delta_atom, actors::llm_deltas& ds) {
    CAF_REQUIRE_EQUAL(ds.size(), 1u);
    CAF_CHECK_EQUAL(ds[0].call_id, 1u);
    CAF_CHECK_EQUAL(ds[0].text, "Hal");
  });
  CAF_CHECK(next_error().code == sdk::errc::cancelled);
  CAF_CHECK(nothing_more()); // no reply for the dropped answer
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

QUARRY_CAF_TEST(
  llm provider an answer that overtakes the cancel is delivered and the cancel does nothing) {
  auto plugin = std::make_shared<fake_llm>();
  auto hdl = llm(plugin, 4);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{7, hello()});
  expect((actors::chat_atom, actors::llm_call), from(self).to(hdl));
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto sink_call = plugin->calls[0];
  auto& sink = sink_call.first;
  auto& call = sink_call.second;
  sdk::chat_result done;
  done.text = "Hallo zurück";
  sink->on_done(done);
  self->send(hdl, actors::cancel_atom::value, uint64_t{7});
  expect((actors::llm_sink_atom, uint64_t, uint64_t), from(_).to(hdl));
  expect((actors::cancel_atom, uint64_t), from(self).to(hdl));
  CAF_CHECK_EQUAL(call->cancels, 0);
  next([](actors::llm_reply& r) {
    CAF_CHECK_EQUAL(r.call_id, 7u);
    CAF_CHECK_EQUAL(r.result.text, "Hallo zurück");
    CAF_CHECK_EQUAL(r.provider, "fake");
  });
  CAF_CHECK(nothing_more());
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

QUARRY_CAF_TEST(llm provider takes a burst of plugin callbacks with one message and passes the
                  pieces on in one message before the reply) {
  auto plugin = std::make_shared<fake_llm>();
  auto hdl = llm(plugin, 4);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{5, hello()});
  expect((actors::chat_atom, actors::llm_call), from(self).to(hdl));
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto& sink = plugin->calls[0].first;
  // Everything a network read may hold, before the actor looks.
  sink->on_reasoning("Denke");
  sink->on_text("Hal");
  sdk::tool_call_delta tool;
  tool.index = 0;
  tool.name = "web_search";
  sink->on_tool_call(tool);
  sink->on_text("lo");
  sdk::usage counts;
  counts.output_tokens = 4;
  sink->on_usage(counts);
  sdk::chat_result done;
  done.text = "Hallo";
  sink->on_done(done);
  sink->on_text(" late"); // after the end: a plugin bug, dropped
  expect((actors::llm_sink_atom, uint64_t, uint64_t), from(_).to(hdl).with(_, _, _));
  // One message for the whole burst (the event after the end posts none:
  // the attempt is closed).
  CAF_CHECK(!sched.has_job());
  next([](actors::delta_atom, actors::llm_deltas& ds) {
    CAF_REQUIRE_EQUAL(ds.size(), 5u);
    CAF_CHECK(ds[0].kind == actors::delta_kind::reasoning);
    CAF_CHECK_EQUAL(ds[0].text, "Denke");
    CAF_CHECK(ds[1].kind == actors::delta_kind::text);
    CAF_CHECK_EQUAL(ds[1].text, "Hal");
    CAF_CHECK(ds[2].kind == actors::delta_kind::tool_call);
    CAF_CHECK_EQUAL(ds[2].tool.name, "web_search");
    CAF_CHECK_EQUAL(ds[3].text, "lo");
    CAF_CHECK(ds[4].kind == actors::delta_kind::usage);
    CAF_CHECK_EQUAL(ds[4].counts.output_tokens, 4);
    for (const auto& d : ds)
      CAF_CHECK_EQUAL(d.call_id, 5u);
  });
  next([](actors::llm_reply& r) { CAF_CHECK_EQUAL(r.result.text, "Hallo"); });
  CAF_CHECK(nothing_more());
  // The call is over: a later callback posts nothing.
  sink->on_text("again");
  CAF_CHECK(!sched.has_job());
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

QUARRY_CAF_TEST(llm provider measures a stall on the actor system clock so data that keeps coming
                  holds it off in virtual time) {
  auto plugin = std::make_shared<fake_llm>();
  actors::llm_actor_settings cfg;
  cfg.name = "fake";
  cfg.max_retries = 0;
  cfg.stall_timeout = std::chrono::minutes{1};
  cfg.total_timeout = std::chrono::hours{2};
  auto hdl = actors::spawn_llm_provider(sys, plugin, cfg);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{3, hello()});
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto sink_call = plugin->calls[0];
  auto& sink = sink_call.first;
  auto& call = sink_call.second;
  auto piece = [&](const char* text) {
    sink->on_text(text);
    consume_messages();
    next([&](actors::delta_atom, actors::llm_deltas& ds) {
      CAF_REQUIRE_EQUAL(ds.size(), 1u);
      CAF_CHECK_EQUAL(ds[0].text, text);
    });
  };
  piece("Hal");
  // Data 50 s later: the check at one minute finds the call idle for 10 s
  // only and waits for the rest of the minute.
  advance_time(50s);
  consume_messages();
  piece("lo");
  advance_time(10s);
  consume_messages();
  CAF_CHECK(nothing_more());
  CAF_CHECK_EQUAL(call->cancels, 0);
  advance_time(49s);
  consume_messages();
  CAF_CHECK(nothing_more());
  // A full minute without data: the call fails as stalled.
  advance_time(1s);
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1);
  auto err = next_error();
  CAF_CHECK(err.code == sdk::errc::stall);
  CAF_CHECK(err.message.find("no data for 1m") != std::string::npos);
  CAF_CHECK(nothing_more());
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

QUARRY_CAF_TEST(llm provider fails each call at its own deadline in virtual time while data keeps
                  its attempt from stalling) {
  auto plugin = std::make_shared<fake_llm>();
  actors::llm_actor_settings cfg;
  cfg.name = "fake";
  cfg.max_retries = 0;
  cfg.max_concurrency = 2;
  cfg.stall_timeout = std::chrono::minutes{1};
  cfg.total_timeout = std::chrono::minutes{5};
  auto hdl = actors::spawn_llm_provider(sys, plugin, cfg);
  // The pieces that came (skipped) and the errors (kept).
  std::vector<sdk::error> errors;
  auto drain = [&] {
    while (!nothing_more())
      next([&](actors::delta_atom, actors::llm_deltas&) {},
           [&](caf::error& err) { errors.push_back(actors::from_caf_error(err)); });
  };
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, hello()});
  consume_messages();
  // The second call comes two minutes later (its deadline is its own);
  // pieces at 0:50 and 1:40 keep the first from stalling meanwhile.
  for (int i = 0; i < 2; ++i) {
    advance_time(50s);
    consume_messages();
    plugin->calls[0].first->on_text("a");
    consume_messages();
    drain();
  }
  advance_time(20s);
  consume_messages();
  self->send(hdl, actors::chat_atom::value, actors::llm_call{2, hello()});
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 2u);
  auto first = plugin->calls[0];
  auto second = plugin->calls[1];
  // Data every 50 s keeps both attempts from stalling: 2:00 to 6:10.
  for (int i = 0; i < 5; ++i) {
    first.first->on_text("a");
    second.first->on_text("b");
    consume_messages();
    drain();
    advance_time(50s);
    consume_messages();
  }
  drain();
  // The first failed at its deadline (5:00), the second goes on.
  CAF_CHECK_GREATER_OR_EQUAL(first.second->cancels, 1);
  CAF_CHECK_EQUAL(second.second->cancels, 0);
  CAF_REQUIRE_EQUAL(errors.size(), 1u);
  CAF_CHECK(errors[0].code == sdk::errc::timeout);
  CAF_CHECK(errors[0].message.find("no complete answer within 5m") != std::string::npos);
  // The second's deadline: 7:00.
  second.first->on_text("c");
  consume_messages();
  drain();
  advance_time(45s);
  consume_messages();
  drain();
  CAF_CHECK_EQUAL(second.second->cancels, 0);
  CAF_CHECK_EQUAL(errors.size(), 1u);
  advance_time(5s);
  consume_messages();
  drain();
  CAF_CHECK_GREATER_OR_EQUAL(second.second->cancels, 1);
  CAF_REQUIRE_EQUAL(errors.size(), 2u);
  CAF_CHECK(errors[1].code == sdk::errc::timeout);
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

QUARRY_CAF_TEST(
  llm provider stop fails the running and the queued call and drops what the plugin sends later) {
  auto plugin = std::make_shared<fake_llm>();
  auto hdl = llm(plugin, 1);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, hello()});
  self->send(hdl, actors::chat_atom::value, actors::llm_call{2, hello()});
  expect((actors::chat_atom, actors::llm_call), from(self).to(hdl));
  expect((actors::chat_atom, actors::llm_call), from(self).to(hdl));
  // One slot: the second call waits.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto sink_call = plugin->calls[0];
  auto& sink = sink_call.first;
  auto& call = sink_call.second;
  self->send(hdl, actors::stop_atom::value);
  sink->on_text("zu spät");
  expect((actors::stop_atom), from(self).to(hdl));
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1); // cancel() may repeat
  CAF_CHECK_EQUAL(plugin->calls.size(), 1u);    // the queued call never started
  consume_messages();                           // the late piece goes nowhere
  CAF_CHECK(next_error().code == sdk::errc::cancelled);
  CAF_CHECK(next_error().code == sdk::errc::cancelled);
  CAF_CHECK(nothing_more());
}

// -- tool provider: time limit in virtual time --------------------------------

QUARRY_CAF_TEST(tool provider answers a run past its time limit with a timeout starts the queued
                  run and drops the late result) {
  auto plugin = std::make_shared<fake_tool>();
  actors::tool_actor_settings s;
  s.name = "slow_tool";
  s.max_concurrency = 1;
  s.timeout = 30s;
  s.cache_ttl = 0ms;
  auto hdl = actors::spawn_tool_provider(sys, plugin, s);
  self->send(hdl, actors::run_atom::value, actors::tool_call_msg{1, "{}"});
  self->send(hdl, actors::run_atom::value, actors::tool_call_msg{2, "{}"});
  expect((actors::run_atom, actors::tool_call_msg), from(self).to(hdl));
  expect((actors::run_atom, actors::tool_call_msg), from(self).to(hdl));
  CAF_REQUIRE_EQUAL(plugin->runs.size(), 1u);
  // Just before the limit nothing happens; at the limit the first run ends.
  advance_time(29s);
  CAF_CHECK_EQUAL(consume_messages(), 0u);
  advance_time(1s);
  expect((actors::tool_timeout_atom, uint64_t), from(_).to(hdl));
  CAF_CHECK_EQUAL(plugin->runs[0].second->cancels, 1);
  next([](actors::tool_reply& r) {
    CAF_CHECK_EQUAL(r.id, 1u);
    CAF_REQUIRE(r.result.failure.has_value());
    CAF_CHECK(r.result.failure->code == sdk::errc::timeout);
    CAF_CHECK(r.result.llm_text.find("did not finish within 30s") != std::string::npos);
  });
  // The freed slot starts the second run.
  CAF_REQUIRE_EQUAL(plugin->runs.size(), 2u);
  sdk::tool_result late;
  late.llm_text = "zu spät";
  plugin->runs[0].first(late);
  expect((actors::tool_done_atom, actors::tool_done_event), from(_).to(hdl));
  CAF_CHECK(nothing_more());
  sdk::tool_result second;
  second.llm_text = "rechtzeitig";
  plugin->runs[1].first(second);
  expect((actors::tool_done_atom, actors::tool_done_event), from(_).to(hdl));
  next([](actors::tool_reply& r) {
    CAF_CHECK_EQUAL(r.id, 2u);
    CAF_CHECK_EQUAL(r.result.llm_text, "rechtzeitig");
    CAF_CHECK(!r.result.failure);
  });
  CAF_CHECK(nothing_more());
  anon_send(hdl, actors::stop_atom::value);
  consume_messages();
}

// -- research agent: hard time limit in virtual time --------------------------

QUARRY_CAF_TEST(
  research agent past its hard time limit cancels its model call and reports the failure once) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  actors::agent_spec spec;
  spec.call_id = "call_1";
  spec.task = "Wie taut eine Wärmepumpe ab?";
  spec.tab_index = 2;
  spec.force_report_after = std::chrono::minutes{12};
  spec.hard_timeout = std::chrono::minutes{20};
  spec.current_datetime = "Sunday November 22, 2026";
  auto agent = actors::spawn_research_agent(
    sys, spec, model, actors::tool_set{}, em,
    std::make_shared<core::prompt_library>(core::prompt_library::embedded()),
    caf::actor_cast<actors::agent_parent_actor>(self));
  consume_messages();
  // The first research step is with the model, which never answers.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto call = plugin->calls[0].second;
  advance_time(std::chrono::minutes{20} - std::chrono::milliseconds{1});
  consume_messages();
  CAF_CHECK(nothing_more());
  CAF_CHECK_EQUAL(call->cancels, 0);
  advance_time(std::chrono::milliseconds{1});
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1);
  next([](actors::agent_done_atom, actors::agent_result& r) {
    CAF_CHECK_EQUAL(r.call_id, "call_1");
    CAF_CHECK_EQUAL(r.tab_index, 2);
    CAF_CHECK(!r.ok);
    CAF_CHECK(r.failure.find("ran out of time") != std::string::npos);
  });
  CAF_CHECK(nothing_more()); // exactly once
  anon_send_exit(agent, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

QUARRY_CAF_TEST(research agent past its hard time limit keeps the sources it had read as its report
                  marked as cut by time) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto searcher = std::make_shared<fake_tool>();
  actors::tool_actor_settings ts;
  ts.name = "slow_tool";
  ts.timeout = std::chrono::hours{1};
  ts.cache_ttl = 0ms;
  actors::tool_set tools;
  tools.tools["slow_tool"] = {actors::spawn_tool_provider(sys, searcher, ts),
                              searcher->definition(), sdk::tool_kind::internal_search};
  actors::agent_spec spec;
  spec.call_id = "call_1";
  spec.task = "Wie taut eine Wärmepumpe ab?";
  spec.tab_index = 1;
  spec.force_report_after = std::chrono::minutes{12};
  spec.hard_timeout = std::chrono::minutes{30};
  spec.current_datetime = "Sunday November 22, 2026";
  auto agent = actors::spawn_research_agent(
    sys, spec, model, tools, em,
    std::make_shared<core::prompt_library>(core::prompt_library::embedded()),
    caf::actor_cast<actors::agent_parent_actor>(self));
  consume_messages();
  // The model searches; the search finds two documents.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  sdk::chat_result step;
  step.tool_calls.push_back({"c1", "slow_tool", R"({"queries": ["Abtauen"]})"});
  step.finish = sdk::finish_reason::tool_calls;
  plugin->calls[0].first->on_done(step);
  consume_messages();
  CAF_REQUIRE_EQUAL(searcher->runs.size(), 1u);
  sdk::tool_result found;
  // As the searches write it: the results numbered in order.
  found.llm_text = R"({"results": [{"document": 1, "title": "Abtauen"}, )"
                   R"({"document": 2, "title": "Umkehrventil"}]})";
  for (auto name : {"Abtauen", "Umkehrventil"}) {
    sdk::document d;
    d.id = std::string{"corpus:"} + name;
    d.url = std::string{"file:///docs/"} + name + ".md";
    d.title = name;
    d.snippet = std::string{"Über "} + name + ".";
    d.kind = sdk::source_kind::internal;
    found.documents.push_back(d);
  }
  searcher->runs[0].first(found);
  consume_messages();
  // The next step is with the model, which never answers.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 2u);
  advance_time(std::chrono::minutes{30});
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(plugin->calls[1].second->cancels, 1);
  next([](actors::agent_done_atom, actors::agent_result& r) {
    CAF_CHECK(r.ok);
    CAF_CHECK_EQUAL(r.call_id, "call_1");
    CAF_CHECK(r.report.find("- Abtauen: Über Abtauen. [1]") != std::string::npos);
    CAF_CHECK(r.report.find("- Umkehrventil: Über Umkehrventil. [2]") != std::string::npos);
    CAF_CHECK(r.report.find(core::time_cut_marker) != std::string::npos);
    CAF_REQUIRE_EQUAL(r.cited.size(), 2u);
    CAF_CHECK_EQUAL(r.cited[0].second.title, "Abtauen");
  });
  CAF_CHECK(nothing_more()); // exactly once
  anon_send_exit(agent, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

QUARRY_CAF_TEST(research agent past its hard time limit while writing its report keeps the part
                  written marked as cut by time) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto searcher = std::make_shared<fake_tool>();
  actors::tool_actor_settings ts;
  ts.name = "slow_tool";
  ts.timeout = std::chrono::hours{1};
  ts.cache_ttl = 0ms;
  actors::tool_set tools;
  tools.tools["slow_tool"] = {actors::spawn_tool_provider(sys, searcher, ts),
                              searcher->definition(), sdk::tool_kind::internal_search};
  actors::agent_spec spec;
  spec.call_id = "call_1";
  spec.task = "Wie taut eine Wärmepumpe ab?";
  spec.tab_index = 0;
  spec.force_report_after = std::chrono::minutes{12};
  spec.hard_timeout = std::chrono::minutes{30};
  spec.current_datetime = "Sunday November 22, 2026";
  auto agent = actors::spawn_research_agent(
    sys, spec, model, tools, em,
    std::make_shared<core::prompt_library>(core::prompt_library::embedded()),
    caf::actor_cast<actors::agent_parent_actor>(self));
  consume_messages();
  // The model searches; the search finds two documents.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  sdk::chat_result step;
  step.tool_calls.push_back({"c1", "slow_tool", R"({"queries": ["Abtauen"]})"});
  step.finish = sdk::finish_reason::tool_calls;
  plugin->calls[0].first->on_done(step);
  consume_messages();
  CAF_REQUIRE_EQUAL(searcher->runs.size(), 1u);
  sdk::tool_result found;
  found.llm_text = R"({"results": [{"document": 1, "title": "Abtauen"}, )"
                   R"({"document": 2, "title": "Umkehrventil"}]})";
  for (auto name : {"Abtauen", "Umkehrventil"}) {
    sdk::document d;
    d.id = std::string{"corpus:"} + name;
    d.url = std::string{"file:///docs/"} + name + ".md";
    d.title = name;
    d.snippet = std::string{"Über "} + name + ".";
    d.kind = sdk::source_kind::internal;
    found.documents.push_back(d);
  }
  searcher->runs[0].first(found);
  consume_messages();
  // The model has enough and asks for the report.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 2u);
  sdk::chat_result enough;
  enough.tool_calls.push_back({"c2", "generate_report", "{}"});
  enough.finish = sdk::finish_reason::tool_calls;
  plugin->calls[1].first->on_done(enough);
  consume_messages();
  // The report streams its first sentence, then the model stalls.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 3u);
  CAF_CHECK_EQUAL(plugin->roles[2], "report");
  const std::string written = "Eine Wärmepumpe taut ihren Verdampfer regelmäßig ab [1]. Dazu";
  plugin->calls[2].first->on_text(written);
  consume_messages();
  advance_time(std::chrono::minutes{30});
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(plugin->calls[2].second->cancels, 1);
  next([&](actors::agent_done_atom, actors::agent_result& r) {
    CAF_CHECK(r.ok);
    CAF_CHECK_EQUAL(r.call_id, "call_1");
    // The written part, whole and first; then the note that time cut it.
    CAF_CHECK_EQUAL(r.report.compare(0, written.size(), written), 0);
    auto note = r.report.find(core::time_cut_marker);
    CAF_CHECK(note != std::string::npos && note > written.size());
    CAF_CHECK(r.report.find("it is incomplete") != std::string::npos);
    // Not the list of sources that stands in for a report never begun.
    CAF_CHECK(r.report.find("The sources the research agent had read") == std::string::npos);
    // The report cites the first document only.
    CAF_REQUIRE_EQUAL(r.cited.size(), 1u);
    CAF_CHECK_EQUAL(r.cited[0].first, 1);
    CAF_CHECK_EQUAL(r.cited[0].second.title, "Abtauen");
  });
  CAF_CHECK(nothing_more());                 // exactly once
  CAF_CHECK_EQUAL(plugin->calls.size(), 3u); // no further model call
  anon_send_exit(agent, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

// -- session: deadline and stop in virtual time --------------------------------

QUARRY_CAF_TEST(
  session the deadline cancels a planning call in flight and the session ends without waiting) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto s = session(model, em, std::chrono::minutes{30});
  consume_messages();
  // The planning call is with the model, which never answers.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto call = plugin->calls[0].second;
  // Shortly before the deadline nothing ends.
  advance_time(std::chrono::minutes{29});
  consume_messages();
  CAF_CHECK(nothing_more());
  CAF_CHECK_EQUAL(call->cancels, 0);
  // At the deadline the call is cancelled and the report written from what
  // exists (nothing).
  advance_time(std::chrono::minutes{1});
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1);
  next([](actors::session_done_atom, actors::session_result& r) {
    // Nothing was found before the deadline: the session fails and says
    // why, rather than delivering a report of "No findings".
    CAF_CHECK(r.status == actors::session_status::failed);
    CAF_CHECK(r.failure.find("the research read no source") != std::string::npos);
    CAF_CHECK(!r.interrupted);
    CAF_CHECK(r.sources.empty());
    CAF_CHECK(std::find(r.notices.begin(), r.notices.end(), "the research deadline was reached")
              != r.notices.end());
  });
  CAF_CHECK_EQUAL(plugin->calls.size(), 1u); // no further model call
  anon_send_exit(s, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

QUARRY_CAF_TEST(session a stop during planning ends the session at once marked as interrupted) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto s = session(model, em, std::chrono::minutes{30});
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  auto call = plugin->calls[0].second;
  self->send(s, actors::stop_atom::value);
  consume_messages(); // no time passes
  CAF_CHECK_GREATER_OR_EQUAL(call->cancels, 1);
  next([](actors::session_done_atom, actors::session_result& r) {
    CAF_CHECK(r.status == actors::session_status::failed);
    CAF_CHECK(r.interrupted);
  });
  CAF_CHECK_EQUAL(plugin->calls.size(), 1u);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

// Once the session tells its agents to report (two minutes before a 30-minute
// deadline), the orchestrator is not asked again: the final report follows.
QUARRY_CAF_TEST(session near its deadline the orchestrator is not asked again after the agents
                  report
                and the final report follows) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto s = session(model, em, std::chrono::minutes{30});
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  CAF_CHECK_EQUAL(plugin->roles[0], "plan");
  sdk::chat_result plan;
  plan.text = "1. Abtauen untersuchen\n";
  plugin->calls[0].first->on_done(plan);
  consume_messages();
  // The orchestrator sends one agent.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 2u);
  CAF_CHECK_EQUAL(plugin->roles[1], "orchestrate");
  sdk::chat_result send;
  send.tool_calls.push_back({"o1", "research_agent", R"({"task": "Wie taut sie ab?"})"});
  send.finish = sdk::finish_reason::tool_calls;
  plugin->calls[1].first->on_done(send);
  consume_messages();
  // The agent's first step is with the model when the deadline comes near.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 3u);
  advance_time(std::chrono::minutes{28});
  consume_messages();
  sdk::chat_result enough;
  enough.tool_calls.push_back({"a1", "generate_report", "{}"});
  enough.finish = sdk::finish_reason::tool_calls;
  plugin->calls[2].first->on_done(enough);
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 4u);
  CAF_CHECK_EQUAL(plugin->roles[3], "report");
  sdk::chat_result report;
  report.text = "Sie taut regelmäßig ab.";
  plugin->calls[3].first->on_done(report);
  consume_messages();
  // The agent's round is answered: the next call writes the final report.
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 5u);
  CAF_CHECK_EQUAL(plugin->roles[4], "final");
  sdk::chat_result final_text;
  final_text.text = "Bericht.";
  plugin->calls[4].first->on_done(final_text);
  consume_messages();
  next([](actors::session_done_atom, actors::session_result& r) {
    bool said = false;
    for (const auto& n : r.notices)
      said = said || n.find("The research deadline is near") != std::string::npos;
    CAF_CHECK(said);
  });
  CAF_CHECK_EQUAL(plugin->calls.size(), 5u);
  anon_send_exit(s, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

QUARRY_CAF_TEST(
  session near its deadline an orchestrator call in flight gives way to the final report) {
  auto plugin = std::make_shared<fake_llm>();
  auto model = llm(plugin, 4);
  auto em = actors::spawn_emitter(sys, "virtual");
  auto s = session(model, em, std::chrono::minutes{30});
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 1u);
  sdk::chat_result plan;
  plan.text = "1. Abtauen untersuchen\n";
  plugin->calls[0].first->on_done(plan);
  consume_messages();
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 2u);
  CAF_CHECK_EQUAL(plugin->roles[1], "orchestrate");
  // The orchestrator's call stalls until the deadline comes near.
  advance_time(std::chrono::minutes{27});
  consume_messages();
  CAF_CHECK_EQUAL(plugin->calls.size(), 2u);
  CAF_CHECK_EQUAL(plugin->calls[1].second->cancels, 0);
  advance_time(std::chrono::minutes{1});
  consume_messages();
  CAF_CHECK_GREATER_OR_EQUAL(plugin->calls[1].second->cancels, 1);
  CAF_REQUIRE_EQUAL(plugin->calls.size(), 3u);
  CAF_CHECK_EQUAL(plugin->roles[2], "final");
  anon_send_exit(s, caf::exit_reason::kill);
  anon_send(model, actors::stop_atom::value);
  anon_send_exit(em, caf::exit_reason::kill);
  consume_messages();
}

CAF_TEST_FIXTURE_SCOPE_END()
