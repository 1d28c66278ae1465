// The network layer of a Quarry node: CAF's middleman on a multiplexer whose
// connections trust no size read from the wire before the peer's handshake,
// give up on peers that never finish it or fall silent after it, and (with
// cluster certificates) speak mutual TLS themselves. Included by the runtime only.

#pragma once

#include <caf/actor_system_config.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace quarry::actors::net {

/// Largest BASP payload accepted before the handshake: 64 KiB. A Quarry
/// node's handshakes are far smaller: a worker's server handshake (node id,
/// application identifiers, the published actor and its interface) is 230
/// bytes, a client handshake (node id) 32.
inline constexpr uint32_t handshake_payload_limit = 64 * 1024;

/// The rules of a node's connections.
struct connection_rules {
  /// Largest BASP payload (bytes) accepted after the handshake
  /// (`cluster.max_message_size`); at least @ref handshake_payload_limit.
  uint32_t max_message_size = 64 * 1024 * 1024;
  /// A connection that has not finished its handshake this long after it was
  /// opened (TLS handshake included) is closed (`cluster.handshake_timeout`).
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
  /// A connection past its handshake on which no complete BASP header or
  /// payload arrived this long is closed (`cluster.heartbeat_timeout`; zero:
  /// never). Counted from the handshake, so that a handshake slower than the
  /// heartbeat interval is not cut (CAF 0.17.6's own connection timeout
  /// counts an outgoing connection's silence from the clock's epoch until its
  /// first read, and closes it at the broker's next heartbeat tick).
  std::chrono::milliseconds idle_timeout{0};
  /// Speak mutual TLS on every connection, with the certificate, key and
  /// certificate authority of the `openssl_*` fields of the configuration
  /// (which must load `caf::openssl::manager`).
  bool tls = false;
};

/// Part of an actor system configuration that carries @ref connection_rules
/// to the multiplexer (which finds it by `dynamic_cast`; a configuration
/// without it gets the defaults).
struct connection_rules_holder {
  virtual ~connection_rules_holder() = default;
  connection_rules rules;
};

/// Loads `caf::io::middleman` into `cfg` on Quarry's multiplexer. With it,
/// `caf::io::publish` and the middleman's `connect` use TLS when
/// `rules.tls` is set: never `caf::openssl::publish` or the openssl
/// manager's actor in a node built this way (those connections would miss
/// the rules).
void load_guarded_middleman(caf::actor_system_config& cfg);

} // namespace quarry::actors::net
