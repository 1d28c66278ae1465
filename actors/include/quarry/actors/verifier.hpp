// The verifier: checks a final report claim by claim against the stored text
// of the documents it cites (core/verification.hpp's seven stages), with a
// judge model in batches or lexically, within a time budget.

#pragma once

#include "quarry/actors/llm_messages.hpp"
#include "quarry/core/verification.hpp"

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace quarry::actors {

/// `(verified_claim_atom, claim_verified packet as JSON)`: one claim judged.
using verified_claim_atom = caf::atom_constant<caf::atom("vclaim")>;

/// `(verified_atom, report, verification_summary packet as JSON, claims as
/// JSON)`: the report with its repairs and its verification section, and
/// the claims with their spans in it and their evidence
/// (core::verification::claim_records); sent once, last.
using verified_atom = caf::atom_constant<caf::atom("verified")>;

/// Who hears a verification.
using verification_listener_actor
  = caf::typed_actor<caf::reacts_to<verified_claim_atom, std::string>,
                     caf::reacts_to<verified_atom, std::string, std::string, std::string>>;

/// What to verify and how.
struct verifier_spec {
  /// The final report (Markdown, citations `[n]` or `[[n]](url)`).
  std::string report;
  /// The documents read during the research, by citation number, with the
  /// text that was read (or the snippet).
  std::vector<core::verification::source_text> sources;
  core::verification::action what = core::verification::action::mark;
  /// Time the verification may take; claims not judged by then are
  /// `unverified` and the report goes out as it is.
  std::chrono::milliseconds budget{std::chrono::minutes{2}};
  /// Claims per judge call.
  size_t batch = 8;
  /// The judge's system prompt (the `verification_judge` template).
  std::string judge_system;
  /// Most claims checked.
  size_t max_claims = 300;
};

/// The verifier's interface: the judge's deltas (ignored) and `stop_atom`
/// (ends at once: what is not judged is unverified).
using verifier_actor = llm_listener_actor::extend<caf::reacts_to<stop_atom>>;

/// Spawns a verifier that starts at once and tells `listener` each claim's
/// verdict and, last, the verified report. With a `judge`, the claims go to
/// it in batches as `judge_claims` calls (one repair request for an unusable
/// answer; a batch the judge fails is judged lexically, and the summary says
/// so); without one, the lexical judge decides. A claim that is not
/// supported is re-cited to another read document that supports it, where
/// there is one.
verifier_actor spawn_verifier(caf::actor_system& sys, verifier_spec spec, llm_provider_actor judge,
                              verification_listener_actor listener);

} // namespace quarry::actors
