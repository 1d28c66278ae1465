// This file is part of the Quarry plugin SDK.
// Bounded parsing and safe serialisation of JSON that comes from outside
// (HTTP bodies, model output, tool arguments, files). Deeply nested input
// would overflow the stack when a value is copied, serialised or destroyed,
// so its depth is checked before nlohmann::json builds anything; invalid
// UTF-8 is repaired (U+FFFD) instead of failing the parse or, later, the
// serialisation.

#pragma once

#include "quarry/sdk/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::sdk {

/// The deepest nesting of arrays and objects accepted by default. Real API
/// responses and tool arguments stay far below it.
inline constexpr size_t default_max_json_depth = 256;

/// Limits for @ref parse_json.
struct json_limits {
  /// Deepest nesting of arrays and objects accepted.
  size_t max_depth = default_max_json_depth;
  /// Whether invalid UTF-8 is replaced by U+FFFD before parsing (otherwise
  /// it is a parse error).
  bool repair_utf8 = true;
};

/// Returns the deepest nesting of arrays and objects in JSON text, counting
/// brackets outside strings only (the text need not be valid JSON). Stops
/// early and returns `stop_above + 1` once that depth is exceeded. Linear,
/// no allocation.
inline size_t json_nesting_depth(std::string_view text, size_t stop_above = SIZE_MAX - 1) noexcept {
  size_t depth = 0;
  size_t deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_above)
            return deepest;
        }
        break;
      case ']':
      case '}':
        if (depth > 0)
          --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

/// Returns whether the value `j` nests arrays and objects deeper than
/// `max_depth` (a scalar has depth 0). Iterative.
inline bool json_deeper_than(const nlohmann::json& j, size_t max_depth) {
  std::vector<std::pair<const nlohmann::json*, size_t>> stack{{&j, 0}};
  while (!stack.empty()) {
    auto [x, depth] = stack.back();
    stack.pop_back();
    if (!x->is_structured())
      continue;
    if (depth + 1 > max_depth)
      return true;
    for (const auto& child : *x)
      stack.emplace_back(&child, depth + 1);
  }
  return false;
}

/// Parses JSON text from outside. Nesting deeper than `limits.max_depth`
/// is rejected before anything is built; invalid UTF-8 is repaired unless
/// `limits.repair_utf8` is false. On failure, returns a discarded value
/// (`is_discarded()`) and stores a one-line reason in `*error` if given,
/// e.g. `JSON nested deeper than 256 levels` or `syntax error at line 1,
/// column 5: ...`.
inline nlohmann::json parse_json(std::string_view text, std::string* error = nullptr,
                                 const json_limits& limits = {}) {
  auto fail = [&](std::string why) {
    if (error != nullptr)
      *error = std::move(why);
    return nlohmann::json(nlohmann::json::value_t::discarded);
  };
  if (json_nesting_depth(text, limits.max_depth) > limits.max_depth)
    return fail("JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
  std::string repaired;
  if (limits.repair_utf8 && !is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, ...": keep the
    // part after the tag, valid UTF-8 and of a sane length.
    std::string_view what{e.what()};
    if (auto end = what.find("] "); what.substr(0, 1) == "[" && end != what.npos)
      what.remove_prefix(end + 2);
    return fail(repair_utf8(utf8_prefix(what, 300)));
  }
}

inline void append_json_string(std::string& out, std::string_view text);

namespace detail {

// `x` appended as dump_json(x) writes it (see there).
inline void append_json_value(std::string& out, const nlohmann::json& x) {
  using value_t = nlohmann::json::value_t;
  switch (x.type()) {
    case value_t::null:
      out += "null";
      return;
    case value_t::boolean:
      out += x.get<bool>() ? "true" : "false";
      return;
    case value_t::number_integer:
      out += std::to_string(x.get<nlohmann::json::number_integer_t>());
      return;
    case value_t::number_unsigned:
      out += std::to_string(x.get<nlohmann::json::number_unsigned_t>());
      return;
    case value_t::string:
      append_json_string(out, x.get_ref<const std::string&>());
      return;
    case value_t::array: {
      const auto& items = x.get_ref<const nlohmann::json::array_t&>();
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0)
          out += ',';
        append_json_value(out, items[i]);
      }
      out += ']';
      return;
    }
    case value_t::object: {
      const auto& members = x.get_ref<const nlohmann::json::object_t&>();
      out += '{';
      bool first = true;
      for (const auto& member : members) {
        if (!first)
          out += ',';
        first = false;
        append_json_string(out, member.first);
        out += ':';
        append_json_value(out, member.second);
      }
      out += '}';
      return;
    }
    default:
      // Floating-point numbers (nlohmann's shortest form), binary values.
      out += x.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
  }
}

// `x` appended as nlohmann's dump(step) writes it when `x` starts `current`
// spaces in: an array's items and an object's members one per line, `step`
// spaces deeper than their brackets, `"key": value`, empty ones as `[]` and
// `{}`; scalars as in the compact form. False (with `out` partly written)
// at a binary value, which nlohmann spreads over lines of its own.
inline bool append_json_indented(std::string& out, const nlohmann::json& x, size_t step,
                                 size_t current) {
  using value_t = nlohmann::json::value_t;
  switch (x.type()) {
    case value_t::array: {
      const auto& items = x.get_ref<const nlohmann::json::array_t&>();
      if (items.empty()) {
        out += "[]";
        return true;
      }
      out += "[\n";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0)
          out += ",\n";
        out.append(current + step, ' ');
        if (!append_json_indented(out, items[i], step, current + step))
          return false;
      }
      out += '\n';
      out.append(current, ' ');
      out += ']';
      return true;
    }
    case value_t::object: {
      const auto& members = x.get_ref<const nlohmann::json::object_t&>();
      if (members.empty()) {
        out += "{}";
        return true;
      }
      out += "{\n";
      bool first = true;
      for (const auto& member : members) {
        if (!first)
          out += ",\n";
        first = false;
        out.append(current + step, ' ');
        append_json_string(out, member.first);
        out += ": ";
        if (!append_json_indented(out, member.second, step, current + step))
          return false;
      }
      out += '\n';
      out.append(current, ' ');
      out += '}';
      return true;
    }
    case value_t::binary:
      return false;
    default:
      append_json_value(out, x);
      return true;
  }
}

} // namespace detail

/// Serialises `j` (`indent` as nlohmann::json::dump); invalid UTF-8 inside
/// strings becomes U+FFFD instead of throwing `type_error.316`. Written byte
/// for byte as nlohmann writes it (keys in the object's order, `\b \t \n \f
/// \r \" \\` and `\u00xx` in lower case for other control characters, UTF-8
/// as it is; with `indent` >= 0 one item or member per line, indented by
/// `indent` spaces a level) without its serializer's byte-by-byte UTF-8
/// decoding: a string of valid UTF-8 is checked once and copied in runs
/// between the bytes that need escapes; strings of invalid UTF-8,
/// floating-point numbers and binary values are written by nlohmann.
inline std::string dump_json(const nlohmann::json& j, int indent = -1) {
  std::string out;
  if (indent < 0) {
    detail::append_json_value(out, j);
    return out;
  }
  if (!detail::append_json_indented(out, j, static_cast<size_t>(indent), 0))
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

/// Appends `j` to `out` as `dump_json(j)` writes it (the compact form), for
/// writers that put a value inside a larger text without a tree around it.
inline void append_json(std::string& out, const nlohmann::json& j) {
  detail::append_json_value(out, j);
}

// Appends `text` to `out` as a JSON string literal, quotes included, byte
// for byte as dump_json writes a string: `"` `\\` and the control
// characters escaped (`\b \f \n \r \t`, the others as `\u00xx` in
// lower-case hex), everything else as it is (no ASCII-only escaping);
// invalid UTF-8 becomes U+FFFD as dump_json makes it. For writers
// that build a request body as text instead of as a tree. Linear: one
// pass over valid UTF-8 (checked on the way), runs that need no escape
// copied whole; `out` grows once for most text, a few times for text that
// is mostly escapes.
inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  const size_t n = text.size();
  // Most strings (keys, names, most values) need no escape: checked first,
  // they are appended as they are, without sizing `out` for escapes.
  size_t i = json_verbatim_end(text, 0);
  if (i == n) {
    // A short one goes in one append (each is a call into the library).
    if (char quoted[64]; n + 2 <= sizeof quoted) {
      quoted[0] = '"';
      if (n != 0) // an empty view's data() may be null
        std::memcpy(quoted + 1, text.data(), n);
      quoted[n + 1] = '"';
      out.append(quoted, n + 2);
    } else {
      out += '"';
      out += text;
      out += '"';
    }
    return;
  }
  // From the first byte to escape (or invalid UTF-8) on; what comes before
  // it is copied with the first run.
  const size_t base = out.size();
  // Written in place: `out` holds room for the rest as if it needed no
  // escape, plus some; each escape checks that room (it takes up to 6
  // bytes for 1) and grows it with a margin. Trimmed at the end. The
  // margin stays inside the capacity the caller reserved while the text
  // fits there: a string grown past its capacity doubles it, and a writer
  // that sized its buffer for the whole text (a request body held while
  // its call runs) would keep twice the memory it needs.
  size_t at = base;
  auto room = [&](size_t need) {
    if (out.size() - at >= need)
      return;
    auto want = at + need + need / 2 + 64;
    if (at + need <= out.capacity())
      want = std::min(want, out.capacity());
    out.resize(want);
  };
  room(n + 2);
  out[at++] = '"';
  size_t plain = 0;
  for (;;) {
    i = json_verbatim_end(text, i);
    if (i == n)
      break;
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // Invalid UTF-8: nlohmann's replacement, exactly.
      out.resize(base);
      out += nlohmann::json(std::string{text})
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
    char two = 0;
    switch (c) {
      case '"':
        two = '"';
        break;
      case '\\':
        two = '\\';
        break;
      case '\b':
        two = 'b';
        break;
      case '\f':
        two = 'f';
        break;
      case '\n':
        two = 'n';
        break;
      case '\r':
        two = 'r';
        break;
      case '\t':
        two = 't';
        break;
      default:
        break;
    }
    // The run before it, the escape (2 or 6 bytes), and the rest with its
    // closing quote: never more than the escaped text will take.
    room(i - plain + (two != 0 ? 2 : 6) + (n - i - 1) + 1);
    std::memcpy(&out[at], text.data() + plain, i - plain);
    at += i - plain;
    out[at++] = '\\';
    if (two != 0) {
      out[at++] = two;
    } else {
      out[at++] = 'u';
      out[at++] = '0';
      out[at++] = '0';
      out[at++] = hex[c >> 4];
      out[at++] = hex[c & 0xf];
    }
    plain = ++i;
  }
  room(n - plain + 1);
  std::memcpy(&out[at], text.data() + plain, n - plain);
  at += n - plain;
  out[at++] = '"';
  out.resize(at);
}

} // namespace quarry::sdk
