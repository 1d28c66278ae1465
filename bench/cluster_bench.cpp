// Benchmarks of Quarry across nodes.
//
//   quarry_bench_cluster dispatch [--n N]
//     In process, two actor systems on loopback (a session's node and a
//     worker with the extractive provider): the time from starting an agent
//     to its first packet at the session's packet sink, for an agent started
//     here (spawn_research_agent) and one placed on the worker through the
//     directory (spawn_agent_runner), and the round trip of a status request
//     to the worker. Overhead = remote - local - one round trip.
//
//   quarry_bench_cluster throughput [--workers 0,1,2,4] [--sessions S]
//                                   [--latency-ms L] [--node-concurrency C]
//     Real processes: the fake LLM server here (every call answered after L
//     ms), `quarry serve` as the session node with its research service
//     (cluster.listen) and W `quarry worker` processes; every node's model
//     provider allows C calls at once, as a per-key limit would. S researches
//     (the 3-agent script) are started at once through the research service
//     and their results awaited: researches per minute.
//
//   quarry_bench_cluster recovery [--runs R]
//     Real processes: two workers; a session's one agent is placed on worker
//     a, whose model call never answers; worker a is killed (SIGKILL), or
//     stopped (SIGSTOP, with the default 1 s heartbeat and 5 s timeout). The
//     time from the signal to the session's log line saying the agent runs
//     on worker b (log timestamps, ms).
//
//   common options: [--quarry EXE] [--plugin-dir DIR]

#include "quarry/actors/cluster.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/cluster/messages.hpp"
#include "quarry/cluster/register.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "integration/research_script.hpp"
#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <future>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace quarry;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using nlohmann::json;

namespace {

std::string quarry_exe = QUARRY_EXE;
std::string plugin_dir = QUARRY_PLUGIN_DIR;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

// -- dispatch -------------------------------------------------------------------

/// Records the time of the first packet it receives.
using first_packet_actor = cluster::packet_sink_actor;

first_packet_actor::behavior_type first_packet(first_packet_actor::pointer,
                                               std::shared_ptr<std::promise<void>> seen) {
  auto fired = std::make_shared<bool>(false);
  return {[=](cluster::packet_atom, const cluster::packet_msg&) {
    if (!*fired) {
      *fired = true;
      seen->set_value();
    }
  }};
}

int dispatch(int n) {
  test::temp_dir tmp;
  core::settings cfg;
  cfg.runtime.data_dir = tmp.path();
  cfg.runtime.scheduler_threads = 2;
  cfg.cluster.listen = "127.0.0.1:0"; // every runtime here is a node
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  registry.load_directories({plugin_dir});
  auto prompts = std::make_shared<core::prompt_library>(core::prompt_library::embedded());
  auto make_llm = [&](actors::runtime& rt) {
    auto made = registry.make_llm("extractive", json::object());
    auto provider = std::get<std::shared_ptr<sdk::llm_provider>>(made);
    auto hdl = actors::spawn_llm_provider(rt.system(), provider,
                                          actors::llm_actor_settings::of("main", {}));
    rt.add_stoppable(hdl);
    return hdl;
  };
  int rc = 0;
  {
    actors::runtime here{cfg};
    actors::runtime there{cfg};
    auto here_llm = make_llm(here);
    actors::agent_host_setup hs;
    hs.name = "bench";
    hs.capacity = 10'000;
    hs.llm = make_llm(there);
    hs.prompts = prompts;
    auto host = actors::spawn_agent_host(there.system(), hs);
    there.add_stoppable(host);
    auto port = there.system().middleman().publish(cluster::agent_host_actor{host}, 0, "127.0.0.1");
    if (!port) {
      std::cerr << "cannot publish: " << there.system().render(port.error()) << "\n";
      return 1;
    }
    actors::directory_setup ds;
    ds.workers = {"127.0.0.1:" + std::to_string(*port)};
    auto dir = actors::spawn_worker_directory(here.system(), ds);
    here.add_stoppable(dir);
    caf::scoped_actor self{here.system()};
    auto parent = caf::actor_cast<actors::agent_parent_actor>(self);
    actors::agent_spec spec;
    spec.task = "Why does the efficiency of a heat pump fall in cold weather?";
    auto measure = [&](bool remote) {
      auto seen = std::make_shared<std::promise<void>>();
      auto fut = seen->get_future();
      auto sink = here.system().spawn(first_packet, seen);
      auto t0 = clock_type::now();
      actors::research_agent_actor agent;
      if (remote) {
        actors::runner_setup where;
        where.directory = dir;
        agent = actors::spawn_agent_runner(here.system(), spec, here_llm, {}, sink, prompts, parent,
                                           where);
      } else {
        agent = actors::spawn_research_agent(here.system(), spec, here_llm, {}, sink, prompts,
                                             parent);
      }
      auto ok = fut.wait_for(10s) == std::future_status::ready;
      auto dt = ms_since(t0);
      self->send(agent, cluster::stop_atom::value);
      caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
      return ok ? dt : -1.0;
    };
    // The first connection and warm-up.
    for (int i = 0; i < 20; ++i) {
      measure(true);
      measure(false);
    }
    std::vector<double> local, remote, rtt;
    for (int i = 0; i < n; ++i) {
      local.push_back(measure(false));
      remote.push_back(measure(true));
    }
    // The round trip through the network layer: the worker's host as the
    // session's node sees it (a proxy), asked from a third system.
    {
      actors::runtime client{cfg};
      auto proxy = client.system().middleman().remote_actor<cluster::agent_host_actor>("127.0.0.1",
                                                                                       *port);
      if (proxy) {
        caf::scoped_actor c{client.system()};
        for (int i = 0; i < n; ++i) {
          auto t0 = clock_type::now();
          c->request(*proxy, 10s, cluster::worker_status_atom::value)
            .receive([](const cluster::worker_status&) {}, [](const caf::error&) {});
          rtt.push_back(ms_since(t0));
        }
      }
    }
    auto failed = std::count(local.begin(), local.end(), -1.0)
                  + std::count(remote.begin(), remote.end(), -1.0);
    std::printf("dispatch: %d agents each way (time from start to the first packet at the "
                "session's sink)\n",
                n);
    std::printf("| path | p50 ms | p95 ms |\n|---|---|---|\n");
    std::printf("| local agent | %.3f | %.3f |\n", percentile(local, 0.5), percentile(local, 0.95));
    std::printf("| remote agent (runner, directory, worker on loopback) | %.3f | %.3f |\n",
                percentile(remote, 0.5), percentile(remote, 0.95));
    std::printf("| status round trip on loopback | %.3f | %.3f |\n", percentile(rtt, 0.5),
                percentile(rtt, 0.95));
    std::printf("overhead beyond one round trip (p50): %.3f ms; failures: %ld\n",
                percentile(remote, 0.5) - percentile(local, 0.5) - percentile(rtt, 0.5),
                static_cast<long>(failed));
    rc = failed == 0 ? 0 : 1;
  }
  services.shutdown();
  return rc;
}

// -- processes ------------------------------------------------------------------

std::vector<std::string> argv_of(std::vector<std::string> args) {
  std::vector<std::string> out{quarry_exe, "--plugin-dir", plugin_dir};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

/// The model provider of every node: the fake server, C calls at once.
std::vector<std::string> provider_settings(const test::fake_llm_server& server, int concurrency) {
  return {"--set", "llm.providers.main.plugin=openai",
          "--set", "llm.providers.main.base_url=" + server.base_url_openai(),
          "--set", "llm.providers.main.api_key=k",
          "--set", "llm.providers.main.model=m",
          "--set", "llm.providers.main.limits.max_concurrency=" + std::to_string(concurrency)};
}

std::string after(const std::string& text, const std::string& marker) {
  auto at = text.find(marker);
  if (at == std::string::npos)
    return {};
  at += marker.size();
  return text.substr(at, text.find_first_of(" \n", at) - at);
}

std::unique_ptr<test::child_process> start(const std::string& home, std::vector<std::string> args) {
  return std::make_unique<test::child_process>(argv_of(std::move(args)),
                                               test::isolated_quarry_options(home));
}

/// Every research: the plan, an orchestrator call that starts `agents`
/// agents, each agent one search and its report, the orchestrator's
/// generate_report (once the agents' reports are in its request), the final
/// report. No rule is limited in uses, so any number of researches follow
/// the same script at once.
json script(int agents, int latency_ms) {
  using namespace test::script;
  auto rules = json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  json report_now{{"match",
                   {{"system_contains", orchestrator_marker},
                    {"message_contains", "Heat pump efficiency falls"}}},
                  {"respond", calls({{"generate_report", json::object()}})}};
  rules.push_back(report_now);
  std::vector<std::pair<std::string, json>> xs;
  for (int i = 0; i < agents; ++i)
    xs.emplace_back("research_agent", json{{"task", "Task " + std::to_string(i)}});
  rules.push_back(rule(orchestrator_marker, calls(xs)));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Done [1]."}}));
  for (auto& r : rules)
    r["latency_ms"] = latency_ms;
  return rules;
}

int throughput(const std::vector<int>& worker_counts, int sessions, int latency_ms,
               int concurrency) {
  std::printf("throughput: %d researches of 3 agents started at once; every model call "
              "answered after %d ms; every node's provider %d calls at once\n",
              sessions, latency_ms, concurrency);
  std::printf("| workers | wall s | researches/min | failed |\n|---|---|---|---|\n");
  for (int workers : worker_counts) {
    test::temp_dir tmp;
    test::fake_llm_server server;
    if (server.script(script(3, latency_ms))) {
      std::cerr << "bad script\n";
      return 1;
    }
    std::vector<std::unique_ptr<test::child_process>> ws;
    std::vector<std::string> addresses;
    for (int i = 0; i < workers; ++i) {
      auto args = provider_settings(server, concurrency);
      args.insert(args.begin(), {"worker", "--listen", "127.0.0.1:0"});
      args.insert(args.end(), {"--set", "cluster.max_agents=1000"});
      ws.push_back(start(tmp.path() + "/w" + std::to_string(i), args));
      if (!ws.back()->wait_for_err("worker listening on ", 120s)) {
        std::cerr << ws.back()->err();
        return 1;
      }
      addresses.push_back(after(ws.back()->err(), "worker listening on "));
    }
    std::string list;
    for (const auto& a : addresses)
      list += (list.empty() ? "" : ", ") + a;
    auto args = provider_settings(server, concurrency);
    args.insert(args.begin(), {"serve", "--listen", "127.0.0.1:0"});
    args.insert(args.end(),
                {"--set", "cluster.listen=127.0.0.1:0", "--set", "cluster.workers=[" + list + "]",
                 "--set", "server.max_running_sessions=1000"});
    auto serve = start(tmp.path() + "/serve", args);
    if (!serve->wait_for_err("research service for CAF programs on ", 120s)) {
      std::cerr << serve->err();
      return 1;
    }
    auto at = after(serve->err(), "research service for CAF programs on ");
    auto port = static_cast<uint16_t>(std::stoi(at.substr(at.rfind(':') + 1)));

    caf::actor_system_config cfg;
    cfg.set("logger.verbosity", caf::atom("quiet"));
    cluster::register_types(cfg);
    cfg.load<caf::io::middleman>();
    int failed = 0;
    double wall_s = 0;
    {
      caf::actor_system sys{cfg};
      auto svc = sys.middleman().remote_actor<cluster::research_service_actor>("127.0.0.1", port);
      if (!svc) {
        std::cerr << sys.render(svc.error()) << "\n";
        return 1;
      }
      auto sink = sys.spawn([]() -> cluster::line_sink_actor::behavior_type {
        return {[](cluster::packet_atom, const std::string&, uint64_t) {},
                [](cluster::stop_atom, uint64_t) {}};
      });
      caf::scoped_actor self{sys};
      auto t0 = clock_type::now();
      std::vector<std::string> ids;
      for (int i = 0; i < sessions; ++i) {
        cluster::research_request req;
        req.question = "How do heat pumps cope with cold weather? (" + std::to_string(i) + ")";
        self->request(*svc, 60s, cluster::research_atom::value, req, sink)
          .receive([&](const std::string& id) { ids.push_back(id); },
                   [&](const caf::error&) { ++failed; });
      }
      for (const auto& id : ids)
        self->request(*svc, 300s, cluster::result_atom::value, id)
          .receive(
            [&](const cluster::session_result& r) {
              if (r.status != cluster::session_status::report) {
                std::cerr << "session " << id << ": " << r.failure << "\n";
                ++failed;
              }
            },
            [&](const caf::error& e) {
              std::cerr << "session " << id << ": " << sys.render(e) << "\n";
              ++failed;
            });
      if (failed > 0)
        std::cerr << serve->err().substr(serve->err().size() > 4000 ? serve->err().size() - 4000
                                                                    : 0);
      wall_s = ms_since(t0) / 1000.0;
      caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    }
    std::printf("| %d | %.1f | %.1f | %d |\n", workers, wall_s,
                static_cast<double>(sessions) / (wall_s / 60.0), failed);
    std::fflush(stdout);
    serve->signal(SIGTERM);
    serve->wait(60s);
    for (auto& w : ws) {
      w->signal(SIGTERM);
      w->wait(60s);
    }
  }
  return 0;
}

/// The milliseconds since the epoch of the log line holding `needle`
/// (`2026-11-26T15:36:23.335Z info ...`), or -1.
double log_time_ms(const std::string& err, const std::string& needle) {
  auto at = err.find(needle);
  if (at == std::string::npos)
    return -1;
  auto line_start = err.rfind('\n', at);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  std::tm tm{};
  int ms = 0;
  std::istringstream in{err.substr(line_start, 24)};
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  char dot = 0;
  in >> dot >> ms;
  if (in.fail())
    return -1;
  return static_cast<double>(timegm(&tm)) * 1000.0 + ms;
}

double epoch_ms() {
  return std::chrono::duration<double, std::milli>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

int recovery(int runs) {
  std::printf("recovery: a worker lost while its agent waits for the model; time from the "
              "signal to the agent running on the other worker (ms)\n");
  std::printf("| signal | runs | p50 ms | max ms |\n|---|---|---|---|\n");
  for (int sig : {SIGKILL, SIGSTOP}) {
    std::vector<double> times;
    for (int run = 0; run < runs; ++run) {
      test::temp_dir tmp;
      test::fake_llm_server server;
      auto rules = test::script::parallel_agents_script(1);
      rules.insert(rules.begin(),
                   json{{"match", {{"system_contains", test::script::agent_marker}, {"times", 1}}},
                        {"respond", {{"text", "never"}}},
                        {"stall_after_bytes", 0}});
      if (server.script(rules))
        return 1;
      auto worker = [&](const std::string& name) {
        auto args = provider_settings(server, 16);
        args.insert(args.begin(), {"--log-level", "info", "worker", "--listen", "127.0.0.1:0"});
        return start(tmp.path() + "/" + name, args);
      };
      auto a = worker("a");
      auto b = worker("b");
      if (!a->wait_for_err("worker listening on ", 120s)
          || !b->wait_for_err("worker listening on ", 120s))
        return 1;
      auto addr_a = after(a->err(), "worker listening on ");
      auto addr_b = after(b->err(), "worker listening on ");
      auto args = provider_settings(server, 16);
      args.insert(args.begin(),
                  {"--log-level", "info", "research", "--no-clarify", "--no-store", "--json"});
      args.insert(args.end(), {"--set", "cluster.workers=[" + addr_a + ", " + addr_b + "]",
                               "How do heat pumps cope with cold weather?"});
      auto session = start(tmp.path() + "/s", args);
      if (!a->wait_for_err("worker: agent ", 60s))
        return 1;
      // The agent's model request is on its way; give it time to arrive.
      auto deadline = clock_type::now() + 30s;
      while (server.requests().size() < 3 && clock_type::now() < deadline)
        std::this_thread::sleep_for(1ms);
      auto signalled = epoch_ms();
      a->signal(sig);
      auto needle = "runs on worker " + addr_b;
      if (!session->wait_for_err(needle, 60s)) {
        std::cerr << session->err();
        return 1;
      }
      auto placed = log_time_ms(session->err(), needle);
      times.push_back(placed - signalled);
      session->wait(60s);
      if (sig == SIGSTOP)
        a->signal(SIGCONT);
    }
    std::printf("| %s | %d | %.0f | %.0f |\n", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", runs,
                percentile(times, 0.5), percentile(times, 1.0));
    std::fflush(stdout);
  }
  return 0;
}

std::vector<int> parse_list(const std::string& x) {
  std::vector<int> out;
  std::istringstream in{x};
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoi(item));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  actors::block_stop_signals();
  if (argc < 2) {
    std::cerr << "usage: quarry_bench_cluster dispatch|throughput|recovery [options]\n";
    return 2;
  }
  std::string what = argv[1];
  int n = 200;
  int sessions = 12;
  int latency_ms = 400;
  int concurrency = 2;
  int runs = 5;
  std::vector<int> workers{0, 1, 2, 4};
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    std::string v = argv[i + 1];
    if (k == "--n")
      n = std::stoi(v);
    else if (k == "--sessions")
      sessions = std::stoi(v);
    else if (k == "--latency-ms")
      latency_ms = std::stoi(v);
    else if (k == "--node-concurrency")
      concurrency = std::stoi(v);
    else if (k == "--workers")
      workers = parse_list(v);
    else if (k == "--runs")
      runs = std::stoi(v);
    else if (k == "--quarry")
      quarry_exe = v;
    else if (k == "--plugin-dir")
      plugin_dir = v;
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (what == "dispatch")
    return dispatch(n);
  if (what == "throughput")
    return throughput(workers, sessions, latency_ms, concurrency);
  if (what == "recovery")
    return recovery(runs);
  std::cerr << "unknown benchmark " << what << "\n";
  return 2;
}
