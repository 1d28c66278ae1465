// Text of the extractive provider: cleaning, sentences and paragraphs,
// words (lexical::tokenize, with the words for one change made one), BM25.

#include "internal.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <utility>

namespace quarry::plugins::llm_extractive {

namespace {

// Removes `[...truncated]` notes and, optionally, citation markers.
std::string clean_once(std::string_view x, bool strip_markers) {
  static constexpr std::string_view truncated = "[...truncated]";
  std::string result;
  result.reserve(x.size());
  size_t i = 0;
  while (i < x.size()) {
    if (x.substr(i, truncated.size()) == truncated) {
      i += truncated.size();
      result += ' ';
      continue;
    }
    if (strip_markers) {
      if (auto n = marker_length(x.substr(i)); n > 0) {
        i += n;
        // "text [3]." becomes "text.", not "text .".
        if (!result.empty() && result.back() == ' ' && i < x.size()
            && (x[i] == '.' || x[i] == ',' || x[i] == ';' || x[i] == ':' || x[i] == '!'
                || x[i] == '?'))
          result.pop_back();
        continue;
      }
    }
    result += x[i++];
  }
  return result;
}

// Removes Markdown heading, quote and list markers at the start of a line.
// Sets `is_item` if the line was a heading or a list item.
std::string_view strip_line_marker(std::string_view line, bool& is_item) {
  is_item = false;
  line = sdk::trim(line);
  size_t i = 0;
  while (i < line.size() && (line[i] == '#' || line[i] == '>'))
    ++i;
  if (i > 0) {
    is_item = true;
    return sdk::trim(line.substr(i));
  }
  if (line.size() >= 2 && (line[0] == '-' || line[0] == '*' || line[0] == '+') && line[1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(2));
  }
  while (i < line.size() && i < 3 && is_digit(line[i]))
    ++i;
  if (i > 0 && i + 1 < line.size() && (line[i] == '.' || line[i] == ')') && line[i + 1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(i + 2));
  }
  return line;
}

bool is_abbreviation(std::string_view word) {
  auto w = sdk::to_lower(word);
  for (auto x : {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "no", "fig",
                 "approx", "inc", "ltd", "jr", "sr", "u.s", "cf"})
    if (w == x)
      return true;
  // Initials such as "J." and dotted abbreviations such as "U.S.".
  return word.size() == 1 || (word.size() >= 3 && word[word.size() - 2] == '.');
}

// Splits one paragraph (no line breaks) into sentences.
void split_paragraph(std::string_view text, std::vector<std::string>& out) {
  auto para = collapse_spaces(text);
  size_t start = 0;
  for (size_t i = 0; i < para.size(); ++i) {
    auto c = para[i];
    if (c != '.' && c != '!' && c != '?')
      continue;
    // Take closing quotes, brackets and repeated terminators along.
    size_t end = i + 1;
    while (end < para.size()
           && (para[end] == '"' || para[end] == '\'' || para[end] == ')' || para[end] == '.'
               || para[end] == '!' || para[end] == '?'))
      ++end;
    if (end < para.size() && para[end] != ' ')
      continue; // e.g. "3.5" or "example.org"
    if (c == '.') {
      // The word before the period.
      size_t w = i;
      while (w > start && para[w - 1] != ' ')
        --w;
      if (is_abbreviation(std::string_view{para}.substr(w, i - w)))
        continue;
      // A sentence starts with an upper-case letter, a digit or a quote.
      if (end + 1 < para.size()) {
        auto next = para[end + 1];
        if (!is_upper(next) && !is_digit(next) && next != '"' && next != '\'' && next != '('
            && next != '[' && static_cast<unsigned char>(next) < 0x80)
          continue;
      }
    }
    auto sentence = sdk::trim(std::string_view{para}.substr(start, end - start));
    if (!sentence.empty())
      out.emplace_back(sentence);
    start = end;
    i = end == 0 ? 0 : end - 1;
  }
  auto rest = sdk::trim(std::string_view{para}.substr(std::min(start, para.size())));
  if (!rest.empty())
    out.emplace_back(rest);
}

std::string same_change(const std::string& stem) {
  for (const auto& group : change_words())
    if (std::find(group.stems.begin(), group.stems.end(), stem) != group.stems.end())
      return group.stems.front();
  return stem;
}

} // namespace

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}

char to_lower(char c) {
  return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c;
}

bool contains(std::string_view x, std::string_view needle) {
  return x.find(needle) != std::string_view::npos;
}

// Collapses runs of white space into one space and trims.
std::string collapse_spaces(std::string_view x) {
  std::string result;
  result.reserve(x.size());
  bool pending = false;
  for (auto c : x) {
    if (sdk::is_ascii_space(c)) {
      pending = !result.empty();
    } else {
      if (pending)
        result += ' ';
      pending = false;
      result += c;
    }
  }
  return result;
}

std::vector<std::string_view> split_lines(std::string_view x) {
  std::vector<std::string_view> result;
  size_t pos = 0;
  while (pos <= x.size()) {
    auto end = x.find('\n', pos);
    if (end == std::string_view::npos)
      end = x.size();
    result.push_back(x.substr(pos, end - pos));
    pos = end + 1;
  }
  return result;
}

// Returns the length of a citation-like marker (`[12]`, `[1, 2]`) at the
// start of `x`, or 0.
size_t marker_length(std::string_view x) {
  if (x.size() < 3 || x[0] != '[')
    return 0;
  size_t i = 1;
  bool digits = false;
  while (i < x.size()) {
    if (is_digit(x[i])) {
      digits = true;
    } else if (x[i] == ']') {
      return digits ? i + 1 : 0;
    } else if (x[i] != ',' && x[i] != ' ') {
      return 0;
    }
    ++i;
  }
  return 0;
}

// Like clean_once, until nothing changes: "[[2]5]" loses both markers.
std::string clean_text(std::string_view x, bool strip_markers) {
  auto result = clean_once(x, strip_markers);
  while (strip_markers) {
    auto again = clean_once(result, true);
    if (again == result)
      break;
    result = std::move(again);
  }
  return result;
}

// Splits text into sentences; a heading or list item ends a sentence.
std::vector<std::string> split_impl(std::string_view text, bool strip_markers) {
  auto cleaned = clean_text(text, strip_markers);
  std::vector<std::string> result;
  std::string buffer;
  auto flush = [&] {
    split_paragraph(buffer, result);
    buffer.clear();
  };
  for (auto line : split_lines(cleaned)) {
    bool is_item = false;
    auto body = strip_line_marker(line, is_item);
    if (sdk::trim(line).empty() || sdk::starts_with(sdk::trim(line), "```")) {
      flush();
      continue;
    }
    if (is_item) {
      flush();
      buffer = std::string{body};
      flush();
      continue;
    }
    if (!buffer.empty())
      buffer += ' ';
    buffer.append(body.data(), body.size());
  }
  flush();
  return result;
}

// Splits text into paragraphs at blank lines.
std::vector<std::string> paragraphs(std::string_view text) {
  std::vector<std::string> result;
  std::string current;
  for (auto line : split_lines(text)) {
    if (sdk::trim(line).empty()) {
      if (!current.empty())
        result.push_back(std::move(current));
      current.clear();
    } else {
      current.append(line.data(), line.size());
      current += '\n';
    }
  }
  if (!current.empty())
    result.push_back(std::move(current));
  return result;
}

// Normalized form of a sentence for duplicate detection.
std::string sentence_key(std::string_view sentence) {
  auto tokens = tokenize(clean_text(sentence, true));
  std::string result;
  for (const auto& token : tokens) {
    result += token;
    result += ' ';
  }
  return result.empty() ? sdk::to_lower(sentence) : result;
}

std::string with_marker(std::string_view sentence, int number) {
  auto body = sdk::trim(sentence);
  std::string marker = " [" + std::to_string(number) + "]";
  if (!body.empty() && (body.back() == '.' || body.back() == '!' || body.back() == '?')) {
    auto punct = body.back();
    body.remove_suffix(1);
    return std::string{sdk::trim(body)} + marker + punct;
  }
  return std::string{body} + marker + ".";
}

std::string truncate_words(std::string_view sentence, size_t max_words) {
  if (count_words(sentence) <= max_words)
    return std::string{sentence};
  std::string result;
  size_t words = 0;
  bool in_word = false;
  for (auto c : sentence) {
    if (sdk::is_ascii_space(c)) {
      if (in_word && ++words == max_words)
        break;
      in_word = false;
    } else {
      in_word = true;
    }
    result += c;
  }
  // An ellipsis glued to the last word: the quoted prefix stays verbatim.
  return std::string{sdk::trim(result)} + "\u2026";
}

// The Jaccard similarity of two sorted sets of words.
double jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() || b.empty())
    return 0;
  size_t common = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++common, ++i, ++j;
    }
  }
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

std::vector<std::string> word_set(std::vector<std::string> tokens) {
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

const std::vector<change_group>& change_words() {
  static const std::vector<change_group> groups = [] {
    std::vector<change_group> out;
    for (auto words : {std::vector<std::string>{"fall", "drop", "decline", "decrease"},
                       std::vector<std::string>{"rise", "increase", "grow"}}) {
      change_group group;
      for (const auto& w : words)
        group.stems.push_back(lexical::stem(w));
      group.spelt = std::move(words);
      out.push_back(std::move(group));
    }
    return out;
  }();
  return groups;
}

std::vector<std::string> split_sentences(std::string_view text) {
  return split_impl(text, true);
}

std::vector<std::string> tokenize(std::string_view text) {
  auto words = lexical::tokenize(text);
  for (auto& w : words)
    w = same_change(w);
  return words;
}

size_t count_words(std::string_view text) {
  return lexical::count_words(text);
}

int64_t estimate_tokens(std::string_view text) {
  auto words = static_cast<int64_t>(count_words(text));
  return (words * 4 + 2) / 3;
}

std::vector<double> bm25_scores(const std::vector<std::vector<std::string>>& docs,
                                const std::vector<std::string>& query) {
  return lexical::bm25_scores(docs, query);
}

std::vector<size_t> top_k(const std::vector<double>& scores, size_t k) {
  return lexical::top_k(scores, k);
}

} // namespace quarry::plugins::llm_extractive
