// The store actor: batches writes of many sessions into one SQLite
// transaction, on a thread of its own.

#include "quarry/actors/store.hpp"

#include "quarry/core/checkpoint.hpp"
#include "quarry/core/document_numbers.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <set>

namespace quarry::actors {

namespace {

/// The batch timer of the store actor.
using store_tick_atom = caf::atom_constant<caf::atom("storetick")>;

/// The timer of pending creates and flushes. Both come in bursts (many
/// sessions start at once; a server's sessions end one after another, each
/// flushing its outcome): one that follows another of its kind within
/// `burst_gap` waits up to `burst_delay` for more to share its transaction;
/// a lone one is written at once. With a transaction per ending session a
/// busy server committed about 1.3 times per research, with this about 0.4
/// (bench/README.md, "thirteenth step").
using burst_tick_atom = caf::atom_constant<caf::atom("bursttick")>;
constexpr auto burst_delay = std::chrono::milliseconds{20};
constexpr auto burst_gap = std::chrono::milliseconds{100};

using store_full_actor
  = store_actor::extend<caf::reacts_to<store_tick_atom>, caf::reacts_to<burst_tick_atom>>;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct store_state {
  std::shared_ptr<store::store> db;
  store_actor_settings settings;
  store::batch pending;
  // The creates of `pending`: each is answered once its batch is written
  // (empty, or the write's error), so that many sessions started at once
  // share a transaction.
  std::vector<caf::typed_response_promise<std::string>> creating;
  // The flushes waiting for the next write, answered once it is done.
  std::vector<caf::typed_response_promise<std::string>> flushing;
  bool burst_tick_scheduled = false;
  // When the last create and the last flush came.
  std::chrono::steady_clock::time_point last_create{};
  std::chrono::steady_clock::time_point last_flush{};
  bool tick_scheduled = false;
  // Sessions whose writes failed, with the error: nothing more is written
  // for them but why they stopped being saved (unsaved_ends).
  std::map<std::string, std::string> failed;
  // The end of each failed session whose run ended: `interrupted` with the
  // reason, tried again at every write until it is stored.
  std::vector<store::batch::state_write> unsaved_ends;
  std::map<std::string, store_listener_actor> listeners;
  // The first error since the last flush.
  std::string error;
  // The number of each session's next checkpoint.
  std::map<std::string, int64_t> next_checkpoint;
  // Intermediate reports being streamed: (session, turn, tab) -> text.
  std::map<std::tuple<std::string, int, int>, std::string> streaming;
  // What each running session's checkpoints already wrote of a document:
  // a checkpoint repeats every document read so far, and one that would
  // change nothing (no longer text, no field to fill in) is not written
  // again. Forgotten when the session's run ends or it is removed.
  struct written_document {
    size_t text_bytes = 0;
    bool read = false;
    bool url = false;
    bool title = false;
    bool source_type = false;
  };
  std::map<std::string, std::map<std::string, written_document>> written;
  static inline const char* name = "quarry.store";
};

using store_ptr = store_full_actor::stateful_pointer<store_state>;

// The sessions a batch writes to.
std::set<std::string> sessions_of(const store::batch& b) {
  std::set<std::string> out;
  for (const auto& x : b.new_sessions)
    out.insert(x.id);
  for (const auto& x : b.packets)
    out.insert(x.session_id);
  for (const auto& x : b.documents)
    out.insert(x.session_id);
  for (const auto& x : b.reports)
    out.insert(x.session_id);
  for (const auto& x : b.usage)
    out.insert(x.session_id);
  for (const auto& x : b.checkpoints)
    out.insert(x.session_id);
  for (const auto& x : b.claims)
    out.insert(x.session_id);
  for (const auto& x : b.states)
    out.insert(x.session_id);
  for (const auto& x : b.options)
    out.insert(x.session_id);
  return out;
}

void write_unsaved_ends(store_ptr self);

// Answers the waiting flushes: everything they came after is written (or
// failed). Each hears the first error since the last flush was answered.
void answer_flushes(store_ptr self) {
  auto& st = self->state;
  if (st.flushing.empty())
    return;
  write_unsaved_ends(self);
  auto flushes = std::move(st.flushing);
  st.flushing.clear();
  auto out = std::move(st.error);
  st.error.clear();
  for (auto& rp : flushes)
    rp.deliver(out);
}

void write_pending_batch(store_ptr self);

// Writes what is pending in one transaction, then answers the creates it
// held and the flushes that wait.
void write_pending(store_ptr self) {
  write_pending_batch(self);
  answer_flushes(self);
}

void write_pending_batch(store_ptr self) {
  auto& st = self->state;
  if (st.pending.empty())
    return;
  store::batch b;
  std::swap(b, st.pending);
  auto creates = std::move(st.creating);
  st.creating.clear();
  auto failure = st.db->write(b);
  for (auto& rp : creates)
    rp.deliver(failure ? failure->message : std::string{});
  if (!failure)
    return;
  auto message = failure->message;
  spdlog::error("the research store could not be written: {}", message);
  if (st.error.empty())
    st.error = message;
  // Every session of the failed batch stops being stored: a later packet of
  // one of them would follow a gap.
  for (const auto& id : sessions_of(b)) {
    if (!st.failed.emplace(id, message).second)
      continue;
    if (auto l = st.listeners.find(id); l != st.listeners.end())
      self->send(l->second, store_failed_atom::value, id, message);
  }
}

// Writes the ends of failed sessions (small: a state each, one per
// transaction), if any; on a full disk this may work once space was freed,
// or when SQLite can reuse the pages of its log. Those that fail are kept
// for the next try, but for a session that is gone (removed meanwhile).
void write_unsaved_ends(store_ptr self) {
  auto& st = self->state;
  std::vector<store::batch::state_write> kept;
  for (auto& end : st.unsaved_ends) {
    store::batch one;
    one.states.push_back(end);
    auto failure = st.db->write(one);
    if (!failure)
      continue;
    if (failure->code == sdk::errc::bad_request)
      spdlog::error("session {}: why it stopped being saved is not stored: {}", end.session_id,
                    failure->message);
    else
      kept.push_back(std::move(end));
  }
  if (!kept.empty())
    spdlog::warn("why {} session(s) stopped being saved could not be stored yet", kept.size());
  st.unsaved_ends = std::move(kept);
}

// Drops the kept end of `session`, if any (it ends again, is resumed or
// removed).
void forget_unsaved_end(store_ptr self, const std::string& session) {
  auto& ends = self->state.unsaved_ends;
  ends.erase(std::remove_if(ends.begin(), ends.end(),
                            [&](const auto& x) { return x.session_id == session; }),
             ends.end());
}

// A failed session's run ended (`state`): it is stored as interrupted (what
// was saved can be resumed) with the write error that stopped its saving,
// whatever state its run ended in.
void end_unsaved(store_ptr self, const std::string& session, const std::string& state,
                 const std::string& write_error) {
  auto s = store::session_state_from(state);
  if (!s || *s == store::session_state::running || *s == store::session_state::pending)
    return;
  constexpr std::string_view prefix = "research store: ";
  std::string_view why = write_error;
  if (why.rfind(prefix, 0) == 0)
    why.remove_prefix(prefix.size());
  forget_unsaved_end(self, session);
  self->state.unsaved_ends.push_back(
    {session, store::session_state::interrupted,
     "the research store could not be written, so the rest of this "
     "session was not saved: "
       + std::string{why}});
  write_unsaved_ends(self);
}

void schedule(store_ptr self) {
  auto& st = self->state;
  if (st.pending.size() >= st.settings.batch_limit) {
    write_pending(self);
    return;
  }
  if (!st.tick_scheduled) {
    st.tick_scheduled = true;
    self->delayed_send(self, st.settings.batch_delay, store_tick_atom::value);
  }
}

// Creates and flushes that came in a burst wait for this tick (or any write
// before it).
void schedule_burst_tick(store_ptr self) {
  auto& st = self->state;
  if (st.burst_tick_scheduled)
    return;
  st.burst_tick_scheduled = true;
  self->delayed_send(self, burst_delay, burst_tick_atom::value);
}

bool accepts(store_ptr self, const std::string& session) {
  return self->state.failed.count(session) == 0;
}

// Whether a state change of `session` is taken; for a failed session, its
// end is kept as end_unsaved says instead.
bool accepts_state(store_ptr self, const std::string& session, const std::string& state) {
  auto f = self->state.failed.find(session);
  if (f == self->state.failed.end())
    return true;
  end_unsaved(self, session, state, f->second);
  return false;
}

// Packets that are also rows, by what their makers said of them (the line
// is never read): a usage packet is a usage row; the pieces of an agent's
// intermediate report, once it ends, are a report row.
void note_packet(store_ptr self, const std::string& session, int32_t turn, int32_t tab,
                 packet_fact& fact) {
  using kind = packet_fact::kind;
  auto& st = self->state;
  switch (fact.what) {
    case kind::none:
      return;
    case kind::usage: {
      store::usage_row u;
      u.role = std::move(fact.role);
      u.provider = std::move(fact.provider);
      u.model = std::move(fact.model);
      u.input_tokens = fact.input_tokens;
      u.output_tokens = fact.output_tokens;
      u.cost = fact.cost_usd;
      u.cost_basis = std::move(fact.cost_basis);
      st.pending.usage.push_back({session, std::move(u)});
      return;
    }
    case kind::report_start:
      st.streaming[std::make_tuple(session, turn, tab)].clear();
      return;
    case kind::report_text: {
      auto i = st.streaming.find(std::make_tuple(session, turn, tab));
      if (i != st.streaming.end())
        i->second += fact.text;
      return;
    }
    case kind::report_end: {
      auto i = st.streaming.find(std::make_tuple(session, turn, tab));
      if (i == st.streaming.end())
        return;
      store::report_row r;
      r.kind = "intermediate";
      r.turn = turn;
      r.tab = tab;
      r.text = std::move(i->second);
      r.created_at = now_ms();
      st.streaming.erase(i);
      st.pending.reports.push_back({session, std::move(r)});
      return;
    }
  }
}

store_full_actor::behavior_type store_impl(store_ptr self, std::shared_ptr<store::store> db,
                                           store_actor_settings settings) {
  self->state.db = std::move(db);
  self->state.settings = settings;
  return {
    [=](packet_atom, std::string& session, uint64_t seq, std::string& line, int32_t turn,
        int32_t tab, packet_fact& fact) {
      if (!accepts(self, session))
        return;
      note_packet(self, session, turn, tab, fact);
      self->state.pending.packets.push_back({std::move(session), {seq, std::move(line)}});
      schedule(self);
    },
    [=](checkpoint_atom, std::string& session, uint64_t last_seq, checkpoint_ptr& taken) {
      if (!accepts(self, session) || !taken)
        return;
      const auto& c = *taken;
      store::batch::checkpoint_write w;
      w.session_id = session;
      w.citations_only = c.sources_only;
      w.checkpoint.created_at = now_ms();
      if (!c.sources_only) {
        auto next = self->state.next_checkpoint.find(session);
        if (next == self->state.next_checkpoint.end()) {
          auto latest = self->state.db->latest_checkpoint(session);
          if (!latest) {
            // Numbering it anyway could clash with a stored one: this
            // checkpoint is skipped (the next one tries again).
            spdlog::error("a checkpoint of session {} was not stored: {}", session,
                          latest.error().message);
            return;
          }
          next = self->state.next_checkpoint.emplace(session, *latest ? (*latest)->number + 1 : 1)
                   .first;
        }
        w.checkpoint.number = next->second++;
        // Encoded once, here.
        w.checkpoint.state = core::to_json(c);
        w.checkpoint.last_seq = last_seq;
      }
      for (const auto& [n, ref] : c.global)
        w.citations.push_back({n, ref.document_id});
      auto& pending = self->state.pending;
      auto& written = self->state.written[session];
      for (const auto& [key, doc] : c.documents) {
        const auto& id = doc.id.empty() ? key : doc.id;
        auto snippet_only = core::snippet_only(doc);
        const auto& text = snippet_only ? doc.snippet : doc.content;
        std::string source_type = sdk::to_string(doc.kind);
        auto& seen = written[id];
        // The store keeps read text over a snippet, else the longer text, and
        // fills in empty fields only: a document that brings none of these
        // is already stored as it would be.
        if ((seen.read || snippet_only) && seen.text_bytes >= text.size() && seen.text_bytes > 0
            && seen.url && seen.title && seen.source_type)
          continue;
        // What is remembered is the text the store keeps: read text, once
        // there is some, whatever the length of a later snippet.
        if (!snippet_only && !seen.read)
          seen.text_bytes = 0;
        if (!snippet_only || !seen.read)
          seen.text_bytes = std::max(seen.text_bytes, text.size());
        seen.read = seen.read || !snippet_only;
        seen.url = seen.url || !doc.url.empty();
        seen.title = seen.title || !doc.title.empty();
        seen.source_type = seen.source_type || !source_type.empty();
        store::document_row d;
        d.document_id = id;
        d.url = doc.url;
        d.title = doc.title;
        d.text = text;
        d.fetched_at = w.checkpoint.created_at;
        d.source_type = std::move(source_type);
        d.snippet_only = snippet_only;
        pending.documents.push_back({session, std::move(d)});
      }
      pending.checkpoints.push_back(std::move(w));
      schedule(self);
    },
    [=](state_atom, std::string& session, std::string& state, std::string& error) {
      if (!accepts_state(self, session, state))
        return;
      auto s = store::session_state_from(state);
      if (!s) {
        spdlog::error("session {}: unknown state '{}' not stored", session, state);
        return;
      }
      if (*s != store::session_state::running && *s != store::session_state::pending)
        self->state.written.erase(session); // its run ended
      self->state.pending.states.push_back({std::move(session), *s, std::move(error)});
      schedule(self);
    },
    [=](state_atom, std::string& session, std::string& state, std::string& error,
        const std::string& options) {
      if (!accepts_state(self, session, state))
        return;
      auto s = store::session_state_from(state);
      auto o = nlohmann::json::parse(options, nullptr, false);
      if (!s || !o.is_object()) {
        spdlog::error("session {}: a state change with bad options not stored", session);
        return;
      }
      self->state.pending.options.push_back({session, std::move(o)});
      self->state.pending.states.push_back({std::move(session), *s, std::move(error)});
      schedule(self);
    },
    [=](report_atom, std::string& session, std::string& text) {
      if (!accepts(self, session))
        return;
      store::report_row r;
      r.kind = "final";
      r.text = std::move(text);
      r.created_at = now_ms();
      self->state.pending.reports.push_back({std::move(session), std::move(r)});
      schedule(self);
    },
    [=](report_atom, std::string& session, std::string& text, const std::string& claims) {
      if (!accepts(self, session))
        return;
      store::batch::claims_write w;
      w.session_id = session;
      auto all = nlohmann::json::parse(claims, nullptr, false);
      if (all.is_array())
        for (const auto& c : all)
          if (auto row = store::claim_from_json(c))
            w.claims.push_back(std::move(*row));
      store::report_row r;
      r.kind = "final";
      r.text = std::move(text);
      r.created_at = now_ms();
      for (auto& c : w.claims)
        c.created_at = r.created_at;
      self->state.pending.reports.push_back({std::move(session), std::move(r)});
      self->state.pending.claims.push_back(std::move(w));
      schedule(self);
    },
    [=](create_atom, std::string& id, std::string& parent, std::string& question,
        std::string& options) -> caf::result<std::string> {
      store::session_row row;
      row.id = std::move(id);
      row.parent_id = std::move(parent);
      row.question = std::move(question);
      row.options = nlohmann::json::parse(options, nullptr, false);
      if (row.options.is_discarded() || !row.options.is_object())
        return "the session's options are not a JSON object";
      row.state = store::session_state::running;
      row.created_at = row.updated_at = now_ms();
      self->state.pending.new_sessions.push_back(std::move(row));
      auto rp = self->make_response_promise<std::string>();
      auto& st = self->state;
      st.creating.push_back(rp);
      auto now = std::chrono::steady_clock::now();
      auto lone = now - st.last_create > burst_gap;
      st.last_create = now;
      if (lone) {
        write_pending(self);
        return rp;
      }
      schedule_burst_tick(self);
      return rp;
    },
    [=](remove_atom, const std::string& id) -> std::string {
      write_pending(self);
      forget_unsaved_end(self, id);
      auto removed = self->state.db->remove(id);
      if (auto* err = std::get_if<sdk::error>(&removed))
        return err->message;
      self->state.listeners.erase(id);
      self->state.next_checkpoint.erase(id);
      self->state.written.erase(id);
      return std::get<bool>(removed) ? std::string{} : std::string{"not found"};
    },
    [=](watch_atom, std::string& session, store_listener_actor& listener) {
      // A new emitter of the session goes on from what is stored (a failed
      // batch left nothing behind), so its writes are taken again.
      self->state.failed.erase(session);
      forget_unsaved_end(self, session);
      self->state.listeners[session] = std::move(listener);
    },
    [=](flush_atom) -> caf::result<std::string> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::string>();
      st.flushing.push_back(rp);
      auto now = std::chrono::steady_clock::now();
      auto lone = now - st.last_flush > burst_gap;
      st.last_flush = now;
      if (lone)
        write_pending(self);
      else
        schedule_burst_tick(self);
      return rp;
    },
    [=](store_tick_atom) {
      self->state.tick_scheduled = false;
      write_pending(self);
    },
    [=](burst_tick_atom) {
      self->state.burst_tick_scheduled = false;
      if (!self->state.creating.empty() || !self->state.flushing.empty())
        write_pending(self);
    },
    [=](stop_atom) {
      write_pending(self);
      write_unsaved_ends(self);
      self->quit();
    },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys, std::shared_ptr<store::store> db,
                        store_actor_settings settings) {
  // SQLite blocks: the store gets a thread of its own.
  return sys.spawn<caf::detached>(store_impl, std::move(db), settings);
}

} // namespace quarry::actors
