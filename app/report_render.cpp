// Markdown and HTML report files.

#include "report_render.hpp"

#include "quarry/corpus/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <cmark-gfm.h>

#include <cctype>
#include <cstdlib>
#include <map>

namespace quarry::app {

namespace {

constexpr const char* partial_banner
  = "> **Partial report.** The research was interrupted before it finished; "
    "this report holds only what was found until then.\n\n";

bool is_local(const std::string& url) {
  return url.rfind("file://", 0) == 0;
}

bool is_web(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

std::string anchor(int number) {
  return "source-" + std::to_string(number);
}

// The `)` that ends a citation's link starting at `from` (parentheses in a
// URL nest, as in Markdown), or npos when what follows is no link: it holds
// whitespace or brackets, or never ends.
size_t link_end(const std::string& body, size_t from) {
  int depth = 0;
  for (auto i = from; i < body.size(); ++i) {
    switch (body[i]) {
      case '(':
        ++depth;
        break;
      case ')':
        if (depth == 0)
          return i;
        --depth;
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
      case '[':
      case ']':
        return std::string::npos;
      default:
        break;
    }
  }
  return std::string::npos;
}

// Rewrites `[[n]](link)` citations whose link a browser would not follow
// from a report file (file:// URLs, which Markdown renderers drop as unsafe,
// and empty links) to anchors in the Sources list.
std::string link_citations_locally(const std::string& body,
                                   const std::map<int, const cited_source*>& by_number) {
  std::string out;
  out.reserve(body.size());
  size_t pos = 0;
  while (pos < body.size()) {
    auto open = body.find("[[", pos);
    if (open == std::string::npos)
      break;
    auto digits = open + 2;
    auto d = digits;
    while (d < body.size() && d - digits < 9 && std::isdigit(static_cast<unsigned char>(body[d])))
      ++d;
    if (d == digits || body.compare(d, 3, "]](") != 0) {
      // Not a citation here; one may start at the next bracket ("[[[1]](").
      out.append(body, pos, open + 1 - pos);
      pos = open + 1;
      continue;
    }
    auto link_start = d + 3;
    auto close = link_end(body, link_start);
    if (close == std::string::npos) {
      out.append(body, pos, open + 1 - pos);
      pos = open + 1;
      continue;
    }
    auto number = std::atoi(body.substr(digits, d - digits).c_str());
    auto link = body.substr(link_start, close - link_start);
    out.append(body, pos, open - pos);
    if (is_web(link)) {
      out.append(body, open, close + 1 - open);
    } else if (by_number.count(number) != 0) {
      out += "[[" + std::to_string(number) + "]](#" + anchor(number) + ")";
    } else {
      out += "[" + std::to_string(number) + "]";
    }
    pos = close + 1;
  }
  out.append(body, pos, std::string::npos);
  return out;
}

} // namespace

std::string escape_html(const std::string& x) {
  std::string out;
  out.reserve(x.size());
  for (char c : x) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string printed_report(std::string text, bool terminal) {
  return terminal ? sdk::strip_terminal_controls(text) : text;
}

std::string local_path_of(const std::string& url) {
  return corpus::path_from_file_url(url);
}

std::string markdown_report(const report_parts& r) {
  std::string out = "# " + r.question + "\n\n";
  if (r.partial)
    out += partial_banner;
  out += r.body;
  if (!out.empty() && out.back() != '\n')
    out += '\n';
  if (!r.sources.empty())
    out += "\n" + sources_markdown(r.sources);
  return out;
}

std::string sources_markdown(const std::vector<cited_source>& sources) {
  if (sources.empty())
    return {};
  std::string out = "## Sources\n\n";
  for (const auto& s : sources) {
    out += std::to_string(s.number) + ". " + (s.title.empty() ? s.url : s.title);
    if (!s.url.empty())
      out += " <" + s.url + ">";
    if (s.snippet_only)
      out += " (snippet only)";
    out += '\n';
  }
  return out;
}

std::string html_report(const report_parts& r) {
  std::map<int, const cited_source*> by_number;
  for (const auto& s : r.sources)
    by_number[s.number] = &s;
  std::string md;
  if (r.partial)
    md += partial_banner;
  md += link_citations_locally(r.body, by_number);
  auto* rendered = cmark_markdown_to_html(md.data(), md.size(), CMARK_OPT_DEFAULT);
  std::string body = rendered ? rendered : "";
  std::free(rendered);
  std::string sources;
  if (!r.sources.empty()) {
    sources += "<h2>Sources</h2>\n<ol class=\"sources\">\n";
    for (const auto& s : r.sources) {
      auto num = std::to_string(s.number);
      sources += "<li id=\"" + anchor(s.number) + "\" value=\"" + num + "\">";
      auto title = escape_html(s.title.empty() ? s.url : s.title);
      if (is_web(s.url)) {
        sources += "<a href=\"" + escape_html(s.url) + "\">" + title + "</a>";
      } else if (is_local(s.url)) {
        sources += "<a href=\"" + escape_html(s.url) + "\">" + title + "</a>";
        if (auto path = local_path_of(s.url); !path.empty())
          sources += "<br><code>" + escape_html(path) + "</code>";
      } else {
        sources += title;
      }
      if (s.snippet_only)
        sources += " <span class=\"snippet-only\" title=\"Only the search engine's snippet was "
                   "read: the page was never opened.\">(snippet only)</span>";
      sources += "</li>\n";
    }
    sources += "</ol>\n";
  }
  auto title = escape_html(r.question);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<title>"
         + title
         + "</title>\n<style>body{max-width:46em;margin:2em auto;padding:0 1em;"
           "font-family:system-ui,sans-serif;line-height:1.55}"
           "ol.sources li:target{background:#fff3b0}"
           "code{overflow-wrap:anywhere}</style>\n</head>\n<body>\n<h1>"
         + title + "</h1>\n" + body + sources + "</body>\n</html>\n";
}

} // namespace quarry::app
