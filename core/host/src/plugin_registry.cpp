// Plugin loading with Boost.DLL: checks, pinning, factories.

#include "quarry/host/plugin_registry.hpp"

#include "quarry/host/services.hpp"

#include "quarry/core/regular_file.hpp"

#include "elf_symbols.hpp"

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

namespace quarry::host {

namespace fs = std::filesystem;

/// One loaded library plus the descriptor read from it.
struct plugin_registry::loaded {
  boost::dll::shared_library lib;
  const sdk::plugin_descriptor* descriptor = nullptr;
  /// QUARRY_TOOL_SET's factory, if the plugin has one.
  sdk::tool_set_factory set_factory = nullptr;
  std::string file;
  std::shared_ptr<sdk::host_context> context;
};

namespace {

std::string version_pair(uint32_t encoded) {
  return std::to_string(encoded / 10000) + "." + std::to_string((encoded / 100) % 100);
}

bool valid_name(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64)
    return false;
  for (const auto* p = name; *p != '\0'; ++p) {
    auto c = *p;
    auto ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

// The facts an ABI mark spells (see QUARRY_PLUGIN_ABI_MARK).
struct abi_facts {
  std::string abi;
  std::string sdk;
  std::string json;
  std::string stdlib;
  std::string debug;
};

// Whether `c` may appear in a C identifier (all an ABI mark consists of).
bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A symbol name from a file, fit for a message: at most 200 characters,
// anything but identifier characters shown as `?`.
std::string printable_symbol(std::string_view name) {
  std::string out{name.substr(0, 200)};
  for (auto& c : out)
    if (!identifier_char(c))
      c = '?';
  return out;
}

// Splits a mark such as `quarry_abi_v2_sdk_0_1_json_json_abi_v3_11_2_stdlib_
// gnu_cxx11_debug_0` at its field names; nothing if it is not one.
std::optional<abi_facts> parse_abi_mark(std::string_view mark) {
  std::string_view prefix = QUARRY_PLUGIN_ABI_MARK_PREFIX;
  if (mark.substr(0, prefix.size()) != prefix || mark.size() > 256
      || !std::all_of(mark.begin(), mark.end(), identifier_char))
    return std::nullopt;
  auto sdk = mark.find("_sdk_");
  auto json = mark.find("_json_", sdk);
  auto stdlib = mark.find("_stdlib_", json);
  auto debug = mark.find("_debug_", stdlib);
  if (sdk == std::string_view::npos || json == std::string_view::npos
      || stdlib == std::string_view::npos || debug == std::string_view::npos)
    return std::nullopt;
  auto part = [&](size_t from, size_t to) { return std::string{mark.substr(from, to - from)}; };
  abi_facts x;
  x.abi = part(prefix.size(), sdk);
  x.sdk = part(sdk + 5, json);
  std::replace(x.sdk.begin(), x.sdk.end(), '_', '.');
  x.json = part(json + 6, stdlib);
  x.stdlib = part(stdlib + 8, debug);
  x.debug = part(debug + 7, mark.size());
  return x;
}

// Describes a standard-library token of an ABI mark for a message.
std::string describe_stdlib(const std::string& token) {
  if (token == "gnu_cxx11")
    return "libstdc++ with the C++11 ABI";
  if (token == "gnu_cxx98")
    return "libstdc++ with the old (pre-C++11) ABI";
  if (token.rfind("llvm_abi", 0) == 0)
    return "libc++ ABI " + token.substr(8);
  return "'" + token + "'";
}

// Describes nlohmann::json's inline namespace for a message.
std::string describe_json(const std::string& ns) {
  auto out = "nlohmann::json namespace " + ns;
  if (ns.find("_diag") != std::string::npos)
    out += " (JSON_DIAGNOSTICS=1)";
  if (ns.find("_ldvcmp") != std::string::npos)
    out += " (JSON_USE_LEGACY_DISCARDED_VALUE_COMPARISON=1)";
  return out;
}

// Reads `major.minor` (at most 4 digits each).
std::optional<std::pair<int, int>> parse_major_minor(const std::string& x) {
  auto dot = x.find('.');
  auto digits = [](const std::string& part) {
    return !part.empty() && part.size() <= 4
           && part.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(x.substr(0, dot)) || !digits(x.substr(dot + 1)))
    return std::nullopt;
  return std::make_pair(std::stoi(x.substr(0, dot)), std::stoi(x.substr(dot + 1)));
}

// Whether a plugin built against SDK `theirs` may load into SDK `ours`: same
// major version, and a minor version no newer than ours (0.x: the same).
bool compatible_sdk(const std::string& theirs, const std::string& ours) {
  auto x = parse_major_minor(theirs);
  auto y = parse_major_minor(ours);
  if (!x || !y || x->first != y->first)
    return false;
  return y->first == 0 ? x->second == y->second : x->second <= y->second;
}

} // namespace

std::optional<std::string> check_abi_mark(std::string_view theirs, std::string_view host_mark) {
  if (theirs == host_mark)
    return std::nullopt;
  auto ours = parse_abi_mark(host_mark);
  auto x = parse_abi_mark(theirs);
  if (!ours || !x)
    return "its ABI mark " + printable_symbol(theirs)
           + " is not one this host can read (this host's is " + printable_symbol(host_mark) + ")";
  if (x->abi != ours->abi)
    return "plugin ABI version " + x->abi + ", but this host supports plugin ABI version "
           + ours->abi;
  if (!compatible_sdk(x->sdk, ours->sdk))
    return "built against SDK " + x->sdk + ", but this host has SDK " + ours->sdk
           + " (major versions must match; 0.x minor versions too)";
  if (x->json != ours->json)
    return "built with " + describe_json(x->json) + ", but this host uses "
           + describe_json(ours->json) + " (the layout of nlohmann::json differs)";
  if (x->stdlib != ours->stdlib)
    return "built with the standard library " + describe_stdlib(x->stdlib) + ", but this host uses "
           + describe_stdlib(ours->stdlib);
  if (x->debug != ours->debug)
    return x->debug == "1" ? "built with the standard library's debug mode "
                             "(_GLIBCXX_DEBUG), but this host is not (the layout of "
                             "every container differs)"
                           : "built without the standard library's debug mode "
                             "(_GLIBCXX_DEBUG), but this host uses it (the layout of "
                             "every container differs)";
  return std::nullopt; // only an older minor SDK version
}

// -- who may change a plugin ---------------------------------------------------

namespace {

// Largest buffer tried for one passwd or group entry.
constexpr size_t max_entry_buffer = 1 << 22;

// Root and the user running Quarry.
bool trusted_owner(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

// The user's name and primary group, if the system knows the user.
std::optional<std::pair<std::string, gid_t>> user_entry(uid_t uid) {
  std::vector<char> buf(16 * 1024);
  for (;;) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    auto rc = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < max_entry_buffer) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 || found == nullptr)
      return std::nullopt;
    return std::make_pair(std::string{pw.pw_name}, pw.pw_gid);
  }
}

// The group's name and members, if the system knows the group.
std::optional<std::pair<std::string, std::vector<std::string>>> group_entry(gid_t gid) {
  std::vector<char> buf(64 * 1024);
  for (;;) {
    struct group gr {};
    struct group* found = nullptr;
    auto rc = ::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < max_entry_buffer) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 || found == nullptr)
      return std::nullopt;
    std::vector<std::string> members;
    for (auto** m = gr.gr_mem; m != nullptr && *m != nullptr; ++m)
      members.emplace_back(*m);
    return std::make_pair(std::string{gr.gr_name}, std::move(members));
  }
}

// Whether only `owner` is in group `gid`: a user private group (named like
// its user, that user's primary group, no other member listed), so that
// write access for the group gives no one else write access.
bool private_group(gid_t gid, uid_t owner) {
  auto user = user_entry(owner);
  if (!user || user->second != gid)
    return false;
  auto group = group_entry(gid);
  if (!group || group->first != user->first)
    return false;
  return std::all_of(group->second.begin(), group->second.end(),
                     [&](const std::string& m) { return m == user->first; });
}

std::string describe_user(uid_t uid) {
  auto user = user_entry(uid);
  return user ? user->first + " (uid " + std::to_string(uid) + ")" : "uid " + std::to_string(uid);
}

std::string describe_group(gid_t gid) {
  auto group = group_entry(gid);
  return group ? "group " + group->first + " (gid " + std::to_string(gid) + ")"
               : "group " + std::to_string(gid);
}

// Why others than root and the user running Quarry could change `st`
// (`what` names it), or nothing. `above`: a folder above the folders that
// hold the plugin, where the sticky bit makes write access of others
// harmless (they may add entries, but not rename or remove ours).
std::optional<std::string> unsafe_status(const struct ::stat& st, const std::string& what,
                                         bool above) {
  if (!trusted_owner(st.st_uid))
    return what + " is owned by " + describe_user(st.st_uid)
           + ", not by root or the user running Quarry";
  auto sticky = above && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky)
    return what + " is writable by every user (mode " + core::mode_text(st.st_mode) + ")";
  if ((st.st_mode & S_IWGRP) != 0 && !sticky && !private_group(st.st_gid, st.st_uid))
    return what + " is writable by " + describe_group(st.st_gid) + " (mode "
           + core::mode_text(st.st_mode) + ")";
  return std::nullopt;
}

// The resolved path of `path` (absolute, no symbolic links), or nothing
// with errno set.
std::optional<std::string> resolved_path(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real{::realpath(path.c_str(), nullptr), &std::free};
  if (!real)
    return std::nullopt;
  return std::string{real.get()};
}

} // namespace

std::optional<std::string> check_plugin_folders(const std::string& dir) {
  auto above = false;
  for (fs::path p{dir};; p = p.parent_path()) {
    struct ::stat st {};
    if (::lstat(p.c_str(), &st) != 0)
      return "cannot check folder " + p.string() + ": " + std::strerror(errno);
    if (!S_ISDIR(st.st_mode))
      return "folder " + p.string() + " changed while it was being checked";
    if (auto why = unsafe_status(st, "folder " + p.string(), above))
      return why;
    if (p == p.root_path() || !p.has_relative_path())
      return std::nullopt;
    above = true;
  }
}

namespace {

// Checks what a file exports before it is loaded: the entry point and the ABI
// mark. Returns the reason to refuse it, or nothing.
std::optional<std::string> check_exports(const std::string& path) {
  auto read = read_exported_symbols(path);
  if (auto* why = std::get_if<std::string>(&read)) {
    if (why->rfind("not a shared object", 0) == 0)
      return *why;
    return "cannot load: " + *why;
  }
  const auto& symbols = std::get<std::vector<std::string>>(read);
  auto exports = [&](std::string_view name) {
    return std::find(symbols.begin(), symbols.end(), name) != symbols.end();
  };
  if (!exports(QUARRY_PLUGIN_ENTRY_NAME)) {
    // Name the ABI a plugin was built for when ours is missing.
    std::string_view entry_prefix = "quarry_plugin_v";
    for (const auto& sym : symbols)
      if (sym.size() <= entry_prefix.size() + 3
          && sym.compare(0, entry_prefix.size(), entry_prefix) == 0
          && sym.find_first_not_of("0123456789", entry_prefix.size()) == std::string::npos
          && sym.size() > entry_prefix.size())
        return "built for another plugin ABI (exports " + sym
               + ", this host needs " QUARRY_PLUGIN_ENTRY_NAME ")";
    return std::string{"no entry symbol " QUARRY_PLUGIN_ENTRY_NAME " (not a Quarry plugin)"};
  }
  for (const auto& sym : symbols)
    if (sym.rfind(QUARRY_PLUGIN_ABI_MARK_PREFIX, 0) == 0)
      return check_abi_mark(sym);
  return std::string{"exports no ABI mark (" QUARRY_PLUGIN_ABI_MARK_PREFIX
                     "...): built with an older SDK; rebuild it against "
                     "this host's SDK"};
}

std::string clip(std::string msg) {
  // One line: dlerror() and exception messages may span several.
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  if (msg.size() > 400)
    msg = msg.substr(0, 397) + "...";
  return msg;
}

// Holds a plugin object together with what it needs alive: the library and
// the host context. The control block is allocated here, in the host.
// Runs a plugin's factory; an exception it throws becomes the message.
template <class Factory>
std::optional<std::string> call_factory(std::string_view plugin, const std::string& file,
                                        const std::string& what, Factory&& run) {
  try {
    run();
  } catch (const std::exception& ex) {
    return "plugin '" + std::string{plugin} + "' (" + file + ")" + what
           + " rejected its configuration: " + clip(ex.what());
  } catch (...) {
    return "plugin '" + std::string{plugin} + "' (" + file + ")" + what
           + " failed with an unknown exception";
  }
  return std::nullopt;
}

std::shared_ptr<sdk::plugin_object> pin(std::unique_ptr<sdk::plugin_object> obj,
                                        std::shared_ptr<void> owner) {
  struct holder {
    std::shared_ptr<void> owner; // destroyed after obj
    std::unique_ptr<sdk::plugin_object> obj;
  };
  auto h = std::make_shared<holder>(holder{std::move(owner), std::move(obj)});
  return std::shared_ptr<sdk::plugin_object>{h, h->obj.get()};
}

} // namespace

std::optional<std::string> check_descriptor(const sdk::plugin_descriptor& x) {
  if (x.abi_version != QUARRY_PLUGIN_ABI_VERSION)
    return "plugin ABI version " + std::to_string(x.abi_version)
           + ", but this host supports plugin ABI version "
           + std::to_string(QUARRY_PLUGIN_ABI_VERSION);
  auto plugin_major = x.sdk_version / 10000;
  auto plugin_minor = (x.sdk_version / 100) % 100;
  if (plugin_major != QUARRY_SDK_VERSION_MAJOR || plugin_minor > QUARRY_SDK_VERSION_MINOR
      || (QUARRY_SDK_VERSION_MAJOR == 0 && plugin_minor != QUARRY_SDK_VERSION_MINOR))
    return "built against SDK " + sdk::version_string(x.sdk_version) + ", but this host has SDK "
           + sdk::version_string(sdk::sdk_version)
           + " (major versions must match; 0.x minor versions too)";
  if (x.stdlib_abi == nullptr || std::strcmp(x.stdlib_abi, sdk::stdlib_abi_tag) != 0)
    return std::string{"built with standard library '"} + (x.stdlib_abi ? x.stdlib_abi : "(none)")
           + "', but this host uses '" + sdk::stdlib_abi_tag + "'";
  if (x.json_version / 100 != sdk::json_version / 100)
    return "built against nlohmann::json " + version_pair(x.json_version)
           + ", but this host uses nlohmann::json " + version_pair(sdk::json_version);
  if (!valid_name(x.name))
    return "invalid plugin name (use 1-64 characters a-z, 0-9, _ and -)";
  if (x.kind != sdk::plugin_kind::llm && x.kind != sdk::plugin_kind::tool)
    return "unknown plugin kind " + std::to_string(static_cast<uint32_t>(x.kind));
  if (x.factory == nullptr)
    return "descriptor has no factory";
  return std::nullopt;
}

plugin_registry::plugin_registry(host_services& services) : services_(services) {
  // nop
}

plugin_registry::~plugin_registry() {
  // Libraries stay mapped while objects created from them live (see pin).
}

std::vector<std::string> plugin_registry::load_directories(const std::vector<std::string>& dirs) {
  std::vector<std::string> problems;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      continue;
    std::vector<std::string> files;
    for (fs::directory_iterator it{dir, ec}, end; !ec && it != end; it.increment(ec)) {
      // Every *.so entry: one that is not a regular file (a FIFO, a
      // dangling link) is listed as refused, saying what it is.
      const auto& path = it->path();
      if (path.extension() == ".so")
        files.push_back(path.string());
    }
    if (ec) {
      problems.push_back(dir + ": cannot read plugin folder: " + ec.message());
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files)
      load_file(file);
  }
  return problems;
}

std::optional<std::string> plugin_registry::load_file(const std::string& path) {
  plugin_info info;
  info.file = path;
  auto fail = [&](std::string why) -> std::optional<std::string> {
    info.ok = false;
    info.error = clip(std::move(why));
    infos_.push_back(info);
    return path + ": " + infos_.back().error;
  };
  // A regular file, opened without blocking (a FIFO named *.so must not
  // hang the host); what was opened is what is checked and loaded.
  auto opened = core::open_regular_file(path);
  if (auto* err = std::get_if<core::file_error>(&opened))
    return fail(err->what == core::file_error::kind::unreadable ? "cannot open: " + err->message
                                                                : err->message);
  const auto& file = std::get<core::opened_file>(opened).status();
  // Loaded by its resolved path: every folder on it is checked below, and
  // the path must still name the file that was opened. (Loading through
  // /proc/self/fd would make $ORIGIN useless to the plugin's own
  // dependencies, and glibc would take a later plugin opened on the same
  // descriptor number for the one already loaded.)
  auto real = resolved_path(path);
  struct ::stat real_status {};
  if (!real)
    return fail(std::string{"cannot resolve its path: "} + std::strerror(errno));
  if (::stat(real->c_str(), &real_status) != 0 || real_status.st_dev != file.st_dev
      || real_status.st_ino != file.st_ino)
    return fail("the file changed while it was being loaded");
  // Only root and the user running Quarry may be able to change the code:
  // the file, the folder it is named in and the folder it really is in,
  // with every folder above them.
  auto unsafe = unsafe_status(file, "the file", false);
  if (!unsafe) {
    auto named = fs::path{path}.parent_path();
    auto named_dir = resolved_path(named.empty() ? "." : named.string());
    if (!named_dir)
      unsafe = "cannot resolve its folder: " + std::string{std::strerror(errno)};
    else
      unsafe = check_plugin_folders(*named_dir);
    auto real_dir = fs::path{*real}.parent_path().string();
    if (!unsafe && (!named_dir || real_dir != *named_dir))
      unsafe = check_plugin_folders(real_dir);
  }
  if (unsafe) {
    info.unsafe = clip(*unsafe);
    if (!allow_unsafe_)
      return fail(*unsafe
                  + "; a plugin must be changeable by no one but root "
                    "and the user running Quarry "
                    "(plugins.allow_unsafe_permissions loads it anyway)");
  }
  // Before dlopen runs any code of the file (static constructors included):
  // it must be a shared library of this machine that exports the entry
  // point and this host's ABI mark.
  if (auto why = check_exports(*real))
    return fail(*why);
  auto entry = std::make_shared<loaded>();
  entry->file = path;
  std::error_code ec;
  dlerror(); // clear
  // RTLD_NODELETE: a library is never unmapped while the process runs, so
  // code of a plugin stays valid even for work queued after its last object
  // (e.g. a pool job) or during shutdown.
  auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  entry->lib.load(fs::path{*real}, mode, ec);
  if (ec || !entry->lib.is_loaded()) {
    const char* why = dlerror();
    std::string msg = why ? why : ec.message();
    // dlerror() repeats the path; keep the part after it.
    if (msg.rfind(*real + ": ", 0) == 0)
      msg = msg.substr(real->size() + 2);
    else if (auto pos = msg.find(".so: "); pos != std::string::npos)
      msg = msg.substr(pos + 5);
    return fail("cannot load: " + msg);
  }
  if (!entry->lib.has(QUARRY_PLUGIN_ENTRY_NAME))
    return fail("no entry symbol " QUARRY_PLUGIN_ENTRY_NAME " (not a Quarry plugin)");
  auto& fn = entry->lib.get<sdk::plugin_entry>(QUARRY_PLUGIN_ENTRY_NAME);
  const sdk::plugin_descriptor* desc = nullptr;
  try {
    desc = fn();
  } catch (const std::exception& ex) {
    return fail(std::string{"entry point threw: "} + ex.what());
  } catch (...) {
    return fail("entry point threw an unknown exception");
  }
  if (desc == nullptr)
    return fail("entry point returned no descriptor");
  // The ABI version is the only field read before it is checked.
  info.abi_version = desc->abi_version;
  if (desc->abi_version == QUARRY_PLUGIN_ABI_VERSION) {
    info.sdk_version = desc->sdk_version;
    info.stdlib_abi = desc->stdlib_abi ? desc->stdlib_abi : "";
    info.json_version = desc->json_version;
    // Same ABI: the name field is where we expect it, so failures below can
    // say which plugin the file is.
    if (valid_name(desc->name))
      info.name = desc->name;
  }
  if (auto err = check_descriptor(*desc))
    return fail(*err);
  info.name = desc->name;
  info.kind = desc->kind;
  info.version = desc->version ? desc->version : "";
  info.description = desc->description ? desc->description : "";
  if (auto* prev = find(info.name))
    return fail("duplicate plugin name '" + info.name + "' (already loaded from " + prev->file
                + ")");
  if (entry->lib.has(QUARRY_PLUGIN_KEYS_NAME)) {
    // Optional: the keys the plugin accepts. A malformed list is ignored (the
    // factory still checks the keys), never trusted beyond sane bounds.
    try {
      auto& keys_fn = entry->lib.get<sdk::plugin_keys_entry>(QUARRY_PLUGIN_KEYS_NAME);
      std::vector<std::string> keys;
      auto ok = true;
      const auto* const* list = keys_fn();
      for (size_t i = 0; ok && list != nullptr && list[i] != nullptr; ++i) {
        auto len = ::strnlen(list[i], 129);
        ok = i < 1000 && len > 0 && len <= 128;
        if (ok)
          keys.emplace_back(list[i], len);
      }
      if (ok && list != nullptr)
        info.keys = std::move(keys);
    } catch (...) {
      // Keys unknown: only the factory checks them.
    }
  }
  if (info.kind == sdk::plugin_kind::tool && entry->lib.has(QUARRY_TOOL_KIND_NAME)) {
    // Optional: what the tool is. A value this host does not know is `other`.
    try {
      auto& kind_fn = entry->lib.get<sdk::tool_kind_entry>(QUARRY_TOOL_KIND_NAME);
      auto value = kind_fn();
      if (value <= static_cast<uint32_t>(sdk::tool_kind::page_reader))
        info.tool_kind = static_cast<sdk::tool_kind>(value);
    } catch (...) {
      // Kind unknown: the tool is `other`.
    }
  }
  if (info.kind == sdk::plugin_kind::tool && entry->lib.has(QUARRY_TOOL_SET_NAME)) {
    // Optional: each instance offers a set of tools.
    try {
      auto& set_fn = entry->lib.get<sdk::tool_set_entry>(QUARRY_TOOL_SET_NAME);
      entry->set_factory = set_fn();
      info.tool_set = entry->set_factory != nullptr;
    } catch (...) {
      // No set: the descriptor's factory makes the one tool.
    }
  }
  entry->descriptor = desc;
  info.ok = true;
  infos_.push_back(info);
  libs_.push_back(std::move(entry));
  return std::nullopt;
}

const plugin_info* plugin_registry::find(std::string_view name) const {
  for (const auto& x : infos_)
    if (x.ok && x.name == name)
      return &x;
  return nullptr;
}

std::variant<std::shared_ptr<sdk::plugin_object>, std::string>
plugin_registry::make(std::string_view plugin, sdk::plugin_kind kind, const nlohmann::json& config,
                      std::string_view instance) {
  auto what = instance.empty() ? std::string{} : " for '" + std::string{instance} + "'";
  std::shared_ptr<loaded> entry;
  for (const auto& lib : libs_)
    if (plugin == lib->descriptor->name)
      entry = lib;
  if (!entry) {
    std::string msg = "no plugin named '" + std::string{plugin} + "'" + what;
    for (const auto& x : infos_)
      if (!x.ok && x.name == plugin)
        msg += " (" + x.file + " was refused: " + x.error + ")";
    return msg;
  }
  if (entry->descriptor->kind != kind)
    return "plugin '" + std::string{plugin} + "'" + what + " is a "
           + sdk::to_string(entry->descriptor->kind) + " plugin, not a " + sdk::to_string(kind)
           + " plugin";
  if (!entry->context)
    entry->context = services_.make_context(entry->descriptor->name);
  std::unique_ptr<sdk::plugin_object> obj;
  if (auto err = call_factory(plugin, entry->file, what,
                              [&] { obj = entry->descriptor->factory(*entry->context, config); }))
    return *err;
  if (!obj)
    return "plugin '" + std::string{plugin} + "' (" + entry->file + ")" + what + " created nothing";
  return pin(std::move(obj), entry);
}

make_result<sdk::llm_provider> plugin_registry::make_llm(std::string_view plugin,
                                                         const nlohmann::json& config,
                                                         std::string_view instance) {
  auto res = make(plugin, sdk::plugin_kind::llm, config, instance);
  if (auto* err = std::get_if<std::string>(&res))
    return *err;
  auto obj = std::get<std::shared_ptr<sdk::plugin_object>>(std::move(res));
  auto* typed = dynamic_cast<sdk::llm_provider*>(obj.get());
  if (typed == nullptr)
    return "plugin '" + std::string{plugin}
           + "' says it is an llm plugin but created something else";
  return std::shared_ptr<sdk::llm_provider>{obj, typed};
}

make_result<sdk::tool> plugin_registry::make_tool(std::string_view plugin,
                                                  const nlohmann::json& config,
                                                  std::string_view instance) {
  auto res = make(plugin, sdk::plugin_kind::tool, config, instance);
  if (auto* err = std::get_if<std::string>(&res))
    return *err;
  auto obj = std::get<std::shared_ptr<sdk::plugin_object>>(std::move(res));
  auto* typed = dynamic_cast<sdk::tool*>(obj.get());
  if (typed == nullptr)
    return "plugin '" + std::string{plugin}
           + "' says it is a tool plugin but created something else";
  return std::shared_ptr<sdk::tool>{obj, typed};
}

std::variant<std::vector<made_tool>, std::string>
plugin_registry::make_tools(std::string_view plugin, const nlohmann::json& config,
                            std::string_view instance) {
  std::shared_ptr<loaded> entry;
  for (const auto& lib : libs_)
    if (plugin == lib->descriptor->name)
      entry = lib;
  if (!entry || entry->set_factory == nullptr
      || entry->descriptor->kind != sdk::plugin_kind::tool) {
    // An ordinary plugin (or none: make reports it).
    auto made = make_tool(plugin, config, instance);
    if (auto* err = std::get_if<std::string>(&made))
      return std::move(*err);
    const auto* info = find(plugin);
    return std::vector<made_tool>{{std::get<std::shared_ptr<sdk::tool>>(std::move(made)),
                                   info != nullptr ? info->tool_kind : sdk::tool_kind::other}};
  }
  auto key = std::make_pair(std::string{instance}, config.dump());
  if (auto i = tool_sets_.find(key); i != tool_sets_.end())
    return i->second;
  auto what = instance.empty() ? std::string{} : " for '" + std::string{instance} + "'";
  if (!entry->context)
    entry->context = services_.make_context(entry->descriptor->name);
  std::vector<sdk::tool_offer> offers;
  if (auto err = call_factory(plugin, entry->file, what,
                              [&] { offers = entry->set_factory(*entry->context, config); }))
    return *err;
  std::vector<made_tool> out;
  for (auto& offer : offers) {
    if (!offer.object)
      return "plugin '" + std::string{plugin} + "' (" + entry->file + ")" + what
             + " offered an empty tool";
    auto kind = static_cast<uint32_t>(offer.kind)
                    <= static_cast<uint32_t>(sdk::tool_kind::page_reader)
                  ? offer.kind
                  : sdk::tool_kind::other;
    auto obj = pin(std::unique_ptr<sdk::plugin_object>{std::move(offer.object)}, entry);
    auto* typed = static_cast<sdk::tool*>(obj.get());
    out.push_back({std::shared_ptr<sdk::tool>{obj, typed}, kind});
  }
  tool_sets_.emplace(std::move(key), out);
  return out;
}

} // namespace quarry::host
