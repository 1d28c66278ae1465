// This file is part of the Quarry plugin SDK.
// ASCII string helpers the host and plugins share: trimming, case, prefixes
// and percent-encoding. Locale-independent, so the same bytes give the same
// answer everywhere.

#pragma once

#include <string>
#include <string_view>

namespace quarry::sdk {

/// Whether `c` is ASCII whitespace: space, tab, newline, carriage return,
/// form feed or vertical tab.
constexpr bool is_ascii_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/// `x` without ASCII whitespace at either end.
inline std::string_view trim(std::string_view x) noexcept {
  while (!x.empty() && is_ascii_space(x.front()))
    x.remove_prefix(1);
  while (!x.empty() && is_ascii_space(x.back()))
    x.remove_suffix(1);
  return x;
}

/// `c` with A-Z turned into a-z; every other byte as it is.
constexpr char ascii_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// `x` with A-Z turned into a-z (UTF-8 text keeps its other bytes).
inline std::string to_lower(std::string_view x) {
  std::string out{x};
  for (auto& c : out)
    c = ascii_lower(c);
  return out;
}

/// Whether `x` begins with `prefix`.
constexpr bool starts_with(std::string_view x, std::string_view prefix) noexcept {
  return x.substr(0, prefix.size()) == prefix;
}

/// Whether `x` ends with `suffix`.
constexpr bool ends_with(std::string_view x, std::string_view suffix) noexcept {
  return x.size() >= suffix.size()
         && x.substr(x.size() - suffix.size()) == suffix;
}

/// Whether `x` contains `part`.
constexpr bool contains(std::string_view x, std::string_view part) noexcept {
  return x.find(part) != std::string_view::npos;
}

/// Percent-encodes `x` for a URL query value or path segment: RFC 3986's
/// unreserved characters (A-Z a-z 0-9 - . _ ~) stay, every other byte
/// becomes %XX (upper-case hex).
inline std::string url_encode(std::string_view x) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(x.size());
  for (char c : x) {
    auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9')
        || u == '-' || u == '.' || u == '_' || u == '~') {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 0x0F];
    }
  }
  return out;
}

} // namespace quarry::sdk
