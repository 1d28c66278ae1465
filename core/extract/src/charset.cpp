// Charset detection and decoding to UTF-8, and content-type sniffing.

#include "quarry/extract/html.hpp"

#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <array>
#include <cctype>
#include <cstdint>

namespace quarry::extract {

namespace {

using sdk::append_utf8;

constexpr uint32_t replacement = 0xFFFD;

// windows-1252 code points for bytes 0x80..0x9F (undefined ones map to C1).
constexpr std::array<uint16_t, 32> cp1252 = {
  0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
  0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
  0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
  0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

std::string decode_utf16(std::string_view in, bool big_endian) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  auto unit = [&](size_t at) -> uint32_t {
    auto a = static_cast<unsigned char>(in[at]);
    auto b = static_cast<unsigned char>(in[at + 1]);
    return big_endian ? (a << 8 | b) : (b << 8 | a);
  };
  while (i + 1 < in.size()) {
    auto u = unit(i);
    i += 2;
    if (u >= 0xD800 && u <= 0xDBFF) {
      if (i + 1 < in.size()) {
        auto u2 = unit(i);
        if (u2 >= 0xDC00 && u2 <= 0xDFFF) {
          i += 2;
          append_utf8(out, 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00));
          continue;
        }
      }
      append_utf8(out, replacement);
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
      append_utf8(out, replacement);
    } else {
      append_utf8(out, u);
    }
  }
  if (i < in.size())
    append_utf8(out, replacement);
  return out;
}

std::string decode_single_byte(std::string_view in, bool windows) {
  std::string out;
  out.reserve(in.size() + in.size() / 8);
  for (auto ch : in) {
    auto c = static_cast<unsigned char>(ch);
    if (windows && c >= 0x80 && c <= 0x9F)
      append_utf8(out, cp1252[c - 0x80]);
    else
      append_utf8(out, c);
  }
  return out;
}

// Value of `charset=` in a header or attribute text, lower-cased.
std::string charset_param(std::string_view text) {
  auto low = sdk::to_lower(text);
  auto pos = low.find("charset");
  if (pos == std::string::npos)
    return {};
  pos += 7;
  while (pos < low.size() && (low[pos] == ' ' || low[pos] == '\t'))
    ++pos;
  if (pos >= low.size() || low[pos] != '=')
    return {};
  ++pos;
  while (pos < low.size()
         && (low[pos] == ' ' || low[pos] == '"' || low[pos] == '\''))
    ++pos;
  auto end = pos;
  while (end < low.size()
         && (std::isalnum(static_cast<unsigned char>(low[end]))
             || low[end] == '-' || low[end] == '_' || low[end] == ':'
             || low[end] == '.'))
    ++end;
  return low.substr(pos, end - pos);
}

// Charset from <meta charset=...> or <meta http-equiv content="...charset=">.
std::string meta_charset(std::string_view bytes) {
  auto head = sdk::to_lower(bytes.substr(0, 4096));
  size_t pos = 0;
  while ((pos = head.find("<meta", pos)) != std::string::npos) {
    auto end = head.find('>', pos);
    if (end == std::string::npos)
      break;
    auto cs = charset_param(std::string_view{head}.substr(pos, end - pos));
    if (!cs.empty())
      return cs;
    pos = end;
  }
  return {};
}

enum class charset { utf8, utf16le, utf16be, latin1, cp1252, unknown };

charset classify(const std::string& name) {
  if (name.empty())
    return charset::unknown;
  if (name == "utf-8" || name == "utf8" || name == "unicode-1-1-utf-8")
    return charset::utf8;
  if (name == "utf-16le")
    return charset::utf16le;
  if (name == "utf-16be")
    return charset::utf16be;
  if (name == "utf-16")
    return charset::utf16le;
  // Browsers decode iso-8859-1 and us-ascii as windows-1252 (WHATWG).
  if (name == "windows-1252" || name == "cp1252" || name == "x-cp1252")
    return charset::cp1252;
  if (name == "iso-8859-1" || name == "iso8859-1" || name == "latin1"
      || name == "latin-1" || name == "l1" || name == "iso_8859-1"
      || name == "us-ascii" || name == "ascii" || name == "cp819"
      || name == "ibm819")
    return charset::cp1252;
  return charset::unknown;
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

} // namespace

std::string decode_to_utf8(std::string_view bytes,
                           std::string_view content_type_header) {
  if (starts_with(bytes, "\xEF\xBB\xBF"))
    return sdk::repair_utf8(bytes.substr(3));
  if (starts_with(bytes, "\xFF\xFE"))
    return decode_utf16(bytes.substr(2), false);
  if (starts_with(bytes, "\xFE\xFF"))
    return decode_utf16(bytes.substr(2), true);
  auto cs = classify(charset_param(content_type_header));
  if (cs == charset::unknown)
    cs = classify(meta_charset(bytes));
  switch (cs) {
    case charset::utf16le:
      return decode_utf16(bytes, false);
    case charset::utf16be:
      return decode_utf16(bytes, true);
    case charset::latin1:
      return decode_single_byte(bytes, false);
    case charset::cp1252:
      return decode_single_byte(bytes, true);
    default:
      return sdk::repair_utf8(bytes);
  }
}

content_kind sniff(std::string_view content_type,
                   std::string_view first_bytes) {
  // Skip a BOM and leading whitespace for the byte checks.
  auto b = first_bytes;
  if (starts_with(b, "\xEF\xBB\xBF"))
    b.remove_prefix(3);
  if (starts_with(b, "%PDF-"))
    return content_kind::pdf;
  while (!b.empty()
         && std::isspace(static_cast<unsigned char>(b.front())))
    b.remove_prefix(1);
  auto head = sdk::to_lower(b.substr(0, 512));
  if (starts_with(head, "<!doctype html") || starts_with(head, "<html")
      || starts_with(head, "<head") || starts_with(head, "<body")
      || (starts_with(head, "<?xml") && head.find("<html") != std::string::npos)
      || (starts_with(head, "<!--") && head.find("<html") != std::string::npos))
    return content_kind::html;
  auto type = sdk::to_lower(content_type);
  if (auto semi = type.find(';'); semi != std::string::npos)
    type.resize(semi);
  while (!type.empty() && type.back() == ' ')
    type.pop_back();
  while (!type.empty() && type.front() == ' ')
    type.erase(type.begin());
  if (type == "application/pdf")
    return b.empty() ? content_kind::pdf : content_kind::other;
  if (type == "text/html" || type == "application/xhtml+xml")
    return content_kind::html;
  if (type == "application/json" || type == "text/json"
      || (type.size() > 5 && type.compare(type.size() - 5, 5, "+json") == 0))
    return content_kind::json;
  bool looks_json = !head.empty() && (head.front() == '{' || head.front() == '[');
  if (type.empty() || type == "application/octet-stream"
      || type == "text/plain" || type == "binary/octet-stream") {
    if (looks_json)
      return content_kind::json;
    if (starts_with(head, "<") && head.find("<p") != std::string::npos
        && head.find("</") != std::string::npos && type.empty())
      return content_kind::html;
    if (type == "text/plain")
      return content_kind::text;
    // Plain text when the first bytes have no control characters.
    return b.empty() || looks_binary(b) ? content_kind::other
                                        : content_kind::text;
  }
  if (starts_with(type, "text/"))
    return content_kind::text;
  return content_kind::other;
}

bool looks_binary(std::string_view first_bytes) noexcept {
  auto b = first_bytes;
  if (starts_with(b, "\xEF\xBB\xBF"))
    b.remove_prefix(3);
  b = b.substr(0, binary_sniff_bytes);
  size_t controls = 0;
  for (auto c : b) {
    auto u = static_cast<unsigned char>(c);
    if (u == 0)
      return true;
    if (u < 0x20 && u != '\t' && u != '\n' && u != '\v' && u != '\f'
        && u != '\r' && u != 0x1B)
      ++controls;
  }
  return controls > 2 + b.size() / 32;
}

std::string clean_text(std::string_view text) {
  auto repaired = sdk::repair_utf8(text);
  std::string out;
  out.reserve(repaired.size());
  const auto n = repaired.size();
  for (size_t i = 0; i < n; ++i) {
    auto u = static_cast<unsigned char>(repaired[i]);
    if (u == '\r') {
      // CR LF and a lone CR (old Mac line ends) both become LF.
      if (i + 1 < n && repaired[i + 1] == '\n')
        ++i;
      out += '\n';
    } else if (u == 0xC2 && i + 1 < n
               && static_cast<unsigned char>(repaired[i + 1]) <= 0x9F) {
      // A C1 control character (U+0080 to U+009F): terminals act on some
      // of them (U+009B starts an escape sequence).
      ++i;
    } else if ((u < 0x20 && u != '\n' && u != '\t') || u == 0x7F) {
      // A C0 control character or DEL: dropped.
    } else {
      out += static_cast<char>(u);
    }
  }
  return out;
}

} // namespace quarry::extract
