// The requests the reflective strategy sends to its models: structured calls
// (one tool offered and required) with their one repair request, and the
// texts each role reads (question, conversation, background, plan,
// observations). Pure functions; the reflective session only sends what
// these build.

#pragma once

#include "quarry/core/reflective.hpp"
#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::core::reflective {

/// Output tokens of a structured call.
inline constexpr int64_t structured_max_tokens = 2000;

/// An observation as the reflector sees it (the synthesizer gets it whole,
/// within its budget).
inline constexpr size_t reflector_observation_bytes = 4000;

/// A structured call: the system prompt, the user text, `tool` offered and
/// required, `role_tag` and `research` (what the user text states, typed;
/// the *_context functions below) for the provider.
sdk::chat_request structured_request(std::string system, std::string user,
                                     sdk::tool_definition tool, std::string role_tag,
                                     sdk::research_context research);

/// The one repair request after an unusable answer: `first`, then the
/// model's answer (its text and calls), every call answered as not usable,
/// then repair_message(`tool`, `problem`).
sdk::chat_request repair_request(sdk::chat_request first, const sdk::chat_result& answer,
                                 std::string_view tool, std::string_view problem);

/// The coordinator's text: the question (with a conversation, the one
/// asked: lexical::asked_question), after the conversation's window
/// (core::conversation_window: its last four user messages and the answers
/// between, so five with the question, as the orchestrator strategy's
/// clarification and plan see them), each clipped.
std::string coordinator_input(const std::string& question,
                              const std::vector<sdk::chat_message>& conversation);

/// The planner's text: the question, the background results, and on a
/// replan the completed steps with their observations, the reflector's
/// reasoning and suggested changes, and how many new steps fit.
std::string planner_input(const std::string& question, const std::string& background,
                          const plan* current, const reflection* feedback, plan_room room, depth d);

/// The research context of the coordinator's call: the question and
/// whether it follows a conversation (a follow-up: a window that holds a
/// message, or a question with text before lexical::follow_up_marker).
sdk::research_context coordinator_context(const std::string& question,
                                          const std::vector<sdk::chat_message>& conversation);

/// The research context of the planner's call: the question, the plan
/// written again (its steps; none for a first plan) with its completed
/// steps and their observations (clipped as planner_input clips them), and
/// how many steps to write (`room`).
sdk::research_context planner_context(const std::string& question, const plan* current,
                                      plan_room room);

/// `light` -> "1 to 3", for the planner's prompt.
std::string step_range(const depth_profile& p);

/// Step `index` of `p` in words: its title, and its description when that
/// says more (`title: description`); empty past the last step.
std::string step_text(const plan& p, size_t index);

/// What a researcher is asked to do for step `index` of `p` (also the
/// ReAct agent's task): step_text, and the question it serves.
std::string step_task(const std::string& question, const plan& p, size_t index);

/// The reflector's text: the question, the plan with each step's status,
/// the observations (clipped), the step just completed, and the sources:
/// `sources_total` in all, `new_sources` found by that step.
std::string reflector_input(const std::string& question, const plan& p, size_t just_done,
                            size_t sources_total, size_t new_sources);

/// The research context of the reflector's call: the question and the new
/// sources of the step just completed.
sdk::research_context reflector_context(const std::string& question, size_t new_sources);

/// The synthesizer's text: the question and every completed step with its
/// observation, at most `budget_bytes` of observations in all (each cut to
/// its share when they do not fit).
std::string synthesizer_input(const std::string& question, const plan& p,
                              size_t budget_bytes = 400000);

/// The research context of the synthesizer's call: the question and the
/// completed steps with their observations, cut as synthesizer_input cuts
/// them.
sdk::research_context synthesizer_context(const std::string& question, const plan& p,
                                          size_t budget_bytes = 400000);

} // namespace quarry::core::reflective
