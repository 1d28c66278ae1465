// The worker directory (quarry/actors/cluster.hpp): connects to the configured
// workers, monitors each agent host and asks it for its status every
// heartbeat (a worker that answers nothing is lost after the heartbeat
// timeout), and places agents on the worker with room and the tools.
//
// CAF 0.17 does not fail a pending request when the node that should answer
// goes away, and has no node monitoring (see docs/cluster.md): every request
// to another node here has a finite timeout.

#include "quarry/actors/cluster.hpp"

#include "quarry/cluster/messages.hpp"
#include "quarry/core/cluster.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/core/prompts.hpp"

#include "cluster_tools.hpp"

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
using detail::tool_names;

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
          lose(self, i,
               "it speaks protocol " + std::to_string(s.protocol) + ", this node "
                 + std::to_string(cluster::protocol_version));
          return;
        }
        w.compatible = true;
        if (!w.up) {
          spdlog::info("cluster: worker {} is up ({} of {} agents running, model {})", w.name,
                       s.running, s.capacity, s.model.empty() ? "?" : s.model);
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
        lose(self, i,
             err == caf::sec::request_timeout
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
  self
    ->request(connector(self), self->state.setup.connect_timeout, caf::connect_atom::value,
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
          lose(self, i,
               "it does not offer Quarry's agent host interface (another "
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
  self->delayed_send(self, delay, caf::connect_atom::value, static_cast<uint64_t>(i), w.generation);
}

directory_full_actor::behavior_type directory_impl(directory_ptr self, directory_setup setup) {
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
        lose(self, i,
             dm.reason == caf::exit_reason::remote_link_unreachable
               ? std::string{"its connection was lost"}
               : "its agent host stopped (" + self->system().render(dm.reason) + ")");
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
    [=](place_atom, std::vector<std::string>& tools,
        std::vector<std::string>& excluded) -> caf::result<cluster::agent_host_actor, std::string> {
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
                     w.last_problem.empty() ? std::string{"it is not connected"} : w.last_problem);
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

} // namespace

worker_directory_actor spawn_worker_directory(caf::actor_system& sys, directory_setup setup) {
  return sys.spawn(directory_impl, std::move(setup));
}

} // namespace quarry::actors
