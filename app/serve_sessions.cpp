// The session manager and the event streams of `quarry serve`.

#include "serve_sessions.hpp"

#include "research_engine.hpp"
#include "research_run.hpp"
#include "serve_service.hpp"
#include "upload_files.hpp"

#include "quarry/actors/session.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/http/server.hpp"
#include "quarry/host/services.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>

namespace quarry::app {

namespace {

using nlohmann::json;

std::string ok(const std::string& id, const char* state) {
  return json{{"id", id}, {"state", state}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string failure(int status, const char* code, const std::string& message) {
  return json{{"error", {{"status", status}, {"code", code}, {"message", message}}}}.dump(
    -1, ' ', false, json::error_handler_t::replace);
}

struct running_session {
  // The run (research_run.hpp): it creates or resumes the row, researches
  // and stores the outcome before it reports back.
  research_run_actor run;
  std::unique_ptr<session_lock> lock;
  std::string question;
  uint64_t first_seq = 1;
  bool cancelled = false;
  // A start that waits for its row: the client's answer.
  std::optional<caf::typed_response_promise<std::string>> started;
};

struct manager_state {
  research_engine* engine = nullptr;
  std::string store_file;
  manager_settings settings;
  // A read-only connection for single rows (the store actor writes).
  std::unique_ptr<store::store> reader;
  std::map<std::string, running_session> running;
  std::map<caf::actor_addr, std::string> by_run;
  // Who waits for a running session to settle (settled_atom).
  std::map<std::string, std::vector<caf::typed_response_promise<bool>>> settling;
  bool stopping = false;
  static inline const char* name = "quarry.session_manager";
};

// Sessions researching now (a start holds its slot while its row is
// written, so that admission is decided once, before anything is stored).
size_t researching(const manager_state& st) {
  return st.running.size();
}

using manager_full_actor = session_manager_actor::extend_with<run_owner_actor>;
using manager_ptr = manager_full_actor::stateful_pointer<manager_state>;

store::store* reader(manager_ptr self) {
  auto& st = self->state;
  if (!st.reader) {
    store::open_options o;
    o.read_only = true;
    auto opened = store::store::open(st.store_file, o);
    if (auto* r = std::get_if<std::unique_ptr<store::store>>(&opened))
      st.reader = std::move(*r);
  }
  return st.reader.get();
}

// Starts a run of session `id` (new, answered or resumed); a new one is
// created by the run first.
void launch(manager_ptr self, const std::string& id, run_setup setup,
            std::unique_ptr<session_lock> lock) {
  auto& st = self->state;
  running_session r;
  r.lock = std::move(lock);
  r.question = setup.options.question;
  r.first_seq = setup.first_seq;
  setup.id = id;
  r.run = spawn_research_run(self->system(), *st.engine, std::move(setup),
                             caf::actor_cast<run_owner_actor>(self));
  st.by_run[r.run.address()] = id;
  // A run that dies without its outcome still frees its slot and lock.
  self->monitor(r.run);
  st.running[id] = std::move(r);
}

// Once stopping, quits when no run and no start is left; returns whether it
// quit.
bool quit_if_stopped(manager_ptr self) {
  auto& st = self->state;
  if (!st.stopping || !st.running.empty())
    return false;
  self->quit();
  return true;
}

// Refuses a start beyond the limit or while stopping; empty when allowed.
// Starts being stored count: a start admitted here is never refused later.
std::string admission(manager_ptr self) {
  auto& st = self->state;
  if (st.stopping)
    return failure(503, "unavailable", "the server is stopping");
  if (static_cast<int>(researching(st)) >= st.settings.max_running)
    return failure(429, "busy",
                   "too many sessions are running (server.max_running_sessions = "
                     + std::to_string(st.settings.max_running) + ")");
  return {};
}

// The stored row of a session that does not run here, or the error reply.
std::variant<store::session_row, std::string> stored_row(manager_ptr self, const std::string& id) {
  if (!store::is_session_id(id))
    return failure(404, "not_found", "no session '" + id + "'");
  auto* db = reader(self);
  if (db == nullptr)
    return failure(503, "unavailable", "the research store cannot be read");
  auto row = db->session(id);
  if (!row)
    return store_failure_reply(row.error());
  if (!*row)
    return failure(404, "not_found", "no session " + id);
  return std::move(**row);
}

// The run is over: its packets, report and state are stored and its
// streams were told. The lock goes with the entry: another process may
// resume it now.
void finished(manager_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.running.find(id);
  if (it == st.running.end())
    return;
  st.by_run.erase(it->second.run.address());
  self->demonitor(it->second.run.address());
  st.running.erase(it);
  if (auto waiting = st.settling.find(id); waiting != st.settling.end()) {
    for (auto& rp : waiting->second)
      rp.deliver(true);
    st.settling.erase(waiting);
  }
  quit_if_stopped(self);
}

manager_full_actor::behavior_type manager_impl(manager_ptr self, research_engine* engine,
                                               std::string store_file, manager_settings settings) {
  self->state.engine = engine;
  self->state.store_file = std::move(store_file);
  self->state.settings = settings;
  self->set_down_handler([=](caf::down_msg& dm) {
    auto it = self->state.by_run.find(dm.source);
    if (it == self->state.by_run.end())
      return; // ended with its outcome
    auto id = it->second;
    spdlog::error("session {}: its run stopped unexpectedly ({})", id, caf::to_string(dm.reason));
    auto run = self->state.running.find(id);
    if (run != self->state.running.end() && run->second.started) {
      run->second.started->deliver(
        failure(500, "internal", "the session's run stopped unexpectedly"));
      run->second.started.reset();
    }
    finished(self, id);
  });
  return {
    [=](start_atom, std::string& parent, std::string& options) -> caf::result<std::string> {
      if (auto refused = admission(self); !refused.empty())
        return refused;
      // The models' context window is too small (checked at start-up).
      if (const auto& why = self->state.engine->windows().refusal; !why.empty())
        return failure(503, "unavailable", "the server's model cannot do deep research: " + why);
      auto parsed = stored_options_from(json::parse(options, nullptr, false));
      if (auto* why = std::get_if<std::string>(&parsed))
        return failure(400, "bad_request", *why);
      auto so = std::get<stored_options>(std::move(parsed));
      if (!parent.empty()) {
        auto row = stored_row(self, parent);
        if (auto* err = std::get_if<std::string>(&row))
          return *err;
        std::string why;
        auto context = follow_up_context(*reader(self), parent, why);
        if (!context)
          return store_failure_reply(context.error());
        if (!why.empty())
          return failure(409, "conflict", why);
        so.follow_up_context = std::move(*context);
      }
      auto id = store::make_session_id();
      auto taken = session_lock::take(self->state.store_file, id);
      if (auto* why = std::get_if<std::string>(&taken))
        return failure(500, "internal", *why);
      // Uploaded files move into the session's own folder, which its
      // options name as its corpus (its sources are shown relative to it).
      if (!so.uploads.empty()) {
        const auto& data_dir = self->state.engine->data_dir();
        auto claimed = claim_uploads(data_dir, id, so.uploads, upload_limits{});
        if (auto* refused = std::get_if<upload_refusal>(&claimed))
          return failure(refused->status, refused->code.c_str(), refused->message);
        so.uploads = std::get<std::vector<session_upload>>(std::move(claimed));
        so.corpus = session_folder(data_dir, id) + "/files";
      }
      // The slot is held from here: nothing after this refuses the start
      // for being busy, so a 429 never leaves a stored session behind.
      run_setup setup;
      setup.create = true;
      setup.parent = parent;
      setup.options = std::move(so);
      launch(self, id, std::move(setup), std::get<std::unique_ptr<session_lock>>(std::move(taken)));
      auto rp = self->make_response_promise<std::string>();
      self->state.running[id].started = rp;
      return rp;
    },
    [=](actors::cancel_atom, const std::string& id) -> std::string {
      auto& st = self->state;
      if (auto it = st.running.find(id); it != st.running.end()) {
        // One cancel stops it; another one sees it cancelled.
        if (it->second.cancelled)
          return failure(409, "conflict", "session " + id + " is cancelled already");
        it->second.cancelled = true;
        self->send(it->second.run, actors::stop_atom::value, std::string{"user_cancelled"});
        return ok(id, "cancelled");
      }
      auto row = stored_row(self, id);
      if (auto* err = std::get_if<std::string>(&row))
        return *err;
      // Held by another process (a `quarry research`, another server): it
      // is cancelled there. Taking the lock for a moment tells, with its
      // pid; released at once.
      if (auto taken = session_lock::take(self->state.store_file, id);
          auto* why = std::get_if<std::string>(&taken))
        return failure(409, "conflict", *why + "; cancel it there");
      return failure(409, "conflict",
                     "session " + id + " is not running ("
                       + store::to_string(std::get<store::session_row>(row).state) + ")");
    },
    [=](answer_atom, const std::string& id, const std::string& answers) -> std::string {
      if (self->state.running.count(id) > 0)
        return failure(409, "conflict", "session " + id + " is running and asks nothing");
      if (auto refused = admission(self); !refused.empty())
        return refused;
      auto found = stored_row(self, id);
      if (auto* err = std::get_if<std::string>(&found))
        return *err;
      auto& row = std::get<store::session_row>(found);
      if (row.state != store::session_state::clarification)
        return failure(409, "conflict",
                       "session " + id + " asks nothing (" + store::to_string(row.state) + ")");
      auto parsed = stored_options_from(row.options);
      if (auto* why = std::get_if<std::string>(&parsed))
        return failure(500, "internal", *why);
      auto so = std::get<stored_options>(std::move(parsed));
      so.answers = answers;
      so.clarify = false;
      auto taken = session_lock::take(self->state.store_file, id);
      if (auto* why = std::get_if<std::string>(&taken))
        return failure(409, "conflict", *why);
      // The answers are kept with the session, so a resume runs with them.
      self->send(self->state.engine->store(), actors::state_atom::value, id, std::string{"running"},
                 std::string{}, to_json(so).dump(-1, ' ', false, json::error_handler_t::replace));
      run_setup setup;
      setup.options = std::move(so);
      setup.first_seq = row.last_seq + 1;
      launch(self, id, std::move(setup), std::get<std::unique_ptr<session_lock>>(std::move(taken)));
      return ok(id, "running");
    },
    [=](resume_atom, const std::string& id) -> std::string {
      if (self->state.running.count(id) > 0)
        return failure(409, "conflict", "session " + id + " is running");
      if (auto refused = admission(self); !refused.empty())
        return refused;
      auto found = stored_row(self, id);
      if (auto* err = std::get_if<std::string>(&found))
        return *err;
      auto& row = std::get<store::session_row>(found);
      auto taken = session_lock::take(self->state.store_file, id);
      if (auto* why = std::get_if<std::string>(&taken))
        return failure(409, "conflict", *why);
      bool dead_running = row.state == store::session_state::running
                          || row.state == store::session_state::pending;
      if (row.state != store::session_state::interrupted && !dead_running)
        return failure(409, "conflict",
                       "session " + id + " is " + store::to_string(row.state)
                         + "; only an interrupted session can be resumed");
      auto parsed = stored_options_from(row.options);
      if (auto* why = std::get_if<std::string>(&parsed))
        return failure(500, "internal", *why);
      resume_info info;
      info.session_id = id;
      info.options = std::get<stored_options>(std::move(parsed));
      info.last_seq = row.last_seq;
      auto checkpoint = reader(self)->latest_checkpoint(id);
      if (!checkpoint)
        return store_failure_reply(checkpoint.error());
      if (auto& c = *checkpoint) {
        auto read = core::checkpoint_from_json(c->state);
        if (auto* why = std::get_if<std::string>(&read))
          return failure(500, "internal", "the checkpoint cannot be read: " + *why);
        info.checkpoint = std::make_shared<const core::research_checkpoint>(
          std::get<core::research_checkpoint>(std::move(read)));
        info.checkpoint_number = c->number;
        info.checkpoint_seq = c->last_seq;
      }
      // The run sets it running again.
      run_setup setup;
      setup.options = info.options;
      setup.resume = std::move(info);
      setup.first_seq = row.last_seq + 1;
      launch(self, id, std::move(setup), std::get<std::unique_ptr<session_lock>>(std::move(taken)));
      return ok(id, "running");
    },
    [=](remove_atom, const std::string& id) -> caf::result<std::string> {
      if (self->state.running.count(id) > 0)
        return failure(409, "conflict", "session " + id + " is running; cancel it first");
      auto found = stored_row(self, id);
      if (auto* err = std::get_if<std::string>(&found))
        return *err;
      auto taken = session_lock::take(self->state.store_file, id);
      if (auto* why = std::get_if<std::string>(&taken))
        return failure(409, "conflict", *why);
      auto lock = std::shared_ptr<session_lock>{
        std::get<std::unique_ptr<session_lock>>(std::move(taken))};
      auto rp = self->make_response_promise<std::string>();
      self->request(self->state.engine->store(), caf::infinite, remove_atom::value, id)
        .then(
          [=](std::string& err) mutable {
            // Its uploaded files and their index go with it, before the
            // answer: a client that sees 204 finds no folder left.
            if (err.empty())
              if (auto why = remove_session_folder(self->state.engine->data_dir(), id);
                  !why.empty())
                spdlog::error("session {}: its files could not be removed: {}", id, why);
            if (err == "not found")
              rp.deliver(failure(404, "not_found", "no session " + id));
            else if (!err.empty())
              rp.deliver(failure(503, "unavailable", err));
            else
              rp.deliver(ok(id, "removed"));
            // Held until the row is gone; released with the last copy.
            (void)lock;
          },
          [=](caf::error& err) mutable {
            rp.deliver(failure(503, "unavailable", caf::to_string(err)));
          });
      return rp;
    },
    [=](actors::subscribe_atom, const std::string& id, actors::line_sink_actor& sink,
        uint64_t from) -> caf::result<uint64_t> {
      auto it = self->state.running.find(id);
      if (it == self->state.running.end())
        return uint64_t{0};
      // The run answers: the first seq the sink gets (packets before it are
      // in the store), or 0 once it is ending; a run already gone answers
      // an error.
      return self->delegate(it->second.run, actors::subscribe_atom::value, std::move(sink), from);
    },
    [=](settled_atom, const std::string& id) -> caf::result<bool> {
      if (self->state.running.count(id) == 0)
        return false;
      auto rp = self->make_response_promise<bool>();
      self->state.settling[id].push_back(rp);
      return rp;
    },
    [=](running_atom) -> int64_t { return static_cast<int64_t>(researching(self->state)); },
    [=](actors::stop_atom) {
      auto& st = self->state;
      if (st.stopping)
        return;
      st.stopping = true;
      if (quit_if_stopped(self))
        return;
      for (auto& [id, run] : st.running)
        self->send(run.run, actors::stop_atom::value);
    },
    [=](run_started_atom, const std::string& id, const std::string& error) {
      auto& st = self->state;
      auto it = st.running.find(id);
      if (it == st.running.end() || !it->second.started)
        return;
      auto rp = std::move(*it->second.started);
      it->second.started.reset();
      if (!error.empty())
        rp.deliver(failure(503, "unavailable", "the research store cannot be written: " + error));
      else if (st.stopping)
        rp.deliver(failure(503, "unavailable", "the server is stopping"));
      else
        rp.deliver(ok(id, "running"));
    },
    [=](run_done_atom, const run_outcome& out) { finished(self, out.id); },
  };
}

// -- followers ---------------------------------------------------------------

using replay_atom = caf::atom_constant<caf::atom("replay")>;
using end_atom = caf::atom_constant<caf::atom("end")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;

/// `(replay_atom, lines joined by newlines, done)`: stored packets;
/// `(end_atom, state)`: the run is over; `(gone_atom)`: the client went away;
/// `(poll_atom)`: the session runs in another process (a `quarry research`
/// on the same store): read what it stored since, again.
using poll_atom = caf::atom_constant<caf::atom("storepoll")>;
/// `(retry_atom, from, until, attempt)`: the store read of a replay, again;
/// `(retry_atom, attempt)`: the read of the state, again (the blocking pool
/// refused the job: its queue was full).
using retry_atom = caf::atom_constant<caf::atom("poolretry")>;

using follower_actor = actors::line_sink_actor::extend<
  caf::reacts_to<replay_atom, std::string, bool>, caf::reacts_to<end_atom, std::string>,
  caf::reacts_to<gone_atom>, caf::reacts_to<poll_atom>, caf::reacts_to<caf::tick_atom>,
  caf::reacts_to<retry_atom, uint64_t, uint64_t, int32_t>, caf::reacts_to<retry_atom, int32_t>>;

/// A store read the blocking pool refused (its queue full, as when
/// thousands of streams end at once) is tried again after 10 ms, doubling
/// to 1 s, for about a minute; a stream never skips stored packets or ends
/// as unknown because the pool was busy for a moment.
constexpr int32_t max_pool_retries = 64;

caf::timespan pool_retry_delay(int32_t attempt) {
  return std::chrono::milliseconds{10} * (1 << std::min(attempt, 7));
}

struct follower_state {
  std::shared_ptr<session_follower> follower;
  session_manager_actor manager;
  sdk::blocking_pool* pool = nullptr;
  std::string store_file;
  std::string id;
  bool cancel_when_gone = false;
  // The next seq the client gets.
  uint64_t next = 1;
  bool replayed = false;
  bool live_ended = false;
  bool ended = false;
  std::vector<std::pair<uint64_t, std::string>> held;
  static inline const char* name = "quarry.session_follower";

  follower_state() = default;
  follower_state(const follower_state&) = delete;
  follower_state& operator=(const follower_state&) = delete;

  /// A follower that nothing refers to any more (a subscription lost with
  /// an actor that died) is collected: its client still gets an end.
  ~follower_state() {
    if (follower && !ended) {
      spdlog::warn("session {}: its event stream lost its source; it ends as unknown", id);
      follower->end("unknown");
    }
  }
};

using follower_ptr = follower_actor::stateful_pointer<follower_state>;

// The client is gone: its session is cancelled if it asked so, and
// following stops.
void client_gone(follower_ptr self) {
  auto& st = self->state;
  if (st.cancel_when_gone && !st.ended && !st.live_ended)
    caf::anon_send(st.manager, actors::cancel_atom::value, st.id);
  st.ended = true;
  self->quit();
}

void send_line(follower_ptr self, uint64_t seq, const std::string& line) {
  auto& st = self->state;
  if (st.ended || seq < st.next)
    return; // replayed already
  st.next = seq + 1;
  if (!st.follower->packet(seq, line))
    client_gone(self);
}

void end_with_state(follower_ptr self);

// The stored packets are passed on: the live ones held meanwhile follow (in
// order, without repeats), and the end if the run already ended.
void replay_done(follower_ptr self) {
  auto& st = self->state;
  st.replayed = true;
  std::sort(st.held.begin(), st.held.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [seq, line] : st.held)
    send_line(self, seq, line);
  st.held.clear();
  if (st.live_ended && !st.ended)
    end_with_state(self);
}

void read_state_and_end(follower_ptr self, int32_t attempt = 0);

// After max_pool_retries refusals of the blocking pool: said in the log, and
// the stream ends with `state`. Else false: the read is to be tried again.
bool pool_gave_up(follower_ptr self, int32_t attempt, const char* what, const char* state) {
  if (attempt < max_pool_retries)
    return false;
  spdlog::error("session {}: {} could not be read: the blocking pool stayed busy", self->state.id,
                what);
  caf::anon_send(caf::actor_cast<caf::actor>(self), end_atom::value, std::string{state});
  return true;
}

// Ends with the session's state once the manager let its run go (its
// outcome stored, its lock released): a client that acts on the end event
// (answers the questions, resumes) finds the session settled.
void end_with_state(follower_ptr self) {
  auto& st = self->state;
  self->request(st.manager, caf::infinite, settled_atom::value, st.id)
    .then([=](bool) { read_state_and_end(self); }, [=](caf::error&) { read_state_and_end(self); });
}

// Reads the session's state and ends with it.
void read_state_and_end(follower_ptr self, int32_t attempt) {
  auto& st = self->state;
  auto hdl = caf::actor_cast<caf::actor>(self);
  auto id = st.id;
  auto file = st.store_file;
  bool queued = with_reader(
    *st.pool, st.store_file, [hdl, id, file](store::store* db, const std::string&) {
      std::string state = "unknown";
      auto found = db != nullptr ? db->session(id)
                                 : store::result<std::optional<store::session_row>>{std::nullopt};
      if (!found) {
        // Said in the log; the stream ends as "unknown".
        spdlog::error("session {}: {}", id, found.error().message);
      } else if (const auto& row = *found) {
        // Running in another process: follow it.
        if (row->state == store::session_state::running && session_lock::held(file, id)) {
          caf::anon_send(hdl, poll_atom::value);
          return;
        }
        state = store::to_string(effective_state(*db, *row));
      }
      caf::anon_send(hdl, end_atom::value, state);
    });
  if (!queued && !pool_gave_up(self, attempt, "its state", "unknown"))
    self->delayed_send(self, pool_retry_delay(attempt), retry_atom::value, attempt + 1);
}

// Reads stored packets from `from` to `until` (0: to the end) in pages, and
// sends them to the follower actor.
void replay_from_store(follower_ptr self, uint64_t from, uint64_t until, int32_t attempt = 0) {
  auto& st = self->state;
  auto hdl = caf::actor_cast<caf::actor>(self);
  auto id = st.id;
  bool queued = with_reader(
    *st.pool, st.store_file, [hdl, id, from, until](store::store* db, const std::string& error) {
      if (db == nullptr) {
        // Never as if there were no stored packets.
        spdlog::error("session {}: the store cannot be read: {}", id, error);
        caf::anon_send(hdl, end_atom::value, std::string{"error"});
        return;
      }
      uint64_t next = from;
      constexpr size_t page = 1024;
      while (true) {
        auto read = db->packets(id, next, page);
        if (!read) {
          // Said in the log; the stream ends as "error", never as if every
          // packet had been sent.
          spdlog::error("session {}: {}", id, read.error().message);
          caf::anon_send(hdl, end_atom::value, std::string{"error"});
          return;
        }
        auto& rows = *read;
        std::string joined;
        bool done = rows.size() < page;
        for (const auto& r : rows) {
          if (until != 0 && r.seq > until) {
            done = true;
            break;
          }
          joined += r.line;
          joined += '\n';
          next = r.seq + 1;
        }
        if (until != 0 && next > until)
          done = true;
        caf::anon_send(hdl, replay_atom::value, std::move(joined), done);
        if (done)
          return;
      }
    });
  if (!queued && !pool_gave_up(self, attempt, "its stored packets", "error"))
    self->delayed_send(self, pool_retry_delay(attempt), retry_atom::value, from, until,
                       attempt + 1);
}

follower_actor::behavior_type
follower_impl(follower_ptr self, session_manager_actor manager, sdk::blocking_pool* pool,
              std::string store_file, std::string id, uint64_t from,
              std::shared_ptr<session_follower> follower, bool cancel_when_gone) {
  auto& st = self->state;
  st.follower = std::move(follower);
  st.manager = manager;
  st.pool = pool;
  st.store_file = std::move(store_file);
  st.id = std::move(id);
  st.cancel_when_gone = cancel_when_gone;
  st.next = std::max<uint64_t>(from, 1);
  // A weak handle: the client's connection (owned by the follower, owned by
  // this actor's state) must not keep the actor alive.
  auto addr = caf::actor_cast<caf::actor_addr>(self);
  st.follower->on_gone([addr] {
    if (auto hdl = caf::actor_cast<caf::actor>(addr))
      caf::anon_send(hdl, gone_atom::value);
  });
  self
    ->request(manager, caf::infinite, actors::subscribe_atom::value, st.id,
              caf::actor_cast<actors::line_sink_actor>(self), st.next)
    .then(
      [=](uint64_t first_live) {
        auto& st = self->state;
        if (first_live == 0) {
          // Not running here, or its run is ending: everything is stored.
          st.live_ended = true;
          replay_from_store(self, st.next, 0);
        } else if (st.next < first_live) {
          replay_from_store(self, st.next, first_live - 1);
        } else {
          // Nothing to read from the store; what the emitter sent before
          // this answer (held) goes out now.
          replay_done(self);
        }
      },
      [=](caf::error&) {
        // The run ended between the manager's look and its answer: the
        // packets and the outcome are stored; the stream ends as stored.
        auto& st = self->state;
        st.live_ended = true;
        replay_from_store(self, st.next, 0);
      });
  return {
    [=](actors::packet_atom, const std::string& line, uint64_t seq) {
      auto& st = self->state;
      if (!st.replayed) {
        st.held.emplace_back(seq, line);
        return;
      }
      send_line(self, seq, line);
    },
    [=](actors::stop_atom, uint64_t) {
      auto& st = self->state;
      st.live_ended = true;
      if (st.replayed && !st.ended)
        end_with_state(self);
    },
    [=](replay_atom, const std::string& joined, bool done) {
      auto& st = self->state;
      size_t pos = 0;
      while (pos < joined.size() && !st.ended) {
        auto nl = joined.find('\n', pos);
        auto line = joined.substr(pos, nl - pos);
        pos = nl == std::string::npos ? joined.size() : nl + 1;
        // The seq is the first field of the encoded packet.
        auto p = json::parse(line, nullptr, false);
        if (p.is_object() && p.contains("seq") && p["seq"].is_number_unsigned())
          send_line(self, p["seq"].get<uint64_t>(), line);
      }
      if (!done || st.ended)
        return;
      replay_done(self);
    },
    [=](poll_atom) {
      // Again in half a second.
      self->delayed_send(self, std::chrono::milliseconds{500}, caf::tick_atom::value);
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (st.ended)
        return;
      st.replayed = false;
      replay_from_store(self, st.next, 0);
    },
    [=](end_atom, const std::string& state) {
      auto& st = self->state;
      if (st.ended)
        return;
      st.ended = true;
      st.follower->end(state);
      st.follower.reset();
      self->quit();
    },
    [=](gone_atom) { client_gone(self); },
    [=](retry_atom, uint64_t from, uint64_t until, int32_t attempt) {
      if (!self->state.ended)
        replay_from_store(self, from, until, attempt);
    },
    [=](retry_atom, int32_t attempt) {
      if (!self->state.ended)
        read_state_and_end(self, attempt);
    },
  };
}

// An event stream as a follower: packets as `packet` events with their seq
// as id, then `event: end` with the state.
class event_stream_follower : public session_follower {
public:
  explicit event_stream_follower(std::shared_ptr<http::event_stream> stream)
    : stream_(std::move(stream)) {
  }

  bool packet(uint64_t seq, const std::string& line) override {
    return stream_->send(std::to_string(seq), "packet", line);
  }

  void end(const std::string& state) override {
    stream_->end("end",
                 json{{"state", state}}.dump(-1, ' ', false, json::error_handler_t::replace));
  }

  void on_gone(std::function<void()> gone) override {
    stream_->on_close(std::move(gone));
  }

private:
  std::shared_ptr<http::event_stream> stream_;
};

} // namespace

bool with_reader(sdk::blocking_pool& pool, const std::string& store_file,
                 std::function<void(store::store*, const std::string&)> job) {
  return pool.submit([store_file, job = std::move(job)] {
    // One read-only connection per pool thread and file, kept.
    thread_local std::unordered_map<std::string, std::unique_ptr<store::store>> readers;
    auto& db = readers[store_file];
    std::string error;
    if (!db) {
      store::open_options o;
      o.read_only = true;
      auto opened = store::store::open(store_file, o);
      if (auto* err = std::get_if<sdk::error>(&opened))
        error = err->message;
      else
        db = std::get<std::unique_ptr<store::store>>(std::move(opened));
    }
    job(db.get(), error);
  });
}

void follow_session(caf::actor_system& sys, sdk::blocking_pool& pool, session_manager_actor manager,
                    std::string store_file, std::string id, uint64_t from_seq,
                    std::shared_ptr<session_follower> follower, bool cancel_when_gone) {
  sys.spawn(follower_impl, std::move(manager), &pool, std::move(store_file), std::move(id),
            from_seq, std::move(follower), cancel_when_gone);
}

void stream_session(caf::actor_system& sys, sdk::blocking_pool& pool, session_manager_actor manager,
                    std::string store_file, std::string id, uint64_t from_seq,
                    std::shared_ptr<http::event_stream> stream) {
  follow_session(sys, pool, std::move(manager), std::move(store_file), std::move(id), from_seq,
                 std::make_shared<event_stream_follower>(std::move(stream)));
}

session_manager_actor spawn_session_manager(caf::actor_system& sys, research_engine& engine,
                                            std::string store_file, manager_settings settings) {
  return caf::actor_cast<session_manager_actor>(
    sys.spawn(manager_impl, &engine, std::move(store_file), settings));
}

} // namespace quarry::app
