// `quarry research "question"`: a whole research session from the command
// line, with embedded defaults that work offline (the extractive provider over
// the example corpus).

#include "cli.hpp"
#include "context.hpp"
#include "output_file.hpp"
#include "report_export.hpp"
#include "report_render.hpp"
#include "research_engine.hpp"
#include "research_view.hpp"
#include "session_store.hpp"

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/session.hpp"
#include "research_run.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/fetch/local_file.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <variant>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

// The answers: standard input ('-') or a regular file (never a FIFO or a
// device), at most 1 MB.
std::variant<std::string, sdk::error> read_answers(const std::string& path) {
  constexpr int64_t max_size = 1 << 20;
  auto too_large = sdk::make_error(sdk::errc::too_large, "more than 1 MB of answers");
  if (path != "-") {
    fetch::local_file_limits limits;
    limits.max_html_bytes = max_size;
    limits.max_pdf_bytes = max_size;
    auto read = fetch::read_local_file(path, limits);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      if (err->code == sdk::errc::too_large)
        return too_large;
      err->message += ": " + path;
    }
    return read;
  }
  // In pieces, so one endless line cannot take more than the cap.
  std::string text;
  char buf[64 * 1024];
  while (std::cin.read(buf, sizeof(buf)) || std::cin.gcount() > 0) {
    text.append(buf, static_cast<size_t>(std::cin.gcount()));
    if (static_cast<int64_t>(text.size()) > max_size)
      return too_large;
  }
  return text;
}

// The report files asked for (--out, --html, --pdf, --docx), each written
// in full or not at all; the ones written are added to `written`. False
// when one could not be made or written (each failure said on stderr).
bool write_report_files(const research_options& opts, const report_parts& parts,
                        const std::string& md, std::vector<std::string>& written) {
  bool ok = true;
  auto write = [&](const std::string& path, const std::string& bytes) {
    if (auto why = write_output_file(path, bytes)) {
      std::cerr << "quarry: " << *why << "\n";
      ok = false;
    } else {
      written.push_back(path);
    }
  };
  if (!opts.out.empty())
    write(opts.out, md);
  if (!opts.html.empty())
    write(opts.html, html_report(parts));
  for (const auto& [path, format] :
       {std::pair{opts.pdf, export_format::pdf}, std::pair{opts.docx, export_format::docx}}) {
    if (path.empty())
      continue;
    auto made = export_report(parts, format);
    if (auto* err = std::get_if<export_error>(&made)) {
      std::cerr << "quarry: " << path << " was not written: " << err->message << "\n";
      ok = false;
    } else {
      write(path, std::get<std::string>(made));
    }
  }
  return ok;
}

} // namespace

int cmd_research(context& ctx, const research_options& opts, const resume_info* resume) {
  auto started = std::chrono::steady_clock::now();
  auto& cfg = ctx.config.values;
  const auto& research = cfg.research;
  // What the session runs with: from the command line, or as stored.
  stored_options so;
  if (resume != nullptr) {
    so = resume->options;
  } else {
    // A question that is not UTF-8 is repaired, so it can be stored and sent.
    so.question = sdk::repair_utf8(sdk::trim(opts.question));
    so.clarify = research.clarify && !opts.no_clarify;
  }
  if (so.question.empty()) {
    std::cerr << "quarry: research needs a question\n";
    return exit_usage;
  }
  if (!opts.deadline.empty()) {
    auto d = core::parse_duration(opts.deadline);
    if (!d) {
      std::cerr << "quarry: --deadline: not a duration: '" << opts.deadline
                << "' (e.g. 10m, 90s)\n";
      return exit_usage;
    }
    if (d->count() <= 0) {
      std::cerr << "quarry: --deadline must be longer than 0 (e.g. 10m, 90s)\n";
      return exit_usage;
    }
    so.deadline_ms = d->count();
  }
  if (opts.verify && opts.no_verify) {
    std::cerr << "quarry: --verify and --no-verify exclude each other\n";
    return exit_usage;
  }
  if (opts.verify || opts.no_verify)
    so.verify = opts.verify ? "on" : "off";
  if (auto why = strategy_option_problem(opts.strategy, opts.mode, opts.depth); !why.empty()) {
    std::cerr << "quarry: --" << why << "\n";
    return exit_usage;
  }
  so.strategy = opts.strategy;
  so.mode = opts.mode;
  so.depth = opts.depth;
  std::string problem;
  if (imply_reflective(so.strategy, so.mode, so.depth, problem))
    std::cerr << "quarry: " << (so.mode.empty() ? "--depth" : "--mode")
              << " selects the reflective strategy (the one that reads it)\n";
  if (!problem.empty()) {
    std::cerr << "quarry: --" << problem << "\n";
    return exit_usage;
  }
  if (opts.max_agents != research_options::unset) {
    if (opts.max_agents < 1 || opts.max_agents > 16) {
      std::cerr << "quarry: --max-agents must be between 1 and 16\n";
      return exit_usage;
    }
    so.max_agents = opts.max_agents;
  }
  // Answers given up front: the research starts without asking.
  for (const auto& a : opts.answers)
    if (auto t = std::string{sdk::trim(a)}; !t.empty())
      so.answers += t + "\n";
  if (!opts.answers_file.empty()) {
    auto read = read_answers(opts.answers_file);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      std::cerr << "quarry: --answers: " << err->message << "\n";
      return exit_usage;
    }
    if (auto t = std::string{sdk::trim(std::get<std::string>(read))}; !t.empty())
      so.answers += t + "\n";
  }
  if (!so.answers.empty())
    so.clarify = false;
  auto question = so.question;
  // A path that cannot take the report fails now, not after the research.
  for (const auto& path : {opts.out, opts.html, opts.pdf, opts.docx}) {
    if (path.empty())
      continue;
    if (auto why = check_output_path(path, database_files(data_dir_of(cfg), store_path(cfg)))) {
      std::cerr << "quarry: " << *why << "\n";
      return exit_usage;
    }
  }
  // So does a missing PDF or DOCX converter.
  for (const auto& [path, format] :
       {std::pair{opts.pdf, export_format::pdf}, std::pair{opts.docx, export_format::docx}}) {
    if (path.empty())
      continue;
    auto tool = find_export_tool(format);
    if (auto* err = std::get_if<export_error>(&tool)) {
      std::cerr << "quarry: " << err->message << "\n";
      return exit_failure;
    }
  }
  // The corpus of the command line (or of the stored session); the engine
  // falls back on research.corpus and the example corpus.
  std::string corpus = !opts.corpus.empty() ? opts.corpus : so.corpus;
  if (!corpus.empty()) {
    std::error_code ec;
    if (!fs::is_directory(corpus, ec)) {
      std::cerr << "quarry: --corpus: " << corpus << " is not a folder\n";
      return exit_usage;
    }
    corpus = fs::weakly_canonical(corpus, ec).string();
    so.corpus = corpus;
  }

  auto prepared = research_engine::prepare(ctx, engine_setup{corpus});
  if (auto* rc = std::get_if<int>(&prepared))
    return *rc;
  auto engine = std::get<std::unique_ptr<research_engine>>(std::move(prepared));
  // The models' context windows, before anything is stored: a window below
  // deep research's minimum refuses the research (exit 2).
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

  // The store: opened before anything runs, so a store that cannot be
  // written fails now, with nothing done.
  std::shared_ptr<store::store> db;
  std::unique_ptr<session_lock> lock;
  std::string session_id = resume ? resume->session_id : std::string{"cli"};
  // A follow-up's parent session.
  std::string parent;
  bool storing = resume != nullptr || (cfg.store.enabled && !opts.no_store);
  if (!opts.follow_up.empty() && !storing) {
    std::cerr << "quarry: --follow-up needs the store (it reads the earlier "
                 "session from it); drop --no-store\n";
    return exit_usage;
  }
  if (storing) {
    auto opened = open_store(cfg);
    if (auto* why = std::get_if<std::string>(&opened)) {
      std::cerr << "quarry: the research store cannot be used: " << *why
                << " (pass --no-store to research without keeping the session)\n";
      return exit_failure;
    }
    db = std::get<std::shared_ptr<store::store>>(std::move(opened));
    if (!opts.follow_up.empty()) {
      std::string why;
      auto context = follow_up_context(*db, opts.follow_up, why);
      if (!context) {
        std::cerr << "quarry: the research store cannot be read: "
                  << with_store_path(db->path(), context.error()) << "\n";
        return exit_failure;
      }
      if (!why.empty()) {
        std::cerr << "quarry: " << why << "\n";
        return exit_usage;
      }
      so.follow_up_context = std::move(*context);
      parent = opts.follow_up;
    }
    if (resume == nullptr) {
      // Created by the run, through the store actor, once the engine runs.
      session_id = store::make_session_id();
      auto taken = session_lock::take(db->path(), session_id);
      if (auto* why = std::get_if<std::string>(&taken)) {
        std::cerr << "quarry: " << *why << "\n";
        return exit_failure;
      }
      lock = std::get<std::unique_ptr<session_lock>>(std::move(taken));
    } else {
      auto taken = session_lock::take(db->path(), session_id);
      if (auto* why = std::get_if<std::string>(&taken)) {
        std::cerr << "quarry: " << *why << "\n";
        return exit_failure;
      }
      lock = std::get<std::unique_ptr<session_lock>>(std::move(taken));
      // Read again under the lock: another process may have resumed and
      // finished it since it was found interrupted, or removed it.
      auto row = db->session(session_id);
      if (!row) {
        std::cerr << "quarry: the research store cannot be read: "
                  << with_store_path(db->path(), row.error()) << "\n";
        return exit_failure;
      }
      if (!*row) {
        std::cerr << "quarry: session " << session_id << " was removed by another process\n";
        return exit_failure;
      }
      auto state = (*row)->state;
      if (state != store::session_state::interrupted && state != store::session_state::running
          && state != store::session_state::pending) {
        std::cerr << "quarry: session " << session_id << " is " << store::to_string(state)
                  << " now (another process resumed it); only an interrupted session can "
                     "be resumed\n";
        return exit_failure;
      }
      if ((*row)->last_seq != resume->last_seq) {
        std::cerr << "quarry: session " << session_id
                  << " changed since it was read (another process resumed it); try again\n";
        return exit_failure;
      }
    }
    std::cerr << "quarry: session " << session_id << " (kept in " << db->path() << ")\n";
  }

  engine->start(db);

  bool live = !opts.json && ::isatty(STDERR_FILENO) == 1;
  // Text from outside (the model's report and questions, a server's error)
  // is cleaned of escape sequences before it reaches a terminal. The report
  // and the questions on stdout stay byte for byte when stdout is a pipe or
  // a file (data, like --out); the lines on stderr are for people and are
  // always cleaned.
  bool stdout_terminal = ::isatty(STDOUT_FILENO) == 1;
  // The report as text for reading on a terminal, as Markdown elsewhere
  // (or as --format says).
  auto as_text = opts.format == "text" || (opts.format.empty() && stdout_terminal);
  auto shown = [&](const report_parts& parts, const std::string& md) {
    if (!as_text)
      return printed_report(md, stdout_terminal);
    int width = 80;
    winsize ws{};
    if (stdout_terminal && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
      width = ws.ws_col;
    return printed_report(terminal_report(parts, width), stdout_terminal);
  };
  bool interactive = ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1 && !opts.json;
  int rc = exit_failure;
  {
    auto& rt = engine->runtime();
    const auto& store_writer = engine->store();
    uint64_t next_seq = resume != nullptr ? resume->last_seq + 1 : 1;
    caf::scoped_actor self{rt.system()};
    // The line sink runs on a scheduler thread and may still hold a packet
    // when the session is done: it owns what it touches (shared), and every
    // run waits for it to end before going on.
    auto view = std::make_shared<research_view>(stderr, live);
    auto json_out = std::make_shared<std::mutex>();
    log_forwarder logs{live ? view.get() : nullptr};
    view->start_clock();
    int interrupted_by = 0;
    // One run (research_run.hpp): the session is created or set running
    // through the store actor, runs, and its packets, report and state are
    // stored before the outcome comes back.
    auto run_session = [&](run_setup setup) {
      auto sink = actors::spawn_line_sink(
        rt.system(), [view, json_out, json = opts.json](const std::string& line, uint64_t) {
          if (json) {
            std::lock_guard<std::mutex> guard{*json_out};
            std::cout << line << '\n' << std::flush;
            return;
          }
          auto p = core::decode(line);
          if (auto* pk = std::get_if<core::packet>(&p))
            view->on_packet(*pk);
        });
      self->monitor(sink);
      setup.sinks.push_back(sink);
      setup.first_seq = next_seq;
      // The scoped actor is the run's owner; being a blocking actor it has
      // no typed interface of its own, so its handle is cast to the owner's
      // interface (it handles both messages below).
      auto run = spawn_research_run(rt.system(), *engine, std::move(setup),
                                    caf::actor_cast<run_owner_actor>(self));
      run_outcome out;
      {
        actors::signal_watcher watcher{
          [run](int) { caf::anon_send(run, actors::stop_atom::value); }};
        bool ended = false;
        self->receive_while(
          [&] { return !ended; })([](run_started_atom, const std::string&, const std::string&) {},
                                  [&](run_done_atom, run_outcome& o) {
                                    out = std::move(o);
                                    ended = true;
                                  });
        if (auto sig = watcher.received(); sig != 0)
          interrupted_by = sig;
      }
      next_seq = out.last_seq + 1;
      if (!out.ran) {
        // Nothing ran: no emitter will tell the sink to stop.
        caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
        return out;
      }
      // The emitter told the sink to stop after the last packet: wait until
      // it has printed everything and quit.
      auto sink_down = false;
      self->receive_while([&] { return !sink_down; })(
        [&](const caf::down_msg& dm) {
          if (dm.source == sink.address())
            sink_down = true;
        },
        caf::after(std::chrono::seconds{30}) >>
          [&] {
            spdlog::warn("the progress output did not finish in time");
            caf::anon_send_exit(sink, caf::exit_reason::kill);
            sink_down = true;
          });
      return out;
    };
    // Whether the store kept the run; says so when it did not.
    auto stored_well = [&](const run_outcome& o) {
      if (!store_writer || o.store_error.empty())
        return true;
      std::cerr << "quarry: the research store could not be written (" << o.store_error
                << "): session " << session_id << " is not fully saved\n";
      return false;
    };
    run_setup first;
    first.id = session_id;
    first.create = store_writer && resume == nullptr;
    first.parent = parent;
    first.options = so;
    if (resume != nullptr)
      first.resume = *resume;
    auto outcome = run_session(std::move(first));
    if (!outcome.ran) {
      view->finish();
      logs.set_view(nullptr);
      std::cerr << "quarry: the research store cannot be written: "
                << with_store_path(db->path(),
                                   sdk::make_error(sdk::errc::internal, outcome.store_error))
                << " (pass --no-store to research without keeping the session)\n";
      return exit_failure;
    }
    bool stored = stored_well(outcome);
    if (outcome.result.status == actors::session_status::clarification && interactive
        && interrupted_by == 0) {
      view->finish();
      std::cout << sdk::strip_terminal_controls(outcome.result.questions)
                << "\n\nYour answers (an empty line ends): " << std::flush;
      std::string typed;
      for (std::string l; std::getline(std::cin, l) && !l.empty();)
        typed += l + "\n";
      so.answers = typed;
      so.clarify = false;
      // The answers are kept with the session, so a resume runs with them.
      if (store_writer)
        self->send(store_writer, actors::state_atom::value, session_id, std::string{"running"},
                   std::string{}, to_json(so).dump());
      auto next_view = std::make_shared<research_view>(stderr, live);
      logs.set_view(live ? next_view.get() : nullptr);
      view = std::move(next_view);
      view->start_clock();
      run_setup again;
      again.id = session_id;
      again.options = so;
      outcome = run_session(std::move(again));
      stored = stored_well(outcome);
    }
    auto& result = outcome.result;
    view->finish();
    logs.set_view(nullptr);
    std::vector<std::string> files_written;
    if (interrupted_by != 0) {
      // Interrupted: say so, and keep what was found only if there is any.
      std::cerr << "quarry: interrupted by " << (interrupted_by == SIGINT ? "SIGINT" : "SIGTERM")
                << "\n";
      rc = actors::exit_code_for_signal(interrupted_by);
      if (result.status == actors::session_status::report && !result.sources.empty()) {
        // Marked as partial right under the title.
        auto parts = report_of(question, result, true);
        parts.corpus_root = engine->corpus();
        auto md = markdown_report(parts);
        if (!opts.json)
          std::cout << shown(parts, md) << std::flush;
        write_report_files(opts, parts, md, files_written);
        std::cerr << "quarry: the partial report holds what was found before the "
                     "interruption\n";
        if (db)
          std::cerr << "quarry: go on with: quarry sessions resume " << session_id << "\n";
      } else {
        std::cerr << "quarry: nothing was found before the interruption; no "
                     "report was written\n";
        if (db)
          std::cerr << "quarry: go on with: quarry sessions resume " << session_id << "\n";
      }
      if (live)
        std::cerr << summary_line(std::chrono::steady_clock::now() - started, view->totals(),
                                  files_written)
                  << "\n";
      return rc;
    }
    switch (result.status) {
      case actors::session_status::clarification:
        if (!opts.json)
          std::cout << printed_report(result.questions, stdout_terminal) << "\n";
        std::cerr << "quarry: the question needs clarification: run again with "
                     "the answers, as --answer \"...\" (repeatable) or "
                     "--answers FILE ('-' reads them from standard input), or "
                     "pass --no-clarify to research the question as it is\n";
        rc = exit_clarify;
        break;
      case actors::session_status::failed:
        std::cerr << "quarry: research failed: " << sdk::strip_terminal_controls(result.failure)
                  << "\n";
        rc = exit_failure;
        break;
      case actors::session_status::report: {
        auto parts = report_of(question, result, false);
        parts.corpus_root = engine->corpus();
        auto md = markdown_report(parts);
        if (!opts.json)
          std::cout << shown(parts, md) << std::flush;
        rc = write_report_files(opts, parts, md, files_written) ? exit_ok : exit_failure;
        for (const auto& n : result.notices)
          std::cerr << "quarry: note: " << sdk::strip_terminal_controls(n) << "\n";
        if (!stored && rc == exit_ok)
          rc = exit_failure;
        break;
      }
    }
    if (live)
      std::cerr << summary_line(std::chrono::steady_clock::now() - started, view->totals(),
                                files_written)
                << "\n";
  }
  return rc;
}

} // namespace quarry::app
