// Registration of every custom message type, identical on every node.

#pragma once

namespace caf {
class actor_system_config;
} // namespace caf

namespace quarry::actors {

/// Adds Quarry's message types to `cfg`. Every node calls this before its
/// actor system is built, so type names match across nodes.
void register_message_types(caf::actor_system_config& cfg);

} // namespace quarry::actors
