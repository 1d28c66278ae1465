// Research agents across nodes: the agent host, the worker directory and the
// agent runner (see quarry/actors/cluster.hpp and docs/cluster.md).
//
// CAF 0.17 does not fail a pending request when the node that should answer
// goes away, and has no node monitoring. So: every request to another node
// has a finite timeout; the directory monitors each worker's agent host
// (a lost connection kills the proxy at once: `remote_link_unreachable`) and
// asks it for its status every heartbeat (a worker that is stopped or cut
// off answers nothing, and is lost after the heartbeat timeout); the runner
// monitors its remote agent and is told by the directory when the agent's
// worker is lost.

#include "quarry/actors/cluster.hpp"

#include "quarry/cluster/messages.hpp"
#include "quarry/core/cluster.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/core/prompts.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace quarry::actors {

namespace {

using namespace std::chrono_literals;

// -- the agent host ---------------------------------------------------------

struct host_state {
  agent_host_setup setup;
  /// Running agents, by address.
  std::map<caf::actor_addr, research_agent_actor> running;
  /// The agents of each parent: a parent that goes away (its node lost, or
  /// its session gave up on the attempt) takes its agents with it.
  std::multimap<caf::actor_addr, research_agent_actor> by_parent;
  static inline const char* name = "quarry.agent_host";
};

using host_ptr = agent_host_full_actor::stateful_pointer<host_state>;

std::vector<std::string> tool_names(const tool_set& tools) {
  std::vector<std::string> out;
  for (const auto& [name, entry] : tools.tools)
    out.push_back(name);
  return out;
}

std::string node_of(const caf::strong_actor_ptr& sender) {
  if (!sender)
    return "an anonymous sender";
  return "node " + to_string(sender->node());
}

cluster::spawn_reply refuse(host_ptr self, const std::string& why) {
  spdlog::warn("worker: refused an agent from {}: {}", node_of(self->current_sender()),
               why);
  cluster::spawn_reply r;
  r.refusal = why;
  return r;
}

agent_host_full_actor::behavior_type host_impl(host_ptr self, agent_host_setup setup) {
  self->state.setup = std::move(setup);
  self->set_default_handler([](caf::scheduled_actor* me, caf::message_view& x) {
    spdlog::warn("worker: dropped a message outside the agent host's interface "
                 "from {}: {}",
                 node_of(me->current_sender()),
                 x.content().empty() ? std::string{"(empty)"} : to_string(x.content()).substr(0, 200));
    return caf::drop(me, x);
  });
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.running.erase(dm.source) > 0) {
      for (auto i = st.by_parent.begin(); i != st.by_parent.end();)
        i = i->second.address() == dm.source ? st.by_parent.erase(i) : std::next(i);
      return;
    }
    auto [first, last] = st.by_parent.equal_range(dm.source);
    for (auto i = first; i != last; ++i) {
      spdlog::info("worker: the parent of an agent went away ({}); stopping the agent",
                   self->system().render(dm.reason));
      self->send(i->second, stop_atom::value);
    }
    st.by_parent.erase(first, last);
  });
  return {
    [=](cluster::spawn_agent_atom, int32_t protocol, agent_spec& spec,
        agent_parent_actor& parent, packet_sink_actor& sink) -> cluster::spawn_reply {
      auto& st = self->state;
      if (protocol != cluster::protocol_version)
        return refuse(self, "the session speaks protocol " + std::to_string(protocol)
                              + ", this worker " + std::to_string(cluster::protocol_version));
      if (!parent || !sink)
        return refuse(self, "the request names no parent or no packet sink");
      core::agent_request_view view;
      view.task = spec.task;
      view.max_cycles = spec.max_cycles;
      view.force_report_after = spec.force_report_after;
      view.hard_timeout = spec.hard_timeout;
      view.context_tokens = spec.context_tokens;
      view.step_max_tokens = spec.step_max_tokens;
      view.report_max_tokens = spec.report_max_tokens;
      if (auto why = core::refuse_agent_request(view); !why.empty())
        return refuse(self, why);
      auto have = tool_names(st.setup.tools);
      if (auto missing = core::missing_tools(have, spec.tools); !missing.empty()) {
        std::string list;
        for (const auto& m : missing)
          list += (list.empty() ? "" : ", ") + m;
        std::string mine;
        for (const auto& h : have)
          mine += (mine.empty() ? "" : ", ") + h;
        return refuse(self, "this worker has no tool " + list + " (it has: "
                              + (mine.empty() ? std::string{"none"} : mine) + ")");
      }
      if (static_cast<int>(st.running.size()) >= st.setup.capacity)
        return refuse(self, "this worker is full (" + std::to_string(st.setup.capacity)
                              + " agents)");
      tool_set given;
      if (spec.tools.empty()) {
        given = st.setup.tools;
      } else {
        for (const auto& name : spec.tools)
          given.tools[name] = st.setup.tools.tools.at(name);
      }
      auto call_id = spec.call_id;
      auto parent_addr = parent.address();
      auto agent = spawn_research_agent(self->system(), std::move(spec), st.setup.llm,
                                        std::move(given), std::move(sink), st.setup.prompts,
                                        std::move(parent));
      self->monitor(agent);
      st.running.emplace(agent.address(), agent);
      if (st.by_parent.count(parent_addr) == 0)
        self->monitor(parent_addr);
      st.by_parent.emplace(parent_addr, agent);
      spdlog::info("worker: agent {} started for {} ({} running)", call_id,
                   node_of(self->current_sender()), st.running.size());
      cluster::spawn_reply r;
      r.agent = agent;
      return r;
    },
    [=](cluster::worker_status_atom) {
      auto& st = self->state;
      cluster::worker_status s;
      s.name = st.setup.name;
      s.version = QUARRY_VERSION_STRING;
      s.protocol = cluster::protocol_version;
      s.capacity = st.setup.capacity;
      s.running = static_cast<int32_t>(st.running.size());
      s.tools = tool_names(st.setup.tools);
      s.model = st.setup.model;
      return s;
    },
    [=](stop_atom) {
      for (auto& [addr, agent] : self->state.running)
        self->send(agent, stop_atom::value);
      self->state.running.clear();
      self->quit();
    },
  };
}

// -- the worker directory -----------------------------------------------------

/// A heartbeat tick: `(tick_atom)`; a reconnect of worker `i`:
/// `(connect_atom, i, generation)`.
/// The time for the first connections is up: `(ready_atom)`.
using ready_atom = caf::atom_constant<caf::atom("ready")>;

using directory_full_actor = worker_directory_actor::extend<
  caf::reacts_to<caf::tick_atom>, caf::reacts_to<caf::connect_atom, uint64_t, uint64_t>,
  caf::reacts_to<ready_atom>>;

struct worker_entry {
  std::string name;
  core::node_address address;
  cluster::agent_host_actor host;
  /// Bumped whenever the connection is dropped: answers of an older one
  /// are ignored.
  uint64_t generation = 0;
  bool connecting = false;
  bool up = false;
  bool compatible = true;
  caf::actor_clock::time_point last_answer;
  cluster::worker_status status;
  int outstanding = 0;
  std::vector<worker_watcher_actor> watchers;
  std::chrono::milliseconds backoff{200};
  std::string last_problem;
  /// Tools it lacked at the last warning (warned once per change).
  std::vector<std::string> warned_missing;
  /// Its first connection attempt has ended (up, or failed).
  bool settled = false;
};

/// A placement asked for before every worker's first connection attempt
/// ended: answered then.
struct pending_placement {
  caf::typed_response_promise<cluster::agent_host_actor, std::string> promise;
  std::vector<std::string> tools;
  std::vector<std::string> excluded;
};

struct directory_state {
  directory_setup setup;
  std::vector<worker_entry> workers;
  /// Tools the sessions of this node need (the union of what they asked).
  std::vector<std::string> needed;
  /// Every worker's first connection attempt has ended (or the time for it
  /// passed): placements are answered at once from then on.
  bool ready = false;
  std::vector<pending_placement> pending;
  static inline const char* name = "quarry.worker_directory";
};

using directory_ptr = directory_full_actor::stateful_pointer<directory_state>;

/// The middleman's actor: with cluster certificates its connections speak
/// mutual TLS themselves (the runtime's multiplexer, guarded_network.hpp).
caf::io::middleman_actor connector(directory_ptr self) {
  return self->system().middleman().actor_handle();
}

void schedule_connect(directory_ptr self, size_t i);

// Says once (per change) that worker `i` lacks tools of `needed`.
void warn_missing(directory_ptr self, size_t i, const std::vector<std::string>& needed) {
  auto& w = self->state.workers[i];
  auto missing = core::missing_tools(w.status.tools, needed);
  if (missing.empty() || missing == w.warned_missing)
    return;
  std::string list;
  for (const auto& m : missing)
    list += (list.empty() ? "" : ", ") + m;
  spdlog::warn("cluster: worker {} lacks tool(s) {} that this node's research uses; "
               "agents that need them run elsewhere",
               w.name, list);
  w.warned_missing = std::move(missing);
}

std::tuple<cluster::agent_host_actor, std::string>
choose(directory_ptr self, const std::vector<std::string>& tools,
       const std::vector<std::string>& excluded) {
  auto& st = self->state;
  for (const auto& t : tools)
    if (std::find(st.needed.begin(), st.needed.end(), t) == st.needed.end())
      st.needed.push_back(t);
  std::vector<core::worker_view> views;
  std::set<size_t> skip;
  for (size_t i = 0; i < st.workers.size(); ++i) {
    const auto& w = st.workers[i];
    core::worker_view v;
    v.up = w.up && w.host;
    v.compatible = w.compatible;
    v.capacity = w.status.capacity;
    v.running = w.status.running;
    v.outstanding = w.outstanding;
    v.tools = w.status.tools;
    views.push_back(std::move(v));
    if (std::find(excluded.begin(), excluded.end(), w.name) != excluded.end())
      skip.insert(i);
    if (w.up)
      warn_missing(self, i, tools);
  }
  auto chosen = core::choose_worker(views, tools, skip);
  if (!chosen)
    return {cluster::agent_host_actor{}, std::string{}};
  auto& w = st.workers[*chosen];
  ++w.outstanding;
  // Count it as running until the next status says otherwise, so that
  // agents placed at once spread over the workers.
  ++w.status.running;
  return {w.host, w.name};
}

// Answers the placements that waited for the first connections.
void become_ready(directory_ptr self) {
  auto& st = self->state;
  if (st.ready)
    return;
  st.ready = true;
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (auto& p : pending) {
    auto [host, name] = choose(self, p.tools, p.excluded);
    p.promise.deliver(std::move(host), std::move(name));
  }
}

// Worker `i`'s first connection attempt ended.
void settle(directory_ptr self, size_t i) {
  auto& st = self->state;
  st.workers[i].settled = true;
  if (std::all_of(st.workers.begin(), st.workers.end(),
                  [](const worker_entry& w) { return w.settled; }))
    become_ready(self);
}

// Worker `i` is lost: its agents are told (they are placed again), and it is
// connected again later.
void lose(directory_ptr self, size_t i, const std::string& why) {
  auto& w = self->state.workers[i];
  auto was_up = w.up;
  if (w.host)
    self->demonitor(w.host.address());
  w.host = nullptr;
  w.up = false;
  w.connecting = false;
  ++w.generation;
  w.outstanding = 0;
  if (was_up)
    spdlog::warn("cluster: worker {} lost: {}", w.name, why);
  else if (w.last_problem != why)
    spdlog::warn("cluster: worker {} cannot be used: {}", w.name, why);
  w.last_problem = why;
  auto watchers = std::move(w.watchers);
  w.watchers.clear();
  for (auto& watcher : watchers)
    self->send(watcher, worker_down_atom::value, w.name, why);
  schedule_connect(self, i);
  settle(self, i);
}

void ask_status(directory_ptr self, size_t i) {
  auto& w = self->state.workers[i];
  if (!w.host)
    return;
  auto gen = w.generation;
  self->request(w.host, self->state.setup.heartbeat_timeout, cluster::worker_status_atom::value)
    .then(
      [=](cluster::worker_status& s) {
        auto& w = self->state.workers[i];
        if (w.generation != gen)
          return;
        w.last_answer = self->clock().now();
        if (s.protocol != cluster::protocol_version) {
          w.compatible = false;
          lose(self, i, "it speaks protocol " + std::to_string(s.protocol) + ", this node "
                          + std::to_string(cluster::protocol_version));
          return;
        }
        w.compatible = true;
        if (!w.up) {
          spdlog::info("cluster: worker {} is up ({} of {} agents running, model {})",
                       w.name, s.running, s.capacity, s.model.empty() ? "?" : s.model);
          w.backoff = 200ms;
          w.last_problem.clear();
        }
        w.up = true;
        w.status = std::move(s);
        warn_missing(self, i, self->state.needed);
        // Placements waiting for the first connections see its status.
        settle(self, i);
      },
      [=](caf::error& err) {
        auto& w = self->state.workers[i];
        if (w.generation != gen || !w.host)
          return;
        lose(self, i, err == caf::sec::request_timeout
                        ? "it did not answer its heartbeat in time"
                        : "its status request failed: " + self->system().render(err));
      });
}

void connect_worker(directory_ptr self, size_t i) {
  auto& w = self->state.workers[i];
  if (w.host || w.connecting)
    return;
  w.connecting = true;
  auto gen = w.generation;
  self->request(connector(self), self->state.setup.connect_timeout, caf::connect_atom::value,
                w.address.host, w.address.port)
    .then(
      [=](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
        auto& w = self->state.workers[i];
        if (w.generation != gen)
          return;
        w.connecting = false;
        if (!ptr) {
          lose(self, i, "nothing is published at that port");
          return;
        }
        if (!self->system().assignable<cluster::agent_host_actor>(ifs)) {
          w.compatible = false;
          lose(self, i, "it does not offer Quarry's agent host interface (another "
                        "program, or another version of Quarry)");
          return;
        }
        w.compatible = true;
        w.host = caf::actor_cast<cluster::agent_host_actor>(std::move(ptr));
        self->monitor(w.host);
        w.last_answer = self->clock().now();
        ask_status(self, i);
      },
      [=](caf::error& err) {
        auto& w = self->state.workers[i];
        if (w.generation != gen)
          return;
        w.connecting = false;
        lose(self, i, "cannot connect: " + self->system().render(err));
      });
}

void schedule_connect(directory_ptr self, size_t i) {
  auto& w = self->state.workers[i];
  auto delay = w.backoff;
  w.backoff = std::min<std::chrono::milliseconds>(w.backoff * 2, 5s);
  self->delayed_send(self, delay, caf::connect_atom::value, static_cast<uint64_t>(i),
                     w.generation);
}

directory_full_actor::behavior_type directory_impl(directory_ptr self,
                                                   directory_setup setup) {
  auto& st = self->state;
  st.setup = std::move(setup);
  for (const auto& text : st.setup.workers) {
    worker_entry w;
    w.name = text;
    if (auto a = core::parse_node_address(text))
      w.address = *a;
    st.workers.push_back(std::move(w));
  }
  for (size_t i = 0; i < st.workers.size(); ++i)
    connect_worker(self, i);
  if (st.workers.empty())
    st.ready = true;
  // Placements wait for the first connections at most this long.
  self->delayed_send(self, st.setup.connect_timeout + st.setup.heartbeat_timeout,
                     ready_atom::value);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& ws = self->state.workers;
    for (size_t i = 0; i < ws.size(); ++i)
      if (ws[i].host && ws[i].host.address() == dm.source) {
        lose(self, i, dm.reason == caf::exit_reason::remote_link_unreachable
                        ? std::string{"its connection was lost"}
                        : "its agent host stopped (" + self->system().render(dm.reason)
                            + ")");
        return;
      }
  });
  self->send(self, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      auto& st = self->state;
      auto now = self->clock().now();
      for (size_t i = 0; i < st.workers.size(); ++i) {
        auto& w = st.workers[i];
        if (!w.host)
          continue;
        auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_answer);
        if (core::worker_lost(silent, st.setup.heartbeat_timeout)) {
          lose(self, i, "it did not answer for " + std::to_string(silent.count()) + " ms");
          continue;
        }
        ask_status(self, i);
      }
      self->delayed_send(self, st.setup.heartbeat, caf::tick_atom::value);
    },
    [=](caf::connect_atom, uint64_t i, uint64_t gen) {
      auto& ws = self->state.workers;
      if (i >= ws.size() || ws[i].generation != gen)
        return;
      connect_worker(self, i);
    },
    [=](place_atom, std::vector<std::string>& tools, std::vector<std::string>& excluded)
      -> caf::result<cluster::agent_host_actor, std::string> {
      auto& st = self->state;
      if (!st.ready) {
        auto rp = self->make_response_promise<cluster::agent_host_actor, std::string>();
        st.pending.push_back({rp, std::move(tools), std::move(excluded)});
        return rp;
      }
      auto [host, name] = choose(self, tools, excluded);
      return {std::move(host), std::move(name)};
    },
    [=](ready_atom) { become_ready(self); },
    [=](release_atom, const std::string& name) {
      for (auto& w : self->state.workers)
        if (w.name == name && w.outstanding > 0)
          --w.outstanding;
    },
    [=](watch_atom, const std::string& name, worker_watcher_actor& watcher) {
      auto& ws = self->state.workers;
      for (auto& w : ws) {
        if (w.name != name)
          continue;
        if (!w.up) {
          self->send(watcher, worker_down_atom::value, name,
                     w.last_problem.empty() ? std::string{"it is not connected"}
                                            : w.last_problem);
          return;
        }
        w.watchers.push_back(std::move(watcher));
        return;
      }
    },
    [=](unwatch_atom, const std::string& name, const worker_watcher_actor& watcher) {
      for (auto& w : self->state.workers)
        if (w.name == name)
          w.watchers.erase(std::remove(w.watchers.begin(), w.watchers.end(), watcher),
                           w.watchers.end());
    },
    [=](workers_atom) {
      auto out = nlohmann::json::array();
      for (const auto& w : self->state.workers)
        out.push_back({{"name", w.name},
                       {"state", w.up ? "up" : (w.connecting ? "connecting" : "down")},
                       {"capacity", w.status.capacity},
                       {"running", w.status.running},
                       {"outstanding", w.outstanding},
                       {"problem", w.last_problem}});
      return out.dump();
    },
    [=](stop_atom) {
      for (auto& w : self->state.workers)
        if (w.host)
          self->demonitor(w.host.address());
      self->quit();
    },
  };
}

// -- the agent runner ---------------------------------------------------------

/// What an attempt's relay forwards: `(packet_atom, attempt, packet)` and
/// `(agent_done_atom, attempt, result)`.
using attempt_check_atom = caf::atom_constant<caf::atom("attemptchk")>;
using runner_timeout_atom = caf::atom_constant<caf::atom("runnertime")>;

using runner_full_actor = research_agent_actor::extend<
  caf::reacts_to<packet_atom, int32_t, packet_msg>,
  caf::reacts_to<agent_done_atom, int32_t, agent_result>,
  caf::reacts_to<worker_down_atom, std::string, std::string>,
  caf::reacts_to<attempt_check_atom, int32_t>, caf::reacts_to<runner_timeout_atom>>;

/// The relay of one attempt: the packet sink and parent a (remote) agent is
/// given. It tags what it receives with its attempt and hands it to the
/// runner; a lost attempt's relay is killed, so what its agent sends later
/// goes nowhere.
using relay_actor = caf::typed_actor<caf::reacts_to<packet_atom, packet_msg>,
                                     caf::reacts_to<agent_done_atom, agent_result>>;

relay_actor::behavior_type relay_impl(relay_actor::pointer self, runner_full_actor runner,
                                      int32_t attempt) {
  // A runner that ends, however, takes its relays with it.
  self->monitor(runner);
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  return {
    [=](packet_atom, packet_msg& p) {
      self->send(runner, packet_atom::value, attempt, std::move(p));
    },
    [=](agent_done_atom, agent_result& r) {
      self->send(runner, agent_done_atom::value, attempt, std::move(r));
      self->quit();
    },
  };
}

struct runner_state {
  agent_spec spec;
  llm_provider_actor llm;
  tool_set tools;
  packet_sink_actor emitter;
  std::shared_ptr<const core::prompt_library> prompts;
  agent_parent_actor parent;
  runner_setup setup;
  caf::actor_clock::time_point started;

  int32_t attempt = 0;
  /// The worker of the current attempt (empty: this node).
  std::string worker;
  relay_actor relay;
  cluster::remote_agent_actor remote;
  research_agent_actor local;
  /// Attempts lost so far (a refusal is not a loss).
  int lost = 0;
  std::vector<std::string> excluded;
  bool report_now = false;
  bool done = false;
  static inline const char* name = "quarry.agent_runner";
};

using runner_ptr = runner_full_actor::stateful_pointer<runner_state>;

core::placement runner_at(runner_ptr self) {
  return {self->state.spec.turn_index, self->state.spec.tab_index, std::nullopt};
}

// Ends the current attempt: its agent is stopped, its relay killed, its
// worker's slot released.
void end_attempt(runner_ptr self) {
  auto& st = self->state;
  if (st.remote) {
    self->demonitor(st.remote.address());
    self->send(st.remote, stop_atom::value);
    st.remote = nullptr;
  }
  if (st.local) {
    self->demonitor(st.local.address());
    self->send(st.local, stop_atom::value);
    st.local = nullptr;
  }
  if (st.relay) {
    self->send_exit(st.relay, caf::exit_reason::user_shutdown);
    st.relay = nullptr;
  }
  if (!st.worker.empty()) {
    self->send(st.setup.directory, release_atom::value, st.worker);
    self->send(st.setup.directory, unwatch_atom::value, st.worker,
               worker_watcher_actor{self});
  }
  st.worker.clear();
}

void finish_runner(runner_ptr self, agent_result r) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  end_attempt(self);
  self->send(st.parent, agent_done_atom::value, std::move(r));
  self->quit();
}

void place(runner_ptr self);

// The current attempt is lost (`why`): the agent starts again elsewhere, or
// fails after the last attempt.
void supersede(runner_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.done)
    return;
  auto worker = st.worker;
  spdlog::warn("cluster: research agent {} ({}): attempt {} {}: {}", st.spec.tab_index + 1,
               st.spec.call_id, st.attempt, worker.empty() ? "on this node" : "on " + worker,
               why);
  self->send(st.emitter, packet_atom::value,
             make_packet(runner_at(self), core::packets::agent_superseded(st.attempt, worker, why)));
  end_attempt(self);
  if (!worker.empty())
    st.excluded.push_back(worker);
  if (++st.lost >= st.setup.max_attempts) {
    agent_result r;
    r.call_id = st.spec.call_id;
    r.tab_index = st.spec.tab_index;
    r.ok = false;
    r.failure = "it was lost " + std::to_string(st.lost) + " times (last: " + why + ")";
    finish_runner(self, std::move(r));
    return;
  }
  place(self);
}

agent_spec attempt_spec(runner_ptr self) {
  auto& st = self->state;
  auto spec = st.spec;
  if (st.attempt > 1) {
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      self->clock().now() - st.started);
    auto limits = core::limits_after({st.spec.force_report_after, st.spec.hard_timeout},
                                     elapsed);
    spec.force_report_after = limits.force_report_after;
    spec.hard_timeout = limits.hard_timeout;
  }
  return spec;
}

relay_actor new_relay(runner_ptr self) {
  return self->spawn(relay_impl, runner_full_actor{self}, self->state.attempt);
}

void run_here(runner_ptr self) {
  auto& st = self->state;
  st.worker.clear();
  st.relay = new_relay(self);
  st.local = spawn_research_agent(self->system(), attempt_spec(self), st.llm, st.tools,
                                  packet_sink_actor{st.relay}, st.prompts,
                                  agent_parent_actor{st.relay});
  self->monitor(st.local);
  if (st.report_now)
    self->send(st.local, report_now_atom::value);
}

void spawn_on(runner_ptr self, cluster::agent_host_actor host, std::string worker) {
  auto& st = self->state;
  st.worker = worker;
  st.relay = new_relay(self);
  auto attempt = st.attempt;
  self->send(st.setup.directory, watch_atom::value, worker, worker_watcher_actor{self});
  self->request(host, st.setup.spawn_timeout, cluster::spawn_agent_atom::value,
                cluster::protocol_version, attempt_spec(self), agent_parent_actor{st.relay},
                packet_sink_actor{st.relay})
    .then(
      [=](cluster::spawn_reply& r) {
        auto& st = self->state;
        if (st.done || st.attempt != attempt) {
          if (r.agent)
            self->send(r.agent, stop_atom::value);
          return;
        }
        if (!r.agent) {
          // A refusal is no loss: no packet of this attempt was sent.
          spdlog::warn("cluster: worker {} refused research agent {}: {}", worker,
                       st.spec.tab_index + 1, r.refusal);
          end_attempt(self);
          st.excluded.push_back(worker);
          place(self);
          return;
        }
        st.remote = std::move(r.agent);
        self->monitor(st.remote);
        spdlog::info("cluster: research agent {} runs on worker {}", st.spec.tab_index + 1,
                     worker);
        if (st.report_now)
          self->send(st.remote, report_now_atom::value);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.done || st.attempt != attempt)
          return;
        supersede(self, "the worker did not start the agent: "
                          + (err == caf::sec::request_timeout
                               ? std::string{"no answer in time"}
                               : self->system().render(err)));
      });
}

void place(runner_ptr self) {
  auto& st = self->state;
  ++st.attempt;
  auto attempt = st.attempt;
  self->request(st.setup.directory, st.setup.spawn_timeout, place_atom::value, st.spec.tools,
                st.excluded)
    .then(
      [=](cluster::agent_host_actor& host, std::string& worker) {
        auto& st = self->state;
        if (st.done || st.attempt != attempt)
          return;
        if (!host) {
            spdlog::info("cluster: research agent {} runs on this node (no worker can take it)",
                       st.spec.tab_index + 1);
          run_here(self);
          return;
        }
        spawn_on(self, std::move(host), std::move(worker));
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.done || st.attempt != attempt)
          return;
        spdlog::warn("cluster: research agent {} runs on this node: the worker directory "
                     "did not answer ({})",
                     st.spec.tab_index + 1, self->system().render(err));
        run_here(self);
      });
}

runner_full_actor::behavior_type
runner_impl(runner_ptr self, agent_spec spec, llm_provider_actor llm, tool_set tools,
            packet_sink_actor emitter, std::shared_ptr<const core::prompt_library> prompts,
            agent_parent_actor parent, runner_setup setup) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.spec.tools = tool_names(tools);
  st.llm = std::move(llm);
  st.tools = std::move(tools);
  st.emitter = std::move(emitter);
  st.prompts = std::move(prompts);
  st.parent = std::move(parent);
  st.setup = std::move(setup);
  st.started = self->clock().now();
  // An exit message from its parent (the session gives up on its agents at
  // the deadline) ends the agent too.
  self->set_exit_handler([=](caf::exit_msg& em) {
    end_attempt(self);
    self->state.done = true;
    self->quit(em.reason);
  });
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    auto is_current = (st.remote && st.remote.address() == dm.source)
                      || (st.local && st.local.address() == dm.source);
    if (!is_current || st.done)
      return;
    // Its result may still be on its way (it is relayed; the down message
    // is not): wait a little before taking the attempt as lost.
    self->delayed_send(self, 300ms, attempt_check_atom::value, st.attempt);
  });
  // The agent has its own limits; this catches a worker that keeps
  // answering its heartbeats but never the agent's result.
  self->delayed_send(self, st.spec.hard_timeout + 30s, runner_timeout_atom::value);
  place(self);
  return {
    [=](report_now_atom) {
      auto& st = self->state;
      st.report_now = true;
      if (st.remote)
        self->send(st.remote, report_now_atom::value);
      if (st.local)
        self->send(st.local, report_now_atom::value);
    },
    [=](stop_atom) {
      end_attempt(self);
      self->state.done = true;
      self->quit();
    },
    [=](delta_atom, llm_delta&) {
      // The runner makes no model calls.
    },
    [=](packet_atom, int32_t attempt, packet_msg& p) {
      auto& st = self->state;
      if (st.done || attempt != st.attempt)
        return;
      self->send(st.emitter, packet_atom::value, std::move(p));
    },
    [=](agent_done_atom, int32_t attempt, agent_result& r) {
      auto& st = self->state;
      if (st.done || attempt != st.attempt)
        return;
      // The result stands for the agent whatever node ran it.
      r.call_id = st.spec.call_id;
      r.tab_index = st.spec.tab_index;
      st.relay = nullptr; // it quit after relaying the result
      for (auto addr : {st.remote.address(), st.local.address()})
        if (addr)
          self->demonitor(addr);
      st.remote = nullptr;
      st.local = nullptr;
      finish_runner(self, std::move(r));
    },
    [=](worker_down_atom, const std::string& worker, const std::string& why) {
      auto& st = self->state;
      if (st.done || worker != st.worker)
        return;
      supersede(self, "worker " + worker + " was lost: " + why);
    },
    [=](attempt_check_atom, int32_t attempt) {
      auto& st = self->state;
      if (st.done || attempt != st.attempt)
        return;
      supersede(self, st.worker.empty() ? std::string{"the agent stopped unexpectedly"}
                                        : "the agent on worker " + st.worker
                                            + " stopped unexpectedly");
    },
    [=](runner_timeout_atom) {
      auto& st = self->state;
      if (st.done)
        return;
      agent_result r;
      r.call_id = st.spec.call_id;
      r.tab_index = st.spec.tab_index;
      r.ok = false;
      r.failure = "no result came from its node in time";
      finish_runner(self, std::move(r));
    },
  };
}

} // namespace

agent_host_full_actor spawn_agent_host(caf::actor_system& sys, agent_host_setup setup) {
  return sys.spawn(host_impl, std::move(setup));
}

worker_directory_actor spawn_worker_directory(caf::actor_system& sys, directory_setup setup) {
  return sys.spawn(directory_impl, std::move(setup));
}

research_agent_actor spawn_agent_runner(caf::actor_system& sys, agent_spec spec,
                                        llm_provider_actor llm, tool_set tools,
                                        packet_sink_actor emitter,
                                        std::shared_ptr<const core::prompt_library> prompts,
                                        agent_parent_actor parent, runner_setup setup) {
  return sys.spawn(runner_impl, std::move(spec), std::move(llm), std::move(tools),
                   std::move(emitter), std::move(prompts), std::move(parent),
                   std::move(setup));
}

} // namespace quarry::actors
