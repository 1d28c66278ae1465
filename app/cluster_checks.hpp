// Checks of the cluster settings that need the file system or OpenSSL: the
// node addresses, and the certificates of mutual TLS (all three or none,
// readable, the key matching the certificate, signed by the CA).

#pragma once

#include "quarry/core/config.hpp"
#include "quarry/core/settings.hpp"

#include <vector>

namespace quarry::app {

/// Returns every problem of `cfg.cluster` at once (empty if none).
std::vector<core::config_error> check_cluster_settings(const core::settings& cfg);

} // namespace quarry::app
