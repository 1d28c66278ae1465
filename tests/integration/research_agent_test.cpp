// The research agent in process with real plugins loaded from disk: the
// extractive provider and internal_search over a real corpus index, or the
// fake LLM server for failures. Checks the packets, the report, the
// agent-local citations and the failure path.

#include "research_fixture.hpp"

#include "support/fake_llm_server.hpp"

namespace research_agent_test {

using namespace quarry;
using test::count;

namespace {

struct agent_fixture : test::research_fixture {
  actors::agent_result run(actors::agent_spec spec, actors::llm_provider_actor llm,
                           actors::tool_set tools, actors::emitter_actor em) {
    caf::scoped_actor self{rt->system()};
    actors::spawn_research_agent(rt->system(), std::move(spec), llm, std::move(tools), em, prompts,
                                 caf::actor_cast<actors::agent_parent_actor>(self));
    actors::agent_result out;
    self->receive([&](actors::agent_done_atom, actors::agent_result& r) { out = std::move(r); },
                  caf::after(std::chrono::seconds{60}) >> [&] { FAIL("agent never finished"); });
    drain(self, em);
    return out;
  }
};

} // namespace

TEST_CASE_FIXTURE(agent_fixture, "research agent searches the corpus and "
                                 "reports with local citations") {
  actors::agent_spec spec;
  spec.call_id = "call_1";
  spec.task = "Why does the efficiency of an air-source heat pump fall in cold "
              "weather, and how do defrost cycles work?";
  spec.turn_index = 3;
  spec.tab_index = 1;
  spec.current_datetime = "Sunday November 22, 2026";
  auto r = run(spec, llm("extractive", nlohmann::json::object()), corpus_tools(), emitter());
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  CHECK(r.call_id == "call_1");
  CHECK(r.tab_index == 1);
  CHECK(r.report.find('[') != std::string::npos);
  REQUIRE_FALSE(r.cited.empty());
  for (const auto& n_doc : r.cited) {
    const auto& n = n_doc.first;
    const auto& doc = n_doc.second;
    CAPTURE(n);
    CHECK(r.report.find("[" + std::to_string(n)) != std::string::npos);
    CHECK(doc.id.rfind("corpus:", 0) == 0);
    CHECK(doc.url.rfind("file://", 0) == 0);
  }
  auto ts = types();
  REQUIRE_FALSE(ts.empty());
  CHECK(ts.front() == "research_agent_start");
  CHECK(count(ts, "search_tool_start") >= 1);
  CHECK(count(ts, "search_tool_queries_delta") == count(ts, "search_tool_start"));
  CHECK(count(ts, "search_tool_documents_delta") == count(ts, "search_tool_start"));
  CHECK(count(ts, "intermediate_report_start") == 1);
  CHECK(count(ts, "intermediate_report_delta") >= 1);
  CHECK(count(ts, "intermediate_report_cited_docs") == 1);
  CHECK(ts.back() == "section_end");
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& p : packets) {
    CAPTURE(p.type());
    CHECK(p.where.turn_index == 3);
    CHECK(p.where.tab_index == 1);
    auto nested = p.type().rfind("search_tool", 0) == 0;
    if (nested)
      CHECK(p.where.sub_turn_index.has_value());
    if (p.type().rfind("intermediate_report", 0) == 0 || p.type() == "research_agent_start")
      CHECK_FALSE(p.where.sub_turn_index.has_value());
  }
}

TEST_CASE_FIXTURE(agent_fixture, "research agent reports a failing model as a "
                                 "failure, with an error packet") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 400, "body": {"error": {"message": "bad request",
     "type": "invalid_request_error"}}}}
  ])")));
  actors::agent_spec spec;
  spec.call_id = "call_9";
  spec.task = "anything";
  auto r = run(spec, llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}),
               corpus_tools(), emitter());
  CHECK_FALSE(r.ok);
  CHECK(r.call_id == "call_9");
  CHECK(r.failure.find("model call failed") != std::string::npos);
  auto ts = types();
  CHECK(count(ts, "research_agent_start") == 1);
  CHECK(count(ts, "error") == 1);
}

TEST_CASE_FIXTURE(agent_fixture, "research agent treats tools by their kind, not "
                                 "their names: a custom search and a custom page reader") {
  // `company_search` is a web search by kind (backed by the corpus tool) and
  // `read_page` a page reader (backed by the test plugin's echo tool): no
  // name the agent knows.
  registry->load_directories({std::string{QUARRY_TEST_PLUGIN_DIR} + "/good"});
  auto search = corpus_tools().tools.at("internal_search");
  search.kind = sdk::tool_kind::web_search;
  auto echo = registry->make_tool("echo", nlohmann::json::object());
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(echo));
  auto echo_tool = std::get<std::shared_ptr<sdk::tool>>(echo);
  auto reader = actors::spawn_tool_provider(rt->system(), echo_tool,
                                            actors::tool_actor_settings::of("read_page", {}));
  rt->add_stoppable(reader);
  actors::tool_set tools;
  tools.tools["company_search"] = search;
  tools.tools["read_page"] = {reader, echo_tool->definition(), sdk::tool_kind::page_reader};
  // The URL the search finds first (the same run the agent makes: the tool
  // actor serves it from its cache).
  nlohmann::json query = {{"queries", {"defrost cycles"}}};
  std::string url;
  std::string snippet;
  {
    caf::scoped_actor self{rt->system()};
    self
      ->request(search.actor, std::chrono::seconds{30}, actors::run_atom::value,
                actors::tool_call_msg{1, query.dump()})
      .receive(
        [&](const actors::tool_reply& r) {
          REQUIRE_FALSE(r.result.documents.empty());
          url = r.result.documents.front().url;
          snippet = r.result.documents.front().snippet;
        },
        [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  }
  REQUIRE_FALSE(snippet.empty());
  test::fake_llm_server server;
  auto call = [](const char* name, nlohmann::json args) {
    return nlohmann::json{{"times", 1},
                          {"respond", {{"tool_calls", {{{"name", name}, {"arguments", args}}}}}}};
  };
  auto script = nlohmann::json::array(
    {call("company_search", query),
     call("read_page", {{"text", "page"}, {"urls", {url}}, {"_quarry", "from the model"}}),
     call("generate_report", nlohmann::json::object()),
     {{"respond", {{"text", "A report citing [1]."}}}}});
  REQUIRE_FALSE(server.script(script));
  actors::agent_spec spec;
  spec.call_id = "call_k";
  spec.task = "How do defrost cycles work?";
  auto r = run(spec, llm("openai", {{"base_url", server.base_url_openai()}, {"model", "m"}}), tools,
               emitter());
  CAPTURE(r.failure);
  REQUIRE(r.ok);
  // Search packets for the search, page packets for the reader.
  auto ts = types();
  CHECK(count(ts, "search_tool_start") == 1);
  CHECK(count(ts, "search_tool_queries_delta") == 1);
  CHECK(count(ts, "search_tool_documents_delta") == 1);
  CHECK(count(ts, "open_url_start") == 1);
  CHECK(count(ts, "open_url_urls") == 1);
  CHECK(count(ts, "open_url_documents") == 1);
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& p : packets)
      if (p.type() == "search_tool_start")
        CHECK(p.obj["is_internet_search"] == true);
  }
  auto requests = server.requests();
  REQUIRE(requests.size() >= 3);
  // The guidance calls the tools by their names, and after a web search the
  // model is reminded to read the pages with the page reader.
  auto system = requests[0].body["messages"][0]["content"].get<std::string>();
  INFO(system);
  CHECK(system.find("## company_search\n\nUse `company_search` to find sources")
        != std::string::npos);
  CHECK(system.find("## read_page\n\nUse `read_page` to read whole pages") != std::string::npos);
  CHECK(system.find("After a `company_search` you") != std::string::npos);
  CHECK(system.find("web_search") == std::string::npos);
  CHECK(system.find("open_url") == std::string::npos);
  CHECK(requests[0].body.dump().find("by calling `read_page`") == std::string::npos);
  CHECK(requests[1].body.dump().find("by calling `read_page` with an array of their URLs")
        != std::string::npos);
  // The reader got the search's snippet for that URL, and not the model's
  // own `_quarry`.
  std::string read_result;
  for (const auto& m : requests[2].body["messages"])
    if (m.value("role", "") == "tool")
      read_result = m.value("content", "");
  INFO(read_result);
  REQUIRE(read_result.find("_quarry=") != std::string::npos);
  auto hints = nlohmann::json::parse(read_result.substr(read_result.find("_quarry=") + 8), nullptr,
                                     false);
  REQUIRE(hints.is_object());
  CHECK(hints["snippets"].size() == 1);
  CHECK(hints["snippets"].contains(url));
  CHECK(read_result.find("from the model") == std::string::npos);
}

} // namespace research_agent_test
