// The reflective strategy (five agents: coordinator, background
// investigator, planner, researcher, reflector, then the synthesizer) as a
// session actor with the same interface, tools, citation collector, emitter
// and verifier as the orchestrator strategy.

#pragma once

#include "quarry/actors/session.hpp"

namespace quarry::actors {

/// Spawns a reflective session (`spec.reflective` says how it runs) that
/// starts at once and sends `(session_done_atom, session_result)` to
/// `requester` exactly once, then quits. `models.clarify` classifies,
/// `models.plan` writes queries, plans and reflections, `models.research`
/// researches, `models.report` synthesizes or answers directly. Stops and
/// the deadline behave as in spawn_session.
session_actor spawn_reflective_session(caf::actor_system& sys, session_spec spec,
                                       session_models models, tool_set tools,
                                       emitter_actor emitter,
                                       std::shared_ptr<const core::prompt_library> prompts,
                                       session_requester_actor requester);

/// Spawns the session of `spec.strategy`: spawn_reflective_session for
/// `reflective`, else spawn_session.
session_actor spawn_research_session(caf::actor_system& sys, session_spec spec,
                                     session_models models, tool_set tools,
                                     emitter_actor emitter,
                                     std::shared_ptr<const core::prompt_library> prompts,
                                     session_requester_actor requester);

} // namespace quarry::actors
