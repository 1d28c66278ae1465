// Text helpers of the local corpus: passage splitting, FTS5 query sanitising,
// content hashing and file URLs. (HTML is read by quarry_extract.)

#include "quarry/corpus/text.hpp"
#include "quarry/fetch/url.hpp"
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
  // Each segment percent-encoded, the slashes kept.
  std::string result = "file://";
  size_t pos = 0;
  while (true) {
    auto slash = absolute_path.find('/', pos);
    result += sdk::url_encode(absolute_path.substr(pos, slash - pos));
    if (slash == std::string_view::npos)
      break;
    result += '/';
    pos = slash + 1;
  }
  return result;
}

std::string path_from_file_url(std::string_view url) {
  auto parsed = fetch::parse_url(url);
  auto* u = std::get_if<fetch::url>(&parsed);
  if (u == nullptr || u->scheme != "file" || !u->host.empty())
    return {};
  auto out = sdk::percent_decode_strict(u->path);
  if (!out || out->find('\0') != std::string::npos)
    return {};
  return std::move(*out);
}

} // namespace quarry::corpus
