// Choosing the units of a report: units that stand alone, their relevance
// to a task, maximal marginal relevance, the coverage pass, and the layout.

#include "internal.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace quarry::plugins::llm_extractive {

namespace {

// Maximal marginal relevance: the weight of relevance against novelty.
constexpr double mmr_lambda = 0.7;

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
  while (!unquoted.empty()
         && std::string_view{".!?"}.find(unquoted.back()) != std::string_view::npos)
    unquoted.remove_suffix(1);
  if (unquoted.size() > 2 && (unquoted.front() == '"' || sdk::starts_with(unquoted, "\u201c"))
      && (unquoted.back() == '"' || unquoted.substr(unquoted.size() - 3) == "\u201d"))
    return false;
  // The lead-in to a list that follows ("... in three ways at once").
  if (count_words(x) < 16)
    for (std::string_view count : {"two", "three", "four", "five", "several", "many"})
      for (std::string_view what : {" ways", " reasons", " steps", " factors", " things"})
        if (contains(low, std::string{" "} + std::string{count} + std::string{what})
            || contains(low,
                        std::string{" "} + std::string{count} + " connected" + std::string{what}))
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

// The largest weight of one query word in @ref relevance_scores.
constexpr double max_word_weight = 2.0;

} // namespace

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

} // namespace quarry::plugins::llm_extractive
