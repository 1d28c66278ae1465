// `quarry index PATH... [--db FILE] [--json]`: builds or updates the local
// corpus index that the local_corpus plugin's internal_search tool reads.

#include "cli.hpp"
#include "context.hpp"
#include "index_progress.hpp"
#include "session_store.hpp"

#include "quarry/corpus/index.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <variant>

#include <unistd.h>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

// The plugin whose database `quarry index` writes.
constexpr const char* corpus_plugin = "local_corpus";

// The tool name of that plugin, preferred when several instances exist.
constexpr const char* corpus_tool = "internal_search";

// The database the local_corpus plugin opens when its configuration names
// none: `corpus.db` in the plugin's host data folder, which the host services
// place at `<runtime.data_dir or the per-user data folder>/plugins/<plugin>`.
// Keep in step with host_services::make_context and the plugin's
// parse_config.
std::string default_corpus_db(const core::settings& cfg) {
  return default_index_db(data_dir_of(cfg));
}

// Picks the database: --db, else the `db` of the configured local_corpus tool
// instance (`internal_search` first if several), else the plugin's default.
// Returns an error when the configured value is unusable.
std::variant<std::string, sdk::error> choose_db(const context& ctx, const index_options& opts) {
  if (!opts.db.empty())
    return opts.db;
  const auto& tools = ctx.config.values.tools;
  const core::plugin_instance* entry = nullptr;
  std::string name;
  if (auto i = tools.find(corpus_tool); i != tools.end() && i->second.plugin == corpus_plugin) {
    entry = &i->second;
    name = i->first;
  } else {
    for (const auto& [key, instance] : tools) {
      if (instance.plugin == corpus_plugin) {
        entry = &instance;
        name = key;
        break;
      }
    }
  }
  if (entry != nullptr && entry->config.is_object() && entry->config.contains("db")) {
    const auto& db = entry->config["db"];
    if (!db.is_string() || db.get<std::string>().empty())
      return sdk::make_error(sdk::errc::bad_request, entry->file + ":" + std::to_string(entry->line)
                                                       + ": tools." + name
                                                       + ".db must be a non-empty path");
    return db.get<std::string>();
  }
  return default_corpus_db(ctx.config.values);
}

// Whether `db` is the one a configured local_corpus instance names.
bool configured_db(const context& ctx, const std::string& db, std::string* instance = nullptr) {
  for (const auto& [key, entry] : ctx.config.values.tools)
    if (entry.plugin == corpus_plugin) {
      auto named = entry.config.is_object() && entry.config.contains("db")
                       && entry.config["db"].is_string()
                     ? entry.config["db"].get<std::string>()
                     : default_corpus_db(ctx.config.values);
      std::error_code ec;
      if (named == db || fs::equivalent(named, db, ec)) {
        if (instance != nullptr)
          *instance = key;
        return true;
      }
    }
  return false;
}

nlohmann::json error_json(const sdk::error& err) {
  return {{"class", sdk::to_string(err.code)}, {"message", err.message}};
}

std::string dump(const nlohmann::json& x) {
  return x.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Reports a failure after the arguments were accepted: on stderr, and with
// --json also as `{"database", "error"}` on stdout.
int fail(const index_options& opts, const std::string& db, const sdk::error& err) {
  std::cerr << "quarry: " << err.message << "\n";
  if (opts.json)
    std::cout << dump({{"database", db}, {"error", error_json(err)}}) << "\n";
  return exit_failure;
}

} // namespace

std::variant<corpus::update_options, std::string> corpus_size_caps(const core::settings& cfg) {
  auto parsed = open_url_fetch_options(cfg);
  if (auto* err = std::get_if<std::string>(&parsed))
    return *err;
  const auto& fopts = std::get<fetch::fetch_options>(parsed);
  corpus::update_options out;
  out.max_html_bytes = fopts.max_html_bytes;
  out.max_pdf_bytes = fopts.max_pdf_bytes;
  return out;
}

int cmd_index(context& ctx, const index_options& opts) {
  // Refuse a mistyped path before touching any database.
  bool missing = false;
  for (const auto& path : opts.paths) {
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec)) {
      std::cerr << "quarry: no such file or folder: '" << path << "'\n";
      missing = true;
    }
  }
  if (missing || opts.paths.empty())
    return exit_usage;
  auto chosen = choose_db(ctx, opts);
  if (auto* err = std::get_if<sdk::error>(&chosen)) {
    std::cerr << "quarry: " << err->message << "\n";
    return exit_usage;
  }
  auto caps = corpus_size_caps(ctx.config.values);
  if (auto* err = std::get_if<std::string>(&caps)) {
    std::cerr << "quarry: " << *err << "\n";
    return exit_usage;
  }
  const auto& db = std::get<std::string>(chosen);
  auto opened = corpus::corpus_index::open(db);
  if (opened.failure)
    return fail(opts, db, *opened.failure);
  auto& index = *opened.index;
  auto update_opts = std::get<corpus::update_options>(caps);
  // On a terminal: files done of the total, rate and time left.
  std::optional<index_progress_line> line;
  if (!opts.json && ::isatty(STDERR_FILENO) == 1) {
    line.emplace(stderr);
    update_opts.progress = line->callback();
  }
  auto result = index.update(opts.paths, update_opts);
  if (line)
    line->finish();
  for (const auto& note : result.notes)
    std::cerr << "quarry: note: " << note << "\n";
  if (result.failure)
    return fail(opts, db, *result.failure);
  auto [documents, passages] = index.size();
  if (opts.json) {
    nlohmann::json out{{"database", db},
                       {"added", result.added},
                       {"updated", result.updated},
                       {"removed", result.removed},
                       {"unchanged", result.unchanged},
                       {"skipped", result.skipped},
                       {"passages", result.passages},
                       {"total_documents", documents},
                       {"total_passages", passages},
                       {"notes", result.notes}};
    std::cout << dump(out) << "\n";
  } else {
    std::cout << "Database: " << db << "\n"
              << "Files: " << result.added << " added, " << result.updated << " updated, "
              << result.removed << " removed, " << result.unchanged << " unchanged";
    if (result.skipped > 0)
      std::cout << ", " << result.skipped << " skipped (see the notes)";
    std::cout << "\n"
              << "Passages written: " << result.passages << "\n"
              << "Index: " << documents << " documents, " << passages << " passages\n";
    // How the index is used.
    std::string instance;
    if (configured_db(ctx, db, &instance))
      std::cout << "Research searches it through tools." << instance
                << ": quarry research \"QUESTION\"\n";
    else if (db == default_corpus_db(ctx.config.values))
      std::cout << "Research searches it when no search tool is configured: quarry research "
                   "\"QUESTION\" (with one, add tools.internal_search: {plugin: local_corpus} "
                   "to search it too); quarry corpus list shows what it holds\n";
    else
      std::cout << "To search it, configure tools.internal_search: {plugin: local_corpus, db: "
                << db << "}; quarry corpus list --db " << db << " shows what it holds\n";
  }
  return exit_ok;
}

std::string default_index_db(const std::string& data_dir) {
  return (fs::path{data_dir} / "plugins" / corpus_plugin / "corpus.db").string();
}

int cmd_corpus_list(context& ctx, const corpus_list_options& opts) {
  index_options io;
  io.db = opts.db;
  auto chosen = choose_db(ctx, io);
  if (auto* err = std::get_if<sdk::error>(&chosen)) {
    std::cerr << "quarry: " << err->message << "\n";
    return exit_usage;
  }
  const auto& db = std::get<std::string>(chosen);
  std::error_code ec;
  if (!fs::is_regular_file(db, ec)) {
    std::cerr << "quarry: no index at " << db
              << " (quarry index DIR builds one; --db FILE names another)\n";
    return exit_failure;
  }
  auto opened = corpus::corpus_index::open(db);
  if (opened.failure) {
    std::cerr << "quarry: cannot open the index " << db << ": " << opened.failure->message << "\n";
    return exit_failure;
  }
  auto [documents, passages] = opened.index->size();
  auto listed = opened.index->documents();
  if (opts.json) {
    auto rows = nlohmann::json::array();
    for (const auto& d : listed)
      rows.push_back({{"id", d.id},
                      {"path", d.path},
                      {"title", d.title},
                      {"bytes", d.size},
                      {"mtime", d.mtime},
                      {"passages", d.passages}});
    std::cout << dump({{"database", db},
                       {"total_documents", documents},
                       {"total_passages", passages},
                       {"documents", rows}})
              << "\n";
    return exit_ok;
  }
  std::cout << "Database: " << db << "\n"
            << "Index: " << documents << " documents, " << passages << " passages\n";
  for (const auto& d : listed) {
    // Paths and titles come from files: no terminal controls reach the screen.
    std::cout << "  " << sdk::strip_terminal_controls(d.path) << "  ("
              << sdk::strip_terminal_controls(d.title) << ", " << d.passages
              << (d.passages == 1 ? " passage" : " passages") << ")\n";
  }
  return exit_ok;
}

} // namespace quarry::app
