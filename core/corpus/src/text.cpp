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

// One block of the source text: a heading or a paragraph. A paragraph's
// text is the source's bytes from `offset` (trimmed, lines kept as they are).
struct block {
  bool heading = false;
  std::string text;
  size_t offset = 0;
};

std::vector<block> to_blocks(std::string_view text) {
  std::vector<block> result;
  // The current paragraph: source bytes [para_start, para_end).
  size_t para_start = 0;
  size_t para_end = 0;
  bool in_para = false;
  auto flush = [&] {
    if (!in_para)
      return;
    in_para = false;
    auto raw = text.substr(para_start, para_end - para_start);
    auto t = sdk::trim(raw);
    if (!t.empty())
      result.push_back(
        {false, std::string{t}, para_start + static_cast<size_t>(t.data() - raw.data())});
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
      result.push_back({true, std::move(heading), pos});
    } else {
      if (!in_para) {
        in_para = true;
        para_start = pos;
      }
      para_end = end;
    }
    pos = end + 1;
  }
  flush();
  return result;
}

bool word_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

char lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

} // namespace

std::vector<passage> split_passages(std::string_view text, size_t max_chars) {
  if (max_chars < 16)
    max_chars = 16;
  std::vector<passage> result;
  std::string heading;
  std::string buf;
  // The source range of `buf`.
  size_t buf_start = 0;
  size_t buf_end = 0;
  auto flush = [&] {
    if (!buf.empty())
      result.push_back({heading, std::move(buf), buf_start, buf_end - buf_start});
    buf.clear();
  };
  // Appends a piece of source text (trimmed) that starts at `offset`.
  auto append = [&](std::string_view piece, size_t offset) {
    if (buf.empty())
      buf_start = offset;
    else
      buf += "\n\n";
    buf.append(piece.data(), piece.size());
    buf_end = offset + piece.size();
  };
  for (auto& b : to_blocks(text)) {
    if (b.heading) {
      flush();
      heading = std::move(b.text);
      continue;
    }
    std::string_view para = b.text;
    // Source offset of para's first byte.
    auto offset_of = [&](std::string_view x) {
      return b.offset + static_cast<size_t>(x.data() - b.text.data());
    };
    if (!buf.empty() && buf.size() + 2 + para.size() > max_chars)
      flush();
    while (para.size() > max_chars) {
      flush();
      auto n = cut_point(para, max_chars);
      auto piece = sdk::trim(para.substr(0, n));
      append(piece, offset_of(piece));
      flush();
      para = sdk::trim(para.substr(n));
    }
    if (para.empty())
      continue;
    append(para, offset_of(para));
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
    bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                || c >= 0x80;
    if (!word) {
      ++i;
      continue;
    }
    auto start = i;
    while (i < query.size()) {
      auto d = static_cast<unsigned char>(query[i]);
      if (!((d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z')
            || d >= 0x80))
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

search_query parse_search_query(std::string_view query, size_t max_terms) {
  constexpr size_t max_paths = 4;
  constexpr size_t max_path_bytes = 512;
  search_query result;
  size_t terms = 0;
  size_t i = 0;
  // Reads one word starting at i (a run of word bytes).
  auto read_word = [&] {
    auto start = i;
    while (i < query.size() && word_byte(static_cast<unsigned char>(query[i])))
      ++i;
    return std::string{query.substr(start, i - start)};
  };
  while (i < query.size() && terms < max_terms) {
    auto c = static_cast<unsigned char>(query[i]);
    if (c == '"') {
      // A phrase: the words up to the closing quote (or the end).
      ++i;
      std::vector<std::string> phrase;
      while (i < query.size() && query[i] != '"') {
        if (word_byte(static_cast<unsigned char>(query[i]))) {
          if (terms < max_terms) {
            phrase.push_back(read_word());
            ++terms;
          } else {
            read_word();
          }
        } else {
          ++i;
        }
      }
      ++i; // the closing quote
      if (phrase.size() == 1)
        result.words.push_back(std::move(phrase.front()));
      else if (!phrase.empty())
        result.phrases.push_back(std::move(phrase));
      continue;
    }
    if (!word_byte(c)) {
      ++i;
      continue;
    }
    auto start = i;
    auto word = read_word();
    if (i < query.size() && query[i] == ':' && (word == "path" || word == "site")
        && (start == 0 || sdk::is_ascii_space(query[start - 1]))) {
      // A filter: the text up to the next whitespace.
      auto from = ++i;
      while (i < query.size() && !sdk::is_ascii_space(query[i]))
        ++i;
      auto value = query.substr(from, i - from);
      if (!value.empty() && value.size() <= max_path_bytes && result.paths.size() < max_paths)
        result.paths.emplace_back(value);
      continue;
    }
    result.words.push_back(std::move(word));
    ++terms;
  }
  return result;
}

std::string make_snippet(std::string_view text, const std::vector<std::string>& terms,
                         size_t max_words) {
  // Word start and end offsets, at most a bounded number of them.
  constexpr size_t max_scan = 4096;
  std::vector<std::pair<size_t, size_t>> words;
  size_t i = 0;
  while (i < text.size() && words.size() < max_scan) {
    if (!word_byte(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    auto start = i;
    while (i < text.size() && word_byte(static_cast<unsigned char>(text[i])))
      ++i;
    words.emplace_back(start, i);
  }
  if (words.empty())
    return {};
  // A word matches a term when they share a prefix of all but the last
  // three bytes of the shorter one (at least three bytes).
  auto matches = [&](std::string_view w) {
    for (const auto& t : terms) {
      auto n = std::min(w.size(), t.size());
      size_t common = 0;
      while (common < n && lower_ascii(w[common]) == lower_ascii(t[common]))
        ++common;
      if (common == n && w.size() == t.size())
        return true;
      if (common >= 3 && common + 3 >= n)
        return true;
    }
    return false;
  };
  size_t first = 0;
  for (size_t k = 0; k < words.size(); ++k) {
    auto [a, b] = words[k];
    if (matches(text.substr(a, b - a))) {
      first = k;
      break;
    }
  }
  auto from = first > max_words / 4 ? first - max_words / 4 : 0;
  auto to = std::min(words.size(), from + max_words);
  if (to - from < max_words && to == words.size())
    from = to > max_words ? to - max_words : 0;
  auto begin = words[from].first;
  auto end = to < words.size() ? words[to - 1].second : text.size();
  std::string result;
  if (from > 0)
    result += "...";
  result.append(text.data() + begin, end - begin);
  if (to < words.size())
    result += "...";
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

std::string text_title(std::string_view text) {
  auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos)
    return {};
  auto end = text.find('\n', start);
  auto line = sdk::trim(
    text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
  // A blank line (or the end) follows.
  if (end != std::string_view::npos) {
    auto next = text.find('\n', end + 1);
    auto after = sdk::trim(text.substr(
      end + 1, next == std::string_view::npos ? std::string_view::npos : next - end - 1));
    if (!after.empty())
      return {};
  }
  if (line.size() < 3 || line.size() > 120)
    return {};
  auto last = line.back();
  if (last == '.' || last == ',' || last == ';')
    return {};
  size_t words = 0;
  bool letters = false;
  bool lower = false;
  for (size_t i = 0; i < line.size(); ++i) {
    auto c = line[i];
    if (c != ' ' && (i == 0 || line[i - 1] == ' '))
      ++words;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      letters = true;
    if (c >= 'a' && c <= 'z')
      lower = true;
  }
  if (words > 16 || !letters)
    return {};
  std::string title{line};
  if (lower)
    return title;
  // In capitals: title case, small words in lower case but the first and
  // the one after a colon.
  static const char* small[] = {"a",  "an", "and", "as", "at",  "by", "for",
                                "in", "of", "on",  "or", "the", "to", "with"};
  std::string out;
  bool first = true;
  for (size_t i = 0; i < title.size();) {
    auto j = title.find(' ', i);
    if (j == std::string::npos)
      j = title.size();
    std::string word = sdk::to_lower(std::string_view{title}.substr(i, j - i));
    bool is_small = std::any_of(std::begin(small), std::end(small),
                                [&](const char* w) { return word == w; });
    if (first || !is_small) {
      // Capitals after the start and after a hyphen ("First-Winter").
      for (size_t k = 0; k < word.size(); ++k)
        if ((k == 0 || word[k - 1] == '-') && word[k] >= 'a' && word[k] <= 'z')
          word[k] = static_cast<char>(word[k] - 'a' + 'A');
    }
    first = !word.empty() && word.back() == ':';
    out += word;
    if (j < title.size())
      out += ' ';
    i = j + 1;
  }
  return out;
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
