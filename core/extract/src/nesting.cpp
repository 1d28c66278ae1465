// A linear pre-scan of HTML that drops the tags of elements nested too deep
// for the parser to handle in reasonable time and, for extraction, empties
// scripts and style sheets, whose text the parser would otherwise tokenize
// character by character for nothing.

#include "prescan.hpp"

#include "quarry/extract/html.hpp"

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

namespace quarry::extract {

namespace {

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto x : names)
    if (x == name)
      return true;
  return false;
}

// Elements without content.
bool is_void(std::string_view name) {
  return one_of(name, {"area",  "base",     "br",      "col",   "embed", "hr",      "img",
                       "input", "keygen",   "link",    "meta",  "param", "source",  "track",
                       "wbr",   "basefont", "bgsound", "frame", "image", "menuitem"});
}

// Elements whose end tag is optional and that the parser closes by itself
// when a sibling starts: they do not nest, so they do not count.
bool closes_itself(std::string_view name) {
  return one_of(name, {"p",      "li",       "dt",    "dd",    "tr",    "td",       "th",
                       "option", "optgroup", "thead", "tbody", "tfoot", "colgroup", "caption",
                       "rb",     "rt",       "rp",    "rtc",   "html",  "head",     "body"});
}

// Elements whose content is text up to their end tag.
bool is_raw_text(std::string_view name) {
  return one_of(name,
                {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"});
}

// Elements a start tag of the same name closes (the parser does not nest
// them), and headings, which close an open heading.
bool closes_same(std::string_view name) {
  return one_of(name, {"a", "nobr", "button", "form", "h1", "h2", "h3", "h4", "h5", "h6"});
}

bool is_heading(std::string_view name) {
  return name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6';
}

// Case-insensitive search for `</name` followed by a blank, `/` or `>`.
size_t find_end_tag(std::string_view html, size_t from, std::string_view name) {
  for (auto pos = html.find("</", from); pos != std::string_view::npos;
       pos = html.find("</", pos + 2)) {
    auto at = pos + 2;
    if (html.size() - at < name.size())
      return std::string_view::npos;
    bool same = true;
    for (size_t k = 0; k < name.size() && same; ++k)
      same = to_lower(html[at + k]) == name[k];
    if (!same)
      continue;
    auto after = at + name.size();
    if (after == html.size() || is_blank(html[after]) || html[after] == '/' || html[after] == '>')
      return pos;
  }
  return std::string_view::npos;
}

// The end of a script's text from `from` (just after its start tag): the
// position of the `</script` that ends it, or npos when none does. Follows
// the HTML tokenizer's script data states, so that `<!--` ... `<script>` ...
// `</script>` inside a script (the escaped and double-escaped states) does
// not end it early.
size_t find_script_end(std::string_view html, size_t from) {
  enum class state { data, escaped, double_escaped };
  auto n = html.size();
  auto st = state::data;
  size_t dashes = 0; // dashes just before `i` (escaped states)
  // Whether `script` (any case) followed by a blank, `/` or `>` starts at `at`.
  auto script_at = [&](size_t at) {
    static constexpr std::string_view name = "script";
    if (n - at <= name.size())
      return false;
    for (size_t k = 0; k < name.size(); ++k)
      if (to_lower(html[at + k]) != name[k])
        return false;
    auto c = html[at + name.size()];
    return is_blank(c) || c == '/' || c == '>';
  };
  size_t i = from;
  while (i < n) {
    if (st == state::data) {
      auto lt = html.find('<', i);
      if (lt == std::string_view::npos || lt + 1 >= n)
        return std::string_view::npos;
      if (html[lt + 1] == '/' && lt + 2 < n && script_at(lt + 2))
        return lt;
      if (html.compare(lt, 4, "<!--") == 0) {
        // Escaped, with the two dashes of `<!--` already seen: `<!-->`
        // goes back at once.
        st = state::escaped;
        dashes = 2;
        i = lt + 4;
      } else {
        i = lt + 1;
      }
      continue;
    }
    auto c = html[i];
    if (c == '-') {
      ++dashes;
      ++i;
      continue;
    }
    if (c == '>' && dashes >= 2) {
      st = state::data;
      dashes = 0;
      ++i;
      continue;
    }
    dashes = 0;
    if (c != '<' || i + 1 >= n) {
      ++i;
      continue;
    }
    bool closing = html[i + 1] == '/';
    auto at = i + (closing ? 2 : 1);
    if (at < n && script_at(at)) {
      if (closing && st == state::escaped)
        return i;
      if (closing)
        st = state::escaped; // the end of the inner script
      else if (st == state::escaped)
        st = state::double_escaped;
      i = at + 6;
      continue;
    }
    ++i;
  }
  return std::string_view::npos;
}

// Whether a start tag's attribute text names a JSON-LD script (checked
// loosely: any mention of `ld+json`, any case).
bool mentions_ld_json(std::string_view attrs) {
  static constexpr std::string_view needle = "ld+json";
  if (attrs.size() < needle.size())
    return false;
  for (size_t i = 0; i + needle.size() <= attrs.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && to_lower(attrs[i + k]) == needle[k])
      ++k;
    if (k == needle.size())
      return true;
  }
  return false;
}

// Skips a tag's attributes from `i` (just after the name). Returns the
// position after `>` (or the end of the input) and whether the tag ended
// with `/>`. Calls `each(name_begin, name_end, end)` for every attribute
// (`end`: after its value, if any).
template <typename Each>
std::pair<size_t, bool> skip_attributes(std::string_view html, size_t i, Each&& each) {
  auto n = html.size();
  bool self_closing = false;
  while (i < n) {
    auto c = html[i];
    if (c == '>')
      return {i + 1, self_closing};
    if (is_blank(c)) {
      ++i;
      continue;
    }
    if (c == '/') {
      self_closing = true;
      ++i;
      continue;
    }
    self_closing = false;
    // An attribute name (a leading `=` belongs to it).
    auto name_begin = i;
    ++i;
    while (i < n && !is_blank(html[i]) && html[i] != '/' && html[i] != '>' && html[i] != '=')
      ++i;
    auto name_end = i;
    auto j = i;
    while (j < n && is_blank(html[j]))
      ++j;
    if (j < n && html[j] == '=') {
      ++j;
      while (j < n && is_blank(html[j]))
        ++j;
      if (j < n && (html[j] == '"' || html[j] == '\'')) {
        auto close = html.find(html[j], j + 1);
        i = close == std::string_view::npos ? n : close + 1;
      } else {
        while (j < n && !is_blank(html[j]) && html[j] != '>')
          ++j;
        i = j;
      }
    }
    each(name_begin, name_end, i);
  }
  return {n, self_closing};
}

// Whether only blanks lie between the tag (or start) before `from` and
// `from`, and between `to` and the next tag (or end).
bool only_blanks_between_tags(std::string_view html, size_t from, size_t to) {
  for (auto k = from; k > 0 && html[k - 1] != '>'; --k)
    if (!is_blank(html[k - 1]))
      return false;
  for (auto k = to; k < html.size() && html[k] != '<'; ++k)
    if (!is_blank(html[k]))
      return false;
  return true;
}

} // namespace

// The attributes that extraction reads (html*.cpp) or that change how
// the parser builds the tree (<input type>, <font color|face|size> in
// foreign content, <annotation-xml encoding>); the pre-scan drops others.
bool kept_attribute(std::string_view name) {
  static constexpr std::string_view kept[] = {
    "aria-hidden", "charset", "class",  "color",      "colspan",    "content", "datetime",
    "encoding",    "face",    "hidden", "href",       "http-equiv", "id",      "itemprop",
    "itemtype",    "lang",    "name",   "property",   "pubdate",    "rel",     "role",
    "size",        "style",   "type",   "xlink:href", "xml:lang"};
  if (name.size() > 11)
    return false;
  char lower[11];
  for (size_t k = 0; k < name.size(); ++k)
    lower[k] = to_lower(name[k]);
  std::string_view key{lower, name.size()};
  for (auto x : kept)
    if (x == key)
      return true;
  return false;
}

std::optional<std::string> prescan_html(std::string_view html, size_t max_depth,
                                        bool for_extraction) {
  std::string out;
  bool changed = false;
  size_t copied = 0;
  // Drops the bytes [from, to), leaving a space when `space`.
  auto cut = [&](size_t from, size_t to, bool space) {
    if (!changed) {
      out.reserve(html.size());
      changed = true;
    }
    out.append(html.data() + copied, from - copied);
    if (space)
      out += ' ';
    copied = to;
  };
  // Drops the bytes [from, to) (a tag), leaving a space.
  auto drop = [&](size_t from, size_t to) { cut(from, to, true); };
  std::vector<std::string> stack;
  std::unordered_map<std::string, size_t> open; // name -> count on the stack
  size_t excess = 0;                            // dropped start tags not yet matched by an end tag
  auto pop_to = [&](const std::string& name) {
    while (!stack.empty()) {
      auto top = std::move(stack.back());
      stack.pop_back();
      --open[top];
      if (top == name)
        return;
    }
  };
  auto is_open = [&](const char* tag) {
    auto k = open.find(tag);
    return k != open.end() && k->second > 0;
  };
  auto foreign = [&] {
    auto s = open.find("svg");
    auto m = open.find("math");
    return (s != open.end() && s->second > 0) || (m != open.end() && m->second > 0);
  };
  auto n = html.size();
  size_t i = 0;
  std::string name;
  std::vector<std::pair<size_t, size_t>> unread; // attribute spans to drop
  while (i < n) {
    auto lt = html.find('<', i);
    if (lt == std::string_view::npos || lt + 1 >= n)
      break;
    auto c = html[lt + 1];
    if (c == '!') {
      if (html.substr(lt, 4) == "<!--") {
        auto end = html.find("-->", lt + 4);
        i = end == std::string_view::npos ? n : end + 3;
        // For extraction, a comment between tags goes (only where blanks
        // alone separate it from the tags around it, so no text is joined,
        // and only where the parser ends it at the same `-->`: not `<!-->`,
        // `<!--->` or one closed by `--!>`).
        if (for_extraction && end != std::string_view::npos && html[lt + 4] != '>'
            && html.compare(lt + 4, 2, "->") != 0
            && html.substr(lt + 4, end + 3 - (lt + 4)).find("--!>") == std::string_view::npos
            && only_blanks_between_tags(html, lt, i))
          cut(lt, i, false);
      } else {
        auto end = html.find('>', lt + 2);
        i = end == std::string_view::npos ? n : end + 1;
      }
      continue;
    }
    if (c == '?') {
      auto end = html.find('>', lt + 2);
      i = end == std::string_view::npos ? n : end + 1;
      continue;
    }
    bool closing = c == '/';
    auto start = lt + (closing ? 2 : 1);
    if (start >= n || !is_alpha(html[start])) {
      if (closing) {
        // `</` plus anything but a letter: a bogus comment up to `>`.
        auto end = html.find('>', start);
        i = end == std::string_view::npos ? n : end + 1;
      } else {
        i = lt + 1;
      }
      continue;
    }
    auto j = start;
    name.clear();
    while (j < n && !is_blank(html[j]) && html[j] != '/' && html[j] != '>')
      name += to_lower(html[j++]);
    // For extraction, attributes that nobody reads are dropped (each with
    // the blank before it, so that what remains tokenizes the same), once
    // the tag is known to stay.
    unread.clear();
    auto note_attribute = [&](size_t name_begin, size_t name_end, size_t end) {
      if (for_extraction && !closing && name_begin > 0 && is_blank(html[name_begin - 1])
          && !kept_attribute(html.substr(name_begin, name_end - name_begin)))
        unread.emplace_back(name_begin - 1, end);
    };
    auto drop_unread = [&] {
      for (auto [from, to] : unread)
        cut(from, to, false);
    };
    auto [after, self_closing] = skip_attributes(html, j, note_attribute);
    i = after;
    if (closing) {
      if (is_void(name) || closes_itself(name))
        continue;
      if (excess > 0) {
        --excess;
        drop(lt, after);
        continue;
      }
      if (auto k = open.find(name); k != open.end() && k->second > 0)
        pop_to(name);
      continue;
    }
    if (name == "plaintext")
      break; // the rest of the document is text
    if (is_raw_text(name)) {
      drop_unread();
      auto end = name == "script" ? find_script_end(html, after) : find_end_tag(html, after, name);
      // The text of a script (but JSON-LD) or a style sheet is never read:
      // it goes, unless the element is in SVG or MathML (where it is
      // markup) or has no end tag. Nor a <style> in a <select>, where the
      // parser ignores the tag and reads its text as markup.
      if (for_extraction && end != std::string_view::npos && end > after
          && ((name == "style" && !is_open("select"))
              || (name == "script" && !mentions_ld_json(html.substr(j, after - j))))
          && !foreign())
        cut(after, end, false);
      i = end == std::string_view::npos ? n : end;
      continue;
    }
    if (is_void(name) || closes_itself(name) || (self_closing && foreign())) {
      drop_unread();
      continue;
    }
    if (closes_same(name)) {
      if (auto k = open.find(name); k != open.end() && k->second > 0)
        pop_to(name);
      else if (is_heading(name) && !stack.empty() && is_heading(stack.back()))
        pop_to(stack.back());
    }
    if (stack.size() >= max_depth) {
      ++excess;
      drop(lt, after);
      continue;
    }
    drop_unread();
    stack.push_back(name);
    ++open[name];
  }
  if (!changed)
    return std::nullopt;
  out.append(html.data() + copied, n - copied);
  return out;
}

std::optional<std::string> limit_html_nesting(std::string_view html, size_t max_depth) {
  return prescan_html(html, max_depth, false);
}

} // namespace quarry::extract
