// The reports of the extractive provider: an agent's report from the
// documents it found, and the final report from the agents' reports.

#include "internal.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace quarry::plugins::llm_extractive {

namespace {

// How many units a section of the final report holds at most, and how many
// more the coverage pass may add to it.
constexpr size_t section_units = 9;

constexpr size_t cover_units = 6;

// A source the final report's sections leave out is quoted when its best
// unit reaches this share of its section's best: an agent chose the unit
// already, so only one that holds almost nothing of the step stays out.
constexpr double final_cover_share = 0.05;

// A unit of a source that the units chosen leave out stands for it when it
// reaches this share of the best unit's relevance; of a source the agent
// read whole (it chose it for the task), this share.
constexpr double cover_share = 0.5;

constexpr double read_cover_share = 0.25;

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
std::string unanswered_report(const std::string& question, const lexical::coverage& cover,
                              const std::vector<std::string>& nearest) {
  std::string result = "The documents searched do not answer the question";
  if (!question.empty())
    result += " \"" + question + "\"";
  result += ". ";
  if (cover.terms == 0)
    result += "It has no words to search for beyond the most common ones.";
  else
    result += "Of its " + std::to_string(cover.terms) + " key words, " + std::to_string(cover.found)
              + " occur in the passages found, and no passage "
                "holds more than "
              + std::to_string(cover.best_passage) + " of them.";
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

} // namespace

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
  auto best = select_mmr(tokens, relevance, groups, static_cast<size_t>(std::max(1, max_sentences)),
                         taken);
  std::vector<double> shares;
  for (const auto& doc : docs)
    shares.push_back(doc.read ? read_cover_share : cover_share);
  cover_groups(tokens, relevance, groups, shares, static_cast<size_t>(std::max(1, max_sentences)),
               best, taken);
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
  // The question as the research context gives it: of a follow-up, its own
  // question, without the conversation before it.
  auto q = collapse_spaces(question);
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
    result += "This report answers the question \"" + q + "\" from "
              + std::to_string(findings.size()) + " research task"
              + (findings.size() == 1 ? "" : "s") + ".\n\n";
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

} // namespace quarry::plugins::llm_extractive
