// Quarry across nodes with real processes on loopback: `quarry worker`
// processes run the research agents of a `quarry research` process (the
// fake LLM server answers both), workers killed with SIGKILL or stopped with
// SIGSTOP while their agent works, a worker that lacks a tool, mutual TLS
// with good, foreign and missing certificates, and the refusals of a worker
// that would listen beyond loopback without TLS.

#include "cluster_support.hpp"
#include "research_script.hpp"

#include "quarry/cluster/messages.hpp"
#include "quarry/cluster/register.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <sys/stat.h>
#include <filesystem>
#include <sstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace cluster_test {

using namespace quarry;
using namespace quarry::test::script;
using nlohmann::json;
using namespace std::chrono_literals;
using test::cluster::cluster_fixture;
using test::cluster::concat;
using test::cluster::packets_by_placement;

namespace {

/// The agent tab's packet objects of `packets`, in order.
std::vector<json> agent_lane(const std::vector<json>& packets, int tab) {
  std::vector<json> out;
  int agents_turn = -1;
  for (const auto& p : packets)
    if (p["obj"]["type"] == "research_agent_start" && agents_turn < 0)
      agents_turn = p["placement"]["turn_index"].get<int>();
  for (const auto& p : packets)
    if (p["placement"]["turn_index"] == agents_turn && p["placement"]["tab_index"] == tab)
      out.push_back(p["obj"]);
  return out;
}

/// The index of the last `agent_superseded` packet of `lane`, or its size.
size_t superseded_mark(const std::vector<json>& lane) {
  size_t mark = lane.size();
  for (size_t i = 0; i < lane.size(); ++i)
    if (lane[i]["type"] == "agent_superseded")
      mark = i;
  return mark;
}

/// Checks that every citation number names one document and every
/// document one number (the report's Sources).
void check_citations_once(const std::vector<json>& packets) {
  std::map<int, std::string> by_number;
  std::map<std::string, int> by_doc;
  for (const auto& p : packets) {
    if (p["obj"]["type"] != "citation_info")
      continue;
    auto n = p["obj"]["citation_number"].get<int>();
    auto doc = p["obj"]["document_id"].get<std::string>();
    auto [a, fresh_number] = by_number.emplace(n, doc);
    if (!fresh_number)
      CHECK(a->second == doc);
    auto [b, fresh_doc] = by_doc.emplace(doc, n);
    if (!fresh_doc)
      CHECK(b->second == n);
  }
  CHECK_FALSE(by_number.empty());
}

} // namespace

TEST_CASE_FIXTURE(cluster_fixture, "cluster: agents placed on two workers give the "
                                   "same report, citations and packets as a local run") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(two_agent_script()));
  auto question = "How do heat pumps cope with cold weather?";
  auto local = research(server, {"--json", "--out", home.file("local.md"), question});
  CAPTURE(local.err);
  REQUIRE(local.exit_code == 0);
  // The same script on a fresh server for the run on the workers (a fake
  // server numbers the tool call ids it makes up by its requests so far).
  test::fake_llm_server fresh;
  REQUIRE_FALSE(fresh.script(two_agent_script()));
  auto a = start_worker(fresh, "a");
  auto b = start_worker(fresh, "b");
  auto remote = research(fresh, {"--json", "--out", home.file("remote.md"), "--set",
                                 workers_setting({a->address, b->address}), question});
  CAPTURE(remote.err);
  REQUIRE(remote.exit_code == 0);
  // Each worker ran one of the two agents (the fewest outstanding first).
  CHECK(count_of(a->process->err(), "worker: agent ") == 1);
  CHECK(count_of(b->process->err(), "worker: agent ") == 1);
  CHECK(remote.err.find("runs on worker " + a->address) != std::string::npos);
  CHECK(remote.err.find("runs on worker " + b->address) != std::string::npos);

  CHECK(test::read_file(home.file("remote.md")) == test::read_file(home.file("local.md")));
  auto lp = lines(local.out);
  auto rp = lines(remote.out);
  // Agents run at once, so only the order within each placement is fixed.
  auto rg = packets_by_placement(rp);
  auto lg = packets_by_placement(lp);
  for (const auto& where_objs : lg) {
    const auto& where = where_objs.first;
    const auto& objs = where_objs.second;
    CAPTURE(where);
    auto other = rg.find(where);
    REQUIRE(other != rg.end());
    for (size_t i = 0; i < std::min(objs.size(), other->second.size()); ++i) {
      CAPTURE(i);
      CHECK(other->second[i] == objs[i]);
    }
    CHECK(other->second.size() == objs.size());
  }
  CHECK(rg.size() == lg.size());
  CHECK(rp.size() == lp.size());
  check_citations_once(rp);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: a worker killed with SIGKILL mid-task: its "
                                   "agent runs again on the other worker and the run "
                                   "completes with each citation numbered once") {
  test::fake_llm_server server;
  // The first agent request never gets an answer.
  auto rules = parallel_agents_script(1);
  rules.insert(rules.begin(), json{{"match", {{"system_contains", agent_marker}, {"times", 1}}},
                                   {"respond", {{"text", "never"}}},
                                   {"stall_after_bytes", 0}});
  REQUIRE_FALSE(server.script(rules));
  auto a = start_worker(server, "a");
  auto b = start_worker(server, "b");
  auto session = start_research(server,
                                {"--json", "--set", workers_setting({a->address, b->address}),
                                 "How do heat pumps cope with cold weather?"});
  REQUIRE(wait_for_requests(server, agent_marker, 1));
  // The agent is on worker a (first on a tie); kill it.
  REQUIRE(a->process->wait_for_err("worker: agent ", 10s));
  auto killed_at = std::chrono::steady_clock::now();
  a->process->signal(SIGKILL);
  auto res = session->wait(120s);
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto packets = lines(res.out);
  auto lane = agent_lane(packets, 0);
  // The lost attempt's packets, the mark, then one whole attempt.
  auto mark = superseded_mark(lane);
  REQUIRE(mark < lane.size());
  CHECK(lane[mark]["worker"] == a->address);
  CHECK(lane[mark]["attempt"] == 1);
  size_t starts_after = 0;
  for (size_t i = mark + 1; i < lane.size(); ++i)
    if (lane[i]["type"] == "research_agent_start")
      ++starts_after;
  CHECK(starts_after == 1);
  CHECK(lane.back()["type"] == "section_end");
  CHECK(count_of(b->process->err(), "worker: agent ") == 1);
  check_citations_once(packets);
  CHECK(packets.back()["obj"]["type"] == "stop");
  // Found lost and placed again within seconds.
  CHECK(std::chrono::steady_clock::now() - killed_at < 30s);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: a worker stopped with SIGSTOP is lost after "
                                   "the heartbeat timeout, and its late answers after "
                                   "SIGCONT are ignored") {
  test::fake_llm_server server;
  // The first agent request is answered late (after the worker was
  // stopped, taken as lost and resumed); the final report takes a while, so
  // the session still runs when the late answers come.
  auto rules = parallel_agents_script(1);
  rules.insert(rules.begin(),
               json{{"match", {{"system_contains", agent_marker}, {"times", 1}}},
                    {"latency_ms", 4000},
                    {"respond", calls({{"internal_search", {{"queries", {"late answer"}}}}})}});
  for (auto& r : rules)
    if (r["match"]["system_contains"] == final_marker)
      r["latency_ms"] = 5000;
  REQUIRE_FALSE(server.script(rules));
  auto a = start_worker(server, "a");
  auto b = start_worker(server, "b");
  auto session = start_research(
    server, {"--json", "--set", workers_setting({a->address, b->address}), "--set",
             "cluster.heartbeat=200ms", "--set", "cluster.heartbeat_timeout=1500ms",
             "How do heat pumps cope with cold weather?"});
  REQUIRE(wait_for_requests(server, agent_marker, 1));
  REQUIRE(a->process->wait_for_err("worker: agent ", 10s));
  a->process->signal(SIGSTOP);
  REQUIRE(session->wait_for_err("worker " + a->address + " lost", 20s));
  a->process->signal(SIGCONT);
  auto res = session->wait(120s);
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto packets = lines(res.out);
  auto lane = agent_lane(packets, 0);
  auto mark = superseded_mark(lane);
  REQUIRE(mark < lane.size());
  // Nothing of the late attempt after the mark: one start, and not the
  // late search's query.
  size_t starts_after = 0;
  for (size_t i = mark + 1; i < lane.size(); ++i) {
    if (lane[i]["type"] == "research_agent_start")
      ++starts_after;
    CHECK(lane[i].dump().find("late answer") == std::string::npos);
  }
  CHECK(starts_after == 1);
  check_citations_once(packets);
  CHECK(count_of(b->process->err(), "worker: agent ") == 1);
  // Worker a was resumed and keeps serving: a new session uses it.
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto again = research(server, {"--json", "--set", workers_setting({a->address}),
                                 "How do heat pumps cope with cold weather?"});
  CAPTURE(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.err.find("runs on worker " + a->address) != std::string::npos);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: a worker that lacks one of the session's "
                                   "tools is not given agents, and the run completes "
                                   "here") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto a = start_worker(server, "a");
  // The session also has a web search (never reached); the worker has only
  // internal_search and the open_url a corpus gets by default.
  auto res = research(server, {"--json", "--set", workers_setting({a->address}), "--set",
                               "tools.web_search.plugin=searxng", "--set",
                               "tools.web_search.base_url=http://127.0.0.1:9", "--corpus",
                               std::string{QUARRY_SOURCE_DIR} + "/examples/corpus",
                               "How do heat pumps cope with cold weather?"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("worker " + a->address + " lacks tool(s) web_search") != std::string::npos);
  CHECK(count_of(a->process->err(), "worker: agent ") == 0);
  CHECK(lines(res.out).back()["obj"]["type"] == "stop");
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: no reachable worker: the agents run on the "
                                   "session's node") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(2)));
  // Nothing listens there.
  auto res = research(server, {"--json", "--set", workers_setting({"127.0.0.1:1"}),
                               "How do heat pumps cope with cold weather?"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("worker 127.0.0.1:1 cannot be used") != std::string::npos);
  CHECK(lines(res.out).back()["obj"]["type"] == "stop");
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: mutual TLS between a session and a worker; "
                                   "a plaintext session and a foreign certificate are "
                                   "refused") {
  auto pki = make_pki();
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto a = start_worker(server, "a", tls_settings(pki.node_cert, pki.node_key, pki.ca));
  auto q = "How do heat pumps cope with cold weather?";

  auto good = research(server, concat({"--json", "--set", workers_setting({a->address})},
                                      tls_settings(pki.client_cert, pki.client_key, pki.ca), {q}));
  CAPTURE(good.err);
  REQUIRE(good.exit_code == 0);
  CHECK(good.err.find("runs on worker " + a->address) != std::string::npos);
  CHECK(count_of(a->process->err(), "worker: agent ") == 1);

  // Plaintext against the TLS port: refused, the agent runs here.
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto plain = research(server, {"--json", "--set", workers_setting({a->address}), q});
  CAPTURE(plain.err);
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.err.find("worker " + a->address + " cannot be used") != std::string::npos);
  CHECK(plain.err.find("research agent 1 runs on this node") != std::string::npos);
  // A certificate of another CA (which this session trusts): the worker
  // refuses it, and the session refuses the worker's.
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto foreign = research(
    server, concat({"--json", "--set", workers_setting({a->address})},
                   tls_settings(pki.foreign_cert, pki.foreign_key, pki.foreign_ca), {q}));
  CAPTURE(foreign.err);
  REQUIRE(foreign.exit_code == 0);
  CHECK(foreign.err.find("worker " + a->address + " cannot be used") != std::string::npos);
  CHECK(foreign.err.find("research agent 1 runs on this node") != std::string::npos);
  CHECK(count_of(a->process->err(), "worker: agent ") == 1);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: missing or mismatched certificates, bad "
                                   "addresses and plaintext beyond loopback are refused "
                                   "before anything starts") {
  auto pki = make_pki();
  auto missing = quarry(concat({"worker", "--listen", "127.0.0.1:0"},
                               tls_settings(home.file("nope.pem"), pki.node_key, pki.ca), {}));
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("cluster.tls.cert: no such file") != std::string::npos);
  auto half = quarry(
    {"worker", "--listen", "127.0.0.1:0", "--set", "cluster.tls.cert=" + pki.node_cert});
  CHECK(half.exit_code == 2);
  CHECK(half.err.find("cluster.tls.key: mutual TLS needs") != std::string::npos);
  auto mismatched = quarry(concat({"worker", "--listen", "127.0.0.1:0"},
                                  tls_settings(pki.node_cert, pki.client_key, pki.ca), {}));
  CHECK(mismatched.exit_code == 2);
  CHECK(mismatched.err.find("does not belong to the certificate") != std::string::npos);
  auto foreign = quarry(concat({"worker", "--listen", "127.0.0.1:0"},
                               tls_settings(pki.foreign_cert, pki.foreign_key, pki.ca), {}));
  CHECK(foreign.exit_code == 2);
  CHECK(foreign.err.find("is not signed by the CA") != std::string::npos);
  // A directory or a FIFO is not read (a FIFO would block the start).
  auto dir = quarry(concat({"worker", "--listen", "127.0.0.1:0"},
                           tls_settings(pki.node_cert, pki.node_key, home.path()), {}));
  CHECK(dir.exit_code == 2);
  CHECK(dir.err.find("cluster.tls.ca: not a regular file") != std::string::npos);
  auto fifo = home.file("key.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto piped = quarry(
    concat({"worker", "--listen", "127.0.0.1:0"}, tls_settings(pki.node_cert, fifo, pki.ca), {}));
  CHECK(piped.exit_code == 2);
  CHECK(piped.err.find("cluster.tls.key: not a regular file") != std::string::npos);
  auto open = quarry({"worker", "--listen", "0.0.0.0:0"});
  CHECK(open.exit_code == 2);
  CHECK(open.err.find("refusing to listen on 0.0.0.0:0 without TLS") != std::string::npos);
  auto no_listen = quarry({"worker"});
  CHECK(no_listen.exit_code == 2);
  CHECK(no_listen.err.find("--listen HOST:PORT") != std::string::npos);
  auto bad_listen = quarry({"worker", "--listen", "nowhere"});
  CHECK(bad_listen.exit_code == 2);
  auto bad_worker = quarry(
    {"research", "--no-clarify", "--set", "cluster.workers=[127.0.0.1:0, nowhere]", "q?"});
  CHECK(bad_worker.exit_code == 2);
  CHECK(bad_worker.err.find("cluster.workers: not HOST:PORT") != std::string::npos);
}

// A CAF program of its own, built only on the node interfaces
// (quarry/cluster/*.hpp), against a real `quarry worker`: status, an agent
// spawned there whose packets and result come to this program, and the
// worker's answers to refused, oversized and foreign messages.
TEST_CASE_FIXTURE(cluster_fixture, "cluster: a foreign CAF program spawns an agent on a "
                                   "worker; oversized and unexpected messages are "
                                   "dropped with a log line and the worker keeps "
                                   "serving") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto w = start_worker(server, "w");
  auto port = static_cast<uint16_t>(std::stoi(w->address.substr(w->address.rfind(':') + 1)));

  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("scheduler.max-threads", 2);
  quarry::cluster::register_types(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto connect = [&] {
    auto host = sys.middleman().remote_actor<quarry::cluster::agent_host_actor>("127.0.0.1", port);
    REQUIRE_MESSAGE(host, sys.render(host.error()));
    return *host;
  };
  auto host = connect();
  caf::scoped_actor self{sys};
  auto status = [&](const quarry::cluster::agent_host_actor& h) {
    std::optional<quarry::cluster::worker_status> out;
    self->request(h, 10s, quarry::cluster::worker_status_atom::value)
      .receive([&](quarry::cluster::worker_status& s) { out = std::move(s); },
               [&](const caf::error& e) { FAIL(sys.render(e)); });
    return out;
  };
  auto s = status(host);
  REQUIRE(s);
  CHECK(s->protocol == quarry::cluster::protocol_version);
  CHECK(s->capacity == 8);
  CHECK(s->running == 0);
  CHECK(std::find(s->tools.begin(), s->tools.end(), "internal_search") != s->tools.end());

  // The agent's packets and result come to this program.
  using collector_actor = caf::typed_actor<
    caf::reacts_to<quarry::cluster::packet_atom, quarry::cluster::packet_msg>,
    caf::reacts_to<quarry::cluster::agent_done_atom, quarry::cluster::agent_result>>;
  std::mutex mtx;
  std::vector<std::string> types;
  std::promise<quarry::cluster::agent_result> done;
  auto collector = sys.spawn([&]() -> collector_actor::behavior_type {
    return {
      [&](quarry::cluster::packet_atom, const quarry::cluster::packet_msg& p) {
        std::lock_guard<std::mutex> guard{mtx};
        types.push_back(json::parse(p.obj)["type"].get<std::string>());
      },
      [&](quarry::cluster::agent_done_atom, const quarry::cluster::agent_result& r) {
        done.set_value(r);
      },
    };
  });
  quarry::cluster::agent_spec spec;
  spec.call_id = "call_foreign";
  spec.task = "How do heat pumps defrost?";
  spec.tools = {"internal_search"};
  spec.current_datetime = "2026-11-26";
  quarry::cluster::spawn_reply reply;
  self
    ->request(
      host, 10s, quarry::cluster::spawn_agent_atom::value, quarry::cluster::protocol_version, spec,
      quarry::cluster::agent_parent_actor{collector}, quarry::cluster::packet_sink_actor{collector})
    .receive([&](quarry::cluster::spawn_reply& r) { reply = std::move(r); },
             [&](const caf::error& e) { FAIL(sys.render(e)); });
  INFO(reply.refusal);
  REQUIRE(reply.agent);
  auto result = done.get_future();
  REQUIRE(result.wait_for(60s) == std::future_status::ready);
  auto r = result.get();
  CHECK(r.ok);
  CHECK(r.call_id == "call_foreign");
  CHECK(r.report.find("[1]") != std::string::npos);
  CHECK_FALSE(r.cited.empty());
  {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE_FALSE(types.empty());
    CHECK(types.front() == "research_agent_start");
  }

  // Refusals come with their reason.
  auto refused = [&](int32_t protocol, quarry::cluster::agent_spec x) {
    std::string why;
    self
      ->request(host, 10s, quarry::cluster::spawn_agent_atom::value, protocol, x,
                quarry::cluster::agent_parent_actor{collector},
                quarry::cluster::packet_sink_actor{collector})
      .receive(
        [&](quarry::cluster::spawn_reply& rr) {
          CHECK_FALSE(rr.agent);
          why = rr.refusal;
        },
        [&](const caf::error& e) { FAIL(sys.render(e)); });
    return why;
  };
  CHECK(refused(99, spec).find("protocol 99") != std::string::npos);
  auto no_tool = spec;
  // The worker has a corpus: internal_search and the open_url a corpus
  // gets by default, no web search.
  no_tool.tools = {"internal_search", "web_search"};
  CHECK(refused(quarry::cluster::protocol_version, no_tool)
        == "this worker has no tool web_search (it has: internal_search, open_url)");
  auto bad_limits = spec;
  bad_limits.max_cycles = 1000;
  CHECK(refused(quarry::cluster::protocol_version, bad_limits).find("max_cycles 1000")
        != std::string::npos);
  CHECK(w->process->wait_for_err("worker: refused an agent from node", 10s));

  // An oversized task never reaches the agent host: dropped while read.
  auto big = spec;
  big.task.assign(quarry::cluster::max_task_bytes + 1, 'x');
  // The sender gets an error (not a reply): its own timeout, or CAF's
  // word that the message was not delivered.
  std::string big_error;
  self
    ->request(host, 3s, quarry::cluster::spawn_agent_atom::value, quarry::cluster::protocol_version,
              big, quarry::cluster::agent_parent_actor{collector},
              quarry::cluster::packet_sink_actor{collector})
    .receive([&](quarry::cluster::spawn_reply&) { FAIL("an oversized task was answered"); },
             [&](const caf::error& e) { big_error = sys.render(e); });
  MESSAGE("the sender of an oversized task got: " << big_error);
  CHECK_FALSE(big_error.empty());
  CHECK(w->process->wait_for_err("dropped a message from another node: a task past 64 KiB", 10s));
  // A message outside the interface is dropped with a log line.
  self->send(caf::actor_cast<caf::actor>(host), std::string{"rm -rf /"});
  CHECK(w->process->wait_for_err("dropped a message outside the agent host's interface", 10s));
  // Raw garbage on the worker's port.
  {
    auto garbage = test::run_process(
      {"bash", "-c", "head -c 4096 /dev/urandom > /dev/tcp/127.0.0.1/" + std::to_string(port)});
    CHECK(garbage.exit_code == 0);
  }
  // The worker still serves.
  auto again = status(connect());
  REQUIRE(again);
  CHECK(again->running == 0);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

// The installed node interfaces, used by a program outside Quarry: staged
// with `cmake --install` (components sdk and cluster), the example client
// built against them alone, then run against a real `quarry serve` and a
// real `quarry worker`.
TEST_CASE_FIXTURE(cluster_fixture, "cluster: examples/cluster_client, built out of tree "
                                   "against the installed quarry-cluster package, runs a "
                                   "research on quarry serve and an agent on a worker") {
  auto stage = home.file("stage");
  auto build = home.file("client-build");
  auto run = [](std::vector<std::string> args) {
    test::process_options opts;
    opts.timeout = std::chrono::minutes{5};
    return test::run_process(args, opts);
  };
  for (const char* component : {"sdk", "cluster"}) {
    auto install = run({QUARRY_CMAKE_COMMAND, "--install", QUARRY_BINARY_DIR, "--prefix", stage,
                        "--component", component});
    INFO(install.out, install.err);
    REQUIRE(install.exit_code == 0);
  }
  REQUIRE(std::filesystem::exists(stage + "/include/quarry/cluster/messages.hpp"));
  // The node interfaces include CAF, the SDK, themselves and the standard
  // library, nothing else of Quarry.
  for (const auto& entry : std::filesystem::directory_iterator(stage + "/include/quarry/cluster")) {
    std::istringstream in{test::read_file(entry.path().string())};
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("#include \"", 0) != 0)
        continue;
      CAPTURE(entry.path().string());
      CAPTURE(line);
      CHECK((line.find("\"quarry/sdk/") != std::string::npos
             || line.find("\"quarry/cluster/") != std::string::npos));
    }
  }
  auto configure = run({QUARRY_CMAKE_COMMAND, "-S",
                        std::string{QUARRY_SOURCE_DIR} + "/examples/cluster_client", "-B", build,
                        "-DCMAKE_PREFIX_PATH=" + stage, "-DCMAKE_CXX_COMPILER=" QUARRY_CXX_COMPILER,
                        "-DCMAKE_BUILD_TYPE=Release"});
  INFO(configure.out, configure.err);
  REQUIRE(configure.exit_code == 0);
  auto compile = run({QUARRY_CMAKE_COMMAND, "--build", build});
  INFO(compile.out, compile.err);
  REQUIRE(compile.exit_code == 0);
  auto client = build + "/quarry_cluster_client";
  REQUIRE(std::filesystem::exists(client));

  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  test::child_process serve{
    argv({"serve", "--listen", "127.0.0.1:0", "--set", "cluster.listen=127.0.0.1:0"}),
    test::isolated_quarry_options(home.path() + "/serve", llm_env(server))};
  // The whole line: a child may write it in pieces.
  auto line = serve.wait_for_err_line("research service for CAF programs on ", 90s);
  REQUIRE(line);
  auto at = line->find("research service for CAF programs on ") + 37;
  auto service_at = line->substr(at, line->find(' ', at) - at);
  auto research = run({client, "--serve", service_at, "--timeout", "120",
                       "How do heat pumps cope with cold weather?"});
  INFO(research.err);
  CHECK(research.exit_code == 0);
  CHECK(research.out.find("\"type\":\"research_agent_start\"") != std::string::npos);
  CHECK(research.out.find("Done [[1]]") != std::string::npos);
  CHECK(research.err.find("session q") != std::string::npos);
  // The session is an ordinary stored one.
  auto id = research.err.substr(research.err.find("session q") + 8, 17);
  auto shown = quarry({"--set",
                       "store.path=" + home.path() + "/serve/.local/share/quarry/quarry.db",
                       "sessions", "show", id, "--json"});
  CHECK(shown.exit_code == 0);
  // A refused question comes back as an error, not a crash.
  auto empty = run({client, "--serve", service_at, "  "});
  CHECK(empty.exit_code == 1);
  CHECK(empty.err.find("the question is empty") != std::string::npos);

  auto w = start_worker(server, "w");
  auto agent = run(
    {client, "--worker", w->address, "--timeout", "120", "How do heat pumps defrost?"});
  INFO(agent.err);
  CHECK(agent.exit_code == 0);
  CHECK(agent.out.find("research_agent_start") != std::string::npos);
  CHECK(agent.out.find("Defrost cycles remove frost") != std::string::npos);
  // Nothing listens: a clear failure.
  auto nobody = run({client, "--worker", "127.0.0.1:1", "task"});
  CHECK(nobody.exit_code == 1);
  CHECK(nobody.err.find("cannot reach the worker") != std::string::npos);
  serve.signal(SIGTERM);
  CHECK(serve.wait(60s).exit_code == 143);
}

namespace {

/// A program on a CAF node of its own that uses the research service of a
/// `quarry serve` at `port`. One client keeps one connection for all its
/// requests: the node ids of CAF 0.17 are made of the host and the process
/// id, so a second actor system of this process is the same node to the
/// server, and connecting it while the server still holds the first one's
/// connection can leave a reply on the old one.
class service_client {
public:
  explicit service_client(uint16_t port) : sys_(configure(cfg_)) {
    auto svc = sys_.middleman().remote_actor<quarry::cluster::research_service_actor>("127.0.0.1",
                                                                                      port);
    REQUIRE_MESSAGE(svc, sys_.render(svc.error()));
    svc_ = *svc;
  }

  /// Runs one research; its result (`failed`, with the reason in `failure`,
  /// when the start is refused or not answered within `start_timeout`).
  quarry::cluster::session_result research(quarry::cluster::research_request req,
                                           std::chrono::seconds start_timeout = 30s) {
    auto sink = sys_.spawn([]() -> quarry::cluster::line_sink_actor::behavior_type {
      return {[](quarry::cluster::packet_atom, const std::string&, uint64_t) {},
              [](quarry::cluster::stop_atom, uint64_t) {}};
    });
    // Errors are results, not exceptions: the actor system must see the
    // sink end before it can be destroyed.
    quarry::cluster::session_result out;
    out.status = quarry::cluster::session_status::failed;
    {
      caf::scoped_actor self{sys_};
      std::string id;
      self->request(svc_, start_timeout, quarry::cluster::research_atom::value, req, sink)
        .receive([&](const std::string& x) { id = x; },
                 [&](const caf::error& e) { out.failure = "start: " + sys_.render(e); });
      if (!id.empty())
        self->request(svc_, 120s, quarry::cluster::result_atom::value, id)
          .receive([&](quarry::cluster::session_result& r) { out = std::move(r); },
                   [&](const caf::error& e) { out.failure = "result: " + sys_.render(e); });
    }
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    return out;
  }

private:
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    cfg.set("logger.verbosity", caf::atom("quiet"));
    cfg.set("scheduler.max-threads", 2);
    quarry::cluster::register_types(cfg);
    cfg.load<caf::io::middleman>();
    return cfg;
  }

  caf::actor_system_config cfg_; // before sys_, which is made from it
  caf::actor_system sys_;
  quarry::cluster::research_service_actor svc_;
};

/// Runs one research through the research service of a `quarry serve` at
/// `port`, from a client node of its own.
quarry::cluster::session_result research_via_service(uint16_t port,
                                                     quarry::cluster::research_request req,
                                                     std::chrono::seconds start_timeout = 30s) {
  service_client client{port};
  return client.research(std::move(req), start_timeout);
}

quarry::cluster::session_result research_via_service(uint16_t port, const std::string& q) {
  quarry::cluster::research_request req;
  req.question = q;
  return research_via_service(port, std::move(req));
}

/// Starts `quarry serve` with its research service on loopback; the port.
uint16_t service_port(test::child_process& serve) {
  // The whole line: a child may write it in pieces.
  auto line = serve.wait_for_err_line("research service for CAF programs on ", 90s);
  REQUIRE(line);
  auto at = line->find("research service for CAF programs on ") + 37;
  auto service_at = line->substr(at, line->find(' ', at) - at);
  return static_cast<uint16_t>(std::stoi(service_at.substr(service_at.rfind(':') + 1)));
}

} // namespace

TEST_CASE_FIXTURE(cluster_fixture, "cluster: quarry serve uses a worker that is restarted "
                                   "after a kill, without a restart of its own") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto w = start_worker(server, "w");
  test::child_process serve{
    argv({"--log-level", "info", "serve", "--listen", "127.0.0.1:0", "--set",
          "cluster.listen=127.0.0.1:0", "--set", workers_setting({w->address}), "--set",
          "cluster.heartbeat=200ms", "--set", "cluster.heartbeat_timeout=1s"}),
    test::isolated_quarry_options(home.path() + "/serve", llm_env(server))};
  auto port = service_port(serve);

  auto first = research_via_service(port, "How do heat pumps cope with cold weather?");
  CHECK(first.status == quarry::cluster::session_status::report);
  CHECK(count_of(w->process->err(), "worker: agent ") == 1);

  // The worker dies; another starts on the same port.
  w->process->signal(SIGKILL);
  REQUIRE(serve.wait_for_err("worker " + w->address + " lost", 20s));
  test::child_process w2{argv({"--log-level", "info", "worker", "--listen", w->address}),
                         test::isolated_quarry_options(home.path() + "/w3", llm_env(server))};
  REQUIRE(w2.wait_for_err("worker listening on " + w->address, 90s));
  // The session node connects to it again by itself.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (count_of(serve.err(), "worker " + w->address + " is up") < 2
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  CHECK(count_of(serve.err(), "worker " + w->address + " is up") == 2);
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  auto second = research_via_service(port, "How do heat pumps cope with cold weather?");
  CHECK(second.status == quarry::cluster::session_status::report);
  CHECK(count_of(w2.err(), "worker: agent ") == 1);
  serve.signal(SIGTERM);
  CHECK(serve.wait(60s).exit_code == 143);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: a program that waits quietly for a long research "
                                   "through the research service keeps its connection") {
  // The session node closes connections silent past its heartbeat timeout
  // (2 s here); the research takes several times that, and the client only
  // waits. register_types gives it heartbeats (every second: more often
  // than the timeout, as docs/cluster.md asks), so its result still comes.
  test::fake_llm_server server;
  auto rules = parallel_agents_script(1);
  for (auto& r : rules)
    r["latency_ms"] = 1000;
  REQUIRE_FALSE(server.script(rules));
  test::child_process serve{
    argv({"--log-level", "info", "serve", "--listen", "127.0.0.1:0", "--set",
          "cluster.listen=127.0.0.1:0", "--set", "cluster.heartbeat=200ms", "--set",
          "cluster.heartbeat_timeout=2s"}),
    test::isolated_quarry_options(home.path() + "/serve", llm_env(server))};
  auto port = service_port(serve);
  auto t0 = std::chrono::steady_clock::now();
  auto result = research_via_service(port, "How do heat pumps cope with cold weather?");
  CAPTURE(result.failure);
  CHECK(result.status == quarry::cluster::session_status::report);
  // The research really outlasted the timeout several times over.
  CHECK(std::chrono::steady_clock::now() - t0 > 4s);
  serve.signal(SIGTERM);
  CHECK(serve.wait(60s).exit_code == 143);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: the research service refuses bad requests with "
                                   "a reason, drops oversized ones with a log line, and "
                                   "keeps serving") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(1)));
  test::child_process serve{argv({"--log-level", "info", "serve", "--listen", "127.0.0.1:0",
                                  "--set", "cluster.listen=127.0.0.1:0"}),
                            test::isolated_quarry_options(home.path() + "/serve", llm_env(server))};
  auto port = service_port(serve);
  // One client (one connection) for every request: see service_client.
  service_client client{port};
  auto refused = [&](quarry::cluster::research_request req) {
    auto r = client.research(std::move(req));
    CHECK(r.status == quarry::cluster::session_status::failed);
    return r.failure;
  };
  quarry::cluster::research_request req;
  req.question = "   ";
  CHECK(refused(req).find("the question is empty") != std::string::npos);
  req.question = "Caf\xc3\x28 and \xff?";
  CHECK(refused(req).find("not valid UTF-8") != std::string::npos);
  req.question = "How do heat pumps cope with cold weather?";
  req.max_agents = 99;
  CHECK(refused(req).find("max_agents must be") != std::string::npos);
  req.max_agents = 0;
  req.deadline_ms = 5;
  CHECK(refused(req).find("deadline_ms must be") != std::string::npos);
  // Past the wire bound: refused while read (CAF answers the request with
  // an error), logged, and no session starts.
  req.deadline_ms = 0;
  req.question = std::string(quarry::cluster::max_question_bytes + 1, 'q');
  auto dropped = client.research(req, 10s);
  CHECK(dropped.status == quarry::cluster::session_status::failed);
  CHECK(dropped.failure.rfind("start: ", 0) == 0);
  CHECK(serve.wait_for_err("dropped a message from another node: a question past 64 KiB", 10s));
  // The service goes on, on the same connection.
  req.question = "How do heat pumps cope with cold weather?";
  auto good = client.research(req);
  CAPTURE(good.failure);
  CHECK(good.status == quarry::cluster::session_status::report);
  // Only the good request started a session.
  CHECK(count_of(serve.err(), "research service: session ") == 1);
  serve.signal(SIGTERM);
  CHECK(serve.wait(60s).exit_code == 143);
}

} // namespace cluster_test
