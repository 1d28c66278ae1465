// One run of a research session (research_run.hpp).

#include "research_run.hpp"

#include "research_engine.hpp"
#include "upload_files.hpp"

#include "quarry/actors/store.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/sdk/host.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

namespace quarry::app {

namespace {

/// `(files_ready_atom)`: the blocking pool indexed the session's uploaded
/// files (run_state::files_indexed holds the outcome).
using files_ready_atom = caf::atom_constant<caf::atom("filesready")>;

using run_full_actor = research_run_actor::extend_with<actors::session_requester_actor>::extend<
  caf::reacts_to<files_ready_atom>>;

struct run_state {
  research_engine* engine = nullptr;
  run_setup setup;
  run_owner_actor owner;
  actors::emitter_actor emitter;
  actors::session_actor session;
  // Sinks attached before the emitter was spawned, with their first seq.
  std::vector<std::pair<actors::line_sink_actor, uint64_t>> early_sinks;
  // Stops that came before the session was spawned.
  std::optional<std::string> stop_before_start;
  bool cancelled = false;
  bool ending = false;
  // The emitter was told to stop: a sink subscribed now would never hear
  // its end, and every packet is stored by then.
  bool emitter_stopping = false;
  // A session with uploaded files: the outcome of indexing them (the index's
  // file or why not; written by a pool thread before files_ready_atom), and
  // its own search tool, stopped with the run.
  std::shared_ptr<std::variant<std::string, std::string>> files_indexed;
  actors::tool_provider_actor files_tool;
  static inline const char* name = "quarry.research_run";
};

using run_ptr = run_full_actor::stateful_pointer<run_state>;

void done(run_ptr self, run_outcome out) {
  if (self->state.files_tool) {
    self->send(self->state.files_tool, actors::stop_atom::value);
    self->state.files_tool = actors::tool_provider_actor{};
  }
  self->send(self->state.owner, run_done_atom::value, std::move(out));
  self->quit();
}

// The session ended: 1. the emitter has handed every packet to the store;
// 2. the report and state follow them; 3. the emitter stops (its sinks are
// told after its last packet); 4. the owner hears of it.
void end_run(run_ptr self, actors::session_result r) {
  auto& st = self->state;
  if (st.ending)
    return;
  st.ending = true;
  if (st.session)
    self->demonitor(st.session.address());
  run_outcome out;
  out.id = st.setup.id;
  out.state = st.cancelled ? "cancelled" : state_after(r);
  out.result = std::move(r);
  out.last_seq = st.setup.first_seq - 1;
  auto store = st.engine->store();
  auto em = st.emitter;
  auto shared = std::make_shared<run_outcome>(std::move(out));
  auto stop_emitter = [=] {
    self->state.emitter_stopping = true;
    self->request(em, std::chrono::seconds{30}, actors::stop_atom::value)
      .then(
        [=](uint64_t last) {
          if (last > 0)
            shared->last_seq = last;
          done(self, std::move(*shared));
        },
        [=](caf::error&) { done(self, std::move(*shared)); });
  };
  if (!store) {
    stop_emitter();
    return;
  }
  self->request(em, std::chrono::seconds{30}, actors::flush_atom::value)
    .then(
      [=](uint64_t) {
        const auto& r = shared->result;
        if (r.status == actors::session_status::report && !r.report.empty())
          self->send(store, actors::report_atom::value, shared->id, r.report, r.claims);
        self->send(store, actors::state_atom::value, shared->id, shared->state,
                   r.status == actors::session_status::failed ? r.failure : std::string{});
        self->request(store, caf::infinite, actors::flush_atom::value)
          .then(
            [=](std::string& err) {
              if (!err.empty()) {
                spdlog::error("session {}: the store could not be written: {}", shared->id, err);
                shared->store_error = std::move(err);
              }
              stop_emitter();
            },
            [=](caf::error& err) {
              spdlog::error("session {}: the store did not answer: {}", shared->id,
                            caf::to_string(err));
              shared->store_error = caf::to_string(err);
              stop_emitter();
            });
      },
      [=](caf::error& err) {
        shared->store_error = "the packets could not be handed to the store: "
                              + caf::to_string(err);
        stop_emitter();
      });
}

// The row could not be created: nothing runs; the owner hears why.
void not_created(run_ptr self, std::string why) {
  auto& st = self->state;
  self->send(st.owner, run_started_atom::value, st.setup.id, why);
  // Sinks that came early hear that nothing follows.
  for (auto& [sink, from] : st.early_sinks)
    self->send(sink, actors::stop_atom::value, st.setup.first_seq - 1);
  st.early_sinks.clear();
  run_outcome out;
  out.id = st.setup.id;
  out.ran = false;
  out.store_error = std::move(why);
  out.last_seq = st.setup.first_seq - 1;
  done(self, std::move(out));
}

void spawn_session(run_ptr self, actors::tool_set tools);

// The row exists: the emitter, the sinks and the session start.
void launch(run_ptr self) {
  auto& st = self->state;
  auto& engine = *st.engine;
  actors::emitter_options eo;
  eo.store = engine.store();
  eo.first_seq = st.setup.first_seq;
  st.emitter = actors::spawn_emitter(self->system(), st.setup.id, eo);
  // Before the first packet: nothing is let go yet, every sink starts where
  // it asked (the answer, its first seq, is not needed).
  for (auto& sink : st.setup.sinks)
    caf::anon_send(st.emitter, actors::subscribe_atom::value, sink, uint64_t{0});
  for (auto& [sink, from] : st.early_sinks)
    caf::anon_send(st.emitter, actors::subscribe_atom::value, sink, from);
  st.early_sinks.clear();
  if (st.setup.options.uploads.empty()) {
    self->send(st.owner, run_started_atom::value, st.setup.id, std::string{});
    spawn_session(self, engine.tools());
    return;
  }
  // Uploaded files: indexed on the blocking pool (converted, extracted;
  // unchanged ones skipped when resumed), then searched with a tool of the
  // session's own. The session runs (its row exists) meanwhile.
  self->send(st.owner, run_started_atom::value, st.setup.id, std::string{});
  auto outcome = std::make_shared<std::variant<std::string, std::string>>();
  st.files_indexed = outcome;
  auto folder = session_folder(engine.data_dir(), st.setup.id);
  auto caps = engine.index_caps();
  auto hdl = caf::actor_cast<caf::actor>(self);
  bool queued = engine.blocking_pool().submit([outcome, folder, caps, hdl] {
    *outcome = index_session_files(folder, caps);
    caf::anon_send(hdl, files_ready_atom::value);
  });
  if (!queued) {
    actors::session_result r;
    r.status = actors::session_status::failed;
    r.failure = "the uploaded files could not be indexed: the server is busy; resume the "
                "session later";
    end_run(self, std::move(r));
  }
}

// The uploaded files are indexed: the session starts with its own tool, or
// fails saying why.
void files_ready(run_ptr self) {
  auto& st = self->state;
  if (st.ending || st.session || !st.files_indexed)
    return;
  auto outcome = std::move(*st.files_indexed);
  st.files_indexed.reset();
  auto fail = [&](std::string why) {
    spdlog::error("session {}: {}", st.setup.id, why);
    actors::session_result r;
    r.status = actors::session_status::failed;
    r.failure = std::move(why);
    end_run(self, std::move(r));
  };
  if (outcome.index() == 1) {
    fail(std::get<1>(std::move(outcome)));
    return;
  }
  auto made = st.engine->session_files_tool(std::get<0>(outcome));
  if (auto* why = std::get_if<std::string>(&made)) {
    fail(*why);
    return;
  }
  auto entry = std::get<actors::tool_set::entry>(std::move(made));
  st.files_tool = entry.actor;
  auto tools = st.engine->tools();
  tools.tools[core::attached_files_tool_name] = std::move(entry);
  spawn_session(self, std::move(tools));
}

// The session of the run, with `tools`.
void spawn_session(run_ptr self, actors::tool_set tools) {
  auto& st = self->state;
  auto& engine = *st.engine;
  auto spec = engine.spec_for(st.setup.id, st.setup.options,
                              st.setup.resume ? &*st.setup.resume : nullptr);
  st.session = actors::spawn_research_session(
    self->system(), std::move(spec), engine.models(), std::move(tools), st.emitter,
    engine.prompts(), caf::actor_cast<actors::session_requester_actor>(self));
  // A session that dies without its result still ends its run.
  self->monitor(st.session);
  if (st.stop_before_start) {
    if (st.stop_before_start->empty())
      self->send(st.session, actors::stop_atom::value);
    else
      self->send(st.session, actors::stop_atom::value, *st.stop_before_start);
  }
}

run_full_actor::behavior_type run_impl(run_ptr self, research_engine* engine, run_setup setup,
                                       run_owner_actor owner) {
  auto& st = self->state;
  st.engine = engine;
  st.setup = std::move(setup);
  st.owner = std::move(owner);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (!st.session || dm.source != st.session.address())
      return;
    actors::session_result r;
    r.status = actors::session_status::failed;
    r.failure = "the session stopped unexpectedly (" + caf::to_string(dm.reason) + ")";
    end_run(self, std::move(r));
  });
  auto store = engine->store();
  const auto& id = st.setup.id;
  if (store && st.setup.create) {
    self
      ->request(
        store, caf::infinite, actors::create_atom::value, id, st.setup.parent,
        st.setup.options.question,
        to_json(st.setup.options).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .then(
        [=](std::string& err) {
          if (err.empty())
            launch(self);
          else
            not_created(self, std::move(err));
        },
        [=](caf::error& err) { not_created(self, caf::to_string(err)); });
  } else {
    if (store && st.setup.resume)
      self->send(store, actors::state_atom::value, id, std::string{"running"}, std::string{});
    launch(self);
  }
  return {
    [=](actors::stop_atom) {
      auto& st = self->state;
      if (!st.session && st.files_indexed) {
        // Stopped while its files are indexed: kept as interrupted (a
        // resume indexes what is left).
        actors::session_result r;
        r.status = actors::session_status::failed;
        r.interrupted = true;
        r.failure = "stopped while its uploaded files were indexed";
        end_run(self, std::move(r));
        return;
      }
      if (!st.session) {
        if (!st.stop_before_start)
          st.stop_before_start = std::string{};
        return;
      }
      self->send(st.session, actors::stop_atom::value);
    },
    [=](actors::stop_atom, std::string& reason) {
      auto& st = self->state;
      if (reason == "user_cancelled" && !st.ending)
        st.cancelled = true;
      if (!st.session && st.files_indexed) {
        actors::session_result r;
        r.status = actors::session_status::failed;
        r.interrupted = !st.cancelled;
        r.failure = "stopped while its uploaded files were indexed";
        end_run(self, std::move(r));
        return;
      }
      if (!st.session) {
        st.stop_before_start = reason;
        return;
      }
      self->send(st.session, actors::stop_atom::value, std::move(reason));
    },
    [=](actors::subscribe_atom, actors::line_sink_actor& sink,
        uint64_t from) -> caf::result<uint64_t> {
      auto& st = self->state;
      // A subscription sent before the stop reaches the emitter before it;
      // after it, the sink is told to read the store instead.
      if (st.emitter_stopping)
        return uint64_t{0};
      // The emitter answers with the first seq it sends: what came before
      // is in the store (it lets go of packets the store wrote).
      if (st.emitter)
        return self->delegate(st.emitter, actors::subscribe_atom::value, std::move(sink), from);
      st.early_sinks.emplace_back(std::move(sink), from);
      return std::max(from, st.setup.first_seq);
    },
    [=](actors::session_done_atom, actors::session_result& r) { end_run(self, std::move(r)); },
    [=](files_ready_atom) { files_ready(self); },
  };
}

} // namespace

research_run_actor spawn_research_run(caf::actor_system& sys, research_engine& engine,
                                      run_setup setup, run_owner_actor owner) {
  return sys.spawn(run_impl, &engine, std::move(setup), std::move(owner));
}

} // namespace quarry::app
