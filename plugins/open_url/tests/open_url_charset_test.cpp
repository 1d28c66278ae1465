// Pages that name no charset, read by open_url over HTTP: the field case
// `undeclared-gbk-page` (../shared/field-cases), Shift-JIS and windows-1251
// pages written here with iconv, the windows-1252 fallback, and pages that
// still decode to replacement characters, which are read failures. Also the
// decoder's rules with detectors that are unsure or wrong.

#include "quarry/extract/charset_detect.hpp"
#include "open_url_tool.hpp"

#include "quarry/extract/html.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/text.hpp"

#include "support/http_server.hpp"
#include "support/process.hpp"
#include "support/run_tool.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <iconv.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <map>
#include <random>
#include <string>

namespace open_url_charset_test {

using namespace quarry;
using namespace quarry::plugins::open_url;
using quarry::extract::detect_charset;
using quarry::extract::make_charset_detector;
using quarry::extract::max_detect_bytes;
using nlohmann::json;
using test::response_plan;
using test::run_tool;

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
  iconv_close(cd);
  return out;
}

// The field case's page: GBK bytes, no label anywhere.
std::string gbk_field_page() {
  return test::read_file(std::string{QUARRY_FIXTURES_DIR}
                         + "/../field-cases/undeclared-gbk-page/page.html");
}

// A page of `paragraphs` under `title`, without any charset label.
std::string page_html(const std::string& title, const std::vector<std::string>& paragraphs) {
  std::string html = "<!DOCTYPE html><html><head><title>" + title
                     + "</title></head><body><nav>menu</nav><article><h1>" + title + "</h1>";
  for (const auto& p : paragraphs)
    html += "<p>" + p + "</p>\n";
  return html + "</article><footer>footer</footer></body></html>";
}

std::unique_ptr<open_url_tool> make_tool(test::test_host& host) {
  return std::make_unique<open_url_tool>(host, parse_config({{"allow", {"127.0.0.1"}}}, ""));
}

json results_of(const sdk::tool_result& r) {
  auto parsed = json::parse(r.llm_text, nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

bool has_replacement(const std::string& text) {
  return text.find(sdk::utf8_replacement) != std::string::npos;
}

// `n` bytes from a fixed seed, each from `lo` to 255.
std::string random_bytes(size_t n, int lo, uint32_t seed) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> byte{lo, 255};
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += static_cast<char>(byte(rng));
  return out;
}

} // namespace

TEST_CASE("open_url field case: an undeclared GBK page is read as Chinese, "
          "with a note naming the guess") {
  auto bytes = gbk_field_page();
  REQUIRE_FALSE(sdk::is_valid_utf8(bytes));
  REQUIRE(bytes.find("charset") == std::string::npos);
  test::http_server server;
  server.route("GET", "/heat-pumps",
               [&](const test::request&) { return response_plan::text(200, bytes, "text/html"); });
  // The plugin as research loads it: from disk.
  test::temp_dir tmp;
  core::settings cfg;
  cfg.runtime.data_dir = tmp.file("data");
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  REQUIRE_FALSE(
    registry.load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_open_url.so").has_value());
  auto made = registry.make_tool("open_url", {{"allow", {"127.0.0.1"}}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  auto r = run_tool(*tool, {{"urls", {server.url("/heat-pumps")}}});
  REQUIRE_FALSE(r.failure);
  auto doc = results_of(r)["results"][0];
  CHECK(doc["title"] == "空气源热泵的低温性能");
  CHECK(doc["note"] == "encoding guessed: gb18030 (no charset label)");
  auto content = doc["content"].get<std::string>();
  CAPTURE(content);
  CHECK(content.find("空气源热泵在室外温度降到零下十五度时，制热效率会明显下降")
        != std::string::npos);
  CHECK(content.find("选型时应按照当地最冷月的设计温度校核制热量") != std::string::npos);
  CHECK_FALSE(has_replacement(r.llm_text));
  // The document keeps the note with the text.
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].title == "空气源热泵的低温性能");
  CHECK(r.documents[0].content.rfind("[encoding guessed: gb18030 (no charset label)]\n\n", 0) == 0);
  CHECK(r.documents[0].content.find("除霜也是影响冬季效率的重要因素") != std::string::npos);
  CHECK_FALSE(has_replacement(r.documents[0].content));
  services.shutdown();
}

TEST_CASE("open_url: the GBK page under a wrong UTF-8 label is a read failure, "
          "never a page of replacement characters") {
  auto bytes = gbk_field_page();
  test::http_server server;
  server.route("GET", "/mislabelled", [&](const test::request&) {
    return response_plan::text(200, bytes, "text/html; charset=utf-8");
  });
  server.route("GET", "/good", [](const test::request&) {
    return response_plan::text(200,
                               page_html("Heat pumps",
                                         {"Air source heat pumps lose capacity in deep "
                                          "cold, so northern units carry backup heaters."}),
                               "text/html; charset=utf-8");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto r = run_tool(*tool, {{"urls", {server.url("/mislabelled")}}});
  REQUIRE(r.failure);
  CHECK(r.failure->code == sdk::errc::invalid_response);
  CHECK(r.documents.empty());
  CAPTURE(r.llm_text);
  CHECK(r.llm_text.find("Failed to fetch content from URLs " + server.url("/mislabelled")) == 0);
  CHECK(r.llm_text.find("the page decodes to unreadable text") != std::string::npos);
  CHECK(r.llm_text.find("replacement characters (U+FFFD), read as UTF-8") != std::string::npos);
  CHECK_FALSE(has_replacement(r.llm_text));
  // Beside a good page, it is listed as failed and the good one is read.
  auto mixed = run_tool(*tool, {{"urls", {server.url("/mislabelled"), server.url("/good")}}});
  REQUIRE_FALSE(mixed.failure);
  auto j = results_of(mixed);
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["title"] == "Heat pumps");
  CHECK_FALSE(j["results"][0].contains("note"));
  CHECK(j["failed"][0]["url"] == server.url("/mislabelled"));
  CHECK(mixed.documents.size() == 1);
}

TEST_CASE("open_url guesses Shift-JIS and windows-1251 pages without labels") {
  struct page_case {
    const char* encoder;
    const char* note;
    std::string title;
    std::vector<std::string> paragraphs;
  };
  const std::vector<page_case> cases{
    {"SHIFT_JIS",
     "encoding guessed: Shift_JIS (no charset label)",
     "東京の天気予報",
     {"明日の東京は晴れのち曇り、最高気温は二十五度の予想です。",
      "夕方からは所により雨が降るでしょう。お出かけの際は傘をお持ちください。",
      "週末は高気圧に覆われて、全国的に穏やかな天気が続く見込みです。"}},
    {"CP1251",
     "encoding guessed: windows-1251 (no charset label)",
     "Погода в Москве",
     {"Завтра в Москве ожидается облачная погода, температура воздуха днём "
      "составит около пятнадцати градусов.",
      "Вечером возможен небольшой дождь, ветер северо-западный, умеренный.",
      "В выходные синоптики обещают сухую и тёплую погоду по всей области."}},
  };
  test::http_server server;
  std::map<std::string, std::string> bodies;
  for (const auto& c : cases)
    bodies[std::string{"/"} + c.encoder] = encode(page_html(c.title, c.paragraphs), c.encoder);
  for (const auto& [path, body] : bodies) {
    REQUIRE_FALSE(sdk::is_valid_utf8(body));
    server.route("GET", path, [body = body](const test::request&) {
      return response_plan::text(200, body, "text/html");
    });
  }
  test::test_host host;
  auto tool = make_tool(host);
  for (const auto& c : cases) {
    CAPTURE(c.encoder);
    auto r = run_tool(*tool, {{"urls", {server.url(std::string{"/"} + c.encoder)}}});
    REQUIRE_FALSE(r.failure);
    auto doc = results_of(r)["results"][0];
    CHECK(doc["title"] == c.title);
    CHECK(doc["note"] == c.note);
    auto content = doc["content"].get<std::string>();
    for (const auto& p : c.paragraphs)
      CHECK(content.find(p) != std::string::npos);
    CHECK_FALSE(has_replacement(content));
    REQUIRE(r.documents.size() == 1);
    CHECK(r.documents[0].content.rfind(std::string{"["} + c.note + "]", 0) == 0);
  }
}

TEST_CASE("open_url reads an unlabelled Latin page as windows-1252 and a UTF-8 "
          "page without a note") {
  auto latin = encode(page_html("Caf\xC3\xA9 cr\xC3\xA8me",
                                {"Un caf\xC3\xA9 cr\xC3\xA8me co\xC3\xBBte deux euros "
                                 "\xE2\x80\x94 \xC2\xAB d\xC3\xA9j\xC3\xA0 vu \xC2\xBB, "
                                 "dit le gar\xC3\xA7on du caf\xC3\xA9 de la gare."}),
                      "CP1252");
  auto utf8 = page_html("\xE6\x97\xA5\xE6\x9C\xAC", // 日本
                        {"This page is UTF-8 and says so nowhere; it reads "
                         "as UTF-8 all the same: \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E."});
  test::http_server server;
  server.route("GET", "/latin",
               [&](const test::request&) { return response_plan::text(200, latin, "text/html"); });
  server.route("GET", "/utf8",
               [&](const test::request&) { return response_plan::text(200, utf8, "text/html"); });
  test::test_host host;
  auto tool = make_tool(host);
  auto r = run_tool(*tool, {{"urls", {server.url("/latin")}}});
  REQUIRE_FALSE(r.failure);
  auto doc = results_of(r)["results"][0];
  CHECK(doc["title"] == "Caf\xC3\xA9 cr\xC3\xA8me");
  CHECK(doc["note"] == "encoding guessed: windows-1252 (no charset label)");
  CHECK(doc["content"].get<std::string>().find("\xE2\x80\x94 \xC2\xAB d\xC3\xA9j\xC3\xA0 vu")
        != std::string::npos);
  auto plain = run_tool(*tool, {{"urls", {server.url("/utf8")}}});
  REQUIRE_FALSE(plain.failure);
  auto udoc = results_of(plain)["results"][0];
  CHECK_FALSE(udoc.contains("note"));
  CHECK(udoc["content"].get<std::string>().find("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E.")
        != std::string::npos);
  CHECK(plain.documents[0].content.rfind("[", 0) != 0);
}

TEST_CASE("open_url: random bytes are a read failure, labelled or not") {
  test::http_server server;
  // High bytes only, labelled UTF-8: nearly every byte is U+FFFD.
  auto high = random_bytes(4096, 0x80, 7);
  // Any bytes, no label: no encoding fits them (windows-1252 gives control
  // characters and undefined bytes), read as UTF-8 they are half U+FFFD.
  auto any = "<html><body><p>" + random_bytes(4096, 0, 11) + "</p></body></html>";
  server.route("GET", "/high", [&](const test::request&) {
    return response_plan::text(200, high, "text/html; charset=utf-8");
  });
  server.route("GET", "/any",
               [&](const test::request&) { return response_plan::text(200, any, "text/html"); });
  test::test_host host;
  auto tool = make_tool(host);
  for (auto path : {"/high", "/any"}) {
    CAPTURE(path);
    auto r = run_tool(*tool, {{"urls", {server.url(path)}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::invalid_response);
    CHECK(r.documents.empty());
    CAPTURE(r.llm_text);
    CHECK(r.llm_text.find("the page decodes to unreadable text") != std::string::npos);
    CHECK_FALSE(has_replacement(r.llm_text));
  }
  auto any_r = run_tool(*tool, {{"urls", {server.url("/any")}}});
  CHECK(any_r.llm_text.find("no encoding fits the bytes") != std::string::npos);
}

TEST_CASE("uchardet names the encodings of unlabelled pages") {
  CHECK(detect_charset(gbk_field_page()) == "gb18030");
  CHECK(detect_charset(encode(page_html("Погода", {"Завтра в Москве ожидается "
                                                   "облачная погода."}),
                              "CP1251"))
        == "windows-1251");
  CHECK(detect_charset("") == "");
  // Bounded: a huge page costs no more than its first max_detect_bytes.
  std::string huge = gbk_field_page();
  while (huge.size() < 4 * max_detect_bytes)
    huge += huge;
  CHECK(detect_charset(huge) == "gb18030");
}

TEST_CASE("decoder: a guess is taken only when it fits, windows-1252 is the "
          "fallback, and labels win over detection") {
  std::atomic<int> calls{0};
  auto says = [&calls](std::string label) {
    return [&calls, label](std::string_view) {
      ++calls;
      return label;
    };
  };
  auto latin = std::string{"Caf\xE9 cr\xE8me \xE0 la gare, d\xE9j\xE0 vu."};
  // Unsure: windows-1252, and the note says detection was unsure.
  auto unsure = extract::decode_document(latin, "text/html", says(""));
  CHECK(unsure.charset == "windows-1252");
  CHECK(unsure.guessed);
  CHECK(unsure.text == "Caf\xC3\xA9 cr\xC3\xA8me \xC3\xA0 la gare, d\xC3\xA9j\xC3\xA0 vu.");
  CHECK(unsure.note
        == "encoding guessed: windows-1252 (no charset label; detection was "
           "unsure, read as browsers do)");
  // A guess that does not fit the bytes (ISO-2022-JP is 7-bit) or that the
  // decoder does not know: the fallback, saying so.
  for (std::string wrong : {"ISO-2022-JP", "x-no-such-charset"}) {
    CAPTURE(wrong);
    auto d = extract::decode_document(latin, "text/html", says(wrong));
    CHECK(d.charset == "windows-1252");
    CHECK(d.note.find("encoding guessed: windows-1252 (no charset label; the "
                      "detected encoding did not fit")
          == 0);
  }
  // An answer too long to be a name is no answer.
  CHECK(extract::decode_document(latin, "", says(std::string(500, 'a'))).note == unsure.note);
  // Nothing fits: UTF-8 with U+FFFD, and the note says so.
  auto noise = random_bytes(2048, 0, 3);
  auto none = extract::decode_document(noise, "", says("windows-1252"));
  CHECK(none.charset == "UTF-8");
  CHECK_FALSE(none.guessed);
  CHECK(none.note == "no charset label, and no encoding fits the bytes: read as UTF-8");
  // Labels, BOMs and UTF-8 never ask the detector.
  calls = 0;
  CHECK(extract::decode_document(latin, "text/html; charset=iso-8859-1", says("gbk")).charset
        == "windows-1252");
  CHECK(extract::decode_document("<meta charset=koi8-r>" + latin, "", says("gbk")).charset
        == "KOI8-R");
  CHECK(extract::decode_document("\xEF\xBB\xBFok", "", says("gbk")).charset == "UTF-8");
  auto utf8 = extract::decode_document("d\xC3\xA9j\xC3\xA0", "", says("gbk"));
  CHECK(utf8.charset == "UTF-8");
  CHECK(utf8.note.empty());
  // A body cut inside its last UTF-8 character is still UTF-8.
  CHECK(extract::decode_document("d\xC3\xA9j\xC3", "", says("gbk")).charset == "UTF-8");
  CHECK(calls == 0);
  // An unknown label is read as UTF-8, as before, without guessing.
  auto unknown = extract::decode_document(latin, "text/html; charset=x-foo", says("gbk"));
  CHECK(unknown.charset == "UTF-8");
  CHECK(unknown.note == "unknown charset \"x-foo\": read as UTF-8");
  CHECK(calls == 0);
  // Without a detector, unlabelled bytes are UTF-8 as they always were.
  CHECK(extract::decode_document(latin, "").charset == "UTF-8");
}

TEST_CASE("reader: a quarter of U+FFFD is the line between a page and a read "
          "failure") {
  CHECK(fetch::replacement_share("") == 0);
  CHECK(fetch::replacement_share("  \n\t ") == 0);
  CHECK(fetch::replacement_share("ab\xEF\xBF\xBD\xEF\xBF\xBD") == doctest::Approx(0.5));
  CHECK(fetch::replacement_share("a b c \xEF\xBF\xBD") == doctest::Approx(0.25));
  // Text with n replacement characters in every 10: readable at 2, not at 3
  // (the title, the file name, counts too).
  auto text_with = [](int bad) {
    std::string out;
    for (int i = 0; i < 20; ++i)
      for (int k = 0; k < 10; ++k)
        out += k < bad ? std::string{sdk::utf8_replacement} : std::string{"x"};
    return out + " plain words at the end of the document";
  };
  auto two = fetch::read_document(text_with(2), "text/plain; charset=utf-8",
                                  "https://example.org/a.txt", {});
  CHECK_FALSE(two.failure);
  auto three = fetch::read_document(text_with(3), "text/plain; charset=utf-8",
                                    "https://example.org/b.txt", {});
  REQUIRE(three.failure);
  CHECK(three.failure->code == sdk::errc::invalid_response);
  CHECK(three.text.empty());
  auto four = fetch::read_document(text_with(4), "text/plain; charset=utf-8",
                                   "https://example.org/c.txt", {});
  REQUIRE(four.failure);
  // 80 of 236 characters.
  CHECK(four.reason
        == "the page decodes to unreadable text: 34% of its characters are "
           "replacement characters (U+FFFD), read as UTF-8; its encoding is "
           "wrong or it is not text");
  CHECK(four.failure->message == four.reason);
}

} // namespace open_url_charset_test
