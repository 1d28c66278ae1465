// Tests of the HTML main-content extractor, charset decoding and sniffing
// (core/extract) against the readability and go-trafilatura pages.

#include "quarry/extract/html.hpp"

#include "support/token_f1.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace content_extract_test {

namespace ce = quarry::extract;
using quarry::test::token_f1;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whitespace folded and lower-cased, for metadata comparisons.
std::string norm(const std::string& s) {
  std::string out;
  bool space = false;
  for (auto ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

fs::path readability_dir() {
  return fs::path{QUARRY_FIXTURES_DIR} / "html" / "readability";
}

std::vector<fs::path> readability_cases() {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator{readability_dir()})
    if (fs::exists(e.path() / "source.html"))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("content_extract keeps the article over all readability pages") {
  auto cases = readability_cases();
  REQUIRE(cases.size() == 130);
  std::vector<double> scores;
  for (auto& dir : cases) {
    auto got = ce::extract_html(slurp(dir / "source.html")).text;
    auto want = ce::html_to_text(slurp(dir / "expected.html"));
    REQUIRE(!want.empty());
    scores.push_back(token_f1(got, want));
  }
  double mean = 0;
  for (auto s : scores)
    mean += s;
  mean /= static_cast<double>(scores.size());
  std::sort(scores.begin(), scores.end());
  auto median = (scores[64] + scores[65]) / 2;
  MESSAGE("readability pages: mean token F1 " << mean << ", median " << median);
  // Measured: mean 0.968, median 1.000.
  CHECK(mean >= 0.95);
  CHECK(median >= 0.99);
}

TEST_CASE("content_extract reads titles and bylines of the readability pages") {
  size_t titles = 0, titles_ok = 0, bylines = 0, bylines_ok = 0;
  for (auto& dir : readability_cases()) {
    auto meta = nlohmann::json::parse(slurp(dir / "expected-metadata.json"));
    auto x = ce::extract_html(slurp(dir / "source.html"));
    if (meta.value("title", nlohmann::json{}).is_string()) {
      ++titles;
      if (norm(x.title) == norm(meta["title"].get<std::string>()))
        ++titles_ok;
    }
    if (meta.value("byline", nlohmann::json{}).is_string()) {
      auto want = norm(meta["byline"].get<std::string>());
      auto got = norm(x.byline);
      ++bylines;
      if (!got.empty()
          && (want.find(got) != std::string::npos || got.find(want) != std::string::npos))
        ++bylines_ok;
    }
  }
  auto title_rate = static_cast<double>(titles_ok) / static_cast<double>(titles);
  auto byline_rate = static_cast<double>(bylines_ok) / static_cast<double>(bylines);
  MESSAGE("titles " << titles_ok << "/" << titles << ", bylines " << bylines_ok << "/" << bylines);
  // Measured: titles 124/130 (0.954), bylines 60/76 (0.789).
  CHECK(title_rate >= 0.92);
  CHECK(byline_rate >= 0.76);
}

TEST_CASE("content_extract reads go-trafilatura JSON-LD metadata") {
  auto base = fs::path{QUARRY_FIXTURES_DIR} / "html" / "go-trafilatura";
  auto expected = nlohmann::json::parse(slurp(base / "simple_json_metadata_expected.json"));
  size_t checks = 0, ok = 0;
  for (auto& file_fields : expected.items()) {
    const auto& file = file_fields.key();
    auto& fields = file_fields.value();
    auto x = ce::extract_html(slurp(base / file));
    auto check = [&](const char* key, const std::string& got) {
      if (!fields.contains(key) || !fields[key].is_string())
        return;
      auto want = fields[key].get<std::string>();
      if (want.empty())
        return;
      ++checks;
      if (norm(got) == norm(want))
        ++ok;
      else
        MESSAGE(file << " " << std::string{key} << ": got '" << got << "' want '" << want << "'");
    };
    check("Title", x.title);
    check("Author", x.byline);
    check("Sitename", x.site_name);
  }
  MESSAGE("go-trafilatura metadata: " << ok << "/" << checks);
  // Measured: 38/43 (0.884) of the non-empty title/author/site name values.
  CHECK(checks == 43);
  CHECK(static_cast<double>(ok) / static_cast<double>(checks) >= 0.85);
}

TEST_CASE("content_extract metadata from JSON-LD, Open Graph and meta tags") {
  auto html = R"(<!doctype html><html lang="de-DE"><head>
    <title>Ignored title | Site</title>
    <meta property="og:title" content="The OG Title">
    <meta property="og:site_name" content="Example News">
    <meta name="description" content="A short summary.">
    <meta property="article:published_time" content="2024-03-01T10:00:00Z">
    <link rel="canonical" href="/articles/42">
    <script type="application/ld+json">
      {"@context": "https://schema.org", "@type": "NewsArticle",
       "headline": "The LD Headline",
       "author": [{"@type": "Person", "name": "Ada Lovelace"},
                  {"@type": "Person", "name": "Charles Babbage"}],
       "datePublished": "2024-02-29"}
    </script></head><body><p>Hi</p></body></html>)";
  auto x = ce::extract_html(html, "https://example.org/news/index.html?x=1");
  CHECK(x.title == "The LD Headline");
  CHECK(x.byline == "Ada Lovelace; Charles Babbage");
  CHECK(x.published == "2024-02-29");
  CHECK(x.site_name == "Example News");
  CHECK(x.lang == "de-DE");
  CHECK(x.canonical_url == "https://example.org/articles/42");
  CHECK(x.excerpt == "A short summary.");
  // Without JSON-LD: Open Graph, then meta tags, then <title>.
  auto y = ce::extract_html(R"(<html><head><title>Plain Title - Site</title>
    <meta name="author" content="Jane Roe">
    <meta property="og:url" content="https://example.com/a"></head>
    <body></body></html>)");
  CHECK(y.title == "Plain Title - Site");
  CHECK(y.byline == "Jane Roe");
  CHECK(y.canonical_url == "https://example.com/a");
  CHECK(y.lang.empty());
  auto z = ce::extract_html("<title>A Much Longer Article Title Here | Some Site</title>");
  CHECK(z.title == "A Much Longer Article Title Here");
}

TEST_CASE("content_extract resolves the canonical link per RFC 3986") {
  auto canonical = [](const std::string& href, const std::string& base) {
    return ce::extract_html("<html><head><link rel=\"canonical\" href=\"" + href
                              + "\"></head><body><p>x</p></body></html>",
                            base)
      .canonical_url;
  };
  const std::string base = "https://example.org/news/2024/index.html?x=1#top";
  CHECK(canonical("../a?b=1", base) == "https://example.org/news/a?b=1");
  CHECK(canonical("?page=2", base) == "https://example.org/news/2024/index.html?page=2");
  CHECK(canonical("#part", base) == "https://example.org/news/2024/index.html?x=1#part");
  CHECK(canonical("//cdn.example.org/x", base) == "https://cdn.example.org/x");
  CHECK(canonical("  /a/./b/../c  ", base) == "https://example.org/a/c");
  CHECK(canonical("HTTP://Other.example", base) == "http://Other.example/");
  // Not URLs: no canonical link rather than a made-up one.
  CHECK(canonical("javascript:alert(1)", base).empty());
  CHECK(canonical("http://", base).empty());
  // Without the page's address only an absolute link is kept.
  CHECK(canonical("/relative", "").empty());
  CHECK(canonical("https://example.com/a", "") == "https://example.com/a");
}

TEST_CASE("content_extract drops navigation, ads, comments and cookie banners") {
  std::string para = "This is a sentence of the article, with a comma, and it "
                     "goes on for a while so that it scores as content. ";
  std::string html = "<html><body>"
                     "<div id=\"cookie-banner\">We use cookies to improve "
                     "your experience, accept them all please now.</div>"
                     "<nav class=\"menu\"><ul><li><a href=\"/\">Home</a></li>"
                     "<li><a href=\"/news\">News</a></li></ul></nav>"
                     "<div class=\"sidebar\"><p>Sidebar text that is long "
                     "enough to be scored, with commas, and more words.</p>"
                     "</div><article class=\"post\"><h1>Headline</h1>"
                     "<h2>Section one</h2><p>"
                     + para + para
                     + "</p><ul><li>first item</li><li>second "
                       "item</li></ul><table><tr><th>Name</th><th>Value</th>"
                       "</tr><tr><td>alpha</td><td>1</td></tr></table><p>"
                     + para + para + para
                     + "</p>"
                       "<pre><code>int main() {\n  return 0;\n}</code></pre><p>"
                     + para
                     + "See <a href=\"/x\">the link text</a> here.</p>"
                       "</article><div class=\"comments\"><p>Great post, "
                       "I loved it, thanks, really a lot of words here.</p>"
                       "</div><div class=\"ad-banner sponsor\">Buy things, "
                       "cheap things, now, today, everything.</div>"
                       "<footer>Copyright 2024 Example Corp, all rights.</footer>"
                       "</body></html>";
  auto x = ce::extract_html(html);
  CHECK(x.text.find("## Section one") != std::string::npos);
  CHECK(x.text.find("- first item\n- second item") != std::string::npos);
  CHECK(x.text.find("| Name | Value |\n| --- | --- |\n| alpha | 1 |") != std::string::npos);
  CHECK(x.text.find("```\nint main() {\n  return 0;\n}\n```") != std::string::npos);
  CHECK(x.text.find("See the link text here.") != std::string::npos);
  CHECK(x.text.find("cookies") == std::string::npos);
  CHECK(x.text.find("Home") == std::string::npos);
  CHECK(x.text.find("Sidebar") == std::string::npos);
  CHECK(x.text.find("loved it") == std::string::npos);
  CHECK(x.comments.find("loved it") != std::string::npos);
  CHECK(x.text.find("cheap things") == std::string::npos);
  CHECK(x.text.find("Copyright") == std::string::npos);
  CHECK(x.title == "Headline");
}

TEST_CASE("content_extract survives degenerate input") {
  CHECK(ce::extract_html("").text.empty());
  CHECK(ce::extract_html("<<<>>></div></p>").title.empty());
  CHECK(ce::extract_html("just text, no tags").text == "just text, no tags");
  std::string deep;
  for (int i = 0; i < 3000; ++i)
    deep += "<div>";
  deep += "deep text";
  CHECK(ce::extract_html(deep).text.find("deep text") != std::string::npos);
}

TEST_CASE("content_extract decodes charsets to UTF-8") {
  // UTF-8 passes through; invalid bytes become U+FFFD.
  CHECK(ce::decode_to_utf8("caf\xC3\xA9", "text/html; charset=utf-8") == "caf\xC3\xA9");
  CHECK(ce::decode_to_utf8("a\xFF"
                           "b\xC3",
                           "")
        == "a\xEF\xBF\xBD"
           "b\xEF\xBF\xBD");
  CHECK(ce::decode_to_utf8("\xED\xA0\x80", "") // an encoded surrogate
        == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(ce::decode_to_utf8("\xC0\xAF", "") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Latin-1 and windows-1252 from the header.
  CHECK(ce::decode_to_utf8("caf\xE9", "text/html; charset=ISO-8859-1") == "caf\xC3\xA9");
  CHECK(ce::decode_to_utf8("\x93quoted\x94 \x80", "text/html;charset=\"windows-1252\"")
        == "\xE2\x80\x9Cquoted\xE2\x80\x9D \xE2\x82\xAC");
  CHECK(ce::decode_to_utf8("caf\xE9", "text/plain; charset=latin1") == "caf\xC3\xA9");
  // From the meta tags when the header has no charset.
  CHECK(ce::decode_to_utf8("<meta charset=\"iso-8859-1\"><p>\xE9</p>", "text/html")
        == "<meta charset=\"iso-8859-1\"><p>\xC3\xA9</p>");
  CHECK(ce::decode_to_utf8("<META HTTP-EQUIV=\"Content-Type\" "
                           "CONTENT=\"text/html; charset=windows-1252\">\x85",
                           "")
          .find("\xE2\x80\xA6")
        != std::string::npos);
  // The header wins over the meta tag; a BOM wins over both.
  CHECK(ce::decode_to_utf8("<meta charset=latin1>\xC3\xA9", "text/html; charset=utf-8")
        == "<meta charset=latin1>\xC3\xA9");
  CHECK(ce::decode_to_utf8("\xEF\xBB\xBFx\xC3\xA9", "text/html; charset=latin1") == "x\xC3\xA9");
  // UTF-16 with BOM, both byte orders, including a surrogate pair.
  CHECK(ce::decode_to_utf8(std::string("\xFF\xFEh\0\xE9\0", 6), "") == "h\xC3\xA9");
  CHECK(ce::decode_to_utf8(std::string("\xFE\xFF\0h\0\xE9", 6), "") == "h\xC3\xA9");
  CHECK(ce::decode_to_utf8(std::string("\xFF\xFE\x3D\xD8\x00\xDE", 6), "") == "\xF0\x9F\x98\x80");
  // UTF-16 from the header without a BOM.
  CHECK(ce::decode_to_utf8(std::string("h\0i\0", 4), "text/plain; charset=utf-16le") == "hi");
  // Unknown charsets fall back to (repaired) UTF-8.
  CHECK(ce::decode_to_utf8("ok\xC3\xA9", "text/html; charset=x-unknown") == "ok\xC3\xA9");
}

TEST_CASE("content_extract sniffs content kinds") {
  using ce::content_kind;
  CHECK(ce::sniff("application/pdf", "%PDF-1.7\n") == content_kind::pdf);
  CHECK(ce::sniff("text/html", "%PDF-1.4 binary") == content_kind::pdf);
  CHECK(ce::sniff("application/octet-stream", "%PDF-1.4") == content_kind::pdf);
  CHECK(ce::sniff("", "  <!DOCTYPE html><html>") == content_kind::html);
  CHECK(ce::sniff("text/plain", "<html><body>x") == content_kind::html);
  CHECK(ce::sniff("application/json", "<!doctype html>") == content_kind::html);
  CHECK(ce::sniff("text/html; charset=utf-8", "hello") == content_kind::html);
  CHECK(ce::sniff("application/json", "{\"a\":1}") == content_kind::json);
  CHECK(ce::sniff("application/ld+json", "[1]") == content_kind::json);
  CHECK(ce::sniff("", "  {\"a\": 1}") == content_kind::json);
  CHECK(ce::sniff("text/plain", "[1, 2]") == content_kind::json);
  CHECK(ce::sniff("text/plain; charset=utf-8", "hello") == content_kind::text);
  CHECK(ce::sniff("text/markdown", "# Title") == content_kind::text);
  CHECK(ce::sniff("", "plain words") == content_kind::text);
  CHECK(ce::sniff("image/png", "\x89PNG\r\n") == content_kind::other);
  CHECK(ce::sniff("", std::string("\x89PNG\0\0", 6)) == content_kind::other);
  CHECK(ce::sniff("application/pdf", "GIF89a") == content_kind::other);
}

} // namespace content_extract_test
