// The per-session packet emitter and a generic line subscriber.

#include "quarry/actors/emitter.hpp"

#include <caf/all.hpp>

#include <vector>

namespace quarry::actors {

packet_msg make_packet(const core::placement& where, const nlohmann::json& obj) {
  packet_msg out;
  out.turn_index = where.turn_index;
  out.tab_index = where.tab_index;
  out.sub_turn_index = where.sub_turn_index ? *where.sub_turn_index : -1;
  out.obj = obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

namespace {

struct emitter_state {
  std::string session;
  std::vector<std::string> lines;
  std::vector<line_sink_actor> subscribers;
  static inline const char* name = "quarry.emitter";
};

emitter_actor::behavior_type
emitter_impl(emitter_actor::stateful_pointer<emitter_state> self,
             std::string session) {
  self->state.session = std::move(session);
  return {
    [=](packet_atom, packet_msg& msg) {
      auto& st = self->state;
      core::packet p;
      p.seq = st.lines.size() + 1;
      p.session = st.session;
      p.where.turn_index = msg.turn_index;
      p.where.tab_index = msg.tab_index;
      if (msg.sub_turn_index >= 0)
        p.where.sub_turn_index = msg.sub_turn_index;
      p.obj = nlohmann::json::parse(msg.obj, nullptr, false);
      if (p.obj.is_discarded() || !p.obj.is_object())
        p.obj = core::packets::error("malformed packet dropped", "internal");
      st.lines.push_back(core::encode(p));
      for (const auto& sub : st.subscribers)
        caf::anon_send(sub, packet_atom::value, st.lines.back(), p.seq);
    },
    [=](subscribe_atom, line_sink_actor& sub, uint64_t from_seq) {
      auto& st = self->state;
      for (auto seq = std::max<uint64_t>(from_seq, 1); seq <= st.lines.size(); ++seq)
        caf::anon_send(sub, packet_atom::value, st.lines[seq - 1], seq);
      st.subscribers.push_back(std::move(sub));
    },
    [=](stop_atom) -> uint64_t {
      auto& st = self->state;
      auto count = static_cast<uint64_t>(st.lines.size());
      for (const auto& sub : st.subscribers)
        caf::anon_send(sub, stop_atom::value, count);
      st.subscribers.clear();
      self->quit();
      return count;
    },
  };
}

} // namespace

emitter_actor spawn_emitter(caf::actor_system& sys, std::string session_id) {
  return sys.spawn(emitter_impl, std::move(session_id));
}

line_sink_actor
spawn_line_sink(caf::actor_system& sys,
                std::function<void(const std::string&, uint64_t)> on_line,
                std::function<void(uint64_t)> on_end) {
  return sys.spawn([on_line = std::move(on_line),
                    on_end = std::move(on_end)](line_sink_actor::pointer self)
                     -> line_sink_actor::behavior_type {
    return {
      [=](packet_atom, const std::string& line, uint64_t seq) {
        on_line(line, seq);
      },
      [=](stop_atom, uint64_t count) {
        if (on_end)
          on_end(count);
        self->quit();
      },
    };
  });
}

} // namespace quarry::actors
