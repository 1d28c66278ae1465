// Benchmark of a research session: the real session, agents, emitter,
// `openai` plugin and local corpus tool in one process, against the fake LLM
// server with a fixed latency per call.
//
//   quarry_bench_research [--latency-ms L] [--rounds N] [--sessions S]
//                         [--packets P] [--plugin-dir DIR]
//
// 1. A scripted run: 3 orchestrator cycles x 3 parallel agents x 4 agent steps
//    (3 searches and the report), plus plan, final orchestrator call and final
//    report. Its critical path is 18 model calls, so the lower bound of the
//    wall time is 18 x L; reported: wall / bound, and CPU time per research.
// 2. Memory: S sessions started at once, all waiting on their (slow) plan
//    call; resident memory per session beyond the baseline.
// 3. Emitter throughput: P packets through one emitter to a JSONL file.

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include "process_usage.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <vector>

using namespace quarry;
using clock_type = std::chrono::steady_clock;
using bench::rss_mib;

namespace {

nlohmann::json rule(const char* marker, nlohmann::json respond, int latency_ms, int times = 0) {
  nlohmann::json r{{"match", {{"system_contains", marker}}},
                   {"respond", std::move(respond)},
                   {"latency_ms", latency_ms}};
  if (times > 0)
    r["match"]["times"] = times;
  return r;
}

nlohmann::json call(const char* name, nlohmann::json args) {
  return {{"name", name}, {"arguments", std::move(args)}};
}

// The scripted research: every orchestrator cycle starts 3 agents; each agent
// searches until its cycle limit (3), then writes its report.
nlohmann::json script(int latency_ms) {
  auto rules = nlohmann::json::array();
  rules.push_back(
    rule("You are the planner", {{"text", "1. Efficiency\n2. Defrost\n3. Costs"}}, latency_ms));
  auto three = nlohmann::json::array();
  for (auto task :
       {"Explain why efficiency falls in cold weather.", "Explain how defrost cycles work.",
        "Explain running costs against a gas boiler."})
    three.push_back(call("research_agent", {{"task", task}}));
  rules.push_back(rule("You are the orchestrator", {{"tool_calls", three}}, latency_ms, 3));
  rules.push_back(rule("You are the orchestrator",
                       {{"tool_calls", {call("generate_report", nlohmann::json::object())}}},
                       latency_ms));
  rules.push_back(
    rule("careful, precise research agent",
         {{"tool_calls", {call("internal_search", {{"queries", {"heat pump cold weather"}}})}}},
         latency_ms));
  rules.push_back(rule("finished its research",
                       {{"text", "Efficiency falls in the cold [1]. Defrost melts ice [2]."}},
                       latency_ms));
  rules.push_back(rule("You write the final answer",
                       {{"text", "Cold lowers efficiency [1]; defrost helps [2]."}}, latency_ms));
  return rules;
}

struct bench_env {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  std::shared_ptr<const core::prompt_library> prompts = std::make_shared<core::prompt_library>(
    core::prompt_library::embedded());
  actors::llm_provider_actor llm;
  actors::tool_set tools;

  bench_env(const std::string& plugin_dir, const std::string& base_url, int max_concurrency) {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({plugin_dir});
    rt = std::make_unique<actors::runtime>(cfg);
    auto made = registry->make_llm("openai", {{"base_url", base_url}, {"model", "m"}});
    core::llm_limits limits;
    limits.max_concurrency = max_concurrency;
    llm = actors::spawn_llm_provider(rt->system(),
                                     std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                     actors::llm_actor_settings::of("main", limits));
    rt->add_stoppable(llm);
    auto db = tmp.file("corpus.db");
    {
      auto opened = corpus::corpus_index::open(db);
      opened.index->update({std::string{QUARRY_SOURCE_DIR} + "/examples/corpus"});
    }
    auto tool = std::get<std::shared_ptr<sdk::tool>>(
      registry->make_tool("local_corpus", {{"db", db}}));
    auto hdl = actors::spawn_tool_provider(rt->system(), tool,
                                           actors::tool_actor_settings::of("internal_search", {}));
    rt->add_stoppable(hdl);
    tools.tools["internal_search"] = {hdl, tool->definition(), sdk::tool_kind::internal_search};
  }

  ~bench_env() {
    rt.reset();
    services->shutdown();
  }

  actors::session_spec spec(const std::string& id) {
    actors::session_spec s;
    s.session_id = id;
    s.question = "How do heat pumps cope with cold weather?";
    s.clarify = false;
    s.agent_max_cycles = 3;
    s.current_datetime = "Sunday November 22, 2026";
    return s;
  }
};

} // namespace

int main(int argc, char** argv) {
  int latency_ms = 100;
  int rounds = 3;
  int sessions = 1000;
  int packets = 200000;
  std::string plugin_dir = QUARRY_PLUGIN_DIR;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--latency-ms") == 0)
      latency_ms = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--rounds") == 0)
      rounds = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--sessions") == 0)
      sessions = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--packets") == 0)
      packets = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--plugin-dir") == 0)
      plugin_dir = argv[i + 1];
  }
  int rc = 0;
  // 1. The scripted run.
  {
    test::fake_llm_server server;
    bench_env env{plugin_dir, server.base_url_openai(), 16};
    const int critical_calls = 18;
    auto bound = static_cast<double>(critical_calls * latency_ms) / 1000.0;
    std::printf("scripted research: 3 cycles x 3 agents x 4 steps, %d ms per model "
                "call, critical path %d calls = %.2f s\n",
                latency_ms, critical_calls, bound);
    std::printf("%6s %10s %10s %12s %8s %8s\n", "round", "wall s", "wall/bound", "CPU s/run",
                "calls", "status");
    for (int r = 0; r < rounds; ++r) {
      if (auto err = server.script(script(latency_ms))) {
        std::fprintf(stderr, "script: %s\n", err->message.c_str());
        return 1;
      }
      server.clear_requests();
      auto em = actors::spawn_emitter(env.rt->system(), "bench");
      caf::scoped_actor self{env.rt->system()};
      auto cpu0 = bench::process_cpu_seconds();
      auto t0 = clock_type::now();
      actors::spawn_research_session(
        env.rt->system(), env.spec("bench"), {env.llm, env.llm, env.llm, env.llm, env.llm},
        env.tools, em, env.prompts, caf::actor_cast<actors::session_requester_actor>(self));
      actors::session_result result;
      self->receive(
        [&](actors::session_done_atom, actors::session_result& res) { result = std::move(res); });
      auto wall = std::chrono::duration<double>(clock_type::now() - t0).count();
      auto cpu = bench::process_cpu_seconds() - cpu0;
      self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
        .receive([](uint64_t) {}, [](const caf::error&) {});
      auto ok = result.status == actors::session_status::report;
      if (!ok || server.request_count() != 1 + 4 + 3 * 3 * 4 + 1)
        rc = 1;
      std::printf("%6d %10.3f %10.3f %12.3f %8llu %8s\n", r + 1, wall, wall / bound, cpu,
                  static_cast<unsigned long long>(server.request_count()),
                  ok ? "report" : "FAILED");
    }
  }
  // 2. Memory per session.
  {
    test::fake_llm_server server;
    auto rules = nlohmann::json::array();
    rules.push_back(rule("You are the planner", {{"text", "1. Step"}}, 600000));
    server.script(rules);
    bench_env env{plugin_dir, server.base_url_openai(), 64};
    caf::scoped_actor self{env.rt->system()};
    auto em = actors::spawn_emitter(env.rt->system(), "mem");
    // One session first, so that one-time allocations are not counted.
    std::vector<actors::session_actor> all;
    all.push_back(actors::spawn_research_session(
      env.rt->system(), env.spec("warm"), {env.llm, env.llm, env.llm, env.llm, env.llm}, env.tools,
      em, env.prompts, caf::actor_cast<actors::session_requester_actor>(self)));
    server.wait_for_requests(1, std::chrono::seconds{30});
    std::this_thread::sleep_for(std::chrono::milliseconds{500});
    auto before = rss_mib();
    for (int i = 0; i < sessions; ++i)
      all.push_back(actors::spawn_research_session(
        env.rt->system(), env.spec("s" + std::to_string(i)),
        {env.llm, env.llm, env.llm, env.llm, env.llm}, env.tools, em, env.prompts,
        caf::actor_cast<actors::session_requester_actor>(self)));
    // All sessions have sent their plan call (64 on the wire, the rest queued
    // in the provider actor).
    server.wait_for_requests(64, std::chrono::seconds{60});
    std::this_thread::sleep_for(std::chrono::seconds{2});
    auto after = rss_mib();
    std::printf("\n%d concurrent sessions waiting on their plan call: RSS %.1f -> "
                "%.1f MiB, %.1f KiB per session\n",
                sessions, before, after, (after - before) * 1024.0 / static_cast<double>(sessions));
    for (auto& a : all)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
  }
  // 3. Emitter throughput to JSONL.
  {
    core::settings cfg;
    actors::runtime rt{cfg};
    test::temp_dir tmp;
    auto path = tmp.file("packets.jsonl");
    auto out = std::make_shared<std::ofstream>(path);
    std::promise<uint64_t> done;
    auto sink = actors::spawn_line_sink(
      rt.system(), [out](const std::string& line, uint64_t) { *out << line << '\n'; },
      [&done, out](uint64_t n) {
        out->flush();
        done.set_value(n);
      });
    auto em = actors::spawn_emitter(rt.system(), "emit");
    caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
    caf::scoped_actor self{rt.system()};
    auto obj = core::packets::message_delta("a typical streamed piece of text ");
    auto t0 = clock_type::now();
    for (int i = 0; i < packets; ++i)
      self->send(em, actors::packet_atom::value, actors::make_packet({4, i % 3, i % 5}, obj));
    self->request(em, std::chrono::seconds{60}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
    auto n = done.get_future().get();
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    std::printf("\nemitter: %llu packets to JSONL in %.2f s = %.0f packets/s\n",
                static_cast<unsigned long long>(n), secs, static_cast<double>(n) / secs);
  }
  return rc;
}
