// Registration of the types of Quarry's node interfaces, identical on every
// node. Part of the installed `quarry-cluster` header set.

#pragma once

#include "quarry/cluster/messages.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/config_value.hpp>
#include <caf/settings.hpp>
#include <caf/timespan.hpp>

#include <chrono>

#include <string>
#include <vector>

namespace quarry::cluster {

// -- registration -----------------------------------------------------------

/// Calls `r.template add<T>(name)` for every type of these interfaces (and
/// every typed handle that travels inside a message).
template <class Registrar>
void announce_types(Registrar& r) {
  r.template add<packet_msg>("quarry.packet");
  r.template add<packet_fact>("quarry.packet_fact");
  r.template add<line_sink_actor>("quarry.line_sink_actor");
  r.template add<packet_sink_actor>("quarry.packet_sink_actor");
  r.template add<agent_spec>("quarry.agent_spec");
  r.template add<agent_result>("quarry.agent_result");
  r.template add<agent_parent_actor>("quarry.agent_parent_actor");
  r.template add<remote_agent_actor>("quarry.remote_agent_actor");
  r.template add<worker_status>("quarry.worker_status");
  r.template add<spawn_reply>("quarry.spawn_reply");
  r.template add<session_result>("quarry.session_result");
  r.template add<research_request>("quarry.research_request");
}

namespace detail {

/// Adds each announced type to a configuration.
struct config_registrar {
  caf::actor_system_config& cfg;

  template <class T>
  void add(const char* name) {
    cfg.add_message_type<T>(name);
  }
};

} // namespace detail

/// Sets the application identifier of Quarry nodes on `cfg`.
inline void set_app_identifier(caf::actor_system_config& cfg) {
  caf::config_value::list ids;
  ids.emplace_back(std::string{app_identifier});
  cfg.set("middleman.app-identifiers", std::move(ids));
}

/// Quarry nodes close a connection on which nothing arrived for their
/// `cluster.heartbeat_timeout` (5 s by default), which is how they see a
/// peer that vanished without closing it. A program that waits quietly for a
/// research must therefore send BASP heartbeats: sets
/// `middleman.heartbeat-interval` to 1 s unless `cfg` has a positive
/// interval already.
inline void set_heartbeat(caf::actor_system_config& cfg) {
  auto current = caf::get_if<caf::timespan>(&cfg.content, "middleman.heartbeat-interval");
  if (!current || current->count() <= 0)
    cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds{1}});
}

/// Adds the types of these interfaces to `cfg`, sets the application
/// identifier and (unless set) a heartbeat interval, so that the node can
/// talk to Quarry nodes. Call before the actor system is built (and load
/// `caf::io::middleman`).
inline void register_types(caf::actor_system_config& cfg) {
  detail::config_registrar r{cfg};
  announce_types(r);
  set_app_identifier(cfg);
  set_heartbeat(cfg);
}

} // namespace quarry::cluster
