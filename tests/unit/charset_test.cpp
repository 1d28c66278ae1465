// Unit tests of charset decoding (core/extract decode_document): pages in
// Japanese, Chinese, Korean, Russian and European languages, encoded here
// with iconv, found from the HTTP header, <meta charset> and http-equiv, and
// read through extraction and the fetcher's document reader.

#include "quarry/extract/html.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/sdk/text.hpp"

#include <doctest/doctest.h>

#include <iconv.h>

#include <array>
#include <string>

namespace charset_test {

using namespace quarry;

namespace {

// `utf8` in `charset`, converted by iconv (the test fails if it cannot).
std::string encode(const std::string& utf8, const char* charset) {
  auto cd = iconv_open(charset, "UTF-8");
  REQUIRE(cd != reinterpret_cast<iconv_t>(-1));
  std::string out;
  std::array<char, 4096> buf;
  auto* src = const_cast<char*>(utf8.data());
  auto left = utf8.size();
  while (left > 0) {
    auto* dst = buf.data();
    auto room = buf.size();
    auto rc = iconv(cd, &src, &left, &dst, &room);
    out.append(buf.data(), static_cast<size_t>(dst - buf.data()));
    REQUIRE((rc != static_cast<size_t>(-1) || errno == E2BIG));
  }
  auto* dst = buf.data();
  auto room = buf.size();
  iconv(cd, nullptr, nullptr, &dst, &room);
  out.append(buf.data(), static_cast<size_t>(dst - buf.data()));
  iconv_close(cd);
  return out;
}

struct sample {
  // The label a page would use.
  const char* label;
  // The iconv name that produces the bytes.
  const char* encoder;
  // The name decode_document reports.
  const char* name;
  // Real text in the language.
  const char* text;
};

const sample samples[] = {
  {"Shift_JIS", "SHIFT_JIS", "Shift_JIS",
   "日本語の文章です。東京は日本の首都で、人口は約千四百万人です。"},
  {"GBK", "GBK", "GBK", "中文网页的正文。北京是中华人民共和国的首都。"},
  {"gb2312", "GB2312", "GBK", "简体中文：长城是世界上最长的城墙。"},
  {"GB18030", "GB18030", "gb18030", "中文与少数民族文字：𠀀 和 㐀 都在 GB18030 里。"},
  {"EUC-KR", "EUC-KR", "EUC-KR", "한국어 웹 페이지입니다. 서울은 대한민국의 수도입니다."},
  {"windows-1251", "CP1251", "windows-1251",
   "Москва — столица России. Съешь же ещё этих мягких французских булок."},
  {"KOI8-R", "KOI8-R", "KOI8-R", "Широкая электрификация южных губерний даст мощный толчок."},
  {"ISO-8859-2", "ISO-8859-2", "ISO-8859-2", "Zażółć gęślą jaźń. Łódź leży w Polsce."},
  {"ISO-8859-5", "ISO-8859-5", "ISO-8859-5", "Привет, мир! Этот текст в кодировке ISO-8859-5."},
  {"ISO-8859-7", "ISO-8859-7", "ISO-8859-7", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας."},
  {"ISO-8859-15", "ISO-8859-15", "ISO-8859-15", "Le prix est de 20 € : œuvre, Ÿ."},
  {"iso-8859-1", "ISO-8859-1", "windows-1252", "Größe, café, naïve façade; déjà vu."},
  {"EUC-JP", "EUC-JP", "EUC-JP", "これはEUC-JPで書かれた日本語の文章です。"},
  {"Big5", "BIG5", "Big5", "繁體中文：台北是台灣最大的城市。"},
};

std::string page(const std::string& head, const std::string& body) {
  return "<!doctype html><html><head>" + head + "<title>T</title></head><body>"
         + "<article><h1>Heading</h1><p>" + body + "</p><p>" + body
         + "</p></article></body></html>";
}

} // namespace

TEST_CASE("charset pages decode from the HTTP header, <meta charset> and http-equiv") {
  for (const auto& s : samples) {
    std::string label = s.label;
    CAPTURE(label);
    std::string text = s.text;
    auto body = encode(text, s.encoder);
    REQUIRE(body != text);
    // The charset in the Content-Type header.
    auto header = extract::decode_document(encode(page("", text), s.encoder),
                                           std::string{"text/html; charset="} + s.label);
    CHECK(header.charset == s.name);
    CHECK(header.note.empty());
    CHECK(header.text.find(text) != std::string::npos);
    // <meta charset="..."> when the header names none.
    auto meta = extract::decode_document(
      encode(page(std::string{"<meta charset=\""} + s.label + "\">", text), s.encoder),
      "text/html");
    CHECK(meta.charset == s.name);
    CHECK(meta.text.find(text) != std::string::npos);
    // <meta http-equiv="Content-Type" content="text/html; charset=...">.
    auto equiv = extract::decode_document(
      encode(page(std::string{"<META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; charset="}
                    + s.label + "\">",
                  text),
             s.encoder),
      "");
    CHECK(equiv.charset == s.name);
    CHECK(equiv.text.find(text) != std::string::npos);
    CHECK(sdk::is_valid_utf8(equiv.text));
    // Extraction of the decoded page keeps the text.
    auto x = extract::extract_html(meta.text, "https://example.com/");
    CHECK(x.text.find(text) != std::string::npos);
  }
}

TEST_CASE("charset pages are read by the fetcher's document reader") {
  // open_url and `quarry extract` read fetched bytes with read_document.
  std::string text = "日本語の文章です。東京は日本の首都で、人口は約千四百万人です。";
  auto bytes = encode(page("<meta charset=\"shift_jis\">", text), "SHIFT_JIS");
  auto p = fetch::read_document(bytes, "text/html", "https://example.jp/",
                                std::chrono::milliseconds{0});
  CHECK_FALSE(p.failure);
  CHECK(p.text.find(text) != std::string::npos);
  std::string ru = "Москва — столица России, крупнейший город страны и Европы.";
  auto plain = fetch::read_document(encode(ru, "CP1251"), "text/plain; charset=windows-1251",
                                    "https://example.ru/a.txt", std::chrono::milliseconds{0});
  CHECK_FALSE(plain.failure);
  CHECK(plain.text == ru);
}

TEST_CASE("charset invalid sequences become U+FFFD and unknown charsets fall back clearly") {
  const std::string fffd{sdk::utf8_replacement};
  // Shift_JIS: a lead byte followed by a byte that cannot trail it, and a
  // lead byte cut off at the end.
  auto sjis = extract::decode_document("a\x82"
                                       "\x20"
                                       "b\x82",
                                       "text/html; charset=shift_jis");
  CHECK(sjis.text == "a" + fffd + " b" + fffd);
  // GBK: 0xFF is never a byte of GB18030.
  CHECK(extract::decode_to_utf8("x\xFFy", "text/plain; charset=gbk") == "x" + fffd + "y");
  // EUC-KR: an incomplete pair at the end.
  CHECK(extract::decode_to_utf8("\xC7\xD1\xB1", "text/plain; charset=euc-kr")
        == "\xED\x95\x9C" + fffd);
  // UTF-16 from the header: a lone surrogate and an odd byte at the end.
  auto utf16 = extract::decode_to_utf8(std::string("h\0\x00\xDCi\0x", 7),
                                       "text/plain; charset=utf-16le");
  CHECK(utf16 == "h" + fffd + "i" + fffd);
  // Unknown charsets: read as UTF-8 (repaired), and said so.
  auto unknown = extract::decode_document("ok\xC3\xA9\xFF", "text/html; charset=x-klingon");
  CHECK(unknown.text == "ok\xC3\xA9" + fffd);
  CHECK(unknown.charset == "UTF-8");
  CHECK(unknown.note == "unknown charset \"x-klingon\": read as UTF-8");
  auto meta_unknown = extract::decode_document("<meta charset=\"utf-7\">+AGEAYgBj-", "");
  CHECK(meta_unknown.note == "unknown charset \"utf-7\": read as UTF-8");
  CHECK(meta_unknown.text == "<meta charset=\"utf-7\">+AGEAYgBj-");
  // A <meta> tag cannot name UTF-16 (its own bytes are ASCII).
  auto meta16 = extract::decode_document("<meta charset=\"utf-16\"><p>\xC3\xA9</p>", "");
  CHECK(meta16.charset == "UTF-8");
  CHECK(meta16.text == "<meta charset=\"utf-16\"><p>\xC3\xA9</p>");
  // A huge label is cut, so it is unknown, not a long message.
  auto long_label = extract::decode_document("x", "text/plain; charset=" + std::string(5000, 'a'));
  CHECK(long_label.note.size() < 100);
  // Big input in a multi-byte charset: linear, and every byte accounted for.
  std::string big;
  for (int i = 0; i < 20000; ++i)
    big += "\x93\xFA\x96\x7B\xFF"; // 日本 and an invalid byte
  auto decoded = extract::decode_to_utf8(big, "text/plain; charset=shift_jis");
  CHECK(decoded.size() == 20000 * (6 + 3));
}

TEST_CASE("charset every supported encoding has a working converter") {
  // One label of each encoding, and the name decode_document reports.
  const std::pair<const char*, const char*> encodings[] = {
    {"unicode-1-1-utf-8", "UTF-8"},
    {"utf-16", "UTF-16LE"},
    {"unicodefffe", "UTF-16BE"},
    {"us-ascii", "windows-1252"},
    {"cp1250", "windows-1250"},
    {"x-cp1251", "windows-1251"},
    {"windows-1253", "windows-1253"},
    {"latin5", "windows-1254"},
    {"windows-1255", "windows-1255"},
    {"windows-1256", "windows-1256"},
    {"windows-1257", "windows-1257"},
    {"windows-1258", "windows-1258"},
    {"tis-620", "windows-874"},
    {"l2", "ISO-8859-2"},
    {"latin3", "ISO-8859-3"},
    {"latin4", "ISO-8859-4"},
    {"cyrillic", "ISO-8859-5"},
    {"arabic", "ISO-8859-6"},
    {"greek", "ISO-8859-7"},
    {"iso-8859-8-i", "ISO-8859-8"},
    {"latin6", "ISO-8859-10"},
    {"iso-8859-13", "ISO-8859-13"},
    {"iso-8859-14", "ISO-8859-14"},
    {"latin9", "ISO-8859-15"},
    {"iso-8859-16", "ISO-8859-16"},
    {"koi", "KOI8-R"},
    {"koi8-ru", "KOI8-U"},
    {"866", "IBM866"},
    {"mac", "macintosh"},
    {"x-mac-ukrainian", "x-mac-cyrillic"},
    {"windows-31j", "Shift_JIS"},
    {"x-euc-jp", "EUC-JP"},
    {"csiso2022jp", "ISO-2022-JP"},
    {"chinese", "GBK"},
    {"gb18030", "gb18030"},
    {"cn-big5", "Big5"},
    {"korean", "EUC-KR"},
  };
  for (const auto& [label, name] : encodings) {
    std::string l = label;
    CAPTURE(l);
    auto d = extract::decode_document("plain ASCII", std::string{"text/plain; charset="} + label);
    CHECK(d.charset == name);
    CHECK(d.note.empty());
    if (d.charset.rfind("UTF-16", 0) != 0)
      CHECK(d.text == "plain ASCII");
  }
  // Labels are matched whole and case-insensitively.
  CHECK(extract::decode_document("x", "text/plain; charset=KOI8-R").charset == "KOI8-R");
  CHECK(extract::decode_document("x", "text/plain; charset=koi8-").charset == "UTF-8");
  CHECK(extract::decode_document("x", "text/plain; charset=8-r").charset == "UTF-8");
}

} // namespace charset_test
