// The research strategy's requests and tool answers (core, no actors).

#include "quarry/core/document_numbers.hpp"
#include "quarry/core/history.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/core/reflective.hpp"
#include "quarry/core/verification.hpp"
#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/json.hpp"

#include <doctest/doctest.h>

#include <algorithm>

namespace research_requests_test {

using namespace quarry;
using sdk::chat_request;
using sdk::role;
using sdk::tool_choice;

namespace {

std::vector<std::string> tool_names(const chat_request& req) {
  std::vector<std::string> out;
  for (const auto& t : req.tools)
    out.push_back(t.name);
  return out;
}

chat_request request_of(core::request_or_error x) {
  if (auto* why = std::get_if<std::string>(&x))
    FAIL("no request: " << *why);
  return std::get<chat_request>(std::move(x));
}

sdk::chat_message tool_round_call(std::string id) {
  sdk::chat_message m;
  m.author = role::assistant;
  m.tool_calls.push_back({std::move(id), "research_agent", R"({"task": "t"})"});
  return m;
}

sdk::chat_message tool_round_result(std::string id, std::string text) {
  sdk::chat_message m;
  m.author = role::tool;
  m.tool_call_id = std::move(id);
  m.tool_name = "research_agent";
  m.content = std::move(text);
  return m;
}

sdk::document doc(std::string id) {
  sdk::document d;
  d.id = id;
  d.url = "https://example.org/" + id;
  d.title = "Title " + id;
  return d;
}

} // namespace

TEST_CASE("research requests: clarification offers generate_plan with tool choice auto") {
  auto req = core::clarification_request("SYS", "What is X?");
  REQUIRE(req.messages.size() == 2);
  CHECK(req.messages[0].author == role::system);
  CHECK(req.messages[0].content == "SYS");
  CHECK(req.messages[1].author == role::user);
  CHECK(req.messages[1].content == "What is X?");
  CHECK(tool_names(req) == std::vector<std::string>{"generate_plan"});
  CHECK(req.choice == tool_choice::automatic);
  CHECK(req.role_tag == "clarify");
  CHECK(req.max_tokens == 2000);
  CHECK(req.research.question == "What is X?");
  CHECK_FALSE(req.research.follow_up);
}

TEST_CASE("research requests: the plan has no tools and ends with the reminder") {
  auto req = core::plan_request("SYS", "What is X?", "At most 6 steps.");
  REQUIRE(req.messages.size() == 3);
  CHECK(req.messages[0].author == role::system);
  CHECK(req.messages[1].content == "What is X?");
  CHECK(req.messages[2].author == role::user);
  CHECK(req.messages[2].content == "At most 6 steps.");
  CHECK(req.tools.empty());
  CHECK(req.choice == tool_choice::none);
  CHECK(req.role_tag == "plan");
  CHECK(req.max_tokens == 2000);
  CHECK(req.research.question == "What is X?");
}

TEST_CASE("research requests: the research context states the question a follow-up asks") {
  auto follow_up = std::string{"Earlier research in this conversation.\nQuestion: penguins\n\n"}
                   + std::string{lexical::follow_up_marker} + "How loud are heat pumps?";
  auto c = core::research_context_of(follow_up);
  CHECK(c.question == "How loud are heat pumps?");
  CHECK(c.follow_up);
  auto plain = core::research_context_of("How loud are heat pumps?");
  CHECK(plain.question == "How loud are heat pumps?");
  CHECK_FALSE(plain.follow_up);
  CHECK(plain.plan.empty());
  CHECK(plain.task.empty());
  CHECK(plain.max_parallel_agents == 0);
  CHECK(plain.new_sources == -1);
}

TEST_CASE("research requests: the steps of a plan as the plan step wrote it") {
  CHECK(core::plan_steps("1. First step\n2) Second   step\n\n  3. Third step\n")
        == std::vector<std::string>{"First step", "Second step", "Third step"});
  CHECK(core::plan_steps("Steps:\n1. a\nthen\n2. b\n") == std::vector<std::string>{"a", "b"});
  CHECK(core::plan_steps("10. ten\n1.5 kW is not a step\n1234. nor this")
        == std::vector<std::string>{"ten"});
  CHECK(core::plan_steps("no list here").empty());
  CHECK(core::plan_steps("").empty());
}

TEST_CASE("research requests: an orchestrator cycle, with and without native reasoning") {
  core::orchestrator_input in;
  in.system = "ORCH";
  in.question = "Q";
  in.plan = "1. One\n2. Two";
  in.max_parallel_agents = 2;
  in.history = {tool_round_call("c1"), tool_round_result("c1", "found a lot")};
  in.max_tokens = 4096;
  auto req = request_of(core::orchestrator_request(in));
  CHECK(req.research.question == "Q");
  CHECK(req.research.plan == std::vector<std::string>{"One", "Two"});
  CHECK(req.research.max_parallel_agents == 2);
  CHECK(tool_names(req)
        == std::vector<std::string>{"research_agent", "generate_report", "think_tool"});
  CHECK(req.choice == tool_choice::required);
  CHECK(req.role_tag == "orchestrate");
  CHECK(req.max_tokens == 4096);
  REQUIRE(req.messages.size() == 4);
  CHECK(req.messages[0].content == "ORCH");
  CHECK(req.messages[1].content == "Q");
  CHECK(req.messages[2].tool_calls.size() == 1);
  CHECK(req.messages[3].content == "found a lot");
  // The orchestrator's think_tool is not the agents' one.
  CHECK(req.tools[2].description == core::think_tool(false).description);
  CHECK(req.tools[1].description == core::generate_report_tool(false).description);

  in.reasoning_model = true;
  in.reminder = "Call a tool.";
  auto reasoning = request_of(core::orchestrator_request(in));
  CHECK(tool_names(reasoning) == std::vector<std::string>{"research_agent", "generate_report"});
  REQUIRE(reasoning.messages.size() == 5);
  CHECK(reasoning.messages.back().author == role::user);
  CHECK(reasoning.messages.back().content == core::make_reminder("Call a tool.").content);
}

TEST_CASE("research requests: an orchestrator cycle that does not fit says so") {
  core::orchestrator_input in;
  in.system = "ORCH";
  in.question = "Q";
  in.context_tokens = 5000;
  in.max_tokens = 4096; // 5000 - 4096 - 1000 < 0
  auto r = core::orchestrator_request(in);
  CHECK(std::holds_alternative<std::string>(r));
  in.context_tokens = 4096 + 1000 + 200;
  CHECK(std::holds_alternative<chat_request>(core::orchestrator_request(in)));
}

TEST_CASE("research requests: the orchestrator's reminders") {
  CHECK(core::orchestrator_reminder(0, false, "FIRST").empty());
  CHECK(core::orchestrator_reminder(0, true, "FIRST") == core::orchestrator_retry_reminder);
  CHECK(core::orchestrator_reminder(1, false, "FIRST") == "FIRST");
  CHECK(core::orchestrator_reminder(1, true, "FIRST") == "FIRST");
  CHECK(core::orchestrator_reminder(2, false, "FIRST").empty());
  CHECK(core::orchestrator_reminder(1, false, "").empty());
}

TEST_CASE("research requests: the final report gets the rounds and the reminder, no tools") {
  std::vector<sdk::chat_message> rounds{tool_round_call("c1"), tool_round_result("c1", "finding")};
  auto req = request_of(
    core::final_report_request("FINAL", "Q", "1. One", rounds, "PLAN", 128000, 20000));
  CHECK(req.research.question == "Q");
  CHECK(req.research.plan == std::vector<std::string>{"One"});
  CHECK(req.tools.empty());
  CHECK(req.choice == tool_choice::none);
  CHECK(req.role_tag == "final");
  CHECK(req.max_tokens == 20000);
  REQUIRE(req.messages.size() == 5);
  CHECK(req.messages[0].content == "FINAL");
  CHECK(req.messages[1].content == "Q");
  CHECK(req.messages[3].content == "finding");
  CHECK(req.messages[4].content == core::make_reminder("PLAN").content);
  CHECK(std::holds_alternative<std::string>(
    core::final_report_request("FINAL", "Q", "1. One", rounds, "PLAN", 20000, 20000)));
}

TEST_CASE(
  "research requests: a research step offers the agent's tools, its own report and think tools") {
  core::research_step_input in;
  in.system = "AGENT";
  in.task = "the task";
  in.history = {core::user_message("the task")};
  sdk::tool_definition search;
  search.name = "web_search";
  search.description = "Search the web.";
  search.parameters = {{"type", "object"}};
  in.tools = {search};
  in.max_tokens = 1000;
  auto req = request_of(core::research_step_request(in));
  CHECK(tool_names(req) == std::vector<std::string>{"web_search", "generate_report", "think_tool"});
  CHECK(req.tools[1].description == core::generate_report_tool(true).description);
  CHECK(req.tools[2].description == core::think_tool(true).description);
  CHECK(req.choice == tool_choice::required);
  CHECK(req.role_tag == "research");
  CHECK(req.max_tokens == 1000);
  CHECK(req.research.task == "the task");
  REQUIRE(req.messages.size() == 2);
  CHECK(req.messages[1].content == "the task");

  in.reasoning_model = true;
  in.reminder = "Open the best URLs.";
  auto r2 = request_of(core::research_step_request(in));
  CHECK(tool_names(r2) == std::vector<std::string>{"web_search", "generate_report"});
  REQUIRE(r2.messages.size() == 3);
  CHECK(r2.messages[2].author == role::user);
  CHECK(r2.messages[2].content == "Open the best URLs."); // plain, not wrapped

  // The tool definitions count against the context.
  int64_t def_tokens = 0;
  for (const auto& d : r2.tools)
    def_tokens += static_cast<int64_t>(d.to_openai().dump().size() / 4);
  in.context_tokens = def_tokens + 1000 + 5; // too little room for the prompt
  CHECK(std::holds_alternative<std::string>(core::research_step_request(in)));
  in.context_tokens = 0; // never a negative budget
  CHECK(std::holds_alternative<std::string>(core::research_step_request(in)));
}

TEST_CASE("research requests: a tool's OpenAI text is counted as dump_json writes it") {
  std::vector<sdk::tool_definition> tools{core::generate_report_tool(true), core::think_tool(true),
                                          core::generate_report_tool(false),
                                          core::think_tool(false), core::research_agent_tool()};
  sdk::tool_definition odd;
  odd.name = "na\"me\\";
  odd.description = "tabs\tand\nlines, \x01 control, caf\xc3\xa9, \xf0\x9f\x94\x8d";
  odd.parameters = nlohmann::json::parse(
    R"({"type":"object","properties":{"q":{"type":"string","enum":["a","b\u0000"]},)"
    R"("n":{"type":"integer","minimum":-3,"maximum":18446744073709551615},"f":{"default":0.5},)"
    R"("z":{"type":"array","items":[true,false,null,{}]}},"required":["q"]})");
  tools.push_back(odd);
  tools.emplace_back(); // empty name, description and schema
  for (const auto& t : tools) {
    CAPTURE(t.name);
    CHECK(core::openai_tool_text_size(t) == t.to_openai().dump().size());
    CHECK(core::openai_tool_text_size(t) == sdk::dump_json(t.to_openai()).size());
  }
  sdk::tool_definition invalid;
  invalid.name = "bad";
  invalid.description = "not UTF-8: \xff\xfe";
  CHECK(core::openai_tool_text_size(invalid) == sdk::dump_json(invalid.to_openai()).size());
}

TEST_CASE("research requests: an agent's report") {
  std::vector<sdk::chat_message> history{core::user_message("the task")};
  auto req = request_of(
    core::agent_report_request("REPORT", "the task", history, "Write it.", 128000, 10000));
  CHECK(req.research.task == "the task");
  CHECK(req.tools.empty());
  CHECK(req.choice == tool_choice::none);
  CHECK(req.role_tag == "report");
  CHECK(req.max_tokens == 10000);
  REQUIRE(req.messages.size() == 3);
  CHECK(req.messages[0].author == role::system);
  CHECK(req.messages[2].content == "Write it.");
  CHECK(std::holds_alternative<std::string>(
    core::agent_report_request("REPORT", "the task", history, "Write it.", 10000, 10000)));
}

TEST_CASE("research requests: the task of a research_agent call") {
  auto task = [](std::string args) {
    return core::research_task({"c", "research_agent", std::move(args)});
  };
  CHECK(task(R"({"task": "Find the population of Lyon."})") == "Find the population of Lyon.");
  CHECK(task(R"("{\"task\": \"double encoded\"}")") == "double encoded");
  CHECK(task(R"({"task": "  "})").empty());
  CHECK(task(R"({"task": 5})").empty());
  CHECK(task(R"({"query": "x"})").empty());
  CHECK(task("not json at all").empty());
  CHECK(task("").empty());
  CHECK(task(R"({"task": " keep spaces "})") == " keep spaces ");
}

TEST_CASE("research requests: answers to tool calls") {
  sdk::tool_call think{"t", "think_tool", "{}"};
  sdk::tool_call other{"o", "web_search", "{}"};
  CHECK(core::orchestrator_tool_answer(think, true) == core::think_acknowledgement);
  CHECK(core::orchestrator_tool_answer(think, false) == core::think_acknowledgement);
  CHECK(core::orchestrator_tool_answer(other, true)
        == "There is no tool named 'web_search'. Use research_agent, think_tool "
           "or generate_report.");
  CHECK(core::orchestrator_tool_answer(other, false) == "There is no tool named 'web_search'.");
  CHECK(core::agent_failed_text("it ran out of time")
        == "The research agent failed (it ran out of time). Try another approach "
           "or carry on without this task.");
  CHECK(core::unknown_tool_text("fetch", {"web_search", "open_url"})
        == "There is no tool named 'fetch'. Available tools: web_search and "
           "open_url, think_tool and generate_report.");
}

TEST_CASE("research requests: the report assembled from findings") {
  CHECK(core::findings_report({}, "the deadline came")
        == "No findings could be gathered before the research ended (the deadline came).");
  CHECK(core::findings_report({{"Task A", "Report A [1]"}, {"Task B", "Report B"}},
                              "the model's call failed")
        == "> **Note:** the model did not write this report (the model's call failed). Below "
           "are the research agents' own reports, as they wrote them.\n\n"
           "## Task A\n\nReport A [1]\n\n## Task B\n\nReport B\n\n");
}

TEST_CASE("research requests: the documents an intermediate report cites") {
  std::map<int, sdk::document> docs{{1, doc("a")}, {2, doc("b")}, {3, doc("c")}};
  auto cited = core::cited_documents("B says so [2], and A [1]; again [2]. Unknown [9].", docs);
  REQUIRE(cited.size() == 2);
  CHECK(cited[0].first == 2);
  CHECK(cited[0].second.id == "b");
  CHECK(cited[1].first == 1);
  // Markers in code do not count.
  CHECK(core::cited_documents("```\nx[3]\n```\nnothing cited", docs).empty());
  CHECK(core::cited_documents("no markers", docs).empty());
  CHECK(core::cited_documents("[1]", {}).empty());
}

TEST_CASE("research requests: agent-local document numbers, one per document") {
  core::document_numbers numbers;
  CHECK(numbers.number_for(doc("a")) == 1);
  CHECK(numbers.number_for(doc("b")) == 2);
  CHECK(numbers.number_for(doc("a")) == 1); // the same document again
  auto by_url = doc("");
  by_url.url = "https://example.org/page";
  CHECK(numbers.number_for(by_url) == 3); // known by its URL without an id
  CHECK(numbers.number_for(by_url) == 3);
  auto renamed = doc("b");
  renamed.title = "Another title";
  CHECK(numbers.number_for(renamed) == 2);
  CHECK(numbers.documents().at(2).title == "Title b"); // the first one is kept
  CHECK(numbers.size() == 3);
}

TEST_CASE("research requests: a document seen again keeps its number and gains what was read") {
  core::document_numbers numbers;
  sdk::document hit;
  hit.id = hit.url = "https://example.org/a";
  hit.title = "A";
  hit.snippet = "A short snippet.";
  REQUIRE(numbers.number_for(hit) == 1);
  CHECK(core::snippet_only(numbers.documents().at(1)));
  // The page opened: its text joins the search result, under the same number.
  auto page = hit;
  page.title.clear();
  page.snippet.clear();
  page.content = "The whole page. It says the fact the snippet lacks.";
  page.published = "2024-05-01";
  CHECK(numbers.number_for(page) == 1);
  const auto& d = numbers.documents().at(1);
  CHECK_FALSE(core::snippet_only(d));
  CHECK(d.content == page.content);
  CHECK(d.title == "A");                  // kept
  CHECK(d.snippet == "A short snippet."); // kept
  CHECK(d.published == std::optional<std::string>{"2024-05-01"});
  // A search result after the read loses nothing of it.
  CHECK(numbers.number_for(hit) == 1);
  CHECK(numbers.documents().at(1).content == page.content);
  // Another passage of the same document is added, the same one is not.
  auto other = hit;
  other.content = "A second passage.";
  numbers.number_for(other);
  numbers.number_for(other);
  CHECK(numbers.documents().at(1).content == page.content + "\n\nA second passage.");
  // A read that holds all of the old text replaces it.
  auto whole = hit;
  whole.content = "Before. " + numbers.documents().at(1).content + " After.";
  numbers.number_for(whole);
  CHECK(numbers.documents().at(1).content == whole.content);
  // Bounded.
  auto big = hit;
  big.id = big.url = "https://example.org/big";
  big.content = std::string(core::max_merged_text_bytes - 10, 'x');
  auto n = numbers.number_for(big);
  auto more = big;
  more.content = std::string(100, 'y');
  numbers.number_for(more);
  CHECK(numbers.documents().at(n).content.size() <= core::max_merged_text_bytes);
  CHECK(numbers.documents().at(n).content.find('y') != std::string::npos);
  numbers.number_for(more);
  auto again = more;
  again.content = "z";
  numbers.number_for(again);
  CHECK(numbers.documents().at(n).content.size() <= core::max_merged_text_bytes);
}

TEST_CASE("research requests: prompts render with their variables, guidance only when it applies") {
  core::prompt_library lib;
  lib.set("clarification", "date={current_datetime} g=[{internal_search_clarification_guidance}]");
  lib.set("internal_search_clarification_guidance", "ASK ABOUT DOCS");
  CHECK(core::clarification_system(lib, "today", false) == "date=today g=[]");
  CHECK(core::clarification_system(lib, "today", true) == "date=today g=[ASK ABOUT DOCS]");
  CHECK(core::guidance_text(lib, "internal_search_clarification_guidance", false).empty());
  CHECK(core::guidance_text(lib, "no_such_template", true).empty());
  // A template that cannot be rendered gives an empty text.
  CHECK(core::render_prompt(lib, "no_such_template", {}).empty());
  lib.set("broken", "{missing}");
  CHECK(core::render_prompt(lib, "broken", {}).empty());
  CHECK(core::render_prompt(lib, "clarification",
                            {{"current_datetime", "d"},
                             {"internal_search_clarification_guidance", "x"}})
        == "date=d g=[x]");
}

TEST_CASE("research requests: the orchestrator's system prompt") {
  core::prompt_library lib;
  lib.set("orchestrator", "N {current_datetime} {current_cycle_count}/{max_cycles} "
                          "p={max_parallel_agents} [{internal_search_research_task_guidance}] "
                          "{research_plan}");
  lib.set("orchestrator_reasoning", "R {current_cycle_count}/{max_cycles} {research_plan}");
  lib.set("internal_search_research_task_guidance", "DOCS");
  core::orchestrator_prompt p;
  p.current_datetime = "today";
  p.cycle = 2;
  p.max_cycles = 8;
  p.max_parallel_agents = 3;
  p.plan = "1. a";
  CHECK(core::orchestrator_system(lib, p) == "N today 2/8 p=3 [] 1. a");
  p.internal_search = true;
  CHECK(core::orchestrator_system(lib, p) == "N today 2/8 p=3 [DOCS] 1. a");
  p.reasoning_model = true;
  CHECK(core::orchestrator_system(lib, p) == "R 2/8 1. a");
}

TEST_CASE(
  "research requests: a research agent's system prompt and the findings of earlier agents") {
  core::prompt_library lib;
  lib.set("research_agent", "N tools={available_tools} {current_cycle_count}/{max_cycles} "
                            "[{internal_search_tool_guidance}|{web_search_tool_guidance}|"
                            "{open_url_tool_guidance}] {current_datetime}");
  lib.set("research_agent_reasoning", "R [{open_url_tool_guidance}]");
  lib.set("internal_search_tool_guidance", "IS");
  lib.set("web_search_tool_guidance", "WS");
  lib.set("open_url_tool_guidance", "OU");
  lib.set("open_url_tool_guidance_reasoning", "OUR");
  core::agent_prompt p;
  p.tools = {"open_url", "web_search"};
  p.cycle = 1;
  p.max_cycles = 8;
  p.web_search = true;
  p.open_url = true;
  p.current_datetime = "today";
  CHECK(core::research_agent_system(lib, p)
        == "N tools=open_url and web_search 1/8 [|WS|OU] today");
  p.context = "Earlier agents found: X.";
  CHECK(core::research_agent_system(lib, p)
        == "N tools=open_url and web_search 1/8 [|WS|OU] today\n\nEarlier agents found: X.");
  p.reasoning_model = true;
  CHECK(core::research_agent_system(lib, p) == "R [OUR]\n\nEarlier agents found: X.");
  p.open_url = false;
  CHECK(core::research_agent_system(lib, p) == "R []\n\nEarlier agents found: X.");
  // No template: empty, and the context is not returned alone.
  core::prompt_library empty;
  CHECK(core::research_agent_system(empty, p).empty());
}

TEST_CASE("research requests: the embedded templates render for every role") {
  auto lib = core::prompt_library::embedded();
  CHECK_FALSE(core::clarification_system(lib, "today", true).empty());
  core::orchestrator_prompt o;
  CHECK_FALSE(core::orchestrator_system(lib, o).empty());
  o.reasoning_model = true;
  CHECK_FALSE(core::orchestrator_system(lib, o).empty());
  core::agent_prompt a;
  a.tools = {"web_search", "open_url", "internal_search"};
  a.web_search = a.open_url = a.internal_search = true;
  CHECK_FALSE(core::research_agent_system(lib, a).empty());
  a.reasoning_model = true;
  CHECK_FALSE(core::research_agent_system(lib, a).empty());
}

TEST_CASE("research requests: the guidance and the reminder name the tools as configured") {
  core::prompt_library lib;
  lib.set("research_agent", "[{web_search_tool_guidance}|{open_url_tool_guidance}]");
  lib.set("web_search_tool_guidance", "search with {web_search_tool}");
  lib.set("open_url_tool_guidance", "read with {open_url_tool}");
  lib.set("open_url_reminder", "now call {open_url_tool}");
  core::agent_prompt p;
  p.web_search = true;
  p.open_url = true;
  CHECK(core::research_agent_system(lib, p) == "[search with web_search|read with open_url]");
  CHECK(core::open_url_reminder(lib, p) == "now call open_url");
  p.web_search_tool = "my_search";
  p.open_url_tool = "fetch_page";
  CHECK(core::research_agent_system(lib, p) == "[search with my_search|read with fetch_page]");
  CHECK(core::open_url_reminder(lib, p) == "now call fetch_page");
  core::prompt_library empty;
  CHECK(core::open_url_reminder(empty, p).empty());
}

TEST_CASE("research requests: a tool that ran out of time and a call that failed") {
  auto r = core::tool_timeout_result("web_search", std::chrono::seconds{120});
  CHECK(r.llm_text == "The web_search tool did not finish within 2m; continue without its result.");
  REQUIRE(r.failure);
  CHECK(r.failure->code == sdk::errc::timeout);
  CHECK(r.failure->message == r.llm_text);
  CHECK(r.documents.empty());
  CHECK(core::tool_call_failed_text("open_url", "the tool actor is gone")
        == "The open_url call failed: the tool actor is gone. Try another approach.");
}

TEST_CASE("research requests: an agent's step calls sorted by what they ask for") {
  auto split = core::split_agent_calls({{"1", "web_search", "{}"},
                                        {"2", "think_tool", R"({"reasoning": "x"})"},
                                        {"3", "open_url", "{}"},
                                        {"4", "no_such_tool", "{}"}});
  CHECK_FALSE(split.report);
  REQUIRE(split.thinks.size() == 1);
  CHECK(split.thinks[0].id == "2");
  REQUIRE(split.work.size() == 3);
  CHECK(split.work[0].id == "1");
  CHECK(split.work[1].id == "3");
  CHECK(split.work[2].id == "4");
  auto report = core::split_agent_calls(
    {{"1", "web_search", "{}"}, {"2", "generate_report", "{}"}});
  CHECK(report.report);
  CHECK(report.work.size() == 1);
  auto none = core::split_agent_calls({});
  CHECK_FALSE(none.report);
  CHECK(none.thinks.empty());
  CHECK(none.work.empty());
}

TEST_CASE("research requests: an agent cut by its time limit keeps its report or its sources") {
  using namespace std::chrono_literals;
  std::map<int, sdk::document> docs;
  sdk::document a;
  a.title = "Defrost cycles";
  a.url = "https://example.org/defrost";
  a.snippet = "Frost on the coil\n  is melted [3] by\treversing the cycle.";
  docs[1] = a;
  sdk::document b;
  b.url = "https://example.org/untitled";
  b.content = std::string(400, 'x') + " tail";
  docs[2] = b;
  // Nothing written: the sources, one line each, then the note.
  auto listed = core::time_cut_report("", docs, 30min);
  CHECK(
    listed.find("- Defrost cycles: Frost on the coil is melted (3) by reversing the cycle. [1]\n")
    != std::string::npos);
  // No title: the URL; no snippet: the start of the text, at most 300 bytes.
  CHECK(listed.find("- https://example.org/untitled: " + std::string(300, 'x') + " [2]\n")
        != std::string::npos);
  CHECK(listed.find("tail") == std::string::npos);
  CHECK(listed.find(core::time_cut_marker) != std::string::npos);
  CHECK(listed.find("research.agent_timeout, 30m") != std::string::npos);
  // The citations the listing makes are exactly its documents' numbers.
  auto cited = core::cited_documents(listed, docs);
  REQUIRE(cited.size() == 2);
  CHECK(cited[0].first == 1);
  CHECK(cited[1].first == 2);
  // A report being written is kept whole, as streamed, and the note follows.
  auto kept = core::time_cut_report("Defrost melts ice [1].", docs, 30min);
  CHECK(kept.rfind("Defrost melts ice [1].\n\n", 0) == 0);
  CHECK(kept.find(core::time_cut_marker) != std::string::npos);
  CHECK(kept.find("- Defrost cycles") == std::string::npos);
  // Nothing written and nothing read: nothing to keep.
  CHECK(core::time_cut_report("  \n", {}, 30min).empty());
  CHECK_FALSE(core::time_cut_report("  \n", docs, 30min).empty());
}

TEST_CASE("research tools: the reserved names are the names of Quarry's own tools") {
  std::vector<std::string> own{
    core::generate_plan_tool().name, core::research_agent_tool().name,
    core::generate_report_tool(false).name, core::think_tool(false).name,
    core::reflective::classify_tool(3).name, core::reflective::queries_tool(3).name,
    core::reflective::plan_tool(1, 3).name, core::reflective::reflect_tool().name,
    core::verification::judge_tool().name,
    // The search of the files attached to a research (made per session).
    core::attached_files_tool_name};
  auto reserved = core::reserved_tool_names();
  std::sort(own.begin(), own.end());
  std::sort(reserved.begin(), reserved.end());
  CHECK(own == reserved);
}

} // namespace research_requests_test
