// Following references: what the passages a research agent read point to
// ("see the document on X"), and which documents found so far they name.

#include "internal.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace quarry::plugins::llm_extractive {

namespace {

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
    " explains", " explain ", " describes", " describe ", " gives",   " give ",
    " shows",    " show ",    " covers",    " discusses", " returns", " return ",
    " explores", " notes ",   " lists",     " goes ",     " go ",     " has ",
    " have ",    " is ",      " are ",      " for ",      " which",   " that ",
    " where ",   " when ",    " with ",     " in this",   " to "};
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
      auto keep = (u >= 0x80) || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || is_upper(c);
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

} // namespace

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
      if (std::find(result.begin(), result.end(), t) == result.end() && matches(t) == left.size())
        ++holding_all;
    for (size_t t = 0; t < titles.size(); ++t) {
      if (titles[t].empty() || std::find(result.begin(), result.end(), t) != result.end())
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
      weighed.emplace_back(relevance[i] / top + 0.5 * static_cast<double>(shared), std::move(ref));
    }
  }
  std::stable_sort(weighed.begin(), weighed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [w, ref] : weighed)
    result.push_back(std::move(ref));
  return result;
}

} // namespace quarry::plugins::llm_extractive
