// The research service of `quarry serve` for other CAF programs
// (`cluster.listen`): start a stored research session, receive its packets,
// get its result, cancel it, through the typed interface
// `cluster::research_service_actor` (docs/cluster.md).

#pragma once

#include "quarry/cluster/messages.hpp"

#include <memory>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::app {

struct service;

/// The service with `(stop_atom)`, for the server's shutdown.
using research_service_full_actor
  = cluster::research_service_actor::extend<caf::reacts_to<cluster::stop_atom>>;

/// Spawns the research service over the server's sessions.
research_service_full_actor spawn_research_service(caf::actor_system& sys,
                                                   std::shared_ptr<service> svc);

} // namespace quarry::app
