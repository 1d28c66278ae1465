// Unit tests of the extractive provider's pure logic, including a whole
// deterministic deep research conversation driven through respond().

#include "extractive.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/lexical/lexical.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace extractive_logic_test {

using namespace quarry;
using namespace quarry::plugins::llm_extractive;

namespace {

// -- a small document set -----------------------------------------------------

struct test_doc {
  std::string url;
  std::string title;
  std::string content;
};

const std::vector<test_doc>& corpus() {
  static const std::vector<test_doc> docs{
    {"https://example.org/heat-pumps", "How heat pumps work",
     "A heat pump moves heat from a cold place to a warm place using a refrigerant "
     "cycle. Heat pumps deliver three to four units of heat for each unit of "
     "electricity they use. The compressor is the part of a heat pump that uses "
     "most of the electricity."},
    {"https://example.org/cold-climates", "Heat pumps in cold climates",
     "Modern cold-climate heat pumps keep working at outdoor temperatures of minus "
     "25 degrees Celsius. Their efficiency falls as the outdoor temperature drops. "
     "Norway has more heat pumps per household than any other country in Europe."},
    {"https://example.org/costs", "What a heat pump costs",
     "Installing an air-source heat pump costs between 8,000 and 15,000 euros in "
     "most European countries. Running costs depend on the price of electricity "
     "compared with the price of gas. Many governments pay part of the installation "
     "cost as a subsidy."},
    {"https://example.org/history", "A short history of refrigeration",
     "The first refrigeration machines were built in the nineteenth century. Before "
     "that, ice was cut from frozen lakes in winter and stored in ice houses."},
  };
  return docs;
}

const std::string question = "How do heat pumps work, and how well do they perform in "
                             "cold climates? What do they cost?";

sdk::chat_message msg(sdk::role author, std::string content) {
  sdk::chat_message result;
  result.author = author;
  result.content = std::move(content);
  return result;
}

sdk::chat_message tool_msg(const std::string& id, const std::string& name, std::string content) {
  auto result = msg(sdk::role::tool, std::move(content));
  result.tool_call_id = id;
  result.tool_name = name;
  return result;
}

sdk::chat_message calls_msg(std::vector<sdk::tool_call> calls) {
  auto result = msg(sdk::role::assistant, "");
  result.tool_calls = std::move(calls);
  return result;
}

// A tool as the research agent defines it: the searches take `queries`, the
// page reader `urls` (the provider tells them apart by that, not by name).
sdk::tool_definition tool(const std::string& name, const char* array_param = nullptr) {
  sdk::tool_definition result;
  result.name = name;
  result.description = "The " + name + " tool.";
  if (array_param == nullptr) {
    if (name == "internal_search" || name == "web_search")
      array_param = "queries";
    else if (name == "open_url")
      array_param = "urls";
  }
  result.parameters = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  if (array_param != nullptr)
    result.parameters["properties"][array_param] = {{"type", "array"},
                                                    {"items", {{"type", "string"}}}};
  return result;
}

sdk::chat_request request(std::string role_tag, std::vector<std::string> tools = {}) {
  sdk::chat_request result;
  result.role_tag = std::move(role_tag);
  for (const auto& name : tools)
    result.tools.push_back(tool(name));
  return result;
}

// A fake search engine: every document of the corpus with a word of the
// query, numbered from 1 in corpus order, the snippet being the first
// sentence.
std::string search_result(const std::string& query, std::map<std::string, int>& numbers) {
  auto words = tokenize(query);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& doc : corpus()) {
    auto tokens = tokenize(doc.title + " " + doc.content);
    auto hit = std::any_of(words.begin(), words.end(), [&](const std::string& w) {
      return std::find(tokens.begin(), tokens.end(), w) != tokens.end();
    });
    if (!hit)
      continue;
    auto num = static_cast<int>(numbers.size()) + 1;
    numbers.emplace(doc.url, num);
    num = numbers[doc.url];
    results.push_back({{"document", num},
                       {"title", doc.title},
                       {"url", doc.url},
                       {"content", split_sentences(doc.content).front()}});
  }
  return nlohmann::json{{"results", results}}.dump(2);
}

// A fake open_url: the full content of each URL, with the numbers the
// search gave.
std::string open_result(const nlohmann::json& urls, const std::map<std::string, int>& numbers) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& url : urls) {
    for (const auto& doc : corpus())
      if (doc.url == url.get<std::string>())
        results.push_back({{"document", numbers.at(doc.url)},
                           {"title", doc.title},
                           {"url", doc.url},
                           {"content", doc.content}});
  }
  return nlohmann::json{{"results", results}}.dump(2);
}

// Returns the markers [n] in `text`.
std::vector<int> markers_of(const std::string& text) {
  std::vector<int> result;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '[')
      continue;
    size_t j = i + 1;
    int value = 0;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9')
      value = value * 10 + (text[j++] - '0');
    if (j > i + 1 && j < text.size() && text[j] == ']')
      result.push_back(value);
  }
  return result;
}

// Checks that every sentence of `report` carries one marker [n] and that its
// text (without the marker) is part of the document numbered n.
void check_citations(const std::string& report, const std::map<std::string, int>& numbers) {
  std::map<int, const test_doc*> by_number;
  for (const auto& [url, num] : numbers)
    for (const auto& doc : corpus())
      if (doc.url == url)
        by_number[num] = &doc;
  size_t checked = 0;
  size_t pos = 0;
  while ((pos = report.find(" [", pos)) != std::string::npos) {
    auto close = report.find(']', pos);
    REQUIRE(close != std::string::npos);
    auto num = std::stoi(report.substr(pos + 2, close - pos - 2));
    REQUIRE_MESSAGE(by_number.count(num) == 1, "marker [" << num << "] has no document");
    // The sentence: from the previous sentence end (or line start) to here.
    auto begin = report.find_last_of("\n", pos);
    begin = begin == std::string::npos ? 0 : begin + 1;
    auto prev = report.rfind("]. ", pos);
    if (prev != std::string::npos && prev + 3 > begin)
      begin = prev + 3;
    auto body = report.substr(begin, pos - begin);
    auto punct = report.substr(close + 1, 1);
    CHECK_MESSAGE(by_number[num]->content.find(body + punct) != std::string::npos,
                  "'" << body << "' is not in document " << num);
    ++checked;
    pos = close;
  }
  CHECK(checked > 0);
}

} // namespace

// -- text ---------------------------------------------------------------------

TEST_CASE("extractive splits sentences") {
  auto xs = split_sentences("# Heading\nHeat pumps, e.g. air-source ones, cost 3.5 "
                            "units [12]. They work! Do they? yes they do.\n\n"
                            "- a list item\nA wrapped\nline. [...truncated]");
  std::vector<std::string> expected{
    "Heading",        "Heat pumps, e.g. air-source ones, cost 3.5 units.",
    "They work!",     "Do they?",
    "yes they do.",   "a list item",
    "A wrapped line."};
  CHECK(xs == expected);
  CHECK(split_sentences("").empty());
  CHECK(split_sentences("   \n\n ").empty());
}

TEST_CASE("extractive tokenizes without stop words, with the English Snowball stems") {
  CHECK(tokenize("The Heat-Pumps of Norway's cities!")
        == std::vector<std::string>{"heat", "pump", "norway", "citi"});
  CHECK(tokenize("sized") == tokenize("sizing"));
  CHECK(tokenize("controlled") == tokenize("control"));
  CHECK(tokenize("what is it").empty());
  CHECK(count_words("  one two\nthree ") == 3);
  CHECK(estimate_tokens("one two three") == 4);
  CHECK(estimate_tokens("") == 0);
}

TEST_CASE("extractive BM25 ranks matching, shorter and rarer matches higher") {
  std::vector<std::vector<std::string>> docs{{"heat", "pump", "cost"},
                                             {"heat", "pump", "cost", "money", "price", "euro",
                                              "gas", "electricity"},
                                             {"ice", "lake"},
                                             {"heat", "pump"}};
  auto scores = bm25_scores(docs, {"cost", "pump"});
  CHECK(scores[0] > scores[1]); // same terms, shorter
  CHECK(scores[2] == 0.0);
  CHECK(scores[0] > scores[3]); // "cost" is rarer than "pump"
  CHECK(top_k(scores, 2) == std::vector<size_t>{0, 1});
  CHECK(top_k({0.0, 1.0, 1.0, 0.5}, 10) == std::vector<size_t>{1, 2, 3});
  CHECK(bm25_scores(docs, {}) == std::vector<double>(4, 0.0));
}

// -- plans --------------------------------------------------------------------

TEST_CASE("extractive splits a question into sub-questions") {
  auto steps = split_question(question);
  std::vector<std::string> expected{
    "How do heat pumps work?",
    "How well do they perform in cold climates? (regarding: heat pumps work)",
    "What do they cost? (regarding: heat pumps work)"};
  CHECK(steps == expected);
  // Commas without two content words on each side do not split.
  // A list of nouns stays one question; two aspects with plain headings
  // follow it, the question's key phrase as their context.
  auto one = split_question("What are the causes, effects and remedies of inflation?");
  REQUIRE(one.size() == 3);
  CHECK(one[0] == "What are the causes, effects and remedies of inflation?");
  CHECK(one[1] == "Key facts and figures (regarding: causes, effects and remedies of inflation)");
  CHECK(one[2]
        == "Practical examples and experience (regarding: causes, effects and "
           "remedies of inflation)");
  // Coordinated questions split where the second question begins, and a
  // third step gathers the facts of both.
  auto two = split_question("Why does a heat pump's efficiency drop in cold weather, and what "
                            "do manufacturers do about it?");
  REQUIRE(two.size() == 3);
  CHECK(two[0] == "Why does a heat pump's efficiency drop in cold weather?");
  CHECK(two[1]
        == "What do manufacturers do about it? (regarding: heat pump's efficiency drop "
           "in cold weather)");
  CHECK(two[2].find("Key facts and figures (regarding: ") == 0);
  // "the running costs and emissions": nouns, not two questions.
  auto nouns = split_question("How do the running costs and emissions of a heat pump compare "
                              "with a gas boiler?");
  CHECK(nouns[0]
        == "How do the running costs and emissions of a heat pump compare with a gas "
           "boiler?");
  // "X and is Y" is not a second question either.
  CHECK(split_question("Which pumps are quiet and are cheap?")[0]
        == "Which pumps are quiet and are cheap?");
  auto either = split_question("Is it cheap, or is it dear?");
  REQUIRE(either.size() == 3);
  CHECK(either[0] == "Is it cheap?");
  CHECK(either[1] == "Is it dear? (regarding: it cheap)");
  auto many = split_question("a1 b1; a2 b2; a3 b3; a4 b4; a5 b5; a6 b6; a7 b7; a8 b8");
  CHECK(many.size() == 6);
  CHECK(split_question("Heat pumps", 2).size() == 2);
  CHECK(format_plan({"One", "Two"}) == "1. One\n2. Two");
}

// -- tool results -------------------------------------------------------------

TEST_CASE("extractive parses tool results and merges documents by number") {
  auto docs = parse_tool_result(
    R"({"results": [{"document": 2, "title": "T", "url": "https://x", "content": "C."},)"
    R"( {"document": "3", "title": "U", "snippet": "S."}, {"title": "no number"},)"
    R"( {"document": -1, "content": "negative"}]})");
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].number == 2);
  CHECK(docs[0].url == "https://x");
  CHECK(docs[0].texts == std::vector<std::string>{"C."});
  CHECK(docs[1].number == 3);
  CHECK(docs[1].texts == std::vector<std::string>{"S."});
  CHECK(parse_tool_result("Tool failed with error: boom").empty());
  CHECK(parse_tool_result(R"({"results": 5})").empty());
  CHECK(parse_tool_result(R"("{\"results\": [{\"document\": 1}]}")").size() == 1);
  std::vector<sdk::chat_message> history{
    tool_msg("a", "web_search",
             R"({"results": [{"document": 1, "title": "A",)"
             R"( "url": "u1", "content": "snippet"}]})"),
    tool_msg("b", "open_url",
             R"({"results": [{"document": 1, "title": "A",)"
             R"( "content": "full page"}, {"document": 4, "title": "D",)"
             R"( "content": "d"}]})")};
  auto merged = collect_documents(history);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].url == "u1");
  CHECK(merged[0].texts == std::vector<std::string>{"snippet", "full page"});
  CHECK(merged[1].number == 4);
}

TEST_CASE("extractive reports the best sentences with their documents' markers") {
  std::vector<source_doc> docs;
  int n = 5;
  for (const auto& doc : corpus())
    docs.push_back({n++, doc.title, doc.url, {doc.content}});
  auto report = compose_report("What does installing a heat pump cost?", docs, 3);
  std::map<std::string, int> numbers;
  for (const auto& doc : docs)
    numbers[doc.url] = doc.number;
  check_citations(report, numbers);
  CHECK(report.find("8,000 and 15,000 euros in most European countries [7].") != std::string::npos);
  CHECK(markers_of(report).size() == 3);
  CHECK(compose_report("anything", {}, 3) == "No sources were found for this task.");
  // A very long sentence is cut after 60 words, with an ellipsis.
  std::string long_text = "Heat";
  for (int i = 0; i < 70; ++i)
    long_text += " w" + std::to_string(i);
  long_text += ".";
  auto cut = compose_report("heat", {{2, "Long", "", {long_text}}}, 3);
  CHECK(cut == long_text.substr(0, long_text.find(" w59")) + "\u2026 [2].");
  CHECK(compose_report("quantum chromodynamics", docs, 3)
        == "No information relevant to the task was found in the sources.");
}

// -- the roles ----------------------------------------------------------------

TEST_CASE("extractive never asks clarifying questions") {
  auto req = request("clarify", {"generate_plan"});
  req.messages = {msg(sdk::role::system, "Ask questions or call generate_plan."),
                  msg(sdk::role::user, question)};
  auto with_tool = respond(req, {});
  CHECK(with_tool.text.empty());
  REQUIRE(with_tool.tool_calls.size() == 1);
  CHECK(with_tool.tool_calls[0].name == "generate_plan");
  CHECK(with_tool.tool_calls[0].id == "call_1");
  CHECK(with_tool.tool_calls[0].arguments == "{}");
  req.tools.clear();
  auto plain = respond(req, {});
  CHECK(plain.text == "No clarification needed.");
  CHECK(plain.tool_calls.empty());
}

TEST_CASE("extractive answers unknown roles with the best sentences of the chat") {
  auto req = request("");
  req.messages = {msg(sdk::role::system, "You are helpful."),
                  msg(sdk::role::user, corpus()[1].content),
                  msg(sdk::role::user, "Which country has many heat pumps per household?")};
  auto res = respond(req, {});
  CHECK(res.tool_calls.empty());
  CHECK(res.text.find("Norway has more heat pumps per household") != std::string::npos);
  req.messages = {msg(sdk::role::user, "hello")};
  CHECK(respond(req, {}).text.find("No matching text") == 0);
}

TEST_CASE("extractive orchestrator takes the plan and the parallel limit from the research "
          "context, and the configured limit") {
  auto req = request("orchestrate", {"research_agent", "think_tool", "generate_report"});
  // The prompt's words are not read: only the research context is.
  req.messages = {msg(sdk::role::system, "# Research Plan\n1. Not this\n\nNever more than 1 "
                                         "in parallel."),
                  msg(sdk::role::user, "letters")};
  req.research.question = "letters";
  req.research.plan = {"A one", "B two", "C three", "D four", "E five"};
  compose_options opts;
  opts.max_parallel = 2;
  CHECK(respond(req, opts).tool_calls.size() == 2);
  opts.max_parallel = 5;
  CHECK(respond(req, opts).tool_calls.size() == 5);
  req.research.max_parallel_agents = 3;
  auto res = respond(req, opts);
  REQUIRE(res.tool_calls.size() == 3);
  CHECK(res.tool_calls[2].id == "call_3");
  CHECK(res.tool_calls[2].arguments == R"({"task":"C three"})");
  // A step whose call "was not run" is dispatched again, once.
  std::vector<sdk::tool_call> calls;
  for (auto& call : res.tool_calls)
    calls.push_back(call);
  req.messages.push_back(calls_msg(calls));
  req.messages.push_back(tool_msg("call_1", "research_agent", "A report [1]."));
  req.messages.push_back(tool_msg("call_2", "research_agent", "Not run: limit reached."));
  req.messages.push_back(tool_msg("call_3", "research_agent", "C report [2]."));
  res = respond(req, opts);
  REQUIRE(res.tool_calls.size() == 3);
  CHECK(res.tool_calls[0].arguments == R"({"task":"B two"})");
  CHECK(res.tool_calls[0].id == "call_4");
  CHECK(res.tool_calls[1].arguments == R"({"task":"D four"})");
  CHECK(res.tool_calls[2].arguments == R"({"task":"E five"})");
  // Tool choice "none": no tool calls at all.
  req.choice = sdk::tool_choice::none;
  CHECK(respond(req, opts).tool_calls.empty());
  // Without a plan in the research context, the question is split.
  auto unplanned = request("orchestrate", {"research_agent", "generate_report"});
  unplanned.messages = {msg(sdk::role::user, "letters")};
  unplanned.research.question = question;
  res = respond(unplanned, opts);
  REQUIRE(res.tool_calls.size() == 3);
  CHECK(res.tool_calls[0].arguments == R"({"task":"How do heat pumps work?"})");
}

namespace {

// Everything one run of the conversation produced, for comparison.
struct run_log {
  std::string text;
  /// How many agents searched a second time with a refined query.
  int refined = 0;
  std::vector<std::string> reports;
  std::vector<std::map<std::string, int>> numbers;
  std::string final_report;
  std::vector<std::string> plan;
};

void append(run_log& log, const answer& x) {
  log.text += x.text + "\n";
  for (const auto& call : x.tool_calls)
    log.text += call.id + " " + call.name + " " + call.arguments + "\n";
}

// Runs one research agent on `task` and returns its report.
std::string run_agent(const std::string& task, run_log& log) {
  std::map<std::string, int> numbers;
  std::vector<std::string> tools{"web_search", "open_url", "think_tool", "generate_report"};
  std::vector<sdk::chat_message> history{msg(sdk::role::user, task)};
  auto step = [&] {
    auto req = request("research", tools);
    req.research.task = task;
    req.messages = history;
    req.messages.insert(req.messages.begin(), msg(sdk::role::system, "You are a research agent."));
    req.choice = sdk::tool_choice::required;
    auto res = respond(req, {});
    append(log, res);
    return res;
  };
  // 1: search with the task text.
  auto first = step();
  REQUIRE(first.tool_calls.size() == 1);
  CHECK(first.tool_calls[0].name == "web_search");
  auto args = nlohmann::json::parse(first.tool_calls[0].arguments);
  CHECK(args == nlohmann::json{{"queries", {task}}});
  history.push_back(calls_msg(first.tool_calls));
  history.push_back(tool_msg(first.tool_calls[0].id, "web_search", search_result(task, numbers)));
  // 2: a refined search when the best results share words the task lacks
  // (the task's words, then those), else none.
  auto refined = step();
  REQUIRE(refined.tool_calls.size() == 1);
  if (refined.tool_calls[0].name == "web_search") {
    auto refined_query = nlohmann::json::parse(refined.tool_calls[0].arguments)
                           .at("queries")
                           .at(0)
                           .get<std::string>();
    // The task's words as written, then the words the results share.
    for (const auto& word : lexical::words(task))
      if (word != "regarding")
        CHECK(refined_query.find(word) != std::string::npos);
    history.push_back(calls_msg(refined.tool_calls));
    history.push_back(
      tool_msg(refined.tool_calls[0].id, "web_search", search_result(refined_query, numbers)));
    ++log.refined;
  } else {
    // Asked again, the agent would make the same choice: drop it.
    CHECK(refined.tool_calls[0].name == "open_url");
  }
  history.push_back(msg(sdk::role::user, "Consider calling open_url on the best results."));
  // 3: open the best results, at most 4.
  auto second = step();
  REQUIRE(second.tool_calls.size() == 1);
  CHECK(second.tool_calls[0].name == "open_url");
  CHECK(second.tool_calls[0].id != first.tool_calls[0].id);
  auto urls = nlohmann::json::parse(second.tool_calls[0].arguments).at("urls");
  CHECK(urls.size() >= 1);
  CHECK(urls.size() <= 4);
  history.push_back(calls_msg(second.tool_calls));
  history.push_back(tool_msg(second.tool_calls[0].id, "open_url", open_result(urls, numbers)));
  // 3: done researching: generate_report (offered) moves the agent on.
  auto third = step();
  REQUIRE(third.tool_calls.size() == 1);
  CHECK(third.tool_calls[0].name == "generate_report");
  tools.pop_back();
  CHECK(step().tool_calls.empty()); // without generate_report: text, no calls
  // 4: the intermediate report.
  auto req = request("report");
  req.research.task = task;
  req.messages = {msg(sdk::role::system, "Write the report.")};
  req.messages.insert(req.messages.end(), history.begin(), history.end());
  req.messages.push_back(msg(sdk::role::user, "Please write a comprehensive report on: " + task));
  auto report = respond(req, {});
  CHECK(report.tool_calls.empty());
  check_citations(report.text, numbers);
  log.reports.push_back(report.text);
  log.numbers.push_back(numbers);
  log.text += report.text + "\n";
  return report.text;
}

run_log run_research(int max_parallel) {
  run_log log;
  compose_options opts;
  opts.max_parallel = max_parallel;
  // Plan.
  // Every request carries what Quarry's builders put in its research
  // context.
  auto context = core::research_context_of(question);
  auto plan_req = request("plan");
  plan_req.research = context;
  plan_req.messages = {msg(sdk::role::system, "You are a research planner."),
                       msg(sdk::role::user, question),
                       msg(sdk::role::user, "Output only the plan as a numbered list.")};
  auto plan = respond(plan_req, opts);
  append(log, plan);
  log.plan = core::plan_steps(plan.text);
  context.plan = log.plan;
  context.max_parallel_agents = 3;
  // Orchestrator cycles.
  std::vector<sdk::chat_message> history{msg(sdk::role::user, question)};
  auto system = msg(sdk::role::system,
                    "You are the orchestrator.\n\n# Research Plan\n" + plan.text);
  for (int cycle = 0; cycle < 8; ++cycle) {
    auto req = request("orchestrate", {"research_agent", "think_tool", "generate_report"});
    req.choice = sdk::tool_choice::required;
    req.research = context;
    req.messages = {system};
    req.messages.insert(req.messages.end(), history.begin(), history.end());
    auto res = respond(req, opts);
    append(log, res);
    REQUIRE_FALSE(res.tool_calls.empty());
    if (res.tool_calls[0].name == "generate_report")
      break;
    CHECK(res.tool_calls.size() <= static_cast<size_t>(max_parallel));
    history.push_back(calls_msg(res.tool_calls));
    for (const auto& call : res.tool_calls) {
      REQUIRE(call.name == "research_agent");
      auto task = nlohmann::json::parse(call.arguments).at("task").get<std::string>();
      history.push_back(tool_msg(call.id, "research_agent", run_agent(task, log)));
    }
  }
  // Final report.
  auto req = request("final");
  req.research = context;
  req.research.max_parallel_agents = 0;
  req.messages = {msg(sdk::role::system, "Write the final report.")};
  req.messages.insert(req.messages.end(), history.begin(), history.end());
  req.messages.push_back(msg(sdk::role::user, "<system-reminder>\nThe plan was:\n```\n" + plan.text
                                                + "\n```\n</system-reminder>"));
  auto final_report = respond(req, opts);
  CHECK(final_report.tool_calls.empty());
  log.final_report = final_report.text;
  log.text += final_report.text;
  return log;
}

} // namespace

TEST_CASE("extractive drives a whole deep research run deterministically") {
  auto log = run_research(2);
  REQUIRE(log.plan.size() == 3);
  CHECK(log.plan[0] == "How do heat pumps work?");
  CHECK(log.reports.size() == 3);
  // At least one agent refined its search.
  CHECK(log.refined >= 1);
  // Two agents in the first cycle, one in the second, then generate_report.
  CHECK(log.text.find("call_1 research_agent") != std::string::npos);
  CHECK(log.text.find("call_2 research_agent") != std::string::npos);
  CHECK(log.text.find("call_3 research_agent") != std::string::npos);
  CHECK(log.text.find("call_4 generate_report {}") != std::string::npos);
  // The cost agent cites the cost document with the number its search gave.
  auto cost = log.numbers[2].at("https://example.org/costs");
  CHECK(
    log.reports[2].find("15,000 euros in most European countries [" + std::to_string(cost) + "].")
    != std::string::npos);
  // The final report: intro, note, one section per step, markers kept.
  const auto& report = log.final_report;
  CHECK(report.find("This report answers the question \"" + question + "\"") == 0);
  CHECK(report.find("Extractive report:** no language model was used") != std::string::npos);
  CHECK(report.find("\n## How do heat pumps work?\n") != std::string::npos);
  CHECK(report.find("\n## How well do they perform in cold climates?\n") != std::string::npos);
  CHECK(report.find("\n## What do they cost?\n") != std::string::npos);
  CHECK(report.find("regarding:") == std::string::npos);
  CHECK(report.find("## Further findings") == std::string::npos);
  auto cost_section = report.find("## What do they cost?");
  REQUIRE(cost_section != std::string::npos);
  CHECK(report.find("15,000 euros", cost_section) != std::string::npos);
  std::set<int> cited;
  for (auto n : markers_of(report))
    cited.insert(n);
  CHECK_FALSE(cited.empty());
  for (auto n : cited) {
    CHECK(n >= 1);
    CHECK(n <= static_cast<int>(corpus().size()));
  }
  // The same input gives byte-identical output.
  auto again = run_research(2);
  CHECK(again.text == log.text);
  // With room for three agents, all run in the first cycle.
  auto wide = run_research(3);
  CHECK(wide.text.find("call_4 generate_report {}") != std::string::npos);
  CHECK(wide.final_report == log.final_report);
}

TEST_CASE("extractive agents prefer internal search and fall back to the web") {
  auto req = request("research", {"internal_search", "web_search", "open_url", "generate_report"});
  req.messages = {msg(sdk::role::user, "Costs of heat pumps in Europe")};
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 1);
  CHECK(first.tool_calls[0].name == "internal_search");
  CHECK(first.tool_calls[0].arguments == R"({"queries":["Costs of heat pumps in Europe"]})");
  // Nothing found internally: search the web.
  req.messages.push_back(calls_msg(first.tool_calls));
  req.messages.push_back(tool_msg("call_1", "internal_search", R"({"results": []})"));
  auto second = respond(req, {});
  REQUIRE(second.tool_calls.size() == 1);
  CHECK(second.tool_calls[0].name == "web_search");
  CHECK(second.tool_calls[0].id == "call_2");
  // Internal results without URLs: nothing to open, so report.
  req.messages.pop_back();
  req.messages.push_back(tool_msg("call_1", "internal_search",
                                  R"({"results": [{"document": 1, "title": "Costs",)"
                                  R"( "content": "A heat pump costs 9,000 euros."}]})"));
  auto third = respond(req, {});
  REQUIRE(third.tool_calls.size() == 1);
  CHECK(third.tool_calls[0].name == "generate_report");
  req.role_tag = "report";
  CHECK(respond(req, {}).text == "A heat pump costs 9,000 euros [1].");
  // The research context's task is what an agent searches for, whatever
  // its messages say first.
  auto told = request("research", {"internal_search"});
  told.messages = {msg(sdk::role::user, "What earlier agents found: penguins.")};
  told.research.task = "Costs of heat pumps in Europe";
  auto searched = respond(told, {});
  REQUIRE(searched.tool_calls.size() == 1);
  CHECK(searched.tool_calls[0].arguments == R"({"queries":["Costs of heat pumps in Europe"]})");
}

TEST_CASE("extractive agents search the files attached to the research with the next search") {
  // Offered last, searched first: the person chose these files.
  auto req = request("research", {"internal_search", "web_search", "open_url", "generate_report"});
  req.tools.push_back(tool("session_files", "queries"));
  req.messages = {msg(sdk::role::user, "Depth of the Brightwater ground loop")};
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 2);
  CHECK(first.tool_calls[0].name == "session_files");
  CHECK(first.tool_calls[0].id == "call_1");
  CHECK(first.tool_calls[1].name == "internal_search");
  CHECK(first.tool_calls[1].id == "call_2");
  CHECK(first.tool_calls[1].arguments == first.tool_calls[0].arguments);
  // The files hold the answer, the corpus nothing: report from the files.
  req.messages.push_back(calls_msg(first.tool_calls));
  req.messages.push_back(tool_msg("call_1", "session_files",
                                  R"({"results": [{"document": 1, "title": "Brightwater",)"
                                  R"( "content": "The loop was drilled to 212 metres."}]})"));
  req.messages.push_back(tool_msg("call_2", "internal_search", R"({"results": []})"));
  auto second = respond(req, {});
  REQUIRE(second.tool_calls.size() == 1);
  CHECK(second.tool_calls[0].name == "generate_report");
  req.role_tag = "report";
  CHECK(respond(req, {}).text == "The loop was drilled to 212 metres [1].");
  // Neither found anything: the web next, alone.
  req.role_tag = "research";
  req.messages.pop_back();
  req.messages.pop_back();
  req.messages.push_back(tool_msg("call_1", "session_files", R"({"results": []})"));
  req.messages.push_back(tool_msg("call_2", "internal_search", R"({"results": []})"));
  auto third = respond(req, {});
  REQUIRE(third.tool_calls.size() == 1);
  CHECK(third.tool_calls[0].name == "web_search");
  CHECK(third.tool_calls[0].id == "call_3");
}

TEST_CASE("extractive agents find searches and page readers by their parameters, "
          "whatever they are called") {
  sdk::chat_request req;
  req.role_tag = "research";
  req.tools = {tool("notes", "text"), tool("company_docs", "queries"), tool("read_page", "urls"),
               tool("generate_report")};
  req.messages = {msg(sdk::role::user, "Costs of heat pumps in Europe")};
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 1);
  CHECK(first.tool_calls[0].name == "company_docs");
  // A result with an address: the page reader opens it.
  req.messages.push_back(calls_msg(first.tool_calls));
  req.messages.push_back(tool_msg("call_1", "company_docs",
                                  R"({"results": [{"document": 1, "title": "Costs",)"
                                  R"( "url": "https://example.org/costs",)"
                                  R"( "content": "A heat pump costs 9,000 euros."}]})"));
  auto second = respond(req, {});
  REQUIRE(second.tool_calls.size() == 1);
  CHECK(second.tool_calls[0].name == "read_page");
  CHECK(second.tool_calls[0].arguments == R"({"urls":["https://example.org/costs"]})");
  // A tool taking neither is never called as a search or a reader.
  sdk::chat_request only_notes;
  only_notes.role_tag = "research";
  only_notes.tools = {tool("notes", "text"), tool("generate_report")};
  only_notes.messages = {msg(sdk::role::user, "Costs of heat pumps")};
  auto third = respond(only_notes, {});
  REQUIRE(third.tool_calls.size() == 1);
  CHECK(third.tool_calls[0].name == "generate_report");
  // Schemas a plugin may write: `type` as a list, or no properties at all.
  auto odd = tool("odd_search");
  odd.parameters = {{"type", "object"},
                    {"properties", {{"queries", {{"type", {"array", "null"}}}}}}};
  auto bare = tool("bare");
  bare.parameters = nlohmann::json::array();
  only_notes.tools = {odd, bare, tool("generate_report")};
  auto fourth = respond(only_notes, {});
  REQUIRE(fourth.tool_calls.size() == 1);
  CHECK(fourth.tool_calls[0].name == "generate_report");
}

// -- what a report quotes -----------------------------------------------------

namespace {

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("extractive reports quote a question with its answer and leave out what cannot stand "
          "alone") {
  std::vector<source_doc> docs{
    {1,
     "Heat pump questions",
     "file:///faq.txt",
     {"FREQUENTLY ASKED QUESTIONS ABOUT HEAT PUMPS\n\n"
      "Q: Why does efficiency fall when it is cold outside?\n"
      "A: Because the compressor must lift heat across a larger temperature difference, "
      "which takes more work for each unit of heat.\n\n"
      "Q: Does cold weather make a heat pump defrost?\n"}},
    {2,
     "Cold climates",
     "file:///cold.md",
     {"Manufacturers address cold weather and falling efficiency in several ways:\n\n"
      "- Variable-speed compressors keep capacity up when the outdoor temperature falls in "
      "cold weather; see the document on compressors.\n\n"
      "See the document on defrost cycles for what happens in cold weather.\n\n"
      "Cold weather lowers heat pump efficiency in three ways at once.\n\n"
      "## Worked example: efficiency falling in cold weather\n\n"
      "\"Heat pumps lose all efficiency in cold weather.\"\n\n"
      "Efficiency falls in cold weather because the temperature lift between outside and "
      "inside grows."}}};
  auto report = compose_report("Why does efficiency fall in cold weather?", docs, 6);
  // The question comes with its answer, without the Q and A labels.
  CHECK(report.find("Why does efficiency fall when it is cold outside? Because the compressor "
                    "must lift heat")
        != std::string::npos);
  CHECK(report.find("Q:") == std::string::npos);
  CHECK(report.find("A:") == std::string::npos);
  // A question without an answer after it, the lead-in to a list, a heading
  // in capitals and pointers to other documents are left out; a trailing
  // "see ..." is cut.
  CHECK(report.find("defrost?") == std::string::npos);
  CHECK(report.find("several ways") == std::string::npos);
  CHECK(report.find("FREQUENTLY") == std::string::npos);
  CHECK(report.find("document") == std::string::npos);
  // So are the lead-in to a list without its colon and a bare quotation.
  CHECK(report.find("three ways") == std::string::npos);
  CHECK(report.find("lose all efficiency") == std::string::npos);
  // And a heading: a short line without an end mark.
  CHECK(report.find("Worked example") == std::string::npos);
  CHECK(report.find("when the outdoor temperature falls in cold weather [2].")
        != std::string::npos);
  // No unit twice.
  CHECK(count_of(report, "temperature lift") == 1);
}

TEST_CASE("extractive final report: every unit once, plain headings, the most direct answer "
          "first") {
  std::vector<std::string> plan{
    "Why does efficiency drop in cold weather?",
    "What do manufacturers do about it? (regarding: efficiency drop in cold weather)"};
  std::vector<finding> findings{
    {plan[0], "Efficiency drops in cold weather because the temperature lift grows [1]. "
              "Defrost cycles cost energy in cold and damp weather outside [2].\n\n"
              "The lift between the source and the sink sets how far efficiency drops [3]."},
    {plan[1], "Manufacturers fit variable-speed compressors to keep capacity up in cold "
              "weather [4]. Efficiency drops in cold weather because the temperature lift "
              "grows [1]. Efficiency drops in cold weather because the temperature lift grows "
              "larger [5]."}};
  auto report = compose_final("Why does efficiency drop in cold weather, and what do "
                              "manufacturers do about it?",
                              plan, findings);
  // The repeated unit and its near repeat appear once.
  CHECK(count_of(report, "temperature lift grows") == 1);
  CHECK(report.find("[5]") == std::string::npos);
  // Headings are the steps in plain words.
  CHECK(report.find("\n## Why does efficiency drop in cold weather?\n") != std::string::npos);
  auto second = report.find("\n## What do manufacturers do about it?\n\n");
  REQUIRE(second != std::string::npos);
  CHECK(report.find("regarding") == std::string::npos);
  // Each section opens with its most direct answer.
  CHECK(report.find("## Why does efficiency drop in cold weather?\n\nEfficiency drops in cold "
                    "weather because")
        != std::string::npos);
  const std::string heading = "\n## What do manufacturers do about it?\n\n";
  CHECK(report.substr(second + heading.size(), 30) == "Manufacturers fit variable-spe");
}

TEST_CASE("extractive final report says so when the sources do not answer the question") {
  // No key words at all.
  auto none = compose_final("x y z", {"X y z"},
                            {{"X y z", "Heat pumps move heat from a cold place to a warm "
                                       "one [1]."}});
  CHECK(none.find("The documents searched do not answer the question \"x y z\".") == 0);
  CHECK(none.find("It has no words to search for") != std::string::npos);
  CHECK(none.find("[1]") == std::string::npos);
  // Key words the passages hardly hold: the nearest passage is quoted, cited.
  auto far = compose_final(
    "What do penguins eat in winter?", {"What do penguins eat in winter?"},
    {{"What do penguins eat in winter?",
      "Heat pumps keep houses warm in winter even when the air is cold [1]. Ground loops "
      "are buried below the frost line in the garden [2]."}});
  CHECK(far.find("The documents searched do not answer the question") == 0);
  CHECK(far.find("Of its 3 key words, 1 occur") != std::string::npos);
  CHECK(far.find("## Nearest passages\n\n- Heat pumps keep houses warm in winter even when the "
                 "air is cold [1].")
        != std::string::npos);
  CHECK(far.find("Extractive report") != std::string::npos);
  // The measure itself.
  auto cover = lexical::question_coverage("Why do heat pumps lose efficiency?",
                                          {"Heat pumps lose efficiency in the cold.", "Pumps."});
  CHECK(cover.terms == 4);
  CHECK(cover.found == 4);
  CHECK(cover.best_passage == 4);
  CHECK(cover.answered);
  CHECK_FALSE(lexical::question_coverage("the of and", {"the of and"}).answered);
  CHECK_FALSE(lexical::question_coverage("heat pump noise", {"heat", "pump", "noise"})
                .answered); // every word, but never two in one passage
  // Words that frame a question about documents are not key words, and a
  // follow-up is measured by its own question, not the conversation before.
  auto framed = lexical::question_coverage("Which of these sources talk about noise?",
                                           {"Outdoor units make noise at night."});
  CHECK(framed.terms == 1);
  CHECK(framed.answered);
  auto follow_up = std::string{"Earlier research in this conversation.\nQuestion: penguins "
                               "in winter\n\n"}
                   + std::string{lexical::follow_up_marker} + "How loud are heat pumps?";
  CHECK(lexical::asked_question(follow_up) == "How loud are heat pumps?");
  CHECK(lexical::question_coverage(follow_up, {"Heat pumps are loud."}).terms == 3);
  CHECK(lexical::asked_question("plain") == "plain");
}

TEST_CASE("extractive agents follow the references of the passages that speak to the task") {
  auto req = request("research", {"internal_search", "open_url", "generate_report"});
  const std::string task = "How should a heat pump be sized for a house?";
  req.messages = {msg(sdk::role::user, task)};
  std::vector<sdk::tool_call> calls;
  auto add = [&](const sdk::tool_call& call, const std::string& result) {
    req.messages.push_back(calls_msg({call}));
    req.messages.push_back(tool_msg(call.id, call.name, result));
  };
  // Search, refined search (or none), then the page.
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 1);
  add(first.tool_calls[0],
      R"({"results": [{"document": 1, "title": "Sizing a Heat Pump", "url": "file:///sizing.md",)"
      R"( "content": "A heat pump sized for a house must meet its heat loss."},)"
      R"( {"document": 2, "title": "Buffer Tanks", "url": "file:///buffer.md",)"
      R"( "content": "A buffer tank stores water."}]})");
  auto next = respond(req, {});
  REQUIRE(next.tool_calls.size() == 1);
  if (next.tool_calls[0].name == "internal_search") {
    add(next.tool_calls[0], R"({"results": []})");
    next = respond(req, {});
    REQUIRE(next.tool_calls.size() == 1);
  }
  REQUIRE(next.tool_calls[0].name == "open_url");
  add(next.tool_calls[0],
      R"({"results": [{"document": 1, "title": "Sizing a Heat Pump", "url": "file:///sizing.md",)"
      R"( "content": "## Oversizing\n\nA heat pump sized too large for the house cycles; see the)"
      R"( document on buffer tanks. An undersized heat pump in a house leans on backup heat;)"
      R"( the document on backup heat and bivalent operation explains the trade-offs.\n\n)"
      R"(## Unrelated\n\nPenguins live in the south; see the document on penguins."}]})");
  // The reference not found yet is searched for; the one found is read.
  auto lead = respond(req, {});
  REQUIRE(lead.tool_calls.size() == 1);
  CHECK(lead.tool_calls[0].name == "internal_search");
  CHECK(lead.tool_calls[0].arguments == R"({"queries":["backup heat and bivalent operation"]})");
  add(lead.tool_calls[0],
      R"({"results": [{"document": 3, "title": "Backup Heat and Bivalent Operation",)"
      R"( "url": "file:///backup.md", "content": "Backup heat covers the coldest days."}]})");
  auto read = respond(req, {});
  REQUIRE(read.tool_calls.size() == 1);
  CHECK(read.tool_calls[0].name == "open_url");
  CHECK(read.tool_calls[0].arguments == R"({"urls":["file:///backup.md","file:///buffer.md"]})");
  add(read.tool_calls[0],
      R"({"results": [{"document": 2, "title": "Buffer Tanks", "url": "file:///buffer.md",)"
      R"( "content": "A buffer tank stores water for a heat pump that cycles in a house."}]})");
  // Then the report: nothing more to follow.
  auto done = respond(req, {});
  REQUIRE(done.tool_calls.size() == 1);
  CHECK(done.tool_calls[0].name == "generate_report");
}

TEST_CASE("extractive reports quote every document read that answers the task") {
  // Four strong sentences of one source fill a report of three; the page
  // read whole with a weaker but relevant sentence is quoted too, the
  // snippet of a document not read, as weak, is not.
  std::vector<source_doc> docs{
    {1,
     "Cold weather",
     "file:///cold.md",
     {"Heat pump efficiency drops in cold weather as the lift grows. Heat pump efficiency "
      "in cold weather depends on the compressor. Cold weather lowers heat pump efficiency "
      "through defrost. Heat pump efficiency in very cold weather falls further."}}};
  docs.push_back({2,
                  "Refrigerants",
                  "file:///co2.md",
                  {"CO2 units keep their output in cold weather at high water temperatures."},
                  true});
  docs.push_back({3,
                  "Noise",
                  "file:///noise.md",
                  {"Outdoor units should stand away from windows in cold places."}});
  auto report = compose_report("Why does heat pump efficiency drop in cold weather?", docs, 3);
  CHECK(report.find("[2]") != std::string::npos);
  CHECK(report.find("[3]") == std::string::npos);
}

TEST_CASE("extractive agents take words for the same change as one") {
  CHECK(tokenize("efficiency drops") == tokenize("efficiency falls"));
  CHECK(tokenize("declined") == tokenize("falling"));
  CHECK(tokenize("decreases") == tokenize("fall"));
  CHECK(tokenize("costs rise") == tokenize("costs increased"));
  CHECK(tokenize("grows") == tokenize("rising"));
  CHECK(tokenize("drop") != tokenize("rise"));
  CHECK(tokenize("cold weather") == std::vector<std::string>{"cold", "weather"});
  // The first search spells the other words out for the search engine.
  auto req = request("research", {"internal_search", "open_url", "generate_report"});
  req.messages = {msg(sdk::role::user, "Why does efficiency drop in cold weather?")};
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 1);
  CHECK(first.tool_calls[0].arguments
        == R"({"queries":["Why does efficiency drop in cold weather? fall decline decrease"]})");
  req.messages = {msg(sdk::role::user, "Why do running costs rise?")};
  CHECK(respond(req, {}).tool_calls[0].arguments
        == R"({"queries":["Why do running costs rise? increase grow"]})");
  req.messages = {msg(sdk::role::user, "How are heat pumps sized?")};
  CHECK(respond(req, {}).tool_calls[0].arguments == R"({"queries":["How are heat pumps sized?"]})");
}

TEST_CASE("extractive agents follow every document a plural reference names, from any "
          "paragraph of a section that speaks to the task") {
  auto req = request("research", {"internal_search", "open_url", "generate_report"});
  const std::string task = "What do manufacturers do about cold weather?";
  req.messages = {msg(sdk::role::user, task)};
  auto add = [&](const sdk::tool_call& call, const std::string& result) {
    req.messages.push_back(calls_msg({call}));
    req.messages.push_back(tool_msg(call.id, call.name, result));
  };
  auto first = respond(req, {});
  REQUIRE(first.tool_calls.size() == 1);
  add(
    first.tool_calls[0],
    R"({"results": [{"document": 1, "title": "Manufacturers and Cold Weather", "url": "file:///cold.md",)"
    R"( "content": "Manufacturers design heat pumps for cold weather."},)"
    R"( {"document": 2, "title": "Inverters", "url": "file:///inverters.md",)"
    R"( "content": "What manufacturers do."},)"
    R"( {"document": 3, "title": "Refrigerant Comparison", "url": "file:///compare.html",)"
    R"( "content": "Refrigerants compared."}]})");
  auto next = respond(req, {});
  REQUIRE(next.tool_calls.size() == 1);
  if (next.tool_calls[0].name == "internal_search") {
    add(next.tool_calls[0], R"({"results": []})");
    next = respond(req, {});
    REQUIRE(next.tool_calls.size() == 1);
  }
  REQUIRE(next.tool_calls[0].name == "open_url");
  // The reference is in the second paragraph of a section of a document
  // that is not the one speaking to the task best, and that paragraph holds
  // none of the task's words: its heading does.
  add(
    next.tool_calls[0],
    R"({"results": [{"document": 1, "title": "Manufacturers and Cold Weather", "url": "file:///cold.md",)"
    R"( "content": "Manufacturers design heat pumps for cold weather. In cold weather)"
    R"( manufacturers fit larger coils."},)"
    R"( {"document": 2, "title": "Inverters", "url": "file:///inverters.md",)"
    R"( "content": "## What manufacturers do about cold weather\n\nSeveral things.\n\n)"
    R"(- Propane units reach high water temperatures; see the documents on refrigerants.)"
    R"(\n\n## Penguins\n\nPenguins swim; see the documents on penguins."}]})");
  // One document found so far is named, but "the documents" name several:
  // the reference is searched for all the same.
  auto lead = respond(req, {});
  REQUIRE(lead.tool_calls.size() == 1);
  CHECK(lead.tool_calls[0].name == "internal_search");
  CHECK(lead.tool_calls[0].arguments == R"({"queries":["refrigerants"]})");
  add(lead.tool_calls[0],
      R"({"results": [{"document": 6, "title": "Refrigerants: An Overview",)"
      R"( "url": "file:///overview.md", "content": "Refrigerants in heat pumps."},)"
      R"( {"document": 7, "title": "Natural Refrigerants", "url": "file:///natural.md",)"
      R"( "content": "Propane and CO2."},)"
      R"( {"document": 8, "title": "Charge Limits", "url": "file:///rules.md",)"
      R"( "content": "Refrigerant charge limits."}]})");
  // Every title holding the reference's words is read (the first result
  // of the reference's search first), not what merely mentions them.
  auto read = respond(req, {});
  REQUIRE(read.tool_calls.size() == 1);
  CHECK(read.tool_calls[0].name == "open_url");
  CHECK(read.tool_calls[0].arguments
        == R"({"urls":["file:///overview.md","file:///compare.html","file:///natural.md"]})");
}

} // namespace extractive_logic_test
