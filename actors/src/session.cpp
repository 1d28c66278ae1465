// The research session actor (Onyx's dr_loop.py, spec sections 4.1-4.7).
// Fixes over Onyx: the parallel limit is enforced in code, a first
// orchestrator turn without tool calls is retried once, every tool call gets
// a result, think_tool never drops other calls, the internal-search guidance
// appears only with internal search, and a global deadline bounds the run
// while the user still gets a report.

#include "actor_time.hpp"
#include "quarry/actors/session.hpp"

#include "quarry/actors/citation_collector.hpp"

#include "quarry/core/agent_dispatch.hpp"
#include "quarry/core/citations.hpp"
#include "quarry/core/clock.hpp"
#include "quarry/core/deadline.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/history.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/think_stream.hpp"

#include "final_report.hpp"
#include "reasoning_packets.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <map>

namespace quarry::actors {

namespace {


enum class phase { clarify, plan, orchestrate, agents, final, verify, done };

struct running_agent {
  std::string call_id;
  std::string task;
  int tab = 0;
  research_agent_actor handle;
  std::optional<agent_result> result;
};

struct session_state {
  session_spec spec;
  session_models models;
  tool_set tools;
  emitter_actor emitter;
  std::shared_ptr<const core::prompt_library> prompts;
  session_requester_actor requester;
  // The deadline plan (core), on the actor system's clock (actor_time.hpp).
  detail::actor_time time;
  core::research_deadline timing;
  phase now = phase::clarify;
  bool stop_requested = false;
  // Why it was told to stop: `interrupted` (the process stops) or what the
  // requester said (`user_cancelled`).
  std::string stop_reason = "interrupted";
  bool deadline_passed = false;
  // Agents were told to report: the deadline is near.
  bool deadline_soon = false;

  std::string plan;
  int plan_turn = 0;
  std::vector<sdk::chat_message> orchestration;
  int cycle = 0;
  int max_cycles = 8;
  int reasoning_cycles = 0;
  int start_turn = 1;
  bool retried_empty = false;

  // The collector owns the numbering; these are its state after the last
  // round, kept for the final report.
  citation_collector_actor collector;
  core::citation_mapping global;
  std::map<std::string, sdk::document> docs_by_id;
  std::vector<std::pair<std::string, std::string>> findings; // task, report
  bool collapsing = false;

  // The research_agent calls of the round, and which of them wait for one of
  // the `max_parallel_agents` slots, run or are finished (same numbering).
  std::vector<running_agent> agents;
  core::agent_dispatch dispatch;
  // What earlier rounds found, given to every agent of this round.
  std::string round_digest;
  int agents_turn = 0;
  // The orchestrator call's tool calls being answered by this round.
  std::vector<sdk::tool_call> round_calls;
  std::map<std::string, std::string> round_results;
  // The reasoning of the orchestrator turn that made `round_calls`.
  core::turn_reasoning round_reasoning;

  // The final report's request, the model's raw text of it so far (before
  // citation processing), the continuations made, and whether it stays cut.
  sdk::chat_request final_request;
  std::string final_raw;
  int continuations = 0;
  bool report_cut = false;
  // Text of the running final-report call arrived as deltas.
  bool final_call_streamed = false;
  // An orchestrator answer was cut inside its tool call: the next call says
  // so and has twice the room (once per session).
  bool cut_call_retry = false;
  bool retried_cut_call = false;

  // The LLM call in progress.
  uint64_t next_call = 1;
  uint64_t current_call = 0;
  llm_provider_actor current_llm;
  core::placement at;
  detail::reasoning_state reasoning;
  core::think_stream think;
  std::string text;
  bool text_started = false;
  // What of the plan is shown while it streams (research.max_plan_steps).
  core::plan_stream_cap plan_cap{0};
  std::unique_ptr<core::citation_processor> processor;
  int final_turn = 0;

  // Verification of the final report (research.verify): the verifier, and
  // the result it will complete.
  verifier_actor verifier;
  std::optional<session_result> pending;

  std::vector<std::string> notices;
  // Research time used before this process (a resumed session's checkpoint).
  int64_t elapsed_before_ms = 0;
  static inline const char* name = "quarry.session";
};

using session_ptr = session_full_actor::stateful_pointer<session_state>;

void emit(session_ptr self, const core::placement& at, const nlohmann::json& obj) {
  self->send(self->state.emitter, packet_atom::value, make_packet(at, obj));
}

core::placement turn(int t) {
  return {t, 0, std::nullopt};
}

bool has_tool(session_ptr self, sdk::tool_kind kind) {
  return self->state.tools.has(kind);
}

std::string render(session_ptr self, std::string_view name,
                   const core::prompt_vars& vars) {
  return core::render_prompt(*self->state.prompts, name, vars);
}

void finish(session_ptr self, session_result result) {
  auto& st = self->state;
  if (st.now == phase::done)
    return;
  st.now = phase::done;
  result.plan = st.plan;
  result.notices = st.notices;
  result.interrupted = st.stop_requested;
  for (auto& a : st.agents)
    if (!a.result && a.handle)
      self->send_exit(a.handle, caf::exit_reason::user_shutdown);
  // A normal exit does not end linked actors: stop the collector explicitly.
  self->unlink_from(st.collector);
  self->send_exit(st.collector, caf::exit_reason::user_shutdown);
  self->send(st.requester, session_done_atom::value, std::move(result));
  self->quit();
}

void fail(session_ptr self, const std::string& why, int at_turn) {
  emit(self, turn(at_turn), core::packets::error(why, "session_failed"));
  emit(self, turn(at_turn), core::packets::stop("failed"));
  session_result r;
  r.status = session_status::failed;
  r.failure = why;
  finish(self, std::move(r));
}

// Hands the strategy's state to the emitter, which stamps it with the last
// seq and passes it to the store (research.checkpoints).
void take_checkpoint(session_ptr self, core::checkpoint_phase phase) {
  auto& st = self->state;
  if (!st.spec.checkpoints)
    return;
  core::research_checkpoint c;
  c.phase = phase;
  c.plan = st.plan;
  c.plan_turn = st.plan_turn;
  c.start_turn = st.start_turn;
  c.cycle = st.cycle;
  c.reasoning_cycles = st.reasoning_cycles;
  c.retried_empty = st.retried_empty;
  c.orchestration = st.orchestration;
  c.global = st.global;
  c.documents = st.docs_by_id;
  c.findings = st.findings;
  c.notices = st.notices;
  c.elapsed_ms = st.elapsed_before_ms + st.timing.elapsed().count();
  self->send(st.emitter, checkpoint_atom::value,
             core::to_json(c).dump(-1, ' ', false,
                                   nlohmann::json::error_handler_t::replace));
}

void close_reasoning(session_ptr self) {
  auto& st = self->state;
  detail::close_reasoning(st.emitter, st.at, st.reasoning);
}

void reasoning_piece(session_ptr self, const std::string& text) {
  auto& st = self->state;
  detail::reasoning_piece(st.emitter, st.at, st.reasoning, text);
}

// Starts an LLM call; `on_done` gets the result, failures go to `on_error`.
/// `continuing`: the call continues the text of the one before (a report
/// cut by the output limit): the text so far stays.
template <class OnDone, class OnError>
void call_llm(session_ptr self, const llm_provider_actor& llm,
              sdk::chat_request req, core::placement at, OnDone on_done,
              OnError on_error, bool continuing = false) {
  auto& st = self->state;
  st.at = at;
  st.reasoning = {};
  st.think = core::think_stream{};
  if (!continuing) {
    st.text.clear();
    st.text_started = false;
  }
  st.current_call = st.next_call++;
  st.current_llm = llm;
  auto id = st.current_call;
  auto role = req.role_tag;
  self->request(llm, caf::infinite, chat_atom::value, llm_call{id, std::move(req)})
    .then(
      [=](llm_reply& reply) {
        if (self->state.current_call != id || self->state.now == phase::done)
          return;
        emit(self, at, core::packets::usage(role, reply.result.usage, reply.cost_usd));
        on_done(reply.result);
      },
      [=](caf::error& err) {
        if (self->state.current_call != id || self->state.now == phase::done)
          return;
        on_error(from_caf_error(err));
      });
}

void start_plan(session_ptr self);
void learn_reasoning_model(session_ptr self, const sdk::chat_result& r);
void start_cycle(session_ptr self);
void start_final(session_ptr self);
void call_final(session_ptr self, sdk::chat_request req, bool continuing);
void report_cut(session_ptr self);
void start_verification(session_ptr self, session_result out);

// -- clarification -------------------------------------------------------------------

void start_clarify(session_ptr self) {
  auto& st = self->state;
  st.now = phase::clarify;
  auto system = core::clarification_system(*st.prompts, st.spec.current_datetime,
                                           has_tool(self, sdk::tool_kind::internal_search));
  call_llm(
    self, st.models.clarify, core::clarification_request(system, st.spec.question),
    turn(0),
    [=](sdk::chat_result& r) {
      close_reasoning(self);
      learn_reasoning_model(self, r);
      if (!r.tool_calls.empty()) {
        start_plan(self);
        return;
      }
      auto questions = r.text;
      if (questions.find_first_not_of(" \t\r\n") == std::string::npos) {
        start_plan(self); // nothing to ask
        return;
      }
      emit(self, turn(0), core::packets::clarification(questions));
      emit(self, turn(0), core::packets::stop("clarification"));
      session_result out;
      out.status = session_status::clarification;
      out.questions = questions;
      finish(self, std::move(out));
    },
    [=](const sdk::error& e) {
      // Clarification is optional: carry on without it.
      self->state.notices.push_back("clarification skipped: " + e.message);
      start_plan(self);
    });
}

// -- the plan ------------------------------------------------------------------------

// Streams the part of the plan that will run: the deltas stop at the first
// step beyond research.max_plan_steps.
void plan_piece(session_ptr self, const std::string& piece) {
  auto& st = self->state;
  st.text += piece;
  if (auto shown = st.plan_cap.feed(piece); !shown.empty())
    emit(self, turn(st.plan_turn), core::packets::deep_research_plan_delta(shown));
}

// research.reasoning_model `auto`: an answer that came with reasoning makes
// the research a reasoning model's (fewer cycles, no think_tool) before its
// first orchestrator cycle.
void learn_reasoning_model(session_ptr self, const sdk::chat_result& r) {
  auto& st = self->state;
  if (!st.spec.reasoning_model_auto || st.spec.reasoning_model || r.reasoning.empty()
      || st.cycle > 0)
    return;
  st.spec.reasoning_model = true;
  st.spec.reasoning_model_reason = "its first answer carried reasoning";
  st.max_cycles = core::orchestrator_cycles(st.spec.max_cycles, true);
  emit(self, st.at,
       core::packets::model_profile(true, st.spec.reasoning_model_reason, st.max_cycles));
}

void start_plan(session_ptr self) {
  auto& st = self->state;
  st.now = phase::plan;
  st.plan_cap = core::plan_stream_cap{st.spec.max_plan_steps};
  auto steps = std::to_string(st.spec.max_plan_steps);
  auto system = render(self, "research_plan",
                       {{"current_datetime", st.spec.current_datetime},
                        {"max_plan_steps", steps}});
  auto reminder = render(self, "research_plan_reminder", {{"max_plan_steps", steps}});
  call_llm(
    self, st.models.plan, core::plan_request(system, st.spec.question, reminder),
    turn(0),
    [=](sdk::chat_result& r) {
      auto& st = self->state;
      close_reasoning(self);
      learn_reasoning_model(self, r);
      auto plan = st.text_started ? st.text : r.text;
      if (!st.text_started && !plan.empty()) {
        emit(self, turn(st.plan_turn), core::packets::deep_research_plan_start());
        st.text.clear();
        plan_piece(self, plan);
      }
      emit(self, turn(st.plan_turn), core::packets::section_end());
      if (plan.find_first_not_of(" \t\r\n") == std::string::npos) {
        fail(self, "the model wrote no research plan", st.plan_turn);
        return;
      }
      st.plan = core::cap_plan(plan, st.spec.max_plan_steps);
      if (st.plan_cap.cut())
        st.notices.push_back("the plan had more than "
                             + std::to_string(st.spec.max_plan_steps)
                             + " steps (research.max_plan_steps); only the first "
                             + std::to_string(st.spec.max_plan_steps)
                             + " were researched");
      st.start_turn = st.plan_turn + 1;
      st.cycle = 0;
      start_cycle(self);
    },
    [=](const sdk::error& e) {
      fail(self, "the research plan could not be written: " + e.message, 0);
    });
}

// -- orchestrator cycles ----------------------------------------------------------------

int current_turn(session_ptr self) {
  auto& st = self->state;
  return st.start_turn + st.cycle + st.reasoning_cycles;
}

void answer_round(session_ptr self);
void spawn_agents(session_ptr self, const std::string& digest);
void start_pending(session_ptr self);

// `answered` holds the results of calls that are not research_agent calls.
void dispatch_agents(session_ptr self, std::vector<sdk::tool_call> calls,
                     int agents_turn, std::map<std::string, std::string> answered) {
  auto& st = self->state;
  st.now = phase::agents;
  st.agents.clear();
  st.dispatch.reset(st.spec.max_parallel_agents);
  st.round_calls = calls;
  st.round_results = std::move(answered);
  int tab = 0;
  for (auto& c : calls) {
    if (c.name != "research_agent")
      continue;
    auto task = core::research_task(c);
    if (task.empty()) {
      st.round_results[c.id] = core::missing_task_text;
      continue;
    }
    // Calls beyond the parallel limit wait for a free slot (start_pending).
    running_agent a;
    a.call_id = c.id;
    a.task = task;
    a.tab = tab++;
    st.agents.push_back(std::move(a));
    st.dispatch.add();
  }
  st.agents_turn = agents_turn;
  if (st.agents.size() > 1)
    emit(self, turn(agents_turn),
         core::packets::top_level_branching(static_cast<int>(st.agents.size())));
  if (st.agents.empty()) {
    answer_round(self);
    return;
  }
  // Onyx's agents know nothing of each other; later ones get the collector's
  // digest of what earlier ones found, so they build on it instead of
  // repeating it.
  self->request(st.collector, caf::infinite, digest_atom::value)
    .then([=](std::string& digest) { spawn_agents(self, digest); },
          [=](caf::error&) { spawn_agents(self, {}); });
}

void spawn_agents(session_ptr self, const std::string& digest) {
  self->state.round_digest = digest;
  start_pending(self);
}

// Starts waiting agents of the round while fewer than the parallel limit run.
void start_pending(session_ptr self) {
  auto& st = self->state;
  // The round may have ended meanwhile (deadline, stop): start nothing new.
  if (st.now != phase::agents || st.collapsing || st.deadline_passed
      || st.stop_requested)
    return;
  if (st.deadline_soon) {
    // Too late for a new agent: the waiting ones are answered as not run.
    for (auto i : st.dispatch.drop_waiting()) {
      agent_result r;
      r.call_id = st.agents[i].call_id;
      r.ok = false;
      r.failure = "it was waiting for a free slot when the deadline came near";
      st.agents[i].result = std::move(r);
    }
    if (st.dispatch.all_finished())
      answer_round(self);
    return;
  }
  auto agents_turn = st.agents_turn;
  // No agent gets more time than the research has left.
  auto limits = st.timing.agent_limits({st.spec.agent_force_report,
                                        st.spec.agent_hard_timeout});
  for (auto i : st.dispatch.start()) {
    auto& a = st.agents[i];
    agent_spec spec;
    spec.call_id = a.call_id;
    spec.task = a.task;
    spec.context = st.round_digest;
    spec.turn_index = agents_turn;
    spec.tab_index = a.tab;
    spec.max_cycles = st.spec.agent_max_cycles;
    spec.reasoning_model = st.spec.reasoning_model;
    spec.force_report_after = limits.force_report_after;
    spec.hard_timeout = limits.hard_timeout;
    spec.context_tokens = st.spec.context_tokens;
    spec.step_max_tokens = st.spec.agent_step_max_tokens;
    spec.report_max_tokens = st.spec.agent_report_max_tokens;
    spec.report_continuations = st.spec.report_continuations;
    spec.current_datetime = st.spec.current_datetime;
    if (st.models.workers) {
      runner_setup where;
      where.directory = st.models.workers;
      where.spawn_timeout = st.models.spawn_timeout;
      a.handle = spawn_agent_runner(self->system(), std::move(spec), st.models.research,
                                    st.tools, st.emitter, st.prompts,
                                    agent_parent_actor{self}, std::move(where));
    } else {
      a.handle = spawn_research_agent(self->system(), std::move(spec),
                                      st.models.research, st.tools, st.emitter,
                                      st.prompts, agent_parent_actor{self});
    }
    self->monitor(a.handle);
  }
}

// Agent `i` of the round finished: answer the round when it was the last,
// else give its slot to a waiting one.
void agent_finished(session_ptr self, size_t i) {
  auto& st = self->state;
  if (!st.dispatch.finish(i))
    return;
  if (st.dispatch.all_finished()) {
    if (st.now == phase::agents)
      answer_round(self);
  } else {
    start_pending(self);
  }
}

void finish_round(session_ptr self);

// All agents of the round are done (or gave up): the collector collapses
// their reports into the global numbering, then every call of the
// orchestrator's response is answered.
void answer_round(session_ptr self) {
  auto& st = self->state;
  if (st.collapsing)
    return;
  st.collapsing = true;
  collapse_request req;
  std::vector<std::string> ids;
  for (auto& a : st.agents) {
    if (!a.result || !a.result->ok) {
      auto why = a.result  ? a.result->failure
                 : a.handle ? std::string{"it did not finish in time"}
                            : std::string{"it was waiting for a free slot when "
                                          "the research ended"};
      st.round_results[a.call_id] = core::agent_failed_text(why);
      st.notices.push_back("research agent " + std::to_string(a.tab + 1) + " failed: "
                           + why); // numbered from 1, as in the live view
      continue;
    }
    ids.push_back(a.call_id);
    req.reports.emplace_back(a.task, *a.result);
  }
  if (req.reports.empty()) {
    finish_round(self);
    return;
  }
  self->request(st.collector, caf::infinite, collapse_atom::value, std::move(req))
    .then(
      [=](collapse_reply& reply) {
        auto& st = self->state;
        for (size_t i = 0; i < ids.size() && i < reply.texts.size(); ++i)
          st.round_results[ids[i]] = std::move(reply.texts[i]);
        st.global = std::move(reply.global);
        st.docs_by_id = std::move(reply.documents);
        st.findings = std::move(reply.findings);
        finish_round(self);
      },
      [=](caf::error& err) {
        fail(self, "the citation collector failed: " + caf::to_string(err),
             current_turn(self));
      });
}

void finish_round(session_ptr self) {
  auto& st = self->state;
  st.collapsing = false;
  core::append_tool_round(st.orchestration, st.round_calls,
                          [&st](const sdk::tool_call& c) {
                            auto r = st.round_results.find(c.id);
                            return r != st.round_results.end()
                                     ? r->second
                                     : std::string{core::missing_tool_result_text};
                          },
                          std::move(st.round_reasoning));
  st.round_reasoning = {};
  st.agents.clear();
  st.round_calls.clear();
  ++st.cycle;
  start_cycle(self);
}

void on_orchestrator_reply(session_ptr self, sdk::chat_result& r) {
  auto& st = self->state;
  reasoning_piece(self, st.think.finish());
  close_reasoning(self);
  auto t = current_turn(self);
  if (st.reasoning.reasoned)
    ++st.reasoning_cycles;
  if (r.finish == sdk::finish_reason::length && !r.tool_calls.empty()
      && !st.retried_cut_call) {
    // Cut inside a tool call (a long think_tool text under the 1,024-token
    // cap, say): said plainly, tried once more with twice the room.
    st.retried_cut_call = st.cut_call_retry = true;
    st.notices.push_back("the orchestrator's answer was cut by its output limit inside "
                         "a tool call; asked again with twice the room");
    start_cycle(self);
    return;
  }
  auto calls = std::move(r.tool_calls);
  core::turn_reasoning said{std::move(r.reasoning), std::move(r.reasoning_state)};
  if (calls.empty()) {
    if (st.cycle == 0 && !st.retried_empty) {
      st.retried_empty = true;
      st.notices.push_back("the orchestrator answered without calling a tool; "
                           "asked again");
      start_cycle(self);
      return;
    }
    if (st.cycle == 0) {
      fail(self, "Deep Research failed to generate any research tasks for the "
                 "agents: the model called no tool, twice.",
           t);
      return;
    }
    start_final(self);
    return;
  }
  bool report = false;
  bool any_agent = false;
  std::vector<sdk::tool_call> answered_now;
  for (const auto& c : calls) {
    if (c.name == "generate_report")
      report = true;
    else if (c.name == "research_agent")
      any_agent = true;
  }
  if (report) {
    start_final(self);
    return;
  }
  if (!any_agent) {
    // Think calls (and unknown tools) are answered at once.
    core::append_tool_round(
      st.orchestration, calls,
      [](const sdk::tool_call& c) { return core::orchestrator_tool_answer(c, true); },
      std::move(said));
    ++st.cycle;
    start_cycle(self);
    return;
  }
  // Think calls in the same response are acknowledged, not dropped.
  std::map<std::string, std::string> answered;
  for (const auto& c : calls)
    if (c.name != "research_agent")
      answered[c.id] = core::orchestrator_tool_answer(c, false);
  st.round_reasoning = std::move(said);
  dispatch_agents(self, std::move(calls), st.reasoning.reasoned ? t + 1 : t,
                  std::move(answered));
}

void start_cycle(session_ptr self) {
  auto& st = self->state;
  if (st.now == phase::done)
    return;
  st.now = phase::orchestrate;
  if (st.stop_requested || st.deadline_passed
      || core::final_cycle(st.cycle, st.max_cycles)) {
    start_final(self);
    return;
  }
  take_checkpoint(self, core::checkpoint_phase::orchestrate);
  core::orchestrator_prompt prompt;
  prompt.current_datetime = st.spec.current_datetime;
  prompt.cycle = st.cycle;
  prompt.max_cycles = st.max_cycles;
  prompt.max_parallel_agents = st.spec.max_parallel_agents;
  prompt.plan = st.plan;
  prompt.internal_search = has_tool(self, sdk::tool_kind::internal_search);
  prompt.reasoning_model = st.spec.reasoning_model;
  core::orchestrator_input in;
  in.system = core::orchestrator_system(*st.prompts, prompt);
  in.question = st.spec.question;
  in.history = st.orchestration;
  in.reminder = core::orchestrator_reminder(st.cycle, st.retried_empty,
                                            core::guidance_text(*st.prompts,
                                                                "first_cycle_reminder",
                                                                true));
  in.reasoning_model = st.spec.reasoning_model;
  in.context_tokens = st.spec.context_tokens;
  in.max_tokens = st.spec.orchestrator_max_tokens * (st.cut_call_retry ? 2 : 1);
  if (st.cut_call_retry) {
    st.cut_call_retry = false;
    in.reminder = in.reminder.empty()
                    ? std::string{core::cut_tool_call_reminder}
                    : in.reminder + "\n\n" + core::cut_tool_call_reminder;
  }
  auto built = core::orchestrator_request(in);
  if (std::holds_alternative<std::string>(built)) {
    st.notices.push_back("the research history no longer fits the model: "
                         "writing the report");
    start_final(self);
    return;
  }
  call_llm(
    self, st.models.orchestrator, std::get<sdk::chat_request>(std::move(built)),
    turn(current_turn(self)),
    [=](sdk::chat_result& r) { on_orchestrator_reply(self, r); },
    [=](const sdk::error& e) {
      auto& st = self->state;
      if (st.cycle == 0 && st.findings.empty()) {
        fail(self, "the orchestrator's model call failed: " + e.message,
             current_turn(self));
        return;
      }
      st.notices.push_back("the orchestrator's model call failed (" + e.message
                           + "); writing the report from what was found");
      start_final(self);
    });
}

// -- the final report ---------------------------------------------------------------------

std::vector<sdk::document> final_documents(session_state& st) {
  return detail::final_documents(st.global, st.docs_by_id);
}

void emit_chunk(session_ptr self, const core::citation_chunk& chunk) {
  auto& st = self->state;
  detail::emit_chunk(st.emitter, st.at, st.text, chunk);
}

void report_piece(session_ptr self, const std::string& raw) {
  auto& st = self->state;
  if (!st.text_started) {
    close_reasoning(self);
    if (st.reasoning.reasoned)
      st.at.turn_index += 1;
    auto docs = final_documents(st);
    emit(self, st.at, core::packets::message_start(&docs, st.timing.elapsed_seconds()));
    st.text_started = true;
  }
  emit_chunk(self, st.processor->process(raw));
}

void complete_report(session_ptr self) {
  auto& st = self->state;
  emit_chunk(self, st.processor->finish());
  if (st.global.empty() && !st.stop_requested) {
    // Every agent failed, none ran, or none read anything: whatever text the
    // model wrote is not built on sources.
    fail(self, detail::no_sources_reason(st.notices), st.final_turn);
    return;
  }
  session_result out;
  out.status = session_status::report;
  out.report = st.text;
  out.sources = detail::cited_sources(*st.processor, st.global);
  out.truncated = st.report_cut;
  if (!st.stop_requested)
    if (auto why = detail::unanswered_notice(st.spec.question, st.docs_by_id)) {
      st.notices.push_back(*why);
      emit(self, st.at, core::packets::notice(*why));
    }
  if (st.spec.verify && !st.stop_requested && !out.report.empty()) {
    start_verification(self, std::move(out));
    return;
  }
  emit(self, st.at, st.stop_requested ? core::packets::stop(st.stop_reason)
                                       : core::packets::stop());
  finish(self, std::move(out));
}

void start_verification(session_ptr self, session_result out) {
  auto& st = self->state;
  st.now = phase::verify;
  auto vs = detail::verification_spec(out.report, st.global, st.docs_by_id,
                                      st.spec.verify_action, st.spec.verify_timeout,
                                      st.timing.left(), render(self, "verification_judge", {}));
  st.pending = std::move(out);
  st.verifier = spawn_verifier(self->system(), std::move(vs), st.models.judge,
                               caf::actor_cast<verification_listener_actor>(self));
  self->monitor(st.verifier);
}

void verification_done(session_ptr self, std::string report, const std::string& summary) {
  auto& st = self->state;
  if (st.now != phase::verify || !st.pending)
    return;
  if (st.verifier)
    self->demonitor(st.verifier.address());
  st.verifier = nullptr;
  auto packet = nlohmann::json::parse(summary, nullptr, false);
  if (packet.is_object())
    emit(self, st.at, packet);
  // The live text ends with the verification section too; the marks and
  // new citations are in the delivered report (and in the claim packets).
  if (auto piece = detail::verification_section(report); !piece.empty()) {
    st.text += piece;
    emit(self, st.at, core::packets::message_delta(piece));
  }
  auto out = std::move(*st.pending);
  st.pending.reset();
  if (!report.empty())
    out.report = std::move(report);
  emit(self, st.at, st.stop_requested ? core::packets::stop(st.stop_reason)
                                       : core::packets::stop());
  finish(self, std::move(out));
}

// "cancelled" when the user cancelled, else "interrupted".
std::string stopped(const session_state& st) {
  return st.stop_reason == "user_cancelled" ? "cancelled" : "interrupted";
}

// Writes the report from the agents' findings when the model cannot.
void fallback_report(session_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.stop_requested) {
    emit(self, turn(st.final_turn),
         core::packets::notice("The research was " + stopped(st)
                               + "; these are the findings gathered until then."));
  } else {
    st.notices.push_back("the final report was assembled from the research "
                         "agents' findings: " + why);
    emit(self, turn(st.final_turn), core::packets::notice(
                                       "The final report could not be written by "
                                       "the model (" + why
                                       + "); these are the research findings."));
  }
  auto body = core::findings_report(st.findings, why);
  if (!st.text_started)
    report_piece(self, body);
  else
    report_piece(self, "\n\n" + body);
  complete_report(self);
}

void start_final(session_ptr self) {
  auto& st = self->state;
  if (st.now == phase::final || st.now == phase::done)
    return;
  st.now = phase::final;
  st.final_turn = current_turn(self);
  st.processor = std::make_unique<core::citation_processor>(core::citation_mode::hyperlink);
  st.processor->update_mapping(st.global);
  auto system = render(self, "final_report",
                       {{"current_datetime", st.spec.current_datetime}});
  auto reminder = render(self, "user_final_report_query", {{"research_plan", st.plan}});
  auto built = core::final_report_request(std::move(system), st.spec.question,
                                          st.orchestration, reminder,
                                          st.spec.context_tokens,
                                          st.spec.final_max_tokens);
  if (st.stop_requested) {
    // Interrupted: no new model call; what was found is the report.
    st.at = turn(st.final_turn);
    fallback_report(self, "the research was " + stopped(st));
    return;
  }
  take_checkpoint(self, core::checkpoint_phase::final_report);
  self->delayed_send(self, st.spec.final_report_timeout, final_timeout_atom::value);
  if (std::holds_alternative<std::string>(built)) {
    st.at = turn(st.final_turn);
    fallback_report(self, std::get<std::string>(built));
    return;
  }
  st.final_request = std::get<sdk::chat_request>(std::move(built));
  st.final_raw.clear();
  st.continuations = 0;
  call_final(self, st.final_request, false);
}

// One call of the final report: the first, or one continuing the text of
// a report that the output limit cut.
void call_final(session_ptr self, sdk::chat_request req, bool continuing) {
  auto& st = self->state;
  st.final_call_streamed = false;
  call_llm(
    self, st.models.report, std::move(req), turn(st.final_turn),
    [=](sdk::chat_result& r) {
      auto& st = self->state;
      if (!st.text_started
          && r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
        fallback_report(self, "the model wrote an empty report");
        return;
      }
      // A provider that did not stream: its whole text now.
      if (!st.final_call_streamed)
        report_piece(self, r.text);
      st.final_raw += r.text;
      if (r.finish == sdk::finish_reason::length) {
        if (st.continuations < st.spec.report_continuations && !st.stop_requested
            && !st.deadline_passed) {
          ++st.continuations;
          call_final(self, core::continuation_request(st.final_request, st.final_raw),
                     true);
          return;
        }
        report_cut(self);
      } else if (r.finish == sdk::finish_reason::content_filter) {
        auto why = std::string{"the model's content filter stopped the final report"};
        st.notices.push_back(why);
        emit(self, st.at, core::packets::notice("The model's content filter stopped the "
                                                "final report; it may be incomplete."));
      }
      complete_report(self);
    },
    [=](const sdk::error& e) {
      auto& st = self->state;
      if (continuing && st.text_started) {
        // The text so far stays; it is cut where the last call ended.
        st.notices.push_back("continuing the cut report failed: " + e.message);
        report_cut(self);
        complete_report(self);
        return;
      }
      fallback_report(self, e.message);
    },
    continuing);
}

// The report is cut by the output limit and stays so: a notice, a line for
// the terminal (the notices), and a visible note at the end of the report.
void report_cut(session_ptr self) {
  auto& st = self->state;
  st.report_cut = true;
  auto why = core::report_cut_notice(st.spec.final_max_tokens, st.continuations);
  st.notices.push_back(why);
  emit(self, st.at, core::packets::notice(why));
  report_piece(self, core::report_cut_note(st.spec.final_max_tokens,
                                           "research.max_tokens.final_report"));
}

// -- the actor ------------------------------------------------------------------------------

session_full_actor::behavior_type
session_impl(session_ptr self, session_spec spec, session_models models,
             tool_set tools, emitter_actor emitter,
             std::shared_ptr<const core::prompt_library> prompts,
             session_requester_actor requester) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.models = std::move(models);
  st.tools = std::move(tools);
  st.emitter = std::move(emitter);
  st.prompts = std::move(prompts);
  st.requester = std::move(requester);
  st.time = detail::actor_time{self->clock()};
  st.timing = core::research_deadline{st.spec.deadline, st.time};
  collector_start from_checkpoint;
  if (const auto& c = st.spec.resume_from) {
    st.plan = c->plan;
    st.plan_turn = c->plan_turn;
    st.start_turn = c->start_turn;
    st.cycle = c->cycle;
    st.reasoning_cycles = c->reasoning_cycles;
    st.retried_empty = c->retried_empty;
    st.orchestration = c->orchestration;
    st.global = c->global;
    st.docs_by_id = c->documents;
    st.findings = c->findings;
    st.notices = c->notices;
    st.elapsed_before_ms = c->elapsed_ms;
    from_checkpoint.global = c->global;
    from_checkpoint.documents = c->documents;
    from_checkpoint.findings = c->findings;
  }
  st.collector = spawn_citation_collector(self->system(), std::move(from_checkpoint));
  self->link_to(st.collector);
  st.max_cycles = core::orchestrator_cycles(st.spec.max_cycles, st.spec.reasoning_model);
  // Agents are told to report a little before the deadline, so their reports
  // are ready when it comes.
  self->delayed_send(self, st.timing.report_after(), deadline_soon_atom::value);
  self->delayed_send(self, st.timing.deadline(), deadline_now_atom::value);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.verifier && st.verifier.address() == dm.source) {
      // The verifier failed: the report goes out unverified.
      st.verifier = nullptr;
      st.notices.push_back("the report could not be verified");
      emit(self, st.at, core::packets::notice("The report could not be verified."));
      verification_done(self, std::string{}, "{}");
      return;
    }
    for (size_t i = 0; i < st.agents.size(); ++i) {
      auto& a = st.agents[i];
      if (a.handle && a.handle.address() == dm.source && !a.result) {
        agent_result r;
        r.call_id = a.call_id;
        r.ok = false;
        r.failure = "the research agent stopped unexpectedly";
        a.result = std::move(r);
        agent_finished(self, i);
        return;
      }
    }
  });
  self->send(self, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (!st.spec.resumed)
        emit(self, turn(0),
             core::packets::model_profile(st.spec.reasoning_model,
                                          st.spec.reasoning_model_reason, st.max_cycles));
      if (st.spec.resumed)
        emit(self, turn(st.spec.resume_from ? current_turn(self) : 0),
             core::packets::resumed(st.spec.resume_checkpoint,
                                    st.spec.superseded_after));
      if (const auto& c = st.spec.resume_from) {
        if (c->phase == core::checkpoint_phase::final_report)
          start_final(self);
        else
          start_cycle(self);
      } else if (st.spec.clarify) {
        start_clarify(self);
      } else {
        start_plan(self);
      }
    },
    [=](delta_atom, llm_delta& d) {
      auto& st = self->state;
      if (d.call_id != st.current_call || st.now == phase::done)
        return;
      switch (d.kind) {
        case delta_kind::reasoning:
          reasoning_piece(self, d.text);
          break;
        case delta_kind::text:
          if (st.now == phase::plan) {
            if (!st.text_started) {
              close_reasoning(self);
              if (st.reasoning.reasoned)
                st.plan_turn = 1;
              emit(self, turn(st.plan_turn), core::packets::deep_research_plan_start());
              st.text_started = true;
            }
            plan_piece(self, d.text);
          } else if (st.now == phase::final) {
            st.final_call_streamed = true;
            report_piece(self, d.text);
          } else if (st.now == phase::orchestrate) {
            reasoning_piece(self, d.text); // text under "required" is reasoning
          } else {
            st.text += d.text; // clarifying questions
          }
          break;
        case delta_kind::tool_call:
          if (st.now == phase::orchestrate && !st.spec.reasoning_model)
            reasoning_piece(self, st.think.feed(d.tool));
          break;
        case delta_kind::usage:
          break;
      }
    },
    [=](agent_done_atom, agent_result& r) {
      auto& st = self->state;
      for (size_t i = 0; i < st.agents.size(); ++i) {
        auto& a = st.agents[i];
        if (a.call_id == r.call_id && !a.result) {
          a.result = std::move(r);
          self->demonitor(a.handle.address());
          agent_finished(self, i);
          return;
        }
      }
    },
    [=](deadline_soon_atom) {
      auto& st = self->state;
      st.deadline_soon = true;
      for (auto& a : st.agents)
        if (!a.result && a.handle)
          self->send(a.handle, report_now_atom::value);
      // Agents still waiting for a slot will not start now.
      start_pending(self);
    },
    [=](deadline_now_atom) {
      auto& st = self->state;
      if (st.now == phase::done || st.deadline_passed)
        return;
      st.deadline_passed = true;
      if (st.stop_requested) {
        st.notices.push_back("the research was " + stopped(st));
        emit(self, turn(current_turn(self)),
             core::packets::notice("The research was " + stopped(st)
                                   + "; the report holds what was found until then."));
      } else {
        st.notices.push_back("the research deadline was reached");
        emit(self, turn(current_turn(self)),
             core::packets::notice("The research deadline was reached; the report "
                                   "is written from what was found so far."));
      }
      // The call in flight is cancelled in every phase: nothing waits for a
      // model past the deadline (the final report has its own time limit).
      if (st.now == phase::clarify || st.now == phase::plan) {
        self->send(st.current_llm, cancel_atom::value, st.current_call);
        st.current_call = 0;
        if (st.stop_requested) {
          emit(self, turn(st.plan_turn), core::packets::stop(st.stop_reason));
          session_result out;
          out.status = session_status::failed;
          out.failure = "the research was " + stopped(st) + " before it started";
          finish(self, std::move(out));
        } else {
          st.final_turn = current_turn(self);
          st.at = turn(st.final_turn);
          st.processor = std::make_unique<core::citation_processor>(
            core::citation_mode::hyperlink);
          st.processor->update_mapping(st.global);
          st.now = phase::final;
          fallback_report(self, "the deadline was reached before the research began");
        }
        return;
      }
      if (st.now == phase::final) {
        if (st.stop_requested)
          self->send(self, final_timeout_atom::value);
        return;
      }
      if (st.now == phase::agents) {
        for (auto& a : st.agents)
          if (!a.result && a.handle) {
            self->demonitor(a.handle.address());
            self->send_exit(a.handle, caf::exit_reason::user_shutdown);
          }
        st.dispatch.finish_all();
        answer_round(self);
      } else if (st.now == phase::orchestrate) {
        self->send(st.current_llm, cancel_atom::value, st.current_call);
        st.current_call = 0;
        start_final(self);
      }
    },
    [=](final_timeout_atom) {
      auto& st = self->state;
      if (st.now != phase::final)
        return;
      self->send(st.current_llm, cancel_atom::value, st.current_call);
      st.current_call = 0;
      auto why = st.stop_requested ? "the research was " + stopped(st)
                                   : std::string{"it ran out of time"};
      if (!st.stop_requested)
        st.notices.push_back("the final report ran out of time");
      if (st.text_started) {
        report_piece(self, std::string{"\n\n*(The report was cut short: "} + why + ".)*");
        complete_report(self);
      } else {
        fallback_report(self, why);
      }
    },
    [=](verified_claim_atom, const std::string& packet) {
      auto& st = self->state;
      if (st.now != phase::verify)
        return;
      auto p = nlohmann::json::parse(packet, nullptr, false);
      if (p.is_object())
        emit(self, st.at, p);
    },
    [=](verified_atom, std::string& report, const std::string& summary) {
      verification_done(self, std::move(report), summary);
    },
    [=](stop_atom, std::string& reason) {
      auto& st = self->state;
      if (st.stop_requested || st.now == phase::done)
        return;
      if (!reason.empty())
        st.stop_reason = std::move(reason);
      self->send(self, stop_atom::value);
    },
    [=](stop_atom) {
      auto& st = self->state;
      if (st.stop_requested || st.now == phase::done)
        return;
      st.stop_requested = true;
      if (st.now == phase::verify) {
        // What is not judged yet goes out unverified.
        if (st.verifier)
          self->send(st.verifier, stop_atom::value);
        return;
      }
      if (st.deadline_passed) {
        // Already writing the report: stop that too.
        if (st.now == phase::final)
          self->send(self, final_timeout_atom::value);
        return;
      }
      self->send(self, deadline_now_atom::value);
    },
  };
}

} // namespace

session_actor spawn_session(caf::actor_system& sys, session_spec spec,
                            session_models models, tool_set tools,
                            emitter_actor emitter,
                            std::shared_ptr<const core::prompt_library> prompts,
                            session_requester_actor requester) {
  return sys.spawn(session_impl, std::move(spec), std::move(models),
                   std::move(tools), std::move(emitter), std::move(prompts),
                   std::move(requester));
}

} // namespace quarry::actors
