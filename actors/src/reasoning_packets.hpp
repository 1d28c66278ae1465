// Reasoning packets of one LLM step (start, deltas, done), shared by the
// session and the research agent. Internal to quarry_actors.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/core/packets.hpp"

#include <caf/send.hpp>

#include <string>

namespace quarry::actors::detail {

/// Whether the step's reasoning block is open and whether it had any.
struct reasoning_state {
  bool open = false;
  bool reasoned = false;
};

/// Streams a piece of reasoning at `at`, opening the block first.
inline void reasoning_piece(const packet_sink_actor& em, const core::placement& at,
                            reasoning_state& rs, const std::string& text) {
  if (text.empty())
    return;
  if (!rs.open) {
    caf::anon_send(em, packet_atom::value, make_packet(at, core::packets::reasoning_start()));
    rs.open = true;
    rs.reasoned = true;
  }
  caf::anon_send(em, packet_atom::value, make_packet(at, core::packets::reasoning_delta(text)));
}

/// Closes the reasoning block, if one is open.
inline void close_reasoning(const packet_sink_actor& em, const core::placement& at,
                            reasoning_state& rs) {
  if (!rs.open)
    return;
  caf::anon_send(em, packet_atom::value, make_packet(at, core::packets::reasoning_done()));
  rs.open = false;
}

} // namespace quarry::actors::detail
