// Registration of every custom message type, identical on every node.

#pragma once

#include <string>
#include <vector>

namespace caf {
class actor_system_config;
} // namespace caf

namespace quarry::actors {

/// Adds Quarry's message types to `cfg`. Every node calls this before its
/// actor system is built, so type names match across nodes.
void register_message_types(caf::actor_system_config& cfg);

/// Returns the names that @ref register_message_types gives its types, in
/// the order it adds them (CAF adds `std::vector<name>` and `stream<name>`
/// for each too).
const std::vector<std::string>& message_type_names();

} // namespace quarry::actors
