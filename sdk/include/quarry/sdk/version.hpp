// This file is part of the Quarry plugin SDK.
// Everything a plugin needs to know about the versions it was built against.

#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

/// Exports a symbol from a plugin or from the SDK (default visibility).
#define QUARRY_SDK_API __attribute__((visibility("default")))

/// Major version of the SDK. A plugin built against another major version is
/// refused by the host.
#define QUARRY_SDK_VERSION_MAJOR 0

/// Minor version of the SDK. A plugin built against a newer minor version than
/// the host is refused.
#define QUARRY_SDK_VERSION_MINOR 2

/// Patch version of the SDK. Never part of a compatibility check.
#define QUARRY_SDK_VERSION_PATCH 0

/// Version of the binary interface between host and plugin. Bumped whenever
/// the layout of @ref quarry::sdk::plugin_descriptor or any SDK interface
/// changes (3: chat_request carries a research_context; 4: host_context has
/// steady_now). The entry point symbol carries it in its name, too.
#define QUARRY_PLUGIN_ABI_VERSION 4

/// Turns the expansion of a macro argument into a string literal.
#define QUARRY_SDK_STRINGIFY(x) QUARRY_SDK_STRINGIFY_IMPL(x)

/// Implementation detail of QUARRY_SDK_STRINGIFY.
#define QUARRY_SDK_STRINGIFY_IMPL(x) #x

/// Name of the one symbol every plugin exports.
#define QUARRY_PLUGIN_ENTRY_NAME "quarry_plugin_v4"

namespace quarry::sdk {

/// Encodes a version triple as `major * 10000 + minor * 100 + patch`.
constexpr uint32_t encode_version(uint32_t major, uint32_t minor, uint32_t patch) noexcept {
  return major * 10000 + minor * 100 + patch;
}

/// Renders an encoded version as `major.minor.patch`.
inline std::string version_string(uint32_t encoded) {
  return std::to_string(encoded / 10000) + "." + std::to_string((encoded / 100) % 100) + "."
         + std::to_string(encoded % 100);
}

/// The SDK version this translation unit is compiled against.
constexpr uint32_t sdk_version = encode_version(QUARRY_SDK_VERSION_MAJOR, QUARRY_SDK_VERSION_MINOR,
                                                QUARRY_SDK_VERSION_PATCH);

/// The nlohmann::json version this translation unit is compiled against.
/// Host and plugin pass `nlohmann::json` objects to each other, so the major
/// and minor versions must match exactly.
constexpr uint32_t json_version = encode_version(
  NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);

/// Describes the C++ standard library and its ABI, e.g.
/// `libstdc++ cxx11-abi=1`. Host and plugin exchange `std::string`,
/// `std::vector` and `std::function`, so this must match exactly.
#if defined(_LIBCPP_VERSION)
constexpr const char* stdlib_abi_tag = "libc++ abi=" QUARRY_SDK_STRINGIFY(_LIBCPP_ABI_VERSION);
#elif defined(__GLIBCXX__)
#  if _GLIBCXX_USE_CXX11_ABI
constexpr const char* stdlib_abi_tag = "libstdc++ cxx11-abi=1";
#  else
constexpr const char* stdlib_abi_tag = "libstdc++ cxx11-abi=0";
#  endif
#else
constexpr const char* stdlib_abi_tag = "unknown";
#endif

} // namespace quarry::sdk
