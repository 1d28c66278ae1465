// Lexical text matching inside Quarry (quarry_lexical in
// core/lexical/CMakeLists.txt; not part of the plugin SDK): words without
// stop words, stemmed with the English Snowball stemmer (stemmer.hpp, the
// stemmer of the local corpus too), Okapi BM25 over a handful of passages,
// and the best scores. English stop words and stems (other languages keep
// all their words, which only weakens ranking a little).

#pragma once

#include "quarry/lexical/stemmer.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quarry::lexical {

using sdk::ascii_lower;
using sdk::is_ascii_space;

/// English stop words (lower case).
inline const std::set<std::string, std::less<>>& stop_words() {
  static const std::set<std::string, std::less<>> words{
    "a",    "about", "above",  "after",   "again", "all",   "also",  "am",      "an",     "and",
    "any",  "are",   "as",     "at",      "be",    "been",  "being", "between", "both",   "but",
    "by",   "can",   "could",  "did",     "do",    "does",  "doing", "for",     "from",   "had",
    "has",  "have",  "having", "he",      "her",   "here",  "hers",  "him",     "his",    "how",
    "i",    "if",    "in",     "into",    "is",    "it",    "its",   "itself",  "just",   "me",
    "more", "most",  "my",     "no",      "nor",   "not",   "of",    "on",      "once",   "only",
    "or",   "other", "our",    "out",     "over",  "own",   "same",  "she",     "should", "so",
    "some", "such",  "than",   "that",    "the",   "their", "them",  "then",    "there",  "these",
    "they", "this",  "those",  "through", "to",    "too",   "under", "until",   "up",     "very",
    "was",  "we",    "were",   "what",    "when",  "where", "which", "while",   "who",    "whom",
    "why",  "will",  "with",   "would",   "you",   "your",  "yours", "s",       "t"};
  return words;
}

/// The length of the typographic separator at the start of `text`, or 0:
/// no-break and thin spaces (U+00A0, U+2009, U+202F), hyphens and dashes
/// (U+2010 to U+2015) and the minus sign (U+2212). They part words as their
/// ASCII forms do, so that "-25" in a claim matches "\u221225" in a source.
inline size_t typographic_separator(std::string_view text) {
  auto at = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  if (at(0) == 0xC2 && at(1) == 0xA0)
    return 2;
  if (at(0) == 0xE2 && at(1) == 0x80
      && ((at(2) >= 0x90 && at(2) <= 0x95) || at(2) == 0x89 || at(2) == 0xAF))
    return 3;
  if (at(0) == 0xE2 && at(1) == 0x88 && at(2) == 0x92)
    return 3;
  return 0;
}

/// The lower-case alphanumeric words of `text` (bytes of UTF-8 sequences stay
/// inside words, except typographic spaces, dashes and the minus sign),
/// without stop words, as written: what a search engine is given.
inline std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> result;
  std::string word;
  auto flush = [&] {
    if (!word.empty() && stop_words().count(word) == 0)
      result.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = text[i];
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      if (auto n = typographic_separator(text.substr(i)); n > 0) {
        flush();
        i += n - 1;
      } else {
        word += c;
      }
    } else if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
      word += c;
    } else if (c >= 'A' && c <= 'Z') {
      word += ascii_lower(c);
    } else {
      flush();
    }
  }
  flush();
  return result;
}

/// The @ref words of `text`, each stemmed by @ref stem (English Snowball:
/// `batteries` and `battery` -> `batteri`, `falling` -> `fall`, `sized` and
/// `sizing` -> `size`): what texts are matched by.
inline std::vector<std::string> tokenize(std::string_view text) {
  auto result = words(text);
  for (auto& w : result)
    w = stem(w);
  return result;
}

/// The number of white-space separated words in `text`.
inline size_t count_words(std::string_view text) {
  size_t result = 0;
  bool in_word = false;
  for (auto c : text) {
    if (is_ascii_space(c)) {
      in_word = false;
    } else if (!in_word) {
      in_word = true;
      ++result;
    }
  }
  return result;
}

/// Scores every document of `docs` (each a token list) against `query` with
/// Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))).
/// Time linear in the total number of tokens.
inline std::vector<double> bm25_scores(const std::vector<std::vector<std::string>>& docs,
                                       const std::vector<std::string>& query) {
  constexpr double k1 = 1.2;
  constexpr double b = 0.75;
  std::vector<double> result(docs.size(), 0.0);
  if (docs.empty() || query.empty())
    return result;
  // The query's distinct terms in order (the order the scores are summed
  // in), and their positions.
  std::vector<std::string_view> terms{query.begin(), query.end()};
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  std::unordered_map<std::string_view, size_t> position;
  for (size_t j = 0; j < terms.size(); ++j)
    position.emplace(terms[j], j);
  // Term frequencies, one row of terms per document, and the documents that
  // hold each term.
  auto width = terms.size();
  std::vector<uint32_t> tf(docs.size() * width, 0);
  std::vector<size_t> with_term(width, 0);
  double total = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    total += static_cast<double>(docs[i].size());
    for (const auto& w : docs[i])
      if (auto p = position.find(w); p != position.end() && tf[i * width + p->second]++ == 0)
        ++with_term[p->second];
  }
  auto avg = std::max(1.0, total / static_cast<double>(docs.size()));
  auto n_docs = static_cast<double>(docs.size());
  for (size_t j = 0; j < width; ++j) {
    if (with_term[j] == 0)
      continue;
    auto n = static_cast<double>(with_term[j]);
    auto idf = std::log(1.0 + (n_docs - n + 0.5) / (n + 0.5));
    for (size_t i = 0; i < docs.size(); ++i) {
      auto f = static_cast<double>(tf[i * width + j]);
      if (f == 0)
        continue;
      auto len = static_cast<double>(docs[i].size());
      result[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avg));
    }
  }
  return result;
}

/// The indexes of the `k` best positive scores, best first; ties go to the
/// lower index.
inline std::vector<size_t> top_k(const std::vector<double>& scores, size_t k) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i] > 0)
      idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t x, size_t y) { return scores[x] > scores[y]; });
  if (idx.size() > k)
    idx.resize(k);
  return idx;
}

/// How much of a claim a span of text holds.
struct overlap {
  /// Share of the claim's distinct words found in the span, 0 to 1 (1 for a
  /// claim without words).
  double coverage = 0;
  /// Every word of the claim with a digit in it is in the span.
  bool numbers_match = true;
};

/// The overlap of `claim` with `span` (tokenize on both sides).
inline overlap overlap_of(std::string_view claim, std::string_view span) {
  auto c = tokenize(claim);
  auto s = tokenize(span);
  std::set<std::string> claim_terms{c.begin(), c.end()};
  std::set<std::string> span_terms{s.begin(), s.end()};
  overlap out;
  size_t held = 0;
  for (const auto& t : claim_terms) {
    auto in = span_terms.count(t) != 0;
    held += in ? 1 : 0;
    if (!in && std::any_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      out.numbers_match = false;
  }
  out.coverage = claim_terms.empty() ? 1.0 : static_cast<double>(held) / claim_terms.size();
  return out;
}

/// The share of a claim's words a span must hold for the lexical judge to
/// call the claim supported.
inline constexpr double supported_coverage = 0.75;

/// The lexical judge's verdict: `supported` from 75 % coverage with every
/// number, `partly_supported` from 45 %, else `unsupported`.
inline const char* lexical_verdict(const overlap& o) {
  if (o.coverage >= supported_coverage && o.numbers_match)
    return "supported";
  if (o.coverage >= 0.45)
    return "partly_supported";
  return "unsupported";
}

/// What Quarry puts before a follow-up's own question, after the earlier
/// conversation it follows.
inline constexpr std::string_view follow_up_marker = "Follow-up question: ";

/// The question a research asks: the text after the last
/// @ref follow_up_marker, else the whole text.
inline std::string_view asked_question(std::string_view text) {
  auto at = text.rfind(follow_up_marker);
  return at == std::string_view::npos ? text : text.substr(at + follow_up_marker.size());
}

/// Whether `token` (a word as @ref tokenize gives it: stemmed) is one of
/// the words that frame a question about documents rather than name its
/// topic ("which sources talk about noise"): not key words for @ref
/// coverage.
inline bool is_framing_word(std::string_view token) {
  static const auto stems = [] {
    std::set<std::string, std::less<>> out;
    for (const char* w : {"document", "source",  "text",        "file",     "article", "paper",
                          "report",   "corpus",  "collection",  "say",      "says",    "said",
                          "talk",     "mention", "discuss",     "describe", "explain", "tell",
                          "write",    "written", "information", "know",     "find",    "list"})
      out.insert(stem(w));
    return out;
  }();
  return stems.count(token) != 0;
}

/// How much of a question a set of passages holds.
struct coverage {
  /// The question's distinct key words (tokenize; two characters at least;
  /// no framing words).
  size_t terms = 0;
  /// How many of them occur in some passage.
  size_t found = 0;
  /// The most of them that one passage holds.
  size_t best_passage = 0;
  /// Whether the passages can answer the question: three fifths of its key
  /// words occur in them, and one passage holds a third of them (two at
  /// least, or the only one of a one-word question).
  bool answered = false;
};

/// Measures how much of `question` (its @ref asked_question) the `passages`
/// hold (see @ref coverage). A question without key words is never answered.
inline coverage question_coverage(std::string_view question,
                                  const std::vector<std::string>& passages) {
  coverage out;
  std::set<std::string> terms;
  for (auto& t : tokenize(asked_question(question)))
    if (t.size() >= 2 && !is_framing_word(t))
      terms.insert(std::move(t));
  out.terms = terms.size();
  if (terms.empty())
    return out;
  std::set<std::string> found;
  for (const auto& passage : passages) {
    size_t held = 0;
    std::set<std::string> held_terms;
    for (auto& t : tokenize(passage))
      if (terms.count(t) != 0 && held_terms.insert(t).second) {
        ++held;
        found.insert(t);
      }
    out.best_passage = std::max(out.best_passage, held);
  }
  out.found = found.size();
  auto need = std::max<size_t>(std::min<size_t>(2, out.terms), (out.terms + 2) / 3);
  out.answered = out.found * 5 >= out.terms * 3 && out.best_passage >= need;
  return out;
}

} // namespace quarry::lexical
