// This file is part of the Quarry plugin SDK.
// The string helpers the host and plugins share: trimming, ASCII case,
// prefixes, hex digits, percent-encoding and -decoding, UTF-8 decoding,
// text cleaned of terminal controls, and (through text.hpp) UTF-8 checks,
// repair and appending code points.
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

/// `n` in decimal with a comma between groups of three digits, as messages
/// write counts: `131,072`, `-1,000`, `999`.
inline std::string digit_groups(int64_t n) {
  auto negative = n < 0;
  // Through uint64_t: -INT64_MIN does not fit an int64_t.
  auto magnitude = negative ? uint64_t{0} - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  auto digits = std::to_string(magnitude);
  std::string out = negative ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
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
  return x.size() >= suffix.size() && x.substr(x.size() - suffix.size()) == suffix;
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
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '-'
        || u == '.' || u == '_' || u == '~') {
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
        && (i + 2 >= x.size() || hex_digit_value(x[i + 1]) < 0 || hex_digit_value(x[i + 2]) < 0))
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

/// The most bytes @ref strip_terminal_controls removes as one escape sequence
/// or control string, introducer and terminator included. A longer one is
/// taken for text: only its introducer goes, so a stray `ESC ]` cannot
/// swallow a whole report.
inline constexpr size_t max_terminal_sequence = 4096;

namespace detail {

/// What a scan below answers when `text` ends before the sequence does and
/// more text may follow (a stream cut into chunks): hold the sequence back.
inline constexpr size_t terminal_more = std::string_view::npos - 1;

/// What a scan answers when it reaches the end of `text`: npos when `text`
/// is all there is or the sequence reached `limit`, @ref terminal_more when
/// more text may follow.
constexpr size_t terminal_ran_out(std::string_view text, size_t limit, bool final) noexcept {
  return !final && limit > text.size() ? terminal_more : std::string_view::npos;
}

/// One past the final byte of the control sequence whose parameters start at
/// `text[from]`, or npos when none comes before `limit`: ECMA-48 5.4, shape
/// `CSI P... I... F` with parameter bytes 0x30-0x3F, intermediate bytes
/// 0x20-0x2F and a final byte 0x40-0x7E. Any other byte (a control, ESC,
/// UTF-8) ends the scan without a sequence.
inline size_t csi_end(std::string_view text, size_t from, size_t limit,
                      bool final = true) noexcept {
  for (auto i = from; i < text.size() && i < limit; ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x40 && u <= 0x7E)
      return i + 1;
    if (u < 0x20 || u > 0x3F)
      return std::string_view::npos;
  }
  return terminal_ran_out(text, limit, final);
}

/// One past the final byte of the escape sequence whose first byte after ESC
/// is `text[from]`, or npos: the escape sequences of ECMA-35 (clause 13),
/// shape `ESC I... F` with intermediate bytes 0x20-0x2F and a final byte
/// 0x30-0x7E (`ESC 7`, `ESC c`, `ESC ( B`, `ESC # 8`).
inline size_t escape_end(std::string_view text, size_t from, size_t limit,
                         bool final = true) noexcept {
  for (auto i = from; i < text.size() && i < limit; ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x30 && u <= 0x7E)
      return i + 1;
    if (u < 0x20 || u > 0x2F)
      return std::string_view::npos;
  }
  return terminal_ran_out(text, limit, final);
}

/// Where the control string (OSC, DCS, SOS, PM, APC: ECMA-48 5.6) whose
/// content starts at `text[from]` ends, or npos when neither an end nor a cut
/// comes before `limit` or the end of `text`. It ends one past its
/// terminator: ST (`ESC \` or U+009C) or, for an OSC (`osc`), BEL as xterm
/// takes it. It is cut at (and without) ESC followed by anything but `\`,
/// CAN, SUB or another C1 control, which end a string in a terminal too.
inline size_t control_string_end(std::string_view text, size_t from, size_t limit, bool osc,
                                 bool final = true) noexcept {
  for (auto i = from; i < text.size() && i < limit; ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    if (u == 0x07 && osc)
      return i + 1;
    if (u == 0x18 || u == 0x1A)
      return i;
    if ((u == 0x1B || u == 0xC2) && i + 1 == text.size() && !final && limit > text.size())
      return terminal_more; // what the byte after it means is still to come
    if (u == 0x1B)
      return i + 1 < text.size() && text[i + 1] == '\\' ? i + 2 : i;
    if (u == 0xC2 && i + 1 < text.size()) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      if (next == 0x9C)
        return i + 2;
      if (next >= 0x80 && next <= 0x9F)
        return i;
    }
  }
  return terminal_ran_out(text, limit, final);
}

/// The kind of sequence a C1 control or the byte after ESC introduces, as the
/// byte after ESC of its 7-bit form (`[` CSI, `]` OSC, `P` DCS, `X` SOS, `^`
/// PM, `_` APC: ECMA-48 5.3 and 8.3), or 0 when it introduces none.
constexpr char terminal_introducer(uint32_t c) noexcept {
  switch (c) {
    case '[':
    case 0x9B:
      return '[';
    case ']':
    case 0x9D:
      return ']';
    case 'P':
    case 0x90:
      return 'P';
    case 'X':
    case 0x98:
      return 'X';
    case '^':
    case 0x9E:
      return '^';
    case '_':
    case 0x9F:
      return '_';
    default:
      return 0;
  }
}

/// Whether `text[pos..]` is the start of a UTF-8 sequence cut by the end of
/// `text`: a lead byte and fewer continuation bytes than it announces.
inline bool utf8_cut_short(std::string_view text, size_t pos) noexcept {
  auto lead = static_cast<unsigned char>(text[pos]);
  size_t n = lead >= 0xC2 && lead <= 0xDF   ? 2
             : lead >= 0xE0 && lead <= 0xEF ? 3
             : lead >= 0xF0 && lead <= 0xF4 ? 4
                                            : 0;
  if (n == 0 || pos + n <= text.size())
    return false;
  for (auto k = pos + 1; k < text.size(); ++k)
    if ((static_cast<unsigned char>(text[k]) & 0xC0) != 0x80)
      return false;
  return true;
}

/// Appends `text` cleaned for a terminal to `out` (the rules of
/// @ref strip_terminal_controls) and returns how many bytes of `text` it
/// used. With `final`, all of them; without, it stops before a sequence or a
/// UTF-8 character that the end of `text` cuts short (at most
/// @ref max_terminal_sequence bytes), which the caller keeps for the next
/// piece.
inline size_t clean_terminal_text(std::string_view text, std::string& out, bool final) {
  constexpr auto npos = std::string_view::npos;
  out.reserve(out.size() + text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto u = static_cast<unsigned char>(text[i]);
    if ((u >= 0x20 && u < 0x7F) || u == '\n' || u == '\t') {
      out += text[i++];
      continue;
    }
    char kind = 0;   // what the introducer at `i` starts; 'e' for ESC I... F
    size_t body = 0; // the first byte after the introducer
    if (u == 0x1B) {
      if (i + 1 == text.size() && !final)
        return i;
      auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
      kind = next < 0x80 ? terminal_introducer(next) : 0;
      body = i + (kind != 0 ? 2 : 1);
      if (kind == 0)
        kind = 'e';
    } else if (u < 0x80) {
      ++i; // another C0 control or DEL
      continue;
    } else {
      if (!final && utf8_cut_short(text, i))
        return i;
      auto c = decode_utf8(text, i);
      if (c.length == 1) {
        out += utf8_replacement; // not UTF-8 (a lone 8-bit C1 byte too)
        ++i;
        continue;
      }
      if (c.code_point > 0x9F) {
        out.append(text, i, c.length);
        i += c.length;
        continue;
      }
      kind = terminal_introducer(c.code_point);
      body = i + c.length;
      if (kind == 0) {
        i = body; // a C1 control that starts nothing (NEL, ST alone, ...)
        continue;
      }
    }
    auto limit = i + max_terminal_sequence;
    auto end = kind == '['   ? csi_end(text, body, limit, final)
               : kind == 'e' ? escape_end(text, body, limit, final)
                             : control_string_end(text, body, limit, kind == ']', final);
    if (end == terminal_more)
      return i;
    i = end == npos ? body : end;
  }
  return text.size();
}

} // namespace detail

/// `text` cleaned for a terminal: text from outside (a model's answer, a page
/// title, a question sent over HTTP) that reaches a terminal must not move
/// the cursor, clear the screen, set the window title or write the
/// clipboard. Removed, after ECMA-48 (5th edition, 1991):
/// - whole escape sequences and control strings, 7-bit and 8-bit (C1 as
///   UTF-8): control sequences `CSI P... I... F` (`ESC [` or U+009B), control
///   strings up to their ST or BEL (OSC `ESC ]` / U+009D, DCS `ESC P` /
///   U+0090, SOS `ESC X` / U+0098, PM `ESC ^` / U+009E, APC `ESC _` /
///   U+009F) and escape sequences `ESC I... F`;
/// - every other C0 control but line feed and tab (carriage return too: a
///   caller that needs one writes it itself), DEL, and every other C1 control
///   (U+0080-U+009F).
///
/// A sequence that does not end (the text ends first, a byte that cannot be
/// in it comes, or it is longer than @ref max_terminal_sequence) loses only
/// its introducer; the rest stays as text, cleaned the same way. A control
/// string cut short by ESC, CAN, SUB or another C1 control goes whole, as a
/// terminal ends it there (ESC then starts what follows). Bytes that
/// are not UTF-8 become U+FFFD, one each (as @ref repair_utf8), so the
/// result is valid UTF-8 and holds no byte below 0x20 but `\n` and `\t`, no
/// 0x7F and no code point U+0080-U+009F. Linear: each byte is looked at most
/// twice. Valid text without controls (emoji, CJK) is returned unchanged.
/// For text that arrives in pieces, see @ref terminal_text_filter.
inline std::string strip_terminal_controls(std::string_view text) {
  std::string out;
  detail::clean_terminal_text(text, out, true);
  return out;
}

/// @ref strip_terminal_controls for text that arrives in pieces (a streamed
/// answer, writes to a terminal): a sequence or UTF-8 character split
/// between two pieces is cleaned as if it came whole. `feed` returns what can
/// be printed now and keeps at most @ref max_terminal_sequence bytes of an
/// unfinished sequence; `finish` returns the rest, cleaned as the end of the
/// text. The concatenation of the outputs equals `strip_terminal_controls` of
/// the concatenated pieces.
class terminal_text_filter {
public:
  /// The cleaned text of `piece` (and of what an earlier piece left) that
  /// no later piece can change.
  std::string feed(std::string_view piece) {
    std::string out;
    if (pending_.empty()) {
      auto used = detail::clean_terminal_text(piece, out, false);
      pending_.assign(piece.substr(used));
      return out;
    }
    pending_.append(piece);
    auto used = detail::clean_terminal_text(pending_, out, false);
    pending_.erase(0, used);
    return out;
  }

  /// The cleaned rest, taken as the end of the text; the filter is empty
  /// afterwards.
  std::string finish() {
    std::string out;
    detail::clean_terminal_text(pending_, out, true);
    pending_.clear();
    return out;
  }

  /// The bytes held back, waiting for the rest of a sequence.
  size_t pending() const noexcept {
    return pending_.size();
  }

private:
  std::string pending_;
};

} // namespace quarry::sdk
