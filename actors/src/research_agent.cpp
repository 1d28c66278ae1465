// The research agent actor (Onyx's research_agent.py, spec section 4.5), with
// tool calls of different kinds in one step run in parallel, every call
// answered, and the agent's own generate_report description.

#include "actor_time.hpp"
#include "quarry/actors/research_agent.hpp"

#include "quarry/core/clock.hpp"
#include "quarry/core/deadline.hpp"
#include "quarry/core/document_numbers.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/history.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/core/think_stream.hpp"

#include "reasoning_packets.hpp"
#include "tool_round.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <optional>

namespace quarry::actors {

namespace {

// One tool call of a step and what became of it.
struct pending_tool {
  sdk::tool_call call;
  std::optional<sdk::tool_result> result;
};

struct agent_state {
  agent_spec spec;
  llm_provider_actor llm;
  tool_set tools;
  packet_sink_actor emitter;
  std::shared_ptr<const core::prompt_library> prompts;
  agent_parent_actor parent;
  // When to report (core), on the actor system's clock (actor_time.hpp).
  detail::actor_time time;
  core::agent_deadline timing;
  bool done = false;
  bool report_now = false;
  bool writing_report = false;

  std::vector<sdk::chat_message> history;
  int research_cycles = 0;
  int llm_cycles = 0;
  int reasoning_cycles = 0;
  bool just_ran_web_search = false;

  // The step's tool calls: agent-local citation numbers, search snippets.
  detail::tool_round round;

  // The LLM step in progress.
  uint64_t next_call = 1;
  uint64_t current_call = 0;
  core::placement step_at;
  detail::reasoning_state reasoning;
  core::think_stream think;
  std::string report_text;
  bool report_started = false;
  // The continuations of the report made (a report the output limit cut is
  // continued; its request is built again from the history, not kept).
  int report_continuations = 0;

  // Tool calls of the current step, and the reasoning of the turn that
  // made them (kept in the history: some providers need it back).
  std::vector<pending_tool> pending;
  size_t outstanding = 0;
  core::turn_reasoning turn_reasoning;
  // A step answered without a tool call: the next step reminds the model
  // once (per run of such answers) instead of using up a cycle.
  bool remind_tool_call = false;
  bool reminded_tool_call = false;
  // A step was cut inside its tool call: the next one says so and has twice
  // the room (once per agent).
  bool cut_call_retry = false;
  bool retried_cut_call = false;

  static inline const char* name = "quarry.research_agent";
};

using agent_ptr = research_agent_full_actor::stateful_pointer<agent_state>;

void emit(agent_ptr self, const core::placement& at, const nlohmann::json& obj) {
  self->send(self->state.emitter, packet_atom::value, make_packet(at, obj));
}

core::placement agent_at(agent_ptr self) {
  return {self->state.spec.turn_index, self->state.spec.tab_index, std::nullopt};
}

void finish(agent_ptr self, agent_result result) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  result.call_id = st.spec.call_id;
  result.tab_index = st.spec.tab_index;
  self->send(st.parent, agent_done_atom::value, std::move(result));
  self->quit();
}

void fail(agent_ptr self, const std::string& why) {
  emit(self, agent_at(self), core::packets::error(why, "research_agent_failed"));
  agent_result r;
  r.ok = false;
  r.failure = why;
  finish(self, std::move(r));
}

// Empty when the template cannot be rendered (the caller reports it).
std::string render(agent_ptr self, std::string_view name, const core::prompt_vars& vars) {
  return core::render_prompt(*self->state.prompts, name, vars);
}

void close_reasoning(agent_ptr self) {
  auto& st = self->state;
  detail::close_reasoning(st.emitter, st.step_at, st.reasoning);
}

void reasoning_piece(agent_ptr self, const std::string& text) {
  auto& st = self->state;
  detail::reasoning_piece(st.emitter, st.step_at, st.reasoning, text);
}

void next_step(agent_ptr self);
void write_report(agent_ptr self);
void call_report(agent_ptr self, sdk::chat_request req);
void report_written(agent_ptr self);

// -- tools ----------------------------------------------------------------------

void tool_finished(agent_ptr self) {
  auto& st = self->state;
  if (st.outstanding > 0 || st.done)
    return;
  // One assistant message with every call, then one result per call.
  std::vector<sdk::tool_call> calls;
  for (const auto& p : st.pending)
    calls.push_back(p.call);
  size_t next = 0;
  core::append_tool_round(
    st.history, calls,
    [&](const sdk::tool_call&) {
      const auto& p = st.pending[next++];
      return p.result ? p.result->llm_text : std::string{core::missing_tool_result_text};
    },
    std::move(st.turn_reasoning));
  st.turn_reasoning = {};
  st.pending.clear();
  ++st.llm_cycles;
  ++st.research_cycles;
  next_step(self);
}

void run_tool(agent_ptr self, size_t index, const core::placement& at) {
  auto& st = self->state;
  auto name = st.pending[index].call.name;
  auto started = st.round.start(st.tools, st.pending[index].call, st.emitter, at);
  if (started.tool == nullptr) {
    st.pending[index].result = std::move(started.result);
    return;
  }
  auto kind = started.tool->kind;
  ++st.outstanding;
  self
    ->request(started.tool->actor, caf::infinite, run_atom::value,
              tool_call_msg{index, std::move(started.arguments), std::move(started.parsed)})
    .then(
      [=](tool_reply& reply) {
        auto& st = self->state;
        if (st.done || index >= st.pending.size())
          return;
        auto& r = reply.result;
        st.round.answered(kind, r, st.emitter, at);
        if (kind == sdk::tool_kind::web_search && !r.documents.empty())
          st.just_ran_web_search = true;
        st.pending[index].result = std::move(r);
        --st.outstanding;
        tool_finished(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.done || index >= st.pending.size())
          return;
        st.pending[index].result = st.round.failed(name, err, st.emitter, at);
        --st.outstanding;
        tool_finished(self);
      });
}

// -- LLM steps -----------------------------------------------------------------

void on_step_reply(agent_ptr self, sdk::chat_result& result) {
  auto& st = self->state;
  reasoning_piece(self, st.think.finish());
  close_reasoning(self);
  if (result.finish == sdk::finish_reason::length && !result.tool_calls.empty()
      && !st.retried_cut_call) {
    // Cut inside a tool call: its arguments are broken. Said plainly, and
    // tried once more with twice the room; the step is not used up.
    st.retried_cut_call = st.cut_call_retry = true;
    ++st.llm_cycles;
    next_step(self);
    return;
  }
  auto tools_at = st.step_at;
  if (st.reasoning.reasoned) {
    ++st.reasoning_cycles;
    tools_at.sub_turn_index = *st.step_at.sub_turn_index + 1;
  }
  auto [report, thinks, work] = core::split_agent_calls(std::move(result.tool_calls));
  if (report) {
    write_report(self);
    return;
  }
  core::turn_reasoning said{std::move(result.reasoning), std::move(result.reasoning_state)};
  // Think calls: their text was streamed as reasoning; they get the
  // acknowledgement and do not use up a research cycle.
  if (!thinks.empty() && work.empty()) {
    core::append_tool_round(
      st.history, thinks,
      [](const sdk::tool_call&) { return std::string{core::think_acknowledgement}; },
      std::move(said));
    ++st.llm_cycles;
    next_step(self);
    return;
  }
  if (work.empty() && thinks.empty()) {
    // The model ignored "required" (or could not be forced): the answer
    // stays in the history, and the next step reminds it once; a second
    // such answer in a row uses up the step.
    if (result.text.find_first_not_of(" \t\r\n") != std::string::npos) {
      sdk::chat_message m;
      m.author = sdk::role::assistant;
      m.content = result.text;
      m.reasoning = std::move(said.text);
      m.reasoning_state = std::move(said.state);
      st.history.push_back(std::move(m));
    }
    ++st.llm_cycles;
    if (!st.reminded_tool_call) {
      st.reminded_tool_call = st.remind_tool_call = true;
    } else {
      ++st.research_cycles;
    }
    next_step(self);
    return;
  }
  st.reminded_tool_call = false;
  st.turn_reasoning = std::move(said);
  st.just_ran_web_search = false;
  st.pending.clear();
  for (auto& t : thinks) {
    pending_tool p;
    p.call = std::move(t);
    sdk::tool_result r;
    r.llm_text = core::think_acknowledgement;
    p.result = std::move(r);
    st.pending.push_back(std::move(p));
  }
  auto first_work = st.pending.size();
  for (auto& w : work) {
    pending_tool p;
    p.call = std::move(w);
    st.pending.push_back(std::move(p));
  }
  st.outstanding = 0;
  for (size_t i = first_work; i < st.pending.size(); ++i)
    run_tool(self, i, tools_at);
  tool_finished(self);
}

void next_step(agent_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  if (st.report_now || st.timing.must_report() || st.research_cycles >= st.spec.max_cycles) {
    write_report(self);
    return;
  }
  core::agent_prompt prompt;
  std::vector<sdk::tool_definition> defs;
  for (const auto& [name, entry] : st.tools.tools) {
    prompt.tools.push_back(name);
    defs.push_back(entry.definition);
  }
  // The guidance names each tool as the model sees it: a search or page
  // reader of a plugin's own is called by its own name.
  auto name_of = [&](sdk::tool_kind kind, const char* usual) {
    for (const auto& [name, entry] : st.tools.tools)
      if (entry.kind == kind)
        return name;
    return std::string{usual};
  };
  const auto* lib = st.prompts.get();
  bool has_open_url = st.tools.has(sdk::tool_kind::page_reader);
  prompt.current_datetime = st.spec.current_datetime;
  prompt.cycle = st.research_cycles;
  prompt.max_cycles = st.spec.max_cycles;
  prompt.internal_search = st.tools.has(sdk::tool_kind::internal_search);
  prompt.web_search = st.tools.has(sdk::tool_kind::web_search);
  prompt.open_url = has_open_url;
  prompt.web_search_tool = name_of(sdk::tool_kind::web_search, "web_search");
  prompt.internal_search_tool = name_of(sdk::tool_kind::internal_search, "internal_search");
  prompt.open_url_tool = name_of(sdk::tool_kind::page_reader, "open_url");
  prompt.reasoning_model = st.spec.reasoning_model;
  // What earlier agents found goes with the instructions, not with the task:
  // the task message is what the model (and the offline provider) turns into
  // search queries, and the digest must never reach a search backend.
  prompt.context = st.spec.context;
  auto system = core::research_agent_system(*lib, prompt);
  if (system.empty()) {
    fail(self, "the research agent prompt could not be rendered");
    return;
  }
  core::research_step_input in;
  in.system = std::move(system);
  in.task = st.spec.task;
  in.history = st.history;
  in.tools = std::move(defs);
  if (st.just_ran_web_search && has_open_url)
    if (auto text = core::open_url_reminder(*lib, prompt); !text.empty())
      in.reminder = std::move(text);
  auto remind = [&in](const char* text) {
    in.reminder = in.reminder ? *in.reminder + "\n\n" + text : std::string{text};
  };
  if (st.cut_call_retry)
    remind(core::cut_tool_call_reminder);
  if (st.remind_tool_call) {
    st.remind_tool_call = false;
    remind(core::agent_tool_call_reminder);
  }
  in.reasoning_model = st.spec.reasoning_model;
  in.context_tokens = st.spec.context_tokens;
  in.max_tokens = st.spec.step_max_tokens * (st.cut_call_retry ? 2 : 1);
  st.cut_call_retry = false;
  auto built = core::research_step_request(in);
  if (std::holds_alternative<std::string>(built)) {
    // The context is full: write the report from what exists.
    write_report(self);
    return;
  }
  auto req = std::get<sdk::chat_request>(std::move(built));
  st.step_at = {st.spec.turn_index, st.spec.tab_index, st.llm_cycles + st.reasoning_cycles};
  st.reasoning = {};
  st.think = core::think_stream{};
  st.current_call = st.next_call++;
  self->request(st.llm, caf::infinite, chat_atom::value, llm_call{st.current_call, std::move(req)})
    .then(
      [=](llm_reply& reply) {
        emit(self, self->state.step_at,
             core::packets::usage("research", reply.result.usage, reply.cost_usd,
                                  origin_of(reply)));
        on_step_reply(self, reply.result);
      },
      [=](caf::error& err) {
        auto e = from_caf_error(err);
        fail(self, "the research agent's model call failed: " + e.message);
      });
}

// -- the intermediate report ------------------------------------------------------

// The intermediate report's request, built from the history (for the first
// call and again for each continuation: the history does not change while
// the report is written, so the request is the same, and no copy of the
// conversation is kept beside the history). Fails the agent if it cannot be
// built.
std::optional<sdk::chat_request> report_request(agent_ptr self) {
  auto& st = self->state;
  auto system = render(self, "research_report", {});
  auto reminder = render(self, "user_report_query", {{"research_topic", st.spec.task}});
  if (system.empty() || reminder.empty()) {
    fail(self, "the report prompts could not be rendered");
    return std::nullopt;
  }
  auto built = core::agent_report_request(std::move(system), st.spec.task, st.history,
                                          std::move(reminder), st.spec.context_tokens,
                                          st.spec.report_max_tokens);
  if (auto* err = std::get_if<std::string>(&built)) {
    fail(self, "the research history does not fit the model: " + *err);
    return std::nullopt;
  }
  return std::get<sdk::chat_request>(std::move(built));
}

void write_report(agent_ptr self) {
  auto& st = self->state;
  if (st.done || st.writing_report)
    return;
  st.writing_report = true;
  auto req = report_request(self);
  if (!req)
    return;
  st.report_text.clear();
  st.report_started = false;
  call_report(self, std::move(*req));
}

// One call of the intermediate report: the first, or one continuing a
// report the output limit cut (its streamed text stays).
void call_report(agent_ptr self, sdk::chat_request req) {
  auto& st = self->state;
  st.step_at = agent_at(self);
  st.reasoning.open = false;
  st.current_call = st.next_call++;
  auto before = st.report_text.size();
  self->request(st.llm, caf::infinite, chat_atom::value, llm_call{st.current_call, std::move(req)})
    .then(
      [=](llm_reply& reply) {
        auto& st = self->state;
        close_reasoning(self);
        emit(self, agent_at(self),
             core::packets::usage("report", reply.result.usage, reply.cost_usd, origin_of(reply)));
        // A provider that did not stream: its whole text now.
        if (st.report_text.size() == before && !reply.result.text.empty()) {
          if (!st.report_started)
            emit(self, agent_at(self), core::packets::intermediate_report_start());
          emit(self, agent_at(self), core::packets::intermediate_report_delta(reply.result.text));
          st.report_started = true;
          st.report_text += reply.result.text;
        }
        if (reply.result.finish == sdk::finish_reason::length
            && st.report_text.find_first_not_of(" \t\r\n") != std::string::npos) {
          if (st.report_continuations < st.spec.report_continuations) {
            ++st.report_continuations;
            if (auto again = report_request(self))
              call_report(self, core::continuation_request(std::move(*again), st.report_text));
            return;
          }
          auto note = core::report_cut_note(st.spec.report_max_tokens,
                                            "research.max_tokens.agent_report");
          emit(self, agent_at(self), core::packets::intermediate_report_delta(note));
          emit(self, agent_at(self),
               core::packets::notice(
                 "research agent " + std::to_string(st.spec.tab_index + 1) + ": "
                 + core::report_cut_notice(st.spec.report_max_tokens, st.report_continuations)));
          st.report_text += note;
        }
        report_written(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        auto e = from_caf_error(err);
        if (st.report_continuations > 0 && st.report_started) {
          auto note = core::report_cut_note(st.spec.report_max_tokens,
                                            "research.max_tokens.agent_report");
          emit(self, agent_at(self), core::packets::intermediate_report_delta(note));
          st.report_text += note;
          report_written(self);
          return;
        }
        fail(self, "the research agent's report failed: " + e.message);
      });
}

// The report is complete (or marked cut): its cited documents go to the
// session.
void report_written(agent_ptr self) {
  auto& st = self->state;
  const auto& text = st.report_text;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    fail(self, "the research agent wrote an empty report");
    return;
  }
  agent_result r;
  r.ok = true;
  r.report = text;
  // The documents the report cites, in first-cited order.
  r.cited = core::cited_documents(text, st.round.numbers.documents());
  std::vector<sdk::document> docs;
  for (const auto& [n, d] : r.cited)
    docs.push_back(d);
  self->send(
    self->state.emitter, packet_atom::value,
    make_packet(agent_at(self), "intermediate_report_cited_docs",
                core::documents_packet_text("intermediate_report_cited_docs", "cited_docs", docs)));
  emit(self, agent_at(self), core::packets::section_end());
  finish(self, std::move(r));
}

// The hard time limit came first: the agent keeps what it found (its report
// as far as it was written, else the sources it had read, marked as cut by
// time) instead of losing it; with nothing found, it fails.
void time_up(agent_ptr self) {
  auto& st = self->state;
  const auto& documents = st.round.numbers.documents();
  auto text = core::time_cut_report(st.writing_report ? st.report_text : std::string{}, documents,
                                    st.spec.hard_timeout);
  if (text.empty()) {
    fail(self, "the research agent ran out of time");
    return;
  }
  close_reasoning(self);
  if (!st.report_started) {
    emit(self, agent_at(self), core::packets::intermediate_report_start());
    st.report_started = true;
  }
  // What was streamed already stays; the rest follows.
  auto shown = st.writing_report ? st.report_text.size() : 0;
  if (shown <= text.size() && text.compare(0, shown, st.report_text, 0, shown) == 0)
    emit(self, agent_at(self), core::packets::intermediate_report_delta(text.substr(shown)));
  else
    emit(self, agent_at(self), core::packets::intermediate_report_delta(text));
  st.report_text = std::move(text);
  report_written(self);
}

research_agent_full_actor::behavior_type
agent_impl(agent_ptr self, agent_spec spec, llm_provider_actor llm, tool_set tools,
           packet_sink_actor emitter, std::shared_ptr<const core::prompt_library> prompts,
           agent_parent_actor parent) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.llm = std::move(llm);
  st.tools = std::move(tools);
  st.emitter = std::move(emitter);
  st.prompts = std::move(prompts);
  st.parent = std::move(parent);
  st.time = detail::actor_time{self->clock()};
  st.timing = core::agent_deadline{{st.spec.force_report_after, st.spec.hard_timeout}, st.time};
  sdk::chat_message task;
  task.author = sdk::role::user;
  task.content = st.spec.task;
  st.history.push_back(std::move(task));
  emit(self, agent_at(self), core::packets::research_agent_start(st.spec.task));
  self->delayed_send(self, st.timing.hard_timeout(), agent_timeout_atom::value);
  self->send(self, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) { next_step(self); },
    [=](delta_atom, llm_deltas& ds) {
      auto& st = self->state;
      for (auto& d : ds) {
        if (d.call_id != st.current_call || st.done)
          return;
        switch (d.kind) {
          case delta_kind::reasoning:
            reasoning_piece(self, d.text);
            break;
          case delta_kind::text:
            if (st.writing_report) {
              close_reasoning(self);
              if (!st.report_started) {
                emit(self, agent_at(self), core::packets::intermediate_report_start());
                st.report_started = true;
              }
              st.report_text += d.text;
              emit(self, agent_at(self), core::packets::intermediate_report_delta(d.text));
            } else {
              // Text under tool_choice=required is shown as reasoning.
              reasoning_piece(self, d.text);
            }
            break;
          case delta_kind::tool_call:
            if (!st.writing_report && !st.spec.reasoning_model)
              reasoning_piece(self, st.think.feed(d.tool));
            break;
          case delta_kind::usage:
            break;
        }
      }
    },
    [=](report_now_atom) { self->state.report_now = true; },
    [=](stop_atom) {
      // Ended by its parent (e.g. a session that placed the agent on this
      // node gave up on it): no result, the model call is cancelled.
      auto& st = self->state;
      if (st.done)
        return;
      st.done = true;
      if (st.current_call != 0)
        self->send(st.llm, cancel_atom::value, st.current_call);
      self->quit();
    },
    [=](agent_timeout_atom) {
      auto& st = self->state;
      if (st.done)
        return;
      self->send(st.llm, cancel_atom::value, st.current_call);
      time_up(self);
    },
  };
}

} // namespace

research_agent_actor spawn_research_agent(caf::actor_system& sys, agent_spec spec,
                                          llm_provider_actor llm, tool_set tools,
                                          packet_sink_actor emitter,
                                          std::shared_ptr<const core::prompt_library> prompts,
                                          agent_parent_actor parent) {
  return sys.spawn(agent_impl, std::move(spec), std::move(llm), std::move(tools),
                   std::move(emitter), std::move(prompts), std::move(parent));
}

} // namespace quarry::actors
