// The typed interfaces of a Quarry node, as any CAF 0.17 program sees them:
// a worker's agent host (spawn a research agent there, ask its status) and
// a session node's research service (start a research, receive its packets,
// cancel it, get its report). Part of the installed `quarry-cluster` header
// set (`find_package(quarry-cluster)`): it needs CAF 0.17 and the Quarry SDK
// headers, nothing else of Quarry. Quarry's own actors use these very types.
//
// A program that talks to Quarry nodes calls `register_types(cfg)` on its
// `caf::actor_system_config` (before the system is built) and loads CAF's
// middleman; the names below must match on every node.

#pragma once

#include "quarry/cluster/atoms.hpp"
#include "quarry/cluster/wire.hpp"

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace quarry::cluster {

/// The version of these interfaces. Nodes of different versions refuse each
/// other (CAF compares the interfaces' type names when connecting; the
/// agent host also checks the number a session sends).
inline constexpr int32_t protocol_version = 4;

/// The application identifier of Quarry nodes (CAF's
/// `middleman.app-identifiers`): a CAF program of another application fails
/// the handshake instead of exchanging messages.
inline constexpr const char* app_identifier = "quarry";

// -- bounds of what a node accepts ------------------------------------------

/// A research task (the orchestrator's instruction to one agent).
inline constexpr size_t max_task_bytes = 64 * 1024;
/// What earlier agents found, given to a new one.
inline constexpr size_t max_context_bytes = 4 * 1024 * 1024;
/// One packet's JSON object.
inline constexpr size_t max_packet_bytes = 4 * 1024 * 1024;
/// An agent's intermediate report.
inline constexpr size_t max_report_bytes = 4 * 1024 * 1024;
/// Tool names an agent may use, and documents an agent may cite.
inline constexpr size_t max_tools = 64;
inline constexpr size_t max_cited = 4096;
/// A research question.
inline constexpr size_t max_question_bytes = 64 * 1024;

// -- packets ----------------------------------------------------------------

/// What the research store keeps of a packet besides its line, typed as the
/// packet's maker knows it, so that the store never reads the line: a model
/// call's usage, or a piece of an agent's intermediate report (its start, a
/// piece of text, its end).
struct packet_fact {
  enum class kind : uint8_t {
    /// Nothing beyond the line.
    none,
    /// A `usage` packet: `role`, the token counts and the cost.
    usage,
    /// An `intermediate_report_start`: a report begins at the placement.
    report_start,
    /// An `intermediate_report_delta`: `text` continues it.
    report_text,
    /// A `section_end` or `intermediate_report_cited_docs`: it is complete.
    report_end,
  };
  kind what = kind::none;
  std::string role;
  /// The provider instance and the model of a usage packet (the model is
  /// empty for the offline provider).
  std::string provider;
  std::string model;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  /// US dollars.
  double cost_usd = 0;
  /// How `cost_usd` is known: `priced`, `unpriced` (no price for the
  /// model) or `offline` (no model ran), as Quarry's core names them.
  std::string cost_basis = "priced";
  std::string text;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, packet_fact& x) {
  auto what = wire::enum_field<packet_fact::kind::report_end>(x.what);
  return f(caf::meta::type_name("quarry.packet_fact"), what, x.role, x.provider, x.model,
           x.input_tokens, x.output_tokens, x.cost_usd, x.cost_basis, x.text,
           wire::bounded(x.role, 64, "a usage role past 64 bytes"),
           wire::bounded(x.provider, 256, "a provider name past 256 bytes"),
           wire::bounded(x.model, 256, "a model name past 256 bytes"),
           wire::bounded(x.cost_basis, 16, "a cost basis past 16 bytes"),
           wire::bounded(x.text, max_packet_bytes, "a packet past 4 MiB"));
}

/// A packet before an emitter stamps it: placement and `obj` as JSON text.
struct packet_msg {
  int32_t turn_index = 0;
  int32_t tab_index = 0;
  /// -1 for none (top level).
  int32_t sub_turn_index = -1;
  /// `obj`'s `type`, as its maker knows it: the store files the packet by it
  /// without reading `obj` again.
  std::string type;
  std::string obj;
  /// What the store keeps of it besides the line.
  packet_fact fact;
  /// `obj` was written by make_packet from a JSON value in this process, so
  /// the emitter need not check it. Not carried across nodes: a packet from
  /// another node is checked.
  bool dumped = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, packet_msg& x) {
  return f(caf::meta::type_name("quarry.packet"), x.turn_index, x.tab_index, x.sub_turn_index,
           x.type, x.obj, x.fact, wire::bounded(x.type, 64, "a packet type past 64 bytes"),
           wire::bounded(x.obj, max_packet_bytes, "a packet past 4 MiB"));
}

/// Where an agent sends its packets (a session's emitter, or the relay a
/// session keeps for a remote agent): `(packet_atom, packet_msg)`.
using packet_sink_actor = caf::typed_actor<caf::reacts_to<packet_atom, packet_msg>>;

/// A subscriber of a session's packets.
/// - `(packet_atom, line, seq)`: one encoded packet (a JSON line), in order.
/// - `(stop_atom, last_seq)`: the session's packets ended; `last_seq` was
///   the last.
using line_sink_actor = caf::typed_actor<caf::reacts_to<packet_atom, std::string, uint64_t>,
                                         caf::reacts_to<stop_atom, uint64_t>>;

// -- research agents --------------------------------------------------------

/// What an agent is asked to do and within which limits.
struct agent_spec {
  /// The orchestrator's tool call id (echoed in the result).
  std::string call_id;
  std::string task;
  /// What earlier agents found, appended to the agent's system prompt (never
  /// to the task, which becomes search queries); empty for none.
  std::string context;
  /// Placement of the agent's packets: turn and tab.
  int32_t turn_index = 0;
  int32_t tab_index = 0;
  /// Research cycles (LLM steps with tools; think steps do not count).
  int32_t max_cycles = 8;
  /// The model reasons natively (no think_tool then).
  bool reasoning_model = false;
  /// After this long the agent stops researching and writes its report.
  std::chrono::milliseconds force_report_after{std::chrono::minutes{12}};
  /// After this long the agent gives up, report or not.
  std::chrono::milliseconds hard_timeout{std::chrono::minutes{30}};
  /// Prompt tokens the model accepts.
  int64_t context_tokens = 128000;
  /// Output limits of a research step and of the report.
  int64_t step_max_tokens = 1000;
  int64_t report_max_tokens = 10000;
  /// Follow-up calls that continue a report cut by the output limit.
  int32_t report_continuations = 2;
  /// The date as the prompts state it.
  std::string current_datetime;
  /// The tools (by name) the agent is given: a node that lacks one refuses
  /// the agent instead of running it with fewer tools. Empty: every tool
  /// of the node that runs it.
  std::vector<std::string> tools;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agent_spec& x) {
  wire::millis_field force{x.force_report_after};
  wire::millis_field hard{x.hard_timeout};
  return f(caf::meta::type_name("quarry.agent_spec"), x.call_id, x.task, x.context, x.turn_index,
           x.tab_index, x.max_cycles, x.reasoning_model, force, hard, x.context_tokens,
           x.step_max_tokens, x.report_max_tokens, x.report_continuations, x.current_datetime,
           x.tools, wire::bounded(x.call_id, 1024, "a call id past 1 KiB"),
           wire::bounded(x.task, max_task_bytes, "a task past 64 KiB"),
           wire::bounded(x.context, max_context_bytes, "an agent context past 4 MiB"),
           wire::bounded(x.current_datetime, 256, "a date past 256 bytes"),
           wire::bounded_list(x.tools, max_tools, "more than 64 tools"));
}

/// What an agent produced.
struct agent_result {
  std::string call_id;
  int32_t tab_index = 0;
  /// Whether a report was written.
  bool ok = false;
  /// The intermediate report with agent-local `[n]` markers.
  std::string report;
  /// The documents the report cites, by agent-local number (first-cited
  /// order is the order of `cited`).
  std::vector<std::pair<int32_t, sdk::document>> cited;
  /// Why the agent failed (when `ok` is false).
  std::string failure;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agent_result& x) {
  return f(caf::meta::type_name("quarry.agent_result"), x.call_id, x.tab_index, x.ok, x.report,
           x.cited, x.failure, wire::bounded(x.report, max_report_bytes, "a report past 4 MiB"),
           wire::bounded_list(x.cited, max_cited, "more than 4096 cited documents"));
}

/// What an agent's parent receives: `(agent_done_atom, agent_result)`, once.
using agent_parent_actor = caf::typed_actor<caf::reacts_to<agent_done_atom, agent_result>>;

/// A research agent as its parent on another node sees it: `(report_now_atom)`
/// makes it write its report now; `(stop_atom)` ends it at once, without a
/// result (its model call is cancelled).
using remote_agent_actor
  = caf::typed_actor<caf::reacts_to<report_now_atom>, caf::reacts_to<stop_atom>>;

/// What a worker says of itself.
struct worker_status {
  /// Its name (the address it listens on, or as configured).
  std::string name;
  /// Quarry's version and @ref protocol_version.
  std::string version;
  int32_t protocol = 0;
  /// Agents it runs at most, and now.
  int32_t capacity = 0;
  int32_t running = 0;
  /// Its tools by name, and the model its agents use.
  std::vector<std::string> tools;
  std::string model;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_status& x) {
  return f(caf::meta::type_name("quarry.worker_status"), x.name, x.version, x.protocol, x.capacity,
           x.running, x.tools, x.model, wire::bounded_list(x.tools, 1024, "more than 1024 tools"));
}

/// An agent host's answer to a spawn: the agent, or why it was refused.
struct spawn_reply {
  /// Null when refused.
  remote_agent_actor agent;
  /// Why it was refused (empty when it was not).
  std::string refusal;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, spawn_reply& x) {
  return f(caf::meta::type_name("quarry.spawn_reply"), x.agent, x.refusal);
}

/// What a worker publishes (`quarry worker --listen HOST:PORT`).
/// - `(spawn_agent_atom, protocol, spec, parent, sink) -> spawn_reply`:
///   starts an agent with the worker's own model and tools; it sends its
///   packets to `sink` and its result to `parent`, exactly once, unless it
///   is stopped. Refused (with a reason) when the protocol differs, the
///   worker is full, lacks one of `spec.tools`, or the spec is out of
///   bounds.
/// - `(worker_status_atom) -> worker_status`.
using agent_host_actor
  = caf::typed_actor<caf::replies_to<spawn_agent_atom, int32_t, agent_spec, agent_parent_actor,
                                     packet_sink_actor>::with<spawn_reply>,
                     caf::replies_to<worker_status_atom>::with<worker_status>>;

// -- research sessions ------------------------------------------------------

/// How a session ended.
enum class session_status : uint8_t {
  /// A report was written.
  report,
  /// The question needs clarification; `questions` holds them.
  clarification,
  /// The session failed; `failure` says why.
  failed,
};

/// A cited source of the report.
struct report_source {
  int32_t number = 0;
  std::string document_id;
  std::string title;
  std::string url;
  /// Only the search snippet of the source is known: it was never opened.
  bool snippet_only = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, report_source& x) {
  return f(caf::meta::type_name("quarry.report_source"), x.number, x.document_id, x.title, x.url,
           x.snippet_only);
}

/// What a session produced.
struct session_result {
  session_status status = session_status::failed;
  /// The report in Markdown, citations as `[[n]](url)`.
  std::string report;
  /// The plan the research followed.
  std::string plan;
  /// The clarifying questions.
  std::string questions;
  /// Every cited source, by number.
  std::vector<report_source> sources;
  std::string failure;
  /// Remarks about the run (deadline reached, agents that failed, ...).
  std::vector<std::string> notices;
  /// The session was told to stop before it finished: with `status ==
  /// report`, the report holds the findings gathered until then.
  bool interrupted = false;
  /// The report is incomplete: the model's output limit cut it (after the
  /// configured continuations) and it carries a note saying so.
  bool truncated = false;
  /// The report's verified claims as a JSON array
  /// (core::verification::claim_records), ranges in `report`; empty when
  /// the report was not verified.
  std::string claims;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_result& x) {
  auto status = wire::enum_field<session_status::failed>(x.status);
  return f(caf::meta::type_name("quarry.session_result"), status, x.report, x.plan, x.questions,
           x.sources, x.failure, x.notices, x.interrupted, x.truncated, x.claims);
}

/// A research a program asks a session node for.
struct research_request {
  std::string question;
  /// Research agents at once, and the research deadline; 0: the node's
  /// configuration.
  int32_t max_agents = 0;
  int64_t deadline_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, research_request& x) {
  return f(caf::meta::type_name("quarry.research_request"), x.question, x.max_agents, x.deadline_ms,
           wire::bounded(x.question, max_question_bytes, "a question past 64 KiB"));
}

/// What a session node publishes (`quarry serve` with `cluster.listen`).
/// - `(research_atom, request, subscriber) -> session id`: starts a stored
///   research session (no clarification: it researches the question as
///   asked); `subscriber` receives every packet and then `(stop_atom,
///   last_seq)`. A refusal (bad question, too many sessions) is an error.
/// - `(result_atom, session id) -> session_result`: answered when the
///   session ends (at once if it has ended).
/// - `(cancel_research_atom, session id)`: stops it; its report holds what
///   was found until then.
using research_service_actor = caf::typed_actor<
  caf::replies_to<research_atom, research_request, line_sink_actor>::with<std::string>,
  caf::replies_to<result_atom, std::string>::with<session_result>,
  caf::reacts_to<cancel_research_atom, std::string>>;

} // namespace quarry::cluster
