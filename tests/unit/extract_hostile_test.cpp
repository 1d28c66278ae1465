// Hostile pages for the HTML extractor: 100k and 400k nested elements, the
// nesting limiter's handling of real markup, and deadlines and cancellation.

#include "quarry/extract/html.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <variant>

namespace extract_hostile_test {

namespace ce = quarry::extract;
namespace sdk = quarry::sdk;

namespace {

std::string nested_page(size_t depth, const std::string& tag = "div", bool closed = false) {
  std::string html = "<!DOCTYPE html><html><head><title>Deep page</title></head><body>";
  html.reserve(depth * (tag.size() * 2 + 5) + 200);
  for (size_t i = 0; i < depth; ++i)
    html += "<" + tag + ">";
  html += "The innermost paragraph says that heat pumps move heat, and it is "
          "long enough to count as the article of this page.";
  if (closed)
    for (size_t i = 0; i < depth; ++i)
      html += "</" + tag + ">";
  html += "</body></html>";
  return html;
}

// Depth of the deepest element gumbo would build from `html`, as seen by the
// limiter: the limiter leaves the page alone iff it is within the limit.
bool limited(const std::string& html, size_t max_depth) {
  return ce::limit_html_nesting(html, max_depth).has_value();
}

} // namespace

TEST_CASE("extraction of 100k and 400k nested elements finishes and keeps the text") {
  for (size_t depth : {size_t{100000}, size_t{400000}}) {
    for (bool closed : {false, true}) {
      CAPTURE(depth);
      CAPTURE(closed);
      auto page = nested_page(depth, "div", closed);
      auto x = ce::extract_html(page);
      CHECK(x.title == "Deep page");
      CHECK(x.text.find("heat pumps move heat") != std::string::npos);
      CHECK(ce::html_to_text(page).find("heat pumps move heat") != std::string::npos);
    }
  }
  // Inline and formatting elements too.
  for (std::string tag : {"span", "b", "a", "table", "svg"}) {
    CAPTURE(tag);
    auto x = ce::extract_html(nested_page(100000, tag));
    CHECK(x.title == "Deep page");
  }
}

TEST_CASE("extraction of 100k nested boxes named as boilerplate around the entry "
          "finishes and keeps the entry") {
  // Each box is looked into because it holds the entry: the search for the
  // entry must not make the walk quadratic in the page's depth.
  std::string html = "<!DOCTYPE html><html><head><title>Deep page</title></head><body>";
  for (size_t i = 0; i < 100000; ++i)
    html += "<div class=\"widget\">";
  html += "<div class=\"post-body entry-content\">The innermost paragraph says that heat "
          "pumps move heat, and it is long enough to count as the article of this page."
          "</div>";
  html += "</body></html>";
  auto x = ce::extract_html(html);
  CHECK(x.title == "Deep page");
  CHECK(x.text.find("heat pumps move heat") != std::string::npos);
}

TEST_CASE("the nesting limiter drops only tags beyond the limit") {
  // Within the limit: untouched.
  CHECK_FALSE(limited(nested_page(200), 256));
  CHECK_FALSE(limited(nested_page(256), 256));
  CHECK(limited(nested_page(257), 256));
  // Deeper tags become spaces; text and shallow markup stay.
  auto out = ce::limit_html_nesting("<div><div><div>a</div>b</div>c</div>d", 2);
  REQUIRE(out.has_value());
  CHECK(*out == "<div><div> a b</div>c</div>d");
  // Elements that close themselves or have no content never add depth.
  std::string flat = "<ul>";
  for (int i = 0; i < 5000; ++i)
    flat += "<li><p>item<br><img src=x><a href=#>link";
  flat += "</ul>";
  CHECK_FALSE(limited(flat, 16));
  // Closed elements, end tags that close several elements, comments and
  // raw text.
  std::string siblings;
  for (int i = 0; i < 5000; ++i)
    siblings += "<div><span><b>x</div><!-- <div><div><div> -->"
                "<script>if (a<b) document.write('<div><div><div>')</script>"
                "<p title=\"<div><div>\">y";
  CHECK_FALSE(limited(siblings, 8));
  // Self-closing tags count as closed only inside SVG and MathML.
  std::string svg = "<svg>";
  for (int i = 0; i < 1000; ++i)
    svg += "<path d=\"M0 0\"/>";
  svg += "</svg>";
  CHECK_FALSE(limited(svg, 8));
  std::string fake_self_closing;
  for (int i = 0; i < 1000; ++i)
    fake_self_closing += "<div/>";
  CHECK(limited(fake_self_closing, 8));
  // Repeated <a> start tags close each other, as in the parser.
  std::string anchors;
  for (int i = 0; i < 1000; ++i)
    anchors += "<a name=x" + std::to_string(i) + ">text ";
  CHECK_FALSE(limited(anchors, 8));
}

TEST_CASE("scripts and style sheets are emptied before parsing, as the parser reads them") {
  // A script that writes a script: `<!--` then `<script>` makes the first
  // `</script>` end the inner one only, so "leak" is still script text.
  auto escaped = ce::html_to_text(
    "<p>one</p><script><!--<script></script><p>leak</p></script>--></script>"
    "<p>two</p>");
  CHECK(escaped.find("one") != std::string::npos);
  CHECK(escaped.find("two") != std::string::npos);
  CHECK(escaped.find("leak") == std::string::npos);
  // `<!-->` closes at once: the first `</script>` ends the script.
  auto closed = ce::html_to_text("<script><!--></script><p>seen</p>");
  CHECK(closed.find("seen") != std::string::npos);
  // An end tag in any case, with attributes; text after an unclosed script
  // stays script text.
  auto upper = ce::html_to_text(
    "<SCRIPT>var a = '<p>x</p>';</SCRIPT foo=\"a>b\"><p>shown</p><script>"
    "<p>hidden</p>");
  CHECK(upper.find("shown") != std::string::npos);
  CHECK(upper.find("hidden") == std::string::npos);
  // In SVG a <style> is markup, not text: what follows is read as before.
  auto svg = ce::html_to_text(
    "<svg><style>.a{}</style><script>x</svg><p>after svg</p></script></svg>"
    "<style>p{}</style><p>end</p>");
  CHECK(svg.find("end") != std::string::npos);
  CHECK(svg.find("after svg") != std::string::npos);
  // JSON-LD keeps its text (the metadata is read from it).
  auto x = ce::extract_html("<html><head><script type=\"application/ld+json\">{\"@type\": "
                            "\"NewsArticle\", \"headline\": \"A headline from JSON-LD\"}</script>"
                            "<script>var x = '</scr' + 'ipt>';</script><style>h1{}</style></head>"
                            "<body><p>Body text of the page.</p></body></html>");
  CHECK(x.title == "A headline from JSON-LD");
  CHECK(x.page_type == "NewsArticle");
}

TEST_CASE(
  "attributes that extraction does not read are dropped before parsing, as the parser reads them") {
  // Quoted values with `>` and quotes inside, unquoted values, a value
  // ending in `/`, and attributes that stay (hidden, style, aria-hidden).
  auto text = ce::html_to_text(
    "<p data-a='x > y' title=\"c > d\" onclick=go()>shown</p>"
    "<p data-b=x/ id=k>second</p>"
    "<p data-c=1 hidden>gone1</p><p data-d=2 style=\"display: none\">gone2</p>"
    "<p aria-hidden=true data-e=3>gone3</p><svg viewBox=\"0 0 1 1\"><title>"
    "icon</title></svg><p>last</p>");
  CHECK(text.find("shown") != std::string::npos);
  CHECK(text.find("second") != std::string::npos);
  CHECK(text.find("last") != std::string::npos);
  CHECK(text.find("> y") == std::string::npos);
  CHECK(text.find("> d") == std::string::npos);
  CHECK(text.find("gone") == std::string::npos);
}

TEST_CASE("extraction honours a deadline and a cancel check") {
  auto page = nested_page(1000, "div", true);
  SUBCASE("an expired deadline gives a timeout error") {
    ce::extract_options opts;
    opts.deadline = std::chrono::steady_clock::now() - std::chrono::seconds{1};
    auto r = ce::try_extract_html(page, "https://example.com/", opts);
    auto* err = std::get_if<sdk::error>(&r);
    REQUIRE(err != nullptr);
    CHECK(err->code == sdk::errc::timeout);
    CHECK(err->message.find("took too long") != std::string::npos);
  }
  SUBCASE("a cancel check that says stop") {
    ce::extract_options opts;
    int polls = 0;
    opts.cancelled = [&polls] { return ++polls > 1; };
    auto r = ce::try_extract_html(nested_page(100000), "", opts);
    auto* err = std::get_if<sdk::error>(&r);
    REQUIRE(err != nullptr);
    CHECK(err->code == sdk::errc::cancelled);
    CHECK(polls >= 2);
  }
  SUBCASE("a distant deadline changes nothing") {
    ce::extract_options opts;
    opts.deadline = std::chrono::steady_clock::now() + std::chrono::hours{1};
    auto r = ce::try_extract_html(page, "", opts);
    auto* x = std::get_if<ce::extraction>(&r);
    REQUIRE(x != nullptr);
    CHECK(x->text == ce::extract_html(page).text);
  }
}

} // namespace extract_hostile_test
