// Readability-style main-content extraction over a gumbo parse, metadata from
// JSON-LD / Open Graph / meta tags, and a Markdown-like text renderer.

#include "quarry/extract/html.hpp"
#include "quarry/fetch/url.hpp"

#include "prescan.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"

#include <gumbo.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

namespace quarry::extract {

namespace {

// -- time budget ------------------------------------------------------------------

// Thrown (and caught in try_extract_html) when the deadline passed or the
// caller cancelled.
struct stopped {
  sdk::errc code;
};

// The bounds of the extraction running on this thread, checked every few
// thousand steps.
class budget {
public:
  explicit budget(const extract_options& opts) : opts_(opts) {
    // nop
  }

  void check() const {
    if (opts_.deadline && std::chrono::steady_clock::now() >= *opts_.deadline)
      throw stopped{sdk::errc::timeout};
    if (opts_.cancelled && opts_.cancelled())
      throw stopped{sdk::errc::cancelled};
  }

  void tick() {
    if (++steps_ % 4096 == 0)
      check();
  }

private:
  const extract_options& opts_;
  uint64_t steps_ = 0;
};

thread_local budget* current_budget = nullptr;

// Counts one step of work against the current budget, if any.
inline void tick() {
  if (current_budget != nullptr)
    current_budget->tick();
}

// Installs a budget for the current thread for its lifetime.
class budget_scope {
public:
  explicit budget_scope(budget* b) : previous_(current_budget) {
    current_budget = b;
  }

  ~budget_scope() {
    current_budget = previous_;
  }

  budget_scope(const budget_scope&) = delete;
  budget_scope& operator=(const budget_scope&) = delete;

private:
  budget* previous_;
};

// -- small string helpers -----------------------------------------------------

// Whether a no-break space (U+00A0) starts at byte `i` of `s`.
bool nbsp_at(std::string_view s, size_t i) {
  return i + 1 < s.size() && s[i] == '\xC2' && s[i + 1] == '\xA0';
}

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

// The size of fold() of a text given in pieces, and its commas and 0xEF
// bytes (the lead byte of CJK punctuation), without building it. Text nodes
// are valid UTF-8, so a no-break space never straddles two pieces.
struct text_measure {
  size_t len = 0;
  size_t commas = 0;
  size_t xef = 0;
  bool space = false;

  void add(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
      // A run of bytes that are neither whitespace nor the lead byte of a
      // no-break space, counted at once.
      auto u = static_cast<unsigned char>(s[i]);
      if (u > ' ' && u != 0xC2) {
        if (space)
          ++len;
        space = false;
        auto start = i;
        for (; i < s.size(); ++i) {
          u = static_cast<unsigned char>(s[i]);
          if (u <= ' ' || u == 0xC2)
            break;
          commas += u == ',' ? 1 : 0;
          xef += u == 0xEF ? 1 : 0;
        }
        len += i - start;
        if (i == s.size())
          break;
      }
      char c = s[i];
      bool ws = sdk::is_ascii_space(c);
      if (!ws && nbsp_at(s, i)) {
        ws = true;
        ++i;
      }
      if (ws) {
        space = len > 0;
        continue;
      }
      if (space)
        ++len;
      space = false;
      ++len;
      commas += c == ',' ? 1 : 0;
      xef += c == '\xEF' ? 1 : 0;
    }
  }
};

bool contains_any(std::string_view hay,
                  std::initializer_list<std::string_view> needles) {
  for (auto n : needles)
    if (hay.find(n) != std::string::npos)
      return true;
  return false;
}

// -- a small mutable DOM built from gumbo -----------------------------------

struct node;

// The children of a node: a run of pointers in the page's arena.
struct node_list {
  node** first = nullptr;
  size_t count = 0;

  node** begin() const {
    return first;
  }

  node** end() const {
    return first + count;
  }

  size_t size() const {
    return count;
  }
};

// The tree points into gumbo's output (attributes, text), which lives as
// long as the dom; nodes, child lists and id/class strings are in the same
// arena, so a node needs no destructor.
struct node {
  GumboTag tag = GUMBO_TAG_UNKNOWN;
  bool text_node = false;
  bool removed = false;
  bool boilerplate = false; // set once before scoring; stays removed
  bool scored = false;
  // Cached answers that depend on the attributes only: -1 unknown.
  mutable signed char unlikely = -1;
  mutable bool weighted = false;
  mutable double weight = 0;
  std::string_view text;     // text nodes only
  std::string_view id_class; // lower-cased "id class", empty when neither
  const GumboVector* attrs = nullptr; // names lower-cased by the parser
  node_list children;
  node* parent = nullptr;
  double score = 0;

  // Only attributes that the pre-scan keeps can be read (kept_attribute).
  std::string_view attr(std::string_view name) const {
    assert(kept_attribute(name));
    if (attrs == nullptr)
      return {};
    for (unsigned i = 0; i < attrs->length; ++i) {
      auto* a = static_cast<const GumboAttribute*>(attrs->data[i]);
      if (name == a->name)
        return a->value;
    }
    return {};
  }

  bool has_attr(std::string_view name) const {
    assert(kept_attribute(name));
    if (attrs == nullptr)
      return false;
    for (unsigned i = 0; i < attrs->length; ++i)
      if (name == static_cast<const GumboAttribute*>(attrs->data[i])->name)
        return true;
    return false;
  }
};

// Memory for one page, released at once: gumbo's output and our tree.
class arena {
public:
  arena() = default;
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  void* allocate(size_t size, size_t align = 16) {
    auto at = (reinterpret_cast<uintptr_t>(cur_) + align - 1) & ~(align - 1);
    if (cur_ == nullptr || at + size > reinterpret_cast<uintptr_t>(end_)) {
      grow(size + align);
      at = (reinterpret_cast<uintptr_t>(cur_) + align - 1) & ~(align - 1);
    }
    cur_ = reinterpret_cast<char*>(at + size);
    return reinterpret_cast<void*>(at);
  }

  std::string_view copy(std::string_view s) {
    if (s.empty())
      return {};
    auto* p = static_cast<char*>(allocate(s.size(), 1));
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

  // For gumbo: its frees are left to the arena's end.
  static void* gumbo_allocate(void* self, size_t size) {
    return static_cast<arena*>(self)->allocate(size);
  }

  static void gumbo_deallocate(void* /*self*/, void* /*ptr*/) {
    // nop
  }

private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* cur_ = nullptr;
  char* end_ = nullptr;
  size_t next_ = size_t{64} << 10;

  void grow(size_t at_least) {
    auto size = std::max(at_least, next_);
    next_ = std::min(next_ * 2, size_t{16} << 20);
    blocks_.emplace_back(new char[size]);
    cur_ = blocks_.back().get();
    end_ = cur_ + size;
  }
};

class dom {
public:
  node* root = nullptr;
  node* html = nullptr;
  node* head = nullptr;
  node* body = nullptr;
  std::vector<std::string> ld_json; // contents of JSON-LD scripts
  std::string title;                // text of the first <title>

  explicit dom(std::string_view source) {
    // Parse errors are never read; recording them copies the stack of open
    // elements for each one, which is quadratic on deep pages. Gumbo's
    // memory comes from the page's arena and is released with it.
    GumboOptions options = kGumboDefaultOptions;
    options.max_errors = 0;
    options.allocator = &arena::gumbo_allocate;
    options.deallocator = &arena::gumbo_deallocate;
    options.userdata = &arena_;
    // Tags nested too deep are dropped before gumbo sees them: its scope
    // checks walk the stack of open elements for every tag. So is the text
    // of scripts and style sheets, which is never read (but JSON-LD's) and
    // which gumbo would tokenize character by character.
    auto limited = prescan_html(source, max_html_depth, true);
    if (limited)
      source = *limited;
    if (current_budget != nullptr)
      current_budget->check();
    auto* out = gumbo_parse_with_options(&options, source.data(), source.size());
    if (current_budget != nullptr)
      current_budget->check();
    root = build(out->root, nullptr, 0);
  }

  dom(const dom&) = delete;
  dom& operator=(const dom&) = delete;

private:
  arena arena_;

  // Concatenated text below `root` (iterative: the tree may be very deep).
  static std::string raw_text(const GumboNode* root) {
    std::string out;
    std::vector<const GumboNode*> stack{root};
    while (!stack.empty()) {
      tick();
      auto* n = stack.back();
      stack.pop_back();
      if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_CDATA
          || n->type == GUMBO_NODE_WHITESPACE) {
        out += n->v.text.text;
      } else if (n->type == GUMBO_NODE_ELEMENT
                 || n->type == GUMBO_NODE_TEMPLATE) {
        auto& kids = n->v.element.children;
        for (unsigned i = kids.length; i > 0; --i)
          stack.push_back(static_cast<const GumboNode*>(kids.data[i - 1]));
      }
    }
    return out;
  }

  // Deeper elements are flattened into their text (bounded recursion).
  static constexpr int max_depth = 400;

  node* build(const GumboNode* g, node* parent, int depth) {
    tick();
    auto* n = new (arena_.allocate(sizeof(node), alignof(node))) node{};
    n->parent = parent;
    if (depth > max_depth && g->type == GUMBO_NODE_ELEMENT) {
      n->text_node = true;
      n->text = arena_.copy(raw_text(g));
      return n;
    }
    if (g->type == GUMBO_NODE_TEXT || g->type == GUMBO_NODE_WHITESPACE
        || g->type == GUMBO_NODE_CDATA) {
      n->text_node = true;
      n->text = g->v.text.text;
      return n;
    }
    const GumboVector* kids = nullptr;
    if (g->type == GUMBO_NODE_DOCUMENT) {
      n->tag = GUMBO_TAG_UNKNOWN;
      kids = &g->v.document.children;
    } else if (g->type == GUMBO_NODE_ELEMENT
               || g->type == GUMBO_NODE_TEMPLATE) {
      auto& el = g->v.element;
      n->tag = el.tag;
      if (el.attributes.length > 0) {
        n->attrs = &el.attributes;
        auto id = n->attr("id");
        auto cls = n->attr("class");
        if (!id.empty() || !cls.empty()) {
          auto size = id.size() + 1 + cls.size();
          auto* p = static_cast<char*>(arena_.allocate(size, 1));
          for (size_t i = 0; i < id.size(); ++i)
            p[i] = sdk::ascii_lower(id[i]);
          p[id.size()] = ' ';
          for (size_t i = 0; i < cls.size(); ++i)
            p[id.size() + 1 + i] = sdk::ascii_lower(cls[i]);
          n->id_class = {p, size};
        }
      }
      kids = &el.children;
      switch (el.tag) {
        case GUMBO_TAG_HTML:
          if (!html)
            html = n;
          break;
        case GUMBO_TAG_HEAD:
          if (!head)
            head = n;
          break;
        case GUMBO_TAG_BODY:
          if (!body)
            body = n;
          break;
        case GUMBO_TAG_TITLE:
          if (title.empty())
            title = fold(raw_text(g));
          return n;
        case GUMBO_TAG_SCRIPT:
          if (sdk::to_lower(n->attr("type")) == "application/ld+json")
            ld_json.push_back(raw_text(g));
          return n;
        case GUMBO_TAG_STYLE:
        case GUMBO_TAG_NOSCRIPT:
        case GUMBO_TAG_TEMPLATE:
          return n;
        default:
          break;
      }
    } else {
      return n; // comments
    }
    if (kids->length == 0)
      return n;
    auto** list = static_cast<node**>(
      arena_.allocate(sizeof(node*) * kids->length, alignof(node*)));
    n->children.first = list;
    for (unsigned i = 0; i < kids->length; ++i) {
      auto* c = static_cast<const GumboNode*>(kids->data[i]);
      if (c->type == GUMBO_NODE_COMMENT)
        continue;
      list[n->children.count++] = build(c, n, depth + 1);
    }
    return n;
  }
};

// -- element classification ---------------------------------------------------

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
  style.erase(std::remove_if(style.begin(), style.end(), sdk::is_ascii_space),
              style.end());
  return style.find("display:none") != std::string::npos
         || style.find("visibility:hidden") != std::string::npos;
}

const std::initializer_list<std::string_view> unlikely_words = {
  "-ad-", "ai2html", "banner", "breadcrumb", "combx", "comment", "community",
  "cover-wrap", "disqus", "extra", "footer", "gdpr", "header", "legends",
  "menu", "related", "remark", "replies", "rss", "shoutbox", "sidebar",
  "skyscraper", "social", "sponsor", "supplemental", "ad-break", "agegate",
  "pagination", "pager", "popup", "yom-remote", "cookie", "consent",
  "newsletter", "subscribe", "promo", "share"};
const std::initializer_list<std::string_view> maybe_words = {
  "and", "article", "body", "column", "content", "main", "shadow"};
const std::initializer_list<std::string_view> positive_words = {
  "article", "body", "content", "entry", "hentry", "h-entry", "main", "page",
  "pagination", "post", "text", "blog", "story"};
const std::initializer_list<std::string_view> negative_words = {
  "-ad-", "hidden", "^hid$", " hid ", "banner", "combx", "comment", "com-",
  "contact", "foot", "footer", "footnote", "gdpr", "masthead", "media",
  "meta", "outbrain", "promo", "related", "scroll", "share", "shoutbox",
  "sidebar", "skyscraper", "sponsor", "shopping", "tags", "widget", "nav",
  "social", "cookie", "popup", "ad-", "advert", "newsletter", "subscribe"};

bool compute_unlikely(const node* n) {
  if (n->id_class.size() <= 1)
    return false;
  if (n->tag == GUMBO_TAG_BODY || n->tag == GUMBO_TAG_A
      || n->tag == GUMBO_TAG_ARTICLE || n->tag == GUMBO_TAG_MAIN)
    return false;
  auto role = n->attr("role");
  if (role == "menu" || role == "menubar" || role == "complementary"
      || role == "navigation" || role == "alert" || role == "alertdialog"
      || role == "dialog")
    return true;
  return contains_any(n->id_class, unlikely_words)
         && !contains_any(n->id_class, maybe_words);
}

bool is_unlikely(const node* n) {
  if (n->unlikely < 0)
    n->unlikely = compute_unlikely(n) ? 1 : 0;
  return n->unlikely > 0;
}

double compute_class_weight(const node* n) {
  if (n->id_class.empty())
    return 0;
  double w = 0;
  auto cls = sdk::to_lower(n->attr("class"));
  auto id = sdk::to_lower(n->attr("id"));
  for (auto* s : {&cls, &id}) {
    if (s->empty())
      continue;
    if (contains_any(*s, negative_words))
      w -= 25;
    if (contains_any(*s, positive_words))
      w += 25;
  }
  return w;
}

double class_weight(const node* n) {
  if (!n->weighted) {
    n->weight = compute_class_weight(n);
    n->weighted = true;
  }
  return n->weight;
}

// -- boilerplate ------------------------------------------------------------------
//
// Before scoring, elements that are boilerplate by their markup are set aside
// for good: the comment section (kept apart as comments), and cookie and
// consent banners, share bars, newsletter boxes, related-article lists,
// navigation, bylines, tags, image credits, ads and dialogs. They are named by
// their id and class tokens, their ARIA role or their tag. An element is only
// set aside when it holds less than 40% of the page's text or is mostly links,
// so a wrapper that happens to carry such a name cannot take the article.

enum class boiler_kind { none, comments, boilerplate, short_boilerplate };

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size()
         && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Substrings of an id or class token that name boilerplate.
const std::initializer_list<std::string_view> boiler_parts = {
  "cookie", "consent", "gdpr", "onetrust", "didomi", "cmp-banner",
  "share", "sharing", "social", "addthis", "sociable", "newsletter",
  "subscribe", "subscription", "signup", "sign-up", "mailchimp", "optin",
  "opt-in", "related", "recommend", "more-stories", "more-articles",
  "read-next", "readnext", "also-read", "next-post", "nextpost",
  "next-story", "nextstory", "prev-post", "previous-post", "outbrain",
  "taboola", "trending",
  "most-read", "mostread", "most-popular", "breadcrumb", "skip-link",
  "skiplink", "pagination", "navbar", "navbox", "navigation", "menu", "toolbar",
  "sidebar", "widget", "advert", "adslot", "ad-slot", "ad-container",
  "ad-wrapper", "adsbygoogle", "sponsor", "promo", "paywall", "author-bio", "author-box", "about-author",
  "author-info", "authorbox", "follow-us", "followus", "print-only", "tagcloud", "tag-cloud", "tag-list", "taglist",
  "post-tags", "entry-tags", "article-tags", "disclaimer-banner", "footer",
  "masthead", "site-header", "global-header", "banner"};

// Substrings that name small blocks: boilerplate only when short.
const std::initializer_list<std::string_view> short_boiler_parts = {
  "byline", "dateline", "credit", "copyright", "post-meta", "entry-meta",
  "article-meta", "authorinfo", "author-name", "authorname", "screen-reader", "sr-only", "visually-hidden",
  "visuallyhidden", "caption-meta", "timestamp", "published-date",
  "publish-date", "pubdate", "reading-time", "read-time"};

boiler_kind classify_token(std::string_view t) {
  // Elementor, a page builder, wraps every block of an article in an
  // "elementor-widget" (a heading, a text, an image): only what follows
  // names the block ("elementor-widget-share-buttons").
  constexpr std::string_view page_builder_widget = "elementor-widget";
  if (starts_with(t, page_builder_widget))
    t.remove_prefix(page_builder_widget.size());
  if (t.empty())
    return boiler_kind::none;
  // A comment section: "comments", "comment-list", "commentlist",
  // "article-comments", "disqus_thread"; not "commentary" (opinion pieces).
  if ((starts_with(t, "comment") && !starts_with(t, "commentar"))
      || ends_with(t, "comments") || ends_with(t, "comment")
      || t.find("disqus") != std::string_view::npos)
    return boiler_kind::comments;
  if (t == "nav" || t == "ad" || t == "ads" || t == "tags" || t == "share"
      || starts_with(t, "login") || starts_with(t, "signin")
      || starts_with(t, "popup") || starts_with(t, "modal-")
      || starts_with(t, "dialog") || ends_with(t, "dialog")
      || starts_with(t, "ad-") || starts_with(t, "ads-") || ends_with(t, "-ad")
      || ends_with(t, "-ads") || starts_with(t, "nav-") || ends_with(t, "-nav"))
    return boiler_kind::boilerplate;
  for (auto p : boiler_parts)
    if (t.find(p) != std::string_view::npos)
      return boiler_kind::boilerplate;
  for (auto p : short_boiler_parts)
    if (t.find(p) != std::string_view::npos)
      return boiler_kind::short_boilerplate;
  return boiler_kind::none;
}

// The strongest kind named by the tokens of `names` (lower-cased id and
// class): comments over boilerplate over short boilerplate.
// The kinds of the tokens seen on a page (pages repeat their class names).
using token_kinds = std::unordered_map<std::string_view, boiler_kind>;

// Calls `f` on each token of `names` (parted by whitespace) until it
// returns true; whether one did.
template <typename F>
bool any_token(std::string_view names, F&& f) {
  size_t pos = 0;
  while (pos < names.size()) {
    auto end = names.find_first_of(" \t\n\r\f", pos);
    if (end == std::string_view::npos)
      end = names.size();
    if (end > pos && f(names.substr(pos, end - pos)))
      return true;
    pos = end + 1;
  }
  return false;
}

boiler_kind classify_names(std::string_view names, token_kinds& cache) {
  auto best = boiler_kind::none;
  any_token(names, [&](std::string_view token) {
    auto known = cache.find(token);
    if (known == cache.end())
      known = cache.emplace(token, classify_token(token)).first;
    auto k = known->second;
    if (k == boiler_kind::comments) {
      best = k;
      return true;
    }
    if (k == boiler_kind::boilerplate
        || (k == boiler_kind::short_boilerplate && best == boiler_kind::none))
      best = k;
    return false;
  });
  return best;
}

boiler_kind classify(const node* n, token_kinds& cache) {
  switch (n->tag) {
    case GUMBO_TAG_BODY:
    case GUMBO_TAG_HTML:
    case GUMBO_TAG_MAIN:
    case GUMBO_TAG_A:
    case GUMBO_TAG_P:
    case GUMBO_TAG_H1:
    case GUMBO_TAG_H2:
    case GUMBO_TAG_H3:
    case GUMBO_TAG_H4:
    case GUMBO_TAG_H5:
    case GUMBO_TAG_H6:
    case GUMBO_TAG_PRE:
    case GUMBO_TAG_CODE:
    case GUMBO_TAG_TABLE:
    case GUMBO_TAG_TBODY:
    case GUMBO_TAG_TR:
    case GUMBO_TAG_TD:
    case GUMBO_TAG_TH:
    case GUMBO_TAG_LI:
    case GUMBO_TAG_B:
    case GUMBO_TAG_STRONG:
    case GUMBO_TAG_EM:
    case GUMBO_TAG_I:
      return boiler_kind::none;
    case GUMBO_TAG_NAV:
    case GUMBO_TAG_ASIDE:
    case GUMBO_TAG_FOOTER:
    case GUMBO_TAG_FORM:
      return boiler_kind::boilerplate;
    default:
      break;
  }
  auto itemtype = n->attr("itemtype");
  if (itemtype.find("schema.org/Comment") != std::string_view::npos
      || n->attr("itemprop") == "comment")
    return boiler_kind::comments;
  auto role = n->attr("role");
  if (role == "navigation" || role == "menu" || role == "menubar"
      || role == "complementary" || role == "contentinfo" || role == "banner"
      || role == "dialog" || role == "alertdialog" || role == "search"
      || role == "toolbar")
    return boiler_kind::boilerplate;
  if (n->id_class.size() <= 1)
    return boiler_kind::none;
  return classify_names(n->id_class, cache);
}

// -- text measures ------------------------------------------------------------

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

// -- setting boilerplate aside ------------------------------------------------------

// Within a comment section: drops the reply form and short "Reply" links.
void trim_comment_section(node* n) {
  tick();
  for (auto* c : n->children) {
    if (c->text_node || c->removed)
      continue;
    if (c->tag == GUMBO_TAG_FORM || c->tag == GUMBO_TAG_BUTTON
        || c->tag == GUMBO_TAG_TEXTAREA || is_hidden(c)
        || (c->id_class.find("reply") != std::string::npos
            && text_len(c) < 30)) {
      c->removed = true;
      continue;
    }
    trim_comment_section(c);
  }
}

class boilerplate_pass {
public:
  explicit boilerplate_pass(node* body) : page_len_(text_len(body)) {
    // nop
  }

  // Marks the boilerplate below `n`; comment sections go to `comments`.
  void run(node* n) {
    tick();
    for (auto* c : n->children) {
      if (c->text_node || c->removed)
        continue;
      if (is_skipped_tag(c->tag))
        continue;
      auto kind = classify(c, token_kinds_);
      if (kind != boiler_kind::none && set_aside(c, kind))
        continue;
      run(c);
    }
  }

  std::vector<node*> comments;

private:
  size_t page_len_;
  token_kinds token_kinds_;

  // The length of the prose below `n`: paragraphs of more than 150
  // characters with few links. Share bars, banners and lists of links have
  // next to none; an article has plenty.
  static size_t prose_len(const node* n) {
    size_t total = 0;
    std::vector<const node*> stack{n};
    while (!stack.empty()) {
      tick();
      auto* cur = stack.back();
      stack.pop_back();
      if (cur->removed || cur->text_node || is_skipped_tag(cur->tag))
        continue;
      if (cur->tag == GUMBO_TAG_P) {
        auto len = text_len(cur);
        if (len > 150 && link_density(cur) < 0.3)
          total += len;
        continue;
      }
      for (auto* c : cur->children)
        stack.push_back(c);
    }
    return total;
  }

  // Whether `n` is or holds the entry itself, as its markup says: an
  // `<article>`, schema.org's articleBody, the microformat `hentry` /
  // `h-entry` / `entry-content`, a "post-body" (Blogger), "post-content" or
  // "article-body". A platform that calls every box a widget (Blogger's
  // "widget Blog" holds the posts) must not lose the post with the box.
  static bool holds_entry(const node* n) {
    std::vector<const node*> stack{n};
    while (!stack.empty()) {
      tick();
      auto* cur = stack.back();
      stack.pop_back();
      if (cur->text_node || cur->removed || is_skipped_tag(cur->tag))
        continue;
      if (cur->tag == GUMBO_TAG_ARTICLE || cur->attr("itemprop") == "articleBody")
        return true;
      if (has_entry_name(cur->id_class))
        return true;
      for (auto* c : cur->children)
        stack.push_back(c);
    }
    return false;
  }

  static bool has_entry_name(std::string_view names) {
    return any_token(names, [](std::string_view t) {
      return t == "hentry" || t == "h-entry" || t == "entry-content" || t == "post-body"
             || t == "post-content" || t == "article-body" || t == "articlebody";
    });
  }

  bool set_aside(node* c, boiler_kind kind) {
    auto len = text_len(c);
    if (kind == boiler_kind::short_boilerplate && len > 250)
      return false;
    bool small = len * 10 < page_len_ * 4;
    if (!small && link_density(c) <= 0.5)
      return false;
    // A name is not enough to drop prose (a section whose id is made from
    // its heading, a page inside a "modal" frame); comments are prose.
    if (kind == boiler_kind::boilerplate && len > 600 && prose_len(c) > 600)
      return false;
    // Nor is it enough to drop the entry: its boxes are looked at one by one.
    if (kind == boiler_kind::boilerplate && len > 200 && holds_entry(c))
      return false;
    c->boilerplate = true;
    c->removed = true;
    // Comments are a block of some length; a small inline note with such a
    // name is boilerplate only.
    if (kind == boiler_kind::comments && len >= 30 && is_block(c->tag)
        && link_density(c) < 0.5)
      comments.push_back(c);
    return true;
  }
};

// The rows and the widest row's cells of a table (not of nested ones).
std::pair<size_t, size_t> table_shape(const node* n) {
  size_t rows = 0;
  size_t columns = 0;
  for (auto* c : n->children) {
    if (c->text_node || c->removed)
      continue;
    if (c->tag == GUMBO_TAG_TR) {
      ++rows;
      size_t cells = 0;
      for (auto* d : c->children)
        if (!d->text_node && (d->tag == GUMBO_TAG_TD || d->tag == GUMBO_TAG_TH))
          ++cells;
      columns = std::max(columns, cells);
    } else if (c->tag == GUMBO_TAG_THEAD || c->tag == GUMBO_TAG_TBODY
               || c->tag == GUMBO_TAG_TFOOT) {
      auto [r, k] = table_shape(c);
      rows += r;
      columns = std::max(columns, k);
    }
  }
  return {rows, columns};
}

// Whether a table holds data rather than layout: no table inside, at least
// two columns, and header cells, a caption or more than 10 cells.
bool is_data_table(const node* n) {
  if (count_tag(n, GUMBO_TAG_TABLE) > 0)
    return false;
  auto [rows, columns] = table_shape(n);
  if (columns < 2)
    return false;
  return count_tag(n, GUMBO_TAG_TH) > 0 || count_tag(n, GUMBO_TAG_CAPTION) > 0
         || rows * columns > 10;
}

// -- readability ----------------------------------------------------------------

struct flags {
  bool strip_unlikely = true;
  bool weight_classes = true;
  bool clean_conditionally = true;
};

class readability {
public:
  readability(node* body, flags f) : body_(body), flags_(f) {
    // nop
  }

  // Returns the rendered article (empty when nothing was found).
  node* run() {
    std::vector<node*> to_score;
    prepare(body_, to_score);
    std::vector<node*> candidates;
    for (auto* el : to_score) {
      tick();
      if (!el->parent || el->removed)
        continue;
      auto text = measure_text(el);
      if (text.len < 25)
        continue;
      double s = 1 + static_cast<double>(text.commas)
                 + static_cast<double>(text.xef / 2)
                 + std::min(std::floor(static_cast<double>(text.len) / 100),
                            3.0);
      auto* anc = el->parent;
      for (int level = 0; anc && level < 5; ++level, anc = anc->parent) {
        if (anc->tag == GUMBO_TAG_UNKNOWN || anc->text_node || !anc->parent)
          break;
        if (!anc->scored) {
          init_score(anc);
          candidates.push_back(anc);
        }
        double divider = level == 0 ? 1 : level == 1 ? 2 : level * 3;
        anc->score += s / divider;
      }
    }
    node* top = nullptr;
    std::vector<node*> best;
    for (auto* c : candidates) {
      c->score *= 1 - link_density(c);
      best.push_back(c);
    }
    std::sort(best.begin(), best.end(),
              [](node* a, node* b) { return a->score > b->score; });
    if (best.size() > 5)
      best.resize(5);
    if (best.empty() || best.front()->tag == GUMBO_TAG_BODY)
      return body_;
    top = best.front();
    // Several good candidates sharing an ancestor: use the ancestor.
    std::vector<node*> alternatives;
    for (size_t i = 1; i < best.size(); ++i)
      if (best[i]->score / top->score >= 0.75)
        alternatives.push_back(best[i]);
    if (alternatives.size() >= 3) {
      for (auto* p = top->parent; p && p->tag != GUMBO_TAG_BODY;
           p = p->parent) {
        int shared = 0;
        for (auto* alt : alternatives)
          for (auto* q = alt; q; q = q->parent)
            if (q == p) {
              ++shared;
              break;
            }
        if (shared >= 3) {
          top = p;
          break;
        }
      }
    }
    if (!top->scored)
      init_score(top);
    // Climb while the parent scores better than the last node.
    auto last = top->score;
    auto threshold = last / 3;
    for (auto* p = top->parent; p && p->tag != GUMBO_TAG_BODY;
         p = p->parent) {
      if (!p->scored)
        continue;
      if (p->score < threshold)
        break;
      if (p->score > last) {
        top = p;
        break;
      }
      last = p->score;
    }
    // A lone child: the parent wraps it.
    while (top->parent && top->parent->tag != GUMBO_TAG_BODY
           && visible_children(top->parent) == 1)
      top = top->parent;
    // The page marks its article body (schema.org microdata) inside the
    // chosen element, which has more than twice its text: the marked
    // element is the article and the rest boilerplate around it.
    if (article_bodies_.size() == 1 && !article_bodies_.front()->removed) {
      auto* marked = article_bodies_.front();
      bool inside = false;
      for (auto* p = marked->parent; p != nullptr && !inside; p = p->parent)
        inside = p == top;
      if (inside) {
        auto len = text_len(marked);
        if (len >= 500 && 2 * len < text_len(top)) {
          if (!marked->scored)
            init_score(marked);
          top = marked;
        }
      }
    }
    return top;
  }

  // Siblings of `top` that belong to the article, in document order.
  std::vector<node*> gather(node* top) {
    std::vector<node*> out;
    if (!top->parent || top->tag == GUMBO_TAG_BODY) {
      out.push_back(top);
      return out;
    }
    double threshold = std::max(10.0, top->score * 0.2);
    auto top_class = std::string{top->attr("class")};
    for (auto* s : top->parent->children) {
      if (s->removed)
        continue;
      if (s == top) {
        out.push_back(s);
        continue;
      }
      if (s->text_node)
        continue;
      double bonus = 0;
      if (!top_class.empty() && s->attr("class") == top_class)
        bonus += top->score * 0.2;
      if (s->scored && s->score + bonus >= threshold) {
        out.push_back(s);
        continue;
      }
      if (s->tag == GUMBO_TAG_P) {
        auto ld = link_density(s);
        auto text = inner_text(s);
        if (text.size() > 80 && ld < 0.25)
          out.push_back(s);
        else if (text.size() < 80 && !text.empty() && ld == 0
                 && text.find(". ") != std::string::npos)
          out.push_back(s);
        else if (text.size() < 80 && !text.empty() && ld == 0
                 && text.back() == '.')
          out.push_back(s);
      }
    }
    return out;
  }

  // Removes boilerplate below the article's root.
  void clean(node* n) {
    tick();
    for (auto* c : n->children) {
      if (c->removed || c->text_node)
        continue;
      switch (c->tag) {
        case GUMBO_TAG_FORM:
        case GUMBO_TAG_FIELDSET:
        case GUMBO_TAG_FOOTER:
        case GUMBO_TAG_ASIDE:
        case GUMBO_TAG_NAV:
        case GUMBO_TAG_BUTTON:
        case GUMBO_TAG_INPUT:
        case GUMBO_TAG_SELECT:
        case GUMBO_TAG_TEXTAREA:
          c->removed = true;
          continue;
        default:
          break;
      }
      // A data table is content as a whole: its cells are not cleaned
      // (their lists of links are part of it).
      if (c->tag == GUMBO_TAG_TABLE && is_data_table(c)
          && link_density(c) < 0.5)
        continue;
      if (flags_.clean_conditionally) {
        if (c->tag == GUMBO_TAG_H1 || c->tag == GUMBO_TAG_H2
            || c->tag == GUMBO_TAG_H3) {
          if (class_weight(c) < 0 || link_density(c) > 0.33) {
            c->removed = true;
            continue;
          }
        }
        if (c->tag == GUMBO_TAG_TABLE || c->tag == GUMBO_TAG_UL
            || c->tag == GUMBO_TAG_OL || c->tag == GUMBO_TAG_DIV
            || c->tag == GUMBO_TAG_SECTION || c->tag == GUMBO_TAG_HEADER
            || c->tag == GUMBO_TAG_FIGURE) {
          clean(c);
          if (clean_conditionally(c))
            c->removed = true;
          continue;
        }
      }
      clean(c);
    }
  }

private:
  node* body_;
  flags flags_;
  std::vector<node*> article_bodies_;

  static size_t visible_children(const node* n) {
    size_t k = 0;
    for (auto* c : n->children) {
      if (c->removed)
        continue;
      if (c->text_node) {
        if (has_visible(c->text))
          return 2;
        continue;
      }
      ++k;
    }
    return k;
  }

  void init_score(node* n) {
    n->scored = true;
    double s = 0;
    switch (n->tag) {
      case GUMBO_TAG_DIV:
      case GUMBO_TAG_ARTICLE:
        s = 5;
        break;
      case GUMBO_TAG_PRE:
      case GUMBO_TAG_TD:
      case GUMBO_TAG_BLOCKQUOTE:
        s = 3;
        break;
      case GUMBO_TAG_ADDRESS:
      case GUMBO_TAG_OL:
      case GUMBO_TAG_UL:
      case GUMBO_TAG_DL:
      case GUMBO_TAG_DD:
      case GUMBO_TAG_DT:
      case GUMBO_TAG_LI:
      case GUMBO_TAG_FORM:
        s = -3;
        break;
      case GUMBO_TAG_H1:
      case GUMBO_TAG_H2:
      case GUMBO_TAG_H3:
      case GUMBO_TAG_H4:
      case GUMBO_TAG_H5:
      case GUMBO_TAG_H6:
      case GUMBO_TAG_TH:
        s = -5;
        break;
      default:
        break;
    }
    if (flags_.weight_classes)
      s += class_weight(n);
    n->score = s;
  }

  // Marks hidden and unlikely elements removed; collects the nodes to score.
  void prepare(node* n, std::vector<node*>& to_score) {
    tick();
    for (auto* c : n->children) {
      if (c->text_node || c->removed)
        continue;
      if (is_skipped_tag(c->tag) || is_hidden(c)) {
        c->removed = true;
        continue;
      }
      if (flags_.strip_unlikely && is_unlikely(c)) {
        c->removed = true;
        continue;
      }
      if (sdk::to_lower(c->attr("itemprop")) == "articlebody")
        article_bodies_.push_back(c);
      switch (c->tag) {
        case GUMBO_TAG_P:
        case GUMBO_TAG_PRE:
        case GUMBO_TAG_TD:
        case GUMBO_TAG_SECTION:
        case GUMBO_TAG_H2:
        case GUMBO_TAG_H3:
        case GUMBO_TAG_H4:
        case GUMBO_TAG_H5:
        case GUMBO_TAG_H6:
          to_score.push_back(c);
          break;
        case GUMBO_TAG_DIV:
          if (!has_block_child(c))
            to_score.push_back(c);
          else if (has_direct_text(c))
            to_score.push_back(c);
          break;
        default:
          break;
      }
      prepare(c, to_score);
    }
  }

  static bool has_direct_text(const node* n) {
    size_t len = 0;
    for (auto* c : n->children)
      if (c->text_node) {
        text_measure m;
        m.add(c->text);
        len += m.len;
      }
    return len >= 25;
  }

  bool clean_conditionally(node* n) {
    double weight = flags_.weight_classes ? class_weight(n) : 0;
    double score = n->scored ? n->score : 0;
    if (weight + score < 0)
      return true;
    auto text = measure_text(n);
    if (text.commas >= 10)
      return false;
    // Data tables and code are content.
    if (n->tag == GUMBO_TAG_TABLE && count_tag(n, GUMBO_TAG_TH) > 0)
      return false;
    if (count_tag(n, GUMBO_TAG_PRE) > 0 || count_tag(n, GUMBO_TAG_CODE) > 2)
      return false;
    auto p = static_cast<double>(count_tag(n, GUMBO_TAG_P));
    auto img = static_cast<double>(count_tag(n, GUMBO_TAG_IMG));
    auto li = static_cast<double>(count_tag(n, GUMBO_TAG_LI)) - 100;
    auto input = static_cast<double>(count_tag(n, GUMBO_TAG_INPUT));
    auto headings = static_cast<double>(
      count_tag(n, GUMBO_TAG_H1) + count_tag(n, GUMBO_TAG_H2)
      + count_tag(n, GUMBO_TAG_H3) + count_tag(n, GUMBO_TAG_H4));
    auto len = static_cast<double>(text.len);
    auto ld = link_density(n);
    bool is_list = n->tag == GUMBO_TAG_UL || n->tag == GUMBO_TAG_OL;
    if (len == 0)
      return img == 0 && n->tag != GUMBO_TAG_TABLE;
    if (img > 1 && p / img < 0.5)
      return true;
    if (!is_list && li > p)
      return true;
    if (input > std::floor(p / 3))
      return true;
    if (!is_list && headings / std::max(1.0, p) > 0.9 && len < 25
        && img == 0)
      return true;
    if (!is_list && len < 25 && (img == 0 || img > 2) && ld > 0)
      return true;
    // A short label left over when the links it introduced were cleaned
    // away ("Further reading" over a removed box of links, "Advertisement"
    // over a removed banner link).
    if (!is_list && len < 25 && img == 0
        && std::any_of(n->children.begin(), n->children.end(),
                       [](const node* k) {
                         return k->removed && !k->text_node && holds_link(k);
                       }))
      return true;
    if (weight < 25 && ld > (is_list ? 0.5 : 0.2))
      return true;
    if (weight >= 25 && ld > 0.5)
      return true;
    return false;
  }
};

// -- renderer -----------------------------------------------------------------

class renderer {
public:
  std::string out;

  void render(const node* n) {
    tick();
    if (n->removed)
      return;
    if (n->text_node) {
      if (pre_ > 0)
        out += n->text;
      else
        inline_text(n->text);
      return;
    }
    if (is_skipped_tag(n->tag) || is_hidden(n))
      return;
    switch (n->tag) {
      case GUMBO_TAG_BR:
        if (pre_ > 0)
          out += '\n';
        else
          newline();
        return;
      case GUMBO_TAG_HR:
        blank();
        return;
      case GUMBO_TAG_H1:
      case GUMBO_TAG_H2:
      case GUMBO_TAG_H3:
      case GUMBO_TAG_H4:
      case GUMBO_TAG_H5:
      case GUMBO_TAG_H6: {
        auto text = inner_text(n);
        if (text.empty())
          return;
        blank();
        out.append(static_cast<size_t>(n->tag - GUMBO_TAG_H1 + 1), '#');
        out += ' ';
        out += text;
        blank();
        return;
      }
      case GUMBO_TAG_PRE:
        if (pre_ > 0)
          children(n);
        else
          code_block(n);
        return;
      case GUMBO_TAG_CODE:
        if (pre_ > 0) {
          children(n);
        } else if (is_multiline(n)) {
          code_block(n);
        } else {
          auto text = inner_text(n);
          if (!text.empty()) {
            auto fence = text.find('`') == std::string::npos ? "`" : "``";
            inline_text(fence + text + fence);
          }
        }
        return;
      case GUMBO_TAG_UL:
      case GUMBO_TAG_OL: {
        if (lists_.empty())
          blank();
        else
          newline();
        lists_.push_back(n->tag == GUMBO_TAG_OL ? 1 : 0);
        children(n);
        lists_.pop_back();
        if (lists_.empty())
          blank();
        else
          newline();
        return;
      }
      case GUMBO_TAG_LI: {
        newline();
        if (!lists_.empty()) {
          out.append((lists_.size() - 1) * 2, ' ');
          if (lists_.back() > 0)
            out += std::to_string(lists_.back()++) + ". ";
          else
            out += "- ";
        } else {
          out += "- ";
        }
        at_line_start_ = true;
        children(n);
        newline();
        return;
      }
      case GUMBO_TAG_TABLE:
        if (pre_ == 0 && table(n))
          return;
        break;
      default:
        break;
    }
    if (pre_ > 0) {
      // Inside a code block a block element is a line of its own.
      bool block = is_block(n->tag);
      if (block && !out.empty() && out.back() != '\n')
        out += '\n';
      children(n);
      if (block && !out.empty() && out.back() != '\n')
        out += '\n';
      return;
    }
    bool block = is_block(n->tag);
    if (block)
      paragraph_break(n->tag);
    children(n);
    if (block)
      paragraph_break(n->tag);
  }

  std::string finish() {
    while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
      out.pop_back();
    size_t start = 0;
    while (start < out.size() && (out[start] == '\n' || out[start] == ' '))
      ++start;
    return out.substr(start);
  }

private:
  int pre_ = 0;
  bool at_line_start_ = true;
  bool pending_space_ = false;
  std::vector<int> lists_;

  void children(const node* n) {
    for (auto* c : n->children)
      render(c);
  }

  // Whether the text below `n` has a line break (a <code> used as a block).
  static bool is_multiline(const node* n) {
    std::vector<const node*> stack{n};
    while (!stack.empty()) {
      auto* cur = stack.back();
      stack.pop_back();
      if (cur->removed)
        continue;
      if (cur->text_node) {
        if (cur->text.find('\n') != std::string::npos)
          return true;
        continue;
      }
      if (cur->tag == GUMBO_TAG_BR)
        return true;
      for (auto* c : cur->children)
        stack.push_back(c);
    }
    return false;
  }

  // The language of a code block from a `language-x` or `lang-x` class on
  // it or on a <code> inside.
  static std::string code_language(const node* n) {
    for (int depth = 0; n != nullptr && depth < 3; ++depth) {
      auto cls = sdk::to_lower(n->attr("class"));
      for (std::string_view prefix : {"language-", "lang-"}) {
        auto pos = cls.find(prefix);
        if (pos == std::string::npos
            || (pos > 0 && !sdk::is_ascii_space(cls[pos - 1])))
          continue;
        pos += prefix.size();
        auto end = pos;
        while (end < cls.size()
               && (std::isalnum(static_cast<unsigned char>(cls[end]))
                   || cls[end] == '+' || cls[end] == '-' || cls[end] == '#'
                   || cls[end] == '_'))
          ++end;
        return cls.substr(pos, end - pos);
      }
      const node* next = nullptr;
      for (auto* c : n->children)
        if (!c->text_node && c->tag == GUMBO_TAG_CODE) {
          next = c;
          break;
        }
      n = next;
    }
    return {};
  }

  // A fenced code block: the text verbatim (whitespace kept), fenced with
  // more backticks than any run inside it.
  void code_block(const node* n) {
    blank();
    std::string saved;
    std::swap(saved, out);
    ++pre_;
    children(n);
    --pre_;
    std::string code;
    std::swap(code, out);
    out = std::move(saved);
    while (!code.empty() && (code.back() == '\n' || code.back() == ' '
                             || code.back() == '\t' || code.back() == '\r'))
      code.pop_back();
    while (!code.empty() && code.front() == '\n')
      code.erase(0, 1);
    if (code.empty())
      return;
    size_t longest = 0;
    size_t run = 0;
    for (auto c : code) {
      run = c == '`' ? run + 1 : 0;
      longest = std::max(longest, run);
    }
    std::string fence(std::max<size_t>(3, longest + 1), '`');
    out += fence;
    out += code_language(n);
    out += '\n';
    out += code;
    out += '\n';
    out += fence;
    blank();
  }

  // A cell's content on one line, with `|` escaped.
  static std::string cell_text(const node* cell) {
    renderer r;
    r.children(cell);
    auto text = fold(r.finish());
    std::string out;
    out.reserve(text.size());
    for (auto c : text) {
      if (c == '|')
        out += '\\';
      out += c;
    }
    return out;
  }

  // The rows of a table (also inside thead/tbody/tfoot), not of nested ones.
  static void table_rows(const node* n, std::vector<const node*>& rows) {
    for (auto* c : n->children) {
      if (c->text_node || c->removed)
        continue;
      if (c->tag == GUMBO_TAG_TR)
        rows.push_back(c);
      else if (c->tag == GUMBO_TAG_THEAD || c->tag == GUMBO_TAG_TBODY
               || c->tag == GUMBO_TAG_TFOOT)
        table_rows(c, rows);
    }
  }

  // Renders a data table as a Markdown table and returns true; returns
  // false (rendering nothing) for a layout table: one with a table inside,
  // a single column or a cell of more than 400 characters.
  bool table(const node* n) {
    std::vector<const node*> rows;
    table_rows(n, rows);
    if (rows.empty() || count_tag(n, GUMBO_TAG_TABLE) > 0)
      return false;
    std::vector<std::vector<std::string>> cells;
    size_t columns = 0;
    for (auto* row : rows) {
      std::vector<std::string> line;
      for (auto* c : row->children) {
        if (c->text_node || c->removed || is_hidden(c)
            || (c->tag != GUMBO_TAG_TD && c->tag != GUMBO_TAG_TH))
          continue;
        auto text = cell_text(c);
        if (text.size() > 400)
          return false;
        line.push_back(std::move(text));
        // A cell spanning several columns is followed by empty ones.
        auto span = std::atoi(std::string{c->attr("colspan")}.c_str());
        for (int i = 1; i < std::min(span, 32); ++i)
          line.emplace_back();
      }
      bool empty = std::all_of(line.begin(), line.end(),
                               [](const std::string& x) { return x.empty(); });
      if (empty)
        continue;
      columns = std::max(columns, line.size());
      cells.push_back(std::move(line));
    }
    if (cells.empty())
      return true;
    if (columns < 2)
      return false;
    blank();
    for (auto* c : n->children)
      if (!c->text_node && !c->removed && c->tag == GUMBO_TAG_CAPTION) {
        auto caption = fold(cell_text(c));
        if (!caption.empty()) {
          out += caption;
          blank();
        }
      }
    for (size_t i = 0; i < cells.size(); ++i) {
      auto& line = cells[i];
      line.resize(columns);
      out += '|';
      for (auto& cell : line) {
        out += ' ';
        out += cell;
        out += cell.empty() ? "|" : " |";
      }
      out += '\n';
      if (i == 0) {
        out += '|';
        for (size_t k = 0; k < columns; ++k)
          out += " --- |";
        out += '\n';
      }
    }
    at_line_start_ = true;
    pending_space_ = false;
    blank();
    return true;
  }

  void paragraph_break(GumboTag t) {
    if (t == GUMBO_TAG_DIV || t == GUMBO_TAG_DT || t == GUMBO_TAG_DD
        || t == GUMBO_TAG_FIGCAPTION || t == GUMBO_TAG_SUMMARY)
      newline();
    else
      blank();
  }

  void newline() {
    pending_space_ = false;
    at_line_start_ = true;
    if (!out.empty() && out.back() != '\n')
      out += '\n';
  }

  void blank() {
    newline();
    if (out.size() >= 2 && out[out.size() - 2] == '\n')
      return;
    if (!out.empty())
      out += '\n';
  }

  void inline_text(std::string_view text) {
    if (text.empty())
      return;
    // A no-break space at either end separates words too ("mein&nbsp;<a>
    // Lieblingskleid</a>&nbsp;vereint").
    bool lead = sdk::is_ascii_space(text.front()) || nbsp_at(text, 0);
    bool trail = sdk::is_ascii_space(text.back())
                 || (text.size() >= 2 && nbsp_at(text, text.size() - 2));
    auto folded = fold(text);
    if (folded.empty()) {
      if (!at_line_start_)
        pending_space_ = true;
      return;
    }
    if ((lead || pending_space_) && !at_line_start_ && !out.empty()
        && out.back() != ' ' && out.back() != '\n')
      out += ' ';
    out += folded;
    at_line_start_ = false;
    pending_space_ = trail;
  }
};

std::string render_nodes(const std::vector<node*>& nodes) {
  renderer r;
  for (auto* n : nodes)
    r.render(n);
  return r.finish();
}

// -- metadata -------------------------------------------------------------------

// Drops markup that some sites leave inside JSON-LD strings.
std::string strip_tags(const std::string& s) {
  if (s.find('<') == std::string::npos)
    return s;
  std::string out;
  bool in_tag = false;
  for (auto c : s) {
    if (c == '<')
      in_tag = true;
    else if (c == '>')
      in_tag = false;
    else if (!in_tag)
      out += c;
  }
  return out;
}

std::string json_text(const nlohmann::json& j) {
  if (j.is_string())
    return fold(strip_tags(j.get<std::string>()));
  if (j.is_object()) {
    if (j.contains("name"))
      return json_text(j["name"]);
    if (j.contains("legalName"))
      return json_text(j["legalName"]);
    std::string out;
    for (auto key : {"givenName", "additionalName", "familyName"}) {
      if (!j.contains(key))
        continue;
      auto part = json_text(j[key]);
      if (part.empty())
        continue;
      if (!out.empty())
        out += ' ';
      out += part;
    }
    return out;
  }
  if (j.is_array()) {
    std::string out;
    for (auto& e : j) {
      auto s = json_text(e);
      if (s.empty())
        continue;
      if (!out.empty())
        out += "; ";
      out += s;
    }
    return out;
  }
  return {};
}

bool is_article_type(const std::string& l) {
  return l.find("article") != std::string::npos
         || l.find("posting") != std::string::npos || l == "report"
         || l == "review" || l == "recipe" || l == "creativework"
         || l == "blog";
}

struct ld_meta {
  std::string title, author, published, modified, publisher, type;
  // The page's <title>, to choose between `headline` and `name`.
  std::string page_title;
  // Objects with an "@id" and a name, to resolve references such as
  // "author": {"@id": "...#/schema/person/1"} (Yoast's graphs).
  std::unordered_map<std::string, const nlohmann::json*> ids;
};

// Records the named objects of a JSON-LD document by their "@id".
void index_ld(const nlohmann::json& j, ld_meta& m, int depth) {
  if (depth > 8)
    return;
  if (j.is_array()) {
    for (auto& e : j)
      index_ld(e, m, depth + 1);
    return;
  }
  if (!j.is_object())
    return;
  if (auto id = j.find("@id"); id != j.end() && id->is_string()
      && (j.contains("name") || j.contains("givenName")))
    m.ids.emplace(id->get<std::string>(), &j);
  for (auto& [key, value] : j.items())
    if (value.is_object() || value.is_array())
      index_ld(value, m, depth + 1);
}

// The text of a JSON-LD value, references by "@id" followed once.
std::string ld_text(const nlohmann::json& j, const ld_meta& m) {
  auto deref = [&](const nlohmann::json& v) -> const nlohmann::json& {
    if (v.is_object() && !v.contains("name") && !v.contains("givenName"))
      if (auto id = v.find("@id"); id != v.end() && id->is_string())
        if (auto i = m.ids.find(id->get<std::string>()); i != m.ids.end())
          return *i->second;
    return v;
  };
  if (j.is_array()) {
    std::string out;
    for (auto& e : j) {
      auto s = json_text(deref(e));
      if (s.empty())
        continue;
      if (!out.empty())
        out += "; ";
      out += s;
    }
    return out;
  }
  return json_text(deref(j));
}

// The share of the words of `a` (lower-cased, split at spaces) found in `b`.
double shared_words(const std::string& a, const std::string& b) {
  auto lb = " " + sdk::to_lower(fold(b)) + " ";
  auto la = sdk::to_lower(fold(a));
  size_t words = 0;
  size_t found = 0;
  size_t pos = 0;
  while (pos < la.size()) {
    auto end = la.find(' ', pos);
    if (end == std::string::npos)
      end = la.size();
    ++words;
    if (lb.find(" " + la.substr(pos, end - pos) + " ") != std::string::npos)
      ++found;
    pos = end + 1;
  }
  return words == 0 ? 0 : static_cast<double>(found) / static_cast<double>(words);
}

std::string type_label(const nlohmann::json& type) {
  if (type.is_string())
    return type.get<std::string>();
  if (type.is_array() && !type.empty() && type.front().is_string())
    return type.front().get<std::string>();
  return {};
}

// First pass (strict): article-like objects only; second pass: any object.
// An object is read before the objects inside it.
void scan_ld(const nlohmann::json& j, ld_meta& m, int depth, bool strict) {
  if (depth > 8)
    return;
  if (j.is_array()) {
    for (auto& e : j)
      scan_ld(e, m, depth + 1, strict);
    return;
  }
  if (!j.is_object())
    return;
  auto read = [&] {
    auto label = type_label(j.contains("@type") ? j["@type"] : nlohmann::json{});
    auto type = sdk::to_lower(label);
    if ((type == "website" || type == "organization"
         || type == "newsmediaorganization")
        && m.publisher.empty())
      m.publisher = json_text(j);
    bool article = is_article_type(type);
    if (strict && !article)
      return;
    if (!strict && (type == "website" || type == "organization"
                    || type == "person" || type == "imageobject"
                    || type == "breadcrumblist"))
      return;
    if (article && m.type.empty())
      m.type = label;
    if (m.title.empty() && article) {
      auto headline = j.contains("headline") ? json_text(j["headline"])
                                             : std::string{};
      auto name = j.contains("name") ? json_text(j["name"]) : std::string{};
      auto in_title = [&](const std::string& x) {
        return !x.empty()
               && sdk::to_lower(m.page_title).find(sdk::to_lower(x))
                    != std::string::npos;
      };
      // Both given and different: the name when the page's <title> repeats
      // it and shares few words with the headline.
      if (headline.empty() || (!name.empty() && name != headline
                               && in_title(name) && !in_title(headline)
                               && shared_words(headline, m.page_title) < 0.5))
        m.title = name;
      else
        m.title = headline;
    }
    if (m.author.empty() && j.contains("author"))
      m.author = ld_text(j["author"], m);
    if (m.author.empty() && j.contains("creator"))
      m.author = ld_text(j["creator"], m);
    if (m.published.empty() && j.contains("datePublished"))
      m.published = json_text(j["datePublished"]);
    if (m.published.empty() && j.contains("dateCreated"))
      m.published = json_text(j["dateCreated"]);
    if (m.modified.empty() && j.contains("dateModified"))
      m.modified = json_text(j["dateModified"]);
    if (article && j.contains("publisher")) {
      auto p = ld_text(j["publisher"], m);
      if (!p.empty())
        m.publisher = p;
    }
  };
  read();
  for (auto key : {"@graph", "entries", "mainEntity", "liveBlogUpdate"})
    if (j.contains(key))
      scan_ld(j[key], m, depth + 1, strict);
}

// `ref` resolved against the page's address (RFC 3986), or alone when the
// page has no usable address; empty when it is no URL.
std::string resolve_link(std::string_view base, std::string_view ref) {
  auto r = fold(ref);
  if (r.empty())
    return r;
  if (!base.empty())
    if (auto resolved = fetch::resolve_url(base, r);
        auto* u = std::get_if<fetch::url>(&resolved))
      return u->text;
  auto alone = fetch::parse_url(r);
  auto* u = std::get_if<fetch::url>(&alone);
  return u != nullptr ? u->text : std::string{};
}

void collect_meta(const node* n, std::unordered_map<std::string, std::string>& m,
                  std::string& canonical) {
  tick();
  if (n->text_node)
    return;
  if (n->tag == GUMBO_TAG_META) {
    auto content = fold(n->attr("content"));
    if (!content.empty()) {
      // `property` may hold several space-separated names.
      for (auto key_attr : {"property", "name", "itemprop"}) {
        auto keys = sdk::to_lower(n->attr(key_attr));
        size_t pos = 0;
        while (pos < keys.size()) {
          auto end = keys.find(' ', pos);
          if (end == std::string::npos)
            end = keys.size();
          auto key = keys.substr(pos, end - pos);
          if (!key.empty() && m.find(key) == m.end())
            m.emplace(key, content);
          pos = end + 1;
        }
      }
    }
  } else if (n->tag == GUMBO_TAG_LINK) {
    auto rel = sdk::to_lower(n->attr("rel"));
    if (rel == "canonical" && canonical.empty())
      canonical = std::string{n->attr("href")};
  } else if (n->attrs != nullptr && n->attrs->length > 0) {
    // Dates in the page: itemprop=datePublished/dateModified on any element,
    // <time pubdate>, a <time> whose class says updated/modified, and the
    // first <time datetime> as a last resort.
    auto value = fold(n->attr("datetime"));
    if (value.empty())
      value = fold(n->attr("content"));
    if (!value.empty()) {
      auto itemprop = sdk::to_lower(n->attr("itemprop"));
      if (itemprop == "datepublished" || itemprop == "datemodified"
          || itemprop == "datecreated")
        m.emplace(itemprop, value);
      if (n->tag == GUMBO_TAG_TIME && !n->attr("datetime").empty()) {
        if (n->has_attr("pubdate"))
          m.emplace("time:pubdate", value);
        if (n->id_class.find("updated") != std::string::npos
            || n->id_class.find("modified") != std::string::npos)
          m.emplace("time:modified", value);
        else
          m.emplace("time:first", value);
      }
    }
  }
  for (auto* c : n->children)
    collect_meta(c, m, canonical);
}

std::string first_of(const std::unordered_map<std::string, std::string>& m,
                     std::initializer_list<const char*> keys) {
  for (auto k : keys)
    if (auto i = m.find(k); i != m.end() && !i->second.empty())
      return i->second;
  return {};
}

// Readability's title clean-up: drop " | Site" style suffixes when the rest
// is long enough.
std::string clean_title(const std::string& title) {
  for (auto sep : {" | ", " - ", " – ", " — ", " :: ", " / ", " » "}) {
    auto pos = title.rfind(sep);
    if (pos == std::string::npos)
      continue;
    auto head = title.substr(0, pos);
    size_t words = 1 + static_cast<size_t>(std::count(head.begin(), head.end(), ' '));
    if (words >= 3)
      return head;
    auto first = title.find(sep);
    auto tail = title.substr(first + std::string_view{sep}.size());
    size_t twords = 1 + static_cast<size_t>(std::count(tail.begin(), tail.end(), ' '));
    if (twords >= 3 && first != pos)
      return tail;
    return title;
  }
  return title;
}

std::string h_text_of_first(const node* n, GumboTag tag) {
  tick();
  if (n->text_node)
    return {};
  if (n->tag == tag)
    return inner_text(n);
  for (auto* c : n->children) {
    auto s = h_text_of_first(c, tag);
    if (!s.empty())
      return s;
  }
  return {};
}

// A byline in the page: rel=author, itemprop=author or a "byline" class.
std::string dom_byline(const node* n, int depth) {
  tick();
  if (n->text_node || depth > 200 || is_skipped_tag(n->tag))
    return {};
  auto itemprop = sdk::to_lower(n->attr("itemprop"));
  if (n->attr("rel") == "author"
      || itemprop.find("author") != std::string::npos
      || n->id_class.find("byline") != std::string::npos) {
    auto text = inner_text(n);
    if (!text.empty() && text.size() < 100)
      return text;
  }
  for (auto* c : n->children) {
    auto s = dom_byline(c, depth + 1);
    if (!s.empty())
      return s;
  }
  return {};
}

// Authors as "A; B; C": a leading "By" (or "Par", "Von", "Por", "Di",
// "Door", "Av") dropped and names separated by commas, "and", "&" or ";"
// split. Left as it is (but for the "By") when long (a sentence rather
// than names) or when a part is an initial ("Kooman, F.") or has a digit (a
// date).
std::string split_authors(const std::string& byline) {
  auto text = fold(byline);
  if (text.empty() || text.size() > 200)
    return text;
  auto lower = sdk::to_lower(text);
  for (std::string_view prefix : {"by ", "par ", "von ", "por ", "di ",
                                  "door ", "av "})
    if (lower.rfind(prefix, 0) == 0) {
      text.erase(0, prefix.size());
      lower.erase(0, prefix.size());
      break;
    }
  std::vector<std::string> parts;
  size_t start = 0;
  size_t i = 0;
  auto cut = [&](size_t end, size_t skip) {
    auto part = fold(text.substr(start, end - start));
    if (!part.empty())
      parts.push_back(std::move(part));
    start = end + skip;
  };
  while (i < text.size()) {
    if (text[i] == ',' || text[i] == ';') {
      cut(i, 1);
    } else if (lower.compare(i, 5, " and ") == 0) {
      cut(i, 5);
      i += 4;
    } else if (lower.compare(i, 3, " & ") == 0) {
      cut(i, 3);
      i += 2;
    }
    ++i;
  }
  cut(text.size(), 0);
  if (parts.empty())
    return text;
  // Not names: an initial or a date.
  for (auto& p : parts)
    if (p.size() <= 2 || p.back() == '.'
        || std::any_of(p.begin(), p.end(), [](char c) {
             return std::isdigit(static_cast<unsigned char>(c)) != 0;
           }))
      return text;
  std::string out;
  for (auto& p : parts) {
    if (!out.empty())
      out += "; ";
    out += p;
  }
  return out;
}

void fill_metadata(const dom& d, extraction& x, std::string_view url) {
  ld_meta ld;
  ld.page_title = d.title;
  std::vector<nlohmann::json> docs;
  for (auto& text : d.ld_json) {
    // Some pages wrap the JSON in a CDATA section.
    std::string_view body = text;
    auto open = body.find("<![CDATA[");
    if (open != std::string_view::npos
        && body.find_first_not_of(" \t\r\n/") == open) {
      body.remove_prefix(open + 9);
      if (auto close = body.rfind("]]>"); close != std::string_view::npos)
        body = body.substr(0, close);
      // "//]]>": the comment marks before the end of the section.
      while (!body.empty()
             && (sdk::is_ascii_space(body.back()) || body.back() == '/'))
        body.remove_suffix(1);
    }
    auto j = sdk::parse_json(body);
    if (!j.is_discarded())
      docs.push_back(std::move(j));
  }
  for (auto& j : docs)
    index_ld(j, ld, 0);
  for (auto& j : docs)
    scan_ld(j, ld, 0, true);
  for (auto& j : docs)
    scan_ld(j, ld, 0, false);
  x.page_type = ld.type;
  std::unordered_map<std::string, std::string> meta;
  std::string canonical;
  if (d.root)
    collect_meta(d.root, meta, canonical);
  x.title = ld.title;
  if (x.title.empty())
    x.title = first_of(meta, {"og:title", "twitter:title", "dc:title",
                              "dcterm:title", "dc.title", "title",
                              "sailthru.title", "parsely-title",
                              "weibo:article:title"});
  if (x.title.empty()) {
    x.title = clean_title(d.title);
    if (x.title.empty() && d.body)
      x.title = h_text_of_first(d.body, GUMBO_TAG_H1);
  }
  x.byline = ld.author;
  if (x.byline.empty())
    x.byline = first_of(meta, {"author", "article:author", "dc:creator",
                               "dc.creator", "dcterm:creator",
                               "parsely-author", "sailthru.author",
                               "byl"});
  if (x.byline.rfind("http", 0) == 0)
    x.byline.clear();
  if (x.byline.empty() && d.body)
    x.byline = dom_byline(d.body, 0);
  x.byline = split_authors(x.byline);
  x.published = ld.published;
  if (x.published.empty())
    x.published = first_of(meta, {"article:published_time",
                                  "article:published", "datepublished",
                                  "date", "dc.date", "dc.date.issued",
                                  "dcterm:created", "dcterms.created",
                                  "dcterms.date", "pubdate",
                                  "parsely-pub-date", "publish-date",
                                  "og:published_time", "sailthru.date",
                                  "time:pubdate", "time:first"});
  x.modified = ld.modified;
  if (x.modified.empty())
    x.modified = first_of(meta, {"article:modified_time", "article:modified",
                                 "og:updated_time", "datemodified",
                                 "dc.date.modified", "dcterms.modified",
                                 "last-modified", "lastmod",
                                 "time:modified"});
  x.site_name = first_of(meta, {"og:site_name"});
  if (x.site_name.empty())
    x.site_name = ld.publisher;
  if (x.site_name.empty())
    x.site_name = first_of(meta, {"application-name", "twitter:site"});
  if (x.site_name.size() > 1 && x.site_name[0] == '@')
    x.site_name.erase(0, 1);
  if (d.html)
    x.lang = fold(d.html->attr("lang"));
  if (x.lang.empty())
    x.lang = first_of(meta, {"og:locale", "content-language", "language",
                             "dc.language"});
  if (canonical.empty())
    canonical = first_of(meta, {"og:url"});
  x.canonical_url = resolve_link(url, canonical);
  x.excerpt = first_of(meta, {"og:description", "description",
                              "twitter:description", "dc:description",
                              "dc.description"});
}

// Drops a leading heading equal to the title (rendered separately).
std::string strip_title_heading(std::string text, const std::string& title) {
  if (title.empty() || text.rfind('#', 0) != 0)
    return text;
  auto nl = text.find('\n');
  auto first = text.substr(0, nl);
  auto body = first.substr(first.find(' ') + 1);
  if (sdk::to_lower(body) != sdk::to_lower(title))
    return text;
  if (nl == std::string::npos)
    return {};
  auto start = text.find_first_not_of('\n', nl);
  return start == std::string::npos ? std::string{} : text.substr(start);
}

// The words of a line, lower-cased (ASCII), without Markdown marks.
std::string line_key(std::string_view line) {
  std::string out;
  bool space = false;
  for (auto ch : line) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      if (space && !out.empty())
        out += ' ';
      space = false;
      out += static_cast<char>(std::tolower(c));
    } else {
      space = true;
    }
  }
  return out;
}

// Lines that are boilerplate by their words alone: labels of ads, share
// buttons and teaser lists, mostly English with the ad label in a few other
// languages (compared on line_key).
const std::initializer_list<std::string_view> boilerplate_lines = {
  "advertisement", "advertising", "anzeige", "publicité", "publicidad",
  "pubblicità", "reklama", "share", "share this", "share this article",
  "share this story", "share on facebook", "share on twitter", "tweet",
  "email", "print", "read more", "continue reading", "related",
  "related articles", "related stories", "related posts", "you may also like",
  "recommended", "more stories", "most popular", "most read", "sign up",
  "subscribe", "follow us", "comments", "leave a comment", "leave a reply",
  "write a comment", "post a comment", "add a comment", "kommentar schreiben",
  "kommentare schreiben", "kommentieren",
  "skip to content", "skip to main content", "back to top", "image",
  "photo", "getty images", "story continues below advertisement"};

// The words of `key` (a line_key).
std::vector<std::string_view> key_words(std::string_view key) {
  std::vector<std::string_view> words;
  any_token(key, [&](std::string_view w) {
    words.push_back(w);
    return false;
  });
  return words;
}

bool all_digits(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

// An image credit: "Photograph by Jane Roe", "(Credit: Jane Roe / Agency)",
// "Foto: dpa", "Image courtesy of NASA".
bool credit_line(std::string_view line) {
  auto low = sdk::to_lower(sdk::trim(line));
  std::string_view text{low};
  while (!text.empty() && std::string_view{"([*_> "}.find(text.front()) != std::string_view::npos)
    text.remove_prefix(1);
  static const std::initializer_list<std::string_view> nouns = {
    "photograph", "photographs", "photo", "photos", "image", "images", "picture",
    "pictures", "illustration", "illustrations", "credit", "credits", "image credit",
    "image credits", "photo credit", "photo credits", "foto", "fotos", "bild",
    "bilder", "bildquelle", "crédit photo", "crédits photo", "crédit", "crédits",
    "imagen", "imagem"};
  for (auto noun : nouns) {
    if (!starts_with(text, noun))
      continue;
    auto rest = text.substr(noun.size());
    auto after = rest.find_first_not_of(' ');
    if (after == std::string_view::npos)
      continue;
    rest.remove_prefix(after);
    // "Photo: AP", "Photograph by Jane Roe", "Image courtesy of NASA"; the
    // first letter after the noun must not continue a word ("Imagery").
    if (after == 0 && rest.front() != ':')
      continue;
    if (rest.front() == ':' || starts_with(rest, "by ") || starts_with(rest, "von ")
        || starts_with(rest, "par ") || starts_with(rest, "courtesy"))
      return true;
  }
  return false;
}

// A date or a time and nothing else: "3:59 PM", "19:49", "August 5, 2019
// at 1:46 pm", "26.10.2010", "Mi, 3. März 2021".
bool date_line(std::string_view line, std::string_view key) {
  static const std::initializer_list<std::string_view> months = {
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december", "januar", "februar", "märz",
    "mai", "juni", "juli", "oktober", "dezember", "janvier", "février", "mars",
    "avril", "juin", "juillet", "août", "septembre", "octobre", "novembre",
    "décembre", "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio",
    "agosto", "septiembre", "octubre", "noviembre", "diciembre"};
  // The other words a date or a time may hold: days, "at", "um", "Uhr".
  static const std::initializer_list<std::string_view> words = {
    "am", "pm", "at", "um", "uhr", "on", "the", "of", "de", "del", "le", "el", "à", "h",
    "mon", "tue", "wed", "thu", "fri", "sat", "sun", "monday", "tuesday", "wednesday",
    "thursday", "friday", "saturday", "sunday", "mo", "di", "mi", "do", "fr", "sa", "so",
    "montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag"};
  if (key.empty() || key.size() > 40)
    return false;
  bool number = false;
  bool month = false;
  for (auto w : key_words(key)) {
    auto ordinal = w.size() > 2 && all_digits(w.substr(0, w.size() - 2))
                   && (ends_with(w, "st") || ends_with(w, "nd") || ends_with(w, "rd")
                       || ends_with(w, "th"));
    if (all_digits(w) || ordinal) {
      number = true;
      continue;
    }
    if (std::find(months.begin(), months.end(), w) != months.end())
      month = true;
    else if (std::find(words.begin(), words.end(), w) == words.end())
      return false;
  }
  if (!number)
    return false;
  // A month named, a clock time (h:mm) or a day.month.year.
  auto digit = [&](size_t i) { return i < line.size() && line[i] >= '0' && line[i] <= '9'; };
  for (size_t i = 1; i + 2 < line.size(); ++i)
    if (line[i] == ':' && digit(i - 1) && digit(i + 1) && digit(i + 2))
      return true;
  size_t separators = 0;
  for (size_t i = 1; i + 1 < line.size(); ++i)
    if ((line[i] == '.' || line[i] == '/' || line[i] == '-') && digit(i - 1) && digit(i + 1))
      ++separators;
  return month || separators >= 2;
}

// A count of comments: "Comments: 0", "3 Kommentare", "Kommentare insgesamt: 0".
bool comment_count_line(std::string_view key) {
  static const std::initializer_list<std::string_view> nouns = {
    "comment", "comments", "kommentar", "kommentare", "commentaire", "commentaires",
    "comentario", "comentarios", "commento", "commenti", "reactie", "reacties"};
  static const std::initializer_list<std::string_view> others = {
    "insgesamt", "total", "no", "keine", "aucun", "one", "zero"};
  auto words = key_words(key);
  if (words.empty() || words.size() > 4)
    return false;
  bool noun = false;
  bool count = false;
  for (auto w : words) {
    if (std::find(nouns.begin(), nouns.end(), w) != nouns.end())
      noun = true;
    else if (all_digits(w) || std::find(others.begin(), others.end(), w) != others.end())
      count = true;
    else
      return false;
  }
  return noun && count;
}

// A line of an entry's details: three fields at least, "Label: value",
// parted by "|" ("Views: 1120 | Added by: Posh | Tags: ... | Rating: 0").
bool details_line(std::string_view line) {
  size_t fields = 0;
  size_t labelled = 0;
  size_t pos = 0;
  while (pos <= line.size()) {
    auto end = line.find('|', pos);
    if (end == std::string_view::npos)
      end = line.size();
    auto field = sdk::trim(line.substr(pos, end - pos));
    if (!field.empty()) {
      ++fields;
      auto colon = field.find(':');
      if (colon != std::string_view::npos && colon > 0 && colon < 30
          && std::count(field.begin(), field.begin() + colon, ' ') < 3)
        ++labelled;
    }
    pos = end + 1;
  }
  return fields >= 3 && labelled >= 3 && labelled * 4 >= fields * 3;
}

// Drops, outside code blocks, the lines of `text` that are the byline again
// ("By Jane Roe" when the byline is "Jane Roe") and lines that are
// boilerplate by their words: labels, image credits, a date or time alone,
// a count of comments, a line of an entry's details.
std::string drop_boilerplate_lines(const std::string& text,
                                   const std::string& byline) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    lines.push_back(std::string_view{text}.substr(pos, end - pos));
    pos = end + 1;
  }
  auto by = line_key(byline);
  std::string out;
  out.reserve(text.size());
  bool dropped = false;
  bool code = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    bool fence = lines[i].rfind("```", 0) == 0;
    if (fence)
      code = !code;
    bool drop = false;
    if (!code && !fence && lines[i].size() < 80) {
      auto key = line_key(lines[i]);
      // Table rows, list items and headings are the article's structure.
      auto digits = lines[i].find_first_not_of("0123456789");
      auto structure = !lines[i].empty()
                       && (lines[i].front() == '|' || lines[i].front() == '#'
                           || starts_with(lines[i], "- ") || starts_with(lines[i], "* ")
                           || (digits > 0 && digits != std::string_view::npos
                               && lines[i].compare(digits, 2, ". ") == 0));
      drop = (!by.empty() && (key == by || key == "by " + by))
             || std::find(boilerplate_lines.begin(), boilerplate_lines.end(),
                          key)
                  != boilerplate_lines.end()
             || credit_line(lines[i])
             || (!structure && (date_line(lines[i], key) || comment_count_line(key)));
    }
    if (!code && !fence && !drop && lines[i].size() < 400 && !lines[i].empty()
        && lines[i].front() != '|')
      drop = details_line(lines[i]);
    if (drop) {
      dropped = true;
      continue;
    }
    // Dropping a line must not leave three line breaks in a row.
    if (lines[i].empty() && dropped
        && (out.empty()
            || (out.size() >= 2 && out[out.size() - 1] == '\n'
                && out[out.size() - 2] == '\n')))
      continue;
    dropped = false;
    out.append(lines[i]);
    out += '\n';
  }
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out;
}

void reset(node* n) {
  tick();
  n->removed = n->boilerplate;
  n->scored = false;
  n->score = 0;
  for (auto* c : n->children)
    reset(c);
}

} // namespace

namespace {

extraction run_extraction(std::string_view html, std::string_view url) {
  extraction x;
  dom d{html};
  fill_metadata(d, x, url);
  if (!d.body)
    return x;
  boilerplate_pass pass{d.body};
  pass.run(d.body);
  {
    renderer r;
    for (auto* c : pass.comments) {
      trim_comment_section(c);
      for (auto* k : c->children)
        r.render(k);
      r.out += "\n\n";
    }
    x.comments = r.finish();
  }
  const flags attempts[] = {{true, true, true},
                            {false, true, true},
                            {false, false, true},
                            {false, false, false}};
  std::string best;
  for (auto& f : attempts) {
    reset(d.body);
    readability r{d.body, f};
    auto* top = r.run();
    auto parts = r.gather(top);
    for (auto* p : parts)
      r.clean(p);
    auto text = render_nodes(parts);
    if (text.size() > best.size())
      best = std::move(text);
    if (best.size() >= 500)
      break;
  }
  x.text = drop_boilerplate_lines(
    strip_title_heading(std::move(best), x.title), x.byline);
  return x;
}

} // namespace

extraction extract_html(std::string_view html, std::string_view url) {
  return run_extraction(html, url);
}

std::variant<extraction, sdk::error>
try_extract_html(std::string_view html, std::string_view url,
                 const extract_options& opts) {
  budget b{opts};
  budget_scope scope{&b};
  try {
    b.check();
    return run_extraction(html, url);
  } catch (const stopped& x) {
    return sdk::make_error(x.code, x.code == sdk::errc::timeout
                                     ? "reading the page took too long"
                                     : "reading the page was cancelled");
  }
}

std::string html_to_text(std::string_view html) {
  dom d{html};
  if (!d.body)
    return {};
  return render_nodes({d.body});
}

} // namespace quarry::extract
