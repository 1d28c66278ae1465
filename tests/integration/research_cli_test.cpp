// `quarry research` through the real binary: offline end to end over the
// example corpus (every citation resolves and the cited sentence is in the
// source), JSONL packets with the fake LLM server, clarification exit code,
// report files, and bad input.

#include "research_script.hpp"

#include "support/fake_llm_server.hpp"
#include "support/http_server.hpp"
#include "support/process.hpp"
#include "support/store_read.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <sys/stat.h>
#include <unistd.h>

namespace research_cli_test {

using namespace quarry;
using namespace quarry::test::script;

namespace {

struct research_fixture {
  test::temp_dir home;

  test::process_result
  quarry(std::vector<std::string> args,
         std::vector<std::pair<std::string, std::optional<std::string>>> extra_env = {}) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_process(argv, test::isolated_quarry_options(home.path(), extra_env));
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Folds whitespace and drops Markdown emphasis for comparisons.
std::string fold(const std::string& x) {
  std::string out;
  bool space = false;
  for (size_t i = 0; i < x.size(); ++i) {
    char c = x[i];
    if (c == '*' || c == '`')
      continue;
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string percent_decode(const std::string& x) {
  std::string out;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] == '%' && i + 2 < x.size()) {
      out += static_cast<char>(std::stoi(x.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += x[i];
    }
  return out;
}

} // namespace

TEST_CASE_FIXTURE(research_fixture, "research works offline over the example "
                                    "corpus and every citation holds") {
  auto out_md = home.file("report.md");
  auto out_html = home.file("report.html");
  auto res = quarry({"research",
                     "How do the running costs and emissions of a heat pump "
                     "compare with a gas boiler?",
                     "--out", out_md, "--html", out_html});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("using the offline extractive provider") != std::string::npos);
  CHECK(res.err.find("example corpus") != std::string::npos);
  CHECK(slurp(out_md) == res.out);
  auto html = slurp(out_html);
  CHECK(html.find("<!DOCTYPE html>") == 0);
  CHECK(html.find("<h2>Sources</h2>") != std::string::npos);
  // The sources list: "n. title <file://...>".
  std::map<int, std::string> sources;
  std::regex source_line{R"(^(\d+)\. .* <(file://[^>]+)>$)"};
  std::istringstream lines{res.out.substr(res.out.find("## Sources"))};
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_match(l, m, source_line))
      sources[std::stoi(m[1])] = m[2];
  }
  REQUIRE(sources.size() >= 3);
  // Every citation resolves, and each cited sentence is in its source.
  auto body = res.out.substr(0, res.out.find("## Sources"));
  std::regex cite{R"(\[\[(\d+)\]\]\(([^)]*)\))"};
  size_t checked = 0;
  std::istringstream paras{body};
  for (std::string para; std::getline(paras, para);) {
    if (para.empty() || para[0] == '#' || para[0] == '>')
      continue;
    // Split the paragraph at its citations: the text before each one is
    // quoted from that source.
    size_t pos = 0;
    for (auto it = std::sregex_iterator(para.begin(), para.end(), cite);
         it != std::sregex_iterator(); ++it) {
      auto n = std::stoi((*it)[1]);
      CAPTURE(n);
      REQUIRE(sources.count(n) == 1);
      CHECK(sources[n] == (*it)[2].str());
      auto quoted = para.substr(pos, static_cast<size_t>(it->position()) - pos);
      pos = static_cast<size_t>(it->position() + it->length());
      // The last sentence before the citation.
      auto text = fold(quoted);
      while (!text.empty() && (text.back() == ' ' || text.back() == '.'))
        text.pop_back();
      // A sentence cut short ends with an ellipsis after its verbatim prefix.
      const std::string ellipsis = "\u2026";
      if (text.size() >= ellipsis.size()
          && text.compare(text.size() - ellipsis.size(), ellipsis.size(), ellipsis) == 0)
        text.resize(text.size() - ellipsis.size());
      if (text.size() < 20)
        continue;
      auto last_stop = text.rfind(". ");
      auto sentence = last_stop == std::string::npos ? text : text.substr(last_stop + 2);
      if (sentence.size() < 20)
        continue;
      auto file = percent_decode(sources[n].substr(7));
      CAPTURE(sentence);
      CAPTURE(file);
      CHECK(fold(slurp(file)).find(sentence) != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked >= 5);
}

TEST_CASE_FIXTURE(research_fixture, "research --json streams packets from a "
                                    "real-format LLM server") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule("You are the planner", {{"text", "1. Cold weather\n2. Defrost"}}));
  rules.push_back(
    {{"match", {{"system_contains", "You are the orchestrator"}, {"message_contains", "\"tool\""}}},
     {"respond", calls({{"generate_report", nlohmann::json::object()}})}});
  rules.push_back(rule("You are the orchestrator",
                       calls({{"research_agent", {{"task", "Explain defrost cycles."}}}})));
  rules.push_back({{"match",
                    {{"system_contains", "careful, precise research agent"},
                     {"message_contains", "\"document\""}}},
                   {"respond", calls({{"generate_report", nlohmann::json::object()}})}});
  rules.push_back(rule("careful, precise research agent",
                       calls({{"internal_search", {{"queries", {"defrost cycle"}}}}})));
  rules.push_back(
    rule("finished its research", {{"text", "Defrost cycles reverse the refrigerant flow [1]."}}));
  rules.push_back(
    rule("You write the final answer", {{"text", "Defrosting reverses the cycle [1]."}}));
  REQUIRE_FALSE(server.script(rules));
  auto res = quarry({"research", "How does defrosting work?", "--no-clarify", "--json"},
                    {{"OPENAI_API_KEY", "test-key"},
                     {"OPENAI_BASE_URL", server.base_url_openai()},
                     {"OPENAI_MODEL", "fake-model"}});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("OpenAI (fake-model)") != std::string::npos);
  std::vector<nlohmann::json> packets;
  std::istringstream in{res.out};
  for (std::string line; std::getline(in, line);)
    packets.push_back(nlohmann::json::parse(line));
  REQUIRE(packets.size() > 10);
  for (size_t i = 0; i < packets.size(); ++i)
    CHECK(packets[i]["seq"] == i + 1);
  CHECK(packets.back()["obj"]["type"] == "stop");
  bool cited = false;
  for (const auto& p : packets)
    if (p["obj"]["type"] == "citation_info")
      cited = true;
  CHECK(cited);
  // The request carried the key and the model.
  auto reqs = server.requests();
  REQUIRE_FALSE(reqs.empty());
  CHECK(reqs[0].header("authorization") == std::optional<std::string>{"Bearer test-key"});
  CHECK(reqs[0].body["model"] == "fake-model");
}

TEST_CASE_FIXTURE(research_fixture, "research exits 3 with the questions when "
                                    "clarification is needed") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({rule("clarification step", {{"text", "1. Which climate zone?"}})})));
  auto res = quarry({"research", "heat pumps?"},
                    {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  CHECK(res.exit_code == 3);
  CHECK(res.out.find("1. Which climate zone?") != std::string::npos);
  CHECK(res.err.find("needs clarification") != std::string::npos);
  // The hint says how to pass the answers.
  CHECK(res.err.find("--answer \"...\"") != std::string::npos);
  CHECK(res.err.find("--answers FILE") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research with --answer or --answers skips "
                                    "clarification and gives the model the answers") {
  auto answers_file = home.write("answers.txt", "Budget: low\n");
  for (auto args : std::vector<std::vector<std::string>>{
         {"--answer", "Nordic climate", "--answer", "Budget: low"},
         {"--answer", "Nordic climate", "--answers", answers_file}}) {
    test::fake_llm_server server;
    REQUIRE_FALSE(server.script(researched(nlohmann::json::array(
      {rule("clarification step", {{"text", "1. Which climate zone?"}}),
       rule(plan_marker, {{"text", "1. One step"}}),
       rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})),
       rule(final_marker, {{"text", "A report [1]."}})}))));
    std::vector<std::string> argv{"research", "heat pumps?"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto res = quarry(argv,
                      {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
    CAPTURE(res.err);
    CHECK(res.exit_code == 0);
    CHECK(res.out.find("# heat pumps?\n") == 0);
    CHECK(requests_with(server, "clarification step") == 0);
    auto plans = requests_of(server, plan_marker);
    REQUIRE(plans.size() == 1);
    auto sent = plans[0].dump();
    CHECK(sent.find("Clarifications from the user:") != std::string::npos);
    CHECK(sent.find("Nordic climate") != std::string::npos);
    CHECK(sent.find("Budget: low") != std::string::npos);
  }
  auto missing = quarry({"research", "q", "--answers", home.file("absent.txt")});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("--answers: no such file") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research --answers refuses FIFOs, devices and "
                                    "huge files, and repairs bad bytes") {
  // A FIFO is never opened (it would wait for a writer), a device never read.
  auto fifo = home.file("answers.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const auto& path : {fifo, std::string{"/dev/zero"}}) {
    auto res = quarry({"research", "q", "--answers", path});
    CAPTURE(res.err);
    CHECK(res.exit_code == 2);
    CHECK(res.err.find("--answers: is ") != std::string::npos);
  }
  auto huge = home.write("huge.txt", std::string((1 << 20) + 1, 'a'));
  auto big = quarry({"research", "q", "--answers", huge});
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("more than 1 MB of answers") != std::string::npos);
  // The same from standard input, as one endless line.
  test::process_options piped;
  piped.env = test::isolated_quarry_env(home.path());
  piped.input = std::string(3 << 20, 'a');
  auto endless = test::run_process({QUARRY_EXE, "research", "q", "--answers", "-"}, piped);
  CHECK(endless.exit_code == 2);
  CHECK(endless.err.find("more than 1 MB of answers") != std::string::npos);
  // Bytes that are not UTF-8 reach the model as U+FFFD, in a valid request.
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(researched(nlohmann::json::array(
    {rule(plan_marker, {{"text", "1. One step"}}),
     rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})),
     rule(final_marker, {{"text", "A report [1]."}})}))));
  auto bad = home.write("bad.txt", "cold \xff\xfe climate");
  auto res = quarry({"research", "heat pumps?", "--answers", bad},
                    {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  CAPTURE(res.err);
  CHECK(res.exit_code == 0);
  auto plans = requests_of(server, plan_marker);
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].dump().find("cold \xef\xbf\xbd\xef\xbf\xbd climate") != std::string::npos);
  // Answers from standard input (a research of its own: the script again).
  REQUIRE_FALSE(server.script(researched(nlohmann::json::array(
    {rule(plan_marker, {{"text", "1. One step"}}),
     rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})),
     rule(final_marker, {{"text", "A report [1]."}})}))));
  test::process_options stdin_opts;
  stdin_opts.env = test::isolated_quarry_env(home.path());
  stdin_opts.env["OPENAI_API_KEY"] = "k";
  stdin_opts.env["OPENAI_BASE_URL"] = server.base_url_openai();
  stdin_opts.input = "Nordic climate\n";
  auto from_stdin = test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "research",
                                       "heat pumps?", "--answers", "-"},
                                      stdin_opts);
  CAPTURE(from_stdin.err);
  CHECK(from_stdin.exit_code == 0);
  auto again = requests_of(server, plan_marker);
  REQUIRE(again.size() == 2);
  CHECK(again[1].dump().find("Nordic climate") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research rejects bad input before doing "
                                    "anything") {
  home.write("keep.md", "existing report\n");
  REQUIRE(::symlink("gone/report.md", home.file("dangling.md").c_str()) == 0);
  struct bad {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<bad> cases = {
    {{"research", "   "}, "needs a question"},
    {{"research", "q", "--deadline", "soon"}, "--deadline"},
    {{"research", "q", "--deadline", "0s"}, "--deadline"},
    {{"research", "q", "--max-agents", "17"}, "--max-agents"},
    {{"research", "q", "--corpus", home.file("absent")}, "is not a folder"},
    {{"research", "q", "--out", home.file("absent/report.md")}, "cannot write"},
    {{"research", "q", "--html", home.path()}, "it is a folder"},
    {{"research", "q", "--out", home.file("dangling.md")}, "which does not exist"},
    {{"--set", "research.max_parallel_agents=99", "research", "q"}, "research.max_parallel_agents"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    auto res = quarry(c.args);
    CHECK(res.exit_code == 2);
    CHECK(res.err.find(c.message) != std::string::npos);
  }
  CHECK(slurp(home.file("keep.md")) == "existing report\n");
  // A model that fails makes the run fail with the reason and exit 1.
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(nlohmann::json::parse(R"([
    {"error": {"status": 401, "body": {"error": {"message": "invalid api key",
     "type": "invalid_request_error"}}}}])")));
  auto failed = quarry({"research", "q", "--no-clarify", "--out", home.file("keep.md")},
                       {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  CHECK(failed.exit_code == 1);
  CHECK(failed.err.find("research failed") != std::string::npos);
  CHECK(slurp(home.file("keep.md")) == "existing report\n");
}

TEST_CASE_FIXTURE(research_fixture, "research writes --out and --html through "
                                    "links and devices, keeping modes") {
  const std::string question = "What is a heat pump?";
  // An existing 0600 report stays 0600; a link stays a link; /dev/null stays
  // a device (the run is as root in CI: replacing it would break the machine).
  auto private_md = home.write("private.md", "old\n");
  REQUIRE(::chmod(private_md.c_str(), 0600) == 0);
  auto target = home.write("real/report.html", "old\n");
  auto link = home.file("link.html");
  REQUIRE(::symlink("real/report.html", link.c_str()) == 0);
  auto res = quarry({"research", question, "--no-clarify", "--out", private_md, "--html", link});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat(private_md.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(slurp(private_md) == res.out);
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  auto html = slurp(target);
  CHECK(html.find("<!DOCTYPE html>") == 0);
  // Local sources: every citation links to the Sources list, none to "".
  CHECK(html.find("href=\"\"") == std::string::npos);
  CHECK(html.find("href=\"#source-1\"") != std::string::npos);
  CHECK(html.find("<li id=\"source-1\"") != std::string::npos);
  CHECK(html.find("/examples/corpus/") != std::string::npos);
  auto dev = quarry({"research", question, "--no-clarify", "--out", "/dev/null"});
  CHECK(dev.exit_code == 0);
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE_FIXTURE(research_fixture, "research sends a search backend only the "
                                    "queries the agents wrote") {
  // A SearXNG server that records every query it is sent.
  test::http_server search;
  std::mutex mtx;
  std::vector<std::string> queries;
  search.route("GET", "/search", [&](const test::request& req) {
    auto q = req.param("q").value_or("");
    {
      std::lock_guard<std::mutex> guard{mtx};
      queries.push_back(q);
    }
    nlohmann::json results = nlohmann::json::array();
    for (int i = 0; i < 3; ++i)
      results.push_back(
        {{"url", "https://example.com/" + std::to_string(queries.size()) + "/" + std::to_string(i)},
         {"title", "Heat pumps in cold weather " + std::to_string(i)},
         {"content", "Heat pump efficiency falls as the outdoor air gets colder, "
                     "and defrost cycles melt ice on the outdoor coil. Running "
                     "costs depend on electricity and gas prices."}});
    return test::response_plan::text(200, nlohmann::json{{"results", results}}.dump(),
                                     "application/json");
  });
  // clang-format off
  auto cfg = home.write("quarry.yaml", "tools:\n"
                                       "  web_search:\n"
                                       "    plugin: searxng\n"
                                       "    base_url: " + search.url("") + "\n"
                                       "research:\n"
                                       "  max_parallel_agents: 1\n");
  // clang-format on
  auto res = quarry({"--config", cfg, "research", "--no-clarify", "--json",
                     "Why does a heat pump's efficiency drop in cold weather, how "
                     "do defrost cycles work, and how do running costs compare "
                     "with a gas boiler?"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  std::lock_guard<std::mutex> guard{mtx};
  // Agents over several cycles (one at a time): later ones had a digest of
  // earlier findings, which must stay inside the model requests.
  std::set<int> agent_turns;
  std::istringstream lines{res.out};
  for (std::string line; std::getline(lines, line);) {
    auto p = nlohmann::json::parse(line);
    if (p["obj"]["type"] == "research_agent_start")
      agent_turns.insert(p["placement"]["turn_index"].get<int>());
  }
  CHECK(agent_turns.size() >= 2);
  CHECK(queries.size() >= 3);
  for (const auto& q : queries) {
    CAPTURE(q);
    CHECK_FALSE(q.empty());
    CHECK(q.size() <= 400);
    CHECK(q.find("Earlier research agents") == std::string::npos);
    CHECK(q.find("build on it") == std::string::npos);
    CHECK(q.find("Heat pump efficiency falls as the outdoor air") == std::string::npos);
  }
}

TEST_CASE_FIXTURE(research_fixture, "research from the environment alone: OLLAMA_HOST and "
                                    "OLLAMA_MODEL pick the model, SEARXNG_URL the web search; "
                                    "EXA_API_KEY and SERPER_API_KEY add theirs") {
  test::http_server search;
  std::atomic<int> searched{0};
  search.route("GET", "/search", [&](const test::request&) {
    ++searched;
    nlohmann::json results = nlohmann::json::array(
      {{{"url", "https://heat.example/defrost"},
        {"title", "Defrost cycles"},
        {"content", "Defrost cycles melt the ice on the outdoor coil of a heat pump."}}});
    return test::response_plan::text(200, nlohmann::json{{"results", results}}.dump(),
                                     "application/json");
  });
  test::fake_llm_server ollama;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Defrost"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "How defrost works."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(report_after_search());
  rules.push_back(
    rule(agent_marker, calls({{"web_search", {{"queries", {"heat pump defrost"}}}}})));
  rules.push_back(rule(agent_report_marker, {{"text", "Defrost cycles melt the ice [1]."}}));
  rules.push_back(rule(final_marker, {{"text", "## Defrost\n\nDefrost cycles melt the ice [1]."}}));
  REQUIRE_FALSE(ollama.script(rules));
  // As Ollama's own client reads OLLAMA_HOST: host and port, no scheme.
  auto host = "127.0.0.1:" + std::to_string(ollama.port());
  auto res = quarry(
    {"research", "How does a heat pump defrost?", "--json", "--no-clarify", "--no-verify"},
    {{"OLLAMA_HOST", host}, {"OLLAMA_MODEL", "qwen3:8b"}, {"SEARXNG_URL", search.url("")}});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(searched.load() >= 1);
  auto requests = ollama.requests();
  REQUIRE_FALSE(requests.empty());
  for (const auto& r : requests) {
    CAPTURE(r.path);
    CHECK(r.path == "/v1/chat/completions");
    CHECK(r.body["model"] == "qwen3:8b");
  }
  std::string report;
  std::istringstream lines{res.out};
  for (std::string line; std::getline(lines, line);) {
    auto p = nlohmann::json::parse(line);
    if (p["obj"]["type"] == "message_delta")
      report += p["obj"]["content"].get<std::string>();
  }
  CHECK(report.find("[[1]](https://heat.example/defrost)") != std::string::npos);
  // The keyed search services are shown by `config show`, keys hidden.
  auto exa = quarry({"config", "show"}, {{"EXA_API_KEY", "exa-secret-123456"}});
  CAPTURE(exa.out);
  CHECK(exa.exit_code == 0);
  CHECK(exa.out.find("plugin: exa") != std::string::npos);
  CHECK(exa.out.find("exa-secret-123456") == std::string::npos);
  auto serper = quarry({"config", "show"}, {{"SERPER_API_KEY", "serper-secret-123456"}});
  CAPTURE(serper.out);
  CHECK(serper.exit_code == 0);
  CHECK(serper.out.find("plugin: serper") != std::string::npos);
  CHECK(serper.out.find("serper-secret-123456") == std::string::npos);
}

// -- the orchestrator scenarios through `quarry research --json` ---------------

namespace {

struct scripted_run {
  test::process_result res;
  std::vector<nlohmann::json> packets;

  size_t count(const std::string& type) const {
    size_t n = 0;
    for (const auto& p : packets)
      if (p["obj"]["type"] == type)
        ++n;
    return n;
  }
};

// Runs `quarry research --json` with the OpenAI provider pointed at `server`
// (the example corpus is the only tool).
scripted_run run_scripted(research_fixture& fx, test::fake_llm_server& server,
                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"research", "How do heat pumps cope with cold weather?", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  scripted_run out;
  out.res = fx.quarry(args,
                      {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  std::istringstream in{out.res.out};
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    out.packets.push_back(std::move(j));
  }
  return out;
}

std::vector<std::string> tool_results(const nlohmann::json& request) {
  std::vector<std::string> out;
  for (const auto& m : request["messages"])
    if (m["role"] == "tool")
      out.push_back(m["content"].get<std::string>());
  return out;
}

} // namespace

TEST_CASE_FIXTURE(research_fixture, "research --json: two parallel agents, a "
                                    "think step and the report") {
  test::fake_llm_server server;
  auto rules = two_agent_script(true);
  REQUIRE_FALSE(server.script(rules));
  auto run = run_scripted(*this, server, {"--no-clarify"});
  CAPTURE(run.res.err);
  REQUIRE(run.res.exit_code == 0);
  CHECK(run.count("top_level_branching") == 1);
  CHECK(run.count("research_agent_start") == 2);
  CHECK(run.count("citation_info") == 2);
  CHECK(run.packets.back()["obj"]["type"] == "stop");
  std::string thought;
  for (const auto& p : run.packets)
    if (p["obj"]["type"] == "reasoning_delta" && p["placement"]["sub_turn_index"].is_null())
      thought += p["obj"]["reasoning"].get<std::string>();
  CHECK(thought == "Both parts are covered now.");
  CHECK(requests_with(server, orchestrator_marker) == 3);
  CHECK(requests_with(server, clarify_marker) == 0);
}

TEST_CASE_FIXTURE(research_fixture, "research --json: a first orchestrator "
                                    "turn without tool calls is retried, then "
                                    "fails clearly") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(
    nlohmann::json::array({rule(plan_marker, {{"text", "1. One step"}}),
                           rule(orchestrator_marker, {{"text", "I would research this."}})})));
  auto run = run_scripted(*this, server, {"--no-clarify"});
  CHECK(run.res.exit_code == 1);
  CHECK(run.res.err.find("failed to generate any research tasks") != std::string::npos);
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  CHECK(orch[1].dump().find("You must call a tool now") != std::string::npos);
  CHECK(run.count("error") == 1);
}

TEST_CASE_FIXTURE(research_fixture, "research --json: an agent whose model "
                                    "fails gets a synthetic result, and a run that "
                                    "read nothing fails with the reason") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Research defrost."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(
    {{"match", {{"system_contains", agent_marker}}},
     {"error",
      {{"status", 400},
       {"body",
        {{"error", {{"message", "agent model broke"}, {"type", "invalid_request_error"}}}}}}}});
  rules.push_back(rule(final_marker, {{"text", "Nothing could be researched."}}));
  REQUIRE_FALSE(server.script(rules));
  auto run = run_scripted(*this, server, {"--no-clarify"});
  CAPTURE(run.res.err);
  // Its only agent failed, so nothing was read: exit 1 with the reason.
  REQUIRE(run.res.exit_code == 1);
  CHECK(run.res.err.find("the research read no source") != std::string::npos);
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  auto results = tool_results(orch[1]);
  REQUIRE(results.size() == 1);
  CHECK(results[0].find("The research agent failed") == 0);
  // Numbered from 1, as the live view numbers agents.
  CHECK(run.res.err.find("research agent 1 failed") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research --json: 8 cycles without "
                                    "generate_report make 7 orchestrator calls") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(nlohmann::json::array(
    {rule(plan_marker, {{"text", "1. One step"}}),
     rule(orchestrator_marker, calls({{"think_tool", {{"reasoning", "Thinking."}}}})),
     rule(final_marker, {{"text", "A report without sources."}})})));
  auto run = run_scripted(*this, server, {"--no-clarify"});
  // Only thoughts, no source: the report is written, then refused (exit 1).
  CHECK(run.res.exit_code == 1);
  CHECK(run.res.err.find("the research read no source") != std::string::npos);
  CHECK(requests_with(server, orchestrator_marker) == 7);
  CHECK(requests_with(server, final_marker) == 1);
}

TEST_CASE_FIXTURE(research_fixture, "research --json: five agent calls with "
                                    "--max-agents 1 all run, one at a time") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(parallel_agents_script(5)));
  auto run = run_scripted(*this, server, {"--no-clarify", "--max-agents", "1"});
  REQUIRE(run.res.exit_code == 0);
  CHECK(run.count("research_agent_start") == 5);
  // One at a time: each agent's report is done before the next one starts.
  int running = 0;
  int most = 0;
  for (const auto& p : run.packets) {
    auto type = p["obj"]["type"].get<std::string>();
    if (type == "research_agent_start")
      most = std::max(most, ++running);
    else if (type == "intermediate_report_cited_docs")
      --running;
  }
  CHECK(most == 1);
  auto orch = requests_of(server, orchestrator_marker);
  REQUIRE(orch.size() == 2);
  auto results = tool_results(orch[1]);
  REQUIRE(results.size() == 5);
  for (const auto& r : results) {
    CHECK(r.find("Not run") == std::string::npos);
    CHECK(r.find("failed") == std::string::npos);
  }
}

TEST_CASE_FIXTURE(research_fixture, "research --json: the deadline ends "
                                    "research and the report still comes") {
  test::fake_llm_server server;
  // A fast agent that reads the corpus, and a slow one the deadline stops.
  nlohmann::json slow{{"match",
                       {{"system_contains", agent_marker}, {"last_user_contains", "A slow task."}}},
                      {"respond", calls({{"generate_report", nlohmann::json::object()}})},
                      {"latency_ms", 120000}};
  auto rules = nlohmann::json::array(
    {rule(plan_marker, {{"text", "1. One step"}}),
     rule(orchestrator_marker,
          calls({{"research_agent", {{"task", "A slow task."}}},
                 {"research_agent", {{"task", "Explain defrost cycles."}}}}),
          1),
     rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})), slow});
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Report from what was found."}}));
  REQUIRE_FALSE(server.script(rules));
  auto start = std::chrono::steady_clock::now();
  auto run = run_scripted(*this, server,
                          {"--no-clarify", "--deadline", "2s", "--set",
                           "research.final_report_timeout=10s"});
  auto took = std::chrono::steady_clock::now() - start;
  CAPTURE(run.res.err);
  REQUIRE(run.res.exit_code == 0);
  // The deadline plus the report's budget, far below the agent's 120 s call.
  CHECK(took < std::chrono::seconds{2 + 10 + 20});
  CHECK(run.count("notice") >= 1);
  CHECK(run.count("message_start") == 1);
  CHECK(run.res.err.find("the research deadline was reached") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research on a terminal asks the "
                                    "clarifying questions and continues") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(clarify_marker, {{"text", "1. Which climate zone?"}}, 1));
  rules.push_back(rule(plan_marker, {{"text", "1. One step"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(rule(final_marker, {{"text", "A report for a cold climate."}}));
  REQUIRE_FALSE(server.script(researched(rules)));
  // `script` gives the command a terminal for stdin and stdout.
  std::string cmd = std::string{"'"} + QUARRY_EXE + "' --plugin-dir '" + QUARRY_PLUGIN_DIR
                    + "' research 'heat pumps?'";
  test::process_options opts;
  opts.env = {{"HOME", home.path()},
              {"XDG_CONFIG_HOME", std::nullopt},
              {"XDG_DATA_HOME", std::nullopt},
              {"QUARRY_CONFIG", std::nullopt},
              {"OPENAI_API_KEY", "k"},
              {"OPENAI_BASE_URL", server.base_url_openai()},
              {"BRAVE_API_KEY", std::nullopt},
              {"TAVILY_API_KEY", std::nullopt},
              {"ANTHROPIC_API_KEY", std::nullopt}};
  opts.input = "Nordic winters\n\n";
  auto res = test::run_process({"script", "-qec", cmd, "/dev/null"}, opts);
  CAPTURE(res.out);
  CAPTURE(res.err);
  CHECK(res.exit_code == 0);
  CHECK(res.out.find("1. Which climate zone?") != std::string::npos);
  CHECK(res.out.find("A report for a cold climate.") != std::string::npos);
  auto plans = requests_of(server, plan_marker);
  REQUIRE(plans.size() == 1);
  auto question = plans[0]["messages"][1]["content"].get<std::string>();
  CHECK(question.find("heat pumps?") == 0);
  CHECK(question.find("Clarifications from the user:\nNordic winters") != std::string::npos);
  CHECK(requests_with(server, clarify_marker) == 1);
}

namespace {

constexpr const char* judge_marker = "You check a research report against its sources";

// Two agents find the example corpus's defrost document ([1]) and its
// cold-climate document ([2]); the report makes a supported claim, an
// unsupported one and one that cites the wrong source.
nlohmann::json verification_script(nlohmann::json judge) {
  auto rules = two_agent_script();
  rules.erase(rules.end() - 1);
  rules.push_back(
    rule(final_marker, {{"text", "During defrost the unit delivers no heat or negative heat [1]. "
                                 "Outdoor units are made of cheese and chocolate [2]. Roof snow "
                                 "sliding onto an outdoor unit can damage it, so placement "
                                 "beneath eaves is avoided [1]."}}));
  rules.push_back(judge);
  return rules;
}

std::vector<nlohmann::json> of_type(const scripted_run& run, const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& p : run.packets)
    if (p["obj"]["type"] == type)
      out.push_back(p["obj"]);
  return out;
}

} // namespace

TEST_CASE_FIXTURE(research_fixture, "research --verify: supported, unsupported and re-cited "
                                    "claims, in the packets and the delivered report") {
  test::fake_llm_server server;
  auto verdicts = R"({"verdicts": [
    {"id": 0, "verdict": "supported", "quote": "during defrost the unit delivers no heat or negative heat"},
    {"id": 1, "verdict": "unsupported", "quote": ""},
    {"id": 2, "verdict": "unsupported", "quote": ""}]})";
  REQUIRE_FALSE(server.script(verification_script(
    rule(judge_marker, {{"tool_calls", {{{"name", "judge_claims"}, {"arguments", verdicts}}}}}))));
  auto out = home.file("report.md");
  auto run = run_scripted(*this, server, {"--no-clarify", "--verify", "--out", out});
  CAPTURE(run.res.err);
  REQUIRE(run.res.exit_code == 0);
  auto claims = of_type(run, "claim_verified");
  REQUIRE(claims.size() == 3);
  CHECK(claims[0]["verdict"] == "supported");
  CHECK(claims[0]["evidence"].get<std::string>().find("no heat or negative heat")
        != std::string::npos);
  CHECK(claims[1]["verdict"] == "unsupported");
  CHECK(claims[1]["recited_to"].is_null());
  // The third claim is in source [2], not in the [1] it cites.
  CHECK(claims[2]["recited_to"] == 2);
  auto summary = of_type(run, "verification_summary");
  REQUIRE(summary.size() == 1);
  CHECK(summary[0]["claims"] == 3);
  // Supported as it was written, and supported once re-cited.
  CHECK(summary[0]["supported"] == 2);
  CHECK(summary[0]["recited"] == 1);
  CHECK(summary[0]["unverified"] == 0);
  // The packets come before the end of the stream.
  CHECK(run.packets.back()["obj"]["type"] == "stop");
  auto report = slurp(out);
  CAPTURE(report);
  CHECK(report.find("## Verification") != std::string::npos);
  auto cheese = report.find("cheese and chocolate");
  REQUIRE(cheese != std::string::npos);
  CHECK(report.find("*(unverified)*", cheese) < report.find("Roof snow"));
  // Re-cited: the sentence now cites the cold-climate document.
  std::string recited = "placement beneath eaves is avoided";
  auto modern = report.find(recited);
  REQUIRE(modern != std::string::npos);
  CHECK(report.compare(modern + recited.size(), 14, " [[2]](file://") == 0);
  // One batch, judged by the model.
  CHECK(requests_with(server, judge_marker) == 1);
}

TEST_CASE_FIXTURE(research_fixture, "research --verify judges a claim against the page the "
                                    "agent read, not its snippet; the claims are stored") {
  // The search engine's snippet lacks the fact; the page holds it.
  const std::string fact = "A ground source heat pump keeps a seasonal COP of 4.2 because the "
                           "ground stays near 10 C all year";
  test::http_server web;
  web.route("GET", "/gshp", [&](const test::request&) {
    return test::response_plan::text(
      200,
      "<html><head><title>Ground source heat pumps</title></head><body><article>"
      "<h1>Ground source heat pumps</h1><p>Ground source heat pumps use buried loops of pipe. "
        + fact + ". Drilling the boreholes is most of the cost.</p></article></body></html>",
      "text/html; charset=utf-8");
  });
  web.route("GET", "/search", [&](const test::request&) {
    nlohmann::json results = nlohmann::json::array(
      {{{"url", web.url("/gshp")},
        {"title", "Ground source heat pumps"},
        {"content", "Ground source heat pumps use buried loops of pipe."}},
       {{"url", web.url("/never-opened")},
        {"title", "Heat pump running costs"},
        {"content", "Heat pump running costs depend on electricity prices."}}});
    return test::response_plan::text(200, nlohmann::json{{"results", results}}.dump(),
                                     "application/json");
  });
  // clang-format off
  auto cfg = home.write("quarry.yaml", "tools:\n"
                                       "  web_search:\n"
                                       "    plugin: searxng\n"
                                       "    base_url: " + web.url("") + "\n"
                                       "  open_url:\n"
                                       "    plugin: open_url\n"
                                       "    allow: [\"127.0.0.1\"]\n");
  // clang-format on
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Ground source heat pumps"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Ground source heat pump COP."}}}}), 1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  nlohmann::json after_read{
    {"match", {{"system_contains", agent_marker}, {"message_contains", "seasonal COP of 4.2"}}},
    {"respond", calls({{"generate_report", nlohmann::json::object()}})}};
  nlohmann::json after_search{
    {"match", {{"system_contains", agent_marker}, {"message_contains", "\"document\""}}},
    {"respond", calls({{"open_url", {{"urls", {web.url("/gshp")}}}}})}};
  rules.push_back(after_read);
  rules.push_back(after_search);
  rules.push_back(
    rule(agent_marker, calls({{"web_search", {{"queries", {"ground source COP"}}}}})));
  rules.push_back(rule(agent_report_marker, {{"text", fact
                                                        + " [1]. Running costs depend on "
                                                          "electricity prices [2]."}}));
  rules.push_back(rule(final_marker, {{"text", fact
                                                 + " [1]. Heat pump running costs depend on "
                                                   "electricity prices [2]."}}));
  auto verdicts = nlohmann::json{
    {"verdicts",
     {{{"id", 0}, {"verdict", "supported"}, {"quote", "keeps a seasonal COP of 4.2"}},
      {{"id", 1}, {"verdict", "supported"}, {"quote", "depend on electricity prices"}}}}};
  rules.push_back(rule(
    judge_marker, {{"tool_calls", {{{"name", "judge_claims"}, {"arguments", verdicts.dump()}}}}}));
  REQUIRE_FALSE(server.script(rules));
  auto out = home.file("report.md");
  auto res = quarry({"--config", cfg, "research", "What COP does a ground source heat pump keep?",
                     "--json", "--no-clarify", "--verify", "--out", out},
                    {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  std::string session;
  std::vector<nlohmann::json> claims;
  std::istringstream lines{res.out};
  for (std::string line; std::getline(lines, line);) {
    auto p = nlohmann::json::parse(line);
    session = p["session"].get<std::string>();
    if (p["obj"]["type"] == "claim_verified")
      claims.push_back(p["obj"]);
  }
  REQUIRE(claims.size() == 2);
  // The read page holds the fact: supported, by the model, quoting the page.
  CHECK(claims[0]["verdict"] == "supported");
  CHECK(claims[0]["judge"] == "model");
  CHECK(claims[0]["snippet_only"] == false);
  CHECK(claims[0]["evidence"].get<std::string>().find("seasonal COP of 4.2") != std::string::npos);
  // The result never opened is judged by its snippet, and says so.
  CHECK(claims[1]["snippet_only"] == true);
  auto report = slurp(out);
  CAPTURE(report);
  CHECK(report.find("judged against a search snippet only") != std::string::npos);
  CHECK(report.find("(snippet only)") != std::string::npos); // in the Sources list

  // The store keeps the claims with their ranges and evidence.
  auto shown = quarry({"sessions", "show", session, "--claims", "--json"});
  CAPTURE(shown.err);
  REQUIRE(shown.exit_code == 0);
  auto j = nlohmann::json::parse(shown.out);
  REQUIRE(j["claims"].size() == 2);
  CHECK(j["summary"]["supported"] == 2);
  CHECK(j["summary"]["snippet_only"] == 1);
  const auto& c0 = j["claims"][0];
  CHECK(c0["verdict"] == "supported");
  CHECK(c0["document_id"].get<std::string>().find("/gshp") != std::string::npos);
  // Its range in the stored report is the claim; its evidence range is in
  // the stored page text.
  auto md = quarry({"sessions", "show", session, "--json"});
  REQUIRE(md.exit_code == 0);
  auto body = nlohmann::json::parse(md.out)["report"].get<std::string>();
  auto rb = c0["report_begin"].get<size_t>();
  auto re = c0["report_end"].get<size_t>();
  REQUIRE(re <= body.size());
  CHECK(body.substr(rb, re - rb).rfind("A ground source heat pump keeps", 0) == 0);
  store::open_options ro;
  ro.read_only = true;
  auto opened = store::store::open(home.path() + "/.local/share/quarry/quarry.db", ro);
  REQUIRE(std::holds_alternative<std::unique_ptr<store::store>>(opened));
  auto docs = test::read_ok(std::get<std::unique_ptr<store::store>>(opened)->documents(session));
  auto page = std::find_if(docs.begin(), docs.end(), [](const auto& d) {
    return d.document_id.find("/gshp") != std::string::npos;
  });
  REQUIRE(page != docs.end());
  CHECK_FALSE(page->snippet_only);
  auto eb = c0["evidence_begin"].get<size_t>();
  auto ee = c0["evidence_end"].get<size_t>();
  REQUIRE(ee <= page->text.size());
  CHECK(page->text.substr(eb, ee - eb).find("seasonal COP of 4.2") != std::string::npos);
  // People read them too, and export takes them along.
  auto people = quarry({"sessions", "show", session, "--claims"});
  REQUIRE(people.exit_code == 0);
  CHECK(people.out.find("supported (model), evidence [1]") != std::string::npos);
  CHECK(people.out.find("snippet only") != std::string::npos);
  auto exported = quarry({"sessions", "export", session, "--format", "claims"});
  REQUIRE(exported.exit_code == 0);
  std::istringstream claim_lines{exported.out};
  size_t n = 0;
  for (std::string line; std::getline(claim_lines, line); ++n)
    CHECK(nlohmann::json::parse(line)["id"] == n);
  CHECK(n == 2);
}

TEST_CASE_FIXTURE(research_fixture, "research --verify: a judge slower than the deadline "
                                    "leaves the claims unverified and the report comes") {
  test::fake_llm_server server;
  auto slow = rule(judge_marker, {{"text", "never in time"}});
  slow["latency_ms"] = 120000;
  REQUIRE_FALSE(server.script(verification_script(slow)));
  auto out = home.file("report.md");
  auto start = std::chrono::steady_clock::now();
  auto run = run_scripted(*this, server,
                          {"--no-clarify", "--verify", "--out", out, "--deadline", "3s", "--set",
                           "research.final_report_timeout=10s"});
  auto took = std::chrono::steady_clock::now() - start;
  CAPTURE(run.res.err);
  REQUIRE(run.res.exit_code == 0);
  CHECK(took < std::chrono::seconds{3 + 10 + 20});
  auto summary = of_type(run, "verification_summary");
  REQUIRE(summary.size() == 1);
  CHECK(summary[0]["claims"] == 3);
  CHECK(summary[0]["unverified"] == 3);
  auto report = slurp(out);
  CHECK(report.find("cheese and chocolate") != std::string::npos);
  CHECK(report.find("## Verification") != std::string::npos);
  CHECK(report.find("unverified") != std::string::npos);
  CHECK(run.packets.back()["obj"]["type"] == "stop");
}

TEST_CASE_FIXTURE(research_fixture, "research --no-verify asks no judge, and --verify with "
                                    "--no-verify is refused") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(verification_script(rule(judge_marker, {{"text", "no"}}))));
  auto run = run_scripted(*this, server, {"--no-clarify", "--no-verify"});
  CAPTURE(run.res.err);
  REQUIRE(run.res.exit_code == 0);
  CHECK(run.count("claim_verified") == 0);
  CHECK(run.count("verification_summary") == 0);
  CHECK(requests_with(server, judge_marker) == 0);
  auto both = quarry({"research", "Anything?", "--verify", "--no-verify"});
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--verify and --no-verify exclude each other") != std::string::npos);
  auto bad = quarry({"research", "Anything?", "--set", "research.verify=sometimes"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("research.verify") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research --strategy reflective works offline: the plan "
                                    "as a checklist, reflections, and a cited report") {
  auto res = quarry({"research",
                     "Why does a heat pump's efficiency drop in cold weather, and what do "
                     "manufacturers do about it?",
                     "--strategy", "reflective", "--depth", "medium"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.out.find("## Sources") != std::string::npos);
  CHECK(res.out.find("[[1]](file://") != std::string::npos);
  // The progress lines (stderr is not a terminal): the checklist and the
  // reflector's decisions.
  CHECK(res.err.find("plan:\n[") != std::string::npos);
  CHECK(res.err.find("] s1.1 ") != std::string::npos);
  CHECK(res.err.find("reflection after s1.1: ") != std::string::npos);
  CHECK(res.err.find("depth medium") != std::string::npos);
  // Medium depth has at least three steps.
  CHECK(res.err.find("step s1.3 completed") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research --depth or --mode selects the reflective strategy, "
                                    "and the orchestrator refuses them") {
  auto res = quarry({"research", "Why does a heat pump's efficiency drop in cold weather?",
                     "--depth", "light", "--no-clarify"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("quarry: --depth selects the reflective strategy") != std::string::npos);
  CHECK(res.err.find("plan:\n[") != std::string::npos); // the reflective checklist
  CHECK(res.err.find("depth light") != std::string::npos);
  for (auto flag : {"--mode", "--depth"}) {
    auto refused = quarry({"research", "Anything?", "--strategy", "orchestrator", flag,
                           std::string{flag} == "--mode" ? "simple" : "light"});
    CAPTURE(refused.err);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find(std::string{"quarry: --"} + (flag + 2)
                           + ": an option of the reflective strategy")
          != std::string::npos);
  }
}

TEST_CASE_FIXTURE(research_fixture, "research refuses an unknown strategy, mode or depth") {
  for (auto [flag, value, says] :
       {std::tuple{"--strategy", "magic", "--strategy: not orchestrator or reflective: 'magic'"},
        std::tuple{"--mode", "quick", "--mode: not simple, web_search or deep_research"},
        std::tuple{"--depth", "deep", "--depth: not auto, light, medium or extended"}}) {
    auto res = quarry({"research", "Anything?", flag, value});
    CAPTURE(res.err);
    CHECK(res.exit_code == 2);
    CHECK(res.err.find(says) != std::string::npos);
  }
  auto bad = quarry({"research", "Anything?", "--set", "research.strategy=magic"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("research.strategy") != std::string::npos);
}

} // namespace research_cli_test
