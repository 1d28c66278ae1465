// The metadata of a page: title, byline, dates, site name, language,
// canonical URL and excerpt from JSON-LD (references by "@id" followed),
// Open Graph and other meta tags, and the page's own markup.

#include "html_internal.hpp"
#include "quarry/fetch/url.hpp"

#include "quarry/sdk/json.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quarry::extract::detail {

namespace {

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
  return l.find("article") != std::string::npos || l.find("posting") != std::string::npos
         || l == "report" || l == "review" || l == "recipe" || l == "creativework" || l == "blog";
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
  if (auto id = j.find("@id");
      id != j.end() && id->is_string() && (j.contains("name") || j.contains("givenName")))
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
    if ((type == "website" || type == "organization" || type == "newsmediaorganization")
        && m.publisher.empty())
      m.publisher = json_text(j);
    bool article = is_article_type(type);
    if (strict && !article)
      return;
    if (!strict
        && (type == "website" || type == "organization" || type == "person" || type == "imageobject"
            || type == "breadcrumblist"))
      return;
    if (article && m.type.empty())
      m.type = label;
    if (m.title.empty() && article) {
      auto headline = j.contains("headline") ? json_text(j["headline"]) : std::string{};
      auto name = j.contains("name") ? json_text(j["name"]) : std::string{};
      auto in_title = [&](const std::string& x) {
        return !x.empty()
               && sdk::to_lower(m.page_title).find(sdk::to_lower(x)) != std::string::npos;
      };
      // Both given and different: the name when the page's <title> repeats
      // it and shares few words with the headline.
      if (headline.empty()
          || (!name.empty() && name != headline && in_title(name) && !in_title(headline)
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
    if (auto resolved = fetch::resolve_url(base, r); auto* u = std::get_if<fetch::url>(&resolved))
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
      if (itemprop == "datepublished" || itemprop == "datemodified" || itemprop == "datecreated")
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
  if (n->attr("rel") == "author" || itemprop.find("author") != std::string::npos
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
  for (std::string_view prefix : {"by ", "par ", "von ", "por ", "di ", "door ", "av "})
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
    if (p.size() <= 2 || p.back() == '.' || std::any_of(p.begin(), p.end(), [](char c) {
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

} // namespace

void fill_metadata(const dom& d, extraction& x, std::string_view url) {
  ld_meta ld;
  ld.page_title = d.title;
  std::vector<nlohmann::json> docs;
  for (auto& text : d.ld_json) {
    // Some pages wrap the JSON in a CDATA section.
    std::string_view body = text;
    auto open = body.find("<![CDATA[");
    if (open != std::string_view::npos && body.find_first_not_of(" \t\r\n/") == open) {
      body.remove_prefix(open + 9);
      if (auto close = body.rfind("]]>"); close != std::string_view::npos)
        body = body.substr(0, close);
      // "//]]>": the comment marks before the end of the section.
      while (!body.empty() && (sdk::is_ascii_space(body.back()) || body.back() == '/'))
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
    x.title = first_of(meta, {"og:title", "twitter:title", "dc:title", "dcterm:title", "dc.title",
                              "title", "sailthru.title", "parsely-title", "weibo:article:title"});
  if (x.title.empty()) {
    x.title = clean_title(d.title);
    if (x.title.empty() && d.body)
      x.title = h_text_of_first(d.body, GUMBO_TAG_H1);
  }
  x.byline = ld.author;
  if (x.byline.empty())
    x.byline = first_of(meta, {"author", "article:author", "dc:creator", "dc.creator",
                               "dcterm:creator", "parsely-author", "sailthru.author", "byl"});
  if (x.byline.rfind("http", 0) == 0)
    x.byline.clear();
  if (x.byline.empty() && d.body)
    x.byline = dom_byline(d.body, 0);
  x.byline = split_authors(x.byline);
  x.published = ld.published;
  if (x.published.empty())
    x.published = first_of(meta,
                           {"article:published_time", "article:published", "datepublished", "date",
                            "dc.date", "dc.date.issued", "dcterm:created", "dcterms.created",
                            "dcterms.date", "pubdate", "parsely-pub-date", "publish-date",
                            "og:published_time", "sailthru.date", "time:pubdate", "time:first"});
  x.modified = ld.modified;
  if (x.modified.empty())
    x.modified = first_of(meta, {"article:modified_time", "article:modified", "og:updated_time",
                                 "datemodified", "dc.date.modified", "dcterms.modified",
                                 "last-modified", "lastmod", "time:modified"});
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
    x.lang = first_of(meta, {"og:locale", "content-language", "language", "dc.language"});
  if (canonical.empty())
    canonical = first_of(meta, {"og:url"});
  x.canonical_url = resolve_link(url, canonical);
  x.excerpt = first_of(meta, {"og:description", "description", "twitter:description",
                              "dc:description", "dc.description"});
}

} // namespace quarry::extract::detail
