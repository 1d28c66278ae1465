// Tests of the Markdown rendering of the HTML extractor (core/extract):
// tables, lists and code blocks.

#include "quarry/extract/html.hpp"

#include <doctest/doctest.h>

#include <string>

namespace extract_markdown_test {

namespace ce = quarry::extract;

namespace {

// A page whose article is `inner` between two paragraphs long enough to be
// the main content.
std::string page(const std::string& inner) {
  std::string para = "<p>This paragraph belongs to the article, with a comma, "
                     "and it goes on for a while so that it scores as the "
                     "content of the page, which it is.</p>";
  return "<html><body><article>" + para + para + inner + para + "</article></body></html>";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("extract_markdown renders a data table as a Markdown table") {
  auto x = ce::extract_html(
    page("<table><caption>Boiling points</caption>"
         "<thead><tr><th>Liquid</th><th>Point</th><th>Note</th></tr></thead>"
         "<tbody><tr><td>Water</td><td>100 °C</td><td>at sea level</td></tr>"
         "<tr><td>Ethanol</td><td>78 °C</td><td>a | b</td></tr>"
         "<tr><td colspan=\"2\">Mercury</td><td>357 °C</td></tr>"
         "<tr><td>Lone</td></tr></tbody></table>"));
  CHECK(has(x.text, "Boiling points\n\n| Liquid | Point | Note |\n"
                    "| --- | --- | --- |\n"
                    "| Water | 100 °C | at sea level |\n"
                    "| Ethanol | 78 °C | a \\| b |\n"
                    "| Mercury | | 357 °C |\n"
                    "| Lone | | |\n"));
}

TEST_CASE("extract_markdown keeps links inside data table cells") {
  std::string rows;
  for (int i = 0; i < 6; ++i)
    rows += "<tr><td><a href=\"/c" + std::to_string(i) + "\">City " + std::to_string(i)
            + "</a></td><td>" + std::to_string(1000 * i) + "</td></tr>";
  auto x = ce::extract_html(
    page("<table><tr><th>City</th><th>People</th></tr>" + rows + "</table>"));
  CHECK(has(x.text, "| City | People |\n| --- | --- |\n| City 0 | 0 |\n"));
  CHECK(has(x.text, "| City 5 | 5000 |"));
}

TEST_CASE("extract_markdown renders a layout table as blocks") {
  auto html = ce::html_to_text("<html><body><table><tr><td><table><tr><td>inner</td></tr></table>"
                               "<p>First paragraph.</p><p>Second paragraph.</p></td></tr></table>"
                               "</body></html>");
  CHECK_FALSE(has(html, "|"));
  CHECK(has(html, "First paragraph.\n\nSecond paragraph."));
}

TEST_CASE("extract_markdown renders nested and ordered lists") {
  auto x = ce::extract_html(page("<ul><li>one</li><li>two<ol><li>first</li>"
                                 "<li>second</li></ol></li><li>three</li>"
                                 "</ul>"));
  CHECK(has(x.text, "- one\n- two\n  1. first\n  2. second\n- three"));
}

TEST_CASE("extract_markdown keeps code blocks verbatim in fences") {
  auto x = ce::extract_html(page("<pre><code class=\"language-python\">def f(x):\n"
                                 "    if x:\n"
                                 "\treturn  [x,   x]\n"
                                 "    return &lt;none&gt;\n"
                                 "</code></pre>"
                                 "<p>Call <code>f(1)</code> to try it.</p>"));
  CHECK(has(x.text, "```python\ndef f(x):\n    if x:\n\treturn  [x,   x]\n"
                    "    return <none>\n```"));
  CHECK(has(x.text, "Call `f(1)` to try it."));
}

TEST_CASE("extract_markdown fences code that holds backticks and markup") {
  auto x = ce::extract_html(page("<pre>echo ```\n<span class=\"k\">let</span> a = 1;<br>"
                                 "<b>b</b>  =  2;</pre>"));
  CHECK(has(x.text, "````\necho ```\nlet a = 1;\nb  =  2;\n````"));
}

TEST_CASE("extract_markdown treats a multi-line <code> as a block") {
  auto x = ce::extract_html(page("<div><code>line one\n  line two</code></div>"));
  CHECK(has(x.text, "```\nline one\n  line two\n```"));
}

} // namespace extract_markdown_test
