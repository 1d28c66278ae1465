// This file is part of the Quarry plugin SDK.
// The string helpers the host and plugins share: trimming, ASCII case,
// prefixes, hex digits, percent-encoding and -decoding, and (through
// text.hpp) UTF-8 checks, repair, decoding and appending code points.
// Locale-independent, so the same bytes give the same answer everywhere.

#pragma once

#include "quarry/sdk/text.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
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

/// The value of the hex digit `c` (0-9, a-f, A-F), or -1.
constexpr int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// `x` with every `%XX` (two hex digits) replaced by that byte; a `%` not
/// followed by two hex digits stays as it is. The result may hold any byte
/// (NUL, invalid UTF-8): check it before use.
inline std::string percent_decode(std::string_view x) {
  std::string out;
  out.reserve(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    int hi = -1;
    int lo = -1;
    if (x[i] == '%' && i + 2 < x.size()) {
      hi = hex_digit_value(x[i + 1]);
      lo = hex_digit_value(x[i + 2]);
    }
    if (hi >= 0 && lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += x[i];
    }
  }
  return out;
}

/// Like @ref percent_decode, but returns nothing when a `%` is not followed
/// by two hex digits.
inline std::optional<std::string> percent_decode_strict(std::string_view x) {
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] == '%'
        && (i + 2 >= x.size() || hex_digit_value(x[i + 1]) < 0
            || hex_digit_value(x[i + 2]) < 0))
      return std::nullopt;
  return percent_decode(x);
}

/// One code point read from UTF-8 text.
struct utf8_char {
  /// The code point; U+FFFD for a byte that starts no valid sequence.
  uint32_t code_point = 0;
  /// The bytes it took: 1 to 4 (1 for an invalid byte).
  size_t length = 0;
};

/// Decodes the code point starting at `text[pos]` (`pos < text.size()`). A
/// byte that does not start a valid sequence (see @ref utf8_sequence_length)
/// counts as one U+FFFD, so a loop over any bytes always advances.
inline utf8_char decode_utf8(std::string_view text, size_t pos) noexcept {
  auto n = utf8_sequence_length(text, pos);
  if (n == 0)
    return {0xFFFD, 1};
  auto lead = static_cast<unsigned char>(text[pos]);
  if (n == 1)
    return {lead, 1};
  uint32_t cp = lead & (0x7F >> n);
  for (size_t k = 1; k < n; ++k)
    cp = cp << 6 | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  return {cp, n};
}

} // namespace quarry::sdk
