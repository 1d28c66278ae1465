// A JSON validator that reads each byte once (json_check.hpp).

#include "quarry/core/json_check.hpp"

#include "quarry/sdk/text.hpp"

#include <locale.h>

#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace quarry::core {

namespace {

// Whether a JSON number (valid syntax) is a finite double, read in the C
// locale whatever the process's locale is.
bool finite_double(std::string_view number) {
  static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", locale_t{});
  std::string text{number};
  if (c_locale == locale_t{})
    return std::isfinite(std::strtod(text.c_str(), nullptr));
  return std::isfinite(::strtod_l(text.c_str(), nullptr, c_locale));
}

} // namespace

bool is_json(std::string_view t, size_t max_depth) {
  size_t i = t.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  const size_t n = t.size();
  std::vector<char> open;
  auto space = [&] {
    while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
      ++i;
  };
  auto digits = [&] {
    auto from = i;
    while (i < n && t[i] >= '0' && t[i] <= '9')
      ++i;
    return i > from;
  };
  auto hex4 = [&](uint32_t& cp) {
    if (n - i < 4)
      return false;
    cp = 0;
    for (int k = 0; k < 4; ++k, ++i) {
      char c = t[i];
      uint32_t v = 0;
      if (c >= '0' && c <= '9')
        v = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v = static_cast<uint32_t>(c - 'A' + 10);
      else
        return false;
      cp = cp * 16 + v;
    }
    return true;
  };
  auto string = [&] {
    ++i;
    while (i < n) {
      // Runs of printable ASCII other than quote and backslash, and valid
      // UTF-8: most of it.
      i = sdk::json_verbatim_end(t, i);
      if (i >= n)
        return false;
      auto c = static_cast<unsigned char>(t[i]);
      if (c == '"') {
        ++i;
        return true;
      }
      if (c < 0x20 || c >= 0x80) // a control character or invalid UTF-8
        return false;
      ++i;
      if (c != '\\')
        continue;
      if (i >= n)
        return false;
      char e = t[i++];
      if (e == 'u') {
        uint32_t cp = 0;
        if (!hex4(cp) || (cp >= 0xDC00 && cp <= 0xDFFF))
          return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low = 0;
          if (n - i < 2 || t[i] != '\\' || t[i + 1] != 'u')
            return false;
          i += 2;
          if (!hex4(low) || low < 0xDC00 || low > 0xDFFF)
            return false;
        }
      } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r'
                 && e != 't') {
        return false;
      }
    }
    return false;
  };
  enum class next { value, key, after };
  auto state = next::value;
  space();
  while (true) {
    if (state == next::key) {
      if (i >= n || t[i] != '"' || !string())
        return false;
      space();
      if (i >= n || t[i] != ':')
        return false;
      ++i;
      space();
      state = next::value;
      continue;
    }
    if (state == next::value) {
      if (i >= n)
        return false;
      char c = t[i];
      if (c == '{' || c == '[') {
        if (open.size() >= max_depth)
          return false;
        open.push_back(c);
        ++i;
        space();
        if (i < n && t[i] == (c == '{' ? '}' : ']')) {
          open.pop_back();
          ++i;
          state = next::after;
        } else {
          state = c == '{' ? next::key : next::value;
        }
        continue;
      }
      if (c == '"') {
        if (!string())
          return false;
      } else if (c == 't' || c == 'f' || c == 'n') {
        std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
        if (t.compare(i, word.size(), word) != 0)
          return false;
        i += word.size();
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        auto begin = i;
        if (c == '-')
          ++i;
        if (i < n && t[i] == '0')
          ++i;
        else if (!digits())
          return false;
        // The parser reads a fraction, an exponent or an integer beyond 64
        // bits as a double, and refuses one that overflows.
        bool as_double = i - begin > 19;
        if (i < n && t[i] == '.') {
          ++i;
          as_double = true;
          if (!digits())
            return false;
        }
        if (i < n && (t[i] == 'e' || t[i] == 'E')) {
          ++i;
          as_double = true;
          if (i < n && (t[i] == '+' || t[i] == '-'))
            ++i;
          if (!digits())
            return false;
        }
        if (as_double && !finite_double(t.substr(begin, i - begin)))
          return false;
      } else {
        return false;
      }
      state = next::after;
      continue;
    }
    // After a value: the end, a comma, or the close of its container.
    space();
    // The parser takes a NUL byte where a token may begin as the end of
    // its input (for C strings): what follows the value's NUL is not read.
    if (open.empty())
      return i == n || t[i] == '\0';
    if (i >= n)
      return false;
    if (t[i] == ',') {
      ++i;
      space();
      state = open.back() == '{' ? next::key : next::value;
    } else if (t[i] == (open.back() == '{' ? '}' : ']')) {
      open.pop_back();
      ++i;
    } else {
      return false;
    }
  }
}

} // namespace quarry::core
