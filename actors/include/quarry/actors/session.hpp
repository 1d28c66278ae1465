// The research session: one actor runs a research with a strategy, Onyx's
// orchestrator (clarification, plan, orchestrator cycles with research
// agents, final report) or the reflective one (coordinator, background
// investigator, planner, researcher, reflector, synthesizer), with a
// parallel limit enforced in code, every tool call answered and a global
// deadline that really bounds the run. The machinery both share is the
// session frame (actors/src/session_frame.hpp).

#pragma once

#include "quarry/actors/cluster.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/verifier.hpp"
#include "quarry/core/checkpoint.hpp"
#include "quarry/core/reflective.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace caf {
class actor_system;
} // namespace caf

namespace quarry::actors {

/// Sent by a session to its requester at the end: `(session_done_atom,
/// session_result)`.
using session_done_atom = caf::atom_constant<caf::atom("sessdone")>;

/// How a session researches (docs/strategies.md; research.strategy).
enum class research_strategy {
  /// Onyx's: an orchestrator sends research agents in cycles.
  orchestrator,
  /// Five agents: a plan checked by a reflector after every step.
  reflective,
};

/// The strategy's configuration name: `orchestrator` or `reflective`.
std::string_view to_string(research_strategy x) noexcept;

/// The strategy named `name`, or none.
std::optional<research_strategy> parse_research_strategy(std::string_view name) noexcept;

/// How the reflective strategy runs (docs/strategies.md).
struct reflective_options {
  core::reflective::query_mode mode = core::reflective::query_mode::deep_research;
  /// `automatic`: from the coordinator's complexity.
  core::reflective::depth depth = core::reflective::depth::automatic;
  /// Plans at most (the first and each ADJUST).
  int max_plan_iterations = 3;
  /// Classic researcher (light depth): searches and page reads per step.
  int max_search_queries = 2;
  int max_urls_to_crawl = 3;
  int max_clarifying_questions = 3;
  /// `web_search` mode answers directly when its step takes longer.
  std::chrono::milliseconds web_search_fallback{std::chrono::seconds{15}};
};

/// What a session researches and within which limits.
struct session_spec {
  std::string session_id;
  std::string question;
  /// The earlier messages of the session's thread, oldest first: each
  /// earlier question (user) and its report (assistant). The clarification,
  /// the plan, the orchestrator and the reflective coordinator see the last
  /// four questions with their answers before `question`
  /// (core::conversation_window); a simple answer uses their sources.
  std::vector<sdk::chat_message> conversation;
  /// Ask clarifying questions first when the question is unclear.
  bool clarify = true;
  /// Research agents running at once; surplus calls are answered "not run".
  int max_parallel_agents = 3;
  /// Orchestrator cycles; 0: 8, or 4 for reasoning models.
  int max_cycles = 0;
  int max_plan_steps = 6;
  /// Research cycles of each agent.
  int agent_max_cycles = 8;
  /// The models reason natively (no think_tool).
  bool reasoning_model = false;
  /// research.reasoning_model is `auto`: a reasoning channel in the first
  /// answer makes the research a reasoning model's.
  bool reasoning_model_auto = false;
  /// Why `reasoning_model` is what it is (the `model_profile` packet).
  std::string reasoning_model_reason;
  /// Research ends by this time after the start; the final report follows.
  std::chrono::milliseconds deadline{std::chrono::minutes{30}};
  /// Longest time for the final report itself.
  std::chrono::milliseconds final_report_timeout{std::chrono::minutes{5}};
  /// Per agent: time to report, hard limit.
  std::chrono::milliseconds agent_force_report{std::chrono::minutes{12}};
  std::chrono::milliseconds agent_hard_timeout{std::chrono::minutes{30}};
  /// Prompt tokens the models accept.
  int64_t context_tokens = 128000;
  /// Output token caps (research.max_tokens.*; the design's values).
  int64_t orchestrator_max_tokens = 1024;
  int64_t final_max_tokens = 20000;
  int64_t agent_step_max_tokens = 1000;
  int64_t agent_report_max_tokens = 10000;
  /// Follow-up calls that continue a report cut by the output limit.
  int report_continuations = 2;
  /// The date as the prompts state it.
  std::string current_datetime;
  /// Send a checkpoint (core::research_checkpoint as JSON) to the emitter
  /// at the start of every orchestrator cycle and before the final report;
  /// an emitter with a store writes it.
  bool checkpoints = false;
  /// The session goes on after its process stopped: it first emits a
  /// `resumed` packet (`resume_checkpoint`, `superseded_after`), then
  /// carries on from `resume_from` (or starts over when there is none).
  bool resumed = false;
  std::shared_ptr<const core::research_checkpoint> resume_from;
  int64_t resume_checkpoint = 0;
  uint64_t superseded_after = 0;
  /// Check the final report claim by claim (verifier.hpp) before it is
  /// delivered: within `verify_timeout`, and never more than a second past
  /// the research deadline.
  bool verify = false;
  core::verification::action verify_action = core::verification::action::mark;
  std::chrono::milliseconds verify_timeout{std::chrono::minutes{2}};
  /// The strategy; `reflective` runs as `reflective` says.
  research_strategy strategy = research_strategy::orchestrator;
  reflective_options reflective;
};

/// The LLM provider actor for each role (they may all be the same), and
/// where research agents run.
struct session_models {
  llm_provider_actor clarify;
  llm_provider_actor plan;
  llm_provider_actor orchestrator;
  llm_provider_actor research;
  llm_provider_actor report;
  /// The verification judge; null: the lexical judge.
  llm_provider_actor judge{};
  /// The workers research agents are placed on (cluster.workers); null:
  /// every agent runs on this node.
  worker_directory_actor workers{};
  /// Longest wait for a worker to start an agent.
  std::chrono::milliseconds spawn_timeout{std::chrono::seconds{10}};
};

/// How a session ended.
using cluster::session_status;

/// A cited source of the report.
using cluster::report_source;

/// What a session produced. With `interrupted`, the session was told to
/// stop (`stop_atom`, sent on SIGINT/SIGTERM) before it finished. No agent
/// starts after the stop and no further model call is made: with `status ==
/// report`, the report holds the findings gathered until then (`sources`
/// empty if there were none); a stop during clarification or planning ends
/// with `status == failed`.
using cluster::session_result;

/// What a session's requester receives: `(session_done_atom,
/// session_result)`, once.
using session_requester_actor = caf::typed_actor<caf::reacts_to<session_done_atom, session_result>>;

/// The interface of a session: `(stop_atom)` from its requester (the
/// process stops: its last packet says `interrupted`), `(stop_atom,
/// reason)` (e.g. `user_cancelled`, which its last packet then says), the
/// deltas of its LLM calls, and its agents' results.
using session_actor = caf::typed_actor<
  caf::reacts_to<stop_atom>,
  caf::reacts_to<stop_atom, std::string>>::extend_with<llm_listener_actor, agent_parent_actor>;

/// Research is near its deadline: agents are told to report.
using deadline_soon_atom = caf::atom_constant<caf::atom("dlsoon")>;

/// The research deadline: unfinished work stops, the final report starts.
using deadline_now_atom = caf::atom_constant<caf::atom("dlnow")>;

/// The final report's own time limit.
using final_timeout_atom = caf::atom_constant<caf::atom("finaltime")>;

/// The session's whole interface: the public one and its own timers and
/// start trigger (`caf::tick_atom`).
using session_full_actor = session_actor::extend<
  caf::reacts_to<caf::tick_atom>, caf::reacts_to<deadline_soon_atom>,
  caf::reacts_to<deadline_now_atom>,
  caf::reacts_to<final_timeout_atom>>::extend_with<verification_listener_actor>;

/// Spawns a session of `spec.strategy` that starts at once and sends
/// `(session_done_atom, session_result)` to `requester` exactly once, then
/// quits. Send it `stop_atom` to end research at once: the call in flight is
/// cancelled and the findings so far become the report (see
/// session_result::interrupted). The deadline (`spec.deadline`) also cancels
/// whatever call is in flight. The orchestrator strategy uses every role of
/// `models`; the reflective one: `clarify` classifies, `plan` writes
/// queries, plans and reflections, `research` researches, `report`
/// synthesizes or answers directly.
session_actor spawn_research_session(caf::actor_system& sys, session_spec spec,
                                     session_models models, tool_set tools, emitter_actor emitter,
                                     std::shared_ptr<const core::prompt_library> prompts,
                                     session_requester_actor requester);

} // namespace quarry::actors
