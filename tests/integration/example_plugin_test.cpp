// The out-of-tree example plugin: built against a staged SDK install only,
// listed by `quarry plugins`, and run against a local search server.

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace example_plugin_test {

using namespace quarry;

namespace {

test::process_result run(std::vector<std::string> args) {
  test::process_options opts;
  opts.timeout = std::chrono::minutes{5};
  return test::run_process(args, opts);
}

} // namespace

TEST_CASE("example plugin builds out of tree against the installed SDK and runs") {
  test::temp_dir tmp;
  auto stage = tmp.file("stage");
  auto build = tmp.file("example-build");

  // 1. Stage the SDK exactly as `cmake --install` would install it.
  auto install = run({QUARRY_CMAKE_COMMAND, "--install", QUARRY_BINARY_DIR, "--prefix", stage,
                      "--component", "sdk"});
  INFO(install.out, install.err);
  REQUIRE(install.exit_code == 0);
  CHECK(std::filesystem::exists(stage + "/include/quarry/sdk/plugin.hpp"));
  // No CAF and no Boost in the installed headers.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(stage + "/include")) {
    if (!entry.is_regular_file())
      continue;
    auto text = test::read_file(entry.path().string());
    CHECK_MESSAGE(text.find("#include <caf/") == std::string::npos, entry.path().string());
    CHECK_MESSAGE(text.find("#include <boost/") == std::string::npos, entry.path().string());
  }

  // 2. Configure and build the example with nothing but the staged prefix.
  auto configure = run({QUARRY_CMAKE_COMMAND, "-S",
                        std::string{QUARRY_SOURCE_DIR} + "/examples/custom_search_plugin", "-B",
                        build, "-DCMAKE_PREFIX_PATH=" + stage,
                        "-DCMAKE_CXX_COMPILER=" QUARRY_CXX_COMPILER, "-DCMAKE_BUILD_TYPE=Release"});
  INFO(configure.out, configure.err);
  REQUIRE(configure.exit_code == 0);
  auto compile = run({QUARRY_CMAKE_COMMAND, "--build", build});
  INFO(compile.out, compile.err);
  REQUIRE(compile.exit_code == 0);
  auto plugin_file = build + "/quarry_example_search.so";
  REQUIRE(std::filesystem::exists(plugin_file));

  // 3. The real binary lists it as a working plugin.
  auto listed = run({QUARRY_EXE, "plugins", "--json", "--plugin-dir", build});
  INFO(listed.err);
  REQUIRE(listed.exit_code == 0);
  auto j = nlohmann::json::parse(listed.out);
  auto found = false;
  for (const auto& row : j["plugins"]) {
    if (row["file"] != plugin_file)
      continue;
    found = true;
    CHECK(row["status"] == "ok");
    CHECK(row["name"] == "example_search");
    CHECK(row["kind"] == "tool");
    CHECK(row["tool_kind"] == "web_search"); // QUARRY_TOOL_KIND
    CHECK(row["version"] == "1.0.0");
  }
  CHECK(found);

  // 4. Loaded by the host, it searches a local SearXNG-style server.
  test::http_server server;
  std::vector<std::string> seen_queries;
  std::mutex mtx;
  server.route("GET", "/search", [&](const test::request& req) {
    auto q = req.param("q").value_or("");
    {
      std::lock_guard<std::mutex> guard{mtx};
      seen_queries.push_back(q);
    }
    nlohmann::json body{
      {"query", q},
      {"results",
       {{{"url", "https://example.org/" + q},
         {"title", "About " + q},
         {"content", "Snippet on " + q},
         {"publishedDate", "2024-05-01T00:00:00"}},
        {{"url", "https://example.org/shared"}, {"title", "Shared"}, {"content", "in both"}}}}};
    return test::response_plan::json(200, body.dump());
  });
  // 4a. `config check` treats it as the web search it says it is: one search
  // through the plugin, like the backends that come with Quarry.
  {
    auto config = tmp.file("quarry.yaml");
    {
      std::ofstream out{config};
      out << "llm:\n  providers:\n    offline:\n      plugin: extractive\n"
          << "tools:\n  custom_search:\n    plugin: example_search\n"
          << "    endpoint: " << server.url("/search") << "\n"
          << "    limits: {timeout: 30s}\n";
    }
    test::process_options opts;
    opts.timeout = std::chrono::minutes{2};
    opts.env = test::isolated_quarry_env(tmp.path());
    auto checked = test::run_process(
      {QUARRY_EXE, "--config", config, "--plugin-dir", build, "config", "check"}, opts);
    INFO(checked.out, checked.err);
    CHECK(checked.exit_code == 0);
    CHECK(checked.out.find("tools.custom_search (example_search): reachable") != std::string::npos);
    std::lock_guard<std::mutex> guard{mtx};
    CHECK(std::count(seen_queries.begin(), seen_queries.end(), "quarry") == 1);
    seen_queries.clear();
  }
  core::settings cfg;
  cfg.runtime.data_dir = tmp.file("data");
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  REQUIRE_FALSE(registry.load_file(plugin_file).has_value());
  // It says it is a web search, so research treats it like the built-in ones.
  CHECK(registry.find("example_search")->tool_kind == sdk::tool_kind::web_search);
  auto bad = registry.make_tool("example_search", {{"endpoint", "ftp://x"}});
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("'endpoint' must be an http or https URL")
        != std::string::npos);
  auto made = registry.make_tool("example_search",
                                 {{"endpoint", server.url("/search")}, {"max_results", 5}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  CHECK(tool->name() == "custom_search");
  std::condition_variable cv;
  std::optional<sdk::tool_result> result;
  tool->run({{"queries", {"caf actors", "boost dll"}}}, [&](sdk::tool_result r) {
    std::lock_guard<std::mutex> guard{mtx};
    result = std::move(r);
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, std::chrono::seconds{20}, [&] { return result.has_value(); }));
  }
  CHECK_FALSE(result->failure.has_value());
  // Two distinct pages plus the shared one, de-duplicated.
  CHECK(result->documents.size() == 3);
  auto text = nlohmann::json::parse(result->llm_text);
  CHECK(text["results"].size() == 3);
  CHECK(text["results"][0]["document"] == 1);
  std::sort(seen_queries.begin(), seen_queries.end());
  CHECK(seen_queries == std::vector<std::string>{"boost dll", "caf actors"});
  services.shutdown();
}

} // namespace example_plugin_test
