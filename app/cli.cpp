// Command-line parsing (CLI11) and the set-up shared by every command.

#include "cli.hpp"

#include "cluster_checks.hpp"
#include "cmd_eval.hpp"
#include "cmd_mcp.hpp"

#include "config_checks.hpp"
#include "context.hpp"

#include "quarry/core/instances.hpp"
#include "quarry/host/logging.hpp"
#include "quarry/sdk/version.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <unistd.h>

namespace quarry::app {

namespace fs = std::filesystem;

namespace {

std::string version_text() {
  return std::string{"quarry "} + QUARRY_VERSION_STRING + " (plugin SDK "
         + sdk::version_string(sdk::sdk_version) + ", plugin ABI "
         + std::to_string(QUARRY_PLUGIN_ABI_VERSION) + ", " + sdk::stdlib_abi_tag
         + ", nlohmann::json " + sdk::version_string(sdk::json_version) + ")";
}

fs::path executable_dir() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    return fs::current_path();
  return self.parent_path();
}

void collect_secrets(const nlohmann::json& x, std::vector<std::string>& out, bool secret = false) {
  if (x.is_object()) {
    for (const auto& [key, value] : x.items())
      collect_secrets(value, out, secret || core::is_secret_key_name(key));
  } else if (x.is_array()) {
    for (const auto& value : x)
      collect_secrets(value, out, secret);
  } else if (secret && x.is_string() && !x.get<std::string>().empty()) {
    out.push_back(x.get<std::string>());
  }
}

// Every secret value the process knows of, so that logs can mask them.
std::vector<std::string> known_secrets(const core::loaded_config& loaded) {
  auto out = loaded.secret_values();
  for (const auto& [name, entry] : loaded.values.llm.providers)
    collect_secrets(entry.config, out);
  for (const auto& [name, entry] : loaded.values.tools)
    collect_secrets(entry.config, out);
  for (auto** env = environ; env != nullptr && *env != nullptr; ++env) {
    std::string_view kv{*env};
    auto eq = kv.find('=');
    if (eq == std::string_view::npos)
      continue;
    if (core::is_secret_key_name(kv.substr(0, eq)) && eq + 1 < kv.size())
      out.emplace_back(kv.substr(eq + 1));
  }
  return out;
}

std::string research_help_footer() {
  return R"(Global options (before or after the subcommand):
  --config FILE        Configuration file (default: $QUARRY_CONFIG, then
                       ~/.config/quarry/quarry.yaml, then built-in defaults)
  --set KEY=VALUE      Override a configuration key (repeatable)
  --plugin-dir DIR     Folder searched for plugins first (repeatable)
  --log-level LEVEL    trace, debug, info, warn, error or off; timestamped lines

Exit codes:
  0    the report was written
  1    the research failed (the reason is printed)
  2    invalid command line or configuration
  3    the question needs clarification (questions printed; answer them with
       --answer "..." or --answers FILE, or pass --no-clarify)
  130  interrupted by SIGINT (Ctrl-C); 143 by SIGTERM

Environment (used when the configuration names no provider or tool):
  OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL     an OpenAI-compatible model
                       (OPENAI_BASE_URL alone: a local server such as vLLM)
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
  OLLAMA_HOST, OLLAMA_MODEL                         a local Ollama model
  BRAVE_API_KEY, TAVILY_API_KEY, EXA_API_KEY, SERPER_API_KEY or SEARXNG_URL
                                                    web search (the first set)
  QUARRY_CONFIG        the configuration file
  Nothing set: the offline extractive provider over the example corpus.)";
}

std::string tool_run_help_footer(const global_options& opts) {
  core::load_options lopts;
  if (!opts.config_file.empty())
    lopts.file = opts.config_file;
  lopts.overrides = opts.overrides;
  auto loaded = core::load_config(lopts);
  if (!loaded.config)
    return "Configured tools: unknown (the configuration is invalid; run "
           "'quarry config check')";
  core::apply_environment_defaults(*loaded.config);
  const auto& tools = loaded.config->values.tools;
  if (tools.empty())
    return "Configured tools: none (add one under tools in the configuration, "
           "or set BRAVE_API_KEY, TAVILY_API_KEY, EXA_API_KEY, SERPER_API_KEY or "
           "SEARXNG_URL)";
  std::string out = "Configured tools:";
  for (const auto& [name, entry] : tools)
    out += "\n  " + name + "  (plugin " + entry.plugin + ")";
  return out;
}

} // namespace

std::vector<std::string> plugin_search_path(const global_options& options,
                                            const core::settings& cfg) {
  std::vector<std::string> dirs;
  std::vector<std::string> seen;
  auto add = [&](const fs::path& dir) {
    std::error_code ec;
    auto canon = fs::weakly_canonical(dir, ec);
    auto key = ec ? dir.string() : canon.string();
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return;
    seen.push_back(key);
    dirs.push_back(dir.string());
  };
  for (const auto& dir : options.plugin_dirs)
    add(dir);
  for (const auto& dir : cfg.plugins.dirs)
    add(dir);
  auto exe_dir = executable_dir();
  // Build tree: build/bin/quarry next to build/plugins.
  add(exe_dir.parent_path() / "plugins");
  // Installed: <prefix>/bin/quarry and <prefix>/<libdir>/quarry/plugins.
  add(exe_dir.parent_path() / QUARRY_INSTALL_PLUGINDIR);
  return dirs;
}

std::vector<configured_instance> configured_instances(const core::settings& cfg) {
  std::vector<configured_instance> out;
  for (const auto& [name, entry] : cfg.llm.providers)
    out.push_back({"llm.providers." + name, name, &entry, true});
  for (const auto& [name, entry] : cfg.tools)
    out.push_back({"tools." + name, name, &entry, false});
  return out;
}

void context::load_plugins() {
  if (registry)
    return;
  if (!services)
    services = std::make_unique<host::host_services>(config.values);
  registry = std::make_unique<host::plugin_registry>(*services);
  registry->allow_unsafe_permissions(config.values.plugins.allow_unsafe_permissions);
  plugin_dirs = plugin_search_path(options, config.values);
  for (const auto& problem : registry->load_directories(plugin_dirs))
    spdlog::warn("{}", problem);
  for (const auto& x : registry->plugins())
    if (x.ok && !x.unsafe.empty())
      spdlog::warn("{}: loaded only because plugins.allow_unsafe_permissions "
                   "is true: {}",
                   x.file, x.unsafe);
}

int run(int argc, char** argv) {
  CLI::App cli{"Quarry: a deep research engine.", "quarry"};
  cli.require_subcommand(0, 1);
  cli.fallthrough();
  context ctx;
  auto& opts = ctx.options;
  cli.set_version_flag("--version", version_text());
  cli.add_option("--config", opts.config_file,
                 "Configuration file (default: $QUARRY_CONFIG, then "
                 "~/.config/quarry/quarry.yaml, then built-in defaults)");
  // One value per occurrence: a vector option would otherwise also take the
  // words after it (`research --set k=v "question"` lost the question).
  cli
    .add_option("--set", opts.overrides,
                "Override a configuration key: key.path=value (repeatable)")
    ->type_name("KEY=VALUE")
    ->expected(1)
    ->allow_extra_args(false)
    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cli
    .add_option("--plugin-dir", opts.plugin_dirs,
                "Folder searched for plugins before the configured ones "
                "(repeatable)")
    ->type_name("DIR")
    ->expected(1)
    ->allow_extra_args(false)
    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
    ->check(CLI::ExistingDirectory);
  cli.add_option("--log-level", opts.log_level, "trace, debug, info, warn, error or off")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  bool plugins_json = false;
  auto* plugins = cli.add_subcommand("plugins", "List the plugin files found, with their status");
  plugins->add_flag("--json", plugins_json, "Print JSON instead of a table");

  auto* config = cli.add_subcommand("config", "Show or check the configuration");
  config->require_subcommand(1);
  auto* config_show = config->add_subcommand("show",
                                             "Print the effective configuration (secrets as ***)");
  auto* config_check = config->add_subcommand(
    "check", "Validate the configuration and the plugins it names (exit 2 "
             "on errors), then reach every provider and tool once (exit 1 if "
             "one is not reachable)");
  bool check_offline = false;
  config_check->add_flag("--offline", check_offline,
                         "Only validate: do not reach the providers and tools");

  llm_chat_options chat_opts;
  auto* llm = cli.add_subcommand("llm", "Talk to a configured LLM provider");
  llm->require_subcommand(1);
  auto* llm_chat = llm->add_subcommand("chat",
                                       "Send one message through a provider and stream the answer");
  llm_chat->add_option("--provider", chat_opts.provider,
                       "Provider instance (default: llm.default)");
  llm_chat->add_option("--model", chat_opts.model, "Model for this call (default: the provider's)");
  llm_chat->add_option("--system", chat_opts.system, "System prompt");
  llm_chat
    ->add_option("--tools", chat_opts.tools_file, "JSON file with tool definitions (OpenAI format)")
    ->check(CLI::ExistingFile);
  llm_chat->add_option("--tool-choice", chat_opts.tool_choice, "auto, required or none")
    ->check(CLI::IsMember({"auto", "required", "none"}));
  llm_chat->add_option("--max-tokens", chat_opts.max_tokens, "Upper bound on generated tokens")
    ->check(CLI::NonNegativeNumber);
  llm_chat->add_flag("--json", chat_opts.json,
                     "Print one JSON object at the end instead of streaming");
  llm_chat->add_flag("--reasoning", chat_opts.show_reasoning,
                     "Stream the model's reasoning to stderr");
  llm_chat->add_option("message", chat_opts.message, "The message")->required();

  tool_run_options tool_opts;
  auto* tool = cli.add_subcommand("tool", "Run a configured tool");
  tool->require_subcommand(1);
  auto* tool_run = tool->add_subcommand(
    "run", "Run a tool exactly as a research agent would and print what the "
           "LLM sees; exit 1 if the tool failed");
  tool_run->add_option("name", tool_opts.name, "Tool name, e.g. web_search")->required();
  tool_run
    ->add_option("arguments", tool_opts.arguments,
                 "Arguments as a JSON object, e.g. '{\"queries\": [\"caf\"]}'")
    ->required();
  // The configured tools, read when help is asked for (the options before
  // --help are known by then).
  tool_run->footer([&opts] { return tool_run_help_footer(opts); });
  tool_run->add_flag("--json", tool_opts.json,
                     "Print {\"llm_text\", \"documents\", \"error\"?} as JSON");

  research_options research_opts;
  auto* research = cli.add_subcommand("research", "Research a question and write a cited report");
  research->add_option("question", research_opts.question, "The question")->required();
  research->add_flag("--no-clarify", research_opts.no_clarify,
                     "Never ask clarifying questions first");
  research->add_flag("--verify", research_opts.verify,
                     "Check the report claim by claim against the text of its "
                     "sources (default: research.verify)");
  research->add_flag("--no-verify", research_opts.no_verify,
                     "Do not check the report claim by claim");
  research->add_option("--strategy", research_opts.strategy,
                       "orchestrator or reflective (default: research.strategy)");
  research->add_option("--mode", research_opts.mode,
                       "Reflective strategy: simple, web_search or deep_research "
                       "(default: research.mode)");
  research->add_option("--depth", research_opts.depth,
                       "Reflective strategy: auto, light, medium or extended "
                       "(default: research.depth)");
  research->add_flag("--json", research_opts.json,
                     "Print the session's packets as JSON lines on stdout "
                     "instead of the live view and the report");
  research
    ->add_option("--out", research_opts.out,
                 "Also write the report as Markdown to this file (a "
                 "link is followed; a FIFO or device is written to)")
    ->type_name("FILE");
  research
    ->add_option("--format", research_opts.format,
                 "How the report is printed: text (wrapped for reading, citations as [n]) or "
                 "md (Markdown); default: text on a terminal, else md")
    ->check(CLI::IsMember({"text", "md"}));
  research->add_option("--html", research_opts.html, "Also write the report as HTML to this file")
    ->type_name("FILE");
  research
    ->add_option("--pdf", research_opts.pdf,
                 "Also write the report as PDF to this file (headless Chromium: Debian's "
                 "chromium)")
    ->type_name("FILE");
  research
    ->add_option("--docx", research_opts.docx,
                 "Also write the report as a Word document to this file (Debian's pandoc)")
    ->type_name("FILE");
  research
    ->add_option("--deadline", research_opts.deadline,
                 "Research time before the final report, e.g. 10m "
                 "(default: research.deadline; the reflective strategy's deep_research "
                 "mode: research.deep_research_deadline)")
    ->type_name("DURATION");
  research
    ->add_option("--max-agents", research_opts.max_agents,
                 "Research agents running at once (1-16); further ones "
                 "wait for a free slot")
    ->type_name("N");
  research
    ->add_option("--answer", research_opts.answers,
                 "An answer to the clarifying questions (repeatable): "
                 "the research starts at once, without asking")
    ->expected(1)
    ->allow_extra_args(false)
    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  research
    ->add_option("--answers", research_opts.answers_file,
                 "A file with the answers to the clarifying questions "
                 "('-' for standard input)")
    ->type_name("FILE");
  research->footer(research_help_footer());
  research
    ->add_option("--corpus", research_opts.corpus,
                 "Index this folder and search it with internal_search")
    ->type_name("DIR");
  research->add_flag("--no-store", research_opts.no_store,
                     "Do not keep this session in the store (store.path)");
  research
    ->add_option("--follow-up", research_opts.follow_up,
                 "Ask a follow-up of a stored session: its report and "
                 "sources are the models' context")
    ->type_name("ID");

  serve_options serve_opts;
  auto* serve = cli.add_subcommand("serve",
                                   "Run research sessions for HTTP clients and serve the web page "
                                   "(see docs/api.md)");
  serve
    ->add_option("--listen", serve_opts.listen,
                 "HOST:PORT to listen on (default: server.listen, "
                 "127.0.0.1:8700); another address than loopback needs "
                 "server.auth_token")
    ->type_name("HOST:PORT");

  worker_options worker_opts;
  auto* worker = cli.add_subcommand("worker",
                                    "Run research agents for sessions on other nodes (see "
                                    "docs/cluster.md); runs until SIGINT or SIGTERM");
  worker
    ->add_option("--listen", worker_opts.listen,
                 "HOST:PORT to publish the agent host on (default: "
                 "cluster.listen; port 0 picks a free port); another address "
                 "than loopback needs cluster.tls")
    ->type_name("HOST:PORT");

  sessions_options sessions_opts;
  research_options resume_opts;
  auto* sessions = cli.add_subcommand(
    "sessions", "List, show, export, resume or remove stored research sessions");
  sessions->require_subcommand(1);
  auto* sessions_list = sessions->add_subcommand("list", "List sessions, newest first");
  sessions_list->add_flag("--json", sessions_opts.json, "Print JSON");
  sessions_list->add_option("--search", sessions_opts.search,
                            "Only sessions whose question has these words");
  sessions_list->add_option("--state", sessions_opts.state,
                            "Only sessions in this state (running, completed, "
                            "interrupted, ...)");
  sessions_list->add_option("--limit", sessions_opts.limit, "At most N sessions (1-500)")
    ->type_name("N");
  auto* sessions_show = sessions->add_subcommand("show", "Show a session and its report");
  sessions_show->add_option("id", sessions_opts.id, "Session id")->required();
  auto* show_json = sessions_show->add_flag("--json", "Print the session as JSON");
  auto* show_md = sessions_show->add_flag("--md", "Print only the report as Markdown");
  auto* show_html = sessions_show->add_flag("--html", "Print only the report as HTML");
  auto* show_claims = sessions_show->add_flag(
    "--claims", sessions_opts.claims,
    "Print the report's claims with their verdicts and evidence (with --json: as JSON)");
  show_json->excludes(show_md)->excludes(show_html);
  show_md->excludes(show_html);
  show_claims->excludes(show_md)->excludes(show_html);
  auto* sessions_export = sessions->add_subcommand(
    "export", "Print a session's packets (jsonl) or its report (md, html, pdf, docx)");
  sessions_export->add_option("id", sessions_opts.id, "Session id")->required();
  sessions_export
    ->add_option("--format", sessions_opts.format,
                 "jsonl (packets), md, html, pdf, docx (report) or claims (JSON lines)")
    ->required()
    ->check(CLI::IsMember({"jsonl", "md", "html", "pdf", "docx", "claims"}));
  sessions_export
    ->add_option("--out", sessions_opts.out,
                 "Write the report (md, html, pdf, docx) to this file instead of standard "
                 "output")
    ->type_name("FILE");
  auto* sessions_resume = sessions->add_subcommand(
    "resume", "Go on with an interrupted session from its last checkpoint");
  sessions_resume->add_option("id", sessions_opts.id, "Session id")->required();
  sessions_resume->add_flag("--json", resume_opts.json,
                            "Print the packets as JSON lines on stdout");
  sessions_resume
    ->add_option("--out", resume_opts.out, "Also write the report as Markdown to this file")
    ->type_name("FILE");
  sessions_resume
    ->add_option("--html", resume_opts.html, "Also write the report as HTML to this file")
    ->type_name("FILE");
  sessions_resume->add_option("--pdf", resume_opts.pdf, "Also write the report as PDF to this file")
    ->type_name("FILE");
  sessions_resume
    ->add_option("--docx", resume_opts.docx, "Also write the report as DOCX to this file")
    ->type_name("FILE");
  auto* sessions_rm = sessions->add_subcommand("rm", "Remove a session and all it holds");
  sessions_rm->add_option("id", sessions_opts.id, "Session id")->required();

  extract_options extract_opts;
  auto* extract = cli.add_subcommand("extract",
                                     "Print the main text of a page, PDF or text file as open_url "
                                     "reads it");
  extract->add_option("source", extract_opts.source, "A file path or an http(s) URL")->required();
  extract->add_flag("--json", extract_opts.json,
                    "Print {\"title\", \"byline\", \"published\", "
                    "\"site_name\", \"lang\", \"text\"} as JSON");

  index_options index_opts;
  auto* index = cli.add_subcommand("index",
                                   "Build or update the local corpus index (Markdown, text, HTML "
                                   "and PDF files) that internal_search reads");
  index->add_option("paths", index_opts.paths, "Files or folders to index")->required();
  index->add_option("--db", index_opts.db,
                    "Database file (default: tools.internal_search.db, else "
                    "the per-user data folder)");
  index->add_flag("--json", index_opts.json, "Print the counts as JSON");

  corpus_list_options corpus_opts;
  auto* corpus_cmd = cli.add_subcommand("corpus", "What a local corpus index holds");
  corpus_cmd->require_subcommand(1);
  auto* corpus_list = corpus_cmd->add_subcommand("list", "List the documents of an index");
  corpus_list->add_option("--db", corpus_opts.db,
                          "Database file (default: as quarry index chooses)");
  corpus_list->add_flag("--json", corpus_opts.json, "Print the documents as JSON");

  eval_commands eval_cmds;
  add_eval_commands(cli, eval_cmds);

  auto* mcp = cli.add_subcommand("mcp", "Serve research to MCP clients (Claude, Cursor, VS Code) "
                                        "over standard input and output (see docs/mcp.md)");

  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "quarry: " << e.what() << "\n"
              << "Run 'quarry --help' for usage.\n";
    return exit_usage;
  }
  if (cli.get_subcommands().empty()) {
    std::cout << cli.help();
    return exit_usage;
  }

  // Configuration first: everything else is built from it.
  core::load_options lopts;
  if (!opts.config_file.empty())
    lopts.file = opts.config_file;
  lopts.overrides = opts.overrides;
  if (!opts.log_level.empty())
    lopts.overrides.push_back("log.level=" + opts.log_level);
  auto loaded = core::load_config(lopts);
  if (!loaded.config) {
    if (config_check->parsed()) {
      for (const auto& err : loaded.errors)
        std::cerr << err.to_string() << "\n";
      std::cerr << "configuration invalid: " << loaded.errors.size()
                << (loaded.errors.size() == 1 ? " error\n" : " errors\n");
    } else {
      print_config_errors(loaded.errors);
    }
    return exit_usage;
  }
  ctx.config = std::move(*loaded.config);
  // One place adds the embedded defaults (providers and tools from the
  // environment), so that every command sees the same ones.
  core::apply_environment_defaults(ctx.config);
  // Log lines look like the command's own messages unless --log-level asks
  // for diagnostic (timestamped) lines.
  auto log_format = ctx.config.values.log.format;
  if (log_format == "text" && opts.log_level.empty())
    log_format = "plain";
  host::setup_logging(ctx.config.values.log.level, log_format, known_secrets(ctx.config));
  for (const auto& warning : ctx.config.warnings)
    spdlog::warn("{}", warning);

  // Every command that uses the instances checks them first, all errors at
  // once (`config check` reports them its own way).
  if (llm_chat->parsed() || tool_run->parsed() || research->parsed() || sessions_resume->parsed()
      || serve->parsed() || extract->parsed() || index->parsed() || worker->parsed()
      || eval_cmds.run->parsed() || mcp->parsed()) {
    instance_check_options check;
    check.make_tools = tool_run->parsed() || research->parsed() || sessions_resume->parsed()
                       || serve->parsed() || worker->parsed() || eval_cmds.run->parsed()
                       || mcp->parsed();
    auto seen = ctx.config.warnings.size();
    auto errors = check_configured_instances(ctx, check);
    if (research->parsed() || sessions_resume->parsed() || serve->parsed() || worker->parsed()
        || eval_cmds.run->parsed() || mcp->parsed())
      for (auto& e : check_cluster_settings(ctx.config.values))
        errors.push_back(std::move(e));
    for (auto i = seen; i < ctx.config.warnings.size(); ++i)
      spdlog::warn("{}", ctx.config.warnings[i]);
    if (!errors.empty()) {
      print_config_errors(errors);
      if (ctx.services)
        ctx.services->shutdown();
      ctx.registry.reset();
      return exit_usage;
    }
    for (const auto& added : ctx.config.environment_defaults) {
      auto is_llm = added.key.rfind("llm.", 0) == 0;
      if (research->parsed() || sessions_resume->parsed() || serve->parsed() || worker->parsed()
          || eval_cmds.run->parsed() || mcp->parsed() || (llm_chat->parsed() && is_llm)
          || (tool_run->parsed() && !is_llm))
        std::cerr << "quarry: using " << added.description << "\n";
    }
  }

  int rc = exit_ok;
  if (plugins->parsed())
    rc = cmd_plugins(ctx, plugins_json);
  else if (config_show->parsed())
    rc = cmd_config_show(ctx);
  else if (config_check->parsed())
    rc = cmd_config_check(ctx, check_offline);
  else if (llm_chat->parsed())
    rc = cmd_llm_chat(ctx, chat_opts);
  else if (tool_run->parsed())
    rc = cmd_tool_run(ctx, tool_opts);
  else if (research->parsed())
    rc = cmd_research(ctx, research_opts);
  else if (serve->parsed())
    rc = cmd_serve(ctx, serve_opts);
  else if (worker->parsed())
    rc = cmd_worker(ctx, worker_opts);
  else if (sessions_list->parsed())
    rc = cmd_sessions_list(ctx, sessions_opts);
  else if (sessions_show->parsed()) {
    sessions_opts.format = show_json->count() > 0   ? "json"
                           : show_md->count() > 0   ? "md"
                           : show_html->count() > 0 ? "html"
                                                    : "";
    rc = cmd_sessions_show(ctx, sessions_opts);
  } else if (sessions_export->parsed())
    rc = cmd_sessions_export(ctx, sessions_opts);
  else if (sessions_rm->parsed())
    rc = cmd_sessions_rm(ctx, sessions_opts);
  else if (sessions_resume->parsed())
    rc = cmd_sessions_resume(ctx, sessions_opts, resume_opts);
  else if (extract->parsed())
    rc = cmd_extract(ctx, extract_opts);
  else if (index->parsed())
    rc = cmd_index(ctx, index_opts);
  else if (corpus_list->parsed())
    rc = cmd_corpus_list(ctx, corpus_opts);
  else if (eval_cmds.run->parsed())
    rc = cmd_eval_run(ctx, eval_cmds.run_options);
  else if (eval_cmds.report->parsed())
    rc = cmd_eval_report(ctx, eval_cmds.report_options);
  else if (mcp->parsed())
    rc = cmd_mcp(ctx);
  spdlog::default_logger()->flush();
  // Stop the services first (cancel HTTP transfers, drain the pool) while
  // every plugin's code is still loaded, then drop the registry.
  if (ctx.services)
    ctx.services->shutdown();
  ctx.registry.reset();
  return rc;
}

} // namespace quarry::app
