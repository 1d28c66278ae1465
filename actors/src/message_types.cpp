// Registration of Quarry's custom message types.

#include "quarry/actors/message_types.hpp"

#include <caf/actor_system_config.hpp>

namespace quarry::actors {

void register_message_types(caf::actor_system_config& cfg) {
  // Quarry's typed messages (chat requests, tool runs, packets) are added
  // here as the actors that exchange them are written; atoms need no entry.
  (void) cfg;
}

} // namespace quarry::actors
