// The research agent's role: its searches (with a refined query), the
// pages it reads, and the references it follows, one step per request.

#include "internal.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

namespace quarry::plugins::llm_extractive {

namespace {

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
    auto most = std::max_element(forms.begin(), forms.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
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

// How many references an agent follows after its first reading.
constexpr size_t leads_to_follow = 8;

// How many searches an agent makes for references it cannot place, and how
// many references go into one.
constexpr size_t lead_searches = 3;

constexpr size_t references_per_search = 2;

// How many pages an agent reads after following references.
constexpr size_t lead_pages_to_read = 10;

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

} // namespace

answer respond_research(const sdk::chat_request& req) {
  answer result;
  auto task = task_of(req);
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
    // Internal search first; web search if that found nothing. The
    // attached files are searched together with the next tool.
    for (const auto& name : searches) {
      if (searched.count(name) > 0)
        continue;
      auto query = with_change_words(collapse_spaces(task));
      result.tool_calls.push_back(make_call(next_id++, name, nlohmann::json{{"queries", {query}}}));
      if (name != attached_files_tool)
        break;
    }
    if (!result.tool_calls.empty())
      return result;
  }
  if (tools_ok && search_calls == 1 && reads == 0 && !found.empty()) {
    // A second search, as a researcher refines a query: the task's words
    // and the words the best results share that the task lacks.
    auto query = refined_query(task, found);
    if (!query.empty()) {
      query = with_change_words(query);
      result.tool_calls.push_back(
        make_call(next_id, calls_of_search(calls, searches), nlohmann::json{{"queries", {query}}}));
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
      result.tool_calls.push_back(make_call(next_id, reader->name, nlohmann::json{{"urls", urls}}));
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
      result.tool_calls.push_back(
        make_call(next_id, calls_of_search(calls, searches), nlohmann::json{{"queries", queries}}));
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
      result.tool_calls.push_back(make_call(next_id, reader->name, nlohmann::json{{"urls", urls}}));
      return result;
    }
  }
  if (tools_ok && find_tool(req, "generate_report") != nullptr) {
    result.tool_calls.push_back(make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "Research finished; ready to report.";
  return result;
}

} // namespace quarry::plugins::llm_extractive
