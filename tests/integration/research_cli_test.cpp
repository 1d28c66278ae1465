// `quarry research` through the real binary: offline end to end over the
// example corpus (every citation resolves and the cited sentence is in the
// source), JSONL packets with the fake LLM server, clarification exit code,
// report files, and bad input.

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>
#include <sstream>

using namespace quarry;

namespace {

struct research_fixture {
  test::temp_dir home;

  test::process_result quarry(std::vector<std::string> args,
                              std::vector<std::pair<std::string, std::optional<std::string>>>
                                extra_env = {}) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    test::process_options opts;
    opts.env = {{"HOME", home.path()},
                {"XDG_CONFIG_HOME", std::nullopt},
                {"XDG_DATA_HOME", std::nullopt},
                {"QUARRY_CONFIG", std::nullopt},
                {"OPENAI_API_KEY", std::nullopt},
                {"ANTHROPIC_API_KEY", std::nullopt},
                {"BRAVE_API_KEY", std::nullopt},
                {"TAVILY_API_KEY", std::nullopt}};
    for (auto& e : extra_env)
      opts.env[e.first] = e.second;
    return test::run_process(argv, opts);
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

namespace {

nlohmann::json rule(const char* marker, nlohmann::json respond) {
  return {{"match", {{"system_contains", marker}}}, {"respond", respond}};
}

nlohmann::json tool_calls(const char* name, nlohmann::json args) {
  return {{"tool_calls", {{{"name", name}, {"arguments", args}}}}};
}

} // namespace

TEST_CASE_FIXTURE(research_fixture, "research --json streams packets from a "
                                    "real-format LLM server") {
  test::fake_llm_server server;
  auto rules = nlohmann::json::array();
  rules.push_back(rule("You are the planner", {{"text", "1. Cold weather\n2. Defrost"}}));
  rules.push_back({{"match", {{"system_contains", "You are the orchestrator"},
                              {"message_contains", "\"tool\""}}},
                   {"respond", tool_calls("generate_report", nlohmann::json::object())}});
  rules.push_back(rule("You are the orchestrator",
                       tool_calls("research_agent", {{"task", "Explain defrost cycles."}})));
  rules.push_back({{"match", {{"system_contains", "careful, precise research agent"},
                              {"message_contains", "\"document\""}}},
                   {"respond", tool_calls("generate_report", nlohmann::json::object())}});
  rules.push_back(rule("careful, precise research agent",
                       tool_calls("internal_search", {{"queries", {"defrost cycle"}}})));
  rules.push_back(rule("finished its research",
                       {{"text", "Defrost cycles reverse the refrigerant flow [1]."}}));
  rules.push_back(rule("You write the final answer",
                       {{"text", "Defrosting reverses the cycle [1]."}}));
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
  REQUIRE_FALSE(server.script(nlohmann::json::array(
    {rule("clarification step", {{"text", "1. Which climate zone?"}})})));
  auto res = quarry({"research", "heat pumps?"},
                    {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}});
  CHECK(res.exit_code == 3);
  CHECK(res.out.find("1. Which climate zone?") != std::string::npos);
  CHECK(res.err.find("needs clarification") != std::string::npos);
}

TEST_CASE_FIXTURE(research_fixture, "research rejects bad input before doing "
                                    "anything") {
  home.write("keep.md", "existing report\n");
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
    {{"research", "q", "--html", home.path()}, "cannot write"},
    {{"--set", "research.max_parallel_agents=99", "research", "q"},
     "research.max_parallel_agents"},
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
                       {{"OPENAI_API_KEY", "k"},
                        {"OPENAI_BASE_URL", server.base_url_openai()}});
  CHECK(failed.exit_code == 1);
  CHECK(failed.err.find("research failed") != std::string::npos);
  CHECK(slurp(home.file("keep.md")) == "existing report\n");
}
