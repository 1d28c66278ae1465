// Text helpers of the research store.

#include "text.hpp"

#include <openssl/evp.h>

#include <charconv>
#include <vector>

namespace quarry::store::detail {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

// Decodes the UTF-8 character at `s[i]`: its code point (or -1 for a byte
// that does not start a valid character) and its length (at least 1).
std::pair<int32_t, size_t> decode_utf8(std::string_view s, size_t i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80)
    return {b0, 1};
  size_t n = 0;
  int32_t cp = 0;
  int32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return {-1, 1};
  }
  if (i + n > s.size())
    return {-1, 1};
  for (size_t k = 1; k < n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80)
      return {-1, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return {-1, 1};
  return {cp, n};
}

// Whether the character is part of a word for the search: ASCII letters and
// digits, and characters beyond ASCII except the punctuation, symbols and
// spaces of the common blocks (which SQLite's unicode61 tokenizer separates
// words with too; a "word" of those alone would match nothing).
bool word_char(int32_t cp) {
  if (cp < 0)
    return false;
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp <= 0xBF) // C1 controls, Latin-1 punctuation; a few letters, digits
    return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 || cp == 0xBA
           || (cp >= 0xBC && cp <= 0xBE);
  if (cp == 0xD7 || cp == 0xF7)
    return false;
  struct range {
    int32_t first;
    int32_t last;
  };
  static constexpr range separators[] = {
    {0x2000, 0x206F}, // general punctuation, spaces, joiners
    {0x20A0, 0x20CF}, // currency
    {0x2190, 0x2BFF}, // arrows, mathematical and technical symbols, boxes
    {0x2E00, 0x2E7F}, // supplemental punctuation
    {0x3000, 0x3003}, // ideographic space and punctuation
    {0x3008, 0x301F}, // CJK brackets
    {0xFE00, 0xFE0F}, // variation selectors
    {0xFE30, 0xFE6F}, // CJK compatibility and small forms
    {0xFF01, 0xFF0F}, // full-width punctuation
    {0xFF1A, 0xFF20},   {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}, {0xFFF0, 0xFFFF}, // specials
    {0x1F000, 0x1FAFF},                                                       // emoji, pictographs
    {0xE0000, 0xE007F},                                                       // tags
  };
  for (const auto& r : separators)
    if (cp >= r.first && cp <= r.last)
      return false;
  return true;
}

} // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1 || len != 32)
    return {};
  std::string out;
  out.reserve(64);
  for (unsigned i = 0; i < len; ++i) {
    out += hex_digits[md[i] >> 4];
    out += hex_digits[md[i] & 0x0F];
  }
  return out;
}

bool is_sha256_hex(std::string_view x) {
  if (x.size() != 64)
    return false;
  for (auto c : x)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

std::string fts_query(std::string_view search, size_t max_words) {
  // Words longer than this are cut (at a character boundary).
  constexpr size_t max_word_bytes = 128;
  std::string out;
  size_t words = 0;
  std::string word;
  auto flush = [&] {
    if (word.empty())
      return;
    if (!out.empty())
      out += ' ';
    out += '"';
    out += word; // holds letters and digits only: nothing to escape
    out += "\"*";
    word.clear();
    ++words;
  };
  for (size_t i = 0; i < search.size() && words < max_words;) {
    auto [cp, n] = decode_utf8(search, i);
    if (word_char(cp)) {
      if (word.size() + n <= max_word_bytes)
        word.append(search.substr(i, n));
    } else {
      flush();
    }
    i += n;
  }
  if (words < max_words)
    flush();
  return out;
}

std::string encode_cursor(const cursor& c) {
  return "c" + std::to_string(c.created_at) + "." + c.id;
}

std::optional<cursor> decode_cursor(std::string_view text) {
  if (text.size() < 3 || text.size() > 64 || text[0] != 'c')
    return std::nullopt;
  auto dot = text.find('.');
  if (dot == std::string_view::npos || dot < 2)
    return std::nullopt;
  cursor out;
  const char* first = text.data() + 1;
  const char* last = text.data() + dot;
  auto [end, ec] = std::from_chars(first, last, out.created_at);
  if (ec != std::errc{} || end != last)
    return std::nullopt;
  out.id = std::string{text.substr(dot + 1)};
  return out;
}

} // namespace quarry::store::detail
