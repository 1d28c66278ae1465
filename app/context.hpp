// What every command works with: the loaded configuration, the host services
// and the plugin registry, created in that order.

#pragma once

#include "quarry/core/config.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include <limits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace quarry::app {

/// Options that every command accepts.
struct global_options {
  std::string config_file;
  std::vector<std::string> overrides;
  std::vector<std::string> plugin_dirs;
  std::string log_level;
};

/// The state of one command invocation.
struct context {
  global_options options;
  core::loaded_config config;
  /// Plugin folders in search order.
  std::vector<std::string> plugin_dirs;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;

  /// Creates the host services and loads every plugin file found; does
  /// nothing when that was done already.
  void load_plugins();
};

/// Returns the plugin folders in search order: --plugin-dir folders, then
/// `plugins.dirs`, then the folder installed next to the executable.
std::vector<std::string> plugin_search_path(const global_options& options,
                                            const core::settings& cfg);

/// A configured plugin instance: where it is configured and what it names.
struct configured_instance {
  /// `llm.providers.<name>` or `tools.<name>`.
  std::string key;
  std::string instance;
  const core::plugin_instance* entry = nullptr;
  bool is_llm = false;
};

/// Lists every configured LLM provider and tool instance.
std::vector<configured_instance> configured_instances(const core::settings& cfg);

/// Options of `quarry llm chat`.
struct llm_chat_options {
  std::string provider;
  std::string model;
  std::string system;
  std::string tools_file;
  std::string tool_choice = "auto";
  int64_t max_tokens = 0;
  bool json = false;
  bool show_reasoning = false;
  std::string message;
};

/// `quarry llm chat ...`.
int cmd_llm_chat(context& ctx, const llm_chat_options& opts);

/// Options of `quarry tool run`.
struct tool_run_options {
  std::string name;
  std::string arguments;
  bool json = false;
};

/// `quarry tool run NAME 'JSON' [--json]`.
int cmd_tool_run(context& ctx, const tool_run_options& opts);

/// Options of `quarry extract`.
struct extract_options {
  /// A file path or an http(s) URL.
  std::string source;
  bool json = false;
};

/// `quarry extract FILE|URL [--json]`: prints the text open_url would read.
int cmd_extract(context& ctx, const extract_options& opts);

/// Options of `quarry index`.
struct index_options {
  /// Files or folders to index.
  std::vector<std::string> paths;
  /// The database file (default: `tools.internal_search.db`, else the
  /// per-user data folder).
  std::string db;
  bool json = false;
};

/// `quarry index PATH... [--db FILE] [--json]`.
int cmd_index(context& ctx, const index_options& opts);

/// The options of the configured open_url instance (its defaults when none
/// is configured): the fetching rules `quarry extract` follows too. A
/// message naming `tools.open_url` when they are invalid.
std::variant<fetch::fetch_options, std::string> open_url_fetch_options(const core::settings& cfg);

/// The size caps of the configured open_url instance (its defaults when none
/// is configured): a local file is indexed only if open_url would read a
/// page of its size. A message when the open_url options are invalid.
std::variant<corpus::update_options, std::string> corpus_size_caps(const core::settings& cfg);

/// The index `quarry index` writes when neither `--db` nor a configured
/// local_corpus instance names one: `corpus.db` in the local_corpus
/// plugin's data folder (`<data_dir>/plugins/local_corpus`, as the host
/// services place it), which the plugin also opens by default. `quarry
/// research` searches it when no search tool is configured.
std::string default_index_db(const std::string& data_dir);

/// Options of `quarry corpus list`.
struct corpus_list_options {
  /// The database (default: as `quarry index` chooses).
  std::string db;
  bool json = false;
};

/// `quarry corpus list [--db FILE] [--json]`: what an index holds.
int cmd_corpus_list(context& ctx, const corpus_list_options& opts);

/// Options of `quarry research`.
struct research_options {
  /// The value of numeric options that were not given.
  static constexpr int unset = std::numeric_limits<int>::min();
  std::string question;
  bool no_clarify = false;
  /// `--verify` / `--no-verify`: check the report claim by claim (both
  /// given: an error).
  bool verify = false;
  bool no_verify = false;
  /// `--strategy`, `--mode`, `--depth` (empty: the configured ones).
  std::string strategy;
  std::string mode;
  std::string depth;
  bool json = false;
  std::string out;
  std::string html;
  /// `--format`: how the report is printed: `text` (for reading: wrapped,
  /// citations as [n], short source locations), `md` (the Markdown), or
  /// empty: text when standard output is a terminal, else md.
  std::string format;
  /// `--pdf`, `--docx`: the report exported (report_export.hpp).
  std::string pdf;
  std::string docx;
  std::string deadline;
  /// Research agents at once; `unset` when not given.
  int max_agents = unset;
  /// Answers to the clarifying questions (`--answer`, repeatable).
  std::vector<std::string> answers;
  /// A file with the answers (`--answers`; `-` is standard input).
  std::string answers_file;
  std::string corpus;
  /// Do not keep the session in the store.
  bool no_store = false;
  /// The id of a stored session this question follows up.
  std::string follow_up;
};

/// A stored session that goes on (`quarry sessions resume`).
struct resume_info;

/// `quarry research "question" [...]`; with `resume`, the stored session
/// goes on from its last checkpoint instead.
int cmd_research(context& ctx, const research_options& opts, const resume_info* resume = nullptr);

/// `quarry serve [--listen HOST:PORT]`.
struct serve_options {
  /// Overrides server.listen.
  std::string listen;
};
int cmd_serve(context& ctx, const serve_options& opts);

/// `quarry worker [--listen HOST:PORT]`.
struct worker_options {
  /// Overrides cluster.listen.
  std::string listen;
};
int cmd_worker(context& ctx, const worker_options& opts);

/// `quarry sessions ...`.
struct sessions_options {
  std::string id;
  bool json = false;
  /// `show`: md, html or json; `export`: jsonl, md, html, pdf, docx or
  /// claims.
  std::string format;
  /// `export --out FILE`: a report format written to this file.
  std::string out;
  /// `show --claims`: the claims of the report with their verdicts.
  bool claims = false;
  /// `list`: words of the question, state, page size.
  std::string search;
  std::string state;
  int limit = 50;
};
int cmd_sessions_list(context& ctx, const sessions_options& opts);
int cmd_sessions_show(context& ctx, const sessions_options& opts);
int cmd_sessions_export(context& ctx, const sessions_options& opts);
int cmd_sessions_rm(context& ctx, const sessions_options& opts);
int cmd_sessions_resume(context& ctx, const sessions_options& opts,
                        const research_options& research);

/// `quarry plugins [--json]`.
int cmd_plugins(context& ctx, bool json);

/// `quarry config show`.
int cmd_config_show(context& ctx);

/// `quarry config check [--offline]`: validates the configuration and the
/// plugins it names (exit 2 on errors), then, unless `offline`, reaches every
/// provider and tool once (exit 1 if one is not reachable).
int cmd_config_check(context& ctx, bool offline);

} // namespace quarry::app
