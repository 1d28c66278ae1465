// The session frame (session_frame.hpp): the one session actor, the model
// steps, agents, checkpoints, final report, verification, deadline and stop
// handling that every strategy shares, and the dispatcher between
// strategies.

#include "session_frame.hpp"

#include "final_report.hpp"

#include "quarry/core/document_numbers.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/reflective_requests.hpp"
#include "quarry/core/research_requests.hpp"

#include <caf/all.hpp>

namespace quarry::actors {

std::string_view to_string(research_strategy x) noexcept {
  switch (x) {
    case research_strategy::orchestrator:
      return "orchestrator";
    case research_strategy::reflective:
      return "reflective";
  }
  return "orchestrator";
}

std::optional<research_strategy> parse_research_strategy(std::string_view name) noexcept {
  if (name == "orchestrator")
    return research_strategy::orchestrator;
  if (name == "reflective")
    return research_strategy::reflective;
  return std::nullopt;
}

namespace detail {

// -- strategy hooks: what a strategy does not override ---------------------------------

strategy::~strategy() = default;

collector_start strategy::resume() {
  return {};
}

void strategy::on_text(const std::string&) {
  // nop
}

void strategy::on_tool_delta(const sdk::tool_call_delta&) {
  // nop
}

void strategy::on_agent_done(cluster::agent_result&) {
  // nop
}

bool strategy::on_down(const caf::down_msg&) {
  return false;
}

void strategy::on_deadline_soon() {
  // nop
}

void strategy::on_timer() {
  // nop
}

void strategy::fill_checkpoint(core::research_checkpoint&) const {
  // nop
}

void strategy::on_finish() {
  // nop
}

// -- packets and prompts ------------------------------------------------------------------

void emit(frame_ptr self, const core::placement& at, const nlohmann::json& obj) {
  self->send(self->state.emitter, packet_atom::value, make_packet(at, obj));
}

void notice(frame_ptr self, int t, const std::string& text) {
  self->state.notices.push_back(text);
  emit(self, turn(t), core::packets::notice(text));
}

std::string render(frame_ptr self, std::string_view name, const core::prompt_vars& vars) {
  return core::render_prompt(*self->state.prompts, name, vars);
}

std::string stopped(const frame_state& st) {
  return st.stop_reason == "user_cancelled" ? "cancelled" : "interrupted";
}

sdk::chat_request text_request(std::string system, std::string user, std::string role_tag,
                               int64_t max_tokens) {
  sdk::chat_request req;
  sdk::chat_message sys;
  sys.author = sdk::role::system;
  sys.content = std::move(system);
  req.messages.push_back(std::move(sys));
  sdk::chat_message u;
  u.author = sdk::role::user;
  u.content = std::move(user);
  req.messages.push_back(std::move(u));
  req.role_tag = std::move(role_tag);
  req.max_tokens = max_tokens;
  return req;
}

// -- model calls ----------------------------------------------------------------------------

void reasoning_piece(frame_ptr self, const std::string& text) {
  auto& st = self->state;
  detail::reasoning_piece(st.emitter, st.at, st.reasoning, text);
}

void close_reasoning(frame_ptr self) {
  auto& st = self->state;
  detail::close_reasoning(st.emitter, st.at, st.reasoning);
}

void call_llm(frame_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
              core::placement at, on_reply done, on_failure failed, call_options opts) {
  auto& st = self->state;
  st.at = at;
  st.reasoning = {};
  st.think = core::think_stream{};
  if (!opts.continuing) {
    st.text.clear();
    st.text_started = false;
  }
  st.current_call = st.next_call++;
  st.current_llm = llm;
  auto id = st.current_call;
  auto role = req.role_tag;
  auto close_first = st.reasoning_closes_on_reply;
  self->request(llm, caf::infinite, chat_atom::value, llm_call{id, std::move(req)})
    .then(
      [=](llm_reply& reply) {
        auto& st = self->state;
        if (st.current_call != id || st.stage == frame_stage::done)
          return;
        st.current_call = 0;
        if (close_first)
          detail::close_reasoning(st.emitter, at, st.reasoning);
        emit(self, at,
             core::packets::usage(role, reply.result.usage, reply.cost_usd, origin_of(reply)));
        done(reply.result);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.current_call != id || st.stage == frame_stage::done)
          return;
        st.current_call = 0;
        failed(from_caf_error(err));
      });
}

void cancel_call(frame_ptr self) {
  auto& st = self->state;
  if (st.current_call != 0 && st.current_llm)
    self->send(st.current_llm, cancel_atom::value, st.current_call);
  st.current_call = 0;
}

void call_structured(frame_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
                     core::placement at, std::string tool,
                     std::function<std::string(const nlohmann::json&)> accept,
                     std::function<void()> ok, std::function<void(const std::string&)> fail,
                     bool repaired) {
  auto first = req;
  call_llm(
    self, llm, std::move(req), at,
    [=](sdk::chat_result& r) {
      auto args = core::reflective::structured_arguments(r.tool_calls, tool);
      std::string problem;
      if (auto* bad = std::get_if<core::reflective::invalid_output>(&args))
        problem = bad->problem;
      else
        problem = accept(std::get<nlohmann::json>(args));
      if (problem.empty()) {
        ok();
        return;
      }
      if (repaired) {
        fail("the answer was still not usable after one repair: " + problem);
        return;
      }
      emit(self, at,
           core::packets::notice("The " + tool + " answer was not usable (" + problem
                                 + "); asking once more."));
      call_structured(self, llm, core::reflective::repair_request(first, r, tool, problem), at,
                      tool, accept, ok, fail, true);
    },
    [=](const sdk::error& e) { fail(e.message); });
}

// -- research agents --------------------------------------------------------------------------

research_agent_actor start_agent(frame_ptr self, std::string call_id, std::string task,
                                 std::string context, int turn_index, int tab) {
  auto& st = self->state;
  agent_spec spec;
  spec.call_id = std::move(call_id);
  spec.task = std::move(task);
  spec.context = std::move(context);
  spec.turn_index = turn_index;
  spec.tab_index = tab;
  spec.max_cycles = st.spec.agent_max_cycles;
  spec.reasoning_model = st.spec.reasoning_model;
  // No agent gets more time than the research has left.
  auto limits = st.timing.agent_limits({st.spec.agent_force_report, st.spec.agent_hard_timeout});
  spec.force_report_after = limits.force_report_after;
  spec.hard_timeout = limits.hard_timeout;
  spec.context_tokens = st.spec.context_tokens;
  spec.step_max_tokens = st.spec.agent_step_max_tokens;
  spec.report_max_tokens = st.spec.agent_report_max_tokens;
  spec.report_continuations = st.spec.report_continuations;
  spec.current_datetime = st.spec.current_datetime;
  research_agent_actor agent;
  if (st.models.workers) {
    runner_setup where;
    where.directory = st.models.workers;
    where.spawn_timeout = st.models.spawn_timeout;
    agent = spawn_agent_runner(self->system(), std::move(spec), st.models.research, st.tools,
                               st.emitter, st.prompts, agent_parent_actor{self}, std::move(where));
  } else {
    agent = spawn_research_agent(self->system(), std::move(spec), st.models.research, st.tools,
                                 st.emitter, st.prompts, agent_parent_actor{self});
  }
  self->monitor(agent);
  return agent;
}

// -- checkpoints --------------------------------------------------------------------------------

namespace {

// Hands the store a checkpoint at `phase`, or with `sources_only` just the
// documents and citation numbers found so far.
void send_checkpoint(frame_ptr self, core::checkpoint_phase phase, bool sources_only) {
  auto& st = self->state;
  if (!st.spec.checkpoints)
    return;
  auto c = std::make_shared<core::research_checkpoint>();
  c->phase = phase;
  c->sources_only = sources_only;
  if (!sources_only)
    st.strat->fill_checkpoint(*c);
  c->global = st.global;
  c->documents = st.docs_by_id;
  c->findings = st.findings;
  c->notices = st.notices;
  c->elapsed_ms = st.elapsed_before_ms + st.timing.elapsed().count();
  self->send(st.emitter, checkpoint_atom::value, checkpoint_ptr{std::move(c)});
}

} // namespace

void take_checkpoint(frame_ptr self, core::checkpoint_phase phase) {
  send_checkpoint(self, phase, false);
}

// -- the final report ---------------------------------------------------------------------------

namespace {

void call_final(frame_ptr self, sdk::chat_request req, bool continuing);
void report_cut(frame_ptr self);

void emit_chunk(frame_ptr self, const core::citation_chunk& chunk) {
  auto& st = self->state;
  detail::emit_chunk(st.emitter, st.at, st.text, chunk);
}

void start_verification(frame_ptr self, session_result out) {
  auto& st = self->state;
  st.stage = frame_stage::verify;
  auto vs = verification_spec(out.report, st.global, st.docs_by_id, st.spec.verify_action,
                              st.spec.verify_timeout, st.timing.left(),
                              render(self, "verification_judge", {}));
  st.pending = std::move(out);
  st.verifier = spawn_verifier(self->system(), std::move(vs), st.models.judge,
                               caf::actor_cast<verification_listener_actor>(self));
  self->monitor(st.verifier);
}

void deliver(frame_ptr self, session_result out) {
  auto& st = self->state;
  emit(self, st.at,
       st.stop_requested ? core::packets::stop(st.stop_reason) : core::packets::stop());
  finish(self, std::move(out));
}

void verification_done(frame_ptr self, std::string report, const std::string& summary,
                       std::string claims) {
  auto& st = self->state;
  if (st.stage != frame_stage::verify || !st.pending)
    return;
  if (st.verifier)
    self->demonitor(st.verifier.address());
  st.verifier = nullptr;
  auto packet = nlohmann::json::parse(summary, nullptr, false);
  if (packet.is_object() && packet.contains("type"))
    emit(self, st.at, packet);
  // The live text ends with the verification section too; the marks and
  // new citations are in the delivered report (and in the claim packets).
  if (auto piece = verification_section(report); !piece.empty()) {
    st.text += piece;
    emit(self, st.at, core::packets::message_delta(piece));
  }
  auto out = std::move(*st.pending);
  st.pending.reset();
  if (!report.empty()) {
    out.report = std::move(report);
    out.claims = std::move(claims);
  }
  deliver(self, std::move(out));
}

// One call of the final report: the first, or one continuing the text of a
// report that the output limit cut.
void call_final(frame_ptr self, sdk::chat_request req, bool continuing) {
  auto& st = self->state;
  st.final_call_streamed = false;
  call_options opts;
  opts.continuing = continuing;
  call_llm(
    self, st.models.report, std::move(req), turn(st.final_turn),
    [=](sdk::chat_result& r) {
      auto& st = self->state;
      if (!st.text_started && r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
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
          call_final(self, core::continuation_request(st.final_request, st.final_raw), true);
          return;
        }
        report_cut(self);
      } else if (r.finish == sdk::finish_reason::content_filter) {
        st.notices.push_back("the model's content filter stopped the final report");
        emit(self, st.at,
             core::packets::notice("The model's content filter stopped the "
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
    opts);
}

// The report is cut by the output limit and stays so: a notice, a line for
// the terminal (the notices), and a visible note at the end of the report.
void report_cut(frame_ptr self) {
  auto& st = self->state;
  st.report_cut = true;
  auto why = core::report_cut_notice(st.spec.final_max_tokens, st.continuations);
  st.notices.push_back(why);
  emit(self, st.at, core::packets::notice(why));
  report_piece(self,
               core::report_cut_note(st.spec.final_max_tokens, "research.max_tokens.final_report"));
}

} // namespace

void begin_final(frame_ptr self, int t, bool timer) {
  auto& st = self->state;
  st.stage = frame_stage::final;
  st.final_turn = t;
  st.at = turn(t);
  st.processor = std::make_unique<core::citation_processor>(core::citation_mode::hyperlink);
  st.processor->update_mapping(st.global);
  if (timer)
    self->delayed_send(self, st.spec.final_report_timeout, final_timeout_atom::value);
}

void write_final(frame_ptr self, sdk::chat_request req) {
  auto& st = self->state;
  if (st.stop_requested) {
    // Interrupted: no new model call; what was found is the report.
    fallback_report(self, "the research was " + stopped(st));
    return;
  }
  st.final_request = std::move(req);
  st.final_raw.clear();
  st.continuations = 0;
  call_final(self, st.final_request, false);
}

void report_piece(frame_ptr self, const std::string& raw) {
  auto& st = self->state;
  if (!st.text_started) {
    close_reasoning(self);
    if (st.reasoning_turn && st.reasoning.reasoned)
      st.at.turn_index += 1;
    auto docs = final_documents(st.global, st.docs_by_id);
    emit(self, st.at, core::packets::message_start(&docs, st.timing.elapsed_seconds()));
    st.text_started = true;
  }
  emit_chunk(self, st.processor->process(raw));
}

void fallback_report(frame_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.stop_requested) {
    emit(self, turn(st.final_turn),
         core::packets::notice("The research was " + stopped(st)
                               + "; these are the findings gathered until then."));
  } else {
    st.notices.push_back("the final report was assembled from the research agents' findings: "
                         + why);
    emit(self, turn(st.final_turn),
         core::packets::notice("The final report could not be written by the model (" + why
                               + "); these are the research findings."));
  }
  auto body = core::findings_report(st.findings, why);
  report_piece(self, st.text_started ? "\n\n" + body : body);
  complete_report(self);
}

void complete_report(frame_ptr self) {
  auto& st = self->state;
  emit_chunk(self, st.processor->finish());
  if (st.global.empty() && !st.stop_requested && !st.answered_directly) {
    // Every agent failed, none ran, or none read anything: whatever text the
    // model wrote is not built on sources.
    fail(self, no_sources_reason(st.notices), st.final_turn);
    return;
  }
  // The numbers the report cites are stored with it, also those found after
  // the last checkpoint (a research stopped while its agents reported).
  send_checkpoint(self, core::checkpoint_phase::final_report, true);
  session_result out;
  out.status = session_status::report;
  out.report = st.text;
  out.sources = cited_sources(*st.processor, st.global);
  for (auto& s : out.sources)
    if (auto d = st.docs_by_id.find(s.document_id); d != st.docs_by_id.end())
      s.snippet_only = core::snippet_only(d->second);
  out.truncated = st.report_cut;
  if (!st.stop_requested && !st.answered_directly)
    if (auto why = unanswered_notice(st.spec.question, st.docs_by_id)) {
      st.notices.push_back(*why);
      emit(self, st.at, core::packets::notice(*why));
    }
  if (st.spec.verify && !st.stop_requested && !out.report.empty()) {
    start_verification(self, std::move(out));
    return;
  }
  deliver(self, std::move(out));
}

// -- the end ----------------------------------------------------------------------------------------

void finish(frame_ptr self, session_result result) {
  auto& st = self->state;
  if (st.stage == frame_stage::done)
    return;
  st.stage = frame_stage::done;
  result.plan = st.strat->plan_text();
  result.notices = st.notices;
  result.interrupted = st.stop_requested;
  st.strat->on_finish();
  if (st.verifier)
    self->send_exit(st.verifier, caf::exit_reason::user_shutdown);
  // A normal exit does not end linked actors: stop the collector explicitly.
  self->unlink_from(st.collector);
  self->send_exit(st.collector, caf::exit_reason::user_shutdown);
  self->send(st.requester, session_done_atom::value, std::move(result));
  self->quit();
}

void fail(frame_ptr self, const std::string& why, int t) {
  emit(self, turn(t), core::packets::error(why, "session_failed"));
  emit(self, turn(t), core::packets::stop("failed"));
  session_result r;
  r.status = session_status::failed;
  r.failure = why;
  finish(self, std::move(r));
}

void stopped_before_start(frame_ptr self, int t) {
  auto& st = self->state;
  emit(self, turn(t), core::packets::stop(st.stop_reason));
  session_result out;
  out.status = session_status::failed;
  out.failure = "the research was " + stopped(st) + " before it started";
  finish(self, std::move(out));
}

// -- the actor ----------------------------------------------------------------------------------------

namespace {

frame_actor::behavior_type frame_impl(frame_ptr self, session_spec spec, session_models models,
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
  st.time = actor_time{self->clock()};
  st.timing = core::research_deadline{st.spec.deadline, st.time};
  st.strat = st.spec.strategy == research_strategy::reflective ? make_reflective_strategy(self)
                                                               : make_orchestrator_strategy(self);
  st.collector = spawn_citation_collector(self->system(), st.strat->resume());
  self->link_to(st.collector);
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
      verification_done(self, std::string{}, "{}", std::string{});
      return;
    }
    st.strat->on_down(dm);
  });
  self->send(self, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) { self->state.strat->start(); },
    [=](strategy_timer_atom) {
      if (self->state.stage != frame_stage::done)
        self->state.strat->on_timer();
    },
    [=](delta_atom, llm_deltas& ds) {
      auto& st = self->state;
      for (auto& d : ds) {
        if (d.call_id != st.current_call || st.stage == frame_stage::done)
          return;
        switch (d.kind) {
          case delta_kind::reasoning:
            reasoning_piece(self, d.text);
            break;
          case delta_kind::text:
            if (st.stage == frame_stage::final) {
              st.final_call_streamed = true;
              report_piece(self, d.text);
            } else {
              st.strat->on_text(d.text);
            }
            break;
          case delta_kind::tool_call:
            if (st.stage == frame_stage::research)
              st.strat->on_tool_delta(d.tool);
            break;
          case delta_kind::usage:
            break;
        }
      }
    },
    [=](agent_done_atom, agent_result& r) {
      if (self->state.stage != frame_stage::done)
        self->state.strat->on_agent_done(r);
    },
    [=](deadline_soon_atom) {
      auto& st = self->state;
      if (st.stage == frame_stage::done)
        return;
      st.deadline_soon = true;
      st.strat->on_deadline_soon();
    },
    [=](deadline_now_atom) {
      auto& st = self->state;
      if (st.stage == frame_stage::done || st.deadline_passed)
        return;
      st.deadline_passed = true;
      auto t = st.strat->turn_now();
      if (st.stop_requested) {
        st.notices.push_back("the research was " + stopped(st));
        emit(self, turn(t),
             core::packets::notice("The research was " + stopped(st)
                                   + "; the report holds what was found until then."));
      } else {
        st.notices.push_back("the research deadline was reached");
        emit(self, turn(t),
             core::packets::notice("The research deadline was reached; the "
                                   "report is written from what was found so "
                                   "far."));
      }
      // The call in flight is cancelled in every phase: nothing waits for a
      // model past the deadline (the final report has its own time limit).
      if (st.stage == frame_stage::final) {
        if (st.stop_requested)
          self->send(self, final_timeout_atom::value);
        return;
      }
      if (st.stage == frame_stage::research)
        st.strat->on_deadline();
    },
    [=](final_timeout_atom) {
      auto& st = self->state;
      if (st.stage != frame_stage::final)
        return;
      cancel_call(self);
      auto why = st.stop_requested ? "the research was " + stopped(st)
                                   : std::string{"it ran out of time"};
      if (!st.stop_requested)
        st.notices.push_back("the final report ran out of time");
      if (st.text_started) {
        report_piece(self, "\n\n*(The report was cut short: " + why + ".)*");
        complete_report(self);
      } else {
        fallback_report(self, why);
      }
    },
    [=](verified_claim_atom, const std::string& packet) {
      auto& st = self->state;
      if (st.stage != frame_stage::verify)
        return;
      auto p = nlohmann::json::parse(packet, nullptr, false);
      if (p.is_object())
        emit(self, st.at, p);
    },
    [=](verified_atom, std::string& report, const std::string& summary, std::string& claims) {
      verification_done(self, std::move(report), summary, std::move(claims));
    },
    [=](stop_atom, std::string& reason) {
      auto& st = self->state;
      if (st.stop_requested || st.stage == frame_stage::done)
        return;
      if (!reason.empty())
        st.stop_reason = std::move(reason);
      self->send(self, stop_atom::value);
    },
    [=](stop_atom) {
      auto& st = self->state;
      if (st.stop_requested || st.stage == frame_stage::done)
        return;
      st.stop_requested = true;
      if (st.stage == frame_stage::verify) {
        // What is not judged yet goes out unverified.
        if (st.verifier)
          self->send(st.verifier, stop_atom::value);
        return;
      }
      if (st.deadline_passed) {
        // Already writing the report: stop that too.
        if (st.stage == frame_stage::final)
          self->send(self, final_timeout_atom::value);
        return;
      }
      self->send(self, deadline_now_atom::value);
    },
  };
}

} // namespace

} // namespace detail

session_actor spawn_research_session(caf::actor_system& sys, session_spec spec,
                                     session_models models, tool_set tools, emitter_actor emitter,
                                     std::shared_ptr<const core::prompt_library> prompts,
                                     session_requester_actor requester) {
  return sys.spawn(detail::frame_impl, std::move(spec), std::move(models), std::move(tools),
                   std::move(emitter), std::move(prompts), std::move(requester));
}

} // namespace quarry::actors
