// The orchestrator strategy (Onyx's dr_loop.py, spec sections 4.1-4.7) on
// the session frame: clarification, the plan, orchestrator cycles that send
// research agents, and the final report's request. Fixes over Onyx: the
// parallel limit is enforced in code, a first orchestrator turn without tool
// calls is retried once, every tool call gets a result, think_tool never
// drops other calls, the internal-search guidance appears only with internal
// search, and a global deadline bounds the run while the user still gets a
// report (the frame).

#include "session_frame.hpp"

#include "quarry/core/agent_dispatch.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/history.hpp"
#include "quarry/core/research_requests.hpp"

#include <caf/all.hpp>

#include <map>

namespace quarry::actors::detail {

// A named namespace of its own: unity builds join this file with others.
namespace orchestration {

namespace {

enum class phase { clarify, plan, orchestrate, agents };

struct running_agent {
  std::string call_id;
  std::string task;
  int tab = 0;
  research_agent_actor handle;
  std::optional<agent_result> result;
};

class orchestrator final : public strategy {
public:
  explicit orchestrator(frame_ptr self) : strategy(self) {
    auto& fs = self->state;
    fs.reasoning_turn = true;
    max_cycles_ = core::orchestrator_cycles(fs.spec.max_cycles, fs.spec.reasoning_model);
  }

  collector_start resume() override {
    auto& fs = self->state;
    collector_start from;
    const auto& c = fs.spec.resume_from;
    if (!c)
      return from;
    plan_ = c->plan;
    plan_turn_ = c->plan_turn;
    start_turn_ = c->start_turn;
    cycle_ = c->cycle;
    reasoning_cycles_ = c->reasoning_cycles;
    retried_empty_ = c->retried_empty;
    orchestration_ = c->orchestration;
    fs.global = c->global;
    fs.docs_by_id = c->documents;
    fs.findings = c->findings;
    fs.notices = c->notices;
    fs.elapsed_before_ms = c->elapsed_ms;
    from.global = c->global;
    from.documents = c->documents;
    from.findings = c->findings;
    return from;
  }

  void start() override {
    auto& fs = self->state;
    if (!fs.spec.resumed)
      emit(self, turn(0),
           core::packets::model_profile(fs.spec.reasoning_model, fs.spec.reasoning_model_reason,
                                        max_cycles_));
    if (fs.spec.resumed)
      emit(self, turn(fs.spec.resume_from ? turn_now() : 0),
           core::packets::resumed(fs.spec.resume_checkpoint, fs.spec.superseded_after));
    if (const auto& c = fs.spec.resume_from) {
      if (c->phase == core::checkpoint_phase::final_report)
        start_final();
      else
        start_cycle();
    } else if (fs.spec.clarify) {
      start_clarify();
    } else {
      start_plan();
    }
  }

  int turn_now() const override {
    return start_turn_ + cycle_ + reasoning_cycles_;
  }

  void on_text(const std::string& text) override {
    auto& fs = self->state;
    if (now_ == phase::plan) {
      if (!fs.text_started) {
        close_reasoning(self);
        if (fs.reasoning.reasoned)
          plan_turn_ = 1;
        emit(self, turn(plan_turn_), core::packets::deep_research_plan_start());
        fs.text_started = true;
      }
      plan_piece(text);
    } else if (now_ == phase::orchestrate) {
      reasoning_piece(self, text); // text under "required" is reasoning
    } else {
      fs.text += text; // clarifying questions
    }
  }

  void on_tool_delta(const sdk::tool_call_delta& delta) override {
    auto& fs = self->state;
    if (now_ == phase::orchestrate && !fs.spec.reasoning_model)
      reasoning_piece(self, fs.think.feed(delta));
  }

  void on_agent_done(agent_result& r) override {
    for (size_t i = 0; i < agents_.size(); ++i) {
      auto& a = agents_[i];
      if (a.call_id == r.call_id && !a.result) {
        a.result = std::move(r);
        self->demonitor(a.handle.address());
        agent_finished(i);
        return;
      }
    }
  }

  bool on_down(const caf::down_msg& dm) override {
    for (size_t i = 0; i < agents_.size(); ++i) {
      auto& a = agents_[i];
      if (a.handle && a.handle.address() == dm.source && !a.result) {
        agent_result r;
        r.call_id = a.call_id;
        r.ok = false;
        r.failure = "the research agent stopped unexpectedly";
        a.result = std::move(r);
        agent_finished(i);
        return true;
      }
    }
    return false;
  }

  void on_deadline_soon() override {
    for (auto& a : agents_)
      if (!a.result && a.handle)
        self->send(a.handle, report_now_atom::value);
    // Agents still waiting for a slot will not start now.
    start_pending();
    // The orchestrator is not asked again to start agents: a call of it in
    // flight gives way to the final report (after the agents' round, which
    // reports now, start_cycle() goes there too).
    if (now_ == phase::orchestrate && self->state.stage == frame_stage::research) {
      cancel_call(self);
      start_final();
    }
  }

  void on_deadline() override {
    auto& fs = self->state;
    switch (now_) {
      case phase::clarify:
      case phase::plan:
        cancel_call(self);
        if (fs.stop_requested) {
          stopped_before_start(self, plan_turn_);
        } else {
          begin_final(self, turn_now(), false);
          fallback_report(self, "the deadline was reached before the research began");
        }
        break;
      case phase::agents:
        for (auto& a : agents_)
          if (!a.result && a.handle) {
            self->demonitor(a.handle.address());
            self->send_exit(a.handle, caf::exit_reason::user_shutdown);
          }
        dispatch_.finish_all();
        answer_round();
        break;
      case phase::orchestrate:
        cancel_call(self);
        start_final();
        break;
    }
  }

  std::string plan_text() const override {
    return plan_;
  }

  void fill_checkpoint(core::research_checkpoint& c) const override {
    c.plan = plan_;
    c.plan_turn = plan_turn_;
    c.start_turn = start_turn_;
    c.cycle = cycle_;
    c.reasoning_cycles = reasoning_cycles_;
    c.retried_empty = retried_empty_;
    c.orchestration = orchestration_;
  }

  void on_finish() override {
    for (auto& a : agents_)
      if (!a.result && a.handle)
        self->send_exit(a.handle, caf::exit_reason::user_shutdown);
  }

private:
  // -- clarification -----------------------------------------------------------------

  void start_clarify() {
    auto& fs = self->state;
    now_ = phase::clarify;
    auto system = core::clarification_system(*fs.prompts, fs.spec.current_datetime,
                                             fs.tools.has(sdk::tool_kind::internal_search));
    call_llm(
      self, fs.models.clarify,
      core::clarification_request(system, fs.spec.question, fs.spec.conversation), turn(0),
      [this](sdk::chat_result& r) {
        close_reasoning(self);
        learn_reasoning_model(r);
        if (!r.tool_calls.empty()) {
          start_plan();
          return;
        }
        auto questions = r.text;
        if (questions.find_first_not_of(" \t\r\n") == std::string::npos) {
          start_plan(); // nothing to ask
          return;
        }
        emit(self, turn(0), core::packets::clarification(questions));
        emit(self, turn(0), core::packets::stop("clarification"));
        session_result out;
        out.status = session_status::clarification;
        out.questions = questions;
        finish(self, std::move(out));
      },
      [this](const sdk::error& e) {
        // Clarification is optional: carry on without it.
        self->state.notices.push_back("clarification skipped: " + e.message);
        start_plan();
      });
  }

  // -- the plan ----------------------------------------------------------------------

  // Streams the part of the plan that will run: the deltas stop at the first
  // step beyond research.max_plan_steps.
  void plan_piece(const std::string& piece) {
    auto& fs = self->state;
    fs.text += piece;
    if (auto shown = plan_cap_.feed(piece); !shown.empty())
      emit(self, turn(plan_turn_), core::packets::deep_research_plan_delta(shown));
  }

  // research.reasoning_model `auto`: an answer that came with reasoning makes
  // the research a reasoning model's (fewer cycles, no think_tool) before its
  // first orchestrator cycle.
  void learn_reasoning_model(const sdk::chat_result& r) {
    auto& fs = self->state;
    if (!fs.spec.reasoning_model_auto || fs.spec.reasoning_model || r.reasoning.empty()
        || cycle_ > 0)
      return;
    fs.spec.reasoning_model = true;
    fs.spec.reasoning_model_reason = "its first answer carried reasoning";
    max_cycles_ = core::orchestrator_cycles(fs.spec.max_cycles, true);
    emit(self, fs.at,
         core::packets::model_profile(true, fs.spec.reasoning_model_reason, max_cycles_));
  }

  void start_plan() {
    auto& fs = self->state;
    now_ = phase::plan;
    plan_cap_ = core::plan_stream_cap{fs.spec.max_plan_steps};
    auto steps = std::to_string(fs.spec.max_plan_steps);
    auto system = render(self, "research_plan",
                         {{"current_datetime", fs.spec.current_datetime},
                          {"max_plan_steps", steps}});
    auto reminder = render(self, "research_plan_reminder", {{"max_plan_steps", steps}});
    call_llm(
      self, fs.models.plan,
      core::plan_request(system, fs.spec.question, reminder, fs.spec.conversation), turn(0),
      [this](sdk::chat_result& r) {
        auto& fs = self->state;
        close_reasoning(self);
        learn_reasoning_model(r);
        auto plan = fs.text_started ? fs.text : r.text;
        if (!fs.text_started && !plan.empty()) {
          emit(self, turn(plan_turn_), core::packets::deep_research_plan_start());
          fs.text.clear();
          plan_piece(plan);
        }
        emit(self, turn(plan_turn_), core::packets::section_end());
        if (plan.find_first_not_of(" \t\r\n") == std::string::npos) {
          fail(self, "the model wrote no research plan", plan_turn_);
          return;
        }
        plan_ = core::cap_plan(plan, fs.spec.max_plan_steps);
        if (plan_cap_.cut())
          fs.notices.push_back("the plan had more than " + std::to_string(fs.spec.max_plan_steps)
                               + " steps (research.max_plan_steps); only the first "
                               + std::to_string(fs.spec.max_plan_steps) + " were researched");
        start_turn_ = plan_turn_ + 1;
        cycle_ = 0;
        start_cycle();
      },
      [this](const sdk::error& e) {
        fail(self, "the research plan could not be written: " + e.message, 0);
      });
  }

  // -- orchestrator cycles --------------------------------------------------------------

  // `answered` holds the results of calls that are not research_agent calls.
  void dispatch_agents(std::vector<sdk::tool_call> calls, int agents_turn,
                       std::map<std::string, std::string> answered) {
    auto& fs = self->state;
    now_ = phase::agents;
    agents_.clear();
    dispatch_.reset(fs.spec.max_parallel_agents);
    round_calls_ = calls;
    round_results_ = std::move(answered);
    int tab = 0;
    for (auto& c : calls) {
      if (c.name != "research_agent")
        continue;
      auto task = core::research_task(c);
      if (task.empty()) {
        round_results_[c.id] = core::missing_task_text;
        continue;
      }
      // Calls beyond the parallel limit wait for a free slot (start_pending).
      running_agent a;
      a.call_id = c.id;
      a.task = task;
      a.tab = tab++;
      agents_.push_back(std::move(a));
      dispatch_.add();
    }
    agents_turn_ = agents_turn;
    if (agents_.size() > 1)
      emit(self, turn(agents_turn),
           core::packets::top_level_branching(static_cast<int>(agents_.size())));
    if (agents_.empty()) {
      answer_round();
      return;
    }
    // Onyx's agents know nothing of each other; later ones get the
    // collector's digest of what earlier ones found, so they build on it
    // instead of repeating it.
    self->request(fs.collector, caf::infinite, digest_atom::value)
      .then(
        [this](std::string& digest) {
          round_digest_ = digest;
          start_pending();
        },
        [this](caf::error&) {
          round_digest_.clear();
          start_pending();
        });
  }

  // Starts waiting agents of the round while fewer than the parallel limit
  // run.
  void start_pending() {
    auto& fs = self->state;
    // The round may have ended meanwhile (deadline, stop): start nothing new.
    if (fs.stage != frame_stage::research || now_ != phase::agents || collapsing_
        || fs.deadline_passed || fs.stop_requested)
      return;
    if (fs.deadline_soon) {
      // Too late for a new agent: the waiting ones are answered as not run.
      for (auto i : dispatch_.drop_waiting()) {
        agent_result r;
        r.call_id = agents_[i].call_id;
        r.ok = false;
        r.failure = "it was waiting for a free slot when the deadline came near";
        agents_[i].result = std::move(r);
      }
      if (dispatch_.all_finished())
        answer_round();
      return;
    }
    for (auto i : dispatch_.start()) {
      auto& a = agents_[i];
      a.handle = start_agent(self, a.call_id, a.task, round_digest_, agents_turn_, a.tab);
    }
  }

  // Agent `i` of the round finished: answer the round when it was the last,
  // else give its slot to a waiting one.
  void agent_finished(size_t i) {
    if (!dispatch_.finish(i))
      return;
    if (dispatch_.all_finished()) {
      if (now_ == phase::agents)
        answer_round();
    } else {
      start_pending();
    }
  }

  // All agents of the round are done (or gave up): the collector collapses
  // their reports into the global numbering, then every call of the
  // orchestrator's response is answered.
  void answer_round() {
    auto& fs = self->state;
    if (collapsing_)
      return;
    collapsing_ = true;
    collapse_request req;
    std::vector<std::string> ids;
    for (auto& a : agents_) {
      if (!a.result || !a.result->ok) {
        auto why = a.result   ? a.result->failure
                   : a.handle ? std::string{"it did not finish in time"}
                              : std::string{"it was waiting for a free slot when "
                                            "the research ended"};
        round_results_[a.call_id] = core::agent_failed_text(why);
        fs.notices.push_back("research agent " + std::to_string(a.tab + 1)
                             + " failed: " + why); // numbered from 1, as in the live view
        continue;
      }
      ids.push_back(a.call_id);
      req.reports.emplace_back(a.task, *a.result);
    }
    if (req.reports.empty()) {
      finish_round();
      return;
    }
    self->request(fs.collector, caf::infinite, collapse_atom::value, std::move(req))
      .then(
        [this, ids](collapse_reply& reply) {
          auto& fs = self->state;
          for (size_t i = 0; i < ids.size() && i < reply.texts.size(); ++i)
            round_results_[ids[i]] = std::move(reply.texts[i]);
          fs.global = std::move(reply.global);
          fs.docs_by_id = std::move(reply.documents);
          fs.findings = std::move(reply.findings);
          finish_round();
        },
        [this](caf::error& err) {
          fail(self, "the citation collector failed: " + caf::to_string(err), turn_now());
        });
  }

  void finish_round() {
    collapsing_ = false;
    core::append_tool_round(
      orchestration_, round_calls_,
      [this](const sdk::tool_call& c) {
        auto r = round_results_.find(c.id);
        return r != round_results_.end() ? r->second : std::string{core::missing_tool_result_text};
      },
      std::move(round_reasoning_));
    round_reasoning_ = {};
    agents_.clear();
    round_calls_.clear();
    ++cycle_;
    start_cycle();
  }

  void on_orchestrator_reply(sdk::chat_result& r) {
    auto& fs = self->state;
    reasoning_piece(self, fs.think.finish());
    close_reasoning(self);
    auto t = turn_now();
    if (fs.reasoning.reasoned)
      ++reasoning_cycles_;
    if (r.finish == sdk::finish_reason::length && !r.tool_calls.empty() && !retried_cut_call_) {
      // Cut inside a tool call (a long think_tool text under the 1,024-token
      // cap, say): said plainly, tried once more with twice the room.
      retried_cut_call_ = cut_call_retry_ = true;
      fs.notices.push_back("the orchestrator's answer was cut by its output limit inside "
                           "a tool call; asked again with twice the room");
      start_cycle();
      return;
    }
    auto calls = std::move(r.tool_calls);
    core::turn_reasoning said{std::move(r.reasoning), std::move(r.reasoning_state)};
    if (calls.empty()) {
      if (cycle_ == 0 && !retried_empty_) {
        retried_empty_ = true;
        fs.notices.push_back("the orchestrator answered without calling a tool; asked again");
        start_cycle();
        return;
      }
      if (cycle_ == 0) {
        fail(self,
             "Deep Research failed to generate any research tasks for the "
             "agents: the model called no tool, twice.",
             t);
        return;
      }
      start_final();
      return;
    }
    bool report = false;
    bool any_agent = false;
    for (const auto& c : calls) {
      if (c.name == "generate_report")
        report = true;
      else if (c.name == "research_agent")
        any_agent = true;
    }
    if (report) {
      start_final();
      return;
    }
    if (!any_agent) {
      // Think calls (and unknown tools) are answered at once.
      core::append_tool_round(
        orchestration_, calls,
        [](const sdk::tool_call& c) { return core::orchestrator_tool_answer(c, true); },
        std::move(said));
      ++cycle_;
      start_cycle();
      return;
    }
    // Think calls in the same response are acknowledged, not dropped.
    std::map<std::string, std::string> answered;
    for (const auto& c : calls)
      if (c.name != "research_agent")
        answered[c.id] = core::orchestrator_tool_answer(c, false);
    round_reasoning_ = std::move(said);
    dispatch_agents(std::move(calls), fs.reasoning.reasoned ? t + 1 : t, std::move(answered));
  }

  void start_cycle() {
    auto& fs = self->state;
    if (fs.stage != frame_stage::research)
      return;
    now_ = phase::orchestrate;
    // Near the deadline (agents were told to report), no new cycle: a new
    // agent would have no time, so the final report comes now.
    if (fs.stop_requested || fs.deadline_passed || fs.deadline_soon
        || core::final_cycle(cycle_, max_cycles_)) {
      start_final();
      return;
    }
    take_checkpoint(self, core::checkpoint_phase::orchestrate);
    core::orchestrator_prompt prompt;
    prompt.current_datetime = fs.spec.current_datetime;
    prompt.cycle = cycle_;
    prompt.max_cycles = max_cycles_;
    prompt.max_parallel_agents = fs.spec.max_parallel_agents;
    prompt.plan = plan_;
    prompt.internal_search = fs.tools.has(sdk::tool_kind::internal_search);
    prompt.reasoning_model = fs.spec.reasoning_model;
    core::orchestrator_input in;
    in.system = core::orchestrator_system(*fs.prompts, prompt);
    in.question = fs.spec.question;
    in.conversation = fs.spec.conversation;
    in.plan = plan_;
    in.max_parallel_agents = fs.spec.max_parallel_agents;
    in.history = orchestration_;
    in.reminder = core::orchestrator_reminder(
      cycle_, retried_empty_, core::guidance_text(*fs.prompts, "first_cycle_reminder", true));
    in.reasoning_model = fs.spec.reasoning_model;
    in.context_tokens = fs.spec.context_tokens;
    in.max_tokens = fs.spec.orchestrator_max_tokens * (cut_call_retry_ ? 2 : 1);
    if (cut_call_retry_) {
      cut_call_retry_ = false;
      in.reminder = in.reminder.empty() ? std::string{core::cut_tool_call_reminder}
                                        : in.reminder + "\n\n" + core::cut_tool_call_reminder;
    }
    auto built = core::orchestrator_request(in);
    if (std::holds_alternative<std::string>(built)) {
      fs.notices.push_back("the research history no longer fits the model: "
                           "writing the report");
      start_final();
      return;
    }
    call_llm(
      self, fs.models.orchestrator, std::get<sdk::chat_request>(std::move(built)), turn(turn_now()),
      [this](sdk::chat_result& r) { on_orchestrator_reply(r); },
      [this](const sdk::error& e) {
        auto& fs = self->state;
        if (cycle_ == 0 && fs.findings.empty()) {
          fail(self, "the orchestrator's model call failed: " + e.message, turn_now());
          return;
        }
        fs.notices.push_back("the orchestrator's model call failed (" + e.message
                             + "); writing the report from what was found");
        start_final();
      });
  }

  // -- the final report -------------------------------------------------------------------

  void start_final() {
    auto& fs = self->state;
    if (fs.stage != frame_stage::research)
      return;
    auto t = turn_now();
    if (fs.deadline_soon && !fs.deadline_passed && !fs.stop_requested)
      notice(self, t,
             "The research deadline is near: no further research agents start; the report "
             "is written from what was found.");
    if (fs.stop_requested) {
      // Interrupted: no new model call; what was found is the report.
      begin_final(self, t, false);
      fallback_report(self, "the research was " + stopped(fs));
      return;
    }
    take_checkpoint(self, core::checkpoint_phase::final_report);
    begin_final(self, t, true);
    auto system = render(self, "final_report", {{"current_datetime", fs.spec.current_datetime}});
    auto reminder = render(self, "user_final_report_query", {{"research_plan", plan_}});
    auto built = core::final_report_request(std::move(system), fs.spec.question, plan_,
                                            orchestration_, reminder, fs.spec.context_tokens,
                                            fs.spec.final_max_tokens);
    if (std::holds_alternative<std::string>(built)) {
      fallback_report(self, std::get<std::string>(built));
      return;
    }
    write_final(self, std::get<sdk::chat_request>(std::move(built)));
  }

  phase now_ = phase::clarify;
  std::string plan_;
  int plan_turn_ = 0;
  std::vector<sdk::chat_message> orchestration_;
  int cycle_ = 0;
  int max_cycles_ = 8;
  int reasoning_cycles_ = 0;
  int start_turn_ = 1;
  bool retried_empty_ = false;
  // What of the plan is shown while it streams (research.max_plan_steps).
  core::plan_stream_cap plan_cap_{0};

  // The research_agent calls of the round, and which of them wait for one
  // of the `max_parallel_agents` slots, run or are finished (same
  // numbering).
  std::vector<running_agent> agents_;
  core::agent_dispatch dispatch_;
  bool collapsing_ = false;
  // What earlier rounds found, given to every agent of this round.
  std::string round_digest_;
  int agents_turn_ = 0;
  // The orchestrator call's tool calls being answered by this round.
  std::vector<sdk::tool_call> round_calls_;
  std::map<std::string, std::string> round_results_;
  // The reasoning of the orchestrator turn that made `round_calls_`.
  core::turn_reasoning round_reasoning_;
  // An orchestrator answer was cut inside its tool call: the next call says
  // so and has twice the room (once per session).
  bool cut_call_retry_ = false;
  bool retried_cut_call_ = false;
};

} // namespace

} // namespace orchestration

std::unique_ptr<strategy> make_orchestrator_strategy(frame_ptr self) {
  return std::make_unique<orchestration::orchestrator>(self);
}

} // namespace quarry::actors::detail
