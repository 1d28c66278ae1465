// Policy of the reflective strategy (the five-agent design: coordinator,
// background investigator, planner, researcher, reflector, synthesizer):
// its vocabulary, the limits of each research depth, the structured outputs
// the models give through JSON-schema tool calls, and the rules enforced in
// code whatever a model decides (step counts per depth, completed steps kept
// on ADJUST, no COMPLETE before the depth's minimum, at most
// `max_plan_iterations` plans). Pure functions; the session actor runs them.

#pragma once

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core::reflective {

// -- vocabulary ---------------------------------------------------------------

/// How hard the coordinator judges a question to be.
enum class complexity : uint8_t { simple, moderate, complex };

/// How a question relates to the conversation before it.
enum class follow_up : uint8_t { new_topic, clarification, complex_follow_up };

/// How much research a deep research does; `automatic` is resolved from the
/// coordinator's complexity.
enum class depth : uint8_t { automatic, light, medium, extended };

/// What a research is asked to be.
enum class query_mode : uint8_t { simple, web_search, deep_research };

/// What a plan step does.
enum class step_type : uint8_t { research, analysis };

/// Where a plan step stands.
enum class step_status : uint8_t { pending, in_progress, completed, skipped };

/// The reflector's decision after a step.
enum class decision : uint8_t { continue_plan, adjust, complete };

const char* to_string(complexity x) noexcept;
const char* to_string(follow_up x) noexcept;
/// `auto`, `light`, `medium` or `extended`.
const char* to_string(depth x) noexcept;
const char* to_string(query_mode x) noexcept;
const char* to_string(step_type x) noexcept;
const char* to_string(step_status x) noexcept;
/// `CONTINUE`, `ADJUST` or `COMPLETE`.
const char* to_string(decision x) noexcept;

/// Parsers of the names above (case-insensitive); nothing for anything else.
std::optional<complexity> parse_complexity(std::string_view x);
std::optional<follow_up> parse_follow_up(std::string_view x);
std::optional<depth> parse_depth(std::string_view x);
std::optional<query_mode> parse_query_mode(std::string_view x);
std::optional<decision> parse_decision(std::string_view x);

// -- depths -------------------------------------------------------------------

/// What a depth allows.
struct depth_profile {
  /// Steps a plan has at least (and completed steps before COMPLETE).
  int min_steps = 1;
  /// Steps a plan has at most, completed ones included.
  int max_steps = 3;
  /// Classic researcher: searches per step.
  int max_search_queries = 2;
  /// Classic researcher: pages read per step.
  int max_urls_to_crawl = 3;
  /// The researcher runs as a ReAct agent (medium, extended) rather than the
  /// classic search-then-read step (light).
  bool react = false;
};

/// Light 1-3 steps (classic researcher), medium 3-6, extended 5-10 (ReAct).
/// `max_search_queries` and `max_urls_to_crawl` set the classic researcher's
/// budget. `automatic` is treated as medium.
depth_profile profile_for(depth d, int max_search_queries = 2, int max_urls_to_crawl = 3);

/// `requested` unless it is `automatic`: then simple -> light, moderate ->
/// medium, complex -> extended.
depth resolve_depth(depth requested, complexity c);

// -- structured outputs --------------------------------------------------------

/// A structured output that could not be used: what to tell the model in the
/// one repair request.
struct invalid_output {
  std::string problem;
};

/// The repair request's user message: names the tool and the problem, and
/// asks for one corrected call.
std::string repair_message(std::string_view tool, std::string_view problem);

/// Reads the arguments of the one call to `tool` in a model's answer:
/// invalid when there is none, it names another tool, or its text is not a
/// JSON object (see parse_tool_arguments).
std::variant<nlohmann::json, invalid_output>
structured_arguments(const std::vector<sdk::tool_call>& calls, std::string_view tool);

/// The coordinator's classification of a question.
struct classification {
  reflective::complexity complexity = complexity::moderate;
  follow_up follow_up_type = follow_up::new_topic;
  bool is_ambiguous = false;
  std::vector<std::string> clarifying_questions;
  depth recommended_depth = depth::automatic;
  std::string reasoning;
};

/// `classify_question`: the coordinator's tool.
sdk::tool_definition classify_tool(int max_clarifying_questions);

/// Reads `classify_question` arguments. Questions beyond
/// `max_clarifying_questions` are dropped; an ambiguous question without any
/// clarifying question is not ambiguous.
std::variant<classification, invalid_output> read_classification(const nlohmann::json& args,
                                                                 int max_clarifying_questions);

/// The background investigator writes 2-3 focused search queries (seed
/// 001, "Background Investigator Agent").
inline constexpr int background_min_queries = 2;
inline constexpr int background_max_queries = 3;

/// `search_queries`: the background investigator's and classic researcher's
/// tool: `at_least` to `max` queries (the schema's `minItems`, `maxItems`).
sdk::tool_definition queries_tool(int max, int at_least = 1);

/// The number of queries a prompt asks for: "2 to 3", "at most 2", "3".
std::string query_count_text(int max, int at_least = 1);

/// Reads `search_queries` arguments: trimmed, empty and repeated queries
/// dropped (case-insensitively), the first `max` kept, each at most 400
/// bytes. Fewer than `at_least` (at least 1) left is not usable.
std::variant<std::vector<std::string>, invalid_output> read_queries(const nlohmann::json& args,
                                                                    int max, int at_least = 1);

/// One step of a plan.
struct plan_step {
  std::string id;
  std::string title;
  std::string description;
  step_type type = step_type::research;
  bool needs_search = true;
  step_status status = step_status::pending;
  /// The researcher's findings, with citation markers of the session's
  /// numbering; empty until the step is done.
  std::string observation;
};

/// A research plan.
struct plan {
  std::string id;
  std::string title;
  std::string thought;
  std::vector<plan_step> steps;
  bool has_enough_context = false;
  /// 1 for the first plan, +1 for each ADJUST.
  int iteration = 0;
};

/// What the planner wrote: the new steps only (completed steps are kept by
/// merge_plan, never rewritten by the model).
struct plan_draft {
  std::string title;
  std::string thought;
  std::vector<plan_step> steps;
  bool has_enough_context = false;
};

/// `write_plan`: the planner's tool. `room` is how many new steps fit
/// (`max_steps` minus the completed steps); `at_least` how many the plan
/// still needs to reach the depth's minimum.
sdk::tool_definition plan_tool(int at_least, int room);

/// Reads `write_plan` arguments. Invalid: no steps (unless the model says it
/// has enough context and `at_least` is 0), a step without a title, fewer
/// steps than `at_least`. Steps beyond `room` are dropped (merge_plan says
/// so). A step's `needs_search` defaults to true for research, false for
/// analysis.
std::variant<plan_draft, invalid_output> read_plan(const nlohmann::json& args, int at_least,
                                                   int room);

/// The plan that follows `previous` (nothing: the first plan) and `draft`.
struct plan_update {
  plan next;
  /// What the code changed in the model's plan (steps dropped past the
  /// depth's maximum, ...), for notices.
  std::vector<std::string> notices;
};

/// Builds the next plan: the completed steps of `previous`, unchanged and in
/// order, then the draft's steps (ids `s<iteration>.<n>`, status pending),
/// cut to the profile's `max_steps` in all. Steps of `previous` that were not
/// completed are dropped (the planner replaced them).
plan_update merge_plan(const plan* previous, plan_draft draft, const depth_profile& profile);

/// How many new steps a replan may add, and how many it must, given the
/// completed steps of `current`.
struct plan_room {
  int at_least = 0;
  int room = 0;
};
plan_room room_for(const plan* current, const depth_profile& profile);

/// Index of the first pending step, if any.
std::optional<size_t> next_step(const plan& p);

/// Number of completed steps.
int completed_steps(const plan& p);

/// Marks every pending step skipped (COMPLETE, or the end of the research).
void skip_pending(plan& p);

/// The plan as JSON: `{id, title, thought, iteration, has_enough_context,
/// steps: [{id, title, description, type, needs_search, status,
/// observation}]}` (the `plan_step` packet and checkpoints).
nlohmann::json to_json(const plan& p);

/// Reads what to_json wrote (a checkpoint); nothing if it is not a plan.
std::optional<plan> plan_from_json(const nlohmann::json& j);

/// The reflector's answer.
struct reflection {
  reflective::decision decision = decision::continue_plan;
  std::string reasoning;
  std::vector<std::string> suggested_changes;
};

/// `reflect`: the reflector's tool.
sdk::tool_definition reflect_tool();

/// Reads `reflect` arguments (decision required).
std::variant<reflection, invalid_output> read_reflection(const nlohmann::json& args);

/// The decision taken after the code's rules.
struct reflection_outcome {
  decision taken = decision::continue_plan;
  /// The model's decision was refused.
  bool refused = false;
  /// Why, when refused (for the packets).
  std::string why;
};

/// Applies the rules to the reflector's decision on plan `p`:
/// - COMPLETE before the depth's `min_steps` completed steps is refused and
///   becomes CONTINUE (or ADJUST when no step is pending and a plan
///   iteration is left);
/// - ADJUST at the `max_plan_iterations`th plan, or with no room for a new
///   step, is refused and becomes CONTINUE (COMPLETE when no step is
///   pending);
/// - CONTINUE with no pending step becomes ADJUST when the minimum is not
///   reached and an iteration is left, COMPLETE otherwise (not a refusal:
///   the plan simply ran out).
reflection_outcome enforce(const reflection& r, const plan& p, const depth_profile& profile,
                           int max_plan_iterations);

// -- packets -----------------------------------------------------------------------

/// `reflective_plan`: the whole plan with each step's status (observations
/// cut to 600 bytes; the step's end packet has it whole). Sent whenever a
/// status changes, so that a view can show it as a live checklist.
nlohmann::json plan_packet(const plan& p);

/// `question_classified`: the coordinator's classification, the depth it
/// resolves to and the query mode the research runs in.
nlohmann::json classification_packet(const classification& c, depth resolved, query_mode mode);

/// `plan_step_start`: a step's research begins.
nlohmann::json step_start_packet(const plan_step& s);

/// `plan_step_end`: a step is done (its status, its observation and how many
/// new sources it found) or failed (`failure`).
nlohmann::json step_end_packet(const plan_step& s, size_t new_sources,
                               const std::string& failure = {});

/// `reflection`: the reflector's decision after `step_id`, the decision
/// taken, and whether (and why) the code refused the model's.
nlohmann::json reflection_packet(const reflection& r, const reflection_outcome& o,
                                 const std::string& step_id);

} // namespace quarry::core::reflective
