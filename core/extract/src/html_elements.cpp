// What the passes over the page tree share: folding whitespace, the classes
// of tags (skipped, block), hidden elements, and the measures of an
// element's text and links.

#include "html_internal.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace quarry::extract::detail {

// -- whitespace ---------------------------------------------------------------

// Folds runs of whitespace (also U+00A0) into one space and trims.
std::string fold(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ws = sdk::is_ascii_space(c);
    if (!ws && nbsp_at(s, i)) {
      ws = true;
      ++i;
    }
    if (ws) {
      space = !out.empty();
    } else {
      if (space)
        out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

// Whether `s` has anything but whitespace (what fold would keep).
bool has_visible(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (sdk::is_ascii_space(c))
      continue;
    if (nbsp_at(s, i)) {
      ++i;
      continue;
    }
    return true;
  }
  return false;
}

// -- element classes ----------------------------------------------------------

bool is_skipped_tag(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_SCRIPT:
    case GUMBO_TAG_STYLE:
    case GUMBO_TAG_NOSCRIPT:
    case GUMBO_TAG_TEMPLATE:
    case GUMBO_TAG_HEAD:
    case GUMBO_TAG_TITLE:
    case GUMBO_TAG_META:
    case GUMBO_TAG_LINK:
    case GUMBO_TAG_IFRAME:
    case GUMBO_TAG_OBJECT:
    case GUMBO_TAG_EMBED:
    case GUMBO_TAG_SVG:
    case GUMBO_TAG_MATH:
    case GUMBO_TAG_CANVAS:
    case GUMBO_TAG_SELECT:
    case GUMBO_TAG_OPTION:
    case GUMBO_TAG_BUTTON:
    case GUMBO_TAG_INPUT:
    case GUMBO_TAG_TEXTAREA:
    case GUMBO_TAG_AUDIO:
    case GUMBO_TAG_VIDEO:
    case GUMBO_TAG_SOURCE:
    case GUMBO_TAG_IMG:
      return true;
    default:
      return false;
  }
}

bool is_block(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_ADDRESS:
    case GUMBO_TAG_ARTICLE:
    case GUMBO_TAG_ASIDE:
    case GUMBO_TAG_BLOCKQUOTE:
    case GUMBO_TAG_DD:
    case GUMBO_TAG_DETAILS:
    case GUMBO_TAG_DIV:
    case GUMBO_TAG_DL:
    case GUMBO_TAG_DT:
    case GUMBO_TAG_FIELDSET:
    case GUMBO_TAG_FIGCAPTION:
    case GUMBO_TAG_FIGURE:
    case GUMBO_TAG_FOOTER:
    case GUMBO_TAG_FORM:
    case GUMBO_TAG_H1:
    case GUMBO_TAG_H2:
    case GUMBO_TAG_H3:
    case GUMBO_TAG_H4:
    case GUMBO_TAG_H5:
    case GUMBO_TAG_H6:
    case GUMBO_TAG_HEADER:
    case GUMBO_TAG_HR:
    case GUMBO_TAG_LI:
    case GUMBO_TAG_MAIN:
    case GUMBO_TAG_NAV:
    case GUMBO_TAG_OL:
    case GUMBO_TAG_P:
    case GUMBO_TAG_PRE:
    case GUMBO_TAG_SECTION:
    case GUMBO_TAG_SUMMARY:
    case GUMBO_TAG_TABLE:
    case GUMBO_TAG_TBODY:
    case GUMBO_TAG_THEAD:
    case GUMBO_TAG_TFOOT:
    case GUMBO_TAG_TR:
    case GUMBO_TAG_TD:
    case GUMBO_TAG_TH:
    case GUMBO_TAG_UL:
    case GUMBO_TAG_CAPTION:
    case GUMBO_TAG_BODY:
      return true;
    default:
      return false;
  }
}

bool is_hidden(const node* n) {
  if (n->attrs == nullptr)
    return false;
  if (n->has_attr("hidden") || n->attr("aria-hidden") == "true")
    return true;
  auto raw = n->attr("style");
  if (raw.empty())
    return false;
  auto style = sdk::to_lower(raw);
  style.erase(std::remove_if(style.begin(), style.end(), sdk::is_ascii_space), style.end());
  return style.find("display:none") != std::string::npos
         || style.find("visibility:hidden") != std::string::npos;
}

// -- text measures ------------------------------------------------------------

namespace {

// The text below `n` in pieces, a space after each block element; `Sink`
// has add(std::string_view).
template <typename Sink>
void collect_text(const node* n, Sink& out) {
  tick();
  if (n->removed)
    return;
  if (n->text_node) {
    out.add(n->text);
    return;
  }
  if (is_skipped_tag(n->tag))
    return;
  for (auto* c : n->children) {
    collect_text(c, out);
    if (!c->text_node && is_block(c->tag))
      out.add(" ");
  }
}

struct text_collector {
  std::string raw;

  void add(std::string_view s) {
    raw += s;
  }
};

} // namespace

std::string inner_text(const node* n) {
  text_collector c;
  collect_text(n, c);
  return fold(c.raw);
}

// The measures of inner_text(n) without building it.
text_measure measure_text(const node* n) {
  text_measure m;
  collect_text(n, m);
  return m;
}

size_t text_len(const node* n) {
  return measure_text(n).len;
}

namespace {

// The text of `n` (as text_len measures it) and the text of its links in
// one walk. A link's text is measured on its own (text_len of the <a>) and
// counts 0.3 of it for an in-page link (`#...`); links below elements whose
// text does not count (a <button>, an <svg>) still count.
class density_walk {
public:
  text_measure total;
  size_t links = 0;

  void walk(const node* x, bool in_total, text_measure* link) {
    tick();
    if (x->removed)
      return;
    if (x->text_node) {
      if (in_total)
        total.add(x->text);
      if (link != nullptr)
        link->add(x->text);
      return;
    }
    if (is_skipped_tag(x->tag)) {
      if (link == nullptr)
        for (auto* c : x->children)
          walk(c, false, nullptr);
      return;
    }
    text_measure own;
    bool starts_link = link == nullptr && x->tag == GUMBO_TAG_A;
    if (starts_link)
      link = &own;
    for (auto* c : x->children) {
      walk(c, in_total, link);
      if (!c->text_node && is_block(c->tag)) {
        if (in_total)
          total.add(" ");
        if (link != nullptr)
          link->add(" ");
      }
    }
    if (starts_link) {
      auto href = x->attr("href");
      double coeff = !href.empty() && href[0] == '#' ? 0.3 : 1.0;
      links += static_cast<size_t>(coeff * static_cast<double>(own.len));
    }
  }
};

} // namespace

double link_density(const node* n) {
  density_walk w;
  w.walk(n, true, nullptr);
  if (w.total.len == 0)
    return 0;
  return static_cast<double>(w.links) / static_cast<double>(w.total.len);
}

size_t count_tag(const node* n, GumboTag tag) {
  tick();
  size_t k = 0;
  for (auto* c : n->children) {
    if (c->removed || c->text_node)
      continue;
    if (c->tag == tag)
      ++k;
    k += count_tag(c, tag);
  }
  return k;
}

namespace {

// Whether `n` holds visible text, removed or not.
bool holds_text(const node* n) {
  tick();
  if (n->text_node)
    return has_visible(n->text);
  for (auto* c : n->children)
    if (holds_text(c))
      return true;
  return false;
}

} // namespace

// Whether `n` is or holds a link with text, removed or not (an icon's empty
// link does not count).
bool holds_link(const node* n) {
  tick();
  if (n->tag == GUMBO_TAG_A)
    return holds_text(n);
  for (auto* c : n->children)
    if (!c->text_node && holds_link(c))
      return true;
  return false;
}

bool has_block_child(const node* n) {
  tick();
  for (auto* c : n->children) {
    if (c->removed || c->text_node)
      continue;
    if (is_block(c->tag) || has_block_child(c))
      return true;
  }
  return false;
}

} // namespace quarry::extract::detail
