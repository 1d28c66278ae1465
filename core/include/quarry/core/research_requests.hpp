// The requests the research strategy sends to its models (clarification,
// plan, orchestrator cycles, research agents' steps and reports, the final
// report) and the texts it answers tool calls with. Pure functions: the
// session and the research agent actors only send what these build.

#pragma once

#include "quarry/core/prompts.hpp"
#include "quarry/sdk/tool.hpp"
#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace quarry::core {

/// A message of `author` with `text`.
sdk::chat_message user_message(std::string text);
sdk::chat_message system_message(std::string text);

/// A request, or why the history does not fit the model (build_history's
/// message).
using request_or_error = std::variant<sdk::chat_request, std::string>;

/// The research context of a request about `question` (a session's
/// question as the models get it): the question asked (of a follow-up, the
/// text after lexical::follow_up_marker, without the conversation before
/// it) and whether it follows earlier research. The builders below add what
/// their role needs.
sdk::research_context research_context_of(const std::string& question);

/// User messages of the session's thread that the clarification, the plan,
/// the orchestrator and the reflective coordinator see, the question
/// included (Onyx's MAX_USER_MESSAGES_FOR_CONTEXT, dr_loop.py:79; the
/// five-agent design's coordinator reads the conversation history too).
inline constexpr size_t max_user_messages_for_context = 5;

/// The part of `conversation` (the earlier user and assistant messages of a
/// session's thread, oldest first) that a call sees before the question:
/// from its `max_user_messages_for_context - 1`-th last user message on,
/// with the answers between; messages of other roles and empty ones are
/// left out.
std::vector<sdk::chat_message>
conversation_window(const std::vector<sdk::chat_message>& conversation);

/// The thread as a call's messages: conversation_window(`conversation`),
/// then the question as a user message. With a conversation the question is
/// the one asked (lexical::asked_question: the conversation stands as
/// messages, not again as the text before the follow-up marker); without
/// one, `question` as it is.
std::vector<sdk::chat_message> thread_messages(const std::string& question,
                                               const std::vector<sdk::chat_message>& conversation);

/// research_context_of(`question`), a follow-up also when the window of
/// `conversation` holds a message.
sdk::research_context research_context_of(const std::string& question,
                                          const std::vector<sdk::chat_message>& conversation);

/// The steps of a plan as the plan step wrote it: the numbered lines (`1.
/// x`, `2) x`; up to three digits, white space collapsed), in order; empty
/// when it has none.
std::vector<std::string> plan_steps(std::string_view plan);

/// Output tokens of the clarification and of the plan.
inline constexpr int64_t clarification_max_tokens = 2000;
inline constexpr int64_t plan_max_tokens = 2000;

/// Tokens kept free in an orchestrator call beyond its output (for the tool
/// definitions).
inline constexpr int64_t orchestrator_reserve_tokens = 1000;

/// Clarification: the system prompt, the thread (thread_messages: the last
/// user messages of `conversation` with their answers, then the question),
/// generate_plan offered ("no questions"), tool choice auto. Research
/// context: the question, a follow-up with a conversation.
sdk::chat_request clarification_request(std::string system, const std::string& question,
                                        const std::vector<sdk::chat_message>& conversation = {});

/// The research plan: system prompt, the thread as clarification_request has
/// it, and the reminder as the last user message (Onyx passes six user
/// messages: the five of the thread and the reminder), no tools. Research
/// context: the question, a follow-up with a conversation.
sdk::chat_request plan_request(std::string system, const std::string& question,
                               std::string reminder,
                               const std::vector<sdk::chat_message>& conversation = {});

/// What an orchestrator cycle is built from.
struct orchestrator_input {
  std::string system;
  std::string question;
  /// The earlier messages of the session's thread (thread_messages).
  std::vector<sdk::chat_message> conversation;
  /// The research plan as the plan step wrote it (the system prompt states
  /// it too).
  std::string plan;
  /// Research agents that may run at once (the system prompt states it).
  int max_parallel_agents = 3;
  /// The orchestrator's tool rounds so far.
  std::vector<sdk::chat_message> history;
  /// A reminder at the end (as make_reminder wraps it); none when empty.
  std::string reminder;
  /// The models reason natively: no think_tool.
  bool reasoning_model = false;
  int64_t context_tokens = 128000;
  int64_t max_tokens = 4096;
};

/// An orchestrator cycle: the thread (thread_messages; older messages of it
/// dropped first when the history does not fit), the orchestrator's rounds,
/// research_agent, generate_report and (without native reasoning)
/// think_tool, tool choice required, within the context less the output and
/// @ref orchestrator_reserve_tokens. Research context: the question, the
/// plan's steps and the parallel limit.
request_or_error orchestrator_request(const orchestrator_input& in);

/// The reminder of orchestrator cycle `cycle`: after the model answered the
/// first cycle without a tool call (`retried_empty`), an order to call one;
/// in the second cycle, `first_cycle_reminder` (the prompt library's
/// template of that name; empty for none); else nothing.
std::string orchestrator_reminder(int cycle, bool retried_empty,
                                  const std::string& first_cycle_reminder);

/// The order given when the first orchestrator turn called no tool.
/// Sent once to a research agent whose step answered with text and no tool
/// call (a model whose provider cannot force tool use, such as Claude with
/// extended thinking, where only `tool_choice: auto` is allowed).
inline constexpr const char* agent_tool_call_reminder
  = "You answered without calling a tool. Every step of your research must call "
    "one of your tools: search, read a page, or generate_report when you have "
    "enough. Call a tool now; do not answer with text.";

/// Sent once when a model's answer was cut by the output token limit inside
/// its tool call (its arguments are broken JSON); the retry has twice the
/// room.
inline constexpr const char* cut_tool_call_reminder
  = "Your previous answer was cut off by the output token limit in the middle of a "
    "tool call, so that call could not be run. Call the tool again now, with shorter "
    "arguments.";

inline constexpr const char* orchestrator_retry_reminder
  = "You must call a tool now: research_agent with a task for the first part "
    "of the research plan (or generate_report if nothing needs researching). "
    "Do not answer with text.";

/// The final report: system prompt, the question and the orchestrator's
/// rounds, the reminder (wrapped by make_reminder), no tools, within the
/// context less its output. Research context: the question and the steps of
/// `plan` (the plan step's text; the reminder states it too).
request_or_error
final_report_request(std::string system, const std::string& question, const std::string& plan,
                     const std::vector<sdk::chat_message>& history, const std::string& reminder,
                     int64_t context_tokens, int64_t max_tokens);

/// What a research agent's step is built from.
struct research_step_input {
  std::string system;
  /// The agent's task (the history's first message states it too).
  std::string task;
  /// The agent's task and its tool rounds so far.
  std::vector<sdk::chat_message> history;
  /// The definitions of the agent's tools (search, reading).
  std::vector<sdk::tool_definition> tools;
  /// A user message at the end (the open_url reminder), if any.
  std::optional<std::string> reminder;
  bool reasoning_model = false;
  int64_t context_tokens = 128000;
  int64_t max_tokens = 1000;
};

/// A research step: the agent's tools, generate_report and (without native
/// reasoning) think_tool, tool choice required, within the context less the
/// tool definitions (about four characters per token of their OpenAI JSON)
/// and the output. Research context: the task.
request_or_error research_step_request(research_step_input in);

/// The size in bytes of a tool definition's OpenAI JSON as
/// `sdk::dump_json(tool.to_openai())` writes it (the research step's token
/// estimate of its tools: about four bytes per token), counted without
/// building that tree.
size_t openai_tool_text_size(const sdk::tool_definition& tool);

/// An agent's intermediate report on `task`: system prompt, the agent's
/// history and the reminder as a user message, no tools, within the context
/// less its output. Research context: the task.
request_or_error agent_report_request(std::string system, const std::string& task,
                                      const std::vector<sdk::chat_message>& history,
                                      std::string reminder, int64_t context_tokens,
                                      int64_t max_tokens);

/// Asks the model to go on with a text the output limit cut: `req` (the
/// request that began it, its research context too) with the text so far
/// (`written`, as the model wrote it) as an assistant message and @ref
/// continuation_prompt as a user message.
sdk::chat_request continuation_request(sdk::chat_request req, const std::string& written);

/// The user message of a continuation.
inline constexpr const char* continuation_prompt
  = "Your answer above was cut off by the output token limit. Continue it exactly "
    "where it stopped, even in the middle of a sentence or a word: do not repeat "
    "anything, do not add a preamble, keep the same format and citations.";

/// A report still cut after its continuations: the notice (for the terminal,
/// the packets and the stored notices), naming the limit `max_tokens` and
/// the `continuations` made.
std::string report_cut_notice(int64_t max_tokens, int continuations);

/// The note that ends a cut report, visible to its readers; `key` is the
/// configuration key of the limit (`research.max_tokens.final_report`).
/// It starts with @ref report_cut_marker.
std::string report_cut_note(int64_t max_tokens, const std::string& key);

/// The words every cut report's note starts with.
inline constexpr const char* report_cut_marker
  = "> **Note:** this report is incomplete. The model's output limit (";

/// Whether a stored report carries the note of a cut report (the API's
/// `truncated`).
bool is_cut_report(const std::string& report);

// -- system prompts ----------------------------------------------------------

/// The template `name` of `lib` rendered with `vars`; empty when it cannot
/// be (the templates are checked when they are loaded).
std::string render_prompt(const prompt_library& lib, std::string_view name,
                          const prompt_vars& vars);

/// The template `name` of `lib` as it is when `on` (optional guidance
/// paragraphs, e.g. for internal search); else, or without it, empty.
std::string guidance_text(const prompt_library& lib, std::string_view name, bool on);

/// The clarification step's system prompt; the internal-search guidance
/// only with internal search.
std::string clarification_system(const prompt_library& lib, const std::string& current_datetime,
                                 bool internal_search);

/// What an orchestrator's system prompt states.
struct orchestrator_prompt {
  std::string current_datetime;
  int cycle = 0;
  int max_cycles = 8;
  int max_parallel_agents = 3;
  std::string plan;
  bool internal_search = false;
  /// Selects the template for models that reason natively.
  bool reasoning_model = false;
};

/// The orchestrator's system prompt of one cycle.
std::string orchestrator_system(const prompt_library& lib, const orchestrator_prompt& p);

/// What a research agent's system prompt states.
struct agent_prompt {
  /// The names of the agent's tools, in order.
  std::vector<std::string> tools;
  std::string current_datetime;
  /// Research cycles used so far.
  int cycle = 0;
  int max_cycles = 8;
  /// Which guidance paragraphs apply (the agent has a tool of that kind).
  bool internal_search = false;
  bool web_search = false;
  bool open_url = false;
  /// The names the model knows those tools by, for the guidance and the
  /// reminder (a plugin's own search or page reader keeps its own name).
  std::string web_search_tool = "web_search";
  std::string internal_search_tool = "internal_search";
  std::string open_url_tool = "open_url";
  /// Selects the templates for models that reason natively.
  bool reasoning_model = false;
  /// What earlier agents found: appended to the instructions (never to the
  /// task, which becomes search queries); empty for none.
  std::string context;
};

/// A research agent's system prompt for one step; empty when the template
/// cannot be rendered. The guidance paragraphs name the tools as `p` does.
std::string research_agent_system(const prompt_library& lib, const agent_prompt& p);

/// The reminder after a web search that found something: open the best
/// pages with the page reader (named as `p` names it); empty without the
/// template.
std::string open_url_reminder(const prompt_library& lib, const agent_prompt& p);

// -- answers to tool calls --------------------------------------------------

/// The tool calls of a research agent's step, by what they ask for.
struct agent_step_calls {
  /// generate_report was called: the agent writes its report now (the
  /// step's other calls are not run).
  bool report = false;
  /// think_tool calls, in order: their text was streamed as reasoning.
  std::vector<sdk::tool_call> thinks;
  /// Every other call, in order: the agent's tools (or unknown names).
  std::vector<sdk::tool_call> work;
};

/// Sorts the calls of an agent's step.
agent_step_calls split_agent_calls(std::vector<sdk::tool_call> calls);

/// The task of a research_agent call: the `task` argument (arguments as the
/// model wrote them, repaired as tool arguments are); empty when missing,
/// not a string or blank.
std::string research_task(const sdk::tool_call& call);

/// The answer to a research_agent call without a task.
inline constexpr const char* missing_task_text
  = "Not run: research_agent needs a 'task' argument with one or two "
    "sentences describing the research.";

/// The answer to an orchestrator's call that is not research_agent or
/// generate_report: think_tool is acknowledged; another name is unknown
/// (`alone`: no research_agent call in the same turn, so the answer lists
/// the tools).
std::string orchestrator_tool_answer(const sdk::tool_call& call, bool alone);

/// The answer to a research_agent call whose agent failed for `why`.
std::string agent_failed_text(const std::string& why);

/// The answer to an agent's call of a tool it does not have.
std::string unknown_tool_text(const std::string& name, const std::vector<std::string>& available);

/// The result of a tool run that did not finish within `limit`
/// (errc::timeout; the text tells the model to carry on without it).
sdk::tool_result tool_timeout_result(const std::string& tool, std::chrono::milliseconds limit);

/// The answer to a tool call that could not be made at all (`why`: the
/// reason the tool's actor gave).
std::string tool_call_failed_text(const std::string& tool, const std::string& why);

/// The report assembled from `findings` (pairs of task and report) when the
/// model cannot write one: a visible note naming `why` (it is not a written
/// report), then a section per finding; or a sentence saying nothing was
/// found and `why`.
std::string findings_report(const std::vector<std::pair<std::string, std::string>>& findings,
                            const std::string& why);

/// The words that start the note of an intermediate report cut by the
/// research agent's time limit.
inline constexpr const char* time_cut_marker = "> **Note:** the research agent's time ran out (";

/// What a research agent keeps when its hard time limit (`limit`) comes
/// before its report is done: the report as far as it was `written` (whole,
/// so that it is a prefix of the result), else
/// the `documents` it had read by their agent-local numbers, each a line
/// with its title, a short excerpt (the snippet, else the start of the text;
/// brackets and line breaks taken out) and its citation marker; then a
/// visible note (starting with @ref time_cut_marker) that says the report
/// was cut by time. Empty when nothing was written and nothing read.
std::string time_cut_report(const std::string& written,
                            const std::map<int, sdk::document>& documents,
                            std::chrono::milliseconds limit);

/// The documents an intermediate `report` cites, in first-cited order, by
/// agent-local number: the citation markers of the keep-markers processor
/// (code spans skipped) that name a number of `documents`.
std::vector<std::pair<int, sdk::document>>
cited_documents(const std::string& report, const std::map<int, sdk::document>& documents);

} // namespace quarry::core
