// The agent runner (quarry/actors/cluster.hpp): stands in for a research agent
// toward its session, places the agent on a worker through the directory (or
// runs it here), relays its packets and result, monitors it, and runs it
// again elsewhere when its worker is lost.
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
    self->send(st.setup.directory, unwatch_atom::value, st.worker, worker_watcher_actor{self});
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
               st.spec.call_id, st.attempt, worker.empty() ? "on this node" : "on " + worker, why);
  self->send(st.emitter, packet_atom::value,
             make_packet(runner_at(self),
                         core::packets::agent_superseded(st.attempt, worker, why)));
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
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now()
                                                                         - st.started);
    auto limits = core::limits_after({st.spec.force_report_after, st.spec.hard_timeout}, elapsed);
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
  self
    ->request(host, st.setup.spawn_timeout, cluster::spawn_agent_atom::value,
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
        spdlog::info("cluster: research agent {} runs on worker {}", st.spec.tab_index + 1, worker);
        if (st.report_now)
          self->send(st.remote, report_now_atom::value);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.done || st.attempt != attempt)
          return;
        supersede(self, "the worker did not start the agent: "
                          + (err == caf::sec::request_timeout ? std::string{"no answer in time"}
                                                              : self->system().render(err)));
      });
}

void place(runner_ptr self) {
  auto& st = self->state;
  ++st.attempt;
  auto attempt = st.attempt;
  self
    ->request(st.setup.directory, st.setup.spawn_timeout, place_atom::value, st.spec.tools,
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
    [=](delta_atom, llm_deltas&) {
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
      supersede(self, st.worker.empty()
                        ? std::string{"the agent stopped unexpectedly"}
                        : "the agent on worker " + st.worker + " stopped unexpectedly");
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

research_agent_actor
spawn_agent_runner(caf::actor_system& sys, agent_spec spec, llm_provider_actor llm, tool_set tools,
                   packet_sink_actor emitter, std::shared_ptr<const core::prompt_library> prompts,
                   agent_parent_actor parent, runner_setup setup) {
  return sys.spawn(runner_impl, std::move(spec), std::move(llm), std::move(tools),
                   std::move(emitter), std::move(prompts), std::move(parent), std::move(setup));
}

} // namespace quarry::actors
