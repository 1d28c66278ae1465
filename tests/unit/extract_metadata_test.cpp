// Tests of the metadata read by the HTML extractor (core/extract): dates,
// page type, JSON-LD references and CDATA, author lists, and a few
// fixture pages with their gold values.

#include "quarry/extract/html.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace extract_metadata_test {

namespace ce = quarry::extract;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fixtures() {
  return fs::path{QUARRY_FIXTURES_DIR} / "html";
}

} // namespace

TEST_CASE("extract_metadata reads published and modified dates") {
  auto x = ce::extract_html(R"(<html><head>
    <meta property="article:published_time" content="2024-05-01T08:00:00Z">
    <meta property="article:modified_time" content="2024-05-02T09:30:00Z">
    </head><body><p>text</p></body></html>)");
  CHECK(x.published == "2024-05-01T08:00:00Z");
  CHECK(x.modified == "2024-05-02T09:30:00Z");

  auto y = ce::extract_html(R"(<html><body><article>
    <time datetime="2023-01-05" pubdate>5 January</time>
    <time class="updated" datetime="2023-02-01">1 February</time>
    <p>text</p></article></body></html>)");
  CHECK(y.published == "2023-01-05");
  CHECK(y.modified == "2023-02-01");

  auto z = ce::extract_html(R"(<html><body>
    <span itemprop="datePublished" content="2022-03-04">4 March</span>
    <p>text</p></body></html>)");
  CHECK(z.published == "2022-03-04");
  CHECK(z.modified.empty());
}

TEST_CASE("extract_metadata follows JSON-LD references and CDATA") {
  auto x = ce::extract_html(R"(<html><head><title>Bridge opens - Town News</title>
    <script type="application/ld+json">//<![CDATA[
    {"@context": "https://schema.org", "@graph": [
      {"@type": "WebSite", "@id": "https://t.example/#site", "name": "Town News"},
      {"@type": "Person", "@id": "https://t.example/#p1", "name": "Ann Lee"},
      {"@type": "NewsArticle", "headline": "Bridge opens",
       "author": {"@id": "https://t.example/#p1"},
       "datePublished": "2021-06-01", "dateModified": "2021-06-02"}]}
    //]]></script></head><body><p>text</p></body></html>)");
  CHECK(x.title == "Bridge opens");
  CHECK(x.byline == "Ann Lee");
  CHECK(x.published == "2021-06-01");
  CHECK(x.modified == "2021-06-02");
  CHECK(x.site_name == "Town News");
  CHECK(x.page_type == "NewsArticle");
}

TEST_CASE("extract_metadata splits author lists") {
  auto by = [](const std::string& author) {
    return ce::extract_html("<html><head><meta name=\"author\" content=\"" + author
                            + "\"></head><body></body></html>")
      .byline;
  };
  CHECK(by("By Ann Lee, Bo Chan and Cy Diaz") == "Ann Lee; Bo Chan; Cy Diaz");
  CHECK(by("Ann Lee & Bo Chan") == "Ann Lee; Bo Chan");
  CHECK(by("Kooman, F.") == "Kooman, F.");
  CHECK(by("Ann Lee, March 3, 2020") == "Ann Lee, March 3, 2020");
}

TEST_CASE("extract_metadata of fixture pages matches their gold values") {
  // readability's expected-metadata.json and go-trafilatura's assertions.
  auto nz = ce::extract_html(slurp(fixtures() / "readability" / "wikipedia-2" / "source.html"));
  CHECK(nz.title == "New Zealand");
  CHECK(nz.byline == "Contributors to Wikimedia projects");
  CHECK(nz.site_name == "Wikimedia Foundation, Inc.");
  CHECK(nz.published == "2001-10-29T01:59:14Z");
  CHECK(nz.lang == "en");

  auto gitlab = ce::extract_html(slurp(fixtures() / "readability" / "gitlab-blog" / "source.html"));
  CHECK(gitlab.site_name == "GitLab");
  CHECK(gitlab.published.rfind("2024-06-25", 0) == 0);

  auto base = fixtures() / "go-trafilatura" / "simple";
  CHECK(ce::extract_html(slurp(base / "json-metadata-2-c.html")).byline == "Deborah O'Donoghue");
  CHECK(ce::extract_html(slurp(base / "json-metadata-2-b.html")).byline
        == "Amir Vera; Seán Federico O'Murchú; Tara Subramaniam; Adam Renton; "
           "CNN");
  auto live = ce::extract_html(slurp(base / "json-metadata-3-c.html"));
  CHECK(live.title == "Example Live Blog");
  CHECK(live.byline == "John Doe");
  CHECK(live.page_type == "LiveBlogPosting");
}

} // namespace extract_metadata_test
