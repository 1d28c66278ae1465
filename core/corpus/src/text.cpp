// Text helpers of the local corpus: passage splitting, FTS5 query sanitising,
// simple HTML-to-text conversion, content hashing and file URLs.

#include "quarry/corpus/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cstdio>

namespace quarry::corpus {

namespace {

// Returns the heading text when `line` is a Markdown ATX heading.
bool parse_heading(std::string_view line, std::string& out) {
  line = sdk::trim(line);
  size_t level = 0;
  while (level < line.size() && line[level] == '#')
    ++level;
  if (level == 0 || level > 6 || level >= line.size() || line[level] != ' ')
    return false;
  auto rest = sdk::trim(line.substr(level));
  while (!rest.empty() && rest.back() == '#')
    rest.remove_suffix(1);
  out = std::string{sdk::trim(rest)};
  return true;
}

// Cuts `x` at or before `limit` bytes: at the last whitespace when there is
// one in the second half, else at a UTF-8 character boundary.
size_t cut_point(std::string_view x, size_t limit) {
  if (x.size() <= limit)
    return x.size();
  for (size_t i = limit; i > limit / 2; --i)
    if (sdk::is_ascii_space(x[i]))
      return i;
  size_t i = limit;
  while (i > 1 && (static_cast<unsigned char>(x[i]) & 0xC0) == 0x80)
    --i;
  return i;
}

// One block of the source text: a heading or a paragraph.
struct block {
  bool heading = false;
  std::string text;
};

std::vector<block> to_blocks(std::string_view text) {
  std::vector<block> result;
  std::string para;
  auto flush = [&] {
    auto t = sdk::trim(para);
    if (!t.empty())
      result.push_back({false, std::string{t}});
    para.clear();
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    auto line = text.substr(pos, end - pos);
    std::string heading;
    if (sdk::trim(line).empty()) {
      flush();
    } else if (parse_heading(line, heading)) {
      flush();
      result.push_back({true, std::move(heading)});
    } else {
      if (!para.empty())
        para += '\n';
      para.append(line.data(), line.size());
    }
    pos = end + 1;
  }
  flush();
  return result;
}

} // namespace

std::vector<passage> split_passages(std::string_view text, size_t max_chars) {
  if (max_chars < 16)
    max_chars = 16;
  std::vector<passage> result;
  std::string heading;
  std::string buf;
  auto flush = [&] {
    if (!buf.empty())
      result.push_back({heading, std::move(buf)});
    buf.clear();
  };
  for (auto& b : to_blocks(text)) {
    if (b.heading) {
      flush();
      heading = std::move(b.text);
      continue;
    }
    std::string_view para = b.text;
    if (!buf.empty() && buf.size() + 2 + para.size() > max_chars)
      flush();
    while (para.size() > max_chars) {
      flush();
      auto n = cut_point(para, max_chars);
      buf = std::string{sdk::trim(para.substr(0, n))};
      flush();
      para = sdk::trim(para.substr(n));
    }
    if (para.empty())
      continue;
    if (!buf.empty())
      buf += "\n\n";
    buf.append(para.data(), para.size());
  }
  flush();
  return result;
}

std::string sanitize_fts_query(std::string_view query, size_t max_terms) {
  std::string result;
  size_t terms = 0;
  size_t i = 0;
  while (i < query.size() && terms < max_terms) {
    auto c = static_cast<unsigned char>(query[i]);
    bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (!word) {
      ++i;
      continue;
    }
    auto start = i;
    while (i < query.size()) {
      auto d = static_cast<unsigned char>(query[i]);
      if (!((d >= '0' && d <= '9') || (d >= 'a' && d <= 'z')
            || (d >= 'A' && d <= 'Z') || d >= 0x80))
        break;
      ++i;
    }
    if (!result.empty())
      result += " OR ";
    // Words never contain quotes, so quoting them makes every FTS5 operator
    // (NEAR, AND, OR, NOT, *, ^, column filters) a plain search term.
    result += '"';
    result.append(query.data() + start, i - start);
    result += '"';
    ++terms;
  }
  return result;
}

namespace {

bool istarts_with(std::string_view x, std::string_view prefix) {
  if (x.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    auto a = x[i];
    if (a >= 'A' && a <= 'Z')
      a = static_cast<char>(a - 'A' + 'a');
    if (a != prefix[i])
      return false;
  }
  return true;
}

// Finds `needle` (lower case) in `hay` case-insensitively from `pos`.
size_t ifind(std::string_view hay, std::string_view needle, size_t pos) {
  for (size_t i = pos; i + needle.size() <= hay.size(); ++i)
    if (istarts_with(hay.substr(i), needle))
      return i;
  return std::string_view::npos;
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Appends `text` with entities decoded and whitespace folded to single spaces.
void append_text(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = text[i];
    if (sdk::is_ascii_space(c)) {
      if (!out.empty() && !sdk::is_ascii_space(out.back()))
        out += ' ';
      continue;
    }
    if (c == '&') {
      auto semi = text.find(';', i);
      if (semi != std::string_view::npos && semi - i <= 10) {
        auto name = text.substr(i + 1, semi - i - 1);
        static constexpr std::pair<std::string_view, std::string_view>
          named[] = {{"amp", "&"},     {"lt", "<"},         {"gt", ">"},
                     {"quot", "\""},   {"apos", "'"},       {"nbsp", " "},
                     {"mdash", "\u2014"}, {"ndash", "\u2013"},
                     {"hellip", "\u2026"}};
        bool done = false;
        for (const auto& [key, value] : named) {
          if (name == key) {
            out.append(value.data(), value.size());
            done = true;
            break;
          }
        }
        if (!done && name.size() >= 2 && name[0] == '#') {
          bool hex = name[1] == 'x' || name[1] == 'X';
          auto digits = name.substr(hex ? 2 : 1);
          unsigned long cp = 0;
          bool ok = !digits.empty() && digits.size() <= 7;
          for (auto d : digits) {
            int v = -1;
            if (d >= '0' && d <= '9')
              v = d - '0';
            else if (hex && d >= 'a' && d <= 'f')
              v = d - 'a' + 10;
            else if (hex && d >= 'A' && d <= 'F')
              v = d - 'A' + 10;
            if (v < 0) {
              ok = false;
              break;
            }
            cp = cp * (hex ? 16 : 10) + static_cast<unsigned long>(v);
          }
          if (ok) {
            append_utf8(out, cp);
            done = true;
          }
        }
        if (done) {
          i = semi;
          continue;
        }
      }
    }
    out += c;
  }
}

void end_block(std::string& out) {
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t'))
    out.pop_back();
  if (out.empty())
    return;
  if (out.back() != '\n')
    out += '\n';
  if (out.size() < 2 || out[out.size() - 2] != '\n')
    out += '\n';
}

bool is_block_tag(std::string_view name) {
  static constexpr std::string_view tags[] = {
    "p",      "div",   "br",      "li",     "ul",    "ol",     "tr",
    "table",  "section", "article", "header", "footer", "blockquote",
    "pre",    "hr",    "dd",      "dt",     "dl",    "main",   "nav",
    "aside",  "figure", "figcaption", "td",  "th",   "body",   "form"};
  return std::find(std::begin(tags), std::end(tags), name) != std::end(tags);
}

} // namespace

html_text html_to_text(std::string_view html) {
  html_text result;
  auto& out = result.text;
  size_t i = 0;
  while (i < html.size()) {
    auto lt = html.find('<', i);
    if (lt == std::string_view::npos) {
      append_text(out, html.substr(i));
      break;
    }
    append_text(out, html.substr(i, lt - i));
    if (html.substr(lt, 4) == "<!--") {
      auto end = html.find("-->", lt + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    auto gt = html.find('>', lt + 1);
    if (gt == std::string_view::npos)
      break;
    auto tag = html.substr(lt + 1, gt - lt - 1);
    bool closing = !tag.empty() && tag.front() == '/';
    if (closing)
      tag.remove_prefix(1);
    size_t n = 0;
    while (n < tag.size() && !sdk::is_ascii_space(tag[n]) && tag[n] != '/')
      ++n;
    std::string name{tag.substr(0, n)};
    for (auto& c : name)
      if (c >= 'A' && c <= 'Z')
        c = static_cast<char>(c - 'A' + 'a');
    i = gt + 1;
    if (!closing && (name == "script" || name == "style" || name == "title"
                     || name == "noscript" || name == "template")) {
      auto end = ifind(html, "</" + name, i);
      auto inner = html.substr(i, end == std::string_view::npos
                                    ? html.size() - i
                                    : end - i);
      if (name == "title" && result.title.empty()) {
        std::string title;
        append_text(title, inner);
        result.title = std::string{sdk::trim(title)};
      }
      if (end == std::string_view::npos) {
        i = html.size();
      } else {
        auto close = html.find('>', end);
        i = close == std::string_view::npos ? html.size() : close + 1;
      }
      continue;
    }
    if (name.size() == 2 && name[0] == 'h' && name[1] >= '1'
        && name[1] <= '6') {
      end_block(out);
      if (!closing)
        out.append(static_cast<size_t>(name[1] - '0'), '#') += ' ';
      continue;
    }
    if (is_block_tag(name))
      end_block(out);
  }
  end_block(out);
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  return result;
}

std::string markdown_title(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string heading;
    if (parse_heading(text.substr(pos, end - pos), heading))
      return heading;
    pos = end + 1;
  }
  return {};
}

std::string content_hash(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (auto c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return std::string{buf, 16};
}

std::string file_url(std::string_view absolute_path) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string result = "file://";
  for (auto ch : absolute_path) {
    auto c = static_cast<unsigned char>(ch);
    bool keep = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                || (c >= 'A' && c <= 'Z') || c == '/' || c == '-' || c == '_'
                || c == '.' || c == '~';
    if (keep) {
      result += static_cast<char>(c);
    } else {
      result += '%';
      result += hex[c >> 4];
      result += hex[c & 0xF];
    }
  }
  return result;
}

std::string path_from_file_url(std::string_view url) {
  constexpr std::string_view scheme = "file://";
  if (url.substr(0, scheme.size()) != scheme)
    return {};
  auto rest = url.substr(scheme.size());
  if (rest.substr(0, 9) == "localhost")
    rest.remove_prefix(9);
  if (rest.empty() || rest.front() != '/')
    return {};
  if (auto cut = rest.find_first_of("?#"); cut != std::string_view::npos)
    rest = rest.substr(0, cut);
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && hex(rest[i + 1]) >= 0
        && hex(rest[i + 2]) >= 0) {
      out += static_cast<char>(hex(rest[i + 1]) * 16 + hex(rest[i + 2]));
      i += 2;
    } else if (rest[i] == '%') {
      return {};
    } else {
      out += rest[i];
    }
  }
  if (out.find('\0') != std::string::npos)
    return {};
  return out;
}

} // namespace quarry::corpus
