// `quarry tool run` and the tool provider actor: arguments, failures, the
// result cache and the time limit, with the echo test plugin loaded from disk.

#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/config_limits.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace tool_run_test {

using namespace quarry;

namespace {

struct tool_cli_fixture {
  test::temp_dir home;

  test::process_result quarry(std::vector<std::string> args) {
    std::vector<std::string> argv{QUARRY_EXE,
                                  "--plugin-dir",
                                  std::string{QUARRY_TEST_PLUGIN_DIR} + "/good",
                                  "--set",
                                  "tools.echo_tool.plugin=echo",
                                  "--set",
                                  "tools.echo_tool.prefix=\"> \""};
    argv.insert(argv.end(), args.begin(), args.end());
    test::process_options opts;
    opts.env = {
      {"HOME", home.path()}, {"XDG_CONFIG_HOME", std::nullopt}, {"QUARRY_CONFIG", std::nullopt}};
    return test::run_process(argv, opts);
  }
};

} // namespace

TEST_CASE_FIXTURE(tool_cli_fixture, "tool run prints the LLM-facing text") {
  auto res = quarry({"tool", "run", "echo_tool", R"({"text": "hi"})"});
  CHECK(res.exit_code == 0);
  CHECK(res.out == "> hi (run 1)\n");
}

TEST_CASE_FIXTURE(tool_cli_fixture, "tool run --json prints text, documents and no error") {
  auto res = quarry({"tool", "run", "echo_tool", R"({"text": "hi"})", "--json"});
  CHECK(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["llm_text"] == "> hi (run 1)");
  REQUIRE(j["documents"].size() == 1);
  CHECK(j["documents"][0]["url"] == "https://example.org/echo");
  CHECK(j["documents"][0]["title"] == "Echo");
  CHECK_FALSE(j.contains("error"));
}

TEST_CASE_FIXTURE(tool_cli_fixture, "tool run accepts double-encoded arguments") {
  auto res = quarry({"tool", "run", "echo_tool", R"("{\"text\": \"x\"}")"});
  CHECK(res.exit_code == 0);
  CHECK(res.out == "> x (run 1)\n");
}

TEST_CASE_FIXTURE(tool_cli_fixture, "tool run exits 1 when the tool fails and 2 on bad input") {
  auto failed = quarry({"tool", "run", "echo_tool", R"({"text": "fail"})", "--json"});
  CHECK(failed.exit_code == 1);
  auto j = nlohmann::json::parse(failed.out);
  CHECK(j["llm_text"] == "echo failed as asked");
  CHECK(j["error"]["class"] == "bad_request");
  auto bad_json = quarry({"tool", "run", "echo_tool", "{not json"});
  CHECK(bad_json.exit_code == 2);
  CHECK(bad_json.err.find("not valid JSON") != std::string::npos);
  auto not_object = quarry({"tool", "run", "echo_tool", "[1, 2]"});
  CHECK(not_object.exit_code == 2);
  // Arguments of the wrong type, or missing, against the tool's schema.
  auto wrong_type = quarry({"tool", "run", "echo_tool", R"({"text": 5})"});
  CHECK(wrong_type.exit_code == 2);
  CHECK(wrong_type.err.find("'text' must be string, not an integer") != std::string::npos);
  CHECK(wrong_type.out.empty());
  auto missing = quarry({"tool", "run", "echo_tool", R"({"other": "x"})"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("needs 'text'") != std::string::npos);
  auto unknown = quarry({"tool", "run", "web_search", "{}"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("no tool named 'web_search'") != std::string::npos);
  auto bad_setting = quarry(
    {"--set", "tools.echo_tool.timeout=soon", "tool", "run", "echo_tool", "{}"});
  CHECK(bad_setting.exit_code == 2);
  CHECK(bad_setting.err.find("timeout") != std::string::npos);
}

namespace {

struct tool_actor_fixture {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;

  tool_actor_fixture() {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({std::string{QUARRY_TEST_PLUGIN_DIR} + "/good"});
    rt = std::make_unique<actors::runtime>(cfg);
  }

  ~tool_actor_fixture() {
    rt.reset();
    services->shutdown();
  }

  actors::tool_provider_actor spawn(nlohmann::json keys,
                                    nlohmann::json config = nlohmann::json::object()) {
    auto made = registry->make_tool("echo", config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    core::tool_limits limits;
    REQUIRE(core::read_limits(keys, limits).empty());
    auto hdl = actors::spawn_tool_provider(rt->system(), std::get<std::shared_ptr<sdk::tool>>(made),
                                           actors::tool_actor_settings::of("echo", limits));
    rt->add_stoppable(hdl);
    return hdl;
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
};

} // namespace

TEST_CASE_FIXTURE(tool_actor_fixture, "tool provider actor reuses the result of an identical run") {
  auto hdl = spawn(nlohmann::json::object());
  caf::scoped_actor self{rt->system()};
  auto a = run(self, hdl, R"({"text": "same"})");
  auto b = run(self, hdl, R"({ "text" : "same" })");
  auto c = run(self, hdl, R"({"text": "other"})");
  CHECK(a.result.llm_text == "same (run 1)");
  CHECK_FALSE(a.cached);
  // Same arguments (formatting aside): answered from the cache.
  CHECK(b.result.llm_text == "same (run 1)");
  CHECK(b.cached);
  CHECK(c.result.llm_text == "other (run 2)");
  auto off = spawn({{"cache_ttl", 0}});
  auto d = run(self, off, R"({"text": "same"})");
  auto e = run(self, off, R"({"text": "same"})");
  CHECK_FALSE(e.cached);
  CHECK(d.result.llm_text != e.result.llm_text);
}

TEST_CASE_FIXTURE(tool_actor_fixture,
                  "tool provider actor leaves the caching to a tool that caches itself, with the "
                  "limits the user set") {
  caf::scoped_actor self{rt->system()};
  auto own = spawn({{"cache_ttl", "5m"}, {"cache_entries", 7}}, {{"own_cache", true}});
  auto a = run(self, own, R"({"text": "same"})");
  auto b = run(self, own, R"({"text": "same"})");
  // The tool was given the limits, and the provider kept nothing: both
  // calls ran (a call passes one cache, the tool's).
  CHECK(a.result.llm_text == "same (run 1) own_cache=300000ms/7");
  CHECK(b.result.llm_text == "same (run 2) own_cache=300000ms/7");
  CHECK_FALSE(b.cached);
  // Caching turned off reaches the tool too.
  auto off = spawn({{"cache_ttl", 0}}, {{"own_cache", true}});
  CHECK(run(self, off, R"({"text": "x"})").result.llm_text == "x (run 1) own_cache=0ms/256");
  // A tool that does not cache itself is cached by the provider.
  auto host_cached = spawn({{"cache_ttl", "5m"}});
  CHECK_FALSE(run(self, host_cached, R"({"text": "same"})").cached);
  CHECK(run(self, host_cached, R"({"text": "same"})").cached);
  // A tool that throws when asked (an exception or anything else) is
  // cached by the provider, and runs as ever.
  for (std::string mode : {"throw", "throw_int"}) {
    CAPTURE(mode);
    auto thrown = spawn({{"cache_ttl", "5m"}}, {{"own_cache", mode}});
    auto first = run(self, thrown, R"({"text": "same"})");
    CHECK(first.result.llm_text == "same (run 1)");
    CHECK_FALSE(first.cached);
    CHECK(run(self, thrown, R"({"text": "same"})").cached);
    CHECK(run(self, thrown, R"({"text": "other"})").result.llm_text == "other (run 2)");
  }
}

TEST_CASE_FIXTURE(tool_actor_fixture,
                  "tool provider actor runs the arguments its requester parsed, without parsing "
                  "them again, and caches them under their text") {
  auto hdl = spawn(nlohmann::json::object());
  caf::scoped_actor self{rt->system()};
  auto call = [&](actors::tool_call_msg msg) {
    actors::tool_reply out;
    self->request(hdl, std::chrono::seconds{30}, actors::run_atom::value, std::move(msg))
      .receive([&](actors::tool_reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  };
  auto parsed = std::make_shared<const nlohmann::json>(nlohmann::json{{"text", "parsed"}});
  // The run takes the parse, not the text (which is not even JSON here:
  // parsed, it would be an error).
  auto a = call(actors::tool_call_msg{1, "not JSON", parsed});
  CHECK(a.result.llm_text == "parsed (run 1)");
  CHECK_FALSE(a.result.failure);
  // The text is the key of the cache.
  auto b = call(actors::tool_call_msg{2, parsed->dump(), parsed});
  CHECK(b.result.llm_text == "parsed (run 2)");
  CHECK_FALSE(b.cached);
  // The same arguments as a text alone (another node's call): parsed here,
  // found under the same key.
  auto c = call(actors::tool_call_msg{3, R"({ "text" : "parsed" })"});
  CHECK(c.cached);
  CHECK(c.result.llm_text == "parsed (run 2)");
}

TEST_CASE_FIXTURE(tool_actor_fixture, "tool provider actor bounds a run's time and cancels it") {
  auto hdl = spawn({{"timeout", "200ms"}});
  caf::scoped_actor self{rt->system()};
  auto r = run(self, hdl, R"({"text": "hang"})");
  REQUIRE(r.result.failure.has_value());
  CHECK(r.result.failure->code == sdk::errc::timeout);
  CHECK(r.result.llm_text.find("did not finish within 200ms") != std::string::npos);
  // The actor is still serving.
  auto ok = run(self, hdl, R"({"text": "after"})");
  CHECK(ok.result.llm_text == "after (run 1)");
}

TEST_CASE_FIXTURE(tool_actor_fixture,
                  "tool provider actor runs at most max_concurrency at once, in order") {
  auto hdl = spawn({{"max_concurrency", 1}, {"timeout", "100ms"}, {"cache_ttl", 0}});
  caf::scoped_actor self{rt->system()};
  // The first run hangs until its time limit; the second waits for its slot
  // and so is answered after it (without the cap it would come first).
  self->send(hdl, actors::run_atom::value, actors::tool_call_msg{1, R"({"text": "hang"})"});
  self->send(hdl, actors::run_atom::value, actors::tool_call_msg{2, R"({"text": "quick"})"});
  std::vector<actors::tool_reply> replies;
  for (int i = 0; i < 2; ++i)
    self->receive([&](actors::tool_reply& r) { replies.push_back(std::move(r)); },
                  caf::after(std::chrono::seconds{30}) >> [&] { FAIL("no reply"); });
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].id == 1);
  REQUIRE(replies[0].result.failure.has_value());
  CHECK(replies[0].result.failure->code == sdk::errc::timeout);
  CHECK(replies[1].id == 2);
  CHECK(replies[1].result.llm_text == "quick (run 1)");
}

} // namespace tool_run_test
