// libFuzzer target: arbitrary report text (as a model writes it, citations
// and links included) through the Markdown and HTML report files. Checks:
// nothing throws, the HTML page is whole and lists the sources, and a
// citation of a local source in plain text links to its entry.

#include "report_render.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace app = quarry::app;

namespace {

void check(bool condition) {
  if (!condition)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  app::report_parts r;
  r.question = "Q";
  r.body.assign(reinterpret_cast<const char*>(data), size);
  r.sources = {{1, "Local", "file:///docs/a%20b.md"},
               {2, "Web", "https://example.com/x?a=1&b=2"},
               {3, "", ""}};
  r.partial = size % 2 == 1;
  auto md = app::markdown_report(r);
  check(md.rfind("# Q\n\n", 0) == 0);
  // The terminal's text: the title first, and a Sources list of titles and
  // short locations, never a file:// URL (the body may spell one out).
  auto text = app::terminal_report(r, static_cast<int>(20 + size % 120));
  check(text.rfind("Q\n=\n\n", 0) == 0);
  auto sources = text.rfind("\nSources\n-------\n");
  check(sources != std::string::npos);
  check(text.find("file://", sources) == std::string::npos);
  auto html = app::html_report(r);
  check(html.rfind("<!DOCTYPE html>", 0) == 0);
  const std::string end = "</body>\n</html>\n";
  check(html.size() >= end.size() && html.compare(html.size() - end.size(), end.size(), end) == 0);
  check(html.find("<li id=\"source-1\"") != std::string::npos);
  // A citation of the local source links into the page (Markdown drops
  // file:// links as unsafe), unless other Markdown syntax around it makes
  // it part of something else.
  const std::string cite = "[[1]](file:///docs/a%20b.md)";
  if (auto at = r.body.find(cite); at != std::string::npos) {
    // Plain words around it on one line (no indented code block, no other
    // Markdown syntax).
    auto rest = r.body.substr(0, at) + r.body.substr(at + cite.size());
    auto plain = std::all_of(rest.begin(), rest.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' '
             || c == '.' || c == ',';
    });
    if (plain && (r.body.empty() || r.body.front() != ' '))
      check(html.find("href=\"#source-1\"") != std::string::npos);
  }
  return 0;
}
