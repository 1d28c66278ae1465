// The session frame: what every research strategy's session shares. One
// session actor runs it; a strategy (orchestrator_strategy.cpp,
// reflective_strategy.cpp) makes only its own decisions through the hooks
// of `strategy` and calls the frame for the rest:
// - the shared state (spec, models, tools, emitter, numbering, documents,
//   findings, notices, the deadline plan);
// - one model step: call_llm (reasoning packets, usage, the call's text) and
//   call_structured (one tool, one repair of an unusable answer);
// - research agents placed locally or on a worker (start_agent);
// - the final report: begin_final, write_final (continuations of a report
//   cut by the output limit), report_piece, fallback_report,
//   complete_report, verification and the report tail;
// - the deadline, stop and final-timeout handlers, the finish.
// Internal to quarry_actors.

#pragma once

#include "actor_time.hpp"
#include "reasoning_packets.hpp"

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/session.hpp"

#include "quarry/core/checkpoint.hpp"
#include "quarry/core/citations.hpp"
#include "quarry/core/deadline.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/think_stream.hpp"

#include <caf/stateful_actor.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace caf {
class down_msg;
} // namespace caf

namespace quarry::actors::detail {

/// A timer of the strategy's own (the reflective web_search mode's).
using strategy_timer_atom = caf::atom_constant<caf::atom("strtimer")>;

/// The session actor's whole interface: the session's, and the strategy's
/// timer.
using frame_actor = session_full_actor::extend<caf::reacts_to<strategy_timer_atom>>;

/// Where the session is: researching (the strategy's own phases), writing
/// the final report, verifying it, or done.
enum class frame_stage { research, final, verify, done };

struct frame_state;

using frame_ptr = frame_actor::stateful_pointer<frame_state>;

/// The decisions of one research strategy. Each hook runs in the session
/// actor; the frame has done its own part (e.g. the deadline notice) first.
class strategy {
public:
  explicit strategy(frame_ptr self) noexcept : self(self) {
    // nop
  }

  virtual ~strategy();

  /// The session is made: a strategy that goes on from a checkpoint takes
  /// its state (and the frame's) from `spec.resume_from` and returns what
  /// the citation collector starts with.
  virtual collector_start resume();

  /// The session starts: its first packets and its first step.
  virtual void start() = 0;

  /// The turn of packets about the session as a whole now (notices).
  virtual int turn_now() const = 0;

  /// A text delta of the strategy's own call (not the final report's).
  virtual void on_text(const std::string& text);

  /// A tool-call delta of the strategy's own call.
  virtual void on_tool_delta(const sdk::tool_call_delta& delta);

  /// A research agent sent its result.
  virtual void on_agent_done(cluster::agent_result& result);

  /// An actor the strategy monitors went down; returns whether it was one.
  virtual bool on_down(const caf::down_msg& down);

  /// The deadline is near: agents are told to report.
  virtual void on_deadline_soon();

  /// The deadline came (or a stop) while researching: end the research.
  virtual void on_deadline() = 0;

  /// The strategy's timer (strategy_timer_atom).
  virtual void on_timer();

  /// The plan as the result gives it.
  virtual std::string plan_text() const = 0;

  /// The strategy's part of a checkpoint (plan, history, turns).
  virtual void fill_checkpoint(core::research_checkpoint& c) const;

  /// The session ends: stop what the strategy started.
  virtual void on_finish();

protected:
  frame_ptr self;
};

/// The shared state of a session.
struct frame_state {
  session_spec spec;
  session_models models;
  tool_set tools;
  emitter_actor emitter;
  std::shared_ptr<const core::prompt_library> prompts;
  session_requester_actor requester;
  // The deadline plan (core), on the actor system's clock.
  actor_time time;
  core::research_deadline timing;
  frame_stage stage = frame_stage::research;
  bool stop_requested = false;
  // Why it was told to stop: `interrupted` (the process stops) or what the
  // requester said (`user_cancelled`).
  std::string stop_reason = "interrupted";
  bool deadline_passed = false;
  // Agents were told to report: the deadline is near.
  bool deadline_soon = false;

  // The collector owns the numbering; these are its state after the last
  // collapse, kept for the final report.
  citation_collector_actor collector;
  core::citation_mapping global;
  std::map<std::string, sdk::document> docs_by_id;
  std::vector<std::pair<std::string, std::string>> findings; // task, report

  // The LLM call in progress.
  uint64_t next_call = 1;
  uint64_t current_call = 0;
  llm_provider_actor current_llm;
  core::placement at;
  reasoning_state reasoning;
  core::think_stream think;
  std::string text;
  bool text_started = false;

  // The final report: its citation processor and turn, its request, the
  // model's raw text so far, the continuations made, whether it stays cut,
  // and whether the running call streamed text.
  std::unique_ptr<core::citation_processor> processor;
  int final_turn = 0;
  sdk::chat_request final_request;
  std::string final_raw;
  int continuations = 0;
  bool report_cut = false;
  bool final_call_streamed = false;
  // The report answers without research (the reflective simple mode): no
  // documents are needed, none must hold the question's words.
  bool answered_directly = false;
  // The report's text starts a turn of its own after reasoning (Onyx's
  // placement; the orchestrator strategy).
  bool reasoning_turn = false;
  // A call's reasoning block closes when its answer arrives, before the
  // usage packet (the reflective strategy); else the strategy closes it.
  bool reasoning_closes_on_reply = false;

  // Verification of the final report: the verifier, and the result it will
  // complete.
  verifier_actor verifier;
  std::optional<session_result> pending;

  std::vector<std::string> notices;
  // Research time used before this process (a resumed session's checkpoint).
  int64_t elapsed_before_ms = 0;

  std::unique_ptr<strategy> strat;
  static inline const char* name = "quarry.session";
};

/// Makes the strategy of `self->state.spec.strategy`.
std::unique_ptr<strategy> make_orchestrator_strategy(frame_ptr self);
std::unique_ptr<strategy> make_reflective_strategy(frame_ptr self);

// -- packets and prompts -----------------------------------------------------

inline core::placement turn(int t) {
  return {t, 0, std::nullopt};
}

/// Sends a packet to the emitter.
void emit(frame_ptr self, const core::placement& at, const nlohmann::json& obj);

/// Says `text` to the user at turn `t`: a notice packet, and a line of the
/// result's notices.
void notice(frame_ptr self, int t, const std::string& text);

/// A prompt of the library.
std::string render(frame_ptr self, std::string_view name, const core::prompt_vars& vars);

/// "cancelled" when the user cancelled, else "interrupted".
std::string stopped(const frame_state& st);

/// A request of a system and a user message.
sdk::chat_request text_request(std::string system, std::string user, std::string role_tag,
                               int64_t max_tokens);

// -- model calls ---------------------------------------------------------------

/// How call_llm handles the call's text.
struct call_options {
  /// The call continues the text of the one before (a report cut by the
  /// output limit): the text so far stays.
  bool continuing = false;
};

using on_reply = std::function<void(sdk::chat_result&)>;
using on_failure = std::function<void(const sdk::error&)>;

/// Starts an LLM call at `at`; `done` gets the result (after its usage
/// packet), failures go to `failed`. A reply to a call that is no longer
/// the current one, or after the session ended, is dropped.
void call_llm(frame_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
              core::placement at, on_reply done, on_failure failed, call_options opts = {});

/// Cancels the call in flight, if any.
void cancel_call(frame_ptr self);

/// A structured call: one tool, required. `accept` reads the arguments and
/// returns the problem with them (empty: accepted). An unusable answer gets
/// one repair request; a second one, or a failed call, goes to `fail`.
void call_structured(frame_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
                     core::placement at, std::string tool,
                     std::function<std::string(const nlohmann::json&)> accept,
                     std::function<void()> ok, std::function<void(const std::string&)> fail,
                     bool repaired = false);

/// Streams a piece of the running call's reasoning.
void reasoning_piece(frame_ptr self, const std::string& text);

/// Closes the running call's reasoning block.
void close_reasoning(frame_ptr self);

// -- research agents -------------------------------------------------------------

/// Starts a research agent for `task` at (`turn`, `tab`) with the session's
/// agent limits (never more time than the research has left), on a worker
/// when the session has workers, and monitors it.
research_agent_actor start_agent(frame_ptr self, std::string call_id, std::string task,
                                 std::string context, int turn, int tab);

// -- checkpoints -------------------------------------------------------------------

/// Hands the session's state (the strategy's part and the frame's) to the
/// emitter, which stamps it with the last seq and passes it to the store
/// (research.checkpoints).
void take_checkpoint(frame_ptr self, core::checkpoint_phase phase);

// -- the final report -----------------------------------------------------------------

/// The final report starts at turn `t`: its citation processor over the
/// numbering so far. With `timer`, its own time limit starts too.
void begin_final(frame_ptr self, int t, bool timer);

/// Writes the final report with `req`: its text streams through
/// report_piece; a report cut by the output limit is continued up to
/// research.report_continuations times; an empty one or a failed call gets
/// the findings (fallback_report). With a stop requested, no call is made.
void write_final(frame_ptr self, sdk::chat_request req);

/// A piece of the report's raw text (before citation processing); the
/// first one starts the message.
void report_piece(frame_ptr self, const std::string& raw);

/// Writes the report from the findings when the model cannot.
void fallback_report(frame_ptr self, const std::string& why);

/// The report's text is complete: checks it read something, adds the
/// notices, verifies it (research.verify) or delivers it.
void complete_report(frame_ptr self);

// -- the end --------------------------------------------------------------------------

/// Ends the session with `result` (once): the requester gets it.
void finish(frame_ptr self, session_result result);

/// Ends the session as failed: an error packet and a stop packet at turn
/// `t`.
void fail(frame_ptr self, const std::string& why, int t);

/// Ends a session stopped before its research started: a stop packet at
/// turn `t`, status failed.
void stopped_before_start(frame_ptr self, int t);

} // namespace quarry::actors::detail
