// The LLM provider actor in process, with the real `openai` plugin loaded from
// disk and the fake LLM server: the concurrency cap, adaptive concurrency on
// 429, cancellation, requests- and tokens-per-minute buckets, and settings
// validation.

#include "quarry/actors/llm_provider.hpp"
#include "quarry/core/config_limits.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace llm_provider_actor_test {

using namespace quarry;

namespace {

struct actor_fixture {
  test::temp_dir tmp;
  test::fake_llm_server server;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::shared_ptr<sdk::llm_provider> provider;
  std::unique_ptr<actors::runtime> rt;

  actor_fixture() {
    cfg.runtime.data_dir = tmp.path();
    cfg.runtime.scheduler_threads = 2;
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({QUARRY_PLUGIN_DIR});
    auto made = registry->make_llm("openai",
                                   {{"base_url", server.base_url_openai()}, {"model", "m"}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    provider = std::get<std::shared_ptr<sdk::llm_provider>>(made);
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~actor_fixture() {
    rt.reset();
    services->shutdown();
  }

  actors::llm_provider_actor spawn(nlohmann::json host_keys) {
    core::llm_limits limits;
    REQUIRE(core::read_limits(host_keys, limits).empty());
    auto hdl = actors::spawn_llm_provider(rt->system(), provider,
                                          actors::llm_actor_settings::of("main", limits));
    rt->add_stoppable(hdl);
    return hdl;
  }

  static sdk::chat_request hello() {
    sdk::chat_request req;
    req.messages.push_back({sdk::role::user, "hello", {}, {}, {}, {}, {}});
    return req;
  }

  static nlohmann::json stats(caf::scoped_actor& self, const actors::llm_provider_actor& hdl) {
    nlohmann::json out;
    self->request(hdl, std::chrono::seconds{10}, actors::stats_atom::value)
      .receive([&](const std::string& s) { out = nlohmann::json::parse(s); },
               [&](const caf::error&) { FAIL("no stats"); });
    return out;
  }
};

} // namespace

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor never runs more calls than its cap") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"latency_ms": 300, "respond": {"text": "slow answer"}}
  ])")));
  auto hdl = spawn({{"max_concurrency", 2}});
  caf::scoped_actor self{rt->system()};
  for (uint64_t i = 0; i < 6; ++i)
    self->send(hdl, actors::chat_atom::value, actors::llm_call{i, hello()});
  auto max_active = 0;
  auto saw_queue = false;
  auto sample = [&] {
    auto s = stats(self, hdl);
    max_active = std::max(max_active, s["active"].get<int>());
    saw_queue = saw_queue || s["queued"].get<int>() > 0;
  };
  sample();
  int replies = 0;
  while (replies < 6) {
    self->receive([&](actors::delta_atom, const actors::llm_deltas&) {},
                  [&](const actors::llm_reply& r) {
                    CHECK(r.result.text == "slow answer");
                    ++replies;
                  },
                  [&](const caf::error& e) { FAIL(actors::from_caf_error(e).message); });
    sample();
  }
  CHECK(max_active <= 2);
  CHECK(saw_queue);
  CHECK(server.request_count() == 6);
  CHECK(stats(self, hdl)["succeeded"] == 6);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor halves its concurrency on 429") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"times": 1, "error": {"status": 429, "headers": {"retry-after-ms": "10"},
      "body": {"error": {"message": "slow down", "type": "requests",
                         "code": "rate_limit_exceeded"}}}},
    {"respond": {"text": "ok"}}
  ])")));
  auto hdl = spawn({{"max_concurrency", 8}, {"retry_base", "10ms"}});
  caf::scoped_actor self{rt->system()};
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, hello()});
  auto done = false;
  while (!done)
    self->receive([&](actors::delta_atom, const actors::llm_deltas&) {},
                  [&](const actors::llm_reply& r) {
                    CHECK(r.attempts == 2);
                    done = true;
                  },
                  [&](const caf::error& e) { FAIL(actors::from_caf_error(e).message); });
  auto s = stats(self, hdl);
  // 8 halved to 4, then one success creeps it up by 1/4 (floored).
  CHECK(s["concurrency_limit"] == 4);
  CHECK(s["retries"] == 1);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor cancels a call on request") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"latency_ms": 60000, "respond": {"text": "too late"}}
  ])")));
  auto hdl = spawn(nlohmann::json::object());
  caf::scoped_actor self{rt->system()};
  self->send(hdl, actors::chat_atom::value, actors::llm_call{7, hello()});
  REQUIRE(server.wait_for_requests(1, std::chrono::seconds{10}));
  self->send(hdl, actors::cancel_atom::value, uint64_t{7});
  auto got = false;
  self->receive([&](const actors::llm_reply&) { FAIL("should not answer"); },
                [&](const caf::error& e) {
                  got = true;
                  CHECK(actors::from_caf_error(e).code == sdk::errc::cancelled);
                });
  CHECK(got);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor keeps a request for retries only until "
                                 "its answer begins") {
  // 400 ms between the pieces: the reasoning's words, then the answer's.
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"respond": {"reasoning": "first thoughts here", "text": "The answer begins slowly",
                 "chunk_delay_ms": 400}}
  ])")));
  auto hdl = spawn(nlohmann::json::object());
  caf::scoped_actor self{rt->system()};
  CHECK(stats(self, hdl)["requests_held"] == 0);
  self->send(hdl, actors::chat_atom::value, actors::llm_call{3, hello()});
  auto saw_reasoning_only = false;
  auto saw_answer = false;
  std::optional<actors::llm_reply> reply;
  while (!reply) {
    self->receive(
      [&](actors::delta_atom, const actors::llm_deltas& pieces) {
        auto answer = std::any_of(pieces.begin(), pieces.end(), [](const actors::llm_delta& d) {
          return d.kind == actors::delta_kind::text
                 && d.text.find_first_not_of(" \t\r\n") != std::string::npos;
        });
        // The actor sent these pieces before it answers the stats: what it
        // holds now is what it held when they went out.
        auto s = stats(self, hdl);
        if (s["active"] != 1)
          return; // the last pieces: the call is over
        if (answer && !saw_answer) {
          saw_answer = true;
          CHECK(s["requests_held"] == 0);
        } else if (!saw_answer) {
          saw_reasoning_only = true;
          CHECK(s["requests_held"] == 1);
        }
      },
      [&](const actors::llm_reply& r) { reply = r; },
      [&](const caf::error& e) { FAIL(actors::from_caf_error(e).message); });
  }
  CHECK(saw_reasoning_only);
  CHECK(saw_answer);
  CHECK(reply->result.text == "The answer begins slowly");
  CHECK(reply->result.reasoning == "first thoughts here");
  CHECK(reply->attempts == 1);
  CHECK(stats(self, hdl)["requests_held"] == 0);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor never tries again an answer that began, "
                                 "whatever its plugin calls the failure") {
  // A plugin (loaded from disk) streams an answer, then fails it as an empty
  // answer and says nothing streamed. Tried again, the caller would get the
  // text twice, and the request was let go when the answer began.
  registry->load_directories({std::string{QUARRY_TEST_PLUGIN_DIR} + "/good"});
  auto made = registry->make_llm("echo_llm", nlohmann::json::object());
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
  core::llm_limits limits;
  REQUIRE(core::read_limits({{"max_retries", 3}, {"retry_base", "10ms"}}, limits).empty());
  auto hdl = actors::spawn_llm_provider(rt->system(),
                                        std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                        actors::llm_actor_settings::of("echo", limits));
  rt->add_stoppable(hdl);
  caf::scoped_actor self{rt->system()};
  sdk::chat_request req;
  req.messages.push_back(
    {sdk::role::user, "after-text:empty_response the answer", {}, {}, {}, {}, {}});
  self->send(hdl, actors::chat_atom::value, actors::llm_call{5, std::move(req)});
  std::string text;
  std::optional<sdk::error> failure;
  while (!failure)
    self->receive(
      [&](actors::delta_atom, const actors::llm_deltas& pieces) {
        for (const auto& d : pieces)
          if (d.kind == actors::delta_kind::text)
            text += d.text;
      },
      [&](const actors::llm_reply&) { FAIL("the call should fail"); },
      [&](const caf::error& e) { failure = actors::from_caf_error(e); });
  CHECK(failure->code == sdk::errc::empty_response);
  CHECK(text == "the answer");
  auto s = stats(self, hdl);
  CHECK(s["calls_started"] == 1);
  CHECK(s["retries"] == 0);
  CHECK(s["requests_held"] == 0);
}

namespace {

// Waits for one reply to call `id` (deltas skipped) and returns it.
actors::llm_reply await_reply(caf::scoped_actor& self) {
  std::optional<actors::llm_reply> out;
  while (!out)
    self->receive([&](actors::delta_atom, const actors::llm_deltas&) {},
                  [&](const actors::llm_reply& r) { out = r; },
                  [&](const caf::error& e) { FAIL(actors::from_caf_error(e).message); });
  return *out;
}

// Cancels call `id` and checks it ends with errc::cancelled.
void cancel_queued(caf::scoped_actor& self, const actors::llm_provider_actor& hdl, uint64_t id) {
  self->send(hdl, actors::cancel_atom::value, id);
  auto got = false;
  self->receive([&](const actors::llm_reply&) { FAIL("should not answer"); },
                [&](const caf::error& e) {
                  got = true;
                  CHECK(actors::from_caf_error(e).code == sdk::errc::cancelled);
                });
  CHECK(got);
}

} // namespace

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor holds calls beyond its "
                                 "requests per minute") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"respond": {"text": "ok"}}
  ])")));
  // One request per minute: the bucket holds one, the second call must wait
  // about a minute although the concurrency cap would let it run.
  auto hdl = spawn({{"max_concurrency", 4}, {"requests_per_minute", 1}});
  caf::scoped_actor self{rt->system()};
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, hello()});
  self->send(hdl, actors::chat_atom::value, actors::llm_call{2, hello()});
  CHECK(await_reply(self).result.text == "ok");
  auto s = stats(self, hdl);
  CHECK(s["queued"] == 1);
  CHECK(s["active"] == 0);
  CHECK(server.request_count() == 1);
  cancel_queued(self, hdl, 2);
  CHECK(server.request_count() == 1);
  CHECK(stats(self, hdl)["queued"] == 0);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor holds calls beyond its "
                                 "tokens per minute") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"respond": {"text": "ok"}}
  ])")));
  // Each call is estimated at max_tokens (800) plus its prompt: the first
  // takes most of a 1,000-token minute, the second must wait.
  auto hdl = spawn({{"max_concurrency", 4}, {"tokens_per_minute", 1000}});
  caf::scoped_actor self{rt->system()};
  auto req = hello();
  req.max_tokens = 800;
  self->send(hdl, actors::chat_atom::value, actors::llm_call{1, req});
  self->send(hdl, actors::chat_atom::value, actors::llm_call{2, req});
  CHECK(await_reply(self).result.text == "ok");
  auto s = stats(self, hdl);
  CHECK(s["queued"] == 1);
  CHECK(server.request_count() == 1);
  cancel_queued(self, hdl, 2);
  // Small calls still fit in what is left of the minute.
  auto small = hello();
  small.max_tokens = 10;
  self->send(hdl, actors::chat_atom::value, actors::llm_call{3, small});
  CHECK(await_reply(self).result.text == "ok");
  CHECK(server.request_count() == 2);
}

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor describes its model once: the "
                                 "plugin's probe, then its cache") {
  std::atomic<int> listed{0};
  server.server().route("GET", "/v1/models", [&](const test::request&) {
    ++listed;
    return test::response_plan::json(
      200, R"({"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 65536}]})");
  });
  auto hdl = spawn(nlohmann::json::object());
  caf::scoped_actor self{rt->system()};
  for (int i = 0; i < 3; ++i) {
    sdk::model_info info;
    self->request(hdl, std::chrono::seconds{15}, actors::describe_atom::value)
      .receive([&](sdk::model_info& x) { info = std::move(x); },
               [&](caf::error& err) { FAIL(caf::to_string(err)); });
    CHECK(info.model == "m");
    CHECK(info.context_window == 65536);
    CHECK(info.context_window_source == "vllm /models max_model_len");
  }
  CHECK(listed == 1);
  // Chat calls are not affected by it.
  CHECK(server.request_count() == 0);
}

namespace {

// A plugin whose describe() never answers.
struct silent_llm final : sdk::llm_provider {
  std::vector<std::function<void(sdk::model_info)>> kept;

  sdk::model_info info() const override {
    return {"silent", 0, true, false, ""};
  }

  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request,
                                       std::shared_ptr<sdk::chat_sink>) override {
    return nullptr;
  }

  void describe(std::function<void(sdk::model_info)> done) override {
    kept.push_back(std::move(done)); // never called
  }
};

} // namespace

TEST_CASE_FIXTURE(actor_fixture, "llm provider actor answers describe within its time "
                                 "limit when the plugin says nothing") {
  auto silent = std::make_shared<silent_llm>();
  auto hdl = actors::spawn_llm_provider(rt->system(), silent,
                                        actors::llm_actor_settings::of("quiet", {}));
  rt->add_stoppable(hdl);
  caf::scoped_actor self{rt->system()};
  auto start = std::chrono::steady_clock::now();
  sdk::model_info info;
  self
    ->request(hdl, actors::llm_describe_timeout + std::chrono::seconds{5},
              actors::describe_atom::value)
    .receive([&](sdk::model_info& x) { info = std::move(x); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(info.model == "silent");
  CHECK(info.context_window == 0);
  CHECK(took >= actors::llm_describe_timeout - std::chrono::milliseconds{100});
  CHECK(took < actors::llm_describe_timeout + std::chrono::seconds{4});
  // Asked once; the next request is answered from the cache at once.
  CHECK(silent->kept.size() == 1);
  auto again = std::chrono::steady_clock::now();
  self->request(hdl, std::chrono::seconds{2}, actors::describe_atom::value)
    .receive([&](sdk::model_info& x) { info = std::move(x); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(std::chrono::steady_clock::now() - again < std::chrono::seconds{1});
  CHECK(silent->kept.size() == 1);
  // A late answer replaces the guess.
  silent->kept.front()(sdk::model_info{"silent", 70000, true, false, "late"});
  bool got = false;
  for (int i = 0; i < 100 && !got; ++i) {
    self->request(hdl, std::chrono::seconds{2}, actors::describe_atom::value)
      .receive([&](sdk::model_info& x) { got = x.context_window == 70000; }, [&](caf::error&) {});
    if (!got)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  CHECK(got);
}

} // namespace llm_provider_actor_test
