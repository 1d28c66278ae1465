// The real `quarry` binary: exit codes and messages of the foundation
// commands (--version, plugins, config show/check) and of bad input.

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace cli_test {

using namespace quarry;

namespace {

std::string test_plugins(const std::string& folder) {
  return std::string{QUARRY_TEST_PLUGIN_DIR} + "/" + folder;
}

/// Runs quarry in a clean environment: no user configuration, HOME in a
/// temporary folder.
struct cli_fixture {
  test::temp_dir home;

  test::process_result quarry(std::vector<std::string> args,
                              std::map<std::string, std::optional<std::string>> env = {}) {
    args.insert(args.begin(), QUARRY_EXE);
    auto opts = test::isolated_quarry_options(home.path(), {env.begin(), env.end()});
    opts.timeout = std::chrono::seconds{60};
    return test::run_process(args, opts);
  }

  nlohmann::json plugins_json(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"plugins", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto res = quarry(args);
    INFO(res.err);
    auto json = nlohmann::json::parse(res.out, nullptr, false);
    REQUIRE_FALSE(json.is_discarded());
    json["exit_code"] = res.exit_code;
    return json;
  }

  const nlohmann::json* row_for_file(const nlohmann::json& j, const std::string& needle) {
    for (const auto& row : j["plugins"])
      if (row["file"].get<std::string>().find(needle) != std::string::npos)
        return &row;
    return nullptr;
  }
};

} // namespace

TEST_CASE_FIXTURE(cli_fixture, "cli prints its version") {
  auto res = quarry({"--version"});
  CHECK(res.exit_code == 0);
  CHECK(res.out.rfind("quarry 0.2.0 (plugin SDK 0.2.0, plugin ABI 4", 0) == 0);
}

TEST_CASE_FIXTURE(cli_fixture, "cli without a command prints help and exits 2") {
  auto res = quarry({});
  CHECK(res.exit_code == 2);
  CHECK(res.out.find("plugins") != std::string::npos);
  CHECK(res.out.find("config") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli rejects unknown commands and options with exit 2") {
  auto a = quarry({"frobnicate"});
  CHECK(a.exit_code == 2);
  CHECK(a.err.find("quarry: ") == 0);
  auto b = quarry({"plugins", "--no-such-flag"});
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("--no-such-flag") != std::string::npos);
  auto c = quarry({"--log-level", "loud", "plugins"});
  CHECK(c.exit_code == 2);
  CHECK(c.err.find("loud") != std::string::npos);
  auto d = quarry({"config"});
  CHECK(d.exit_code == 2);
}

TEST_CASE_FIXTURE(cli_fixture, "cli plugins lists good plugins as JSON") {
  auto j = plugins_json({"--plugin-dir", test_plugins("good")});
  CHECK(j["exit_code"] == 0);
  const auto* echo = row_for_file(j, "quarry_tp_echo.so");
  REQUIRE(echo != nullptr);
  CHECK((*echo)["name"] == "echo");
  CHECK((*echo)["kind"] == "tool");
  CHECK((*echo)["tool_kind"] == "other"); // declares none
  CHECK((*echo)["tool_set"] == false);    // one tool per instance
  CHECK((*echo)["version"] == "1.2.3");
  CHECK((*echo)["status"] == "ok");
  CHECK((*echo)["description"] == "Echoes its input (test plugin)");
  const auto* llm = row_for_file(j, "quarry_tp_echo_llm.so");
  REQUIRE(llm != nullptr);
  CHECK((*llm)["kind"] == "llm");
  CHECK_FALSE(llm->contains("tool_kind"));
  CHECK(j["dirs"][0] == test_plugins("good"));
}

TEST_CASE_FIXTURE(cli_fixture, "cli plugins shows that the mcp plugin offers a set of tools") {
  auto j = plugins_json({"--plugin-dir", QUARRY_PLUGIN_DIR});
  CHECK(j["exit_code"] == 0);
  const auto* mcp = row_for_file(j, "quarry_mcp.so");
  REQUIRE(mcp != nullptr);
  CHECK((*mcp)["name"] == "mcp");
  CHECK((*mcp)["tool_set"] == true); // QUARRY_TOOL_SET
}

TEST_CASE_FIXTURE(cli_fixture, "cli plugins prints a table") {
  auto res = quarry({"plugins", "--plugin-dir", test_plugins("good")});
  CHECK(res.exit_code == 0);
  CHECK(res.out.rfind("NAME", 0) == 0);
  // One row per file; columns are padded to the widest entry.
  auto row = res.out.find("\necho_llm ");
  REQUIRE(row != std::string::npos);
  auto line = res.out.substr(row + 1, res.out.find('\n', row + 1) - row - 1);
  CHECK(line.find(" llm ") != std::string::npos);
  CHECK(line.find(" ok ") != std::string::npos);
  CHECK(line.find("quarry_tp_echo_llm.so") != std::string::npos);
  CHECK(res.out.find("1.2.3") != std::string::npos);
}

TEST_CASE_FIXTURE(
  cli_fixture,
  "cli plugins shows a garbage file and a version-mismatched plugin with their errors") {
  test::temp_dir dir;
  dir.write("garbage.so", "#!/bin/sh\necho not a library\n");
  std::filesystem::copy_file(test_plugins("abi") + "/quarry_tp_abi.so",
                             dir.file("quarry_tp_abi.so"));
  std::filesystem::copy_file(test_plugins("json") + "/quarry_tp_json.so",
                             dir.file("quarry_tp_json.so"));
  auto j = plugins_json({"--plugin-dir", dir.path()});
  // Nothing refused is named in the configuration: still success.
  CHECK(j["exit_code"] == 0);
  const auto* garbage = row_for_file(j, "garbage.so");
  REQUIRE(garbage != nullptr);
  CHECK((*garbage)["status"] == "error");
  CHECK((*garbage)["error"] == "not a shared object (no ELF header)");
  const auto* abi = row_for_file(j, "quarry_tp_abi.so");
  REQUIRE(abi != nullptr);
  CHECK((*abi)["error"] == "plugin ABI version 99, but this host supports plugin ABI version 4");
  const auto* json = row_for_file(j, "quarry_tp_json.so");
  REQUIRE(json != nullptr);
  CHECK((*json)["error"].get<std::string>().find("nlohmann::json 3.9") != std::string::npos);
  // The table shows the same reasons.
  auto table = quarry({"plugins", "--plugin-dir", dir.path()});
  CHECK(table.out.find("not a shared object (no ELF header)") != std::string::npos);
  CHECK(table.out.find("plugin ABI version 99") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli plugins exits 1 when a configured plugin failed to load") {
  test::temp_dir dir;
  auto cfg = dir.write("quarry.yaml", "tools:\n"
                                      "  web_search:\n"
                                      "    plugin: bad_abi\n");
  std::filesystem::copy_file(test_plugins("abi") + "/quarry_tp_abi.so",
                             dir.file("quarry_tp_abi.so"));
  auto res = quarry({"--config", cfg, "plugins", "--plugin-dir", dir.path()});
  CHECK(res.exit_code == 1);
  // The refused file cannot say its name (its descriptor was not trusted),
  // so the configured name is reported as not found.
  CHECK(res.err.find("configured plugin 'bad_abi' (tools.web_search, " + cfg + ":2)")
        != std::string::npos);
  auto ok = quarry({"--config", cfg, "plugins", "--plugin-dir", test_plugins("good"), "--set",
                    "tools.web_search.plugin=echo"});
  CHECK(ok.exit_code == 0);
}

TEST_CASE_FIXTURE(cli_fixture, "cli config check names file, line and key of an unknown key") {
  test::temp_dir dir;
  auto cfg = dir.write("quarry.yaml", "log:\n"
                                      "  level: info\n"
                                      "http:\n"
                                      "  connect_timout: 5s\n");
  auto res = quarry({"--config", cfg, "config", "check"});
  CHECK(res.exit_code == 2);
  CHECK(res.err.find(cfg + ":4: http.connect_timout: ") != std::string::npos);
  CHECK(res.err.find("unknown key") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture,
                  "cli config check accepts a valid file and checks the plugins it names") {
  test::temp_dir dir;
  auto good = dir.write("good.yaml", "tools:\n"
                                     "  echo_tool:\n"
                                     "    plugin: echo\n"
                                     "    prefix: \"> \"\n");
  auto ok = quarry({"--config", good, "--plugin-dir", test_plugins("good"), "config", "check"});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("configuration OK") != std::string::npos);
  auto bad = dir.write("bad.yaml", "tools:\n"
                                   "  search:\n"
                                   "    plugin: throws\n");
  auto res = quarry({"--config", bad, "--plugin-dir", test_plugins("throws"), "config", "check"});
  CHECK(res.exit_code == 2);
  CHECK(res.err.find(bad + ":2: tools.search: ") != std::string::npos);
  CHECK(res.err.find("rejected its configuration: api_key is required") != std::string::npos);
  auto missing = quarry({"--config", good, "config", "check"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("no plugin named 'echo'") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli config show hides secrets") {
  test::temp_dir dir;
  auto cfg = dir.write("quarry.yaml", "llm:\n"
                                      "  default: main\n"
                                      "  providers:\n"
                                      "    main:\n"
                                      "      plugin: echo_llm\n"
                                      "      api_key: \"${QUARRY_TEST_KEY}\"\n"
                                      "      model: m1\n");
  auto res = quarry({"--config", cfg, "config", "show"},
                    {{"QUARRY_TEST_KEY", "sk-very-secret-123"}});
  CHECK(res.exit_code == 0);
  CHECK(res.out.find("sk-very-secret-123") == std::string::npos);
  CHECK(res.err.find("sk-very-secret-123") == std::string::npos);
  CHECK(res.out.find("***") != std::string::npos);
  CHECK(res.out.find("m1") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture,
                  "cli reports a missing config file and bad --set values with exit 2") {
  auto a = quarry({"--config", home.file("nope.yaml"), "plugins"});
  CHECK(a.exit_code == 2);
  CHECK(a.err.find("nope.yaml") != std::string::npos);
  auto b = quarry({"--set", "http.max_redirects=many", "config", "check"});
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("http.max_redirects") != std::string::npos);
  auto c = quarry({"--set", "no-equals-sign", "config", "show"});
  CHECK(c.exit_code == 2);
  auto d = quarry({"--set", "log.level=debug", "config", "show"});
  CHECK(d.exit_code == 0);
  CHECK(d.out.find("debug") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli config show uses embedded defaults without a file") {
  auto res = quarry({"config", "show"});
  CHECK(res.exit_code == 0);
  CHECK(res.out.find("embedded defaults") < res.out.find('\n'));
  CHECK(res.out.find("max_redirects: 10") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli reads QUARRY_CONFIG") {
  test::temp_dir dir;
  auto cfg = dir.write("env.yaml", "log:\n  level: bogus\n");
  auto res = quarry({"config", "check"}, {{"QUARRY_CONFIG", cfg}});
  CHECK(res.exit_code == 2);
  CHECK(res.err.find(cfg + ":2: log.level") != std::string::npos);
}

TEST_CASE_FIXTURE(cli_fixture, "cli logs JSON lines when log.format is json") {
  test::temp_dir dir;
  auto cfg = dir.write("quarry.yaml", "log:\n"
                                      "  format: json\n"
                                      "tools:\n"
                                      "  echo_tool:\n"
                                      "    plugin: echo\n"
                                      "    prefix: \"${QUARRY_TEST_UNSET_VARIABLE}\"\n");
  auto res = quarry({"--config", cfg, "--plugin-dir", test_plugins("good"), "plugins"},
                    {{"QUARRY_TEST_UNSET_VARIABLE", std::nullopt}});
  CHECK(res.exit_code == 0);
  // The unset variable gives a warning, written as one JSON object per line.
  auto first_line = res.err.substr(0, res.err.find('\n'));
  auto j = nlohmann::json::parse(first_line, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["level"] == "warn");
  CHECK(j["msg"].get<std::string>().find("QUARRY_TEST_UNSET_VARIABLE") != std::string::npos);
  CHECK(j.contains("time"));
}

} // namespace cli_test
