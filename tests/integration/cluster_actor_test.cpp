// The cluster's actors in process (also under ThreadSanitizer): two actor
// systems stand for a session's node and a worker, connected over CAF's
// network layer on loopback. A runner places an agent on the worker's agent
// host and relays its packets and result; when the worker's host goes away,
// the runner marks the lost attempt and runs the agent again on its own
// node; the agent host refuses what it cannot run.

#include "research_fixture.hpp"

#include "quarry/actors/cluster.hpp"
#include "quarry/actors/llm_provider.hpp"

#include "research_script.hpp"
#include "support/fake_llm_server.hpp"

#include <caf/io/all.hpp>

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <mutex>

namespace cluster_actor_test {

using namespace quarry;
using namespace std::chrono_literals;
using test::count;

namespace {

/// The worker's node: its own actor system, provider and tool actors.
struct worker_node {
  std::unique_ptr<actors::runtime> rt;
  actors::llm_provider_actor llm;
  actors::tool_set tools;
  actors::agent_host_full_actor host;
  uint16_t port = 0;
};

struct cluster_fixture : test::research_fixture {
  cluster_fixture() : research_fixture(true) {
  }

  actors::tool_set here_tools = corpus_tools();

  /// A worker node whose model is `plugin` with `config`, publishing an
  /// agent host on loopback.
  std::unique_ptr<worker_node> start_worker(const std::string& plugin, nlohmann::json config,
                                            int capacity = 4) {
    auto w = std::make_unique<worker_node>();
    w->rt = std::make_unique<actors::runtime>(cfg);
    auto& sys = w->rt->system();
    auto made = registry->make_llm(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(made));
    core::llm_limits limits;
    limits.max_retries = 0;
    w->llm = actors::spawn_llm_provider(sys, std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                        actors::llm_actor_settings::of("worker", limits));
    w->rt->add_stoppable(w->llm);
    auto tool_made = registry->make_tool("local_corpus", {{"db", tmp.file("corpus.db")}});
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(tool_made));
    auto tool = std::get<std::shared_ptr<sdk::tool>>(tool_made);
    auto tool_actor = actors::spawn_tool_provider(
      sys, tool, actors::tool_actor_settings::of("internal_search", {}));
    w->rt->add_stoppable(tool_actor);
    w->tools.tools["internal_search"] = {tool_actor, tool->definition(),
                                         registry->find("local_corpus")->tool_kind};
    actors::agent_host_setup hs;
    hs.name = "worker-under-test";
    hs.capacity = capacity;
    hs.llm = w->llm;
    hs.model = plugin;
    hs.tools = w->tools;
    hs.prompts = prompts;
    w->host = actors::spawn_agent_host(sys, hs);
    w->rt->add_stoppable(w->host);
    auto port = sys.middleman().publish(cluster::agent_host_actor{w->host}, 0, "127.0.0.1");
    REQUIRE_MESSAGE(port, sys.render(port.error()));
    w->port = *port;
    return w;
  }

  actors::worker_directory_actor directory(uint16_t port) {
    actors::directory_setup ds;
    ds.workers = {"127.0.0.1:" + std::to_string(port)};
    ds.heartbeat = 100ms;
    ds.heartbeat_timeout = 2s;
    ds.connect_timeout = 5s;
    auto d = actors::spawn_worker_directory(rt->system(), ds);
    rt->add_stoppable(d);
    return d;
  }

  actors::agent_spec spec() {
    actors::agent_spec s;
    s.call_id = "call_remote";
    s.task = "Why does the efficiency of an air-source heat pump fall in cold weather?";
    s.turn_index = 3;
    s.tab_index = 0;
    s.current_datetime = "Thursday November 26, 2026";
    return s;
  }

  actors::agent_result run_runner(caf::scoped_actor& self, actors::llm_provider_actor here_llm,
                                  actors::worker_directory_actor dir, actors::emitter_actor em) {
    actors::runner_setup where;
    where.directory = dir;
    where.spawn_timeout = 5s;
    actors::spawn_agent_runner(rt->system(), spec(), here_llm, here_tools, em, prompts,
                               caf::actor_cast<actors::agent_parent_actor>(self), where);
    actors::agent_result out;
    self->receive([&](actors::agent_done_atom, actors::agent_result& r) { out = std::move(r); },
                  caf::after(60s) >> [&] { FAIL("the runner never answered"); });
    return out;
  }

  static int64_t calls_of(caf::scoped_actor& self, const actors::llm_provider_actor& llm) {
    int64_t calls = -1;
    self->request(llm, 10s, actors::stats_atom::value)
      .receive(
        [&](const std::string& text) {
          calls = nlohmann::json::parse(text).value("calls_started", int64_t{-1});
        },
        [&](const caf::error&) {});
    return calls;
  }
};

} // namespace

TEST_CASE_FIXTURE(cluster_fixture, "cluster actors: a runner places its agent on another "
                                   "node's agent host and relays its packets and result") {
  auto w = start_worker("extractive", nlohmann::json::object());
  auto here_llm = llm("extractive", nlohmann::json::object());
  auto em = emitter();
  caf::scoped_actor self{rt->system()};
  auto r = run_runner(self, here_llm, directory(w->port), em);
  drain(self, em);
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  CHECK(r.call_id == "call_remote");
  CHECK_FALSE(r.cited.empty());
  auto ts = types();
  REQUIRE_FALSE(ts.empty());
  CHECK(ts.front() == "research_agent_start");
  CHECK(count(ts, "research_agent_start") == 1);
  CHECK(count(ts, "agent_superseded") == 0);
  CHECK(ts.back() == "section_end");
  // The worker's model did the work, not this node's.
  caf::scoped_actor worker_self{w->rt->system()};
  CHECK(calls_of(worker_self, w->llm) > 0);
  CHECK(calls_of(self, here_llm) == 0);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster actors: when the worker's agent host goes "
                                   "away mid-task the lost attempt is marked and the agent "
                                   "runs again here") {
  test::fake_llm_server server;
  // The worker's model never answers.
  REQUIRE_FALSE(server.script(nlohmann::json::array({{{"match", nlohmann::json::object()},
                                                      {"respond", {{"text", "never"}}},
                                                      {"stall_after_bytes", 0}}})));
  auto w = start_worker("openai",
                        {{"base_url", server.base_url_openai()}, {"api_key", "k"}, {"model", "m"}});
  auto here_llm = llm("extractive", nlohmann::json::object());
  auto em = emitter();
  caf::scoped_actor self{rt->system()};
  auto dir = directory(w->port);
  std::thread killer{[&] {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (server.requests().empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    caf::anon_send_exit(w->host, caf::exit_reason::kill);
  }};
  auto r = run_runner(self, here_llm, dir, em);
  killer.join();
  drain(self, em);
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  auto ts = types();
  REQUIRE(count(ts, "agent_superseded") == 1);
  auto mark = std::find(ts.begin(), ts.end(), "agent_superseded") - ts.begin();
  // Before the mark, the lost attempt's start; after it, one whole attempt.
  CHECK(std::count(ts.begin(), ts.begin() + mark, "research_agent_start") == 1);
  CHECK(std::count(ts.begin() + mark, ts.end(), "research_agent_start") == 1);
  CHECK(ts.back() == "section_end");
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& p : packets)
      if (p.type() == "agent_superseded") {
        CHECK(p.obj["attempt"] == 1);
        CHECK(p.obj["worker"] == "127.0.0.1:" + std::to_string(w->port));
        CHECK(p.obj["reason"].get<std::string>().find("lost") != std::string::npos);
      }
  }
  CHECK(calls_of(self, here_llm) > 0);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster actors: the agent host refuses what it "
                                   "cannot run, with the reason") {
  auto w = start_worker("extractive", nlohmann::json::object(), 1);
  caf::scoped_actor self{w->rt->system()};
  auto parent = caf::actor_cast<cluster::agent_parent_actor>(self);
  auto sink = caf::actor_cast<cluster::packet_sink_actor>(self);
  auto ask = [&](int32_t protocol, cluster::agent_spec s) {
    cluster::spawn_reply out;
    self->request(w->host, 10s, cluster::spawn_agent_atom::value, protocol, s, parent, sink)
      .receive([&](cluster::spawn_reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(w->rt->system().render(e)); });
    return out;
  };
  auto s = spec();
  s.tools = {"internal_search", "web_search"};
  auto r = ask(cluster::protocol_version, s);
  CHECK_FALSE(r.agent);
  CHECK(r.refusal == "this worker has no tool web_search (it has: internal_search)");
  auto other = cluster::protocol_version + 1;
  CHECK(ask(other, spec()).refusal
        == "the session speaks protocol " + std::to_string(other) + ", this worker "
             + std::to_string(cluster::protocol_version));
  auto bad = spec();
  bad.force_report_after = 0ms;
  CHECK(ask(cluster::protocol_version, bad).refusal
        == "an agent time limit is outside 1 ms to 24 h");
  {
    cluster::spawn_reply out;
    self
      ->request(w->host, 10s, cluster::spawn_agent_atom::value, cluster::protocol_version, spec(),
                cluster::agent_parent_actor{}, sink)
      .receive([&](cluster::spawn_reply& rr) { out = std::move(rr); }, [&](const caf::error&) {});
    CHECK(out.refusal == "the request names no parent or no packet sink");
  }
  cluster::worker_status st;
  self->request(w->host, 10s, cluster::worker_status_atom::value)
    .receive([&](cluster::worker_status& x) { st = std::move(x); }, [&](const caf::error&) {});
  CHECK(st.name == "worker-under-test");
  CHECK(st.capacity == 1);
  CHECK(st.running == 0);
  CHECK(st.tools == std::vector<std::string>{"internal_search"});
}

namespace {

/// What a stand-in worker recorded of the one agent it was asked for.
struct recorded_spawn {
  std::mutex mtx;
  std::condition_variable cv;
  bool spawned = false;
  cluster::agent_parent_actor parent;
  cluster::packet_sink_actor sink;
};

} // namespace

// A stand-in worker that speaks the real interface over CAF's network layer:
// it accepts the agent but runs nothing, so the test can send, as the lost
// agent, packets and a result after the worker was taken as lost.
TEST_CASE_FIXTURE(cluster_fixture, "cluster actors: what a lost attempt's agent sends after "
                                   "its worker was lost never reaches the session") {
  auto rec = std::make_shared<recorded_spawn>();
  actors::runtime there{cfg};
  auto dummy = there.system().spawn([]() -> cluster::remote_agent_actor::behavior_type {
    return {[](cluster::report_now_atom) {}, [](cluster::stop_atom) {}};
  });
  auto host = there.system().spawn([rec, dummy]() -> cluster::agent_host_actor::behavior_type {
    return {
      [rec, dummy](cluster::spawn_agent_atom, int32_t, const cluster::agent_spec&,
                   cluster::agent_parent_actor& parent,
                   cluster::packet_sink_actor& sink) -> cluster::spawn_reply {
        std::lock_guard<std::mutex> guard{rec->mtx};
        rec->spawned = true;
        rec->parent = parent;
        rec->sink = sink;
        rec->cv.notify_all();
        cluster::spawn_reply r;
        r.agent = dummy;
        return r;
      },
      [](cluster::worker_status_atom) {
        cluster::worker_status s;
        s.name = "stand-in";
        s.protocol = cluster::protocol_version;
        s.capacity = 4;
        s.tools = {"internal_search"};
        return s;
      },
    };
  });
  auto port = there.system().middleman().publish(host, 0, "127.0.0.1");
  REQUIRE(port);
  // This node's model is slow, so the session's side is still waiting when
  // the lost agent's late messages come.
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  for (auto& r : test::script::agent_rules()) {
    r["latency_ms"] = 1500;
    rules.push_back(r);
  }
  REQUIRE_FALSE(server.script(rules));
  auto here_llm = llm("openai",
                      {{"base_url", server.base_url_openai()}, {"api_key", "k"}, {"model", "m"}});
  auto em = emitter();
  caf::scoped_actor self{rt->system()};
  auto dir = directory(*port);
  actors::runner_setup where;
  where.directory = dir;
  where.spawn_timeout = 5s;
  actors::spawn_agent_runner(rt->system(), spec(), here_llm, here_tools, em, prompts,
                             caf::actor_cast<actors::agent_parent_actor>(self), where);
  cluster::agent_parent_actor parent;
  cluster::packet_sink_actor sink;
  {
    std::unique_lock<std::mutex> guard{rec->mtx};
    REQUIRE(rec->cv.wait_for(guard, 30s, [&] { return rec->spawned; }));
    parent = rec->parent;
    sink = rec->sink;
  }
  auto packet = [](const std::string& type) {
    cluster::packet_msg p;
    p.turn_index = 3;
    p.obj = nlohmann::json{{"type", type}}.dump();
    return p;
  };
  // While its worker is up, the agent's packets reach the session.
  caf::anon_send(sink, cluster::packet_atom::value, packet("research_agent_start"));
  auto seen = [&](const std::string& type) {
    std::lock_guard<std::mutex> guard{mtx};
    return std::any_of(packets.begin(), packets.end(),
                       [&](const core::packet& p) { return p.type() == type; });
  };
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!seen("research_agent_start") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(seen("research_agent_start"));
  // The worker is lost; the agent runs again here.
  caf::anon_send_exit(host, caf::exit_reason::kill);
  while (!seen("agent_superseded") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(seen("agent_superseded"));
  // The lost agent goes on as if nothing happened: a packet, then its result.
  caf::anon_send(sink, cluster::packet_atom::value, packet("late_packet"));
  cluster::agent_result late;
  late.call_id = "call_remote";
  late.ok = true;
  late.report = "LATE";
  caf::anon_send(parent, cluster::agent_done_atom::value, late);
  actors::agent_result r;
  self->receive([&](actors::agent_done_atom, actors::agent_result& x) { r = std::move(x); },
                caf::after(60s) >> [&] { FAIL("the runner never answered"); });
  drain(self, em);
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  CHECK(r.report != "LATE");
  CHECK(r.report.find("Heat pump efficiency falls") != std::string::npos);
  CHECK_FALSE(seen("late_packet"));
  auto ts = types();
  auto mark = std::find(ts.begin(), ts.end(), "agent_superseded") - ts.begin();
  CHECK(std::count(ts.begin(), ts.begin() + mark, "research_agent_start") == 1);
  CHECK(std::count(ts.begin() + mark, ts.end(), "research_agent_start") == 1);
  caf::anon_send_exit(dummy, caf::exit_reason::user_shutdown);
}

} // namespace cluster_actor_test
