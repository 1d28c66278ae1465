// This file is part of the Quarry plugin SDK.
// UTF-8 checks and repair for text that comes from outside (HTTP bodies,
// model output, tool results, files): everything Quarry stores, prints or
// serialises as JSON must be valid UTF-8.

#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

namespace quarry::sdk {

/// The UTF-8 encoding of U+FFFD REPLACEMENT CHARACTER.
inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

/// Returns the length of the valid UTF-8 sequence starting at `text[pos]`
/// (1 to 4), or 0 if the bytes there are not one (RFC 3629: no overlong
/// forms, no encoded surrogates, nothing above U+10FFFF, no truncated
/// sequence).
inline size_t utf8_sequence_length(std::string_view text, size_t pos) noexcept {
  auto left = text.size() - pos;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < left && byte(i) >= lo && byte(i) <= hi;
  };
  if (left == 0)
    return 0;
  auto c = byte(0);
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    return cont(1) ? 2 : 0;
  if (c == 0xE0)
    return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
    return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED)
    return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0)
    return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3)
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4)
    return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/// Returns the offset of the first byte at or after `pos` that a JSON
/// string cannot hold as it is: a control character (below 0x20), `"`,
/// `\\`, or a byte with its high bit set (the start of a UTF-8 sequence, to
/// be checked); `text.size()` when there is none. With SSE2 (every x86-64
/// processor) sixteen bytes are compared at once and the first such byte
/// of a block is found from the comparison's bit mask; the rest, and other
/// processors, skip eight bytes at a time while a word holds none (the
/// usual bit tricks: a borrow only comes from such a byte, so a word
/// without one is never flagged), and the word that holds one is read
/// byte by byte, which is exact in either byte order.
inline size_t json_plain_end(std::string_view text, size_t pos) noexcept {
  const size_t n = text.size();
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (n - pos >= 16) {
    auto block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + pos));
    // Compared as signed bytes, 0x80-0xFF are negative: below 0x20 too.
    auto hits = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(block, quote),
                                          _mm_cmpeq_epi8(block, backslash)),
                             _mm_cmplt_epi8(block, space));
    if (auto mask = static_cast<unsigned>(_mm_movemask_epi8(hits)); mask != 0)
      return pos + static_cast<size_t>(__builtin_ctz(mask));
    pos += 16;
  }
#endif
  constexpr uint64_t ones = 0x0101010101010101ULL;
  constexpr uint64_t high = 0x8080808080808080ULL;
  while (n - pos >= 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + pos, 8);
    auto flagged = ((w - ones * 0x20) | ((w ^ (ones * '"')) - ones) | ((w ^ (ones * '\\')) - ones)
                    | w)
                   & high;
    if (flagged != 0)
      break;
    pos += 8;
  }
  for (; pos < n; ++pos) {
    auto c = static_cast<unsigned char>(text[pos]);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
      return pos;
  }
  return n;
}

/// Returns the offset of the first byte at or after `pos` that a JSON
/// string cannot hold as it is once its UTF-8 is checked: a control
/// character, `"`, `\\`, or a byte that does not start a valid UTF-8
/// sequence (@ref utf8_sequence_length); `text.size()` when there is none.
/// Valid sequences are stepped over; ASCII runs as in @ref json_plain_end.
inline size_t json_verbatim_end(std::string_view text, size_t pos) noexcept {
  for (;;) {
    pos = json_plain_end(text, pos);
    if (pos == text.size() || static_cast<unsigned char>(text[pos]) < 0x80)
      return pos;
    auto length = utf8_sequence_length(text, pos);
    if (length == 0)
      return pos;
    pos += length;
  }
}

/// Returns the offset of the first byte of `text` that does not start a
/// valid UTF-8 sequence, or `text.size()` if all of it is valid.
inline size_t first_invalid_utf8(std::string_view text) noexcept {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs are the common case: eight bytes at a time while none has
    // its high bit set.
    while (text.size() - i >= 8) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ULL) != 0)
        break;
      i += 8;
    }
    if (i == text.size())
      break;
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    auto n = utf8_sequence_length(text, i);
    if (n == 0)
      return i;
    i += n;
  }
  return i;
}

/// Returns whether `text` is valid UTF-8.
inline bool is_valid_utf8(std::string_view text) noexcept {
  return first_invalid_utf8(text) == text.size();
}

/// Appends the UTF-8 encoding of code point `cp` (a surrogate or a value
/// above U+10FFFF becomes U+FFFD).
inline void append_utf8(std::string& out, uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Returns `text` with every byte that does not belong to a valid UTF-8
/// sequence replaced by U+FFFD (one per byte, so a truncated three-byte
/// sequence gives two). Linear; valid input is returned unchanged.
inline std::string repair_utf8(std::string_view text) {
  auto bad = first_invalid_utf8(text);
  if (bad == text.size())
    return std::string{text};
  std::string out;
  out.reserve(text.size() + 16);
  out.append(text.data(), bad);
  size_t i = bad;
  while (i < text.size()) {
    auto n = utf8_sequence_length(text, i);
    if (n == 0) {
      out.append(utf8_replacement.data(), utf8_replacement.size());
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

/// Repairs `text` in place (see @ref repair_utf8). Returns whether anything
/// was replaced.
inline bool repair_utf8_in_place(std::string& text) {
  if (is_valid_utf8(text))
    return false;
  text = repair_utf8(text);
  return true;
}

/// Returns the longest prefix of `text` of at most `max_bytes` bytes that
/// does not end inside a UTF-8 sequence (for cutting messages and previews).
inline std::string_view utf8_prefix(std::string_view text, size_t max_bytes) noexcept {
  if (text.size() <= max_bytes)
    return text;
  auto end = max_bytes;
  // Step back over continuation bytes, at most three.
  for (int k = 0; k < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++k)
    --end;
  return text.substr(0, end);
}

} // namespace quarry::sdk
