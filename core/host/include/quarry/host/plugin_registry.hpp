// Finds, loads and checks plugin files, and creates plugin objects that keep
// their library loaded while they live.

#pragma once

#include "quarry/sdk/plugin.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::host {

class host_services;

/// What the registry knows about one plugin file.
struct plugin_info {
  /// Path of the file.
  std::string file;
  /// Whether the file loaded and passed every check.
  bool ok = false;
  /// Why the file was refused (one line), if `!ok`.
  std::string error;
  /// Why others than root and the user running Quarry could change the code
  /// this file runs (one line: the file's owner or mode, or a folder's);
  /// empty if no one else could. Such a file is refused with this reason,
  /// unless unsafe permissions are allowed: then it loads (`ok`) and this is
  /// its warning.
  std::string unsafe;
  // The fields below are set once the descriptor could be read.
  std::string name;
  sdk::plugin_kind kind = sdk::plugin_kind::tool;
  std::string version;
  std::string description;
  uint32_t abi_version = 0;
  uint32_t sdk_version = 0;
  std::string stdlib_abi;
  uint32_t json_version = 0;
  /// The options the plugin accepts, if it declares them
  /// (QUARRY_PLUGIN_KEYS). Quarry's limits never reach a plugin.
  std::optional<std::vector<std::string>> keys;
  /// What kind of tool a tool plugin provides (QUARRY_TOOL_KIND); `other`
  /// when it does not say, or says something this host does not know.
  sdk::tool_kind tool_kind = sdk::tool_kind::other;
  /// Whether each instance of this tool plugin offers its own set of tools
  /// (QUARRY_TOOL_SET), each with its kind; @ref tool_kind then does not
  /// apply.
  bool tool_set = false;
};

/// One tool of a configured instance, with what it is.
struct made_tool {
  std::shared_ptr<sdk::tool> tool;
  sdk::tool_kind kind = sdk::tool_kind::other;
};

/// A plugin object, or the one-line reason it could not be created.
template <class T>
using make_result = std::variant<std::shared_ptr<T>, std::string>;

/// Loads plugins with RTLD_NOW | RTLD_LOCAL, checks each descriptor before
/// calling anything else, and never unloads a library while the registry
/// lives. Objects created through it also pin their library, so a plugin
/// object may safely outlive the registry.
///
/// Create it after @ref host_services and before the actor system, so that it
/// outlives every actor that holds a plugin object.
class plugin_registry {
public:
  // -- constructors, destructors, and assignment operators --------------------

  explicit plugin_registry(host_services& services);

  ~plugin_registry();

  plugin_registry(const plugin_registry&) = delete;
  plugin_registry& operator=(const plugin_registry&) = delete;

  // -- loading ----------------------------------------------------------------

  /// Whether files that others than root and the user running Quarry could
  /// change load anyway, each with @ref plugin_info::unsafe set
  /// (`plugins.allow_unsafe_permissions`; for development). Off by default.
  void allow_unsafe_permissions(bool value) noexcept {
    allow_unsafe_ = value;
  }

  /// See the setter.
  bool allow_unsafe_permissions() const noexcept {
    return allow_unsafe_;
  }

  /// Loads every `*.so` file in each folder, in order (files within a folder
  /// in name order; an entry that is not a regular file is recorded as
  /// refused, saying what it is). A missing folder is skipped. Returns one
  /// line per folder that exists but cannot be read.
  std::vector<std::string> load_directories(const std::vector<std::string>& dirs);

  /// Loads one file. On failure, records it with its error and returns the
  /// error line (which names the file).
  ///
  /// The file must be a regular file (a symbolic link to one is followed),
  /// opened without blocking. No one but root and the user running Quarry
  /// may be able to change it: the file (after links) and every folder from
  /// the one it is named in, and from the one it really is in, up to `/`
  /// must be owned by root or that user and writable by no one else (by
  /// their group only if it is the owner's private group: named like the
  /// owner, the owner's primary group, no other members). A folder above
  /// those holding the file may be writable by others if it has the sticky
  /// bit (as `/tmp` has). See @ref allow_unsafe_permissions. The file is
  /// then read and loaded by its resolved path, which is checked to be the
  /// file that was opened.
  std::optional<std::string> load_file(const std::string& path);

  // -- properties -------------------------------------------------------------

  /// Every file tried, in load order, including refused ones.
  const std::vector<plugin_info>& plugins() const noexcept {
    return infos_;
  }

  /// Returns the loaded plugin named `name`, or nullptr.
  const plugin_info* find(std::string_view name) const;

  // -- factories --------------------------------------------------------------

  /// Creates an LLM provider from the plugin named `plugin`. `instance` names
  /// the configured instance in error messages.
  make_result<sdk::llm_provider> make_llm(std::string_view plugin, const nlohmann::json& config,
                                          std::string_view instance = {});

  /// Creates a tool from the plugin named `plugin`.
  make_result<sdk::tool> make_tool(std::string_view plugin, const nlohmann::json& config,
                                   std::string_view instance = {});

  /// Creates the tools of one configured instance of the tool plugin named
  /// `plugin`: the one tool of an ordinary plugin with the plugin's kind, or
  /// the set a QUARRY_TOOL_SET plugin offers. A set is made once per
  /// instance name and configuration and kept while the registry lives, so
  /// that checking the configuration and then running it start a plugin's
  /// servers once; the same tools are returned again.
  std::variant<std::vector<made_tool>, std::string>
  make_tools(std::string_view plugin, const nlohmann::json& config, std::string_view instance);

private:
  struct loaded;

  std::variant<std::shared_ptr<sdk::plugin_object>, std::string>
  make(std::string_view plugin, sdk::plugin_kind kind, const nlohmann::json& config,
       std::string_view instance);

  host_services& services_;
  bool allow_unsafe_ = false;
  // Tool sets made so far, by instance name and configuration.
  std::map<std::pair<std::string, std::string>, std::vector<made_tool>> tool_sets_;
  std::vector<plugin_info> infos_;
  std::vector<std::shared_ptr<loaded>> libs_;
};

/// Checks a plugin's ABI mark (see QUARRY_PLUGIN_ABI_MARK) against the
/// host's: plugin ABI, nlohmann::json namespace, standard library and debug
/// mode must be equal; the SDK's major version too, and its minor version
/// must be equal for 0.x and no newer than the host's from 1.0 on. Returns
/// the first fact that differs, both sides named, or nothing.
std::optional<std::string> check_abi_mark(std::string_view theirs,
                                          std::string_view host_mark = sdk::abi_mark);

/// Why others than root and the user running Quarry could change the folder
/// `dir` (an absolute path without symbolic links) or a folder above it
/// (see plugin_registry::load_file), or nothing.
std::optional<std::string> check_plugin_folders(const std::string& dir);

/// Checks a descriptor against this host's versions. Returns the reason for
/// refusing it (without the file name), or nothing.
std::optional<std::string> check_descriptor(const sdk::plugin_descriptor& x);

} // namespace quarry::host
