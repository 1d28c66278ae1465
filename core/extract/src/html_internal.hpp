// What the parts of HTML extraction share, internal to extraction: the time
// budget of a run, whitespace helpers, the page tree built from gumbo's
// parse, the measures of an element's text, and the passes over the tree
// (boilerplate, content scoring, rendering, metadata, line clean-up) that
// extract_html (html.cpp) runs one after the other.
#pragma once

#include "quarry/extract/html.hpp"

#include "prescan.hpp"

#include "quarry/sdk/strings.hpp"

#include <gumbo.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::extract::detail {

using sdk::ends_with;
using sdk::starts_with;

// -- time budget --------------------------------------------------------------

/// Thrown (and caught in try_extract_html) when the deadline passed or the
/// caller cancelled.
struct stopped {
  sdk::errc code;
};

/// The bounds of the extraction running on this thread, checked every few
/// thousand steps.
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

/// The budget of the extraction running on this thread, if any (html.cpp).
extern thread_local budget* current_budget;

/// Counts one step of work against the current budget, if any.
inline void tick() {
  if (current_budget != nullptr)
    current_budget->tick();
}

/// Installs a budget for the current thread for its lifetime.
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

/// Whether a no-break space (U+00A0) starts at byte `i` of `s`.
inline bool nbsp_at(std::string_view s, size_t i) {
  return i + 1 < s.size() && s[i] == '\xC2' && s[i + 1] == '\xA0';
}

/// Folds runs of whitespace (also U+00A0) into one space and trims.
std::string fold(std::string_view s);

/// Whether `s` has anything but whitespace (what fold would keep).
bool has_visible(std::string_view s);

/// The size of fold() of a text given in pieces, and its commas and 0xEF
/// bytes (the lead byte of CJK punctuation), without building it. Text nodes
/// are valid UTF-8, so a no-break space never straddles two pieces.
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

/// Calls `f` on each token of `names` (parted by whitespace) until it
/// returns true; whether one did.
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

// -- a small mutable DOM built from gumbo -------------------------------------

struct node;

/// The children of a node: a run of pointers in the page's arena.
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

/// The tree points into gumbo's output (attributes, text), which lives as
/// long as the dom; nodes, child lists and id/class strings are in the same
/// arena, so a node needs no destructor.
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
  std::string_view text;              // text nodes only
  std::string_view id_class;          // lower-cased "id class", empty when neither
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

/// Memory for one page, released at once: gumbo's output and our tree.
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

/// A page parsed by gumbo into our tree (html_dom.cpp).
class dom {
public:
  node* root = nullptr;
  node* html = nullptr;
  node* head = nullptr;
  node* body = nullptr;
  std::vector<std::string> ld_json; // contents of JSON-LD scripts
  std::string title;                // text of the first <title>

  explicit dom(std::string_view source);

  dom(const dom&) = delete;
  dom& operator=(const dom&) = delete;

private:
  arena arena_;

  // Concatenated text below `root` (iterative: the tree may be very deep).
  static std::string raw_text(const GumboNode* root);

  // Deeper elements are flattened into their text (bounded recursion).
  static constexpr int max_depth = 400;

  node* build(const GumboNode* g, node* parent, int depth);
};

// -- element classes and text measures (html_elements.cpp) --------------------

/// Whether the text below an element of this tag is never read (scripts,
/// forms' controls, media, the head).
bool is_skipped_tag(GumboTag t);

/// Whether an element of this tag is a block (a line or paragraph of its
/// own).
bool is_block(GumboTag t);

/// Whether the element is hidden (`hidden`, `aria-hidden`, `display:none`,
/// `visibility:hidden`).
bool is_hidden(const node* n);

/// The text below `n`, a space after each block element, folded.
std::string inner_text(const node* n);

/// The measures of inner_text(n) without building it.
text_measure measure_text(const node* n);

/// The length of inner_text(n).
size_t text_len(const node* n);

/// The share of the text of `n` in links (a link to the same page counts
/// 0.3 of its text).
double link_density(const node* n);

/// The elements of tag `tag` below `n` that are not removed.
size_t count_tag(const node* n, GumboTag tag);

/// Whether `n` is or holds a link with text, removed or not (an icon's empty
/// link does not count).
bool holds_link(const node* n);

/// Whether `n` holds a block element that is not removed.
bool has_block_child(const node* n);

// -- the passes of an extraction ----------------------------------------------

/// Sets aside, for good, the elements below `body` that are boilerplate by
/// their markup (html_boilerplate.cpp). Returns the comment sections among
/// them, trimmed of their reply forms and links, in document order.
std::vector<node*> set_aside_boilerplate(node* body);

/// What one attempt of content scoring does (later attempts drop steps that
/// may have removed the content).
struct flags {
  bool strip_unlikely = true;
  bool weight_classes = true;
  bool clean_conditionally = true;
};

/// The main content below `body` as readability scores it with `f`
/// (html_readability.cpp): the best element and its siblings that belong to
/// the article, in document order, cleaned of boilerplate.
std::vector<node*> select_content(node* body, flags f);

/// Renders `nodes` as Markdown-like text (html_render.cpp).
std::string render_nodes(const std::vector<node*>& nodes);

/// Renders the children of each comment section, the sections parted by a
/// blank line.
std::string render_comments(const std::vector<node*>& sections);

/// Fills the metadata of `x` from the page's JSON-LD, meta tags and markup
/// (html_metadata.cpp); `url` is the page's address.
void fill_metadata(const dom& d, extraction& x, std::string_view url);

/// Drops a leading heading equal to the title (rendered separately)
/// (html_lines.cpp).
std::string strip_title_heading(std::string text, const std::string& title);

/// Drops, outside code blocks, the lines of `text` that are the byline again
/// and lines that are boilerplate by their words (html_lines.cpp).
std::string drop_boilerplate_lines(const std::string& text, const std::string& byline);

} // namespace quarry::extract::detail
