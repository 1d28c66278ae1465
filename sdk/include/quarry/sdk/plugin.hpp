// This file is part of the Quarry plugin SDK.
// The plugin entry point: one exported, versioned symbol returning a
// descriptor that the host checks before calling anything else.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/llm_provider.hpp"
#include "quarry/sdk/plugin_object.hpp"
#include "quarry/sdk/tool.hpp"
#include "quarry/sdk/types.hpp"
#include "quarry/sdk/version.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace quarry::sdk {

/// What a plugin provides.
enum class plugin_kind : uint32_t {
  llm = 1,
  tool = 2,
};

/// Returns `llm` or `tool`.
inline const char* to_string(plugin_kind x) noexcept {
  return x == plugin_kind::llm ? "llm" : x == plugin_kind::tool ? "tool" : "?";
}

/// Creates one instance of the plugin's object (an @ref llm_provider for
/// kind `llm`, a @ref tool for kind `tool`) from the instance's configuration.
/// May throw `std::exception` to reject the configuration; the host reports
/// the message together with the plugin's file.
using plugin_factory = std::unique_ptr<plugin_object> (*)(host_context& host,
                                                          const nlohmann::json& config);

/// Describes a plugin. The layout is part of the ABI: fields are only ever
/// appended, and every change bumps QUARRY_PLUGIN_ABI_VERSION.
struct plugin_descriptor {
  /// Must equal QUARRY_PLUGIN_ABI_VERSION of the host. Always first.
  uint32_t abi_version;
  /// The SDK version the plugin was built against (see encode_version).
  uint32_t sdk_version;
  /// The standard-library ABI tag the plugin was built with.
  const char* stdlib_abi;
  /// The nlohmann::json version the plugin was built against.
  uint32_t json_version;
  /// Unique plugin name, e.g. `openai` or `brave`.
  const char* name;
  /// What the factory creates.
  plugin_kind kind;
  /// The plugin's own version, e.g. `1.2.0`.
  const char* version;
  /// One line saying what the plugin does.
  const char* description;
  /// Creates instances.
  plugin_factory factory;
};

/// Signature of the entry point.
using plugin_entry = const plugin_descriptor*();

/// Signature of the optional key list (see QUARRY_PLUGIN_KEYS): the
/// configuration keys (options) the plugin accepts, ending with a null
/// pointer. The host's own limits never reach a plugin.
using plugin_keys_entry = const char* const*();

} // namespace quarry::sdk

// -- the ABI mark -------------------------------------------------------------
//
// Every plugin exports one more symbol, the ABI mark, whose *name* spells the
// facts that must match between host and plugin:
//
//   quarry_abi_v<plugin ABI>_sdk_<major>_<minor>_json_<nlohmann::json's
//   inline namespace>_stdlib_<library and ABI>_debug_<0|1>
//
// e.g. `quarry_abi_v3_sdk_0_2_json_json_abi_v3_11_2_stdlib_gnu_cxx11_debug_0`.
// The host reads the names of a file's dynamic symbols from disk, without
// loading it, and refuses a plugin whose mark differs from its own before any
// code of the plugin (static constructors included) runs. nlohmann::json's
// inline namespace carries its version and its ABI tags (`_diag` with
// JSON_DIAGNOSTICS=1, `_ldvcmp` with the legacy comparison), which change the
// layout of `nlohmann::json` that host and plugin pass to each other.

/// Pastes two tokens after expanding them.
#define QUARRY_SDK_CAT(a, b) QUARRY_SDK_CAT_IMPL(a, b)

/// Implementation detail of QUARRY_SDK_CAT.
#define QUARRY_SDK_CAT_IMPL(a, b) a##b

// clang-format off
#if defined(NLOHMANN_JSON_NAMESPACE_CONCAT) && defined(NLOHMANN_JSON_ABI_TAGS)
/// nlohmann::json's inline namespace, e.g. `json_abi_v3_11_2` or, with
/// JSON_DIAGNOSTICS=1, `json_abi_diag_v3_11_2`.
#  define QUARRY_SDK_JSON_NAMESPACE                                            \
    NLOHMANN_JSON_NAMESPACE_CONCAT(NLOHMANN_JSON_ABI_TAGS,                     \
                                   NLOHMANN_JSON_NAMESPACE_VERSION)
#else
// Before 3.11, nlohmann::json had no inline namespace: name its version.
#  define QUARRY_SDK_JSON_NAMESPACE                                            \
    QUARRY_SDK_CAT(                                                            \
      QUARRY_SDK_CAT(QUARRY_SDK_CAT(json_v, NLOHMANN_JSON_VERSION_MAJOR), _),  \
      NLOHMANN_JSON_VERSION_MINOR)
#endif

#if defined(_LIBCPP_VERSION)
#  define QUARRY_SDK_STDLIB_TOKEN QUARRY_SDK_CAT(llvm_abi, _LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
#  define QUARRY_SDK_STDLIB_TOKEN gnu_cxx11
#elif defined(__GLIBCXX__)
#  define QUARRY_SDK_STDLIB_TOKEN gnu_cxx98
#else
#  define QUARRY_SDK_STDLIB_TOKEN unknown
#endif

#if defined(_GLIBCXX_DEBUG)
#  define QUARRY_SDK_DEBUG_TOKEN 1
#else
#  define QUARRY_SDK_DEBUG_TOKEN 0
#endif

/// The name of this translation unit's ABI mark (an identifier).
#define QUARRY_PLUGIN_ABI_MARK                                                 \
  QUARRY_SDK_CAT(                                                              \
    QUARRY_SDK_CAT(                                                            \
      QUARRY_SDK_CAT(                                                          \
        QUARRY_SDK_CAT(                                                        \
          QUARRY_SDK_CAT(                                                      \
            QUARRY_SDK_CAT(                                                    \
              QUARRY_SDK_CAT(                                                  \
                QUARRY_SDK_CAT(                                                \
                  QUARRY_SDK_CAT(                                              \
                    QUARRY_SDK_CAT(quarry_abi_v, QUARRY_PLUGIN_ABI_VERSION),   \
                    _sdk_),                                                    \
                  QUARRY_SDK_VERSION_MAJOR),                                   \
                _),                                                            \
              QUARRY_SDK_VERSION_MINOR),                                       \
            _json_),                                                           \
          QUARRY_SDK_JSON_NAMESPACE),                                          \
        _stdlib_),                                                             \
      QUARRY_SDK_STDLIB_TOKEN),                                                \
    QUARRY_SDK_CAT(_debug_, QUARRY_SDK_DEBUG_TOKEN))

/// The prefix every ABI mark starts with, whatever its facts.
#define QUARRY_PLUGIN_ABI_MARK_PREFIX "quarry_abi_v"

/// Defines the ABI mark. QUARRY_PLUGIN does this; a plugin that writes its
/// entry point by hand must use it once, at global scope.
#define QUARRY_PLUGIN_DEFINE_ABI_MARK()                                        \
  extern "C" QUARRY_SDK_API void QUARRY_PLUGIN_ABI_MARK() {}

namespace quarry::sdk {

/// The name of this translation unit's ABI mark (see QUARRY_PLUGIN_ABI_MARK).
constexpr const char* abi_mark = QUARRY_SDK_STRINGIFY(QUARRY_PLUGIN_ABI_MARK);

} // namespace quarry::sdk

/// Defines the entry point of a plugin and its ABI mark (see version.hpp).
/// Use once per plugin, at global scope:
///
/// ~~~
/// QUARRY_PLUGIN(my_search, quarry::sdk::plugin_kind::tool, "1.0.0",
///               "Searches my company's search API", &make_my_search)
/// ~~~
#define QUARRY_PLUGIN(plugin_name, plugin_kind_value, plugin_version,          \
                      plugin_description, plugin_factory_fn)                   \
  QUARRY_PLUGIN_DEFINE_ABI_MARK()                                              \
  extern "C" QUARRY_SDK_API const ::quarry::sdk::plugin_descriptor*            \
  quarry_plugin_v4() {                                                         \
    static const ::quarry::sdk::plugin_descriptor descriptor{                  \
      QUARRY_PLUGIN_ABI_VERSION,                                               \
      ::quarry::sdk::sdk_version,                                              \
      ::quarry::sdk::stdlib_abi_tag,                                           \
      ::quarry::sdk::json_version,                                             \
      QUARRY_SDK_STRINGIFY(plugin_name),                                       \
      plugin_kind_value,                                                       \
      plugin_version,                                                          \
      plugin_description,                                                      \
      plugin_factory_fn};                                                      \
    return &descriptor;                                                        \
  }

/// Name of the optional symbol that lists a plugin's configuration keys.
/// It is separate from the descriptor, so plugins without it still load.
#define QUARRY_PLUGIN_KEYS_NAME "quarry_plugin_keys_v1"

/// Declares the configuration keys (options) the plugin accepts. Quarry's
/// own limits are written under `limits:` and never reach the plugin.
/// Optional, at most once per plugin, at global scope:
///
/// ~~~
/// QUARRY_PLUGIN_KEYS("api_key", "base_url", "max_results")
/// ~~~
///
/// With it, `quarry config check` and every command report each key that
/// the plugin does not declare, all at once, at the key's file and
/// line and with a "did you mean" hint, before the plugin is created. Without
/// it, only the plugin's factory checks its keys.
#define QUARRY_PLUGIN_KEYS(...)                                                \
  extern "C" QUARRY_SDK_API const char* const* quarry_plugin_keys_v1() {       \
    static const char* const keys[] = {__VA_ARGS__, nullptr};                  \
    return keys;                                                               \
  }

/// Name of the optional symbol that says what kind of tool a tool plugin
/// provides. It is separate from the descriptor, so plugins without it still
/// load (their tools are `other`).
#define QUARRY_TOOL_KIND_NAME "quarry_tool_kind_v1"

namespace quarry::sdk {

/// Signature of the optional tool kind (see QUARRY_TOOL_KIND): a value of
/// @ref tool_kind.
using tool_kind_entry = uint32_t();

} // namespace quarry::sdk

/// Declares what kind of tool a tool plugin provides (@ref
/// quarry::sdk::tool_kind). Optional, at most once per plugin, at global
/// scope:
///
/// ~~~
/// QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
/// ~~~
///
/// A search plugin that declares `web_search` gets what the built-in web
/// search backends get: its calls are shown as searches, its results'
/// snippets go to the page reader, and the model is reminded to read the
/// pages it found.
#define QUARRY_TOOL_KIND(tool_kind_value)                                     \
  extern "C" QUARRY_SDK_API uint32_t quarry_tool_kind_v1() {                   \
    return static_cast<uint32_t>(tool_kind_value);                             \
  }

/// Name of the optional symbol through which one configured instance of a
/// tool plugin offers several tools (see QUARRY_TOOL_SET). It is separate
/// from the descriptor, so plugins without it still load.
#define QUARRY_TOOL_SET_NAME "quarry_tool_set_v1"

namespace quarry::sdk {

/// One tool of an instance that offers several (QUARRY_TOOL_SET), with its
/// kind: a plugin such as an MCP client learns its tools, and what each is,
/// from its configuration and the server it reaches, not when it is built.
struct tool_offer {
  std::unique_ptr<tool> object;
  tool_kind kind = tool_kind::other;
};

/// Creates every tool of one configured instance from its configuration, in
/// the order the model should see them. May throw `std::exception` to reject
/// the configuration, like a @ref plugin_factory; returning no tool is
/// allowed (the instance then offers none). Tools of one call may share
/// state (a connection, a child process).
using tool_set_factory = std::vector<tool_offer> (*)(host_context& host,
                                                     const nlohmann::json& config);

/// Signature of the optional tool set entry: returns the factory.
using tool_set_entry = tool_set_factory();

} // namespace quarry::sdk

/// Declares that each configured instance of this tool plugin offers the
/// tools `factory_fn` (a @ref quarry::sdk::tool_set_factory) creates, each
/// with its own kind; the host then uses it instead of the descriptor's
/// factory and QUARRY_TOOL_KIND. Optional, at most once per plugin, at
/// global scope:
///
/// ~~~
/// QUARRY_TOOL_SET(&make_server_tools)
/// ~~~
#define QUARRY_TOOL_SET(factory_fn)                                            \
  extern "C" QUARRY_SDK_API ::quarry::sdk::tool_set_factory                    \
  quarry_tool_set_v1() {                                                       \
    return factory_fn;                                                         \
  }
// clang-format on
