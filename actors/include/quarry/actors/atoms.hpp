// The atoms of Quarry's actor messages (CAF 0.17: at most 10 characters).

#pragma once

#include "quarry/cluster/atoms.hpp"

#include <caf/atom.hpp>

namespace quarry::actors {

/// Asks a long-lived actor to finish its work, flush, and quit.
using cluster::stop_atom;

/// A packet on its way to the emitter, a subscriber or the store.
using cluster::packet_atom;

/// Asks a provider actor (LLM or tool) for its counters as JSON text.
using stats_atom = caf::atom_constant<caf::atom("stats")>;

} // namespace quarry::actors
