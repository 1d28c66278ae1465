// Tests of the `internal_search` tool: configuration, the LLM-facing JSON,
// and the real plugin module loaded through the plugin registry.

#include "quarry/corpus/index.hpp"
#include "local_corpus_tool.hpp"

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"
#include "support/run_tool.hpp"
#include "support/test_host.hpp"

#include "quarry/sdk/search.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>

namespace local_corpus_tool_test {

using namespace quarry;
using namespace quarry::plugins::local_corpus;
using namespace quarry::corpus;
namespace fs = std::filesystem;

using test::run_tool;

namespace {

void write_docs(const test::temp_dir& tmp) {
  tmp.write("docs/heat.md", "# Heat pumps\n\nA heat pump moves heat with a refrigerant "
                            "cycle.\n\n## Efficiency\n\nThe coefficient of performance is "
                            "often above three.\n");
  tmp.write("docs/solar.txt", "Solar panels turn sunlight into "
                              "electricity.\n");
}

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

} // namespace

TEST_CASE("local_corpus config") {
  auto cfg = parse_config(nlohmann::json::object(), "/data/plugins/x");
  CHECK(cfg.db == "/data/plugins/x/corpus.db");
  CHECK(cfg.max_results == default_max_results);
  cfg = parse_config({{"db", "my.db"}, {"max_results", 3}}, "");
  CHECK(cfg.db == "my.db");
  CHECK(cfg.max_results == 3);
  CHECK_THROWS_AS(parse_config({{"dbb", "x"}}, "/d"), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"db", 1}}, "/d"), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"max_results", 0}}, "/d"), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"max_results", "5"}}, "/d"), std::invalid_argument);
  // Up to 100 documents a call (a ranking measured at depth 100).
  CHECK(parse_config({{"max_results", 100}}, "/d").max_results == 100);
  CHECK_THROWS_AS(parse_config({{"max_results", 101}}, "/d"), std::invalid_argument);
  // Feedback widens each query unless turned off.
  CHECK(parse_config(nlohmann::json::object(), "/d").feedback);
  CHECK_FALSE(parse_config({{"feedback", false}}, "/d").feedback);
  CHECK_THROWS_AS(parse_config({{"feedback", "yes"}}, "/d"), std::invalid_argument);
  CHECK_THROWS_AS(parse_config(nlohmann::json::object(), ""), std::invalid_argument);
}

TEST_CASE("local_corpus normalises queries") {
  using v = std::vector<std::string>;
  CHECK(normalize_queries({{"queries", "  heat\tpumps \x01"}}) == v{"heat pumps"});
  CHECK(normalize_queries({{"queries", {"a  b", "a b", "", " ", "c"}}}) == v{"a b", "c"});
  CHECK_FALSE(normalize_queries({{"query", "x"}}).has_value());
  // 500 queries from a model: the first ten are searched.
  auto many = nlohmann::json::array();
  for (int i = 0; i < 500; ++i)
    many.push_back("query " + std::to_string(i));
  auto capped = normalize_queries({{"queries", many}});
  REQUIRE(capped.has_value());
  CHECK(capped->size() == sdk::max_search_queries);
  CHECK_FALSE(normalize_queries({{"queries", 5}}).has_value());
}

TEST_CASE("local_corpus internal_search tool through the plugin registry") {
  test::temp_dir tmp;
  write_docs(tmp);
  auto db = tmp.file("index/corpus.db");
  {
    auto opened = corpus_index::open(db);
    REQUIRE_FALSE(opened.failure.has_value());
    auto r = opened.index->update({tmp.file("docs")});
    REQUIRE(r.added == 2);
  }
  core::settings cfg;
  cfg.runtime.data_dir = tmp.file("data");
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  auto err = registry.load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_local_corpus.so");
  REQUIRE_FALSE(err.has_value());
  const auto* info = registry.find("local_corpus");
  REQUIRE(info != nullptr);
  CHECK(info->kind == sdk::plugin_kind::tool);
  auto bad = registry.make_tool("local_corpus", {{"dbfile", "x"}});
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("unknown configuration key 'dbfile'") != std::string::npos);
  auto made = registry.make_tool("local_corpus", {{"db", db}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  CHECK(tool->name() == "internal_search");
  CHECK(tool->description() == "Search connected applications for information.");
  auto params = tool->parameters();
  CHECK(params["required"] == nlohmann::json{"queries"});
  CHECK(params["properties"]["queries"]["type"] == "array");
  SUBCASE("finds the right passage") {
    auto r = run_tool(*tool, {{"queries", {"coefficient of performance", "sunlight electricity"}}});
    REQUIRE_FALSE(r.failure.has_value());
    auto j = nlohmann::json::parse(r.llm_text);
    REQUIRE(j["results"].size() == 2);
    CHECK(j["results"][0]["document"] == 1);
    CHECK(j["results"][0]["title"] == "Heat pumps");
    CHECK(j["results"][0]["content"] == "The coefficient of performance is often above three.");
    auto heat = fs::weakly_canonical(tmp.file("docs/heat.md")).string();
    CHECK(j["results"][0]["url"] == "file://" + heat);
    CHECK(j["results"][1]["document"] == 2);
    CHECK(j["results"][1]["title"] == "solar");
    CHECK(j["results"][0].size() == 4);
    REQUIRE(r.documents.size() == 2);
    CHECK(r.documents[0].kind == sdk::source_kind::internal);
    CHECK(r.documents[0].id.rfind("corpus:", 0) == 0);
    CHECK(r.documents[0].url == "file://" + heat);
    CHECK(r.documents[0].snippet.find("coefficient") != std::string::npos);
    CHECK(r.documents[1].title == "solar");
  }
  SUBCASE("hostile queries give results or none, never errors") {
    auto r = run_tool(*tool, {{"queries", {"\"", "NEAR(", "*", "(((", "-", "heat*", ""}}});
    REQUIRE_FALSE(r.failure.has_value());
    auto j = nlohmann::json::parse(r.llm_text);
    REQUIRE(j["results"].size() == 1);
    CHECK(j["results"][0]["title"] == "Heat pumps");
  }
  SUBCASE("no match") {
    auto r = run_tool(*tool, {{"queries", {"zeppelin"}}});
    REQUIRE_FALSE(r.failure.has_value());
    CHECK(r.llm_text == "{\n  \"results\": []\n}");
    CHECK(r.documents.empty());
  }
  SUBCASE("bad arguments") {
    auto r = run_tool(*tool, {{"urls", {"x"}}});
    REQUIRE(r.failure.has_value());
    CHECK(r.failure->code == sdk::errc::bad_request);
    CHECK(r.llm_text.find("queries") != std::string::npos);
    r = run_tool(*tool, {{"queries", {"", "  "}}});
    REQUIRE(r.failure.has_value());
    CHECK(r.failure->code == sdk::errc::bad_request);
  }
  SUBCASE("default database in the plugin's data folder") {
    auto dflt = registry.make_tool("local_corpus", nlohmann::json::object());
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(dflt));
    auto t = std::get<std::shared_ptr<sdk::tool>>(dflt);
    auto r = run_tool(*t, {{"queries", {"heat"}}});
    REQUIRE_FALSE(r.failure.has_value());
    CHECK(r.llm_text == "{\n  \"results\": []\n}");
    CHECK(fs::exists(tmp.file("data/plugins/local_corpus/corpus.db")));
  }
  SUBCASE("a foreign file as database") {
    auto path = tmp.write("foreign.db", "just some text, not a database\n");
    auto made2 = registry.make_tool("local_corpus", {{"db", path}});
    auto t = std::get<std::shared_ptr<sdk::tool>>(made2);
    auto r = run_tool(*t, {{"queries", {"heat"}}});
    REQUIRE(r.failure.has_value());
    CHECK(r.failure->code == sdk::errc::bad_request);
    CHECK(r.llm_text.find("not a SQLite database") != std::string::npos);
    CHECK(slurp(path) == "just some text, not a database\n");
  }
  tool.reset();
  services.shutdown();
}

TEST_CASE("local_corpus caps the results at max_results") {
  test::temp_dir tmp;
  for (int i = 0; i < 8; ++i)
    tmp.write("docs/d" + std::to_string(i) + ".md",
              "# Doc " + std::to_string(i) + "\n\ncommon word here\n");
  auto opened = corpus_index::open(tmp.file("c.db"));
  REQUIRE(opened.index != nullptr);
  opened.index->update({tmp.file("docs")});
  auto r = search_corpus(*opened.index, {"common", "word"}, 5);
  auto j = nlohmann::json::parse(r.llm_text);
  CHECK(j["results"].size() == 5);
  CHECK(r.documents.size() == 5);
  test::test_host host;
  internal_search_tool tool{host, parse_config({{"db", tmp.file("c.db")}, {"max_results", 3}}, "")};
  auto out = run_tool(tool, {{"queries", "common"}});
  CHECK(nlohmann::json::parse(out.llm_text)["results"].size() == 3);
}

} // namespace local_corpus_tool_test
