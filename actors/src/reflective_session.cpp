// The reflective strategy (seed 001's five agents) as a session actor:
// coordinator, background investigator, planner, researcher (classic for
// light depth, the ReAct research agent for medium and extended), reflector
// after every step, synthesizer; query modes simple / web_search /
// deep_research. Policy (step limits, refused decisions, plan merging) is in
// core/reflective.hpp; this actor only sends what core builds and enforces
// what core decides.

#include "actor_time.hpp"
#include "quarry/actors/reflective_session.hpp"

#include "quarry/actors/citation_collector.hpp"

#include "quarry/core/citations.hpp"
#include "quarry/core/deadline.hpp"
#include "quarry/core/document_numbers.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/reflective_requests.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include "final_report.hpp"
#include "reasoning_packets.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <functional>
#include <map>

namespace quarry::actors {

namespace {

namespace rf = core::reflective;

enum class phase { classify, background, plan, step, reflect, final, verify, done };

struct reflective_state {
  session_spec spec;
  session_models models;
  tool_set tools;
  emitter_actor emitter;
  std::shared_ptr<const core::prompt_library> prompts;
  session_requester_actor requester;
  detail::actor_time time;
  core::research_deadline timing;
  phase now = phase::classify;
  bool stop_requested = false;
  std::string stop_reason = "interrupted";
  bool deadline_passed = false;

  rf::classification classified;
  rf::depth depth = rf::depth::light;
  rf::depth_profile profile;
  rf::query_mode mode = rf::query_mode::deep_research;
  std::string background;
  std::optional<rf::plan> plan;
  std::optional<rf::reflection> feedback;
  size_t step = 0;
  // Turn of the next packets: each stage gets its own.
  int turn = 0;

  citation_collector_actor collector;
  core::citation_mapping global;
  std::map<std::string, sdk::document> docs_by_id;
  std::vector<std::pair<std::string, std::string>> findings; // step, observation

  // The classic researcher's step: its documents and its tool round.
  core::document_numbers numbers;
  std::vector<sdk::tool_call> step_calls;
  std::map<std::string, std::string> step_results;
  // The ReAct researcher of the step.
  research_agent_actor agent;

  // The LLM call in progress.
  uint64_t next_call = 1;
  uint64_t current_call = 0;
  llm_provider_actor current_llm;
  core::placement at;
  detail::reasoning_state reasoning;
  std::string text;
  bool text_started = false;
  /// The report answers without research (query mode simple): no documents
  /// to hold the question's words.
  bool answered_directly = false;
  std::unique_ptr<core::citation_processor> processor;

  verifier_actor verifier;
  std::optional<session_result> pending;
  std::vector<std::string> notices;
  static inline const char* name = "quarry.reflective_session";
};

/// The web_search mode's step took longer than its fallback time.
using web_search_late_atom = caf::atom_constant<caf::atom("wslate")>;

/// The reflective session's whole interface: the session's, and the
/// web_search mode's timer.
using reflective_full_actor = session_full_actor::extend<caf::reacts_to<web_search_late_atom>>;

using self_ptr = reflective_full_actor::stateful_pointer<reflective_state>;

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

void emit(self_ptr self, const core::placement& at, const nlohmann::json& obj) {
  self->send(self->state.emitter, packet_atom::value, make_packet(at, obj));
}

core::placement turn(int t) {
  return {t, 0, std::nullopt};
}

core::placement next_turn(self_ptr self) {
  return turn(++self->state.turn);
}

std::string render(self_ptr self, std::string_view name, core::prompt_vars vars) {
  vars.emplace("current_datetime", self->state.spec.current_datetime);
  return core::render_prompt(*self->state.prompts, name, vars);
}

void notice(self_ptr self, const std::string& text) {
  self->state.notices.push_back(text);
  emit(self, turn(self->state.turn), core::packets::notice(text));
}

void finish(self_ptr self, session_result result) {
  auto& st = self->state;
  if (st.now == phase::done)
    return;
  st.now = phase::done;
  // The plan as the orchestrator strategy gives it: a numbered list (the
  // packets carry the structured plan).
  if (st.plan)
    for (size_t i = 0; i < st.plan->steps.size(); ++i)
      result.plan += std::to_string(i + 1) + ". " + st.plan->steps[i].title + " ("
                     + rf::to_string(st.plan->steps[i].status) + ")\n";
  result.notices = st.notices;
  result.interrupted = st.stop_requested;
  if (st.agent)
    self->send_exit(st.agent, caf::exit_reason::user_shutdown);
  if (st.verifier)
    self->send_exit(st.verifier, caf::exit_reason::user_shutdown);
  self->unlink_from(st.collector);
  self->send_exit(st.collector, caf::exit_reason::user_shutdown);
  self->send(st.requester, session_done_atom::value, std::move(result));
  self->quit();
}

std::string stopped(const reflective_state& st) {
  return st.stop_reason == "user_cancelled" ? "cancelled" : "interrupted";
}

// Starts an LLM call; `on_done` gets the result, failures go to `on_error`.
void call_llm(self_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
              core::placement at, std::function<void(sdk::chat_result&)> on_done,
              std::function<void(const sdk::error&)> on_error) {
  auto& st = self->state;
  st.at = at;
  st.reasoning = {};
  st.text.clear();
  st.text_started = false;
  st.current_call = st.next_call++;
  st.current_llm = llm;
  auto id = st.current_call;
  auto role = req.role_tag;
  self->request(llm, caf::infinite, chat_atom::value, llm_call{id, std::move(req)})
    .then(
      [=](llm_reply& reply) {
        if (self->state.current_call != id || self->state.now == phase::done)
          return;
        self->state.current_call = 0;
        detail::close_reasoning(self->state.emitter, at, self->state.reasoning);
        emit(self, at, core::packets::usage(role, reply.result.usage, reply.cost_usd));
        on_done(reply.result);
      },
      [=](caf::error& err) {
        if (self->state.current_call != id || self->state.now == phase::done)
          return;
        self->state.current_call = 0;
        on_error(from_caf_error(err));
      });
}

void cancel_call(self_ptr self) {
  auto& st = self->state;
  if (st.current_call != 0 && st.current_llm)
    self->send(st.current_llm, cancel_atom::value, st.current_call);
  st.current_call = 0;
}

// A structured call: one tool, required. `accept` reads the arguments and
// returns the problem with them (empty: accepted). An unusable answer gets
// one repair request; a second one, or a failed call, goes to `on_fail`.
void call_structured(self_ptr self, const llm_provider_actor& llm, sdk::chat_request req,
                     core::placement at, std::string tool,
                     std::function<std::string(const nlohmann::json&)> accept,
                     std::function<void()> on_ok,
                     std::function<void(const std::string&)> on_fail, bool repaired = false) {
  auto first = req;
  call_llm(
    self, llm, std::move(req), at,
    [=](sdk::chat_result& r) {
      auto args = rf::structured_arguments(r.tool_calls, tool);
      std::string problem;
      if (auto* bad = std::get_if<rf::invalid_output>(&args))
        problem = bad->problem;
      else
        problem = accept(std::get<nlohmann::json>(args));
      if (problem.empty()) {
        on_ok();
        return;
      }
      if (repaired) {
        on_fail("the answer was still not usable after one repair: " + problem);
        return;
      }
      emit(self, at, core::packets::notice("The " + tool + " answer was not usable ("
                                           + problem + "); asking once more."));
      call_structured(self, llm, rf::repair_request(first, r, tool, problem), at, tool, accept,
                      on_ok, on_fail, true);
    },
    [=](const sdk::error& e) { on_fail(e.message); });
}

// The tool of `kind` the strategy uses (web search before internal search).
const tool_set::entry* tool_of(self_ptr self, std::initializer_list<sdk::tool_kind> kinds,
                               std::string* name = nullptr) {
  for (auto kind : kinds)
    for (const auto& [n, e] : self->state.tools.tools)
      if (e.kind == kind) {
        if (name != nullptr)
          *name = n;
        return &e;
      }
  return nullptr;
}

void start_simple(self_ptr self, const std::string& why);
void start_background(self_ptr self);
void start_planner(self_ptr self);
void start_step(self_ptr self);
void start_reflect(self_ptr self, size_t done, size_t new_sources);
void start_synthesis(self_ptr self);
void step_done(self_ptr self, std::string observation, size_t new_sources,
               const std::string& failure);

// -- the final text (synthesis or direct answer) -------------------------------------

void report_piece(self_ptr self, const std::string& raw) {
  auto& st = self->state;
  if (!st.text_started) {
    auto docs = detail::final_documents(st.global, st.docs_by_id);
    emit(self, st.at, core::packets::message_start(&docs, st.timing.elapsed_seconds()));
    st.text_started = true;
  }
  detail::emit_chunk(st.emitter, st.at, st.text, st.processor->process(raw));
}

void deliver(self_ptr self, session_result out) {
  auto& st = self->state;
  emit(self, st.at, st.stop_requested ? core::packets::stop(st.stop_reason)
                                       : core::packets::stop());
  finish(self, std::move(out));
}

void start_verification(self_ptr self, session_result out) {
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

void verification_done(self_ptr self, std::string report, const std::string& summary) {
  auto& st = self->state;
  if (st.now != phase::verify || !st.pending)
    return;
  if (st.verifier)
    self->demonitor(st.verifier.address());
  st.verifier = nullptr;
  auto packet = nlohmann::json::parse(summary, nullptr, false);
  if (packet.is_object() && packet.contains("type"))
    emit(self, st.at, packet);
  if (auto piece = detail::verification_section(report); !piece.empty())
    emit(self, st.at, core::packets::message_delta(piece));
  auto out = std::move(*st.pending);
  st.pending.reset();
  if (!report.empty())
    out.report = std::move(report);
  deliver(self, std::move(out));
}

void complete_report(self_ptr self) {
  auto& st = self->state;
  detail::emit_chunk(st.emitter, st.at, st.text, st.processor->finish());
  if (st.global.empty() && !st.stop_requested && !st.answered_directly) {
    // A research (not a direct answer) that read nothing: no report to trust.
    auto why = detail::no_sources_reason(st.notices);
    emit(self, turn(st.turn), core::packets::error(why, "session_failed"));
    emit(self, turn(st.turn), core::packets::stop("failed"));
    session_result failed;
    failed.status = session_status::failed;
    failed.failure = why;
    finish(self, std::move(failed));
    return;
  }
  session_result out;
  out.status = session_status::report;
  out.report = st.text;
  out.sources = detail::cited_sources(*st.processor, st.global);
  if (!st.stop_requested && !st.answered_directly)
    if (auto why = detail::unanswered_notice(st.spec.question, st.docs_by_id))
      notice(self, *why);
  if (st.spec.verify && !st.stop_requested && !out.report.empty()) {
    start_verification(self, std::move(out));
    return;
  }
  deliver(self, std::move(out));
}

// The report from the observations when the model cannot write one.
void fallback_report(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!st.stop_requested)
    notice(self, "The report could not be written by the model (" + why
                   + "); these are the research findings.");
  auto body = core::findings_report(st.findings, why);
  report_piece(self, st.text_started ? "\n\n" + body : body);
  complete_report(self);
}

// Hands the numbering, documents and findings to the emitter, which passes
// them to the store with the last seq (research.checkpoints): the stored
// report's Sources come from there. A resumed reflective session starts
// over, so this is the only checkpoint it takes.
void take_checkpoint(self_ptr self) {
  auto& st = self->state;
  if (!st.spec.checkpoints)
    return;
  core::research_checkpoint c;
  c.phase = core::checkpoint_phase::final_report;
  if (st.plan)
    for (size_t i = 0; i < st.plan->steps.size(); ++i)
      c.plan += std::to_string(i + 1) + ". " + st.plan->steps[i].title + "\n";
  c.global = st.global;
  c.documents = st.docs_by_id;
  c.findings = st.findings;
  c.notices = st.notices;
  c.elapsed_ms = st.timing.elapsed().count();
  self->send(st.emitter, checkpoint_atom::value,
             core::to_json(c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void begin_final(self_ptr self) {
  auto& st = self->state;
  take_checkpoint(self);
  st.now = phase::final;
  st.at = next_turn(self);
  st.processor = std::make_unique<core::citation_processor>(core::citation_mode::hyperlink);
  st.processor->update_mapping(st.global);
  self->delayed_send(self, st.spec.final_report_timeout, final_timeout_atom::value);
}

void write_final(self_ptr self, sdk::chat_request req) {
  auto& st = self->state;
  if (st.stop_requested) {
    fallback_report(self, "the research was " + stopped(st));
    return;
  }
  call_llm(
    self, st.models.report, std::move(req), st.at,
    [=](sdk::chat_result& r) {
      auto& st = self->state;
      if (!st.text_started) {
        if (r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
          fallback_report(self, "the model wrote an empty report");
          return;
        }
        report_piece(self, r.text);
      }
      complete_report(self);
    },
    [=](const sdk::error& e) { fallback_report(self, e.message); });
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

// -- simple answers ------------------------------------------------------------------

void start_simple(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!why.empty())
    notice(self, why);
  st.answered_directly = true;
  begin_final(self);
  std::string user;
  // The sources already in the conversation (a follow-up chain).
  for (const auto& m : st.spec.reflective.conversation)
    if (!sdk::trim(m.content).empty())
      user += (m.author == sdk::role::user ? "User: " : "Assistant: ")
              + std::string{sdk::utf8_prefix(m.content, 8000)} + "\n\n";
  if (!user.empty())
    user = "The conversation so far:\n\n" + user + "The question:\n\n";
  user += st.spec.question;
  write_final(self, text_request(render(self, "reflective_simple", {}), std::move(user),
                                 "simple", st.spec.final_max_tokens));
}

// -- coordinator ----------------------------------------------------------------------

void after_classification(self_ptr self) {
  auto& st = self->state;
  const auto& c = st.classified;
  // `auto` follows the coordinator's complexity (its recommended depth is
  // shown in the packet, not taken).
  st.depth = rf::resolve_depth(st.spec.reflective.depth, c.complexity);
  st.profile = rf::profile_for(st.depth, st.spec.reflective.max_search_queries,
                               st.spec.reflective.max_urls_to_crawl);
  auto mode = st.mode;
  // A simple question is answered directly, unless a depth was asked for.
  if (mode == rf::query_mode::deep_research && c.complexity == rf::complexity::simple
      && st.spec.reflective.depth == rf::depth::automatic)
    mode = rf::query_mode::simple;
  emit(self, turn(st.turn), rf::classification_packet(c, st.depth, mode));
  if (st.spec.clarify && c.is_ambiguous && !c.clarifying_questions.empty()) {
    std::string questions;
    for (size_t i = 0; i < c.clarifying_questions.size(); ++i)
      questions += std::to_string(i + 1) + ". " + c.clarifying_questions[i] + "\n";
    emit(self, turn(st.turn), core::packets::clarification(questions));
    emit(self, turn(st.turn), core::packets::stop("clarification"));
    session_result out;
    out.status = session_status::clarification;
    out.questions = questions;
    finish(self, std::move(out));
    return;
  }
  if (mode == rf::query_mode::simple) {
    start_simple(self, {});
    return;
  }
  start_background(self);
}

// A plan of one step on the whole question (the web_search mode's, and the
// fallback when the first plan cannot be written).
rf::plan one_step_plan(const reflective_state& st) {
  rf::plan_draft d;
  d.title = st.spec.question;
  rf::plan_step s;
  s.title = st.spec.question;
  s.description = st.spec.question;
  d.steps.push_back(std::move(s));
  return rf::merge_plan(nullptr, std::move(d), st.profile).next;
}

// The web_search mode: one light step on the question, answered directly
// when it takes longer than its fallback time.
void start_web_search(self_ptr self) {
  auto& st = self->state;
  st.depth = rf::depth::light;
  st.profile = rf::profile_for(st.depth, st.spec.reflective.max_search_queries,
                               st.spec.reflective.max_urls_to_crawl);
  st.plan = one_step_plan(st);
  self->delayed_send(self, st.spec.reflective.web_search_fallback, web_search_late_atom::value);
  emit(self, next_turn(self), rf::plan_packet(*st.plan));
  start_step(self);
}

void start_classify(self_ptr self) {
  auto& st = self->state;
  st.now = phase::classify;
  auto max_q = st.spec.reflective.max_clarifying_questions;
  auto req = rf::structured_request(
    render(self, "reflective_coordinator", {{"max_clarifying_questions", std::to_string(max_q)}}),
    rf::coordinator_input(st.spec.question, st.spec.reflective.conversation),
    rf::classify_tool(max_q), "classify");
  call_structured(
    self, st.models.clarify, std::move(req), turn(0), "classify_question",
    [=](const nlohmann::json& args) -> std::string {
      auto read = rf::read_classification(args, max_q);
      if (auto* bad = std::get_if<rf::invalid_output>(&read))
        return bad->problem;
      self->state.classified = std::get<rf::classification>(std::move(read));
      return {};
    },
    [=] { after_classification(self); },
    [=](const std::string& why) {
      // The coordinator's step failed: research at the requested depth.
      self->state.classified = rf::classification{};
      notice(self, "The question could not be classified (" + why
                     + "); researching it as a moderate question.");
      after_classification(self);
    });
}

// -- background investigator ----------------------------------------------------------

// Runs `queries` on the search tool; `done` gets the results' text.
void run_searches(self_ptr self, const std::vector<std::string>& queries, core::placement at,
                  std::function<void(std::vector<sdk::tool_result>)> done) {
  std::string name;
  const auto* search = tool_of(self, {sdk::tool_kind::web_search,
                                      sdk::tool_kind::internal_search}, &name);
  if (search == nullptr || queries.empty()) {
    done({});
    return;
  }
  emit(self, at, core::packets::search_tool_start(search->kind == sdk::tool_kind::web_search));
  emit(self, at, core::packets::search_tool_queries_delta(queries));
  auto args = nlohmann::json{{"queries", queries}}.dump();
  auto hdl = search->actor;
  self->request(hdl, caf::infinite, run_atom::value, tool_call_msg{1, args})
    .then(
      [=](tool_reply& reply) {
        if (self->state.now == phase::done)
          return;
        emit(self, at, core::packets::search_tool_documents_delta(reply.result.documents));
        emit(self, at, core::packets::section_end());
        done({std::move(reply.result)});
      },
      [=](caf::error&) {
        if (self->state.now == phase::done)
          return;
        emit(self, at, core::packets::section_end());
        done({});
      });
}

void start_background(self_ptr self) {
  auto& st = self->state;
  st.now = phase::background;
  auto at = next_turn(self);
  auto queries = std::make_shared<std::vector<std::string>>();
  auto req = rf::structured_request(render(self, "reflective_queries", {{"max_queries", "3"}}),
                                    st.spec.question, rf::queries_tool(3), "plan");
  call_structured(
    self, st.models.plan, std::move(req), at, "search_queries",
    [=](const nlohmann::json& args) -> std::string {
      auto read = rf::read_queries(args, 3);
      if (auto* bad = std::get_if<rf::invalid_output>(&read))
        return bad->problem;
      *queries = std::get<std::vector<std::string>>(std::move(read));
      return {};
    },
    [=] {
      run_searches(self, *queries, at, [=](std::vector<sdk::tool_result> results) {
        auto& st = self->state;
        if (st.now != phase::background)
          return;
        // Snippets only: titles and snippets as the planner's context.
        std::string text;
        for (const auto& r : results)
          for (const auto& d : r.documents)
            text += "- " + d.title + ": "
                    + std::string{sdk::utf8_prefix(d.snippet.empty() ? d.content : d.snippet,
                                                   400)}
                    + "\n";
        st.background = std::move(text);
        start_planner(self);
      });
    },
    [=](const std::string& why) {
      notice(self, "No background search (" + why + ").");
      start_planner(self);
    });
}

// -- planner --------------------------------------------------------------------------

void start_planner(self_ptr self) {
  auto& st = self->state;
  if (st.stop_requested || st.deadline_passed) {
    start_synthesis(self);
    return;
  }
  st.now = phase::plan;
  auto at = next_turn(self);
  auto room = rf::room_for(st.plan ? &*st.plan : nullptr, st.profile);
  auto draft = std::make_shared<rf::plan_draft>();
  auto req = rf::structured_request(
    render(self, "reflective_planner",
           {{"depth", rf::to_string(st.depth)}, {"step_range", rf::step_range(st.profile)}}),
    rf::planner_input(st.spec.question, st.background, st.plan ? &*st.plan : nullptr,
                      st.feedback ? &*st.feedback : nullptr, room, st.depth),
    rf::plan_tool(room.at_least, room.room), "plan");
  call_structured(
    self, st.models.plan, std::move(req), at, "write_plan",
    [=](const nlohmann::json& args) -> std::string {
      auto read = rf::read_plan(args, room.at_least, room.room);
      if (auto* bad = std::get_if<rf::invalid_output>(&read))
        return bad->problem;
      *draft = std::get<rf::plan_draft>(std::move(read));
      return {};
    },
    [=] {
      auto& st = self->state;
      auto update = rf::merge_plan(st.plan ? &*st.plan : nullptr, std::move(*draft), st.profile);
      st.plan = std::move(update.next);
      st.feedback.reset();
      for (const auto& n : update.notices)
        notice(self, n);
      emit(self, at, rf::plan_packet(*st.plan));
      start_step(self);
    },
    [=](const std::string& why) {
      auto& st = self->state;
      if (!st.plan) {
        // The first plan failed: one step on the whole question.
        notice(self, "The plan could not be written (" + why
                       + "); researching the question as one step.");
        st.plan = one_step_plan(st);
      } else {
        notice(self, "The plan could not be adjusted (" + why + "); keeping it.");
      }
      st.feedback.reset();
      emit(self, at, rf::plan_packet(*st.plan));
      start_step(self);
    });
}

// -- researcher -----------------------------------------------------------------------

// The step's observation as the collector numbers it: its local markers
// become global ones (the number of sources that were new is returned too).
void collapse_observation(self_ptr self, agent_result r) {
  auto& st = self->state;
  auto before = st.global.size();
  auto title = st.plan->steps[st.step].title;
  collapse_request req;
  req.reports.emplace_back(title, std::move(r));
  self->request(st.collector, caf::infinite, collapse_atom::value, std::move(req))
    .then(
      [=](collapse_reply& reply) {
        auto& st = self->state;
        if (st.now != phase::step)
          return;
        st.global = std::move(reply.global);
        st.docs_by_id = std::move(reply.documents);
        auto text = reply.texts.empty() ? std::string{} : std::move(reply.texts.front());
        step_done(self, std::move(text), st.global.size() - before, {});
      },
      [=](caf::error& err) {
        if (self->state.now != phase::step)
          return;
        step_done(self, {}, 0, "the citation collector failed: " + caf::to_string(err));
      });
}

// The classic researcher's observation from what its searches and reads
// returned.
void write_observation(self_ptr self) {
  auto& st = self->state;
  if (st.now != phase::step)
    return;
  auto task = rf::step_task(st.spec.question, *st.plan, st.step);
  auto req = text_request(render(self, "reflective_observation", {}), task, "report", 4000);
  if (!st.step_calls.empty()) {
    sdk::chat_message calls;
    calls.author = sdk::role::assistant;
    calls.tool_calls = st.step_calls;
    req.messages.push_back(std::move(calls));
    for (const auto& c : st.step_calls) {
      sdk::chat_message m;
      m.author = sdk::role::tool;
      m.tool_call_id = c.id;
      m.tool_name = c.name;
      m.content = st.step_results[c.id];
      req.messages.push_back(std::move(m));
    }
  } else {
    // An analysis step: what the completed steps found.
    std::string earlier;
    for (const auto& s : st.plan->steps)
      if (s.status == rf::step_status::completed)
        earlier += "\n## " + s.title + "\n\n" + s.observation + "\n";
    if (!earlier.empty())
      req.messages.back().content += "\n\nWhat the completed steps found:\n" + earlier;
  }
  auto at = turn(st.turn);
  call_llm(
    self, st.models.research, std::move(req), at,
    [=](sdk::chat_result& r) {
      auto& st = self->state;
      if (r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
        step_done(self, {}, 0, "the researcher wrote an empty observation");
        return;
      }
      if (st.step_calls.empty()) {
        // Analysis: its markers are already the session's numbers.
        step_done(self, r.text, 0, {});
        return;
      }
      agent_result res;
      res.ok = true;
      res.report = r.text;
      res.cited = core::cited_documents(r.text, st.numbers.documents());
      collapse_observation(self, std::move(res));
    },
    [=](const sdk::error& e) { step_done(self, {}, 0, e.message); });
}

// Runs one tool of the classic researcher, records its result for the
// observation (documents numbered as an agent numbers them), then calls
// `then` with the documents it returned (none when it failed).
void run_step_tool(self_ptr self, const tool_set::entry& tool, const std::string& name,
                   const nlohmann::json& args, core::placement at,
                   std::function<void(std::vector<sdk::document>)> then) {
  auto& st = self->state;
  sdk::tool_call call;
  call.id = "call_" + std::to_string(st.step_calls.size() + 1);
  call.name = name;
  call.arguments = args.dump();
  st.step_calls.push_back(call);
  auto kind = tool.kind;
  self->request(tool.actor, caf::infinite, run_atom::value, tool_call_msg{1, call.arguments})
    .then(
      [=](tool_reply& reply) {
        auto& st = self->state;
        if (st.now != phase::step)
          return;
        auto& r = reply.result;
        r.llm_text = core::renumber_documents(r.llm_text, r.documents,
                                              [self](const sdk::document& d) {
                                                return self->state.numbers.number_for(d);
                                              });
        if (sdk::is_search(kind))
          emit(self, at, core::packets::search_tool_documents_delta(r.documents));
        else if (kind == sdk::tool_kind::page_reader)
          emit(self, at, core::packets::open_url_documents(r.documents));
        emit(self, at, core::packets::section_end());
        st.step_results[call.id] = std::move(r.llm_text);
        then(std::move(r.documents));
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.now != phase::step)
          return;
        st.step_results[call.id] = core::tool_call_failed_text(name, caf::to_string(err));
        emit(self, at, core::packets::section_end());
        then({});
      });
}

// The classic researcher: queries, at most max_search_queries searches and
// max_urls_to_crawl page reads, then the observation.
void classic_step(self_ptr self) {
  auto& st = self->state;
  auto at = turn(st.turn);
  auto max_q = st.profile.max_search_queries;
  auto task = rf::step_task(st.spec.question, *st.plan, st.step);
  auto queries = std::make_shared<std::vector<std::string>>();
  auto search_and_read = [=] {
    auto& st = self->state;
    if (st.now != phase::step)
      return;
    if (queries->empty())
      queries->push_back(st.plan->steps[st.step].title);
    std::string name;
    const auto* search = tool_of(self, {sdk::tool_kind::web_search,
                                        sdk::tool_kind::internal_search}, &name);
    auto web = search->kind == sdk::tool_kind::web_search;
    emit(self, at, core::packets::search_tool_start(web));
    emit(self, at, core::packets::search_tool_queries_delta(*queries));
    // The searches first (one call with every query), then the pages of the
    // best web results.
    run_step_tool(self, *search, name, nlohmann::json{{"queries", *queries}}, at,
                  [=](std::vector<sdk::document> docs) {
                    auto& st = self->state;
                    std::string reader_name;
                    const auto* reader = tool_of(self, {sdk::tool_kind::page_reader},
                                                 &reader_name);
                    std::vector<std::string> urls;
                    auto most = static_cast<size_t>(st.profile.max_urls_to_crawl);
                    if (reader != nullptr && web)
                      for (const auto& d : docs)
                        if (!d.url.empty() && urls.size() < most)
                          urls.push_back(d.url);
                    if (urls.empty()) {
                      write_observation(self);
                      return;
                    }
                    emit(self, at, core::packets::open_url_start());
                    emit(self, at, core::packets::open_url_urls(urls));
                    run_step_tool(self, *reader, reader_name, nlohmann::json{{"urls", urls}}, at,
                                  [self](std::vector<sdk::document>) { write_observation(self); });
                  });
  };
  auto req = rf::structured_request(
    render(self, "reflective_queries", {{"max_queries", std::to_string(max_q)}}), task,
    rf::queries_tool(max_q), "plan");
  call_structured(
    self, st.models.plan, std::move(req), at, "search_queries",
    [=](const nlohmann::json& args) -> std::string {
      auto read = rf::read_queries(args, max_q);
      if (auto* bad = std::get_if<rf::invalid_output>(&read))
        return bad->problem;
      *queries = std::get<std::vector<std::string>>(std::move(read));
      return {};
    },
    search_and_read,
    [=](const std::string& why) {
      notice(self, "No search queries for this step (" + why + "); searching its title.");
      search_and_read();
    });
}

// The ReAct researcher: the research agent, driven by the step.
void react_step(self_ptr self) {
  auto& st = self->state;
  agent_spec spec;
  spec.call_id = st.plan->steps[st.step].id;
  spec.task = rf::step_task(st.spec.question, *st.plan, st.step);
  spec.turn_index = st.turn;
  spec.tab_index = 0;
  spec.max_cycles = st.spec.agent_max_cycles;
  spec.reasoning_model = st.spec.reasoning_model;
  auto limits = st.timing.agent_limits({st.spec.agent_force_report, st.spec.agent_hard_timeout});
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
    st.agent = spawn_agent_runner(self->system(), std::move(spec), st.models.research, st.tools,
                                  st.emitter, st.prompts, agent_parent_actor{self},
                                  std::move(where));
  } else {
    st.agent = spawn_research_agent(self->system(), std::move(spec), st.models.research,
                                    st.tools, st.emitter, st.prompts, agent_parent_actor{self});
  }
  self->monitor(st.agent);
}

void start_step(self_ptr self) {
  auto& st = self->state;
  if (st.stop_requested || st.deadline_passed) {
    start_synthesis(self);
    return;
  }
  auto next = rf::next_step(*st.plan);
  if (!next) {
    start_synthesis(self);
    return;
  }
  st.now = phase::step;
  st.step = *next;
  auto& step = st.plan->steps[st.step];
  step.status = rf::step_status::in_progress;
  auto at = next_turn(self);
  emit(self, at, rf::step_start_packet(step));
  emit(self, at, rf::plan_packet(*st.plan));
  st.numbers = core::document_numbers{};
  st.step_calls.clear();
  st.step_results.clear();
  auto searches = tool_of(self, {sdk::tool_kind::web_search, sdk::tool_kind::internal_search})
                  != nullptr;
  if (!step.needs_search || step.type == rf::step_type::analysis || !searches) {
    write_observation(self);
  } else if (st.profile.react) {
    react_step(self);
  } else {
    classic_step(self);
  }
}

void step_done(self_ptr self, std::string observation, size_t new_sources,
               const std::string& failure) {
  auto& st = self->state;
  if (st.now != phase::step)
    return;
  st.agent = nullptr;
  auto& step = st.plan->steps[st.step];
  if (failure.empty()) {
    step.status = rf::step_status::completed;
    step.observation = std::move(observation);
    st.findings.emplace_back(step.title, step.observation);
  } else {
    // The step failed, not the session: it is skipped and research goes on.
    step.status = rf::step_status::skipped;
    notice(self, "Step " + step.id + " failed: " + failure);
  }
  auto at = turn(st.turn);
  emit(self, at, rf::step_end_packet(step, new_sources, failure));
  emit(self, at, rf::plan_packet(*st.plan));
  if (st.mode == rf::query_mode::web_search || st.stop_requested || st.deadline_passed) {
    start_synthesis(self);
    return;
  }
  start_reflect(self, st.step, new_sources);
}

// -- reflector ------------------------------------------------------------------------

void apply_decision(self_ptr self, rf::decision taken) {
  auto& st = self->state;
  switch (taken) {
    case rf::decision::continue_plan:
      start_step(self);
      break;
    case rf::decision::adjust:
      start_planner(self);
      break;
    case rf::decision::complete:
      rf::skip_pending(*st.plan);
      emit(self, turn(st.turn), rf::plan_packet(*st.plan));
      start_synthesis(self);
      break;
  }
}

void start_reflect(self_ptr self, size_t done, size_t new_sources) {
  auto& st = self->state;
  st.now = phase::reflect;
  auto at = next_turn(self);
  auto got = std::make_shared<rf::reflection>();
  auto step_id = st.plan->steps[done].id;
  auto req = rf::structured_request(
    render(self, "reflective_reflector",
           {{"depth", rf::to_string(st.depth)},
            {"min_steps", std::to_string(st.profile.min_steps)}}),
    rf::reflector_input(st.spec.question, *st.plan, done, st.global.size(), new_sources),
    rf::reflect_tool(), "plan");
  call_structured(
    self, st.models.plan, std::move(req), at, "reflect",
    [=](const nlohmann::json& args) -> std::string {
      auto read = rf::read_reflection(args);
      if (auto* bad = std::get_if<rf::invalid_output>(&read))
        return bad->problem;
      *got = std::get<rf::reflection>(std::move(read));
      return {};
    },
    [=] {
      auto& st = self->state;
      auto outcome = rf::enforce(*got, *st.plan, st.profile, st.spec.reflective.max_plan_iterations);
      emit(self, at, rf::reflection_packet(*got, outcome, step_id));
      if (outcome.refused)
        st.notices.push_back(outcome.why);
      if (outcome.taken == rf::decision::adjust)
        st.feedback = *got;
      apply_decision(self, outcome.taken);
    },
    [=](const std::string& why) {
      // The reflector's step failed: go on with the plan as it is.
      auto& st = self->state;
      rf::reflection r;
      r.decision = rf::decision::continue_plan;
      r.reasoning = "The reflection failed (" + why + "); continuing with the plan.";
      // The next pending step, or the synthesis: no replan without a
      // reflection that asked for it.
      rf::reflection_outcome outcome;
      outcome.taken = rf::next_step(*st.plan) ? rf::decision::continue_plan
                                              : rf::decision::complete;
      emit(self, at, rf::reflection_packet(r, outcome, step_id));
      notice(self, r.reasoning);
      apply_decision(self, outcome.taken);
    });
}

// -- synthesizer ----------------------------------------------------------------------

void start_synthesis(self_ptr self) {
  auto& st = self->state;
  if (st.now == phase::final || st.now == phase::verify || st.now == phase::done)
    return;
  cancel_call(self);
  if (st.agent) {
    self->demonitor(st.agent.address());
    self->send_exit(st.agent, caf::exit_reason::user_shutdown);
    st.agent = nullptr;
  }
  if (st.plan && st.now == phase::step) {
    auto& step = st.plan->steps[st.step];
    if (step.status == rf::step_status::in_progress)
      step.status = rf::step_status::skipped;
  }
  if (st.plan)
    rf::skip_pending(*st.plan);
  begin_final(self);
  if (st.plan)
    emit(self, st.at, rf::plan_packet(*st.plan));
  if (st.findings.empty()) {
    fallback_report(self, st.stop_requested ? "the research was " + stopped(st)
                                            : "no step produced an observation");
    return;
  }
  write_final(self, text_request(render(self, "reflective_synthesizer", {}),
                                 rf::synthesizer_input(st.spec.question, *st.plan),
                                 "synthesize", st.spec.final_max_tokens));
}

// -- the actor ------------------------------------------------------------------------

reflective_full_actor::behavior_type
reflective_impl(self_ptr self, session_spec spec, session_models models, tool_set tools,
                emitter_actor emitter, std::shared_ptr<const core::prompt_library> prompts,
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
  st.mode = st.spec.reflective.mode;
  st.collector = spawn_citation_collector(self->system());
  self->link_to(st.collector);
  self->delayed_send(self, st.timing.report_after(), deadline_soon_atom::value);
  self->delayed_send(self, st.timing.deadline(), deadline_now_atom::value);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.verifier && st.verifier.address() == dm.source) {
      st.verifier = nullptr;
      notice(self, "The report could not be verified.");
      verification_done(self, std::string{}, "{}");
      return;
    }
    if (st.agent && st.agent.address() == dm.source) {
      st.agent = nullptr;
      step_done(self, {}, 0, "the research agent stopped unexpectedly");
    }
  });
  self->send(self, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (st.now != phase::classify || st.current_call != 0)
        return;
      if (st.spec.resumed) {
        emit(self, turn(0), core::packets::resumed(st.spec.resume_checkpoint,
                                                   st.spec.superseded_after));
        notice(self, "The reflective strategy does not go on from a checkpoint: the research "
                     "starts over.");
      }
      if (st.mode == rf::query_mode::simple)
        start_simple(self, {});
      else if (st.mode == rf::query_mode::web_search)
        start_web_search(self);
      else
        start_classify(self);
    },
    [=](web_search_late_atom) {
      // The web_search mode's time is up: answer directly.
      auto& st = self->state;
      if (st.mode != rf::query_mode::web_search || st.now != phase::step)
        return;
      cancel_call(self);
      if (st.agent) {
        self->demonitor(st.agent.address());
        self->send_exit(st.agent, caf::exit_reason::user_shutdown);
        st.agent = nullptr;
      }
      if (st.plan)
        rf::skip_pending(*st.plan);
      start_simple(self, "The web search took longer than "
                           + duration_text(st.spec.reflective.web_search_fallback)
                           + "; answering directly.");
    },
    [=](delta_atom, llm_delta& d) {
      auto& st = self->state;
      if (d.call_id != st.current_call || st.now == phase::done)
        return;
      switch (d.kind) {
        case delta_kind::reasoning:
          detail::reasoning_piece(st.emitter, st.at, st.reasoning, d.text);
          break;
        case delta_kind::text:
          if (st.now == phase::final) {
            detail::close_reasoning(st.emitter, st.at, st.reasoning);
            report_piece(self, d.text);
          }
          break;
        case delta_kind::tool_call:
        case delta_kind::usage:
          break;
      }
    },
    [=](agent_done_atom, agent_result& r) {
      auto& st = self->state;
      if (!st.agent || st.now != phase::step || !st.plan
          || r.call_id != st.plan->steps[st.step].id)
        return;
      self->demonitor(st.agent.address());
      st.agent = nullptr;
      if (!r.ok) {
        step_done(self, {}, 0, r.failure.empty() ? "the research agent failed" : r.failure);
        return;
      }
      collapse_observation(self, std::move(r));
    },
    [=](deadline_soon_atom) {
      auto& st = self->state;
      if (st.agent)
        self->send(st.agent, report_now_atom::value);
    },
    [=](deadline_now_atom) {
      auto& st = self->state;
      if (st.now == phase::done || st.deadline_passed)
        return;
      st.deadline_passed = true;
      if (st.now == phase::final || st.now == phase::verify) {
        if (st.stop_requested && st.now == phase::final)
          self->send(self, final_timeout_atom::value);
        return;
      }
      notice(self, st.stop_requested
                     ? "The research was " + stopped(st)
                         + "; the report holds what was found until then."
                     : "The research deadline was reached; the report is written from what "
                       "was found so far.");
      start_synthesis(self);
    },
    [=](final_timeout_atom) {
      auto& st = self->state;
      if (st.now != phase::final)
        return;
      cancel_call(self);
      auto why = st.stop_requested ? "the research was " + stopped(st)
                                   : std::string{"it ran out of time"};
      if (st.text_started) {
        report_piece(self, "\n\n*(The report was cut short: " + why + ".)*");
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
        if (st.verifier)
          self->send(st.verifier, stop_atom::value);
        return;
      }
      if (st.now == phase::final) {
        self->send(self, final_timeout_atom::value);
        return;
      }
      if (st.now == phase::classify) {
        cancel_call(self);
        emit(self, turn(st.turn), core::packets::stop(st.stop_reason));
        session_result out;
        out.status = session_status::failed;
        out.failure = "the research was " + stopped(st) + " before it started";
        finish(self, std::move(out));
        return;
      }
      self->send(self, deadline_now_atom::value);
    },
  };
}

} // namespace

session_actor spawn_reflective_session(caf::actor_system& sys, session_spec spec,
                                       session_models models, tool_set tools,
                                       emitter_actor emitter,
                                       std::shared_ptr<const core::prompt_library> prompts,
                                       session_requester_actor requester) {
  return sys.spawn(reflective_impl, std::move(spec), std::move(models), std::move(tools),
                   std::move(emitter), std::move(prompts), std::move(requester));
}

session_actor spawn_research_session(caf::actor_system& sys, session_spec spec,
                                     session_models models, tool_set tools,
                                     emitter_actor emitter,
                                     std::shared_ptr<const core::prompt_library> prompts,
                                     session_requester_actor requester) {
  if (spec.strategy == "reflective")
    return spawn_reflective_session(sys, std::move(spec), std::move(models), std::move(tools),
                                    std::move(emitter), std::move(prompts),
                                    std::move(requester));
  return spawn_session(sys, std::move(spec), std::move(models), std::move(tools),
                       std::move(emitter), std::move(prompts), std::move(requester));
}

} // namespace quarry::actors
