// The per-session packet emitter and a generic line subscriber.

#include "quarry/actors/emitter.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <deque>
#include <vector>

namespace quarry::actors {

namespace {

// A packet message at `where`, of `type`, with the object's text.
packet_msg placed_packet(const core::placement& where, std::string type, std::string obj_text) {
  packet_msg out;
  out.turn_index = where.turn_index;
  out.tab_index = where.tab_index;
  out.sub_turn_index = where.sub_turn_index ? *where.sub_turn_index : -1;
  out.type = std::move(type);
  out.obj = std::move(obj_text);
  out.dumped = true;
  return out;
}

// The facts the store keeps of a packet of `type` that need nothing of its
// object.
void packet_type_facts(packet_msg& out) {
  using kind = cluster::packet_fact::kind;
  if (out.type == "intermediate_report_start")
    out.fact.what = kind::report_start;
  else if (out.type == "section_end" || out.type == "intermediate_report_cited_docs")
    out.fact.what = kind::report_end;
}

} // namespace

packet_msg make_packet(const core::placement& where, std::string type, std::string obj_text) {
  if (type == "usage" || type == "intermediate_report_delta")
    return make_packet(where, nlohmann::json::parse(obj_text, nullptr, false));
  auto out = placed_packet(where, std::move(type), std::move(obj_text));
  packet_type_facts(out);
  return out;
}

packet_msg make_packet(const core::placement& where, const nlohmann::json& obj) {
  std::string type_name;
  if (auto t = obj.find("type"); t != obj.end() && t->is_string())
    type_name = t->get<std::string>();
  auto out = placed_packet(where, std::move(type_name), core::dump_json(obj));
  // What the store keeps besides the line, from the object at hand.
  using kind = cluster::packet_fact::kind;
  auto& fact = out.fact;
  const auto& type = out.type;
  if (type == "usage") {
    auto num = [&](const char* key) -> int64_t {
      auto i = obj.find(key);
      return i != obj.end() && i->is_number_integer() ? i->get<int64_t>() : 0;
    };
    fact.what = kind::usage;
    if (auto r = obj.find("role"); r != obj.end() && r->is_string())
      fact.role = r->get<std::string>();
    fact.input_tokens = num("input_tokens");
    fact.output_tokens = num("output_tokens");
    if (auto c = obj.find("cost_usd"); c != obj.end() && c->is_number())
      fact.cost_usd = c->get<double>();
    auto text = [&](const char* key) {
      auto i = obj.find(key);
      return i != obj.end() && i->is_string() ? i->get<std::string>() : std::string{};
    };
    fact.provider = text("provider");
    fact.model = text("model");
    auto flag = [&](const char* key, bool otherwise) {
      auto i = obj.find(key);
      return i != obj.end() && i->is_boolean() ? i->get<bool>() : otherwise;
    };
    auto basis = flag("offline", false)     ? core::cost_basis::offline
                 : flag("cost_known", true) ? core::cost_basis::priced
                                            : core::cost_basis::unpriced;
    fact.cost_basis = core::to_string(basis);
  } else if (type == "intermediate_report_delta") {
    fact.what = kind::report_text;
    if (auto c = obj.find("content"); c != obj.end() && c->is_string())
      fact.text = c->get<std::string>();
  } else {
    packet_type_facts(out);
  }
  return out;
}

namespace {

struct emitter_state {
  std::string session;
  // The session id as a JSON string, as every line carries it.
  std::string session_json;
  emitter_options options;
  // The packets held, from first_held on (options.first_seq at first;
  // later past those the store wrote and the emitter let go), and their
  // bytes.
  std::deque<std::string> lines;
  uint64_t first_held = 1;
  size_t held_bytes = 0;
  // A flush of the store is on its way (see trim); or one failed, and
  // every packet is kept from then on.
  bool trimming = false;
  bool keep_all = false;
  std::vector<line_sink_actor> subscribers;
  bool store_failed = false;
  static inline const char* name = "quarry.emitter";

  uint64_t last_seq() const {
    return first_held - 1 + lines.size();
  }
};

using emitter_ptr = emitter_actor::stateful_pointer<emitter_state>;

// Past options.keep_bytes of held packets, asks the store to write what it
// has; once it answers, the packets it wrote are let go (a late subscriber
// reads them from the store). Packets stay held without a store, when the
// store failed for the session or a flush failed, and while a flush is on
// its way.
void trim(emitter_ptr self) {
  auto& st = self->state;
  if (st.trimming || st.keep_all || st.store_failed || !st.options.store
      || st.options.keep_bytes == 0 || st.held_bytes <= st.options.keep_bytes)
    return;
  st.trimming = true;
  // Every packet up to here went to the store before the flush (one
  // sender, one receiver: in order), so the answer covers them.
  auto upto = st.last_seq();
  self->request(st.options.store, caf::infinite, flush_atom::value)
    .then(
      [=](const std::string& error) {
        auto& st = self->state;
        st.trimming = false;
        // The store's failure notice for this session comes before the
        // answer (same sender): a session whose packets the store dropped
        // keeps them all.
        if (!error.empty() || st.store_failed) {
          st.keep_all = true;
          return;
        }
        while (!st.lines.empty() && st.first_held <= upto) {
          st.held_bytes -= st.lines.front().size();
          st.lines.pop_front();
          ++st.first_held;
        }
      },
      [=](caf::error&) {
        auto& st = self->state;
        st.trimming = false;
        st.keep_all = true;
      });
}

void stamp(emitter_ptr self, const packet_msg& msg, bool to_store) {
  auto& st = self->state;
  auto seq = st.last_seq() + 1;
  core::placement where;
  where.turn_index = msg.turn_index;
  where.tab_index = msg.tab_index;
  if (msg.sub_turn_index >= 0)
    where.sub_turn_index = msg.sub_turn_index;
  // The object's text as its maker serialised it (checked, not parsed):
  // encoded once, shared by the store and every subscriber.
  std::optional<std::string> line;
  if (msg.dumped && !msg.obj.empty() && msg.obj.front() == '{')
    line = core::encode_dumped(seq, st.session_json, where, msg.obj);
  else
    line = core::encode(seq, st.session, where, msg.obj);
  auto fact = msg.fact;
  if (!line) {
    line = core::encode(seq, st.session, where,
                        core::packets::error("malformed packet dropped", "internal").dump());
    fact = {};
  }
  st.lines.push_back(std::move(*line));
  st.held_bytes += st.lines.back().size();
  if (to_store && st.options.store && !st.store_failed)
    self->send(st.options.store, packet_atom::value, st.session, seq, st.lines.back(),
               msg.turn_index, msg.tab_index, std::move(fact));
  for (const auto& sub : st.subscribers)
    caf::anon_send(sub, packet_atom::value, st.lines.back(), seq);
  if (to_store)
    trim(self);
}

emitter_actor::behavior_type emitter_impl(emitter_ptr self, std::string session,
                                          emitter_options options) {
  self->state.session = std::move(session);
  self->state.session_json = core::session_json(self->state.session);
  self->state.options = std::move(options);
  if (self->state.options.first_seq == 0)
    self->state.options.first_seq = 1;
  self->state.first_held = self->state.options.first_seq;
  if (self->state.options.store)
    self->send(self->state.options.store, watch_atom::value, self->state.session,
               caf::actor_cast<store_listener_actor>(self));
  return {
    [=](packet_atom, packet_msg& msg) { stamp(self, msg, true); },
    [=](checkpoint_atom, checkpoint_ptr& checkpoint) {
      auto& st = self->state;
      if (st.options.store && !st.store_failed)
        self->send(st.options.store, checkpoint_atom::value, st.session, st.last_seq(),
                   std::move(checkpoint));
    },
    [=](subscribe_atom, line_sink_actor& sub, uint64_t from_seq) -> uint64_t {
      auto& st = self->state;
      auto first = std::max(from_seq, st.first_held);
      for (auto seq = first; seq <= st.last_seq(); ++seq)
        caf::anon_send(sub, packet_atom::value, st.lines[seq - st.first_held], seq);
      st.subscribers.push_back(std::move(sub));
      return first;
    },
    [=](store_failed_atom, const std::string&, const std::string& message) {
      auto& st = self->state;
      if (st.store_failed)
        return;
      st.store_failed = true;
      // Live subscribers learn of it; the store cannot take this packet.
      stamp(self,
            make_packet(core::placement{0, 0, std::nullopt},
                        core::packets::error("the research store cannot be written: " + message
                                               + "; the research goes on unsaved",
                                             "store_failed")),
            false);
    },
    [=](flush_atom) -> uint64_t { return self->state.last_seq(); },
    [=](stop_atom) -> uint64_t {
      auto& st = self->state;
      auto last = st.last_seq();
      for (const auto& sub : st.subscribers)
        caf::anon_send(sub, stop_atom::value, last);
      st.subscribers.clear();
      self->quit();
      return last;
    },
  };
}

} // namespace

emitter_actor spawn_emitter(caf::actor_system& sys, std::string session_id,
                            emitter_options options) {
  return sys.spawn(emitter_impl, std::move(session_id), std::move(options));
}

line_sink_actor spawn_line_sink(caf::actor_system& sys,
                                std::function<void(const std::string&, uint64_t)> on_line,
                                std::function<void(uint64_t)> on_end) {
  return sys.spawn([on_line = std::move(on_line), on_end = std::move(on_end)](
                     line_sink_actor::pointer self) -> line_sink_actor::behavior_type {
    return {
      [=](packet_atom, const std::string& line, uint64_t seq) { on_line(line, seq); },
      [=](stop_atom, uint64_t count) {
        if (on_end)
          on_end(count);
        self->quit();
      },
    };
  });
}

} // namespace quarry::actors
