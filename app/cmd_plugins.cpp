// `quarry plugins`: one row per plugin file found.

#include "cli.hpp"
#include "context.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <sstream>

namespace quarry::app {

namespace {

// Configured instances whose plugin is not available, with the reason.
std::vector<std::string> missing_plugins(const context& ctx) {
  std::vector<std::string> out;
  for (const auto& inst : configured_instances(ctx.config.values)) {
    const auto& name = inst.entry->plugin;
    if (ctx.registry->find(name) != nullptr)
      continue;
    std::string why = "configured plugin '" + name + "' (" + inst.key + ", " + inst.entry->file
                      + ":" + std::to_string(inst.entry->line) + ") ";
    std::string refused;
    for (const auto& x : ctx.registry->plugins())
      if (!x.ok && x.name == name)
        refused = x.file + ": " + x.error;
    if (!refused.empty())
      why += "failed to load: " + refused;
    else
      why += "was not found in any plugin folder";
    auto refused_any = std::any_of(ctx.registry->plugins().begin(), ctx.registry->plugins().end(),
                                   [](const auto& x) { return !x.ok; });
    if (refused.empty() && refused_any)
      why += " (some plugin files were refused: see the list above)";
    out.push_back(std::move(why));
  }
  return out;
}

} // namespace

int cmd_plugins(context& ctx, bool json) {
  ctx.load_plugins();
  const auto& infos = ctx.registry->plugins();
  auto missing = missing_plugins(ctx);
  if (json) {
    auto rows = nlohmann::json::array();
    for (const auto& x : infos) {
      nlohmann::json row{{"file", x.file}, {"status", x.ok ? "ok" : "error"}};
      if (x.ok) {
        row["name"] = x.name;
        row["kind"] = sdk::to_string(x.kind);
        if (x.kind == sdk::plugin_kind::tool) {
          row["tool_kind"] = sdk::to_string(x.tool_kind); // QUARRY_TOOL_KIND
          row["tool_set"] = x.tool_set;                   // QUARRY_TOOL_SET
        }
        row["version"] = x.version;
        row["description"] = x.description;
        row["sdk_version"] = sdk::version_string(x.sdk_version);
        // Loaded only because plugins.allow_unsafe_permissions is true.
        if (!x.unsafe.empty())
          row["unsafe"] = x.unsafe;
      } else {
        // Known when the file has this host's ABI but failed a later check.
        row["name"] = x.name.empty() ? nlohmann::json() : nlohmann::json(x.name);
        row["kind"] = nullptr;
        row["version"] = nullptr;
        row["description"] = nullptr;
        row["error"] = x.error;
      }
      rows.push_back(std::move(row));
    }
    nlohmann::json out{{"plugins", rows},
                       {"dirs", ctx.plugin_dirs},
                       {"missing", missing},
                       {"allow_unsafe_permissions", ctx.registry->allow_unsafe_permissions()}};
    std::cout << out.dump(2) << "\n";
  } else if (infos.empty()) {
    std::cout << "No plugin files found. Searched:\n";
    for (const auto& dir : ctx.plugin_dirs)
      std::cout << "  " << dir << "\n";
  } else {
    // name, kind, version, status, file, description
    std::vector<std::vector<std::string>> table;
    table.push_back({"NAME", "KIND", "VERSION", "STATUS", "FILE", "DESCRIPTION"});
    // `unsafe`: loaded only because plugins.allow_unsafe_permissions is
    // true (the reason is on stderr).
    for (const auto& x : infos)
      table.push_back({x.name.empty() ? "-" : x.name, x.ok ? sdk::to_string(x.kind) : "-",
                       x.ok ? x.version : "-",
                       !x.ok              ? "error"
                       : x.unsafe.empty() ? "ok"
                                          : "unsafe",
                       x.file, x.ok ? x.description : x.error});
    std::vector<size_t> width(table.front().size(), 0);
    for (const auto& row : table)
      for (size_t i = 0; i + 1 < row.size(); ++i)
        width[i] = std::max(width[i], row[i].size());
    for (const auto& row : table) {
      std::ostringstream line;
      for (size_t i = 0; i < row.size(); ++i) {
        line << row[i];
        if (i + 1 < row.size())
          line << std::string(width[i] - row[i].size() + 2, ' ');
      }
      std::cout << line.str() << "\n";
    }
  }
  if (ctx.registry->allow_unsafe_permissions())
    std::cerr << "quarry: warning: plugins.allow_unsafe_permissions is true: "
                 "plugin files that others could change are loaded (for "
                 "development only)\n";
  for (const auto& why : missing)
    std::cerr << "quarry: " << why << "\n";
  return missing.empty() ? exit_ok : exit_failure;
}

} // namespace quarry::app
