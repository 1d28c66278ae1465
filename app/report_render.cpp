// Markdown and HTML report files.

#include "report_render.hpp"

#include "quarry/corpus/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

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

namespace {

// Markdown to HTML with cmark-gfm and its table and strikethrough
// extensions (GitHub's Markdown, as the web page renders it); raw HTML and
// unsafe link targets (javascript:, file:, ...) are dropped. With
// `images_as_links`, images become links to their URL, so that nothing is
// fetched when the page is rendered.
std::string markdown_to_html(const std::string& md, bool images_as_links) {
  static std::once_flag registered;
  std::call_once(registered, [] { cmark_gfm_core_extensions_ensure_registered(); });
  std::unique_ptr<cmark_parser, void (*)(cmark_parser*)> parser{cmark_parser_new(CMARK_OPT_DEFAULT),
                                                                cmark_parser_free};
  if (!parser)
    return {};
  for (const char* name : {"table", "strikethrough"})
    if (auto* ext = cmark_find_syntax_extension(name))
      cmark_parser_attach_syntax_extension(parser.get(), ext);
  cmark_parser_feed(parser.get(), md.data(), md.size());
  std::unique_ptr<cmark_node, void (*)(cmark_node*)> doc{cmark_parser_finish(parser.get()),
                                                         cmark_node_free};
  if (!doc)
    return {};
  if (images_as_links) {
    std::vector<cmark_node*> images;
    auto* it = cmark_iter_new(doc.get());
    for (auto ev = cmark_iter_next(it); ev != CMARK_EVENT_DONE; ev = cmark_iter_next(it))
      if (ev == CMARK_EVENT_ENTER
          && cmark_node_get_type(cmark_iter_get_node(it)) == CMARK_NODE_IMAGE)
        images.push_back(cmark_iter_get_node(it));
    cmark_iter_free(it);
    for (auto* image : images) {
      auto* link = cmark_node_new(CMARK_NODE_LINK);
      const char* url = cmark_node_get_url(image);
      cmark_node_set_url(link, url != nullptr ? url : "");
      while (auto* child = cmark_node_first_child(image))
        cmark_node_append_child(link, child);
      if (cmark_node_first_child(link) == nullptr) {
        auto* text = cmark_node_new(CMARK_NODE_TEXT);
        cmark_node_set_literal(text, "image");
        cmark_node_append_child(link, text);
      }
      cmark_node_replace(image, link);
      cmark_node_free(image);
    }
  }
  auto* rendered = cmark_render_html(doc.get(), CMARK_OPT_DEFAULT,
                                     cmark_parser_get_syntax_extensions(parser.get()));
  std::string out = rendered ? rendered : "";
  std::free(rendered);
  return out;
}

constexpr const char* page_style
  = "body{max-width:46em;margin:2em auto;padding:0 1em;"
    "font-family:system-ui,sans-serif;line-height:1.55}"
    "ol.sources li:target{background:#fff3b0}"
    "table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:.25em .6em}"
    "code{overflow-wrap:anywhere}";

// The sources of html_report: one list, each entry numbered by its `value`,
// linked from the citations by its id.
std::string linked_sources(const std::vector<cited_source>& list) {
  std::string sources = "<h2>Sources</h2>\n<ol class=\"sources\">\n";
  for (const auto& s : list) {
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
  return sources + "</ol>\n";
}

// The sources of sendable_html_report: no file:// link, every URL also as
// text, and the numbers kept by converters that ignore `value` (pandoc): a
// list per run of consecutive numbers, each with its `start`.
std::string sendable_sources(const std::vector<cited_source>& list, const std::string& root) {
  std::string sources = "<h2>Sources</h2>\n";
  int next = -1;
  for (const auto& s : list) {
    if (s.number != next) {
      if (next != -1)
        sources += "</ol>\n";
      sources += "<ol class=\"sources\" start=\"" + std::to_string(s.number) + "\">\n";
    }
    next = s.number + 1;
    sources += "<li id=\"" + anchor(s.number) + "\">";
    if (is_web(s.url)) {
      auto url = escape_html(s.url);
      sources += "<a href=\"" + url + "\">" + escape_html(s.title.empty() ? s.url : s.title)
                 + "</a><br><span class=\"url\">" + url + "</span>";
    } else if (is_local(s.url)) {
      auto path = shown_local_path(local_path_of(s.url), root);
      auto title = s.title.empty() ? path : s.title;
      sources += escape_html(title);
      if (!path.empty() && path != title)
        sources += "<br><code>" + escape_html(path) + "</code>";
    } else {
      sources += escape_html(s.title);
    }
    if (s.snippet_only)
      sources += " <span class=\"snippet-only\">(snippet only)</span>";
    sources += "</li>\n";
  }
  if (next != -1)
    sources += "</ol>\n";
  return sources;
}

std::string render_html(const report_parts& r, bool sendable) {
  std::map<int, const cited_source*> by_number;
  for (const auto& s : r.sources)
    by_number[s.number] = &s;
  std::string md;
  if (r.partial)
    md += partial_banner;
  md += link_citations_locally(r.body, by_number);
  auto body = markdown_to_html(md, sendable);
  std::string sources;
  if (!r.sources.empty())
    sources = sendable ? sendable_sources(r.sources, r.corpus_root) : linked_sources(r.sources);
  auto title = escape_html(r.question);
  std::string head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  if (sendable)
    head += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">\n";
  std::string style = page_style;
  if (sendable)
    style
      += "span.url{overflow-wrap:anywhere;font-size:.9em;color:#555}"
         "a{color:#1a4f9c}@page{margin:2cm}@media print{body{max-width:none;margin:0;padding:0}}";
  return head + "<title>" + title + "</title>\n<style>" + style + "</style>\n</head>\n<body>\n<h1>"
         + title + "</h1>\n" + body + sources + "</body>\n</html>\n";
}

} // namespace

std::string html_report(const report_parts& r) {
  return render_html(r, false);
}

std::string sendable_html_report(const report_parts& r) {
  return render_html(r, true);
}

std::string shown_local_path(const std::string& path, const std::string& corpus_root) {
  namespace fs = std::filesystem;
  fs::path p{path};
  if (!corpus_root.empty()) {
    auto rel = p.lexically_normal().lexically_relative(fs::path{corpus_root}.lexically_normal());
    if (!rel.empty() && *rel.begin() != ".." && rel != ".")
      return rel.generic_string();
  }
  return p.filename().string();
}

namespace {

// Code points in `x` (its width in a terminal for most scripts).
size_t code_points_in(std::string_view x) {
  size_t n = 0;
  for (auto c : x)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80)
      ++n;
  return n;
}

// `x` cut to at most `width` code points, ending with "..." when cut.
std::string cut_to(const std::string& x, size_t width) {
  if (code_points_in(x) <= width)
    return x;
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    auto lead = (static_cast<unsigned char>(x[i]) & 0xC0) != 0x80;
    if (lead && ++n > width - 3)
      break;
    out += x[i];
  }
  return out + "...";
}

// Words of `text` on lines of at most `width` code points (a longer word
// stays whole), each line after the first starting with `indent`.
std::string wrap_words(const std::string& text, size_t width, const std::string& indent) {
  std::string out;
  size_t line = 0;
  size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(' ', start);
    auto word = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (word.empty())
      continue;
    auto w = code_points_in(word);
    if (line > 0 && line + 1 + w > width) {
      out += "\n" + indent;
      line = code_points_in(indent);
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += w;
  }
  return out;
}

// A source's short location: a local document's path in the corpus, a web
// page's host and path.
std::string short_location(const cited_source& s, const std::string& corpus_root) {
  if (is_local(s.url))
    return shown_local_path(local_path_of(s.url), corpus_root);
  auto x = s.url;
  for (const char* scheme : {"https://", "http://"})
    if (x.rfind(scheme, 0) == 0)
      x = x.substr(std::string{scheme}.size());
  if (x.rfind("www.", 0) == 0)
    x = x.substr(4);
  if (auto q = x.find_first_of("?#"); q != std::string::npos)
    x = x.substr(0, q);
  while (!x.empty() && x.back() == '/')
    x.pop_back();
  return x;
}

} // namespace

std::string terminal_report(const report_parts& r, int width) {
  auto cols = static_cast<size_t>(std::clamp(width, 20, 200));
  std::string out = wrap_words(r.question, cols, "") + "\n";
  out += std::string(std::min(cols, code_points_in(r.question)), '=') + "\n\n";
  std::string body = r.partial ? std::string{partial_banner} + r.body : r.body;
  static std::once_flag registered;
  std::call_once(registered, [] { cmark_gfm_core_extensions_ensure_registered(); });
  std::unique_ptr<cmark_parser, void (*)(cmark_parser*)> parser{cmark_parser_new(CMARK_OPT_DEFAULT),
                                                                cmark_parser_free};
  if (!parser)
    return out + body;
  for (const char* name : {"table", "strikethrough"})
    if (auto* ext = cmark_find_syntax_extension(name))
      cmark_parser_attach_syntax_extension(parser.get(), ext);
  cmark_parser_feed(parser.get(), body.data(), body.size());
  std::unique_ptr<cmark_node, void (*)(cmark_node*)> doc{cmark_parser_finish(parser.get()),
                                                         cmark_node_free};
  if (!doc)
    return out + body;
  auto render = [&](cmark_node* node) {
    auto* text = cmark_render_plaintext(node, CMARK_OPT_DEFAULT, static_cast<int>(cols));
    std::string x = text != nullptr ? text : "";
    std::free(text);
    while (!x.empty() && (x.back() == '\n' || x.back() == ' '))
      x.pop_back();
    return x;
  };
  // Block by block, so that headings get their underline.
  bool first = true;
  for (auto* node = cmark_node_first_child(doc.get()); node != nullptr;
       node = cmark_node_next(node)) {
    auto text = render(node);
    if (text.empty())
      continue;
    out += first ? "" : "\n";
    first = false;
    out += text + "\n";
    if (cmark_node_get_type(node) == CMARK_NODE_HEADING) {
      size_t longest = 0;
      size_t from = 0;
      while (from <= text.size()) {
        auto nl = text.find('\n', from);
        longest = std::max(longest, code_points_in(text.substr(from, nl - from)));
        if (nl == std::string::npos)
          break;
        from = nl + 1;
      }
      out += std::string(longest, cmark_node_get_heading_level(node) <= 1 ? '=' : '-') + "\n";
    }
  }
  if (!r.sources.empty()) {
    out += "\nSources\n-------\n";
    for (const auto& s : r.sources) {
      auto label = "[" + std::to_string(s.number) + "] ";
      auto title = s.title.empty() ? short_location(s, r.corpus_root) : s.title;
      if (s.snippet_only)
        title += " (snippet only)";
      std::string indent(code_points_in(label), ' ');
      out += wrap_words(label + title, cols, indent) + "\n";
      if (!s.url.empty() && !s.title.empty())
        out += indent + cut_to(short_location(s, r.corpus_root), cols - indent.size()) + "\n";
    }
  }
  return out;
}

} // namespace quarry::app
