// What the provider actors count for GET /metrics (`stats_atom`): the tool
// provider's calls by outcome, errors by class and run durations (the echo
// test plugin), and the LLM provider's call durations, outcomes and errors
// (the real `openai` plugin against the fake LLM server).

#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/config_limits.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace provider_stats_test {

using namespace quarry;

namespace {

struct stats_fixture {
  test::temp_dir tmp;
  test::fake_llm_server server;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;

  stats_fixture() {
    cfg.runtime.data_dir = tmp.path();
    cfg.runtime.scheduler_threads = 2;
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({QUARRY_PLUGIN_DIR, std::string{QUARRY_TEST_PLUGIN_DIR} + "/good"});
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~stats_fixture() {
    rt.reset();
    services->shutdown();
  }

  actors::tool_provider_actor spawn_tool(nlohmann::json keys) {
    auto made = registry->make_tool("echo", nlohmann::json::object());
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    core::tool_limits limits;
    REQUIRE(core::read_limits(keys, limits).empty());
    auto hdl = actors::spawn_tool_provider(rt->system(), std::get<std::shared_ptr<sdk::tool>>(made),
                                           actors::tool_actor_settings::of("echo_tool", limits));
    rt->add_stoppable(hdl);
    return hdl;
  }

  actors::llm_provider_actor spawn_llm(nlohmann::json keys) {
    auto made = registry->make_llm("openai",
                                   {{"base_url", server.base_url_openai()}, {"model", "m"}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    core::llm_limits limits;
    REQUIRE(core::read_limits(keys, limits).empty());
    auto hdl = actors::spawn_llm_provider(rt->system(),
                                          std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                          actors::llm_actor_settings::of("main", limits));
    rt->add_stoppable(hdl);
    return hdl;
  }

  template <class Handle>
  static nlohmann::json stats(caf::scoped_actor& self, const Handle& hdl) {
    nlohmann::json out;
    self->request(hdl, std::chrono::seconds{10}, actors::stats_atom::value)
      .receive([&](const std::string& s) { out = nlohmann::json::parse(s); },
               [&](const caf::error& e) { FAIL("no stats: " << caf::to_string(e)); });
    return out;
  }

  static actors::tool_reply run(caf::scoped_actor& self, const actors::tool_provider_actor& hdl,
                                std::string args) {
    actors::tool_reply out;
    self
      ->request(hdl, std::chrono::seconds{30}, actors::run_atom::value,
                actors::tool_call_msg{1, std::move(args)})
      .receive([&](actors::tool_reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  }

  // The outcome of one chat call: its reply or its error class.
  static sdk::chat_request hello() {
    sdk::chat_request req;
    req.messages.push_back({sdk::role::user, "hello", {}, {}, {}, {}, {}});
    return req;
  }

  static std::variant<actors::llm_reply, sdk::errc>
  chat(caf::scoped_actor& self, const actors::llm_provider_actor& hdl, uint64_t id) {
    self->send(hdl, actors::chat_atom::value, actors::llm_call{id, hello()});
    std::optional<std::variant<actors::llm_reply, sdk::errc>> out;
    while (!out)
      self->receive([&](actors::delta_atom, const actors::llm_deltas&) {},
                    [&](const actors::llm_reply& r) { out = r; },
                    [&](const caf::error& e) { out = actors::from_caf_error(e).code; });
    return *out;
  }
};

// The buckets of a stats histogram add up to its count, one per bound and
// +Inf.
void check_histogram(const nlohmann::json& h, uint64_t count) {
  REQUIRE(h.is_object());
  REQUIRE(h["bounds"].is_array());
  REQUIRE(h["counts"].is_array());
  CHECK(h["counts"].size() == h["bounds"].size() + 1);
  uint64_t total = 0;
  for (const auto& c : h["counts"])
    total += c.get<uint64_t>();
  CHECK(total == count);
  CHECK(h["count"] == count);
  for (size_t i = 1; i < h["bounds"].size(); ++i)
    CHECK(h["bounds"][i].get<double>() > h["bounds"][i - 1].get<double>());
}

} // namespace

TEST_CASE_FIXTURE(stats_fixture, "provider stats: the tool provider counts calls by outcome") {
  auto hdl = spawn_tool({{"timeout", "200ms"}});
  caf::scoped_actor self{rt->system()};
  auto fresh = stats(self, hdl);
  CHECK(fresh["tool"] == "echo_tool");
  CHECK(fresh["calls"] == 0);
  check_histogram(fresh["call_seconds"], 0);
  CHECK(fresh["errors"].empty());

  CHECK_FALSE(run(self, hdl, R"({"text": "a"})").cached);
  CHECK(run(self, hdl, R"({"text": "a"})").cached);
  CHECK(run(self, hdl, R"({"text": "fail"})").result.failure);
  CHECK(run(self, hdl, "{not json").result.failure);
  auto timed_out = run(self, hdl, R"({"text": "hang"})");
  REQUIRE(timed_out.result.failure);
  CHECK(timed_out.result.failure->code == sdk::errc::timeout);

  auto s = stats(self, hdl);
  CHECK(s["calls"] == 5);
  // The cache hit and the bad arguments never reach the plugin.
  CHECK(s["runs"] == 3);
  CHECK(s["active"] == 0);
  CHECK(s["outcomes"]["ok"] == 1);
  CHECK(s["outcomes"]["cached"] == 1);
  CHECK(s["outcomes"]["error"] == 2);
  CHECK(s["outcomes"]["timeout"] == 1);
  CHECK(s["outcomes"]["cancelled"] == 0);
  CHECK(s["errors"] == nlohmann::json{{"bad_request", 2}, {"timeout", 1}});
  // Three plugin runs ended; the one that hung took its whole time limit.
  check_histogram(s["call_seconds"], 3);
  CHECK(s["call_seconds"]["sum"].get<double>() >= 0.2);
}

TEST_CASE_FIXTURE(stats_fixture, "provider stats: the llm provider times its calls and "
                                 "counts failures by class") {
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"times": 1, "latency_ms": 50, "respond": {"text": "fine"}},
    {"times": 1, "error": {"status": 400,
      "body": {"error": {"message": "bad", "type": "invalid_request_error"}}}},
    {"latency_ms": 60000, "respond": {"text": "too late"}}
  ])")));
  auto hdl = spawn_llm({{"max_retries", 0}});
  caf::scoped_actor self{rt->system()};
  auto fresh = stats(self, hdl);
  check_histogram(fresh["call_seconds"], 0);

  auto ok = chat(self, hdl, 1);
  REQUIRE(std::holds_alternative<actors::llm_reply>(ok));
  auto bad = chat(self, hdl, 2);
  REQUIRE(std::holds_alternative<sdk::errc>(bad));
  CHECK(std::get<sdk::errc>(bad) == sdk::errc::bad_request);
  // A call its caller cancels is counted, but not timed.
  self->send(hdl, actors::chat_atom::value, actors::llm_call{3, hello()});
  REQUIRE(server.wait_for_requests(3, std::chrono::seconds{10}));
  self->send(hdl, actors::cancel_atom::value, uint64_t{3});
  self->receive([&](const actors::llm_reply&) { FAIL("should not answer"); },
                [&](const caf::error& e) {
                  CHECK(actors::from_caf_error(e).code == sdk::errc::cancelled);
                });

  auto s = stats(self, hdl);
  CHECK(s["provider"] == "main");
  CHECK(s["outcomes"] == nlohmann::json{{"ok", 1}, {"error", 1}, {"cancelled", 1}});
  CHECK(s["errors"] == nlohmann::json{{"bad_request", 1}});
  check_histogram(s["call_seconds"], 2);
  // The successful call waited for the server's 50 ms at least.
  CHECK(s["call_seconds"]["sum"].get<double>() >= 0.05);
  CHECK(s["input_tokens"].get<int64_t>() >= 0);
}

} // namespace provider_stats_test
