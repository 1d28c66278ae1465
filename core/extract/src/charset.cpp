// Charset detection and decoding to UTF-8 (through glibc's iconv), and
// content-type sniffing.

#include "quarry/extract/html.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <iconv.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <optional>

namespace quarry::extract {

using sdk::starts_with;

namespace {

// Longest charset label looked at.
constexpr size_t max_label = 40;

// How far into a document <meta charset> is looked for.
constexpr size_t meta_scan_bytes = 4096;

// An encoding of the WHATWG Encoding Standard: its name, the glibc iconv
// converter that decodes it (for the legacy CJK encodings the superset
// browsers use: windows-31j for Shift_JIS, GB18030 for GBK and GB2312,
// windows-949 for EUC-KR) and its labels (lower case, space-separated).
struct encoding {
  std::string_view name;
  const char* iconv;
  std::string_view labels;
};

constexpr encoding encodings[] = {
  {"UTF-8", "UTF-8", "utf-8 utf8 unicode-1-1-utf-8 unicode11utf8 unicode20utf8 x-unicode20utf8"},
  {"UTF-16LE", "UTF-16LE", "utf-16 utf-16le"},
  {"UTF-16BE", "UTF-16BE", "utf-16be unicodefffe"},
  // Browsers decode ISO-8859-1 and US-ASCII as windows-1252.
  {"windows-1252", "CP1252",
   "windows-1252 cp1252 x-cp1252 iso-8859-1 iso8859-1 iso88591 iso_8859-1 "
   "iso_8859-1:1987 iso-ir-100 latin1 latin-1 l1 csisolatin1 us-ascii ascii "
   "ansi_x3.4-1968 cp819 ibm819"},
  {"windows-1250", "CP1250", "windows-1250 cp1250 x-cp1250"},
  {"windows-1251", "CP1251", "windows-1251 cp1251 x-cp1251"},
  {"windows-1253", "CP1253", "windows-1253 cp1253 x-cp1253"},
  {"windows-1254", "CP1254",
   "windows-1254 cp1254 x-cp1254 iso-8859-9 iso8859-9 iso_8859-9 latin5 l5"},
  {"windows-1255", "CP1255", "windows-1255 cp1255 x-cp1255"},
  {"windows-1256", "CP1256", "windows-1256 cp1256 x-cp1256"},
  {"windows-1257", "CP1257", "windows-1257 cp1257 x-cp1257"},
  {"windows-1258", "CP1258", "windows-1258 cp1258 x-cp1258"},
  {"windows-874", "CP874", "windows-874 dos-874 tis-620 iso-8859-11"},
  {"ISO-8859-2", "ISO-8859-2", "iso-8859-2 iso8859-2 iso_8859-2 latin2 l2"},
  {"ISO-8859-3", "ISO-8859-3", "iso-8859-3 iso8859-3 iso_8859-3 latin3 l3"},
  {"ISO-8859-4", "ISO-8859-4", "iso-8859-4 iso8859-4 iso_8859-4 latin4 l4"},
  {"ISO-8859-5", "ISO-8859-5", "iso-8859-5 iso8859-5 iso_8859-5 cyrillic"},
  {"ISO-8859-6", "ISO-8859-6", "iso-8859-6 iso8859-6 iso_8859-6 arabic"},
  {"ISO-8859-7", "ISO-8859-7", "iso-8859-7 iso8859-7 iso_8859-7 greek"},
  {"ISO-8859-8", "ISO-8859-8", "iso-8859-8 iso8859-8 iso_8859-8 iso-8859-8-i hebrew"},
  {"ISO-8859-10", "ISO-8859-10", "iso-8859-10 iso8859-10 latin6 l6"},
  {"ISO-8859-13", "ISO-8859-13", "iso-8859-13 iso8859-13"},
  {"ISO-8859-14", "ISO-8859-14", "iso-8859-14 iso8859-14"},
  {"ISO-8859-15", "ISO-8859-15", "iso-8859-15 iso8859-15 iso_8859-15 latin9 l9"},
  {"ISO-8859-16", "ISO-8859-16", "iso-8859-16"},
  {"KOI8-R", "KOI8-R", "koi8-r koi8_r koi8 koi cskoi8r"},
  {"KOI8-U", "KOI8-U", "koi8-u koi8-ru"},
  {"IBM866", "CP866", "ibm866 cp866 866 csibm866"},
  {"macintosh", "MACINTOSH", "macintosh mac x-mac-roman csmacintosh"},
  {"x-mac-cyrillic", "MAC-CYRILLIC", "x-mac-cyrillic x-mac-ukrainian"},
  {"Shift_JIS", "CP932", "shift_jis shift-jis sjis x-sjis ms_kanji ms932 windows-31j csshiftjis"},
  {"EUC-JP", "EUC-JP", "euc-jp x-euc-jp cseucpkdfmtjapanese"},
  {"ISO-2022-JP", "ISO-2022-JP", "iso-2022-jp csiso2022jp"},
  {"GBK", "GB18030",
   "gbk x-gbk gb2312 gb_2312 gb_2312-80 csgb2312 chinese iso-ir-58 "
   "csiso58gb231280"},
  {"gb18030", "GB18030", "gb18030"},
  {"Big5", "BIG5-HKSCS", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"},
  {"EUC-KR", "CP949",
   "euc-kr cseuckr ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 "
   "windows-949 korean csksc56011987 iso-ir-149"},
};

const encoding* find_label(std::string_view label) noexcept {
  if (label.empty())
    return nullptr;
  for (const auto& x : encodings) {
    for (size_t pos = 0; pos < x.labels.size();) {
      auto end = std::min(x.labels.find(' ', pos), x.labels.size());
      if (x.labels.substr(pos, end - pos) == label)
        return &x;
      pos = end + 1;
    }
  }
  return nullptr;
}

// Converts `in` from `from` to UTF-8 with iconv. A sequence iconv cannot
// convert becomes U+FFFD and decoding resumes `unit` bytes later (2 for
// UTF-16, 1 otherwise); a sequence cut off at the end becomes one U+FFFD.
// Linear in the input. Nothing when the converter is missing.
std::optional<std::string> convert(std::string_view in, const char* from, size_t unit) {
  auto cd = iconv_open("UTF-8", from);
  if (cd == reinterpret_cast<iconv_t>(-1))
    return std::nullopt;
  std::string out;
  out.reserve(in.size() + in.size() / 2);
  std::array<char, 16384> buf;
  auto* src = const_cast<char*>(in.data());
  auto left = in.size();
  auto drain = [&](char** input, size_t* input_left) {
    auto* dst = buf.data();
    auto room = buf.size();
    auto rc = iconv(cd, input, input_left, &dst, &room);
    auto err = rc == static_cast<size_t>(-1) ? errno : 0;
    out.append(buf.data(), static_cast<size_t>(dst - buf.data()));
    return err;
  };
  while (left > 0) {
    auto err = drain(&src, &left);
    if (err == 0 || err == E2BIG)
      continue;
    out.append(sdk::utf8_replacement.data(), sdk::utf8_replacement.size());
    auto skip = err == EILSEQ ? std::min(unit, left) : left;
    src += skip;
    left -= skip;
    iconv(cd, nullptr, nullptr, nullptr, nullptr);
  }
  // The final shift sequence of stateful encodings (ISO-2022-JP).
  drain(nullptr, nullptr);
  iconv_close(cd);
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
  while (pos < low.size() && (low[pos] == ' ' || low[pos] == '"' || low[pos] == '\''))
    ++pos;
  auto end = pos;
  while (end < low.size() && end - pos < max_label
         && (std::isalnum(static_cast<unsigned char>(low[end])) || low[end] == '-'
             || low[end] == '_' || low[end] == ':' || low[end] == '.'))
    ++end;
  return low.substr(pos, end - pos);
}

// Charset from <meta charset=...> or <meta http-equiv content="...charset=">.
std::string meta_charset(std::string_view bytes) {
  auto head = sdk::to_lower(bytes.substr(0, meta_scan_bytes));
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

decoded_text as_utf8(std::string_view bytes, std::string note = {}) {
  return {sdk::repair_utf8(bytes), "UTF-8", std::move(note), false};
}

// Whether `bytes` are UTF-8, allowing one sequence cut short at the very end
// (a body cut at its size limit).
bool looks_utf8(std::string_view bytes) noexcept {
  auto bad = sdk::first_invalid_utf8(bytes);
  if (bad == bytes.size())
    return true;
  auto lead = static_cast<unsigned char>(bytes[bad]);
  size_t need = lead >= 0xF0 && lead <= 0xF4   ? 4
                : lead >= 0xE0 && lead <= 0xEF ? 3
                : lead >= 0xC2 && lead <= 0xDF ? 2
                                               : 0;
  if (need == 0 || bytes.size() - bad >= need)
    return false;
  for (auto i = bad + 1; i < bytes.size(); ++i)
    if ((static_cast<unsigned char>(bytes[i]) & 0xC0) != 0x80)
      return false;
  return true;
}

// The share of junk among the code points of valid UTF-8 `text`: U+FFFD,
// C0 controls other than tab, line feed, form feed and carriage return,
// DEL, and C1 controls (U+0080-U+009F).
double junk_share(std::string_view text) noexcept {
  size_t chars = 0;
  size_t junk = 0;
  for (size_t i = 0; i < text.size();) {
    auto c = sdk::decode_utf8(text, i);
    i += c.length > 0 ? c.length : 1;
    ++chars;
    auto cp = c.code_point;
    if (cp == 0xFFFD || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\f' && cp != '\r')
        || (cp >= 0x7F && cp <= 0x9F))
      ++junk;
  }
  return chars == 0 ? 0.0 : static_cast<double>(junk) / static_cast<double>(chars);
}

// `bytes` decoded in `enc`, if it fits them (at most max_guess_junk junk),
// with a note naming the guess and `why`.
std::optional<decoded_text> try_guess(std::string_view bytes, const encoding* enc,
                                      std::string_view why) {
  if (enc == nullptr || enc->name == "UTF-8")
    return std::nullopt; // UTF-8 was tried first
  auto unit = sdk::starts_with(enc->name, "UTF-16") ? size_t{2} : size_t{1};
  auto text = convert(bytes, enc->iconv, unit);
  if (!text || junk_share(*text) > max_guess_junk)
    return std::nullopt;
  return decoded_text{std::move(*text), std::string{enc->name},
                      "encoding guessed: " + std::string{enc->name} + " (" + std::string{why} + ")",
                      true};
}

// Longest detector answer looked at.
constexpr size_t max_detected_label = 64;

// Decodes bytes that no BOM, header or <meta> labels and that are not UTF-8:
// the detector's guess, else windows-1252 (the browsers' fallback), else
// UTF-8 with U+FFFD.
decoded_text decode_unlabelled(std::string_view bytes, const charset_detector& detect) {
  auto said = detect(bytes);
  if (said.size() > max_detected_label)
    said.clear();
  if (auto x = try_guess(bytes, find_label(sdk::to_lower(sdk::trim(said))), "no charset label"))
    return std::move(*x);
  if (auto x = try_guess(bytes, find_label("windows-1252"),
                         said.empty() ? "no charset label; detection was unsure, read "
                                        "as browsers do"
                                      : "no charset label; the detected encoding did not "
                                        "fit, read as browsers do"))
    return std::move(*x);
  return as_utf8(bytes, "no charset label, and no encoding fits the bytes: "
                        "read as UTF-8");
}

} // namespace

decoded_text decode_document(std::string_view bytes, std::string_view content_type_header,
                             const charset_detector& detect) {
  if (sdk::starts_with(bytes, "\xEF\xBB\xBF"))
    return as_utf8(bytes.substr(3));
  std::string label;
  const encoding* found = nullptr;
  if (sdk::starts_with(bytes, "\xFF\xFE")) {
    bytes.remove_prefix(2);
    found = find_label("utf-16le");
  } else if (sdk::starts_with(bytes, "\xFE\xFF")) {
    bytes.remove_prefix(2);
    found = find_label("utf-16be");
  } else {
    label = charset_param(content_type_header);
    found = find_label(label);
    if (found == nullptr) {
      auto from_meta = meta_charset(bytes);
      if (auto* meta = find_label(from_meta); meta != nullptr || label.empty()) {
        found = meta;
        if (label.empty())
          label = std::move(from_meta);
      }
      // A <meta> tag cannot name UTF-16: the bytes it is in are ASCII.
      if (found != nullptr && sdk::starts_with(found->name, "UTF-16"))
        found = find_label("utf-8");
    }
  }
  if (found == nullptr && label.empty() && detect && !looks_utf8(bytes))
    return decode_unlabelled(bytes, detect);
  if (found == nullptr)
    return as_utf8(bytes, label.empty() ? std::string{}
                                        : "unknown charset \"" + label + "\": read as UTF-8");
  if (found->name == "UTF-8")
    return as_utf8(bytes);
  auto unit = sdk::starts_with(found->name, "UTF-16") ? size_t{2} : size_t{1};
  auto text = convert(bytes, found->iconv, unit);
  if (!text)
    return as_utf8(bytes,
                   "charset " + std::string{found->name} + " is not available: read as UTF-8");
  return {std::move(*text), std::string{found->name}, {}, false};
}

std::string decode_to_utf8(std::string_view bytes, std::string_view content_type_header) {
  return decode_document(bytes, content_type_header).text;
}

content_kind sniff(std::string_view content_type, std::string_view first_bytes) {
  // Skip a BOM and leading whitespace for the byte checks.
  auto b = first_bytes;
  if (starts_with(b, "\xEF\xBB\xBF"))
    b.remove_prefix(3);
  if (starts_with(b, "%PDF-"))
    return content_kind::pdf;
  while (!b.empty() && std::isspace(static_cast<unsigned char>(b.front())))
    b.remove_prefix(1);
  auto head = sdk::to_lower(b.substr(0, 512));
  if (starts_with(head, "<!doctype html") || starts_with(head, "<html")
      || starts_with(head, "<head") || starts_with(head, "<body")
      || (starts_with(head, "<?xml") && head.find("<html") != std::string::npos)
      || (starts_with(head, "<!--") && head.find("<html") != std::string::npos))
    return content_kind::html;
  auto type = sdk::to_lower(sdk::trim(content_type.substr(0, content_type.find(';'))));
  if (type == "application/pdf")
    return b.empty() ? content_kind::pdf : content_kind::other;
  if (type == "text/html" || type == "application/xhtml+xml")
    return content_kind::html;
  if (type == "application/json" || type == "text/json"
      || (type.size() > 5 && type.compare(type.size() - 5, 5, "+json") == 0))
    return content_kind::json;
  bool looks_json = !head.empty() && (head.front() == '{' || head.front() == '[');
  if (type.empty() || type == "application/octet-stream" || type == "text/plain"
      || type == "binary/octet-stream") {
    if (looks_json)
      return content_kind::json;
    if (starts_with(head, "<") && head.find("<p") != std::string::npos
        && head.find("</") != std::string::npos && type.empty())
      return content_kind::html;
    if (type == "text/plain")
      return content_kind::text;
    // Plain text when the first bytes have no control characters.
    return b.empty() || looks_binary(b) ? content_kind::other : content_kind::text;
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
    if (u < 0x20 && u != '\t' && u != '\n' && u != '\v' && u != '\f' && u != '\r' && u != 0x1B)
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
    } else if (u == 0xC2 && i + 1 < n && static_cast<unsigned char>(repaired[i + 1]) <= 0x9F) {
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
