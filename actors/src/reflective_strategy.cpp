// The reflective strategy (seed 001's five agents) on the session frame:
// coordinator, background investigator, planner, researcher (classic for
// light depth, the ReAct research agent for medium and extended), reflector
// after every step, synthesizer; query modes simple / web_search /
// deep_research. Policy (step limits, refused decisions, plan merging) is in
// core/reflective.hpp; this strategy only sends what core builds and
// enforces what core decides.

#include "session_frame.hpp"
#include "tool_round.hpp"

#include "quarry/core/document_numbers.hpp"
#include "quarry/core/findings.hpp"
#include "quarry/core/reflective_requests.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <caf/all.hpp>

#include <map>

namespace quarry::actors::detail {

// A named namespace of its own: unity builds join this file with others.
namespace reflection {

namespace {

namespace rf = core::reflective;

enum class phase { classify, background, plan, step, reflect };

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

class reflective final : public strategy {
public:
  explicit reflective(frame_ptr self) : strategy(self) {
    auto& fs = self->state;
    fs.reasoning_closes_on_reply = true;
    mode_ = fs.spec.reflective.mode;
  }

  void start() override {
    auto& fs = self->state;
    if (started_)
      return;
    started_ = true;
    if (fs.spec.resumed) {
      emit(self, turn(0),
           core::packets::resumed(fs.spec.resume_checkpoint, fs.spec.superseded_after));
      say("The reflective strategy does not go on from a checkpoint: the research starts "
          "over.");
    }
    if (mode_ == rf::query_mode::simple)
      start_simple({});
    else if (mode_ == rf::query_mode::web_search)
      start_web_search();
    else
      start_classify();
  }

  int turn_now() const override {
    return turn_;
  }

  void on_agent_done(agent_result& r) override {
    if (!agent_ || !in(phase::step) || !plan_ || r.call_id != plan_->steps[step_].id)
      return;
    self->demonitor(agent_.address());
    agent_ = nullptr;
    if (!r.ok) {
      step_done({}, 0, r.failure.empty() ? "the research agent failed" : r.failure);
      return;
    }
    collapse_observation(std::move(r));
  }

  bool on_down(const caf::down_msg& dm) override {
    if (!agent_ || agent_.address() != dm.source)
      return false;
    agent_ = nullptr;
    step_done({}, 0, "the research agent stopped unexpectedly");
    return true;
  }

  void on_deadline_soon() override {
    if (agent_)
      self->send(agent_, report_now_atom::value);
  }

  void on_deadline() override {
    auto& fs = self->state;
    if (now_ == phase::classify && fs.stop_requested) {
      cancel_call(self);
      stopped_before_start(self, turn_);
      return;
    }
    start_synthesis();
  }

  // The web_search mode's time is up: answer directly.
  void on_timer() override {
    auto& fs = self->state;
    if (mode_ != rf::query_mode::web_search || !in(phase::step))
      return;
    cancel_call(self);
    stop_agent();
    if (plan_)
      rf::skip_pending(*plan_);
    start_simple("The web search took longer than "
                 + duration_text(fs.spec.reflective.web_search_fallback) + "; answering directly.");
  }

  // The plan as the orchestrator strategy gives it: a numbered list (the
  // packets carry the structured plan).
  std::string plan_text() const override {
    std::string out;
    if (plan_)
      for (size_t i = 0; i < plan_->steps.size(); ++i)
        out += std::to_string(i + 1) + ". " + plan_->steps[i].title + " ("
               + rf::to_string(plan_->steps[i].status) + ")\n";
    return out;
  }

  // The numbering, documents and findings (the frame's part) are what the
  // store's report Sources come from. A resumed reflective session starts
  // over, so the final report's is the only checkpoint it takes.
  void fill_checkpoint(core::research_checkpoint& c) const override {
    if (plan_)
      for (size_t i = 0; i < plan_->steps.size(); ++i)
        c.plan += std::to_string(i + 1) + ". " + plan_->steps[i].title + "\n";
  }

  void on_finish() override {
    if (agent_)
      self->send_exit(agent_, caf::exit_reason::user_shutdown);
  }

private:
  bool in(phase p) const {
    return self->state.stage == frame_stage::research && now_ == p;
  }

  core::placement next_turn() {
    return turn(++turn_);
  }

  std::string render_with_date(std::string_view name, core::prompt_vars vars) {
    vars.emplace("current_datetime", self->state.spec.current_datetime);
    return render(self, name, vars);
  }

  void say(const std::string& text) {
    notice(self, turn_, text);
  }

  void stop_agent() {
    if (!agent_)
      return;
    self->demonitor(agent_.address());
    self->send_exit(agent_, caf::exit_reason::user_shutdown);
    agent_ = nullptr;
  }

  // The tool of `kind` the strategy uses (web search before internal
  // search; the attached files' tool only when no other has the kind).
  const tool_set::entry* tool_of(std::initializer_list<sdk::tool_kind> kinds,
                                 std::string* name = nullptr) const {
    const tool_set::entry* fallback = nullptr;
    for (auto kind : kinds)
      for (const auto& [n, e] : self->state.tools.tools)
        if (e.kind == kind) {
          if (n == core::attached_files_tool_name) {
            fallback = &e;
            continue;
          }
          if (name != nullptr)
            *name = n;
          return &e;
        }
    if (fallback != nullptr && name != nullptr)
      *name = core::attached_files_tool_name;
    return fallback;
  }

  // The search over the files attached to the session when it is not
  // `primary` (searched besides it), else null.
  const tool_set::entry* attached_files(const std::string& primary) const {
    if (primary == core::attached_files_tool_name)
      return nullptr;
    auto it = self->state.tools.tools.find(core::attached_files_tool_name);
    return it == self->state.tools.tools.end() ? nullptr : &it->second;
  }

  // -- the final text (synthesis or direct answer) -----------------------------------

  void begin_final_text() {
    take_checkpoint(self, core::checkpoint_phase::final_report);
    begin_final(self, ++turn_, true);
  }

  // -- simple answers ----------------------------------------------------------------

  void start_simple(const std::string& why) {
    auto& fs = self->state;
    if (!why.empty())
      say(why);
    fs.answered_directly = true;
    begin_final_text();
    std::string user;
    // The sources already in the conversation (a follow-up chain).
    auto recent = core::conversation_window(fs.spec.conversation);
    for (const auto& m : recent)
      user += (m.author == sdk::role::user ? "User: " : "Assistant: ")
              + std::string{sdk::utf8_prefix(m.content, 8000)} + "\n\n";
    if (!user.empty())
      user = "The conversation so far:\n\n" + user + "The question:\n\n"
             + std::string{lexical::asked_question(fs.spec.question)};
    else
      user = fs.spec.question;
    auto req = text_request(render_with_date("reflective_simple", {}), std::move(user), "simple",
                            fs.spec.final_max_tokens);
    req.research = core::research_context_of(fs.spec.question, fs.spec.conversation);
    write_final(self, std::move(req));
  }

  // -- coordinator -------------------------------------------------------------------

  void after_classification() {
    auto& fs = self->state;
    const auto& c = classified_;
    // `auto` follows the coordinator's complexity (its recommended depth is
    // shown in the packet, not taken).
    depth_ = rf::resolve_depth(fs.spec.reflective.depth, c.complexity);
    profile_ = rf::profile_for(depth_, fs.spec.reflective.max_search_queries,
                               fs.spec.reflective.max_urls_to_crawl);
    auto mode = mode_;
    // A simple question is answered directly, unless a depth was asked for.
    if (mode == rf::query_mode::deep_research && c.complexity == rf::complexity::simple
        && fs.spec.reflective.depth == rf::depth::automatic)
      mode = rf::query_mode::simple;
    emit(self, turn(turn_), rf::classification_packet(c, depth_, mode));
    if (fs.spec.clarify && c.is_ambiguous && !c.clarifying_questions.empty()) {
      std::string questions;
      for (size_t i = 0; i < c.clarifying_questions.size(); ++i)
        questions += std::to_string(i + 1) + ". " + c.clarifying_questions[i] + "\n";
      emit(self, turn(turn_), core::packets::clarification(questions));
      emit(self, turn(turn_), core::packets::stop("clarification"));
      session_result out;
      out.status = session_status::clarification;
      out.questions = questions;
      finish(self, std::move(out));
      return;
    }
    if (mode == rf::query_mode::simple) {
      start_simple({});
      return;
    }
    start_background();
  }

  // A plan of one step on the whole question (the web_search mode's, and
  // the fallback when the first plan cannot be written).
  rf::plan one_step_plan() const {
    const auto& question = self->state.spec.question;
    rf::plan_draft d;
    d.title = question;
    rf::plan_step s;
    s.title = question;
    s.description = question;
    d.steps.push_back(std::move(s));
    return rf::merge_plan(nullptr, std::move(d), profile_).next;
  }

  // The web_search mode: one light step on the question, answered directly
  // when it takes longer than its fallback time.
  void start_web_search() {
    auto& fs = self->state;
    depth_ = rf::depth::light;
    profile_ = rf::profile_for(depth_, fs.spec.reflective.max_search_queries,
                               fs.spec.reflective.max_urls_to_crawl);
    plan_ = one_step_plan();
    self->delayed_send(self, fs.spec.reflective.web_search_fallback, strategy_timer_atom::value);
    emit(self, next_turn(), rf::plan_packet(*plan_));
    start_step();
  }

  void start_classify() {
    auto& fs = self->state;
    now_ = phase::classify;
    auto max_q = fs.spec.reflective.max_clarifying_questions;
    auto req = rf::structured_request(
      render_with_date("reflective_coordinator",
                       {{"max_clarifying_questions", std::to_string(max_q)}}),
      rf::coordinator_input(fs.spec.question, fs.spec.conversation), rf::classify_tool(max_q),
      "classify", rf::coordinator_context(fs.spec.question, fs.spec.conversation));
    call_structured(
      self, fs.models.clarify, std::move(req), turn(0), "classify_question",
      [this, max_q](const nlohmann::json& args) -> std::string {
        auto read = rf::read_classification(args, max_q);
        if (auto* bad = std::get_if<rf::invalid_output>(&read))
          return bad->problem;
        classified_ = std::get<rf::classification>(std::move(read));
        return {};
      },
      [this] { after_classification(); },
      [this](const std::string& why) {
        // The coordinator's step failed: research at the requested depth.
        classified_ = rf::classification{};
        say("The question could not be classified (" + why
            + "); researching it as a moderate question.");
        after_classification();
      });
  }

  // -- background investigator -------------------------------------------------------

  // Runs `queries` on the search tool; `done` gets the results.
  void run_searches(const std::vector<std::string>& queries, core::placement at,
                    std::function<void(std::vector<sdk::tool_result>)> done) {
    std::string name;
    const auto* search = tool_of({sdk::tool_kind::web_search, sdk::tool_kind::internal_search},
                                 &name);
    if (search == nullptr || queries.empty()) {
      done({});
      return;
    }
    emit(self, at, core::packets::search_tool_start(search->kind == sdk::tool_kind::web_search));
    emit(self, at, core::packets::search_tool_queries_delta(queries));
    auto args = nlohmann::json{{"queries", queries}}.dump();
    self->request(search->actor, caf::infinite, run_atom::value, tool_call_msg{1, args})
      .then(
        [this, at, done](tool_reply& reply) {
          if (self->state.stage == frame_stage::done)
            return;
          emit(self, at, core::packets::search_tool_documents_delta(reply.result.documents));
          emit(self, at, core::packets::section_end());
          done({std::move(reply.result)});
        },
        [this, at, done](caf::error&) {
          if (self->state.stage == frame_stage::done)
            return;
          emit(self, at, core::packets::section_end());
          done({});
        });
  }

  // The background investigator: 2-3 queries from the question (an answer
  // with fewer is asked again once; more are cut), their results' titles
  // and snippets as the planner's context.
  void start_background() {
    auto& fs = self->state;
    now_ = phase::background;
    auto at = next_turn();
    constexpr int most = rf::background_max_queries;
    constexpr int least = rf::background_min_queries;
    auto queries = std::make_shared<std::vector<std::string>>();
    auto req = rf::structured_request(
      render_with_date("reflective_queries", {{"query_count", rf::query_count_text(most, least)},
                                              {"max_queries", std::to_string(most)}}),
      fs.spec.question, rf::queries_tool(most, least), "plan",
      core::research_context_of(fs.spec.question));
    call_structured(
      self, fs.models.plan, std::move(req), at, "search_queries",
      [queries](const nlohmann::json& args) -> std::string {
        // What is usable is kept, in case the repair has no more.
        if (auto some = rf::read_queries(args, rf::background_max_queries);
            auto* got = std::get_if<std::vector<std::string>>(&some))
          *queries = std::move(*got);
        auto read = rf::read_queries(args, rf::background_max_queries, rf::background_min_queries);
        if (auto* bad = std::get_if<rf::invalid_output>(&read))
          return bad->problem;
        *queries = std::get<std::vector<std::string>>(std::move(read));
        return {};
      },
      [this, queries, at] { background_search(*queries, at); },
      [this, queries, at](const std::string& why) {
        if (queries->empty()) {
          say("No background search (" + why + ").");
          start_planner();
          return;
        }
        say("The background search has only " + std::to_string(queries->size())
            + " query of the 2-3 asked for (" + why + ").");
        background_search(*queries, at);
      });
  }

  void background_search(const std::vector<std::string>& queries, core::placement at) {
    run_searches(queries, at, [this](std::vector<sdk::tool_result> results) {
      if (!in(phase::background))
        return;
      // Snippets only: titles and snippets as the planner's context.
      std::string text;
      for (const auto& r : results)
        for (const auto& d : r.documents)
          text += "- " + d.title + ": "
                  + std::string{sdk::utf8_prefix(d.snippet.empty() ? d.content : d.snippet, 400)}
                  + "\n";
      background_ = std::move(text);
      start_planner();
    });
  }

  // -- planner -----------------------------------------------------------------------

  void start_planner() {
    auto& fs = self->state;
    if (fs.stop_requested || fs.deadline_passed) {
      start_synthesis();
      return;
    }
    now_ = phase::plan;
    auto at = next_turn();
    auto room = rf::room_for(plan_ ? &*plan_ : nullptr, profile_);
    auto draft = std::make_shared<rf::plan_draft>();
    auto req = rf::structured_request(
      render_with_date("reflective_planner", {{"depth", rf::to_string(depth_)},
                                              {"step_range", rf::step_range(profile_)}}),
      rf::planner_input(fs.spec.question, background_, plan_ ? &*plan_ : nullptr,
                        feedback_ ? &*feedback_ : nullptr, room, depth_),
      rf::plan_tool(room.at_least, room.room), "plan",
      rf::planner_context(fs.spec.question, plan_ ? &*plan_ : nullptr, room));
    call_structured(
      self, fs.models.plan, std::move(req), at, "write_plan",
      [draft, room](const nlohmann::json& args) -> std::string {
        auto read = rf::read_plan(args, room.at_least, room.room);
        if (auto* bad = std::get_if<rf::invalid_output>(&read))
          return bad->problem;
        *draft = std::get<rf::plan_draft>(std::move(read));
        return {};
      },
      [this, draft, at] {
        auto update = rf::merge_plan(plan_ ? &*plan_ : nullptr, std::move(*draft), profile_);
        plan_ = std::move(update.next);
        feedback_.reset();
        for (const auto& n : update.notices)
          say(n);
        emit(self, at, rf::plan_packet(*plan_));
        start_step();
      },
      [this, at](const std::string& why) {
        if (!plan_) {
          // The first plan failed: one step on the whole question.
          say("The plan could not be written (" + why + "); researching the question as one step.");
          plan_ = one_step_plan();
        } else {
          say("The plan could not be adjusted (" + why + "); keeping it.");
        }
        feedback_.reset();
        emit(self, at, rf::plan_packet(*plan_));
        start_step();
      });
  }

  // -- researcher --------------------------------------------------------------------

  // The step's observation as the collector numbers it: its local markers
  // become global ones (the number of sources that were new is returned
  // too).
  void collapse_observation(agent_result r) {
    auto& fs = self->state;
    auto before = fs.global.size();
    auto title = plan_->steps[step_].title;
    collapse_request req;
    req.reports.emplace_back(title, std::move(r));
    self->request(fs.collector, caf::infinite, collapse_atom::value, std::move(req))
      .then(
        [this, before](collapse_reply& reply) {
          auto& fs = self->state;
          if (!in(phase::step))
            return;
          fs.global = std::move(reply.global);
          fs.docs_by_id = std::move(reply.documents);
          auto text = reply.texts.empty() ? std::string{} : std::move(reply.texts.front());
          step_done(std::move(text), fs.global.size() - before, {});
        },
        [this](caf::error& err) {
          if (!in(phase::step))
            return;
          step_done({}, 0, "the citation collector failed: " + caf::to_string(err));
        });
  }

  // The classic researcher's observation from what its searches and reads
  // returned.
  void write_observation() {
    auto& fs = self->state;
    if (!in(phase::step))
      return;
    auto task = rf::step_task(fs.spec.question, *plan_, step_);
    auto req = text_request(render_with_date("reflective_observation", {}), task, "report", 4000);
    req.research = core::research_context_of(fs.spec.question);
    req.research.task = task;
    if (!step_calls_.empty()) {
      sdk::chat_message calls;
      calls.author = sdk::role::assistant;
      calls.tool_calls = step_calls_;
      req.messages.push_back(std::move(calls));
      for (const auto& c : step_calls_) {
        sdk::chat_message m;
        m.author = sdk::role::tool;
        m.tool_call_id = c.id;
        m.tool_name = c.name;
        m.content = step_results_[c.id];
        req.messages.push_back(std::move(m));
      }
    } else {
      // An analysis step: what the completed steps found.
      std::string earlier;
      for (const auto& s : plan_->steps)
        if (s.status == rf::step_status::completed)
          earlier += "\n## " + s.title + "\n\n" + s.observation + "\n";
      if (!earlier.empty())
        req.messages.back().content += "\n\nWhat the completed steps found:\n" + earlier;
    }
    call_llm(
      self, fs.models.research, std::move(req), turn(turn_),
      [this](sdk::chat_result& r) {
        if (r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
          step_done({}, 0, "the researcher wrote an empty observation");
          return;
        }
        if (step_calls_.empty()) {
          // Analysis: its markers are already the session's numbers.
          step_done(r.text, 0, {});
          return;
        }
        agent_result res;
        res.ok = true;
        res.report = r.text;
        res.cited = core::cited_documents(r.text, round_.numbers.documents());
        collapse_observation(std::move(res));
      },
      [this](const sdk::error& e) { step_done({}, 0, e.message); });
  }

  // Runs one tool of the classic researcher as a research agent runs its
  // tools (tool_round.hpp), records its result for the observation, then
  // calls `then` with the documents it returned (none when it failed).
  void run_step_tool(const std::string& name, const nlohmann::json& args, core::placement at,
                     std::function<void(std::vector<sdk::document>)> then) {
    auto& fs = self->state;
    sdk::tool_call call;
    call.id = "call_" + std::to_string(step_calls_.size() + 1);
    call.name = name;
    call.arguments = args.dump();
    step_calls_.push_back(call);
    auto started = round_.start(fs.tools, call, fs.emitter, at);
    auto id = call.id;
    if (started.tool == nullptr) {
      step_results_[id] = std::move(started.result.llm_text);
      then({});
      return;
    }
    auto kind = started.tool->kind;
    self
      ->request(started.tool->actor, caf::infinite, run_atom::value,
                tool_call_msg{1, std::move(started.arguments), std::move(started.parsed)})
      .then(
        [this, kind, at, id, then](tool_reply& reply) {
          if (!in(phase::step))
            return;
          auto& r = reply.result;
          round_.answered(kind, r, self->state.emitter, at);
          step_results_[id] = std::move(r.llm_text);
          then(std::move(r.documents));
        },
        [this, name, at, id, then](caf::error& err) {
          if (!in(phase::step))
            return;
          step_results_[id] = round_.failed(name, err, self->state.emitter, at).llm_text;
          then({});
        });
  }

  // The classic researcher: queries, at most max_search_queries searches and
  // max_urls_to_crawl page reads, then the observation.
  void classic_step() {
    auto& fs = self->state;
    auto at = turn(turn_);
    auto max_q = profile_.max_search_queries;
    auto task = rf::step_task(fs.spec.question, *plan_, step_);
    auto queries = std::make_shared<std::vector<std::string>>();
    auto search_and_read = [this, queries, at] {
      if (!in(phase::step))
        return;
      if (queries->empty())
        queries->push_back(plan_->steps[step_].title);
      std::string name;
      const auto* search = tool_of({sdk::tool_kind::web_search, sdk::tool_kind::internal_search},
                                   &name);
      auto web = search->kind == sdk::tool_kind::web_search;
      // The pages of the best web results, then the observation.
      auto read_pages = [this, web, at](std::vector<sdk::document> docs) {
        std::string reader_name;
        const auto* reader = tool_of({sdk::tool_kind::page_reader}, &reader_name);
        std::vector<std::string> urls;
        auto most = static_cast<size_t>(profile_.max_urls_to_crawl);
        if (reader != nullptr && web)
          for (const auto& d : docs)
            if (!d.url.empty() && urls.size() < most)
              urls.push_back(d.url);
        if (urls.empty()) {
          write_observation();
          return;
        }
        run_step_tool(reader_name, nlohmann::json{{"urls", urls}}, at,
                      [this](std::vector<sdk::document>) { write_observation(); });
      };
      // The searches first (one call with every query; the attached files
      // searched with the same queries), then the pages.
      auto args = nlohmann::json{{"queries", *queries}};
      run_step_tool(name, args, at,
                    [this, name, args, at, read_pages](std::vector<sdk::document> docs) {
                      if (attached_files(name) == nullptr) {
                        read_pages(std::move(docs));
                        return;
                      }
                      run_step_tool(core::attached_files_tool_name, args, at,
                                    [read_pages, docs](std::vector<sdk::document>) mutable {
                                      read_pages(std::move(docs));
                                    });
                    });
    };
    auto context = core::research_context_of(fs.spec.question);
    context.task = rf::step_text(*plan_, step_);
    auto req = rf::structured_request(
      render_with_date("reflective_queries", {{"query_count", rf::query_count_text(max_q)},
                                              {"max_queries", std::to_string(max_q)}}),
      task, rf::queries_tool(max_q), "plan", std::move(context));
    call_structured(
      self, fs.models.plan, std::move(req), at, "search_queries",
      [queries, max_q](const nlohmann::json& args) -> std::string {
        auto read = rf::read_queries(args, max_q);
        if (auto* bad = std::get_if<rf::invalid_output>(&read))
          return bad->problem;
        *queries = std::get<std::vector<std::string>>(std::move(read));
        return {};
      },
      search_and_read,
      [this, search_and_read](const std::string& why) {
        say("No search queries for this step (" + why + "); searching its title.");
        search_and_read();
      });
  }

  // The ReAct researcher: the research agent, driven by the step.
  void react_step() {
    auto& fs = self->state;
    agent_ = start_agent(self, plan_->steps[step_].id,
                         rf::step_task(fs.spec.question, *plan_, step_), {}, turn_, 0);
  }

  void start_step() {
    auto& fs = self->state;
    if (fs.stop_requested || fs.deadline_passed) {
      start_synthesis();
      return;
    }
    auto next = rf::next_step(*plan_);
    if (!next) {
      start_synthesis();
      return;
    }
    now_ = phase::step;
    step_ = *next;
    auto& step = plan_->steps[step_];
    step.status = rf::step_status::in_progress;
    auto at = next_turn();
    emit(self, at, rf::step_start_packet(step));
    emit(self, at, rf::plan_packet(*plan_));
    round_ = tool_round{};
    step_calls_.clear();
    step_results_.clear();
    auto searches = tool_of({sdk::tool_kind::web_search, sdk::tool_kind::internal_search})
                    != nullptr;
    if (!step.needs_search || step.type == rf::step_type::analysis || !searches)
      write_observation();
    else if (profile_.react)
      react_step();
    else
      classic_step();
  }

  void step_done(std::string observation, size_t new_sources, const std::string& failure) {
    auto& fs = self->state;
    if (!in(phase::step))
      return;
    agent_ = nullptr;
    auto& step = plan_->steps[step_];
    if (failure.empty()) {
      step.status = rf::step_status::completed;
      step.observation = std::move(observation);
      fs.findings.emplace_back(step.title, step.observation);
    } else {
      // The step failed, not the session: it is skipped and research goes
      // on.
      step.status = rf::step_status::skipped;
      say("Step " + step.id + " failed: " + failure);
    }
    auto at = turn(turn_);
    emit(self, at, rf::step_end_packet(step, new_sources, failure));
    emit(self, at, rf::plan_packet(*plan_));
    if (mode_ == rf::query_mode::web_search || fs.stop_requested || fs.deadline_passed) {
      start_synthesis();
      return;
    }
    start_reflect(step_, new_sources);
  }

  // -- reflector ---------------------------------------------------------------------

  void apply_decision(rf::decision taken) {
    switch (taken) {
      case rf::decision::continue_plan:
        start_step();
        break;
      case rf::decision::adjust:
        start_planner();
        break;
      case rf::decision::complete:
        rf::skip_pending(*plan_);
        emit(self, turn(turn_), rf::plan_packet(*plan_));
        start_synthesis();
        break;
    }
  }

  void start_reflect(size_t done, size_t new_sources) {
    auto& fs = self->state;
    now_ = phase::reflect;
    auto at = next_turn();
    auto got = std::make_shared<rf::reflection>();
    auto step_id = plan_->steps[done].id;
    auto req = rf::structured_request(
      render_with_date("reflective_reflector", {{"depth", rf::to_string(depth_)},
                                                {"min_steps", std::to_string(profile_.min_steps)}}),
      rf::reflector_input(fs.spec.question, *plan_, done, fs.global.size(), new_sources),
      rf::reflect_tool(), "plan", rf::reflector_context(fs.spec.question, new_sources));
    call_structured(
      self, fs.models.plan, std::move(req), at, "reflect",
      [got](const nlohmann::json& args) -> std::string {
        auto read = rf::read_reflection(args);
        if (auto* bad = std::get_if<rf::invalid_output>(&read))
          return bad->problem;
        *got = std::get<rf::reflection>(std::move(read));
        return {};
      },
      [this, got, at, step_id] {
        auto& fs = self->state;
        auto outcome = rf::enforce(*got, *plan_, profile_, fs.spec.reflective.max_plan_iterations);
        emit(self, at, rf::reflection_packet(*got, outcome, step_id));
        if (outcome.refused)
          fs.notices.push_back(outcome.why);
        if (outcome.taken == rf::decision::adjust)
          feedback_ = *got;
        apply_decision(outcome.taken);
      },
      [this, at, step_id](const std::string& why) {
        // The reflector's step failed: go on with the plan as it is.
        rf::reflection r;
        r.decision = rf::decision::continue_plan;
        r.reasoning = "The reflection failed (" + why + "); continuing with the plan.";
        // The next pending step, or the synthesis: no replan without a
        // reflection that asked for it.
        rf::reflection_outcome outcome;
        outcome.taken = rf::next_step(*plan_) ? rf::decision::continue_plan
                                              : rf::decision::complete;
        emit(self, at, rf::reflection_packet(r, outcome, step_id));
        say(r.reasoning);
        apply_decision(outcome.taken);
      });
  }

  // -- synthesizer -------------------------------------------------------------------

  void start_synthesis() {
    auto& fs = self->state;
    if (fs.stage != frame_stage::research)
      return;
    cancel_call(self);
    stop_agent();
    if (plan_ && now_ == phase::step) {
      auto& step = plan_->steps[step_];
      if (step.status == rf::step_status::in_progress)
        step.status = rf::step_status::skipped;
    }
    if (plan_)
      rf::skip_pending(*plan_);
    begin_final_text();
    if (plan_)
      emit(self, fs.at, rf::plan_packet(*plan_));
    if (fs.findings.empty()) {
      fallback_report(self, fs.stop_requested ? "the research was " + stopped(fs)
                                              : "no step produced an observation");
      return;
    }
    auto req = text_request(render_with_date("reflective_synthesizer", {}),
                            rf::synthesizer_input(fs.spec.question, *plan_), "synthesize",
                            fs.spec.final_max_tokens);
    req.research = rf::synthesizer_context(fs.spec.question, *plan_);
    write_final(self, std::move(req));
  }

  phase now_ = phase::classify;
  bool started_ = false;
  rf::classification classified_;
  rf::depth depth_ = rf::depth::light;
  rf::depth_profile profile_;
  rf::query_mode mode_ = rf::query_mode::deep_research;
  std::string background_;
  std::optional<rf::plan> plan_;
  std::optional<rf::reflection> feedback_;
  size_t step_ = 0;
  // Turn of the next packets: each stage gets its own.
  int turn_ = 0;

  // The classic researcher's step: its tool round (numbers, snippets).
  tool_round round_;
  std::vector<sdk::tool_call> step_calls_;
  std::map<std::string, std::string> step_results_;
  // The ReAct researcher of the step.
  research_agent_actor agent_;
};

} // namespace

} // namespace reflection

std::unique_ptr<strategy> make_reflective_strategy(frame_ptr self) {
  return std::make_unique<reflection::reflective>(self);
}

} // namespace quarry::actors::detail
