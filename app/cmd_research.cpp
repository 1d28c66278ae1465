// `quarry research "question"`: a whole research session from the command
// line, with embedded defaults that work offline (the extractive provider over
// the example corpus).

#include "cli.hpp"
#include "context.hpp"
#include "output_file.hpp"
#include "report_render.hpp"
#include "research_view.hpp"

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/fetch/local_file.hpp"
#include "quarry/sdk/strings.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <variant>
#include <unistd.h>
#include <vector>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

// The example corpus: installed next to the executable (<prefix>/bin/quarry
// and <prefix>/share/quarry/examples/corpus), else in the source tree this
// binary was built from (a build folder may be anywhere).
std::optional<std::string> find_example_corpus() {
  std::error_code ec;
  std::vector<fs::path> candidates;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto prefix = exe.parent_path().parent_path();
    candidates.push_back(prefix / QUARRY_INSTALL_DATADIR / "quarry" / "examples" / "corpus");
  }
  candidates.push_back(fs::path{QUARRY_BUILD_SOURCE_DIR} / "examples" / "corpus");
  for (const auto& candidate : candidates) {
    if (fs::is_directory(candidate, ec))
      return fs::weakly_canonical(candidate, ec).string();
  }
  return std::nullopt;
}

// A database per corpus folder, in the data folder.
std::string corpus_db_for(const std::string& data_dir, const std::string& folder) {
  uint64_t h = 1469598103934665603ULL;
  for (auto c : folder) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return (fs::path{data_dir} / "corpora" / (std::string{buf} + ".db")).string();
}

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

report_parts report_of(const std::string& question,
                       const actors::session_result& r, bool partial) {
  report_parts out;
  out.question = question;
  out.body = r.report;
  out.partial = partial;
  for (const auto& s : r.sources)
    out.sources.push_back({s.number, s.title, s.url});
  return out;
}

} // namespace

int cmd_research(context& ctx, const research_options& opts) {
  auto started = std::chrono::steady_clock::now();
  auto question = std::string{sdk::trim(opts.question)};
  if (question.empty()) {
    std::cerr << "quarry: research needs a question\n";
    return exit_usage;
  }
  auto& cfg = ctx.config.values;
  auto research = cfg.research;
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
    research.deadline = *d;
  }
  if (opts.max_agents != research_options::unset) {
    if (opts.max_agents < 1 || opts.max_agents > 16) {
      std::cerr << "quarry: --max-agents must be between 1 and 16\n";
      return exit_usage;
    }
    research.max_parallel_agents = opts.max_agents;
  }
  if (opts.no_clarify)
    research.clarify = false;
  // Answers given up front: the research starts without asking.
  std::string answers;
  for (const auto& a : opts.answers)
    if (auto t = std::string{sdk::trim(a)}; !t.empty())
      answers += t + "\n";
  if (!opts.answers_file.empty()) {
    auto read = read_answers(opts.answers_file);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      std::cerr << "quarry: --answers: " << err->message << "\n";
      return exit_usage;
    }
    if (auto t = std::string{sdk::trim(std::get<std::string>(read))}; !t.empty())
      answers += t + "\n";
  }
  auto question_for_model = question;
  if (!answers.empty()) {
    question_for_model += "\n\nClarifications from the user:\n" + answers;
    research.clarify = false;
  }
  // A path that cannot take the report fails now, not after the research.
  for (const auto& path : {opts.out, opts.html}) {
    if (path.empty())
      continue;
    if (auto why = check_output_path(path)) {
      std::cerr << "quarry: " << *why << "\n";
      return exit_usage;
    }
  }
  std::string corpus = !opts.corpus.empty() ? opts.corpus : research.corpus;
  if (!corpus.empty()) {
    std::error_code ec;
    if (!fs::is_directory(corpus, ec)) {
      std::cerr << "quarry: --corpus: " << corpus << " is not a folder\n";
      return exit_usage;
    }
    corpus = fs::weakly_canonical(corpus, ec).string();
  }

  // The embedded defaults (providers and tools from the environment) were
  // added when the configuration was loaded (core::apply_environment_defaults,
  // called from app/cli.cpp), so every command sees the same ones.
  std::vector<std::string> defaults_used;
  ctx.load_plugins();
  bool has_search = false;
  for (const auto& [name, entry] : cfg.tools)
    if (const auto* info = ctx.registry->find(entry.plugin);
        info == nullptr || info->tool_kind != sdk::tool_kind::page_reader)
      has_search = true;
  if (corpus.empty() && !has_search) {
    auto example = find_example_corpus();
    if (!example) {
      std::cerr << "quarry: nothing to research with: configure web_search or "
                   "internal_search under tools, set BRAVE_API_KEY or "
                   "TAVILY_API_KEY, or pass --corpus DIR\n";
      return exit_failure;
    }
    corpus = *example;
    defaults_used.push_back("the example corpus " + corpus
                            + " (no search tool is configured; pass --corpus DIR "
                              "for your own documents)");
  }
  for (const auto& d : defaults_used)
    std::cerr << "quarry: using " << d << "\n";

  // The prompts.
  auto prompts = std::make_shared<core::prompt_library>(core::prompt_library::embedded());
  if (!research.prompts_dir.empty()) {
    auto r = prompts->load_overrides(research.prompts_dir);
    if (auto* err = std::get_if<core::prompt_error>(&r)) {
      std::cerr << "quarry: research.prompts_dir: " << err->message << "\n";
      return exit_usage;
    }
  }

  ctx.load_plugins();
  // The corpus index, updated on every run (cheap when nothing changed).
  std::string corpus_db;
  if (!corpus.empty()) {
    corpus_db = corpus_db_for(ctx.services->data_dir(), corpus);
    auto opened = corpus::corpus_index::open(corpus_db);
    if (opened.failure) {
      std::cerr << "quarry: cannot open the corpus index " << corpus_db << ": "
                << opened.failure->message << "\n";
      return exit_failure;
    }
    auto caps = corpus_size_caps(cfg);
    if (auto* err = std::get_if<std::string>(&caps)) {
      std::cerr << "quarry: " << *err << "\n";
      return exit_usage;
    }
    // The same size caps as `quarry index` and open_url.
    auto up = opened.index->update({corpus}, std::get<corpus::update_options>(caps));
    if (up.failure) {
      std::cerr << "quarry: indexing " << corpus << " failed: "
                << up.failure->message << "\n";
      return exit_failure;
    }
    if (up.added + up.updated + up.removed > 0)
      std::cerr << "quarry: indexed " << corpus << ": " << up.added << " added, "
                << up.updated << " updated, " << up.removed << " removed\n";
    core::tool_instance is;
    is.plugin = "local_corpus";
    is.config = {{"db", corpus_db}};
    cfg.tools["internal_search"] = std::move(is);
    // The open_url plugin reads `corpus:<n>` ids from the same index (an
    // option of that plugin, whatever the instance is called).
    for (auto& [name, entry] : cfg.tools)
      if (entry.plugin == "open_url" && !entry.config.contains("corpus_db"))
        entry.config["corpus_db"] = corpus_db;
  }

  // Providers by role.
  std::map<std::string, std::shared_ptr<sdk::llm_provider>> made_llms;
  std::map<std::string, actors::llm_actor_settings> llm_settings;
  for (const auto& [name, entry] : cfg.llm.providers) {
    auto made = ctx.registry->make_llm(entry.plugin, entry.config, name);
    if (auto* err = std::get_if<std::string>(&made)) {
      std::cerr << "quarry: llm.providers." << name << ": " << *err << "\n";
      return exit_failure;
    }
    made_llms[name] = std::get<std::shared_ptr<sdk::llm_provider>>(std::move(made));
    llm_settings[name] = actors::llm_actor_settings::of(name, entry.limits);
  }
  auto default_llm = cfg.llm.default_provider.empty() ? made_llms.begin()->first
                                                      : cfg.llm.default_provider;
  std::vector<std::pair<std::string, std::shared_ptr<sdk::tool>>> made_tools;
  for (const auto& [name, entry] : cfg.tools) {
    auto made = ctx.registry->make_tool(entry.plugin, entry.config);
    if (auto* err = std::get_if<std::string>(&made)) {
      std::cerr << "quarry: tools." << name << ": " << *err << "\n";
      return exit_failure;
    }
    made_tools.emplace_back(name, std::get<std::shared_ptr<sdk::tool>>(std::move(made)));
  }

  actors::session_spec spec;
  spec.session_id = "cli";
  spec.question = question_for_model;
  spec.clarify = research.clarify;
  spec.max_parallel_agents = research.max_parallel_agents;
  spec.max_cycles = research.max_cycles;
  spec.agent_max_cycles = research.agent_max_cycles;
  spec.max_plan_steps = research.max_plan_steps;
  spec.reasoning_model = research.reasoning_model;
  spec.deadline = research.deadline;
  spec.final_report_timeout = research.final_report_timeout;
  spec.agent_force_report = research.agent_report_after;
  spec.agent_hard_timeout = research.agent_timeout;
  spec.context_tokens = research.context_tokens;
  spec.current_datetime = core::prompt_date(std::chrono::system_clock::now());

  bool live = !opts.json && ::isatty(STDERR_FILENO) == 1;
  bool interactive = ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1
                     && !opts.json;
  int rc = exit_failure;
  {
    actors::runtime rt{cfg};
    std::map<std::string, actors::llm_provider_actor> llm_actors;
    for (auto& [name, provider] : made_llms) {
      auto hdl = actors::spawn_llm_provider(rt.system(), provider, llm_settings[name]);
      rt.add_stoppable(hdl);
      llm_actors[name] = hdl;
    }
    auto role = [&](std::initializer_list<const char*> names) {
      for (auto n : names)
        if (auto r = cfg.llm.roles.find(n); r != cfg.llm.roles.end())
          if (auto a = llm_actors.find(r->second); a != llm_actors.end())
            return a->second;
      return llm_actors[default_llm];
    };
    actors::session_models models{role({"clarification", "clarify"}),
                                  role({"plan", "orchestrator"}),
                                  role({"orchestrator"}),
                                  role({"research_agent", "research"}),
                                  role({"final_report", "report"})};
    actors::tool_set tools;
    for (auto& [name, tool] : made_tools) {
      auto hdl = actors::spawn_tool_provider(
        rt.system(), tool, actors::tool_actor_settings::of(name, cfg.tools[name].limits));
      rt.add_stoppable(hdl);
      const auto* info = ctx.registry->find(cfg.tools[name].plugin);
      tools.tools[tool->name()] = {hdl, tool->definition(),
                                   info ? info->tool_kind : sdk::tool_kind::other};
    }
    caf::scoped_actor self{rt.system()};
    // The line sink runs on a scheduler thread and may still hold a packet
    // when the session is done: it owns what it touches (shared), and every
    // run waits for it to end before going on.
    auto view = std::make_shared<research_view>(stderr, live);
    auto json_out = std::make_shared<std::mutex>();
    log_forwarder logs{live ? view.get() : nullptr};
    view->start_clock();
    int interrupted_by = 0;
    auto run_session = [&](actors::session_spec s) {
      auto em = actors::spawn_emitter(rt.system(), s.session_id);
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
      caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
      // The scoped actor receives the result; being a blocking actor it has
      // no typed interface of its own, so its handle is cast to the
      // requester's interface (it handles session_done_atom below).
      auto session = actors::spawn_session(
        rt.system(), std::move(s), models, tools, em, prompts,
        caf::actor_cast<actors::session_requester_actor>(self));
      actors::session_result result;
      {
        actors::signal_watcher watcher{[session](int) {
          caf::anon_send(session, actors::stop_atom::value);
        }};
        self->receive([&](actors::session_done_atom, actors::session_result& r) {
          result = std::move(r);
        });
        if (auto sig = watcher.received(); sig != 0)
          interrupted_by = sig;
      }
      self->request(em, std::chrono::seconds{30}, actors::stop_atom::value)
        .receive([](uint64_t) {}, [](const caf::error&) {});
      // The emitter told the sink to stop after the last packet: wait until
      // it has printed everything and quit.
      auto sink_down = false;
      self->receive_while([&] { return !sink_down; })(
        [&](const caf::down_msg& dm) {
          if (dm.source == sink.address())
            sink_down = true;
        },
        caf::after(std::chrono::seconds{30}) >> [&] {
          spdlog::warn("the progress output did not finish in time");
          caf::anon_send_exit(sink, caf::exit_reason::kill);
          sink_down = true;
        });
      return result;
    };
    auto result = run_session(spec);
    if (result.status == actors::session_status::clarification && interactive
        && interrupted_by == 0) {
      view->finish();
      std::cout << result.questions << "\n\nYour answers (an empty line ends): "
                << std::flush;
      std::string typed;
      for (std::string l; std::getline(std::cin, l) && !l.empty();)
        typed += l + "\n";
      spec.question = question + "\n\nClarifications from the user:\n" + typed;
      spec.clarify = false;
      auto next_view = std::make_shared<research_view>(stderr, live);
      logs.set_view(live ? next_view.get() : nullptr);
      view = std::move(next_view);
      view->start_clock();
      result = run_session(spec);
    }
    view->finish();
    logs.set_view(nullptr);
    std::vector<std::string> files_written;
    if (interrupted_by != 0) {
      // Interrupted: say so, and keep what was found only if there is any.
      std::cerr << "quarry: interrupted by "
                << (interrupted_by == SIGINT ? "SIGINT" : "SIGTERM") << "\n";
      rc = actors::exit_code_for_signal(interrupted_by);
      if (result.status == actors::session_status::report && !result.sources.empty()) {
        // Marked as partial right under the title.
        auto parts = report_of(question, result, true);
        auto md = markdown_report(parts);
        if (!opts.json)
          std::cout << md << std::flush;
        for (const auto& [path, text] :
             {std::pair{opts.out, md}, std::pair{opts.html, html_report(parts)}}) {
          if (path.empty())
            continue;
          if (auto why = write_output_file(path, text))
            std::cerr << "quarry: " << *why << "\n";
          else
            files_written.push_back(path);
        }
        std::cerr << "quarry: the partial report holds what was found before the "
                     "interruption\n";
      } else {
        std::cerr << "quarry: nothing was found before the interruption; no "
                     "report was written\n";
      }
      if (live)
        std::cerr << summary_line(std::chrono::steady_clock::now() - started,
                                  view->totals(), files_written)
                  << "\n";
      return rc;
    }
    switch (result.status) {
      case actors::session_status::clarification:
        if (!opts.json)
          std::cout << result.questions << "\n";
        std::cerr << "quarry: the question needs clarification: run again with "
                     "the answers, as --answer \"...\" (repeatable) or "
                     "--answers FILE ('-' reads them from standard input), or "
                     "pass --no-clarify to research the question as it is\n";
        rc = exit_clarify;
        break;
      case actors::session_status::failed:
        std::cerr << "quarry: research failed: " << result.failure << "\n";
        rc = exit_failure;
        break;
      case actors::session_status::report: {
        auto parts = report_of(question, result, false);
        auto md = markdown_report(parts);
        if (!opts.json)
          std::cout << md << std::flush;
        rc = exit_ok;
        for (const auto& [path, text] :
             {std::pair{opts.out, md}, std::pair{opts.html, html_report(parts)}}) {
          if (path.empty())
            continue;
          if (auto why = write_output_file(path, text)) {
            std::cerr << "quarry: " << *why << "\n";
            rc = exit_failure;
          } else {
            files_written.push_back(path);
          }
        }
        for (const auto& n : result.notices)
          std::cerr << "quarry: note: " << n << "\n";
        break;
      }
    }
    if (live)
      std::cerr << summary_line(std::chrono::steady_clock::now() - started,
                                view->totals(), files_written)
                << "\n";
  }
  return rc;
}

} // namespace quarry::app
