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
#include <optional>
#include <set>

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

// How report_html_fragment links citations.
struct cite_targets {
  std::map<int, const cited_source*> by_number;
  std::string source_pages;
  bool every_number = false;
  // Web citations link the page itself, not its page on the server
  // (html_report).
  bool web_direct = false;
};

// The number of a citation link (its text is `[N]`, N of 1 to 9 digits), or
// nothing.
std::optional<int> citation_number(cmark_node* link) {
  std::string text;
  for (auto* c = cmark_node_first_child(link); c != nullptr; c = cmark_node_next(c)) {
    if (cmark_node_get_type(c) != CMARK_NODE_TEXT)
      return std::nullopt;
    const char* literal = cmark_node_get_literal(c);
    text += literal != nullptr ? literal : "";
  }
  if (text.size() < 3 || text.size() > 11 || text.front() != '[' || text.back() != ']')
    return std::nullopt;
  for (size_t i = 1; i + 1 < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i])))
      return std::nullopt;
  return std::atoi(text.c_str() + 1);
}

// Whether a link to `url` stays a link: http(s), mailto and fragments.
bool kept_link(const std::string& url) {
  std::string lower;
  for (char c : url.substr(0, 8))
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0
         || lower.rfind("mailto:", 0) == 0 || (!url.empty() && url.front() == '#');
}

// A text node holding `x`.
cmark_node* text_node(const std::string& x) {
  auto* t = cmark_node_new(CMARK_NODE_TEXT);
  cmark_node_set_literal(t, x.c_str());
  return t;
}

// Replaces `node` by `with` and frees `node`. Where the tree does not take
// `with` there (a table cell holds no custom inline), `with` is freed and
// `node` stays; returns false.
bool replace_node(cmark_node* node, cmark_node* with) {
  if (cmark_node_replace(node, with) == 0) {
    cmark_node_free(with);
    return false;
  }
  cmark_node_free(node);
  return true;
}

// Where citation [n], written as a link to `url`, leads (`href`: its
// source's page on the server, the page itself, or the sources list; empty
// for nowhere) and the web page it stands for (`web`, empty for none).
struct citation_target {
  std::string href;
  std::string web;
};

citation_target target_of(int n, const std::string& url, const cite_targets& to) {
  auto found = to.by_number.find(n);
  const cited_source* s = found != to.by_number.end() ? found->second : nullptr;
  citation_target t;
  t.web = is_web(url) ? url : s != nullptr && is_web(s->url) ? s->url : std::string{};
  if (!to.source_pages.empty() && to.web_direct && is_web(url))
    t.href = url;
  else if (!to.source_pages.empty())
    t.href = s != nullptr || to.every_number
               ? to.source_pages + "/" + std::to_string(n) + "?format=html"
               : t.web;
  else
    t.href = is_web(url) ? url : s != nullptr ? "#" + anchor(n) : std::string{};
  return t;
}

// Citation [n] to `t`: the link report_html_fragment writes (a custom
// inline node), or with `plain` a Markdown link to the same place (a table
// cell holds no custom inline); the text `[n]` when it leads nowhere.
cmark_node* citation_node(int n, const citation_target& t, bool plain) {
  auto num = std::to_string(n);
  auto* text = text_node("[" + num + "]");
  if (t.href.empty())
    return text;
  if (plain) {
    auto* a = cmark_node_new(CMARK_NODE_LINK);
    cmark_node_set_url(a, t.href.c_str());
    cmark_node_append_child(a, text);
    return a;
  }
  auto* a = cmark_node_new(CMARK_NODE_CUSTOM_INLINE);
  std::string open = "<a class=\"cite\" data-n=\"" + num + "\"";
  if (!t.web.empty())
    open += " data-url=\"" + escape_html(t.web) + "\"";
  open += " href=\"" + escape_html(t.href) + "\">";
  cmark_node_set_on_enter(a, open.c_str());
  cmark_node_set_on_exit(a, "</a>");
  cmark_node_append_child(a, text);
  return a;
}

// Markdown to an HTML fragment with cmark-gfm and its table and
// strikethrough extensions (GitHub's Markdown): raw HTML becomes text,
// images become links, citations become report_html_fragment's links and
// other links whose target is not kept_link become their text.
std::string markdown_to_html(const std::string& md, const cite_targets& to) {
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
  // The nodes to change, found first: the tree is not changed while walked.
  auto nodes_of = [&](std::initializer_list<cmark_node_type> types) {
    std::vector<cmark_node*> out;
    auto* it = cmark_iter_new(doc.get());
    for (auto ev = cmark_iter_next(it); ev != CMARK_EVENT_DONE; ev = cmark_iter_next(it)) {
      auto* node = cmark_iter_get_node(it);
      if (ev == CMARK_EVENT_ENTER
          && std::find(types.begin(), types.end(), cmark_node_get_type(node)) != types.end())
        out.push_back(node);
    }
    cmark_iter_free(it);
    return out;
  };
  for (auto* node : nodes_of({CMARK_NODE_HTML_INLINE, CMARK_NODE_HTML_BLOCK})) {
    const char* literal = cmark_node_get_literal(node);
    std::string text = literal != nullptr ? literal : "";
    if (cmark_node_get_type(node) == CMARK_NODE_HTML_INLINE) {
      replace_node(node, text_node(text));
    } else {
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        text.pop_back();
      auto* para = cmark_node_new(CMARK_NODE_PARAGRAPH);
      cmark_node_append_child(para, text_node(text));
      replace_node(node, para);
    }
  }
  for (auto* image : nodes_of({CMARK_NODE_IMAGE})) {
    auto* link = cmark_node_new(CMARK_NODE_LINK);
    const char* url = cmark_node_get_url(image);
    cmark_node_set_url(link, url != nullptr ? url : "");
    while (auto* child = cmark_node_first_child(image))
      cmark_node_append_child(link, child);
    if (cmark_node_first_child(link) == nullptr)
      cmark_node_append_child(link, text_node("image"));
    replace_node(image, link);
  }
  for (auto* link : nodes_of({CMARK_NODE_LINK})) {
    const char* u = cmark_node_get_url(link);
    std::string url = u != nullptr ? u : "";
    if (auto n = citation_number(link)) {
      auto target = target_of(*n, url, to);
      if (!replace_node(link, citation_node(*n, target, false)))
        replace_node(link, citation_node(*n, target, true));
    } else if (!kept_link(url)) {
      while (auto* child = cmark_node_first_child(link))
        if (cmark_node_insert_before(link, child) == 0)
          break;
      if (cmark_node_first_child(link) == nullptr)
        cmark_node_free(link);
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
// linked from the citations by its id. With `source_pages`, no file:// URL:
// every source links its page on the server, local ones by their title.
std::string linked_sources(const report_parts& r, const std::string& source_pages) {
  std::string sources = "<h2>Sources</h2>\n<ol class=\"sources\">\n";
  for (const auto& s : r.sources) {
    auto num = std::to_string(s.number);
    sources += "<li id=\"" + anchor(s.number) + "\" value=\"" + num + "\">";
    auto title = escape_html(s.title.empty() ? s.url : s.title);
    auto page = source_pages.empty() ? std::string{}
                                     : escape_html(source_pages + "/" + num + "?format=html");
    if (is_web(s.url)) {
      sources += "<a href=\"" + escape_html(s.url) + "\">" + title + "</a>";
      if (!page.empty())
        sources += " <a class=\"source-text\" href=\"" + page + "\">(text read)</a>";
    } else if (is_local(s.url) && !page.empty()) {
      auto path = shown_local_path(local_path_of(s.url), r.corpus_root);
      sources += "<a href=\"" + page + "\">" + (s.title.empty() ? escape_html(path) : title)
                 + "</a>";
      if (!path.empty())
        sources += "<br><code>" + escape_html(path) + "</code>";
    } else if (is_local(s.url)) {
      sources += "<a href=\"" + escape_html(s.url) + "\">" + title + "</a>";
      if (auto path = local_path_of(s.url); !path.empty())
        sources += "<br><code>" + escape_html(path) + "</code>";
    } else if (!page.empty()) {
      sources += "<a href=\"" + page + "\">" + escape_html(s.title) + "</a>";
    } else {
      sources += escape_html(s.title);
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

std::string render_html(const report_parts& r, bool sendable, const std::string& source_pages) {
  std::string md;
  if (r.partial)
    md += partial_banner;
  md += r.body;
  cite_targets to;
  for (const auto& s : r.sources)
    to.by_number[s.number] = &s;
  to.source_pages = source_pages;
  to.web_direct = true;
  auto body = markdown_to_html(md, to);
  std::string sources;
  if (!r.sources.empty())
    sources = sendable ? sendable_sources(r.sources, r.corpus_root)
                       : linked_sources(r, source_pages);
  auto title = escape_html(r.question);
  std::string head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  if (sendable || !source_pages.empty())
    head += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">\n";
  std::string style = page_style;
  style += "a.cite{text-decoration:none}";
  if (sendable)
    style
      += "span.url{overflow-wrap:anywhere;font-size:.9em;color:#555}"
         "a{color:#1a4f9c}@page{margin:2cm}@media print{body{max-width:none;margin:0;padding:0}}";
  return head + "<title>" + title + "</title>\n<style>" + style + "</style>\n</head>\n<body>\n<h1>"
         + title + "</h1>\n" + body + sources + "</body>\n</html>\n";
}

} // namespace

std::string report_html_fragment(const std::string& body, const std::vector<cited_source>& sources,
                                 const std::string& source_pages, bool every_number) {
  cite_targets to;
  for (const auto& s : sources)
    to.by_number[s.number] = &s;
  to.source_pages = source_pages;
  to.every_number = every_number;
  return markdown_to_html(body, to);
}

std::string html_report(const report_parts& r, const std::string& source_pages) {
  return render_html(r, false, source_pages);
}

std::string sendable_html_report(const report_parts& r) {
  return render_html(r, true, {});
}

namespace {

// The citation marker `[[n]]` (n of 1 to 6 digits) at `at` of `body`: its
// number and the index just past its `]]`, or nothing.
std::optional<std::pair<int, size_t>> citation_marker_at(const std::string& body, size_t at) {
  size_t i = at + 2;
  int n = 0;
  size_t digits = 0;
  while (i < body.size() && digits < 7 && body[i] >= '0' && body[i] <= '9') {
    n = n * 10 + (body[i] - '0');
    ++i;
    ++digits;
  }
  if (digits < 1 || digits > 6 || body.compare(i, 2, "]]") != 0)
    return std::nullopt;
  return std::make_pair(n, i + 2);
}

} // namespace

std::vector<int> citation_order(const std::string& body) {
  std::vector<int> out;
  std::set<int> seen;
  for (size_t at = body.find("[["); at != std::string::npos; at = body.find("[[", at + 1))
    if (auto m = citation_marker_at(body, at); m && seen.insert(m->first).second)
      out.push_back(m->first);
  return out;
}

std::map<int, int> first_cited_numbering(const std::string& body) {
  std::map<int, int> out;
  int next = 1;
  for (int n : citation_order(body))
    out[n] = next++;
  return out;
}

size_t renumbered_body::shifted(size_t x) const {
  long delta = 0;
  for (const auto& [at, added] : edits) {
    if (at > x)
      break;
    delta += added;
  }
  auto moved = static_cast<long>(x) + delta;
  return moved < 0 ? 0 : static_cast<size_t>(moved);
}

renumbered_body renumber_citations(const std::string& body, const std::map<int, int>& shown) {
  renumbered_body out;
  out.text.reserve(body.size());
  size_t pos = 0;
  for (size_t at = body.find("[["); at != std::string::npos; at = body.find("[[", at + 1)) {
    auto m = at < pos ? std::nullopt : citation_marker_at(body, at);
    if (!m)
      continue;
    out.text.append(body, pos, at - pos);
    auto found = shown.find(m->first);
    size_t end = m->second;
    std::string with;
    if (found != shown.end()) {
      with = "[[" + std::to_string(found->second) + "]]";
    } else if (end < body.size() && body[end] == '(') {
      // Removed with its link.
      if (auto close = link_end(body, end + 1); close != std::string::npos)
        end = close + 1;
    }
    out.text += with;
    auto added = static_cast<long>(with.size()) - static_cast<long>(end - at);
    if (added != 0)
      out.edits.emplace_back(end, added);
    pos = end;
  }
  out.text.append(body, pos, std::string::npos);
  return out;
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

// A source's short location (source_location).
std::string short_location(const cited_source& s, const std::string& corpus_root) {
  return source_location(s.url, corpus_root);
}

} // namespace

bool is_web_url(const std::string& url) {
  return is_web(url);
}

bool is_file_url(const std::string& url) {
  return is_local(url);
}

std::string source_location(const std::string& url, const std::string& corpus_root) {
  if (is_local(url))
    return shown_local_path(local_path_of(url), corpus_root);
  auto x = url;
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
