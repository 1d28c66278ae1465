// Pure logic of the extractive provider: deterministic text processing and
// the answer of each deep research role.

#include "extractive.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

namespace quarry::plugins::llm_extractive {

namespace {

// -- small string helpers -----------------------------------------------------

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
  if (line.size() >= 2 && (line[0] == '-' || line[0] == '*' || line[0] == '+')
      && line[1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(2));
  }
  while (i < line.size() && i < 3 && is_digit(line[i]))
    ++i;
  if (i > 0 && i + 1 < line.size() && (line[i] == '.' || line[i] == ')')
      && line[i + 1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(i + 2));
  }
  return line;
}

bool is_abbreviation(std::string_view word) {
  auto w = sdk::to_lower(word);
  for (auto x : {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st",
                 "no", "fig", "approx", "inc", "ltd", "jr", "sr", "u.s", "cf"})
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
           && (para[end] == '"' || para[end] == '\'' || para[end] == ')'
               || para[end] == '.' || para[end] == '!' || para[end] == '?'))
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
        if (!is_upper(next) && !is_digit(next) && next != '"' && next != '\''
            && next != '(' && next != '[' && static_cast<unsigned char>(next) < 0x80)
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

// Returns the first (or last) user message that is not a reminder, or any
// user message if all are reminders.
std::string find_user_text(const std::vector<sdk::chat_message>& messages, bool last) {
  const sdk::chat_message* fallback = nullptr;
  auto visit = [&](const sdk::chat_message& msg) -> bool {
    if (msg.author != sdk::role::user || sdk::trim(msg.content).empty())
      return false;
    if (fallback == nullptr)
      fallback = &msg;
    return !is_reminder(msg.content);
  };
  if (last) {
    for (auto i = messages.rbegin(); i != messages.rend(); ++i)
      if (visit(*i))
        return std::string{sdk::trim(i->content)};
  } else {
    for (const auto& msg : messages)
      if (visit(msg))
        return std::string{sdk::trim(msg.content)};
  }
  return fallback != nullptr ? std::string{sdk::trim(fallback->content)} : std::string{};
}

std::string system_text(const std::vector<sdk::chat_message>& messages) {
  std::string result;
  for (const auto& msg : messages)
    if (msg.author == sdk::role::system) {
      result += msg.content;
      result += '\n';
    }
  return result;
}

// Parses tool-call arguments; tolerates double-encoded JSON.
nlohmann::json parse_arguments(std::string_view text) {
  auto value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  return value.is_object() ? value : nlohmann::json::object();
}

// Tool calls of the history, and the results that answer them.
struct call_record {
  sdk::tool_call call;
  const sdk::chat_message* result = nullptr;
};

std::vector<call_record> collect_calls(const std::vector<sdk::chat_message>& messages) {
  std::vector<call_record> result;
  std::map<std::string, size_t> by_id;
  for (const auto& msg : messages) {
    if (msg.author == sdk::role::assistant) {
      for (const auto& call : msg.tool_calls) {
        by_id[call.id] = result.size();
        result.push_back({call, nullptr});
      }
    } else if (msg.author == sdk::role::tool) {
      auto i = by_id.find(msg.tool_call_id);
      if (i != by_id.end() && result[i->second].result == nullptr) {
        result[i->second].result = &msg;
      } else if (!msg.tool_name.empty()) {
        // A result whose call is not in the history still counts.
        sdk::tool_call call;
        call.id = msg.tool_call_id;
        call.name = msg.tool_name;
        result.push_back({std::move(call), &msg});
      }
    }
  }
  return result;
}

size_t count_calls(const std::vector<sdk::chat_message>& messages) {
  size_t result = 0;
  for (const auto& msg : messages)
    result += msg.tool_calls.size();
  return result;
}

bool looks_failed(std::string_view text) {
  auto x = sdk::to_lower(text.substr(0, 400));
  return sdk::trim(x).empty() || contains(x, "not run") || contains(x, "failed")
         || contains(x, "timed out");
}

const sdk::tool_definition* find_tool(const sdk::chat_request& req, std::string_view name) {
  for (const auto& tool : req.tools)
    if (tool.name == name)
      return &tool;
  return nullptr;
}

sdk::tool_call make_call(size_t number, std::string name, const nlohmann::json& args) {
  sdk::tool_call result;
  result.id = "call_" + std::to_string(number);
  result.name = std::move(name);
  result.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return result;
}

// Index of the step that best matches `text` (exact match first), or -1.
int match_step(const std::vector<std::string>& steps, std::string_view text) {
  auto needle = sdk::trim(text);
  for (size_t i = 0; i < steps.size(); ++i)
    if (sdk::trim(steps[i]) == needle)
      return static_cast<int>(i);
  std::vector<std::vector<std::string>> docs;
  for (const auto& step : steps)
    docs.push_back(tokenize(step));
  auto best = top_k(bm25_scores(docs, tokenize(needle)), 1);
  return best.empty() ? -1 : static_cast<int>(best.front());
}

// Removes leading words such as "and", "or", "also" from a clause.
std::string clean_clause(std::string_view clause) {
  auto x = sdk::trim(clause);
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto prefix : {"and ", "or ", "but ", "also ", "then ", "as well as ",
                        "plus "}) {
      if (sdk::starts_with(sdk::to_lower(x.substr(0, 12)), prefix)) {
        x = sdk::trim(x.substr(std::string_view{prefix}.size()));
        changed = true;
      }
    }
  }
  while (!x.empty() && (x.back() == ',' || x.back() == '.' || x.back() == ';'
                        || x.back() == ':'))
    x = sdk::trim(x.substr(0, x.size() - 1));
  std::string result{x};
  if (!result.empty() && result[0] >= 'a' && result[0] <= 'z')
    result[0] = static_cast<char>(result[0] - 'a' + 'A');
  return result;
}

// Whether `text` starts with a question word: a wh-word ("what", "how"),
// or, unless `wh_only`, an auxiliary verb ("can", "is", "does").
bool starts_question(std::string_view text, bool wh_only = false) {
  static const std::set<std::string> wh{"what", "why", "how", "when", "where", "which",
                                        "who", "whom", "whose", "whether"};
  static const std::set<std::string> auxiliaries{
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "should",
    "would", "will", "shall", "may", "might", "has", "have", "had"};
  auto x = sdk::trim(text);
  auto word = sdk::to_lower(x.substr(0, x.find_first_of(" ,;:?")));
  return wh.count(word) > 0 || (!wh_only && auxiliaries.count(word) > 0);
}

// Splits a clause where a coordinated question begins: at ", and " and
// ", or " before a question word, and at " and ", " or " and ", " before a
// wh-word ("Why X, and what Y" gives "Why X" and "what Y"; "X and is Y"
// stays whole). Nothing else splits.
std::vector<std::string> split_coordinated(const std::string& clause) {
  std::vector<std::string> parts;
  auto low = sdk::to_lower(clause);
  size_t from = 0;
  size_t pos = 0;
  while (pos < low.size()) {
    size_t skip = 0;
    bool wh_only = true;
    for (std::string_view sep : {", and ", ", or ", " and ", " or ", ", "})
      if (std::string_view{low}.substr(pos, sep.size()) == sep) {
        skip = sep.size();
        wh_only = sep == " and " || sep == " or " || sep == ", ";
        break;
      }
    if (skip > 0 && pos > from
        && starts_question(std::string_view{low}.substr(pos + skip), wh_only)) {
      parts.push_back(clause.substr(from, pos - from));
      from = pos + skip;
      pos = from;
      continue;
    }
    ++pos;
  }
  parts.push_back(clause.substr(from));
  return parts;
}

// The question's key phrase: its words without leading question words.
std::string key_phrase(std::string_view question) {
  auto words = collapse_spaces(question);
  while (!words.empty() && (words.back() == '?' || words.back() == '.'
                            || words.back() == '!'))
    words.pop_back();
  static const std::set<std::string> lead{
    "what", "how", "why", "when", "where", "who", "which", "is", "are", "do",
    "does", "did", "can", "could", "should", "would", "will", "the", "a", "an",
    "tell", "me", "about", "explain", "describe", "please", "was", "were"};
  std::string_view rest{words};
  while (!rest.empty()) {
    auto space = rest.find(' ');
    auto word = sdk::to_lower(rest.substr(0, space));
    if (lead.count(word) == 0 || space == std::string_view::npos)
      break;
    rest = rest.substr(space + 1);
  }
  return std::string{rest};
}

bool has_pronoun(std::string_view text) {
  static const std::set<std::string> pronouns{"they", "it", "them", "its", "their",
                                              "these", "this", "those", "he", "she",
                                              "his", "her"};
  std::string word;
  std::string padded{text};
  padded += ' ';
  for (auto c : padded) {
    if ((c >= 'a' && c <= 'z') || is_upper(c)) {
      word += to_lower(c);
    } else {
      if (pronouns.count(word) > 0)
        return true;
      word.clear();
    }
  }
  return false;
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

// -- choosing sentences -------------------------------------------------------

// How many units a section of the final report holds at most, and how many
// more the coverage pass may add to it.
constexpr size_t section_units = 9;
constexpr size_t cover_units = 6;

// A source the final report's sections leave out is quoted when its best
// unit reaches this share of its section's best: an agent chose the unit
// already, so only one that holds almost nothing of the step stays out.
constexpr double final_cover_share = 0.05;

// Maximal marginal relevance: the weight of relevance against novelty.
constexpr double mmr_lambda = 0.7;

// Units at least this similar (Jaccard of their word sets) to one already
// chosen are repeats and never chosen.
constexpr double near_duplicate = 0.6;

// What each unit already chosen from the same source costs the next one,
// so that a section quotes several sources rather than one at length.
constexpr double same_source_penalty = 0.25;

// Whether a sentence asks a question ("Q: Why ...?").
bool is_question_sentence(std::string_view sentence) {
  auto x = sdk::trim(sentence);
  while (!x.empty() && (x.back() == '"' || x.back() == '\'' || x.back() == ')'))
    x.remove_suffix(1);
  return !x.empty() && x.back() == '?';
}

// Removes a "Q:", "A:", "Question:" or "Answer:" label at the start.
std::string strip_qa_label(std::string_view sentence) {
  auto x = sdk::trim(sentence);
  auto low = sdk::to_lower(x.substr(0, 10));
  for (std::string_view label : {"question:", "answer:", "q:", "a:"})
    if (sdk::starts_with(low, label))
      return std::string{sdk::trim(x.substr(label.size()))};
  return std::string{x};
}

// Removes a cross-reference that ends a sentence ("...; see the document on
// X."), which points at nothing the reader has.
std::string drop_cross_reference(std::string sentence) {
  auto low = sdk::to_lower(sentence);
  for (std::string_view mark : {"; see ", ", see ", " (see "}) {
    auto at = low.rfind(mark);
    if (at == std::string::npos || count_words(std::string_view{sentence}.substr(0, at)) < 6)
      continue;
    if (mark == " (see ") {
      auto close = sentence.find(')', at);
      if (close == std::string::npos || sdk::trim(sentence.substr(close + 1)).size() > 1)
        continue;
    }
    auto end = sentence.back() == '!' || sentence.back() == '?' ? sentence.back() : '.';
    return std::string{sdk::trim(std::string_view{sentence}.substr(0, at))} + end;
  }
  return sentence;
}

// Whether a sentence can stand alone in a report: six words at least, not
// the lead-in to a list (ending with a colon), not a heading in capitals.
bool usable_sentence(std::string_view sentence) {
  auto x = sdk::trim(sentence);
  if (count_words(x) < 6 || x.empty() || x.back() == ':')
    return false;
  // A short line without an end mark is a heading ("Worked example: a large
  // heat pump in a network"), not a sentence.
  if (count_words(x) < 12 && std::string_view{".!?;)\"'"}.find(x.back()) == std::string_view::npos
      && !sdk::ends_with(x, "\u201d"))
    return false;
  // A pointer to another document ("See the document on X", "the documents
  // on X and Y return to this point") says nothing by itself.
  auto low = sdk::to_lower(x);
  if (sdk::starts_with(low, "see ") || contains(low, "the document on ")
      || contains(low, "the documents on ") || contains(low, "this collection"))
    return false;
  // A quotation on its own ("Heat pumps don't work in cold weather") is a
  // claim someone makes, not what the source says.
  auto unquoted = x;
  while (!unquoted.empty() && std::string_view{".!?"}.find(unquoted.back()) != std::string_view::npos)
    unquoted.remove_suffix(1);
  if (unquoted.size() > 2 && (unquoted.front() == '"' || sdk::starts_with(unquoted, "\u201c"))
      && (unquoted.back() == '"' || unquoted.substr(unquoted.size() - 3) == "\u201d"))
    return false;
  // The lead-in to a list that follows ("... in three ways at once").
  if (count_words(x) < 16)
    for (std::string_view count : {"two", "three", "four", "five", "several", "many"})
      for (std::string_view what : {" ways", " reasons", " steps", " factors", " things"})
        if (contains(low, std::string{" "} + std::string{count} + std::string{what})
            || contains(low, std::string{" "} + std::string{count} + " connected"
                               + std::string{what}))
          return false;
  size_t letters = 0;
  size_t upper = 0;
  for (auto c : x) {
    if (c >= 'a' && c <= 'z')
      ++letters;
    else if (is_upper(c))
      ++letters, ++upper;
  }
  return letters < 8 || upper * 10 <= letters * 6;
}

// A unit of a report taken from a source: one sentence, or a question
// together with the answer that follows it.
struct source_unit {
  size_t source;
  std::string text;
};

// The units of the texts of each source, without repeats.
std::vector<source_unit> report_units(const std::vector<std::vector<std::string>>& texts) {
  std::vector<source_unit> result;
  std::set<std::string> seen;
  for (size_t d = 0; d < texts.size(); ++d)
    for (const auto& text : texts[d]) {
      auto sentences = split_sentences(text);
      for (size_t i = 0; i < sentences.size(); ++i) {
        std::string unit;
        if (is_question_sentence(sentences[i])) {
          // A question is quoted only with its answer: the sentences after
          // it, up to two, until the next question.
          auto question = strip_qa_label(sentences[i]);
          std::string answer;
          size_t j = i + 1;
          while (j < sentences.size() && j < i + 3 && !is_question_sentence(sentences[j])
                 && count_words(answer) < 25) {
            answer += (answer.empty() ? "" : " ") + strip_qa_label(sentences[j]);
            ++j;
          }
          i = j - 1;
          if (count_words(answer) < 4)
            continue;
          unit = truncate_words(question + " " + answer, 90);
          if (seen.insert(sentence_key(unit)).second)
            result.push_back({d, std::move(unit)});
          continue;
        }
        unit = drop_cross_reference(strip_qa_label(sentences[i]));
        if (!usable_sentence(unit))
          continue;
        unit = truncate_words(unit, 60);
        if (seen.insert(sentence_key(unit)).second)
          result.push_back({d, std::move(unit)});
      }
    }
  return result;
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

// Whether a unit opens with a word that points back at text the reader of
// a quotation does not have ("It excels at ...", "This is one reason ...").
bool opens_with_reference(std::string_view text) {
  static const std::set<std::string> words{"it",   "its",   "this", "these", "they",
                                           "them", "their", "that", "those", "he",
                                           "she",  "his",   "her",  "such"};
  auto x = sdk::trim(text);
  while (!x.empty() && (x.front() == '*' || x.front() == '"' || x.front() == '('))
    x.remove_prefix(1);
  auto end = x.find_first_of(" ,;:.'");
  return words.count(sdk::to_lower(x.substr(0, end))) > 0;
}

// What a unit opening with such a word keeps of its relevance.
constexpr double reference_discount = 0.6;

// The largest weight of one query word in @ref relevance_scores.
constexpr double max_word_weight = 2.0;

// How well each unit answers `query`: the weights of the distinct query
// words it holds, each weight the word's inverse document frequency among
// the units capped at @ref max_word_weight, plus a twentieth of its BM25
// score to break ties. Among passages retrieved for a topic the topic's own
// words are common, so uncapped BM25 would favour a unit holding one rare
// side word over one holding the topic's words together.
std::vector<double> relevance_scores(const std::vector<std::vector<std::string>>& units,
                                     const std::vector<std::string>& query) {
  auto bm25 = bm25_scores(units, query);
  auto terms = word_set(query);
  std::vector<std::vector<std::string>> sets;
  std::map<std::string, size_t> df;
  for (const auto& x : units) {
    sets.push_back(word_set(x));
    for (const auto& t : sets.back())
      if (std::binary_search(terms.begin(), terms.end(), t))
        ++df[t];
  }
  auto n = static_cast<double>(units.size());
  std::vector<double> result(units.size(), 0.0);
  for (size_t i = 0; i < units.size(); ++i) {
    for (const auto& t : sets[i]) {
      if (!std::binary_search(terms.begin(), terms.end(), t))
        continue;
      auto k = static_cast<double>(df[t]);
      result[i] += std::min(max_word_weight, std::log(1 + (n - k + 0.5) / (k + 0.5)));
    }
    result[i] += 0.05 * bm25[i];
  }
  return result;
}

// Chooses up to `k` units by maximal marginal relevance: each time the unit
// whose relevance (scaled to the best) most exceeds its similarity to what
// is chosen already (`taken`, which grows), less a little for each unit
// already chosen from its group (its source). Units without relevance, and
// near repeats of chosen ones, are never chosen. Returns the indexes in the
// order chosen: the most relevant first.
std::vector<size_t> select_mmr(const std::vector<std::vector<std::string>>& tokens,
                               const std::vector<double>& relevance,
                               const std::vector<size_t>& groups, size_t k,
                               std::vector<std::vector<std::string>>& taken) {
  std::vector<size_t> picked;
  auto top = relevance.empty() ? 0.0 : *std::max_element(relevance.begin(), relevance.end());
  if (top <= 0)
    return picked;
  std::vector<std::vector<std::string>> sets;
  for (const auto& x : tokens)
    sets.push_back(word_set(x));
  std::vector<bool> out(tokens.size(), false);
  std::map<size_t, int> per_group;
  while (picked.size() < k) {
    size_t at = tokens.size();
    double best = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (out[i] || relevance[i] <= 0)
        continue;
      double similar = 0;
      for (const auto& t : taken)
        similar = std::max(similar, jaccard(sets[i], t));
      if (similar >= near_duplicate) {
        out[i] = true;
        continue;
      }
      auto score = mmr_lambda * relevance[i] / top - (1 - mmr_lambda) * similar
                   - same_source_penalty * per_group[groups[i]];
      if (at == tokens.size() || score > best) {
        at = i;
        best = score;
      }
    }
    if (at == tokens.size())
      break;
    out[at] = true;
    picked.push_back(at);
    taken.push_back(sets[at]);
    ++per_group[groups[at]];
  }
  return picked;
}

// A unit of a source that the units chosen leave out stands for it when it
// reaches this share of the best unit's relevance; of a source the agent
// read whole (it chose it for the task), this share.
constexpr double cover_share = 0.5;
constexpr double read_cover_share = 0.25;

// The coverage pass: a report quotes every source that holds a strong
// answer, not only the sources of the units maximal marginal relevance
// chose. Each source (group) without a unit among `picked` whose best unit
// reaches its `share` of the best relevance adds that unit, unless it nearly
// repeats one taken; the strongest first, at most `limit` units.
void cover_groups(const std::vector<std::vector<std::string>>& tokens,
                  const std::vector<double>& relevance, const std::vector<size_t>& groups,
                  const std::vector<double>& share, size_t limit, std::vector<size_t>& picked,
                  std::vector<std::vector<std::string>>& taken) {
  auto top = relevance.empty() ? 0.0 : *std::max_element(relevance.begin(), relevance.end());
  if (top <= 0)
    return;
  std::set<size_t> covered;
  for (auto i : picked)
    covered.insert(groups[i]);
  size_t added = 0;
  for (auto i : top_k(relevance, relevance.size())) {
    if (added >= limit || relevance[i] <= 0)
      break;
    if (covered.count(groups[i]) > 0 || relevance[i] < share[groups[i]] * top)
      continue;
    auto set = word_set(tokens[i]);
    double similar = 0;
    for (const auto& t : taken)
      similar = std::max(similar, jaccard(set, t));
    if (similar >= near_duplicate)
      continue;
    covered.insert(groups[i]);
    picked.push_back(i);
    taken.push_back(std::move(set));
    ++added;
  }
}

// Lays chosen units out as paragraphs: the first (the most direct answer)
// alone, then the others grouped by source, sources in the order chosen.
std::string arrange(const std::vector<std::string>& units, const std::vector<size_t>& groups) {
  if (units.empty())
    return {};
  std::string result = units.front();
  std::vector<size_t> order;
  std::map<size_t, std::vector<size_t>> by_group;
  for (size_t i = 1; i < units.size(); ++i) {
    if (by_group.count(groups[i]) == 0)
      order.push_back(groups[i]);
    by_group[groups[i]].push_back(i);
  }
  for (auto g : order) {
    result += "\n\n";
    const auto& members = by_group[g];
    for (size_t j = 0; j < members.size(); ++j)
      result += (j > 0 ? " " : "") + units[members[j]];
  }
  return result;
}

// A unit of an agent's report: the text up to and including a citation
// marker (and the punctuation right after it).
struct cited_unit {
  /// As written, marker included.
  std::string text;
  /// Without the marker.
  std::string plain;
  /// The marker, e.g. "[3]"; empty for a sentence without one.
  std::string marker;
};

// The cited units of a report; a paragraph without markers gives its
// sentences, uncited.
std::vector<cited_unit> cited_units(std::string_view report) {
  std::vector<cited_unit> result;
  for (const auto& para : paragraphs(report)) {
    auto flat = collapse_spaces(para);
    size_t start = 0;
    bool any = false;
    for (size_t i = 0; i < flat.size(); ++i) {
      auto n = marker_length(std::string_view{flat}.substr(i));
      if (n == 0)
        continue;
      auto end = i + n;
      if (end < flat.size() && std::string_view{".!?;,"}.find(flat[end]) != std::string_view::npos)
        ++end;
      cited_unit unit;
      unit.text = std::string{sdk::trim(std::string_view{flat}.substr(start, end - start))};
      unit.plain = collapse_spaces(clean_text(unit.text, true));
      unit.marker = flat.substr(i, n);
      any = true;
      start = end;
      i = end - 1;
      if (count_words(unit.plain) > 0)
        result.push_back(std::move(unit));
    }
    if (!any)
      for (auto& sentence : split_impl(para, false)) {
        if (sdk::starts_with(sentence, "No information relevant")
            || sdk::starts_with(sentence, "No sources were found"))
          continue;
        cited_unit unit;
        unit.plain = sentence;
        unit.text = std::move(sentence);
        result.push_back(std::move(unit));
      }
  }
  return result;
}

// A plan step as a heading: without the context added for the agents.
std::string plain_heading(const std::string& step) {
  auto heading = step;
  if (auto at = heading.find(" (regarding: "); at != std::string::npos && at > 0)
    heading.erase(at);
  return heading;
}

// The short report for a question the sources do not answer: says so, and
// quotes the nearest passages found (with their markers).
std::string unanswered_report(const std::string& question,
                              const lexical::coverage& cover,
                              const std::vector<std::string>& nearest) {
  std::string result = "The documents searched do not answer the question";
  if (!question.empty())
    result += " \"" + question + "\"";
  result += ". ";
  if (cover.terms == 0)
    result += "It has no words to search for beyond the most common ones.";
  else
    result += "Of its " + std::to_string(cover.terms) + " key words, "
              + std::to_string(cover.found) + " occur in the passages found, and no passage "
              "holds more than " + std::to_string(cover.best_passage) + " of them.";
  result += "\n\n> **Extractive report:** no language model was used; nothing below "
            "answers the question.\n";
  if (nearest.empty()) {
    result += "\nNo passage near the question was found.\n";
  } else {
    result += "\n## Nearest passages\n\n";
    for (const auto& x : nearest)
      result += "- " + x + "\n";
  }
  result += "\nRephrase the question in words the documents use, or add documents that "
            "cover it.\n";
  return result;
}

// -- the roles ----------------------------------------------------------------

answer respond_clarify(const sdk::chat_request& req) {
  answer result;
  if (req.choice != sdk::tool_choice::none) {
    const sdk::tool_definition* skip = find_tool(req, "generate_plan");
    for (const auto& tool : req.tools) {
      if (skip != nullptr)
        break;
      auto name = sdk::to_lower(tool.name);
      if (contains(name, "plan") || contains(name, "skip"))
        skip = &tool;
    }
    if (skip != nullptr) {
      result.tool_calls.push_back(make_call(count_calls(req.messages) + 1, skip->name,
                                            nlohmann::json::object()));
      return result;
    }
  }
  result.text = "No clarification needed.";
  return result;
}

// The plan: from the system prompt, else from a reminder in the history.
std::vector<std::string> find_plan(const sdk::chat_request& req) {
  auto plan = parse_plan(system_text(req.messages));
  for (auto i = req.messages.rbegin(); plan.empty() && i != req.messages.rend(); ++i)
    if (i->author == sdk::role::user && is_reminder(i->content))
      plan = parse_plan(i->content);
  return plan;
}

answer respond_orchestrate(const sdk::chat_request& req, const compose_options& opts) {
  answer result;
  auto question = find_user_text(req.messages, true);
  auto plan = find_plan(req);
  if (plan.empty())
    plan = split_question(lexical::asked_question(question));
  std::vector<int> attempts(plan.size(), 0);
  std::vector<bool> done(plan.size(), false);
  for (const auto& rec : collect_calls(req.messages)) {
    if (rec.call.name != "research_agent" || rec.result == nullptr)
      continue;
    auto args = parse_arguments(rec.call.arguments);
    auto task = args.contains("task") && args["task"].is_string()
                  ? args["task"].get<std::string>()
                  : std::string{};
    auto step = match_step(plan, task);
    if (step < 0)
      continue;
    auto& n = attempts[static_cast<size_t>(step)];
    ++n;
    if (!looks_failed(rec.result->content) || n >= 2)
      done[static_cast<size_t>(step)] = true;
  }
  auto limit = std::max(1, opts.max_parallel);
  if (auto from_prompt = find_parallel_limit(system_text(req.messages)); from_prompt > 0)
    limit = std::min(limit, from_prompt);
  auto tools_ok = req.choice != sdk::tool_choice::none;
  auto next_id = count_calls(req.messages) + 1;
  if (tools_ok && find_tool(req, "research_agent") != nullptr) {
    for (size_t i = 0; i < plan.size(); ++i) {
      if (done[i] || result.tool_calls.size() >= static_cast<size_t>(limit))
        continue;
      result.tool_calls.push_back(
        make_call(next_id++, "research_agent", nlohmann::json{{"task", plan[i]}}));
    }
    if (!result.tool_calls.empty())
      return result;
  }
  if (tools_ok && find_tool(req, "generate_report") != nullptr) {
    result.tool_calls.push_back(
      make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "All plan steps have been researched.";
  return result;
}

// Whether `tool` takes an array parameter `key` (how a model tells tools
// apart: by their definitions, not by their names, which users choose).
bool takes_array(const sdk::tool_definition& tool, const char* key) {
  const auto& params = tool.parameters;
  if (!params.is_object() || !params.contains("properties")
      || !params["properties"].is_object())
    return false;
  const auto& props = params["properties"];
  if (!props.contains(key) || !props[key].is_object())
    return false;
  // A plugin's schema may say anything: `type` may be a list or missing.
  const auto& param = props[key];
  return param.contains("type") && param["type"].is_string()
         && param["type"].get_ref<const std::string&>() == "array";
}

// The search tools of a request (any tool taking `queries`): one named
// `internal_search` first, as before, then the others in the request's order.
std::vector<std::string> search_tools(const sdk::chat_request& req) {
  std::vector<std::string> internal;
  std::vector<std::string> other;
  for (const auto& tool : req.tools) {
    if (!takes_array(tool, "queries"))
      continue;
    if (tool.name == "internal_search")
      internal.push_back(tool.name);
    else
      other.push_back(tool.name);
  }
  internal.insert(internal.end(), other.begin(), other.end());
  return internal;
}

// The first page reader of a request (a tool taking `urls`), or null.
const sdk::tool_definition* page_reader(const sdk::chat_request& req) {
  for (const auto& tool : req.tools)
    if (takes_array(tool, "urls"))
      return &tool;
  return nullptr;
}

// The search tool of the first search in `calls`.
std::string calls_of_search(const std::vector<call_record>& calls,
                            const std::vector<std::string>& searches) {
  for (const auto& rec : calls)
    if (std::find(searches.begin(), searches.end(), rec.call.name) != searches.end())
      return rec.call.name;
  return searches.empty() ? std::string{} : searches.front();
}

// How many pages a research agent reads after its searches.
constexpr size_t pages_to_read = 10;

// How many words a refined query adds to the task's.
constexpr size_t refinement_words = 4;

// A refined query (pseudo-relevance feedback): the task's words, then the
// words that most of the five documents matching the task best share and
// the task lacks (four letters at least, no numbers). Words are matched by
// their stems (lexical::tokenize) and written as the documents spell them
// most often, as a search engine takes them. Empty when no word qualifies.
std::string refined_query(const std::string& task, const std::vector<source_doc>& found) {
  auto stems_of = [](const std::vector<std::string>& words) {
    std::vector<std::string> out;
    out.reserve(words.size());
    for (const auto& w : words)
      out.push_back(lexical::stem(w));
    return out;
  };
  static const auto regarding = lexical::stem("regarding");
  auto task_words = lexical::words(task);
  auto task_stems = stems_of(task_words);
  std::set<std::string> known{task_stems.begin(), task_stems.end()};
  std::vector<std::vector<std::string>> spelt;
  std::vector<std::vector<std::string>> docs;
  for (const auto& doc : found) {
    std::string text = doc.title;
    for (const auto& x : doc.texts)
      text += " " + x;
    spelt.push_back(lexical::words(text));
    docs.push_back(stems_of(spelt.back()));
  }
  auto best = top_k(bm25_scores(docs, task_stems), 5);
  std::map<std::string, size_t> df_all;
  for (const auto& doc : docs)
    for (const auto& w : word_set(doc))
      ++df_all[w];
  std::map<std::string, size_t> df;
  std::map<std::string, size_t> tf;
  // How often the best documents spell each stem each way.
  std::map<std::string, std::map<std::string, size_t>> spellings;
  for (auto i : best) {
    for (size_t k = 0; k < docs[i].size(); ++k) {
      ++tf[docs[i][k]];
      ++spellings[docs[i][k]][spelt[i][k]];
    }
    for (const auto& w : word_set(docs[i]))
      ++df[w];
  }
  // The commonest spelling (of equals, the first in byte order).
  auto spelling = [&](const std::string& stem) {
    const auto& forms = spellings[stem];
    auto most = std::max_element(forms.begin(), forms.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    return most == forms.end() ? stem : most->first;
  };
  // Shared by two of the best documents at least; weighted by how often the
  // best documents use it and how few of all the documents found do.
  std::vector<std::pair<double, std::string>> ranked;
  auto n = static_cast<double>(docs.size());
  for (const auto& [w, k] : df) {
    if (k < 2 || known.count(w) != 0 || w == regarding
        || std::any_of(w.begin(), w.end(), [](char c) { return is_digit(c); }))
      continue;
    auto word = spelling(w);
    if (word.size() >= 4)
      ranked.emplace_back(static_cast<double>(tf[w])
                            * std::log(1 + n / static_cast<double>(df_all[w])),
                          std::move(word));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (ranked.empty())
    return {};
  std::string query;
  for (const auto& w : task_words)
    if (w != "regarding")
      query += (query.empty() ? "" : " ") + w;
  for (size_t i = 0; i < ranked.size() && i < refinement_words; ++i)
    query += " " + ranked[i].second;
  return query;
}

// -- following references -----------------------------------------------------

// How many references an agent follows after its first reading.
constexpr size_t leads_to_follow = 8;

// How many searches an agent makes for references it cannot place, and how
// many references go into one.
constexpr size_t lead_searches = 3;
constexpr size_t references_per_search = 2;

// How many pages an agent reads after following references.
constexpr size_t lead_pages_to_read = 10;

// A passage counts as speaking to the task when its relevance reaches this
// share of the best passage's.
constexpr double lead_passage_share = 0.5;

// The paragraphs of a text, each with the headings of its section joined
// to it (an item of a list under "What manufacturers do about it" is about
// what manufacturers do), and a heading with nothing under it alone.
std::vector<std::string> passages_of(std::string_view text) {
  std::vector<std::string> result;
  std::string heading;
  bool under_heading = false;
  for (auto& para : paragraphs(text)) {
    auto trimmed = sdk::trim(para);
    if (trimmed.find('\n') == std::string_view::npos && !trimmed.empty()
        && trimmed.front() == '#') {
      if (under_heading)
        heading.clear();
      under_heading = false;
      heading += std::string{trimmed} + "\n";
      continue;
    }
    result.push_back(heading + para);
    under_heading = true;
  }
  if (!heading.empty() && !under_heading)
    result.push_back(std::move(heading));
  return result;
}

// A pointer from one document to others: the words that name what it
// points to, and whether it names several ("the documents on refrigerants").
struct reference {
  std::string text;
  bool plural = false;
};

// The things a passage refers the reader to: what follows "the document
// on", "the article on", "the section on" (and their plurals) or "see", up
// to the end of the clause; "the documents on A and on B" gives A and B.
std::vector<reference> references_in(std::string_view passage) {
  auto text = collapse_spaces(clean_text(passage, true));
  auto low = sdk::to_lower(text);
  // Where each reference's words start and end, and whether it names
  // several documents.
  std::vector<std::tuple<size_t, size_t, bool>> spans;
  static const std::vector<std::string> nouns{"document", "article", "section", "chapter",
                                              "page",     "guide",   "entry",   "note"};
  for (const auto& noun : nouns)
    for (std::string_view suffix : {"s on ", " on ", "s about ", " about "}) {
      auto mark = noun + std::string{suffix};
      for (auto at = low.find(mark); at != std::string::npos; at = low.find(mark, at + 1))
        if (at == 0 || low[at - 1] == ' ')
          spans.emplace_back(at, at + mark.size(), suffix.front() == 's');
    }
  for (std::string_view mark : {"; see ", "(see ", ". see ", ", see "}) {
    for (auto at = low.find(mark); at != std::string::npos; at = low.find(mark, at + 1)) {
      auto from = at + mark.size();
      if (low.compare(from, 4, "the ") == 0 || low.compare(from, 5, "also ") == 0
          || low.compare(from, 5, "below") == 0 || low.compare(from, 5, "above") == 0)
        continue; // "see the document on X" is found above
      spans.emplace_back(at, from, false);
    }
  }
  if (sdk::starts_with(low, "see ") && low.compare(4, 4, "the ") != 0)
    spans.emplace_back(0, 4, false);
  static const std::vector<std::string_view> clause_ends{
    " explains", " explain ", " describes", " describe ", " gives", " give ", " shows",
    " show ", " covers", " discusses", " returns", " return ", " explores", " notes ",
    " lists", " goes ", " go ",  " has ",     " have ",  " is ",   " are ",  " for ",
    " which",    " that ",    " where ",    " when ",   " with ",  " in this", " to "};
  std::vector<reference> result;
  for (auto [at, from, plural] : spans) {
    auto end = low.find_first_of(".;:()!?\"", from);
    if (end == std::string::npos)
      end = low.size();
    // "on A and the document on B": A ends where the next reference starts.
    for (const auto& other_span : spans) {
      auto other = std::get<0>(other_span);
      if (other >= from && other < end)
        end = other;
    }
    for (auto stop : clause_ends) {
      auto x = low.find(stop, from);
      if (x != std::string::npos && x < end)
        end = x;
    }
    // "on A and on B", "on A, and on B": two references.
    auto phrase = std::string{sdk::trim(std::string_view{text}.substr(from, end - from))};
    // Each of those names one document or one topic.
    for (std::string_view sep : {", and on ", " and on ", ", on "}) {
      auto split = sdk::to_lower(phrase).find(sep);
      if (split != std::string::npos) {
        result.push_back({phrase.substr(0, split), false});
        phrase = phrase.substr(split + sep.size());
        plural = false;
      }
    }
    result.push_back({std::move(phrase), plural});
  }
  // Drop empty or trailing-comma phrases; keep at most eight words each.
  std::vector<reference> cleaned;
  for (auto& x : result) {
    std::string words;
    size_t n = 0;
    for (auto c : x.text) {
      auto u = static_cast<unsigned char>(c);
      auto keep = (u >= 0x80) || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                  || is_upper(c);
      words += keep ? c : ' ';
    }
    std::string out;
    auto flat = collapse_spaces(words);
    size_t pos = 0;
    while (pos < flat.size() && n < 8) {
      auto space = flat.find(' ', pos);
      if (space == std::string::npos)
        space = flat.size();
      out += (out.empty() ? "" : " ") + flat.substr(pos, space - pos);
      ++n;
      pos = space + 1;
    }
    // "A and the" (before the next reference) loses its dangling words.
    for (bool again = true; again;) {
      again = false;
      for (std::string_view tail : {" and", " the", " and the", " a", " an", " or", " of"})
        if (sdk::ends_with(sdk::to_lower(out), tail)) {
          out.resize(out.size() - tail.size());
          again = true;
        }
    }
    if (!tokenize(out).empty())
      cleaned.push_back({std::move(out), x.plural});
  }
  return cleaned;
}

// The documents of `titles` a reference names: the title whose words the
// reference holds (three quarters of them at least, two at least when it has
// two), or which holds three quarters of the reference's words (three at
// least), or the only title that holds all of them, the one matching most
// words first, then again with the words left
// ("refrigerants, natural refrigerants and global warming potential" names
// two titles). A plural reference ("the documents on refrigerants") names
// every title that holds all its words, when one does.
std::vector<size_t> resolve_reference(const std::vector<std::string>& reference,
                                      const std::vector<std::vector<std::string>>& titles,
                                      bool plural) {
  std::vector<size_t> result;
  auto left = word_set(reference);
  auto matches = [&](size_t t) {
    size_t matched = 0;
    for (const auto& w : titles[t])
      if (std::binary_search(left.begin(), left.end(), w))
        ++matched;
    return matched;
  };
  if (plural && !left.empty()) {
    // "The documents on refrigerants": every title that holds all of it.
    for (size_t t = 0; t < titles.size(); ++t)
      if (matches(t) == left.size())
        result.push_back(t);
    if (!result.empty())
      return result;
  }
  while (!left.empty()) {
    size_t best = titles.size();
    size_t best_matched = 0;
    // The titles that hold every word left.
    size_t holding_all = 0;
    for (size_t t = 0; t < titles.size(); ++t)
      if (std::find(result.begin(), result.end(), t) == result.end()
          && matches(t) == left.size())
        ++holding_all;
    for (size_t t = 0; t < titles.size(); ++t) {
      if (titles[t].empty()
          || std::find(result.begin(), result.end(), t) != result.end())
        continue;
      auto matched = matches(t);
      // Most of the title is in the reference, or (three words or more)
      // most of the reference is in the title ("running costs and the
      // price ratio" names "Running Costs and the Electricity-to-Gas Price
      // Ratio"), or the title is the only one that holds all of it
      // ("seasonal performance").
      auto title_side = matched * 4 >= titles[t].size() * 3
                        && matched >= std::min<size_t>(2, titles[t].size());
      auto reference_side = (matched >= 3 && matched * 4 >= left.size() * 3)
                            || (matched == left.size() && holding_all == 1);
      if (!title_side && !reference_side)
        continue;
      if (matched > best_matched) {
        best = t;
        best_matched = matched;
      }
    }
    if (best == titles.size())
      break;
    result.push_back(best);
    std::vector<std::string> rest;
    for (const auto& w : left)
      if (!std::binary_search(titles[best].begin(), titles[best].end(), w))
        rest.push_back(w);
    left = std::move(rest);
  }
  return result;
}

// The references an agent follows (pseudo-relevance feedback through the
// sources' own pointers, as a researcher follows a citation): those in the
// passages of `found` that speak to the task (half the best passage's
// relevance at least), and every one of the document that speaks to it
// best (a checklist's pointers, a survey's); each weighs as its passage,
// plus what its own words hold of the task's; each once, the heaviest first.
std::vector<reference> task_references(const std::string& task,
                                       const std::vector<source_doc>& found) {
  std::vector<std::string> passages;
  std::vector<size_t> owner;
  std::vector<std::vector<std::string>> doc_tokens;
  std::vector<std::vector<std::string>> titles;
  for (size_t d = 0; d < found.size(); ++d) {
    std::string all = found[d].title;
    for (const auto& text : found[d].texts) {
      all += " " + text;
      for (auto& p : passages_of(text)) {
        passages.push_back(std::move(p));
        owner.push_back(d);
      }
    }
    doc_tokens.push_back(tokenize(all));
    titles.push_back(tokenize(found[d].title));
  }
  std::vector<reference> result;
  if (passages.empty())
    return result;
  auto task_tokens = tokenize(task);
  auto by_doc = relevance_scores(doc_tokens, task_tokens);
  auto by_title = relevance_scores(titles, task_tokens);
  for (size_t d = 0; d < by_doc.size(); ++d)
    by_doc[d] += by_title[d];
  auto best_doc = top_k(by_doc, 1);
  std::vector<std::vector<std::string>> tokens;
  for (const auto& p : passages)
    tokens.push_back(tokenize(p));
  auto relevance = relevance_scores(tokens, task_tokens);
  auto top = *std::max_element(relevance.begin(), relevance.end());
  if (top <= 0)
    return result;
  auto task_words = word_set(task_tokens);
  std::set<std::vector<std::string>> seen;
  std::vector<std::pair<double, reference>> weighed;
  for (auto i : top_k(relevance, passages.size())) {
    auto in_best = !best_doc.empty() && owner[i] == best_doc.front();
    if (relevance[i] < lead_passage_share * top && !in_best)
      continue;
    for (auto& ref : references_in(passages[i])) {
      auto words = word_set(tokenize(ref.text));
      if (!seen.insert(words).second)
        continue;
      size_t shared = 0;
      for (const auto& w : words)
        if (std::binary_search(task_words.begin(), task_words.end(), w))
          ++shared;
      weighed.emplace_back(relevance[i] / top + 0.5 * static_cast<double>(shared),
                           std::move(ref));
    }
  }
  std::stable_sort(weighed.begin(), weighed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [w, ref] : weighed)
    result.push_back(std::move(ref));
  return result;
}

// Words for the same change: a question asking why something "drops"
// is answered by a text saying it "falls". Each group has its words as
// written and their stems (lexical::stem: "falling" and "falls" become
// "fall", "declining" "declin"); the first stem stands for the others.
struct change_group {
  std::vector<std::string> spelt;
  std::vector<std::string> stems;
};

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

std::string same_change(const std::string& stem) {
  for (const auto& group : change_words())
    if (std::find(group.stems.begin(), group.stems.end(), stem) != group.stems.end())
      return group.stems.front();
  return stem;
}

// `query` with the other words for each change it names ("efficiency drop"
// also asks for "fall", "decline" and "decrease"), as a search engine
// with its own stemmer needs them spelt out.
std::string with_change_words(const std::string& query) {
  auto said = word_set(lexical::tokenize(query));
  auto meant = word_set(tokenize(query));
  std::string result = query;
  for (const auto& group : change_words()) {
    if (!std::binary_search(meant.begin(), meant.end(), group.stems.front()))
      continue;
    for (size_t i = 0; i < group.spelt.size(); ++i)
      if (!std::binary_search(said.begin(), said.end(), group.stems[i]))
        result += " " + group.spelt[i];
  }
  return result;
}

answer respond_research(const sdk::chat_request& req) {
  answer result;
  auto task = find_user_text(req.messages, false);
  auto calls = collect_calls(req.messages);
  auto searches = search_tools(req);
  const auto* reader = page_reader(req);
  std::set<std::string> searched;
  size_t search_calls = 0;
  size_t reads = 0;
  // Searches made after the first reading: references followed.
  size_t later_searches = 0;
  std::set<std::string> queried;
  std::set<std::string> opened_urls;
  std::vector<sdk::chat_message> search_results;
  std::vector<sdk::chat_message> all_results;
  // The first results of the searches for references: what each
  // reference's search found first (the results interleave the queries).
  std::vector<std::string> lead_tops;
  for (const auto& rec : calls) {
    if (std::find(searches.begin(), searches.end(), rec.call.name) != searches.end()) {
      searched.insert(rec.call.name);
      ++search_calls;
      if (reads > 0)
        ++later_searches;
      auto args = parse_arguments(rec.call.arguments);
      size_t queries_made = 0;
      if (args.contains("queries") && args["queries"].is_array())
        for (const auto& q : args["queries"])
          if (q.is_string()) {
            queried.insert(q.get<std::string>());
            ++queries_made;
          }
      if (reads > 0 && rec.result != nullptr) {
        auto docs = parse_tool_result(rec.result->content);
        for (size_t i = 0; i < docs.size() && i < queries_made; ++i)
          if (!docs[i].url.empty())
            lead_tops.push_back(docs[i].url);
      }
      if (rec.result != nullptr) {
        search_results.push_back(*rec.result);
        all_results.push_back(*rec.result);
      }
    } else if (reader != nullptr && rec.call.name == reader->name) {
      ++reads;
      auto args = parse_arguments(rec.call.arguments);
      if (args.contains("urls") && args["urls"].is_array())
        for (const auto& url : args["urls"])
          if (url.is_string())
            opened_urls.insert(url.get<std::string>());
      if (rec.result != nullptr)
        all_results.push_back(*rec.result);
    }
  }
  auto next_id = count_calls(req.messages) + 1;
  auto tools_ok = req.choice != sdk::tool_choice::none;
  auto found = collect_documents(search_results);
  if (tools_ok && (searched.empty() || found.empty())) {
    // Internal search first; web search if that found nothing.
    for (const auto& name : searches) {
      if (searched.count(name) > 0)
        continue;
      auto query = with_change_words(collapse_spaces(task));
      result.tool_calls.push_back(
        make_call(next_id, name, nlohmann::json{{"queries", {query}}}));
      return result;
    }
  }
  if (tools_ok && search_calls == 1 && reads == 0 && !found.empty()) {
    // A second search, as a researcher refines a query: the task's words
    // and the words the best results share that the task lacks.
    auto query = refined_query(task, found);
    if (!query.empty()) {
      query = with_change_words(query);
      result.tool_calls.push_back(make_call(next_id, calls_of_search(calls, searches),
                                            nlohmann::json{{"queries", {query}}}));
      return result;
    }
  }
  if (tools_ok && reads == 0 && reader != nullptr) {
    std::vector<const source_doc*> candidates;
    std::vector<std::vector<std::string>> docs;
    std::vector<std::vector<std::string>> titles;
    for (const auto& doc : found) {
      if (doc.url.empty())
        continue;
      candidates.push_back(&doc);
      std::string text = doc.title;
      for (const auto& x : doc.texts)
        text += " " + x;
      docs.push_back(tokenize(text));
      titles.push_back(tokenize(doc.title));
    }
    // The pages whose titles and texts hold most of the task's words.
    auto task_words = tokenize(task);
    auto scores = relevance_scores(docs, task_words);
    auto by_title = relevance_scores(titles, task_words);
    for (size_t i = 0; i < scores.size(); ++i)
      scores[i] += by_title[i];
    auto best = top_k(scores, pages_to_read);
    if (best.empty())
      for (size_t i = 0; i < candidates.size() && i < pages_to_read; ++i)
        best.push_back(i);
    if (!best.empty()) {
      nlohmann::json urls = nlohmann::json::array();
      for (auto i : best)
        urls.push_back(candidates[i]->url);
      result.tool_calls.push_back(
        make_call(next_id, reader->name, nlohmann::json{{"urls", urls}}));
      return result;
    }
  }
  if (tools_ok && reads == 1 && reader != nullptr && !searches.empty()) {
    // Then the references of the passages that speak to the task are
    // followed: a document already found is read, one not found yet is
    // searched for first (once).
    auto everything = collect_documents(all_results);
    std::vector<std::vector<std::string>> titles;
    for (const auto& doc : everything)
      titles.push_back(word_set(tokenize(doc.title)));
    std::vector<std::string> unresolved;
    std::vector<size_t> to_read;
    for (const auto& ref : task_references(task, everything)) {
      if (unresolved.size() + to_read.size() >= leads_to_follow)
        break;
      auto named = resolve_reference(tokenize(ref.text), titles, ref.plural);
      if (named.empty()) {
        unresolved.push_back(ref.text);
        continue;
      }
      // The documents found so far may not be all that a plural
      // reference names: it is searched for as well (once).
      if (ref.plural && queried.count(ref.text) == 0)
        unresolved.push_back(ref.text);
      for (auto d : named)
        if (!everything[d].url.empty() && opened_urls.count(everything[d].url) == 0
            && std::find(to_read.begin(), to_read.end(), d) == to_read.end())
          to_read.push_back(d);
    }
    unresolved.erase(std::remove_if(unresolved.begin(), unresolved.end(),
                                    [&](const std::string& x) { return queried.count(x) > 0; }),
                     unresolved.end());
    if (!unresolved.empty() && later_searches < lead_searches) {
      // A few references per search, so that each keeps several results.
      nlohmann::json queries = nlohmann::json::array();
      for (size_t i = 0; i < unresolved.size() && i < references_per_search; ++i)
        queries.push_back(unresolved[i]);
      result.tool_calls.push_back(make_call(next_id, calls_of_search(calls, searches),
                                            nlohmann::json{{"queries", queries}}));
      return result;
    }
    // What a reference's search found first is read too, before the rest.
    std::vector<std::string> urls_to_read;
    for (const auto& url : lead_tops)
      if (opened_urls.count(url) == 0
          && std::find(urls_to_read.begin(), urls_to_read.end(), url) == urls_to_read.end())
        urls_to_read.push_back(url);
    for (auto d : to_read)
      if (std::find(urls_to_read.begin(), urls_to_read.end(), everything[d].url)
          == urls_to_read.end())
        urls_to_read.push_back(everything[d].url);
    if (!urls_to_read.empty()) {
      nlohmann::json urls = nlohmann::json::array();
      for (size_t i = 0; i < urls_to_read.size() && i < lead_pages_to_read; ++i)
        urls.push_back(urls_to_read[i]);
      result.tool_calls.push_back(
        make_call(next_id, reader->name, nlohmann::json{{"urls", urls}}));
      return result;
    }
  }
  if (tools_ok && find_tool(req, "generate_report") != nullptr) {
    result.tool_calls.push_back(
      make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "Research finished; ready to report.";
  return result;
}

answer respond_final(const sdk::chat_request& req) {
  auto question = find_user_text(req.messages, true);
  std::vector<finding> findings;
  for (const auto& rec : collect_calls(req.messages)) {
    if (rec.call.name != "research_agent" || rec.result == nullptr
        || looks_failed(rec.result->content))
      continue;
    auto args = parse_arguments(rec.call.arguments);
    finding item;
    if (args.contains("task") && args["task"].is_string())
      item.task = args["task"].get<std::string>();
    item.report = rec.result->content;
    findings.push_back(std::move(item));
  }
  auto plan = find_plan(req);
  if (plan.empty())
    for (const auto& item : findings)
      if (!item.task.empty()
          && std::find(plan.begin(), plan.end(), item.task) == plan.end())
        plan.push_back(item.task);
  answer result;
  result.text = compose_final(question, plan, findings);
  return result;
}

answer respond_chat(const sdk::chat_request& req, const compose_options& opts) {
  answer result;
  size_t last_user = req.messages.size();
  for (size_t i = req.messages.size(); i > 0; --i)
    if (req.messages[i - 1].author == sdk::role::user) {
      last_user = i - 1;
      break;
    }
  std::string query = last_user < req.messages.size() ? req.messages[last_user].content
                                                       : std::string{};
  std::vector<std::string> sentences;
  std::set<std::string> seen;
  auto add = [&](std::string_view text) {
    for (auto& sentence : split_sentences(text))
      if (seen.insert(sentence_key(sentence)).second)
        sentences.push_back(std::move(sentence));
  };
  for (size_t i = 0; i < req.messages.size(); ++i) {
    if (i == last_user)
      continue;
    const auto& msg = req.messages[i];
    if (msg.author == sdk::role::tool) {
      auto docs = parse_tool_result(msg.content);
      if (!docs.empty()) {
        for (const auto& doc : docs)
          for (const auto& text : doc.texts)
            add(text);
        continue;
      }
    }
    add(msg.content);
  }
  std::vector<std::vector<std::string>> docs;
  for (const auto& sentence : sentences)
    docs.push_back(tokenize(sentence));
  auto best = top_k(bm25_scores(docs, tokenize(query)),
                    static_cast<size_t>(std::max(1, opts.max_sentences)));
  std::sort(best.begin(), best.end());
  for (auto i : best) {
    if (!result.text.empty())
      result.text += ' ';
    result.text += sentences[i];
  }
  if (result.text.empty())
    result.text = "No matching text was found in the conversation (extractive "
                  "provider: no language model is used).";
  return result;
}

} // namespace

// -- text ---------------------------------------------------------------------

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

// -- plans --------------------------------------------------------------------

std::vector<std::string> split_question(std::string_view question, size_t max_steps) {
  max_steps = std::max<size_t>(2, max_steps);
  // Clauses at question marks, semicolons and line breaks.
  std::vector<std::string> clauses;
  std::string current;
  for (auto c : question) {
    if (c == '?' || c == ';' || c == '\n') {
      if (c == '?')
        current += '?';
      clauses.push_back(collapse_spaces(current));
      current.clear();
    } else {
      current += c;
    }
  }
  clauses.push_back(collapse_spaces(current));
  std::vector<std::string> parts;
  std::set<std::vector<std::string>> seen;
  for (const auto& clause : clauses) {
    auto ends_with_q = !clause.empty() && clause.back() == '?';
    // Only coordinated questions split ("why X, and what Y"): a list of
    // nouns ("the costs and emissions of X") stays one question.
    for (const auto& piece : split_coordinated(clause)) {
      auto part = clean_clause(piece);
      auto tokens = tokenize(part);
      if (tokens.empty())
        continue;
      std::sort(tokens.begin(), tokens.end());
      if (!seen.insert(tokens).second)
        continue;
      if ((ends_with_q || starts_question(part)) && part.back() != '?')
        part += '?';
      parts.push_back(std::move(part));
    }
  }
  if (parts.size() > max_steps)
    parts.resize(max_steps);
  if (parts.size() >= 2) {
    // A later part that refers back with a pronoun ("what do they cost?") and
    // shares no word with the first part gets the first part's key phrase,
    // since each step must stand alone.
    auto first = tokenize(parts.front());
    auto subject = key_phrase(parts.front());
    for (size_t i = 1; i < parts.size(); ++i) {
      auto tokens = tokenize(parts[i]);
      auto shared = std::any_of(tokens.begin(), tokens.end(), [&](const std::string& t) {
        return std::find(first.begin(), first.end(), t) != first.end();
      });
      if (!shared && has_pronoun(parts[i]) && !subject.empty())
        parts[i] += " (regarding: " + subject + ")";
    }
    // Two questions: a third step gathers the facts and figures of both.
    if (parts.size() == 2 && max_steps >= 3)
      parts.push_back("Key facts and figures (regarding: " + key_phrase(question) + ")");
    return parts;
  }
  // One question: it, then two aspects of it. The aspect's plain words head
  // the section; the question's key phrase, in the context note, is what the
  // agent searches for besides them.
  auto key = key_phrase(question);
  if (key.empty())
    key = collapse_spaces(question);
  if (key.empty())
    key = "the topic";
  std::vector<std::string> result = parts;
  for (auto aspect : {"Key facts and figures", "Practical examples and experience"})
    result.push_back(std::string{aspect} + " (regarding: " + key + ")");
  if (result.size() > max_steps)
    result.resize(max_steps);
  return result;
}

std::string format_plan(const std::vector<std::string>& steps) {
  std::string result;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i > 0)
      result += '\n';
    result += std::to_string(i + 1) + ". " + steps[i];
  }
  return result;
}

std::vector<std::string> parse_plan(std::string_view text) {
  auto lines = split_lines(text);
  size_t begin = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (contains(sdk::to_lower(lines[i]), "research plan"))
      begin = i + 1;
  std::vector<std::string> last;
  std::vector<std::string> current;
  for (size_t i = begin; i < lines.size(); ++i) {
    auto line = sdk::trim(lines[i]);
    if (line.empty())
      continue;
    size_t d = 0;
    while (d < line.size() && d < 3 && is_digit(line[d]))
      ++d;
    if (d > 0 && d + 1 < line.size() && (line[d] == '.' || line[d] == ')')
        && line[d + 1] == ' ') {
      auto item = collapse_spaces(line.substr(d + 2));
      if (!item.empty())
        current.push_back(std::move(item));
      continue;
    }
    if (!current.empty()) {
      last = std::move(current);
      current.clear();
    }
  }
  if (!current.empty())
    last = std::move(current);
  return last;
}

bool is_reminder(std::string_view text) {
  auto x = sdk::to_lower(sdk::trim(text));
  auto plan_format = contains(x, "numbered") || contains(x, "output only")
                     || contains(x, "nothing else") || contains(x, "no prefix");
  auto report_request = (contains(x, "comprehensive") || contains(x, "thorough"))
                        && contains(x, "cite");
  return sdk::starts_with(x, "<system-reminder>") || (contains(x, "plan") && plan_format)
         || report_request || contains(x, "open_url");
}

int find_parallel_limit(std::string_view prompt) {
  auto x = sdk::to_lower(prompt);
  static const std::vector<std::pair<std::string, int>> numbers{
    {"one", 1}, {"two", 2}, {"three", 3}, {"four", 4}, {"five", 5},
    {"six", 6}, {"seven", 7}, {"eight", 8}, {"nine", 9}, {"ten", 10}};
  static const std::vector<std::string_view> qualifiers{
    "more than ", "at most ", "up to ", "maximum of ", "maximum ", "max "};
  // The number right after a qualifier, or 0.
  auto number_at = [&](std::string_view rest) {
    int value = 0;
    size_t d = 0;
    while (d < rest.size() && d < 3 && is_digit(rest[d]))
      value = value * 10 + (rest[d++] - '0');
    if (d == 0) {
      for (const auto& [word, n] : numbers)
        if (sdk::starts_with(rest, word)
            && (rest.size() == word.size() || !(rest[word.size()] >= 'a'
                                                && rest[word.size()] <= 'z')))
          value = n;
    }
    return value >= 1 && value <= 64 ? value : 0;
  };
  size_t pos = 0;
  while ((pos = x.find("parallel", pos)) != std::string::npos) {
    // "at most 3 in parallel" (the last qualifier before) or "in parallel,
    // but never more than 3 at once" (the first one after).
    auto from = pos > 60 ? pos - 60 : 0;
    auto before = std::string_view{x}.substr(from, pos - from);
    pos += 8;
    auto after = std::string_view{x}.substr(pos, 60);
    size_t qual = std::string_view::npos;
    for (auto q : qualifiers) {
      auto at = before.rfind(q);
      if (at != std::string_view::npos && (qual == std::string_view::npos || at > qual))
        qual = at + q.size();
    }
    if (qual != std::string_view::npos)
      if (auto n = number_at(before.substr(qual)); n > 0)
        return n;
    qual = std::string_view::npos;
    for (auto q : qualifiers) {
      auto at = after.find(q);
      if (at != std::string_view::npos && (qual == std::string_view::npos || at + q.size() < qual))
        qual = at + q.size();
    }
    if (qual != std::string_view::npos)
      if (auto n = number_at(after.substr(qual)); n > 0)
        return n;
  }
  return 0;
}

// -- tool results -------------------------------------------------------------

std::vector<source_doc> parse_tool_result(std::string_view content) {
  std::vector<source_doc> result;
  auto value = nlohmann::json::parse(content, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  if (!value.is_object() || !value.contains("results") || !value["results"].is_array())
    return result;
  for (const auto& item : value["results"]) {
    if (!item.is_object() || !item.contains("document"))
      continue;
    const auto& num = item["document"];
    int number = 0;
    if (num.is_number_integer()) {
      auto n = num.get<int64_t>();
      number = n > 0 && n < 1000000 ? static_cast<int>(n) : 0;
    } else if (num.is_string()) {
      auto s = num.get<std::string>();
      if (!s.empty() && s.size() < 7
          && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c); }))
        number = std::stoi(s);
    }
    if (number <= 0)
      continue;
    source_doc doc;
    doc.number = number;
    auto text_of = [&](const char* key) {
      return item.contains(key) && item[key].is_string() ? item[key].get<std::string>()
                                                         : std::string{};
    };
    doc.title = text_of("title");
    doc.url = text_of("url");
    for (auto key : {"content", "snippet"}) {
      auto text = text_of(key);
      if (!sdk::trim(text).empty()) {
        doc.texts.push_back(std::move(text));
        break;
      }
    }
    result.push_back(std::move(doc));
  }
  return result;
}

std::vector<source_doc> collect_documents(const std::vector<sdk::chat_message>& messages) {
  std::vector<source_doc> result;
  std::map<int, size_t> by_number;
  for (const auto& msg : messages) {
    if (msg.author != sdk::role::tool)
      continue;
    for (auto& doc : parse_tool_result(msg.content)) {
      auto i = by_number.find(doc.number);
      if (i == by_number.end()) {
        by_number.emplace(doc.number, result.size());
        result.push_back(std::move(doc));
        continue;
      }
      auto& known = result[i->second];
      if (known.title.empty())
        known.title = doc.title;
      if (known.url.empty())
        known.url = doc.url;
      for (auto& text : doc.texts)
        if (std::find(known.texts.begin(), known.texts.end(), text) == known.texts.end())
          known.texts.push_back(std::move(text));
    }
  }
  return result;
}

// -- answers ------------------------------------------------------------------

std::string compose_report(std::string_view task, const std::vector<source_doc>& docs,
                           int max_sentences) {
  if (docs.empty())
    return "No sources were found for this task.";
  std::vector<std::vector<std::string>> texts;
  for (const auto& doc : docs)
    texts.push_back(doc.texts);
  auto units = report_units(texts);
  std::vector<std::vector<std::string>> tokens;
  std::vector<size_t> groups;
  for (const auto& x : units) {
    tokens.push_back(tokenize(x.text));
    groups.push_back(x.source);
  }
  auto task_words = tokenize(task);
  auto relevance = relevance_scores(tokens, task_words);
  // A source whose title names the task ("Sizing a Heat Pump") speaks to it
  // throughout: its units gain half its title's match.
  std::vector<std::vector<std::string>> titles;
  for (const auto& doc : docs)
    titles.push_back(tokenize(doc.title));
  auto title_match = relevance_scores(titles, task_words);
  for (size_t i = 0; i < units.size(); ++i) {
    if (relevance[i] > 0)
      relevance[i] += 0.5 * title_match[units[i].source];
    if (opens_with_reference(units[i].text))
      relevance[i] *= reference_discount;
  }
  std::vector<std::vector<std::string>> taken;
  auto best = select_mmr(tokens, relevance, groups,
                         static_cast<size_t>(std::max(1, max_sentences)), taken);
  std::vector<double> shares;
  for (const auto& doc : docs)
    shares.push_back(doc.read ? read_cover_share : cover_share);
  cover_groups(tokens, relevance, groups, shares,
               static_cast<size_t>(std::max(1, max_sentences)), best, taken);
  if (best.empty())
    return "No information relevant to the task was found in the sources.";
  std::vector<std::string> rendered;
  std::vector<size_t> by;
  for (auto i : best) {
    rendered.push_back(with_marker(units[i].text, docs[units[i].source].number));
    by.push_back(units[i].source);
  }
  return arrange(rendered, by);
}

std::string compose_final(std::string_view question, const std::vector<std::string>& plan,
                          const std::vector<finding>& findings) {
  // Assign each finding to the plan step its task matches best.
  std::vector<std::vector<size_t>> sections(plan.size() + 1);
  for (size_t i = 0; i < findings.size(); ++i) {
    auto step = match_step(plan, findings[i].task);
    sections[step < 0 ? plan.size() : static_cast<size_t>(step)].push_back(i);
  }
  // The cited units of every report, in section order; each distinct one
  // once, in the section whose step it matches best.
  struct item {
    size_t section;
    cited_unit unit;
    std::vector<std::string> tokens;
    std::string key;
    // The first unit of an agent's report: its most direct answer.
    bool lead;
  };
  std::vector<item> items;
  std::map<std::string, size_t> first;
  std::vector<std::vector<std::string>> step_tokens;
  for (const auto& step : plan)
    step_tokens.push_back(tokenize(step));
  step_tokens.emplace_back(); // further findings
  for (size_t s = 0; s < sections.size(); ++s)
    for (auto i : sections[s]) {
      bool lead = true;
      for (auto& unit : cited_units(findings[i].report)) {
        auto is_lead = lead;
        lead = false;
        auto tokens = tokenize(unit.plain);
        auto key = sentence_key(unit.plain);
        auto known = first.find(key);
        if (known != first.end()) {
          auto& x = items[known->second];
          if (x.section != s) {
            auto scores = bm25_scores(step_tokens, tokens);
            if (scores[s] > scores[x.section])
              x.section = s;
          }
          x.lead = x.lead || is_lead;
          continue;
        }
        first.emplace(key, items.size());
        items.push_back({s, std::move(unit), std::move(tokens), std::move(key), is_lead});
      }
    }
  // A follow-up's own question, without the conversation before it.
  auto q = collapse_spaces(lexical::asked_question(question));
  std::vector<std::string> texts;
  for (const auto& x : items)
    texts.push_back(x.unit.plain);
  auto cover = lexical::question_coverage(q, texts);
  if (!cover.answered)
    return unanswered_report(q, cover, items.size() > 0 ? [&] {
      // The nearest passages: the best matches of the question.
      std::vector<std::vector<std::string>> tokens;
      for (const auto& x : items)
        tokens.push_back(x.tokens);
      std::vector<std::string> nearest;
      for (auto i : top_k(bm25_scores(tokens, tokenize(q)), 3))
        nearest.push_back(items[i].unit.text);
      return nearest;
    }() : std::vector<std::string>{});

  std::string result;
  if (!q.empty())
    result += "This report answers the question \"" + q + "\" from " + std::to_string(findings.size())
              + " research task" + (findings.size() == 1 ? "" : "s") + ".\n\n";
  result += "> **Extractive report:** no language model was used. Every sentence "
            "below is quoted from the sources, chosen for relevance to each step of "
            "the plan and for what it adds to the sentences before it; the numbers "
            "in brackets cite the sources.\n";
  // Each section's units, chosen by maximal marginal relevance.
  struct section_choice {
    std::string heading;
    std::vector<size_t> members;
    std::vector<std::vector<std::string>> tokens;
    std::vector<size_t> groups;
    std::vector<double> relevance;
    std::vector<size_t> picked;
  };
  std::vector<section_choice> chosen;
  std::vector<std::vector<std::string>> taken;
  for (size_t s = 0; s <= plan.size(); ++s) {
    if (s == plan.size() && sections[s].empty())
      break;
    section_choice c;
    std::map<std::string, size_t> group_of;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].section != s)
        continue;
      c.members.push_back(i);
      c.tokens.push_back(items[i].tokens);
      c.groups.push_back(group_of.emplace(items[i].unit.marker, group_of.size()).first->second);
    }
    // Relevance to the step's own words, then half as much to its context
    // and to the question (the further findings have no step: the
    // question).
    c.heading = s < plan.size() ? plain_heading(plan[s]) : std::string{"Further findings"};
    c.relevance = relevance_scores(c.tokens, s < plan.size() ? tokenize(c.heading) : tokenize(q));
    if (s < plan.size()) {
      auto to_question = relevance_scores(c.tokens, tokenize(q));
      auto to_step = relevance_scores(c.tokens, step_tokens[s]);
      for (size_t i = 0; i < c.relevance.size(); ++i)
        c.relevance[i] += 0.5 * (to_question[i] + to_step[i]);
    }
    // An agent chose its lead unit with the titles of the sources in view
    // (which this report no longer has): it keeps a head start.
    auto top = c.relevance.empty() ? 0.0
                                   : *std::max_element(c.relevance.begin(), c.relevance.end());
    for (size_t i = 0; i < c.members.size(); ++i) {
      if (items[c.members[i]].lead && c.relevance[i] > 0)
        c.relevance[i] += 0.25 * top;
      if (opens_with_reference(items[c.members[i]].unit.plain))
        c.relevance[i] *= reference_discount;
    }
    c.picked = select_mmr(c.tokens, c.relevance, c.groups, section_units, taken);
    chosen.push_back(std::move(c));
  }
  // The coverage pass: a source the agents quoted that no section quotes
  // yet adds its strongest unit (relative to the best of its section) to
  // its section, if that unit reaches @ref final_cover_share of it and
  // repeats nothing; the strongest first.
  std::set<std::string> quoted;
  for (const auto& c : chosen)
    for (auto j : c.picked)
      quoted.insert(items[c.members[j]].unit.marker);
  std::vector<std::tuple<double, size_t, size_t>> candidates;
  for (size_t s = 0; s < chosen.size(); ++s) {
    const auto& c = chosen[s];
    auto top = c.relevance.empty() ? 0.0
                                   : *std::max_element(c.relevance.begin(), c.relevance.end());
    if (top <= 0)
      continue;
    for (size_t j = 0; j < c.members.size(); ++j) {
      const auto& marker = items[c.members[j]].unit.marker;
      if (marker.empty() || quoted.count(marker) > 0 || c.relevance[j] <= 0
          || std::find(c.picked.begin(), c.picked.end(), j) != c.picked.end())
        continue;
      candidates.emplace_back(c.relevance[j] / top, s, j);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  for (const auto& [score, s, j] : candidates) {
    if (score < final_cover_share)
      break;
    auto& c = chosen[s];
    const auto& marker = items[c.members[j]].unit.marker;
    if (quoted.count(marker) > 0 || c.picked.size() >= section_units + cover_units)
      continue;
    auto set = word_set(c.tokens[j]);
    double similar = 0;
    for (const auto& t : taken)
      similar = std::max(similar, jaccard(set, t));
    if (similar >= near_duplicate)
      continue;
    c.picked.push_back(j);
    taken.push_back(std::move(set));
    quoted.insert(marker);
  }
  for (size_t s = 0; s < chosen.size(); ++s) {
    const auto& c = chosen[s];
    std::vector<std::string> rendered;
    std::vector<size_t> by;
    for (auto j : c.picked) {
      rendered.push_back(items[c.members[j]].unit.text);
      by.push_back(c.groups[j]);
    }
    if (s == plan.size() && rendered.empty())
      break;
    result += "\n## " + c.heading + "\n\n";
    result += rendered.empty() ? "_No findings were gathered for this step._\n"
                               : arrange(rendered, by) + "\n";
  }
  return result;
}

answer respond(const sdk::chat_request& request, const compose_options& opts) {
  if (auto structured = respond_structured(request))
    return *structured;
  auto tag = sdk::to_lower(sdk::trim(request.role_tag));
  if (tag == "clarify")
    return respond_clarify(request);
  if (tag == "plan") {
    answer result;
    // A follow-up is planned from its own question; the conversation before
    // it is context, not steps.
    result.text = format_plan(split_question(
      lexical::asked_question(find_user_text(request.messages, true))));
    return result;
  }
  if (tag == "orchestrate")
    return respond_orchestrate(request, opts);
  if (tag == "research")
    return respond_research(request);
  if (tag == "report") {
    answer result;
    auto docs = collect_documents(request.messages);
    // The documents a page reader returned: a call given `urls`.
    std::set<int> read;
    for (const auto& rec : collect_calls(request.messages)) {
      if (rec.result == nullptr)
        continue;
      auto args = parse_arguments(rec.call.arguments);
      if (args.contains("urls"))
        for (const auto& doc : parse_tool_result(rec.result->content))
          read.insert(doc.number);
    }
    for (auto& doc : docs)
      doc.read = read.count(doc.number) > 0;
    result.text = compose_report(find_user_text(request.messages, false), docs,
                                 opts.max_sentences);
    return result;
  }
  if (tag == "final")
    return respond_final(request);
  if (tag == "synthesize")
    return respond_synthesize(request);
  return respond_chat(request, opts);
}

} // namespace quarry::plugins::llm_extractive
