// Boilerplate set aside before content scoring.
//
// Before scoring, elements that are boilerplate by their markup are set aside
// for good: the comment section (kept apart as comments), and cookie and
// consent banners, share bars, newsletter boxes, related-article lists,
// navigation, bylines, tags, image credits, ads and dialogs. They are named by
// their id and class tokens, their ARIA role or their tag. An element is only
// set aside when it holds less than 40% of the page's text or is mostly links,
// so a wrapper that happens to carry such a name cannot take the article.

#include "html_internal.hpp"

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quarry::extract::detail {

namespace {

// -- names of boilerplate -----------------------------------------------------

enum class boiler_kind { none, comments, boilerplate, short_boilerplate };

// Substrings of an id or class token that name boilerplate.
const std::initializer_list<std::string_view> boiler_parts = {"cookie",        "consent",
                                                              "gdpr",          "onetrust",
                                                              "didomi",        "cmp-banner",
                                                              "share",         "sharing",
                                                              "social",        "addthis",
                                                              "sociable",      "newsletter",
                                                              "subscribe",     "subscription",
                                                              "signup",        "sign-up",
                                                              "mailchimp",     "optin",
                                                              "opt-in",        "related",
                                                              "recommend",     "more-stories",
                                                              "more-articles", "read-next",
                                                              "readnext",      "also-read",
                                                              "next-post",     "nextpost",
                                                              "next-story",    "nextstory",
                                                              "prev-post",     "previous-post",
                                                              "outbrain",      "taboola",
                                                              "trending",      "most-read",
                                                              "mostread",      "most-popular",
                                                              "breadcrumb",    "skip-link",
                                                              "skiplink",      "pagination",
                                                              "navbar",        "navbox",
                                                              "navigation",    "menu",
                                                              "toolbar",       "sidebar",
                                                              "widget",        "advert",
                                                              "adslot",        "ad-slot",
                                                              "ad-container",  "ad-wrapper",
                                                              "adsbygoogle",   "sponsor",
                                                              "promo",         "paywall",
                                                              "author-bio",    "author-box",
                                                              "about-author",  "author-info",
                                                              "authorbox",     "follow-us",
                                                              "followus",      "print-only",
                                                              "tagcloud",      "tag-cloud",
                                                              "tag-list",      "taglist",
                                                              "post-tags",     "entry-tags",
                                                              "article-tags",  "disclaimer-banner",
                                                              "footer",        "masthead",
                                                              "site-header",   "global-header",
                                                              "banner"};

// Substrings that name small blocks: boilerplate only when short.
const std::initializer_list<std::string_view> short_boiler_parts = {
  "byline",        "dateline",       "credit",          "copyright",      "post-meta",
  "entry-meta",    "article-meta",   "authorinfo",      "author-name",    "authorname",
  "screen-reader", "sr-only",        "visually-hidden", "visuallyhidden", "caption-meta",
  "timestamp",     "published-date", "publish-date",    "pubdate",        "reading-time",
  "read-time"};

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
  if ((starts_with(t, "comment") && !starts_with(t, "commentar")) || ends_with(t, "comments")
      || ends_with(t, "comment") || t.find("disqus") != std::string_view::npos)
    return boiler_kind::comments;
  if (t == "nav" || t == "ad" || t == "ads" || t == "tags" || t == "share"
      || starts_with(t, "login") || starts_with(t, "signin") || starts_with(t, "popup")
      || starts_with(t, "modal-") || starts_with(t, "dialog") || ends_with(t, "dialog")
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

// The kinds of the tokens seen on a page (pages repeat their class names).
using token_kinds = std::unordered_map<std::string_view, boiler_kind>;

// The strongest kind named by the tokens of `names` (lower-cased id and
// class): comments over boilerplate over short boilerplate.
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
  if (role == "navigation" || role == "menu" || role == "menubar" || role == "complementary"
      || role == "contentinfo" || role == "banner" || role == "dialog" || role == "alertdialog"
      || role == "search" || role == "toolbar")
    return boiler_kind::boilerplate;
  if (n->id_class.size() <= 1)
    return boiler_kind::none;
  return classify_names(n->id_class, cache);
}

// -- setting boilerplate aside -------------------------------------------------

// Within a comment section: drops the reply form and short "Reply" links.
void trim_comment_section(node* n) {
  tick();
  for (auto* c : n->children) {
    if (c->text_node || c->removed)
      continue;
    if (c->tag == GUMBO_TAG_FORM || c->tag == GUMBO_TAG_BUTTON || c->tag == GUMBO_TAG_TEXTAREA
        || is_hidden(c) || (c->id_class.find("reply") != std::string::npos && text_len(c) < 30)) {
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
    if (kind == boiler_kind::comments && len >= 30 && is_block(c->tag) && link_density(c) < 0.5)
      comments.push_back(c);
    return true;
  }
};

} // namespace

std::vector<node*> set_aside_boilerplate(node* body) {
  boilerplate_pass pass{body};
  pass.run(body);
  for (auto* c : pass.comments)
    trim_comment_section(c);
  return std::move(pass.comments);
}

} // namespace quarry::extract::detail
