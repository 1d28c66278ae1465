// Plans of the extractive provider: a question split into steps, a plan as
// a numbered list, and the step a task belongs to.

#include "internal.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <set>

namespace quarry::plugins::llm_extractive {

namespace {

// Removes leading words such as "and", "or", "also" from a clause.
std::string clean_clause(std::string_view clause) {
  auto x = sdk::trim(clause);
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto prefix : {"and ", "or ", "but ", "also ", "then ", "as well as ", "plus "}) {
      if (sdk::starts_with(sdk::to_lower(x.substr(0, 12)), prefix)) {
        x = sdk::trim(x.substr(std::string_view{prefix}.size()));
        changed = true;
      }
    }
  }
  while (!x.empty() && (x.back() == ',' || x.back() == '.' || x.back() == ';' || x.back() == ':'))
    x = sdk::trim(x.substr(0, x.size() - 1));
  std::string result{x};
  if (!result.empty() && result[0] >= 'a' && result[0] <= 'z')
    result[0] = static_cast<char>(result[0] - 'a' + 'A');
  return result;
}

// Whether `text` starts with a question word: a wh-word ("what", "how"),
// or, unless `wh_only`, an auxiliary verb ("can", "is", "does").
bool starts_question(std::string_view text, bool wh_only = false) {
  static const std::set<std::string> wh{"what",  "why", "how",  "when",  "where",
                                        "which", "who", "whom", "whose", "whether"};
  static const std::set<std::string> auxiliaries{"is",    "are", "was",   "were",   "do",    "does",
                                                 "did",   "can", "could", "should", "would", "will",
                                                 "shall", "may", "might", "has",    "have",  "had"};
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
  while (!words.empty() && (words.back() == '?' || words.back() == '.' || words.back() == '!'))
    words.pop_back();
  static const std::set<std::string> lead{
    "what", "how", "why",   "when",    "where",    "who",    "which", "is",  "are", "do",
    "does", "did", "can",   "could",   "should",   "would",  "will",  "the", "a",   "an",
    "tell", "me",  "about", "explain", "describe", "please", "was",   "were"};
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
  static const std::set<std::string> pronouns{"they", "it",    "them", "its", "their", "these",
                                              "this", "those", "he",   "she", "his",   "her"};
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

} // namespace

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

} // namespace quarry::plugins::llm_extractive
