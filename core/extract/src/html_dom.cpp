// The page tree of an extraction: gumbo's parse of the page (after the
// pre-scan, in the page's arena) turned into our mutable nodes, with the
// page's <title> and JSON-LD scripts set apart.

#include "html_internal.hpp"

#include <string>
#include <vector>

namespace quarry::extract::detail {

dom::dom(std::string_view source) {
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

// Concatenated text below `root` (iterative: the tree may be very deep).
std::string dom::raw_text(const GumboNode* root) {
  std::string out;
  std::vector<const GumboNode*> stack{root};
  while (!stack.empty()) {
    tick();
    auto* n = stack.back();
    stack.pop_back();
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_CDATA
        || n->type == GUMBO_NODE_WHITESPACE) {
      out += n->v.text.text;
    } else if (n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE) {
      auto& kids = n->v.element.children;
      for (unsigned i = kids.length; i > 0; --i)
        stack.push_back(static_cast<const GumboNode*>(kids.data[i - 1]));
    }
  }
  return out;
}

node* dom::build(const GumboNode* g, node* parent, int depth) {
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
  } else if (g->type == GUMBO_NODE_ELEMENT || g->type == GUMBO_NODE_TEMPLATE) {
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
  auto** list = static_cast<node**>(arena_.allocate(sizeof(node*) * kids->length, alignof(node*)));
  n->children.first = list;
  for (unsigned i = 0; i < kids->length; ++i) {
    auto* c = static_cast<const GumboNode*>(kids->data[i]);
    if (c->type == GUMBO_NODE_COMMENT)
      continue;
    list[n->children.count++] = build(c, n, depth + 1);
  }
  return n;
}

} // namespace quarry::extract::detail
