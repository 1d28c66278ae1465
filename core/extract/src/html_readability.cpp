// Readability-style content scoring: paragraphs score their ancestors, the
// best candidate (with its siblings that belong to the article) is the main
// content, and the boilerplate left inside it is cleaned away.

#include "html_internal.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::extract::detail {

namespace {

// -- unlikely candidates and class weights ------------------------------------

bool contains_any(std::string_view hay, std::initializer_list<std::string_view> needles) {
  for (auto n : needles)
    if (hay.find(n) != std::string::npos)
      return true;
  return false;
}

const std::initializer_list<std::string_view> unlikely_words = {
  "-ad-",       "ai2html", "banner",     "breadcrumb",   "combx",    "comment",    "community",
  "cover-wrap", "disqus",  "extra",      "footer",       "gdpr",     "header",     "legends",
  "menu",       "related", "remark",     "replies",      "rss",      "shoutbox",   "sidebar",
  "skyscraper", "social",  "sponsor",    "supplemental", "ad-break", "agegate",    "pagination",
  "pager",      "popup",   "yom-remote", "cookie",       "consent",  "newsletter", "subscribe",
  "promo",      "share"};
const std::initializer_list<std::string_view> maybe_words = {
  "and", "article", "body", "column", "content", "main", "shadow"};
const std::initializer_list<std::string_view> positive_words = {
  "article", "body",       "content", "entry", "hentry", "h-entry", "main",
  "page",    "pagination", "post",    "text",  "blog",   "story"};
const std::initializer_list<std::string_view> negative_words = {
  "-ad-",     "hidden",   "^hid$",      " hid ",    "banner", "combx",    "comment", "com-",
  "contact",  "foot",     "footer",     "footnote", "gdpr",   "masthead", "media",   "meta",
  "outbrain", "promo",    "related",    "scroll",   "share",  "shoutbox", "sidebar", "skyscraper",
  "sponsor",  "shopping", "tags",       "widget",   "nav",    "social",   "cookie",  "popup",
  "ad-",      "advert",   "newsletter", "subscribe"};

bool compute_unlikely(const node* n) {
  if (n->id_class.size() <= 1)
    return false;
  if (n->tag == GUMBO_TAG_BODY || n->tag == GUMBO_TAG_A || n->tag == GUMBO_TAG_ARTICLE
      || n->tag == GUMBO_TAG_MAIN)
    return false;
  auto role = n->attr("role");
  if (role == "menu" || role == "menubar" || role == "complementary" || role == "navigation"
      || role == "alert" || role == "alertdialog" || role == "dialog")
    return true;
  return contains_any(n->id_class, unlikely_words) && !contains_any(n->id_class, maybe_words);
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

// -- data tables --------------------------------------------------------------

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

// -- readability --------------------------------------------------------------

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
      double s = 1 + static_cast<double>(text.commas) + static_cast<double>(text.xef / 2)
                 + std::min(std::floor(static_cast<double>(text.len) / 100), 3.0);
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
    std::sort(best.begin(), best.end(), [](node* a, node* b) { return a->score > b->score; });
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
      for (auto* p = top->parent; p && p->tag != GUMBO_TAG_BODY; p = p->parent) {
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
    for (auto* p = top->parent; p && p->tag != GUMBO_TAG_BODY; p = p->parent) {
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
    while (top->parent && top->parent->tag != GUMBO_TAG_BODY && visible_children(top->parent) == 1)
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
        else if (text.size() < 80 && !text.empty() && ld == 0 && text.back() == '.')
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
      if (c->tag == GUMBO_TAG_TABLE && is_data_table(c) && link_density(c) < 0.5)
        continue;
      if (flags_.clean_conditionally) {
        if (c->tag == GUMBO_TAG_H1 || c->tag == GUMBO_TAG_H2 || c->tag == GUMBO_TAG_H3) {
          if (class_weight(c) < 0 || link_density(c) > 0.33) {
            c->removed = true;
            continue;
          }
        }
        if (c->tag == GUMBO_TAG_TABLE || c->tag == GUMBO_TAG_UL || c->tag == GUMBO_TAG_OL
            || c->tag == GUMBO_TAG_DIV || c->tag == GUMBO_TAG_SECTION || c->tag == GUMBO_TAG_HEADER
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
    auto headings = static_cast<double>(count_tag(n, GUMBO_TAG_H1) + count_tag(n, GUMBO_TAG_H2)
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
    if (!is_list && headings / std::max(1.0, p) > 0.9 && len < 25 && img == 0)
      return true;
    if (!is_list && len < 25 && (img == 0 || img > 2) && ld > 0)
      return true;
    // A short label left over when the links it introduced were cleaned
    // away ("Further reading" over a removed box of links, "Advertisement"
    // over a removed banner link).
    if (!is_list && len < 25 && img == 0
        && std::any_of(n->children.begin(), n->children.end(),
                       [](const node* k) { return k->removed && !k->text_node && holds_link(k); }))
      return true;
    if (weight < 25 && ld > (is_list ? 0.5 : 0.2))
      return true;
    if (weight >= 25 && ld > 0.5)
      return true;
    return false;
  }
};

} // namespace

std::vector<node*> select_content(node* body, flags f) {
  readability r{body, f};
  auto* top = r.run();
  auto parts = r.gather(top);
  for (auto* p : parts)
    r.clean(p);
  return parts;
}

} // namespace quarry::extract::detail
