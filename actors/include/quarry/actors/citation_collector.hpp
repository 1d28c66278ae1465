// The citation collector: one per session. Owns document identity and the
// global citation numbering, collapses each research agent's report into it,
// and writes the digest of earlier findings that later agents get.

#pragma once

#include "quarry/actors/research_agent.hpp"
#include "quarry/core/citations.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Collapses a round of reports: `(collapse_atom, collapse_request)` ->
/// `collapse_reply`.
using collapse_atom = caf::atom_constant<caf::atom("collapse")>;

/// Asks for the digest of all findings so far: `(digest_atom)` -> string.
using digest_atom = caf::atom_constant<caf::atom("digest")>;

/// The successful reports of one round, in tab order, with their tasks.
struct collapse_request {
  std::vector<std::pair<std::string, agent_result>> reports;
};

/// The reports with global citation numbers, and the collector's state after
/// the round (the session keeps it for the final report).
struct collapse_reply {
  /// One text per report of the request, in the same order.
  std::vector<std::string> texts;
  /// Global number -> document reference, in numbering order.
  core::citation_mapping global;
  /// Every cited document by id.
  std::map<std::string, sdk::document> documents;
  /// Every finding so far: task and collapsed report.
  std::vector<std::pair<std::string, std::string>> findings;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collapse_request& x) {
  return f(caf::meta::type_name("quarry.collapse_request"), x.reports);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collapse_reply& x) {
  return f(caf::meta::type_name("quarry.collapse_reply"), x.texts, x.global, x.documents,
           x.findings);
}

/// The collector's interface.
using citation_collector_actor
  = caf::typed_actor<caf::replies_to<collapse_atom, collapse_request>::with<collapse_reply>,
                     caf::replies_to<digest_atom>::with<std::string>>;

/// What a collector starts from: nothing for a new session, a checkpoint's
/// numbering, documents and findings for a resumed one.
struct collector_start {
  core::citation_mapping global;
  std::map<std::string, sdk::document> documents;
  std::vector<std::pair<std::string, std::string>> findings;
};

/// Spawns a collector with the numbering of `start` (empty by default).
citation_collector_actor spawn_citation_collector(caf::actor_system& sys,
                                                  collector_start start = {});

} // namespace quarry::actors
