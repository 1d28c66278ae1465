// Unit tests of the extractive provider object: configuration, streaming in
// word-sized deltas, usage, pacing without blocking the pool, cancel, and the
// built plugin loaded through the plugin registry.

#include "provider.hpp"

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace extractive_provider_test {

using namespace quarry;
using namespace quarry::plugins::llm_extractive;

namespace {

/// Records everything the provider streams, in order.
struct recording_sink : sdk::chat_sink {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> events;
  std::vector<std::string> texts;
  std::vector<sdk::tool_call_delta> calls;
  std::optional<sdk::usage> counts;
  std::optional<sdk::chat_result> result;
  std::optional<sdk::error> failure;
  bool streamed = false;
  int terminal = 0;
  /// Called (outside the lock) after each text delta.
  std::function<void()> on_first_text;

  void on_text(std::string_view delta) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> guard{mtx};
      events.emplace_back("text");
      texts.emplace_back(delta);
      if (texts.size() == 1)
        hook = on_first_text;
    }
    if (hook)
      hook();
  }
  void on_reasoning(std::string_view) override {
    std::lock_guard<std::mutex> guard{mtx};
    events.emplace_back("reasoning");
  }
  void on_tool_call(const sdk::tool_call_delta& delta) override {
    std::lock_guard<std::mutex> guard{mtx};
    events.emplace_back("tool_call");
    calls.push_back(delta);
  }
  void on_usage(const sdk::usage& x) override {
    std::lock_guard<std::mutex> guard{mtx};
    events.emplace_back("usage");
    counts = x;
  }
  void on_done(const sdk::chat_result& x) override {
    std::lock_guard<std::mutex> guard{mtx};
    events.emplace_back("done");
    result = x;
    ++terminal;
    cv.notify_all();
  }
  void on_error(const sdk::error& err, bool was_streamed) override {
    std::lock_guard<std::mutex> guard{mtx};
    events.emplace_back("error");
    failure = err;
    streamed = was_streamed;
    ++terminal;
    cv.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, std::chrono::seconds{10}, [this] { return terminal > 0; });
  }
  std::string joined() {
    std::lock_guard<std::mutex> guard{mtx};
    std::string result;
    for (const auto& x : texts)
      result += x;
    return result;
  }
};

sdk::chat_message msg(sdk::role author, std::string content) {
  sdk::chat_message result;
  result.author = author;
  result.content = std::move(content);
  return result;
}

sdk::chat_request plan_request() {
  sdk::chat_request req;
  req.role_tag = "plan";
  req.messages = {msg(sdk::role::system, "You are a research planner."),
                  msg(sdk::role::user, "How do heat pumps work, and how well do they "
                                       "perform in cold climates? What do they cost?")};
  return req;
}

sdk::chat_request orchestrate_request() {
  sdk::chat_request req;
  req.role_tag = "orchestrate";
  req.messages = {msg(sdk::role::system, "# Research Plan\n1. Alpha rays\n2. Beta rays\n"
                                         "3. Gamma rays\n4. Delta rays"),
                  msg(sdk::role::user, "Tell me about rays")};
  req.research.question = "Tell me about rays";
  req.research.plan = {"Alpha rays", "Beta rays", "Gamma rays", "Delta rays"};
  for (auto name : {"research_agent", "think_tool", "generate_report"}) {
    sdk::tool_definition def;
    def.name = name;
    req.tools.push_back(def);
  }
  return req;
}

std::shared_ptr<recording_sink> run(provider& llm, sdk::chat_request req) {
  auto sink = std::make_shared<recording_sink>();
  llm.chat(std::move(req), sink);
  REQUIRE(sink->wait());
  return sink;
}

} // namespace

TEST_CASE("extractive configuration accepts its keys, refuses others (Quarry's limits too)") {
  // The limits go to the provider actor, never to the plugin.
  CHECK_THROWS_AS(parse_config({{"max_concurrency", 8}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"prices", nlohmann::json::object()}}), std::invalid_argument);
  auto cfg = parse_config({{"max_parallel", 2},
                           {"ttft_ms", 150},
                           {"tokens_per_second", 40.5},
                           {"max_sentences", "12"},
                           {"context_window", 4096},
                           {"reasoning", false}});
  CHECK(cfg.max_parallel == 2);
  CHECK(cfg.ttft == std::chrono::milliseconds{150});
  CHECK(cfg.tokens_per_second == doctest::Approx(40.5));
  CHECK(cfg.max_sentences == 12);
  CHECK(cfg.context_window == 4096);
  auto defaults = parse_config(nlohmann::json::object());
  CHECK(defaults.max_parallel == 3);
  CHECK(defaults.ttft.count() == 0);
  CHECK(defaults.tokens_per_second == 0);
  CHECK(defaults.max_sentences == 12);
  CHECK_THROWS_WITH_AS(parse_config({{"max_paralel", 2}}),
                       "extractive: unknown configuration key 'max_paralel' (known: "
                       "max_parallel, ttft_ms, tokens_per_second, max_sentences)",
                       std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"max_parallel", 0}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"max_parallel", 1.5}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"ttft_ms", -1}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"tokens_per_second", "fast"}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"reasoning", "yes"}}), std::invalid_argument);
  CHECK_THROWS_AS(parse_config(nlohmann::json::array()), std::invalid_argument);
}

TEST_CASE("extractive streams word-sized deltas, then usage, then done") {
  test::test_host host{{}, 2, 64};
  provider llm{host, config{}};
  auto info = llm.info();
  CHECK(info.model == "extractive");
  CHECK(info.context_window >= 1000000);
  CHECK(info.supports_tools);
  CHECK_FALSE(info.supports_reasoning);
  auto sink = run(llm, plan_request());
  REQUIRE(sink->result.has_value());
  const auto& res = *sink->result;
  CHECK(res.text
        == "1. How do heat pumps work?\n"
           "2. How well do they perform in cold climates? (regarding: heat pumps "
           "work)\n"
           "3. What do they cost? (regarding: heat pumps work)");
  CHECK(sink->joined() == res.text);
  CHECK(sink->texts.front() == "1. ");
  CHECK(sink->texts[1] == "How ");
  for (const auto& piece : sink->texts) {
    CHECK_FALSE(piece.empty());
    CHECK(piece.find(' ') >= piece.find_last_not_of(" \n")); // one word per piece
  }
  CHECK(sink->events.back() == "done");
  CHECK(sink->events[sink->events.size() - 2] == "usage");
  CHECK(sink->terminal == 1);
  CHECK(res.finish == sdk::finish_reason::stop);
  CHECK(res.model == "extractive");
  CHECK(res.usage.output_tokens == estimate_tokens(res.text));
  CHECK(res.usage.input_tokens
        == estimate_tokens(plan_request().messages[0].content)
             + estimate_tokens(plan_request().messages[1].content));
  REQUIRE(sink->counts.has_value());
  CHECK(sink->counts->output_tokens == res.usage.output_tokens);
  // Deterministic: the same request gives the same stream.
  auto again = run(llm, plan_request());
  CHECK(again->texts == sink->texts);
}

TEST_CASE("extractive streams tool calls and honours max_parallel") {
  test::test_host host{{}, 2, 64};
  config cfg;
  cfg.max_parallel = 2;
  provider llm{host, cfg};
  auto sink = run(llm, orchestrate_request());
  REQUIRE(sink->result.has_value());
  const auto& res = *sink->result;
  CHECK(res.finish == sdk::finish_reason::tool_calls);
  CHECK(res.text.empty());
  REQUIRE(res.tool_calls.size() == 2);
  CHECK(res.tool_calls[0].id == "call_1");
  CHECK(res.tool_calls[0].arguments == R"({"task":"Alpha rays"})");
  CHECK(res.tool_calls[1].id == "call_2");
  REQUIRE(sink->calls.size() == 2);
  CHECK(sink->calls[1].index == 1);
  CHECK(sink->calls[1].id == "call_2");
  CHECK(sink->calls[1].name == "research_agent");
  CHECK(sink->calls[1].arguments == R"({"task":"Beta rays"})");
  CHECK(sink->events == std::vector<std::string>{"tool_call", "tool_call", "usage", "done"});
}

TEST_CASE("extractive paces with ttft without holding a pool thread") {
  // One pool thread: if the paced call slept on it, the probe job below
  // could not run until the call finished.
  test::test_host host{{}, 1, 64};
  config cfg;
  cfg.ttft = std::chrono::milliseconds{60000};
  provider llm{host, cfg};
  auto sink = std::make_shared<recording_sink>();
  auto call = llm.chat(plan_request(), sink);
  REQUIRE(host.run_through_pool());
  {
    std::lock_guard<std::mutex> guard{sink->mtx};
    CHECK(sink->events.empty()); // still waiting for the first token
  }
  // Cancel before the first token: an error that streamed nothing.
  call->cancel();
  REQUIRE(sink->wait());
  CHECK(sink->events == std::vector<std::string>{"error"});
  REQUIRE(sink->failure.has_value());
  CHECK(sink->failure->code == sdk::errc::cancelled);
  CHECK_FALSE(sink->streamed);
  call->cancel(); // idempotent
  CHECK(sink->terminal == 1);
}

TEST_CASE("extractive paced streams keep content and order") {
  test::test_host host{{}, 2, 64};
  config cfg;
  cfg.ttft = std::chrono::milliseconds{20};
  cfg.tokens_per_second = 2000;
  provider llm{host, cfg};
  auto paced = run(llm, plan_request());
  provider plain_llm{host, config{}};
  auto plain = run(plain_llm, plan_request());
  REQUIRE(paced->result.has_value());
  CHECK(paced->texts == plain->texts);
  CHECK(paced->events == plain->events);
  CHECK(paced->result->text == plain->result->text);
}

TEST_CASE("extractive cancel during the stream stops it with streamed set") {
  test::test_host host{{}, 2, 64};
  config cfg;
  cfg.tokens_per_second = 5; // slow enough that cancel lands mid-stream
  provider llm{host, cfg};
  auto sink = std::make_shared<recording_sink>();
  std::shared_ptr<sdk::chat_call> call;
  std::mutex call_mtx;
  sink->on_first_text = [&] {
    std::lock_guard<std::mutex> guard{call_mtx};
    if (call)
      call->cancel(); // from inside the sink, on the provider's thread
  };
  {
    std::lock_guard<std::mutex> guard{call_mtx};
    call = llm.chat(plan_request(), sink);
  }
  REQUIRE(sink->wait());
  std::lock_guard<std::mutex> guard{sink->mtx};
  REQUIRE(sink->failure.has_value());
  CHECK(sink->failure->code == sdk::errc::cancelled);
  CHECK(sink->streamed);
  CHECK(sink->texts.size() == 1);
  CHECK(sink->events == std::vector<std::string>{"text", "error"});
}

TEST_CASE("extractive cancel from another thread stops a paced stream at once") {
  test::test_host host{{}, 2, 64};
  config cfg;
  cfg.tokens_per_second = 0.01; // the second word would come in minutes
  provider llm{host, cfg};
  auto sink = std::make_shared<recording_sink>();
  std::mutex mtx;
  std::condition_variable cv;
  bool first = false;
  sink->on_first_text = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    first = true;
    cv.notify_all();
  };
  auto call = llm.chat(plan_request(), sink);
  {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, std::chrono::seconds{10}, [&] { return first; }));
  }
  call->cancel();
  REQUIRE(sink->wait());
  std::lock_guard<std::mutex> guard{sink->mtx};
  CHECK(sink->events == std::vector<std::string>{"text", "error"});
  REQUIRE(sink->failure.has_value());
  CHECK(sink->failure->code == sdk::errc::cancelled);
  CHECK(sink->streamed);
}

TEST_CASE("extractive cancel after done changes nothing, destruction fails pending calls") {
  test::test_host host{{}, 1, 64};
  auto sink = std::make_shared<recording_sink>();
  {
    provider llm{host, config{}};
    auto call = llm.chat(plan_request(), sink);
    REQUIRE(sink->wait());
    call->cancel();
    CHECK(sink->terminal == 1);
    CHECK(sink->result.has_value());
  }
  auto pending = std::make_shared<recording_sink>();
  {
    config cfg;
    cfg.ttft = std::chrono::milliseconds{60000};
    provider llm{host, cfg};
    llm.chat(plan_request(), pending);
    // Wait until the pool handed the call to the timer thread.
    REQUIRE(host.run_through_pool());
  }
  REQUIRE(pending->wait());
  CHECK(pending->terminal == 1);
  REQUIRE(pending->failure.has_value());
  CHECK(pending->failure->code == sdk::errc::cancelled);
}

TEST_CASE("extractive provider may be destroyed from inside a paced stream") {
  test::test_host host{{}, 2, 64};
  config cfg;
  cfg.ttft = std::chrono::milliseconds{1}; // deltas come from the timer thread
  cfg.tokens_per_second = 0.01;
  auto llm = std::make_shared<provider>(host, cfg);
  std::mutex llm_mtx;
  auto sink = std::make_shared<recording_sink>();
  sink->on_first_text = [&] {
    std::lock_guard<std::mutex> guard{llm_mtx};
    llm.reset(); // the last reference, released on the timer thread
  };
  {
    std::lock_guard<std::mutex> guard{llm_mtx};
    llm->chat(plan_request(), sink);
  }
  REQUIRE(sink->wait());
  std::lock_guard<std::mutex> guard{sink->mtx};
  CHECK(sink->events == std::vector<std::string>{"text", "error"});
  REQUIRE(sink->failure.has_value());
  CHECK(sink->failure->code == sdk::errc::cancelled);
  CHECK(sink->streamed);
}

TEST_CASE("extractive plugin loads through the registry and chats") {
  test::temp_dir tmp;
  core::settings cfg;
  cfg.runtime.data_dir = tmp.path();
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  auto err = registry.load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_extractive.so");
  REQUIRE_FALSE(err.has_value());
  const auto* info = registry.find("extractive");
  REQUIRE(info != nullptr);
  CHECK(info->kind == sdk::plugin_kind::llm);
  CHECK(info->version == "0.1.0");
  auto bad = registry.make_llm("extractive", {{"ttft", 5}}, "offline");
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("unknown configuration key 'ttft'") != std::string::npos);
  auto made = registry.make_llm("extractive", {{"max_parallel", 1}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
  auto llm = std::get<std::shared_ptr<sdk::llm_provider>>(made);
  CHECK(llm->info().model == "extractive");
  auto sink = std::make_shared<recording_sink>();
  llm->chat(orchestrate_request(), sink);
  REQUIRE(sink->wait());
  REQUIRE(sink->result.has_value());
  REQUIRE(sink->result->tool_calls.size() == 1);
  CHECK(sink->result->tool_calls[0].arguments == R"({"task":"Alpha rays"})");
  auto plan = std::make_shared<recording_sink>();
  llm->chat(plan_request(), plan);
  REQUIRE(plan->wait());
  REQUIRE(plan->result.has_value());
  CHECK(plan->result->text.rfind("1. How do heat pumps work?\n", 0) == 0);
  llm.reset();
  services.shutdown();
}

} // namespace extractive_provider_test
