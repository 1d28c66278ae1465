// `quarry eval run` and `quarry eval report` (cmd_eval.hpp): a set of
// questions researched as `quarry research` researches one, several at a
// time through one research engine, each stored as a session, measured from
// its packets and kept in the run's folder (eval_run_dir.hpp).

#include "cmd_eval.hpp"

#include "cli.hpp"
#include "context.hpp"
#include "eval_progress.hpp"
#include "eval_questions.hpp"
#include "eval_report.hpp"
#include "eval_result.hpp"
#include "eval_run_dir.hpp"
#include "output_file.hpp"
#include "report_render.hpp"
#include "research_engine.hpp"
#include "research_run.hpp"
#include "session_store.hpp"

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <unistd.h>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

std::string eval_help_footer() {
  return R"(The questions file holds one JSON object per line, DeepResearch Bench's
format: {"id": 1, "prompt": "the question", ...}; other fields are kept, and
"must_cite": ["file.md", "https://..."] names sources a good answer cites.

The folder receives run.json (the set and the options), results/<id>.json per
question (sources read, citations, unique cited sources, claims verified,
supported and unsupported, tokens, cost, time, errors) and articles.jsonl
({"id", "prompt", "article"} per completed question, for DeepResearch Bench's
scorers). Every file is replaced atomically: a run killed at any moment goes
on with --resume, which asks only the questions without a report.

Exit codes:
  0    every question has a report
  1    a research failed (its result says why; --resume asks it again), or
       the folder or the store could not be written
  2    invalid command line, questions file or folder
  130  interrupted by SIGINT (Ctrl-C); 143 by SIGTERM)";
}

// The question's research as a shared tally: the line sink adds to it on
// its thread, the command reads it once the sink has ended.
struct shared_tally {
  std::mutex mtx;
  eval::packet_tally tally;
};

// One research under way.
struct flight {
  const eval::question* q = nullptr;
  std::unique_ptr<session_lock> lock;
  research_run_actor run;
  actors::line_sink_actor sink;
  std::shared_ptr<shared_tally> tally;
  std::chrono::steady_clock::time_point started;
  std::optional<run_outcome> outcome;
  bool sink_down = false;
  std::chrono::steady_clock::time_point done_at;
};

} // namespace

void add_eval_commands(CLI::App& cli, eval_commands& out) {
  out.eval = cli.add_subcommand("eval", "Run a set of questions and measure the researches, or "
                                        "report and compare such runs (docs/eval.md)");
  out.eval->require_subcommand(1);
  auto& ro = out.run_options;
  out.run = out.eval->add_subcommand(
    "run", "Research every question of a JSONL file (DeepResearch Bench's format), store each "
           "session and write the articles and one result per question into a folder");
  out.run
    ->add_option("questions", ro.questions, "The questions file: {\"id\", \"prompt\"} per line")
    ->required()
    ->type_name("QUESTIONS.jsonl");
  out.run->add_option("--out", ro.out, "The run's folder (created; must be new or empty)")
    ->required()
    ->type_name("DIR");
  out.run->add_option("--concurrency", ro.concurrency, "Researches at once (1-16, default 1)")
    ->type_name("N");
  out.run->add_flag("--resume", ro.resume,
                    "Go on with the run in --out: questions with a report are skipped");
  out.run->add_option("--strategy", ro.strategy,
                      "orchestrator or reflective (default: research.strategy)");
  out.run->add_option("--mode", ro.mode,
                      "Reflective strategy: simple, web_search or deep_research");
  out.run->add_option("--depth", ro.depth, "Reflective strategy: auto, light, medium or extended");
  out.run
    ->add_option("--deadline", ro.deadline,
                 "Research time per question, e.g. 10m (default: research.deadline)")
    ->type_name("DURATION");
  out.run->add_option("--max-agents", ro.max_agents, "Research agents at once per question (1-16)")
    ->type_name("N");
  out.run->add_flag("--verify", ro.verify,
                    "Check every report claim by claim against its sources (the default)");
  out.run->add_flag("--no-verify", ro.no_verify, "Do not check the reports claim by claim");
  out.run->add_option("--corpus", ro.corpus, "Index this folder and search it with internal_search")
    ->type_name("DIR");
  out.run->add_flag("--no-store", ro.no_store, "Keep no session in the store (store.path)");
  out.run->footer(eval_help_footer());
  auto& po = out.report_options;
  out.report = out.eval->add_subcommand(
    "report", "Print a run's table; with two runs, also the difference per question and overall");
  out.report->add_option("dirs", po.dirs, "One or two run folders")
    ->required()
    ->expected(1, 2)
    ->type_name("DIR [DIR2]");
  out.report->add_option("--html", po.html, "Also write a page with the distributions as charts")
    ->type_name("FILE");
}

int cmd_eval_run(context& ctx, const eval_run_options& opts) {
  auto& cfg = ctx.config.values;
  // The command line first: nothing is read or created for a bad one.
  if (opts.concurrency < 1 || opts.concurrency > 16) {
    std::cerr << "quarry: --concurrency must be between 1 and 16\n";
    return exit_usage;
  }
  eval::run_options given;
  given.strategy = opts.strategy;
  given.mode = opts.mode;
  given.depth = opts.depth;
  if (!opts.deadline.empty()) {
    auto d = core::parse_duration(opts.deadline);
    if (!d || d->count() <= 0) {
      std::cerr << "quarry: --deadline: not a duration longer than 0: '" << opts.deadline
                << "' (e.g. 10m, 90s)\n";
      return exit_usage;
    }
    given.deadline_ms = d->count();
  }
  if (opts.max_agents != eval_run_options::unset) {
    if (opts.max_agents < 1 || opts.max_agents > 16) {
      std::cerr << "quarry: --max-agents must be between 1 and 16\n";
      return exit_usage;
    }
    given.max_agents = opts.max_agents;
  }
  if (opts.verify && opts.no_verify) {
    std::cerr << "quarry: --verify and --no-verify exclude each other\n";
    return exit_usage;
  }
  given.verify = opts.no_verify ? "off" : "on";
  if (auto why = strategy_option_problem(opts.strategy, opts.mode, opts.depth); !why.empty()) {
    std::cerr << "quarry: --" << why << "\n";
    return exit_usage;
  }
  if (std::string problem;
      imply_reflective(given.strategy, given.mode, given.depth, problem), !problem.empty()) {
    std::cerr << "quarry: --" << problem << "\n";
    return exit_usage;
  }
  if (!opts.corpus.empty()) {
    std::error_code ec;
    if (!fs::is_directory(opts.corpus, ec)) {
      std::cerr << "quarry: --corpus: " << opts.corpus << " is not a folder\n";
      return exit_usage;
    }
    given.corpus = fs::weakly_canonical(opts.corpus, ec).string();
  }

  // The questions: every bad line is named, and nothing runs.
  auto read = eval::read_questions_file(opts.questions);
  if (auto* errors = std::get_if<std::vector<std::string>>(&read)) {
    for (const auto& e : *errors)
      std::cerr << "quarry: " << sdk::strip_terminal_controls(e) << "\n";
    std::cerr << "quarry: eval: no question was run\n";
    return exit_usage;
  }
  const auto& questions = std::get<std::vector<eval::question>>(read);

  // The folder: a new run, or the same run going on.
  std::error_code ec;
  auto questions_file = fs::weakly_canonical(opts.questions, ec).string();
  nlohmann::json extra = {{"quarry_version", QUARRY_VERSION_STRING},
                          {"questions_file", questions_file},
                          {"started_at", rfc3339(unix_ms())}};
  if (opts.resume && !fs::exists(fs::path{opts.out} / "run.json", ec))
    std::cerr << "quarry: eval: " << opts.out << " holds no run to resume; a new run starts\n";
  auto opened = eval::open_for_run(opts.out, questions, given, opts.verify || opts.no_verify,
                                   opts.resume, extra);
  if (auto* why = std::get_if<std::string>(&opened)) {
    std::cerr << "quarry: eval: " << sdk::strip_terminal_controls(*why) << "\n";
    return exit_usage;
  }
  auto folder = std::get<eval::run_folder>(std::move(opened));
  const auto& run_opts = folder.options;
  for (const auto& u : folder.unreadable)
    std::cerr << "quarry: eval: " << folder.dir << "/" << sdk::strip_terminal_controls(u)
              << "; the question is asked again\n";
  std::vector<const eval::question*> todo;
  size_t skipped = 0;
  for (const auto& q : folder.questions) {
    auto it = folder.results.find(q.key);
    if (it != folder.results.end() && eval::is_finished(it->second, q))
      ++skipped;
    else
      todo.push_back(&q);
  }
  auto finish_files = [&]() -> bool {
    if (auto why = eval::write_articles(folder)) {
      std::cerr << "quarry: eval: " << *why << "\n";
      return false;
    }
    return true;
  };
  if (todo.empty()) {
    if (!finish_files())
      return exit_failure;
    std::cerr << "quarry: eval: all " << folder.questions.size() << " questions of " << folder.dir
              << " have a report already\n";
    std::cout << eval::table_text(eval::summarize(folder)) << std::flush;
    return exit_ok;
  }
  if (skipped > 0)
    std::cerr << "quarry: eval: " << skipped << " of " << folder.questions.size()
              << " questions have a report already; " << todo.size() << " to go\n";

  // The engine, the models' windows and the store, as `quarry research`
  // sets them up.
  auto prepared = research_engine::prepare(ctx, engine_setup{run_opts.corpus});
  if (auto* rc = std::get_if<int>(&prepared))
    return *rc;
  auto engine = std::get<std::unique_ptr<research_engine>>(std::move(prepared));
  {
    const auto& windows = engine->check_context();
    for (const auto& note : windows.notes)
      std::cerr << "quarry: " << sdk::strip_terminal_controls(note) << "\n";
    if (!windows.refusal.empty()) {
      std::cerr << "quarry: cannot research: " << sdk::strip_terminal_controls(windows.refusal)
                << "\n";
      return exit_usage;
    }
  }
  std::shared_ptr<store::store> db;
  if (cfg.store.enabled && !opts.no_store) {
    auto opened_store = open_store(cfg);
    if (auto* why = std::get_if<std::string>(&opened_store)) {
      std::cerr << "quarry: the research store cannot be used: " << *why
                << " (pass --no-store to run without keeping the sessions)\n";
      return exit_failure;
    }
    db = std::get<std::shared_ptr<store::store>>(std::move(opened_store));
    std::cerr << "quarry: eval: sessions kept in " << db->path() << "\n";
  }
  auto store_file = db ? db->path() : std::string{};
  engine->start(db);

  bool live = ::isatty(STDERR_FILENO) == 1;
  eval::progress_line progress{stderr, live};
  eval::progress_counts counts;
  counts.total = folder.questions.size();
  counts.skipped = skipped;
  int rc = exit_ok;
  int interrupted_by = 0;
  bool fatal = false;
  {
    auto& rt = engine->runtime();
    caf::scoped_actor self{rt.system()};
    std::map<std::string, flight> flights;
    std::map<caf::actor_addr, std::string> sinks;
    size_t next = 0;
    bool stopping = false;
    actors::signal_watcher watcher{[](int) {}};

    // Starts the research of `q`; false when it cannot be (its session's
    // lock), which ends the run.
    auto start = [&](const eval::question& q) -> bool {
      auto id = store::make_session_id();
      flight f;
      f.q = &q;
      if (db) {
        auto taken = session_lock::take(store_file, id);
        if (auto* why = std::get_if<std::string>(&taken)) {
          std::cerr << "quarry: " << *why << "\n";
          return false;
        }
        f.lock = std::get<std::unique_ptr<session_lock>>(std::move(taken));
      }
      f.tally = std::make_shared<shared_tally>();
      auto tally = f.tally;
      f.sink = actors::spawn_line_sink(rt.system(), [tally](const std::string& line, uint64_t) {
        auto p = core::decode(line);
        if (auto* pk = std::get_if<core::packet>(&p)) {
          std::lock_guard<std::mutex> guard{tally->mtx};
          tally->tally.add(*pk);
        }
      });
      self->monitor(f.sink);
      sinks[f.sink.address()] = id;
      stored_options so;
      so.question = q.prompt;
      so.clarify = false;
      so.deadline_ms = run_opts.deadline_ms;
      so.max_agents = run_opts.max_agents;
      so.corpus = run_opts.corpus;
      so.verify = run_opts.verify;
      so.strategy = run_opts.strategy;
      so.mode = run_opts.mode;
      so.depth = run_opts.depth;
      run_setup setup;
      setup.id = id;
      setup.create = static_cast<bool>(engine->store());
      setup.options = std::move(so);
      setup.sinks.push_back(f.sink);
      f.started = std::chrono::steady_clock::now();
      f.run = spawn_research_run(rt.system(), *engine, std::move(setup),
                                 caf::actor_cast<run_owner_actor>(self));
      flights.emplace(id, std::move(f));
      return true;
    };

    auto count_running = [&] {
      counts.running = 0;
      for (auto& [id, f] : flights)
        if (!f.outcome)
          ++counts.running;
    };

    // A research whose run and sink have ended: its result is written.
    auto land = [&](const std::string& id) {
      auto it = flights.find(id);
      auto& f = it->second;
      auto& out = *f.outcome;
      const auto& q = *f.q;
      auto& r = out.result;
      if (!out.ran) {
        std::cerr << "quarry: the research store cannot be written: " << out.store_error
                  << " (pass --no-store to run without keeping the sessions)\n";
        fatal = true;
      } else if (r.interrupted || interrupted_by != 0) {
        // Stopped by a signal: asked again by --resume.
        progress.line("quarry: eval: " + eval::id_text(q.id) + ": interrupted; not kept");
      } else {
        eval::finished_research fr;
        fr.status = r.status == actors::session_status::report   ? "completed"
                    : r.status == actors::session_status::failed ? "failed"
                                                                 : "clarification";
        fr.session = db ? id : std::string{};
        if (r.status == actors::session_status::report) {
          auto parts = report_of(q.prompt, r, false);
          fr.article = markdown_report(parts);
          fr.body = r.report;
          fr.cited = parts.sources;
        } else if (r.status == actors::session_status::failed) {
          fr.failure = r.failure;
        } else {
          fr.failure = "the research asked clarifying questions: " + r.questions;
        }
        fr.notices = r.notices;
        if (!out.store_error.empty())
          fr.notices.push_back("the research store could not keep the session: " + out.store_error);
        fr.seconds = std::chrono::duration<double>(f.done_at - f.started).count();
        fr.finished_at = rfc3339(unix_ms());
        nlohmann::json result;
        {
          std::lock_guard<std::mutex> guard{f.tally->mtx};
          result = eval::result_json(q, fr, f.tally->tally);
        }
        ++counts.done;
        if (fr.status != "completed") {
          ++counts.failed;
          if (rc == exit_ok)
            rc = exit_failure;
        }
        if (auto why = eval::write_result(folder, q, result)) {
          std::cerr << "quarry: eval: " << *why << "\n";
          fatal = true;
        } else if (!finish_files()) {
          fatal = true;
        }
        count_running();
        progress.update(counts, false);
        std::string said = "quarry: eval: " + eval::id_text(q.id) + ": " + fr.status;
        if (fr.status == "completed")
          said += ", " + std::to_string(result.value("unique_cited_sources", 0)) + " sources cited";
        else
          said += ": " + fr.failure;
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.1f", fr.seconds);
        said += ", " + std::string{secs} + " s";
        if (db)
          said += " (session " + id + ")";
        progress.line(said);
      }
      sinks.erase(f.sink.address());
      flights.erase(it);
    };

    auto stop_all = [&] {
      for (auto& [id, f] : flights)
        if (!f.outcome)
          caf::anon_send(f.run, actors::stop_atom::value);
    };

    counts.running = 0;
    progress.update(counts, true);
    for (;;) {
      if (!stopping && (fatal || watcher.received() != 0)) {
        stopping = true;
        interrupted_by = watcher.received();
        stop_all();
      }
      while (!stopping && next < todo.size()
             && flights.size() < static_cast<size_t>(opts.concurrency)) {
        if (!start(*todo[next++])) {
          fatal = true;
          stopping = true;
          stop_all();
        }
      }
      if (flights.empty() && (stopping || next >= todo.size()))
        break;
      count_running();
      progress.update(counts);
      std::vector<std::string> landed;
      self->receive([](run_started_atom, const std::string&, const std::string&) {},
                    [&](run_done_atom, run_outcome& o) {
                      auto it = flights.find(o.id);
                      if (it == flights.end())
                        return;
                      it->second.done_at = std::chrono::steady_clock::now();
                      auto ran = o.ran;
                      it->second.outcome = std::move(o);
                      if (!ran) {
                        // Nothing ran: no emitter will tell the sink to stop.
                        caf::anon_send_exit(it->second.sink, caf::exit_reason::user_shutdown);
                      }
                      if (it->second.sink_down)
                        landed.push_back(it->first);
                    },
                    [&](const caf::down_msg& dm) {
                      auto s = sinks.find(dm.source);
                      if (s == sinks.end())
                        return;
                      auto it = flights.find(s->second);
                      if (it == flights.end())
                        return;
                      it->second.sink_down = true;
                      if (it->second.outcome)
                        landed.push_back(it->first);
                    },
                    caf::after(std::chrono::milliseconds{250}) >> [] {});
      // A sink that outlives its run by 30 s is given up.
      auto now = std::chrono::steady_clock::now();
      for (auto& [id, f] : flights)
        if (f.outcome && !f.sink_down && now - f.done_at > std::chrono::seconds{30}) {
          spdlog::warn("the packets of session {} did not finish in time", id);
          caf::anon_send_exit(f.sink, caf::exit_reason::kill);
          f.sink_down = true;
          landed.push_back(id);
        }
      for (const auto& id : landed)
        if (flights.count(id) != 0)
          land(id);
    }
    counts.running = 0;
    progress.update(counts, true);
    progress.finish();
    if (watcher.received() != 0)
      interrupted_by = watcher.received();
  }
  if (fatal)
    return exit_failure;
  if (interrupted_by != 0) {
    std::cerr << "quarry: eval: interrupted by "
              << (interrupted_by == SIGINT ? "SIGINT" : "SIGTERM")
              << "; go on with: quarry eval run " << opts.questions << " --out " << opts.out
              << " --resume\n";
    return actors::exit_code_for_signal(interrupted_by);
  }
  auto summary = eval::summarize(folder);
  std::cout << eval::table_text(summary) << std::flush;
  std::cerr << "quarry: eval: " << summary.completed << " of " << summary.rows.size()
            << " questions have a report; articles in " << folder.dir << "/articles.jsonl\n";
  if (counts.failed > 0)
    std::cerr << "quarry: eval: " << counts.failed
              << (counts.failed == 1 ? " research" : " researches")
              << " failed (see the results); --resume asks " << (counts.failed == 1 ? "it" : "them")
              << " again\n";
  return rc;
}

int cmd_eval_report(context&, const eval_report_options& opts) {
  std::vector<eval::run_summary> runs;
  for (const auto& dir : opts.dirs) {
    auto opened = eval::open_for_report(dir);
    if (auto* why = std::get_if<std::string>(&opened)) {
      std::cerr << "quarry: eval: " << sdk::strip_terminal_controls(*why) << "\n";
      return exit_usage;
    }
    auto& folder = std::get<eval::run_folder>(opened);
    for (const auto& u : folder.unreadable)
      std::cerr << "quarry: eval: " << folder.dir << "/" << sdk::strip_terminal_controls(u) << "\n";
    runs.push_back(eval::summarize(folder));
  }
  if (!opts.html.empty()) {
    if (auto why = check_output_path(opts.html)) {
      std::cerr << "quarry: " << *why << "\n";
      return exit_usage;
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0)
      std::cout << "\n";
    std::cout << eval::table_text(runs[i]);
  }
  if (runs.size() == 2)
    std::cout << "\n" << eval::diff_text(runs[0], runs[1]);
  std::cout << std::flush;
  if (!opts.html.empty()) {
    if (auto why = write_output_file(opts.html, eval::html_page(runs))) {
      std::cerr << "quarry: " << *why << "\n";
      return exit_failure;
    }
  }
  return exit_ok;
}

} // namespace quarry::app
