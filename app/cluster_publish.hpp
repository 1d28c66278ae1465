// Publishing a typed actor to other nodes (`quarry worker`, `quarry serve`
// with `cluster.listen`): over mutual TLS when certificates are configured,
// plaintext otherwise, and plaintext beyond loopback only when the user
// allowed it. The runtime's multiplexer speaks the TLS and bounds every
// connection (docs/cluster.md), so both go through caf::io::publish.
// Included by the commands that publish, never by a header.

#pragma once

#include "quarry/core/cluster.hpp"
#include "quarry/core/settings.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/publish.hpp>

#include <spdlog/spdlog.h>

#include <string>
#include <variant>

namespace quarry::app {

/// Why `where` must not be published on (plaintext beyond loopback without
/// `cluster.allow_plaintext_remote`), or empty. Warns when it is allowed.
inline std::string plaintext_refusal(const core::settings& cfg, const core::node_address& where) {
  if (cfg.cluster.tls.configured() || core::is_loopback_host(where.host))
    return {};
  if (!cfg.cluster.allow_plaintext_remote)
    return "refusing to listen on " + where.text()
           + " without TLS: any program that reaches this port could use this node's "
             "models and keys. Set cluster.tls.cert, cluster.tls.key and cluster.tls.ca "
             "(see docs/cluster.md), listen on 127.0.0.1, or set "
             "cluster.allow_plaintext_remote: true on a network you trust";
  spdlog::warn("listening on {} without TLS (cluster.allow_plaintext_remote): anyone who "
               "reaches this port can use this node's models and keys",
               where.text());
  return {};
}

/// Publishes `hdl` at `where`; the port, or the error. Whether the port
/// speaks TLS follows `cfg`, the settings `sys` was built with (its
/// multiplexer speaks it).
template <class Handle>
std::variant<uint16_t, std::string> publish_node(caf::actor_system& sys, const Handle& hdl,
                                                 [[maybe_unused]] const core::settings& cfg,
                                                 const core::node_address& where) {
  auto bind = where.host.c_str();
  auto port = caf::io::publish(hdl, where.port, bind, true);
  if (!port)
    return "cannot listen on " + where.text() + ": " + sys.render(port.error());
  return *port;
}

} // namespace quarry::app
