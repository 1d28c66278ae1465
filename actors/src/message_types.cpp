// Registration of Quarry's custom message types.

#include "quarry/actors/message_types.hpp"

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/tool_provider.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

namespace quarry::actors {

void register_message_types(caf::actor_system_config& cfg) {
  // Names must be identical on every node. Atoms need no entry.
  cfg.add_message_type<llm_call>("quarry.llm_call");
  cfg.add_message_type<llm_delta>("quarry.llm_delta");
  cfg.add_message_type<llm_reply>("quarry.llm_reply");
  cfg.add_message_type<tool_call_msg>("quarry.tool_call");
  cfg.add_message_type<tool_reply>("quarry.tool_reply");
  cfg.add_message_type<packet_msg>("quarry.packet");
}

} // namespace quarry::actors
