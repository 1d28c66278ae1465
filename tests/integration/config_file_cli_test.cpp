// The real `quarry` binary and the files it trusts: a configuration must be a
// regular file (or a link to one) of at most 1 MiB however it is named
// (--config, QUARRY_CONFIG, the default location), refused quickly with exit
// 2 otherwise; a configuration that holds secrets and that others may read
// gives a warning; plugins that others than root and the user could change
// are refused unless plugins.allow_unsafe_permissions is true.

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>

#include <sys/stat.h>
#include <unistd.h>

namespace config_file_cli_test {

using namespace quarry;

namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

struct files_fixture {
  test::temp_dir home;
  test::temp_dir dir;

  /// Runs quarry as a new user would, killed after 20 seconds.
  test::process_result quarry(std::vector<std::string> args,
                              std::map<std::string, std::optional<std::string>> env = {}) {
    args.insert(args.begin(), QUARRY_EXE);
    auto opts = test::isolated_quarry_options(home.path(), {env.begin(), env.end()});
    opts.timeout = std::chrono::seconds{20};
    return test::run_process(args, opts);
  }

  /// A copy of the good echo plugin in `folder` (created with `dir_mode`),
  /// with `file_mode`.
  std::string echo_in(const std::string& folder, mode_t dir_mode, mode_t file_mode) {
    fs::create_directories(folder);
    REQUIRE(::chmod(folder.c_str(), dir_mode) == 0);
    auto file = folder + "/quarry_tp_echo.so";
    fs::copy_file(std::string{QUARRY_TEST_PLUGIN_DIR} + "/good/quarry_tp_echo.so", file);
    REQUIRE(::chmod(file.c_str(), file_mode) == 0);
    return file;
  }

  /// `quarry plugins --json` with `folder` first; the row of the echo copy.
  std::pair<nlohmann::json, test::process_result> echo_row(const std::string& folder,
                                                           std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"plugins", "--json", "--plugin-dir", folder};
    args.insert(args.end(), extra.begin(), extra.end());
    auto res = quarry(args);
    INFO(res.err);
    CHECK(res.exit_code == 0);
    auto j = nlohmann::json::parse(res.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    for (const auto& row : j["plugins"])
      if (row["file"] == folder + "/quarry_tp_echo.so")
        return {row, res};
    FAIL("no row for the echo copy");
    return {};
  }
};

} // namespace

TEST_CASE_FIXTURE(
  files_fixture,
  "a configuration that is not a regular file is refused at once with exit 2, however it is named") {
  auto fifo = dir.file("fifo.yaml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto folder = dir.file("folder.yaml");
  fs::create_directory(folder);
  auto dangling = dir.file("dangling.yaml");
  fs::create_symlink(dir.file("nothing.yaml"), dangling);
  auto loop = dir.file("loop.yaml");
  fs::create_symlink(loop, loop);
  auto big = dir.write("big.yaml", "# " + std::string(1024 * 1024, 'x') + "\n");
  std::map<std::string, std::pair<std::string, std::string>> shapes{
    {"fifo", {fifo, "it is a FIFO"}},
    {"directory", {folder, "it is a directory"}},
    {"device", {"/dev/zero", "it is a character device"}},
    {"dangling link", {dangling, "it is a dangling symbolic link"}},
    {"link loop", {loop, "it is a symbolic link loop"}},
    {"oversized", {big, "it is larger than 1MiB"}},
  };
  auto default_file = home.path() + "/.config/quarry/quarry.yaml";
  fs::create_directories(fs::path{default_file}.parent_path());
  for (const auto& shape_x : shapes) {
    const auto& shape = shape_x.first;
    const auto& x = shape_x.second;
    const auto& path = x.first;
    const auto& what = x.second;
    for (const std::string way : {"--config", "QUARRY_CONFIG", "default"}) {
      INFO(shape << " named by " << way);
      test::process_result res;
      auto named = path;
      auto start = std::chrono::steady_clock::now();
      if (way == "--config") {
        res = quarry({"--config", path, "config", "show"});
      } else if (way == "QUARRY_CONFIG") {
        res = quarry({"config", "show"}, {{"QUARRY_CONFIG", path}});
      } else {
        // The default location: a link to the shape (the shape itself for
        // a link).
        if (shape == "dangling link" || shape == "link loop")
          fs::create_symlink(shape == "link loop" ? default_file : dir.file("nothing.yaml"),
                             default_file);
        else
          fs::create_symlink(path, default_file);
        named = default_file;
        res = quarry({"config", "show"});
        fs::remove(default_file);
      }
      auto took = std::chrono::steady_clock::now() - start;
      CHECK_FALSE(res.timed_out);
      CHECK(took < std::chrono::seconds{10});
      CHECK(res.exit_code == 2);
      CHECK(res.out.empty());
      CHECK(contains(res.err, named + ": cannot read the configuration file: " + what));
    }
  }
  // The default location holding a FIFO or a folder itself.
  REQUIRE(::mkfifo(default_file.c_str(), 0600) == 0);
  auto res = quarry({"config", "show"});
  CHECK_FALSE(res.timed_out);
  CHECK(res.exit_code == 2);
  CHECK(contains(res.err, default_file
                            + ": cannot read the configuration file: it is a FIFO; "
                              "it must be a regular file (or a symbolic link to one)"));
  fs::remove(default_file);
  fs::create_directory(default_file);
  CHECK(quarry({"config", "show"}).exit_code == 2);
  fs::remove(default_file);
  // Nothing at the default location: the embedded defaults.
  auto defaults = quarry({"config", "show"});
  CHECK(defaults.exit_code == 0);
  CHECK(contains(defaults.out, "embedded defaults"));
  // A missing --config or QUARRY_CONFIG file is an error.
  auto missing = quarry({"--config", dir.file("missing.yaml"), "config", "show"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err,
                 dir.file("missing.yaml") + ": cannot read the configuration file: no such file"));
  CHECK(quarry({"config", "show"}, {{"QUARRY_CONFIG", dir.file("missing.yaml")}}).exit_code == 2);
}

TEST_CASE_FIXTURE(files_fixture,
                  "quarry llm chat --tools reads a regular file only, never waiting on a FIFO") {
  auto fifo = dir.file("tools.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::map<std::string, std::optional<std::string>> env{
    {"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", "http://127.0.0.1:9/v1"}};
  for (const auto& path_what : std::vector<std::pair<std::string, std::string>>{
         {fifo, "is a FIFO"}, {dir.path(), "directory"}, {"/dev/zero", "is a character device"}}) {
    const auto& path = path_what.first;
    const auto& what = path_what.second;
    INFO(path);
    auto res = quarry({"llm", "chat", "--tools", path, "hi"}, env);
    CHECK_FALSE(res.timed_out);
    CHECK(res.exit_code == 2);
    // (A directory is refused by the option's own check, in its words.)
    CHECK(contains(res.err, path));
    CHECK(contains(res.err, what));
  }
}

TEST_CASE_FIXTURE(files_fixture, "a link to a regular configuration works, however it is named") {
  auto real = dir.write("real.yaml", "log:\n  level: warn\n");
  auto link = dir.file("link.yaml");
  fs::create_symlink(real, link);
  auto default_file = home.path() + "/.config/quarry/quarry.yaml";
  fs::create_directories(fs::path{default_file}.parent_path());
  fs::create_symlink(link, default_file);
  for (const auto& res :
       {quarry({"--config", link, "config", "show"}),
        quarry({"config", "show"}, {{"QUARRY_CONFIG", link}}), quarry({"config", "show"})}) {
    INFO(res.err);
    CHECK(res.exit_code == 0);
    CHECK(contains(res.out, "level: warn"));
  }
}

TEST_CASE_FIXTURE(
  files_fixture,
  "a configuration that holds a literal secret and that others may read gives one warning") {
  auto text = "llm:\n"
              "  providers:\n"
              "    x:\n"
              "      plugin: openai\n"
              "      api_key: sk-literal-key-123\n"
              "      model: m\n";
  auto cfg = dir.write("quarry.yaml", text);
  REQUIRE(::chmod(cfg.c_str(), 0644) == 0);
  auto res = quarry({"--config", cfg, "config", "show"});
  CHECK(res.exit_code == 0);
  CHECK(count(res.err, "\n") == 1);
  CHECK(res.err
        == "quarry: warning: " + cfg
             + " holds secrets (llm.providers.x.api_key) and is readable by other "
               "users (mode 0644); chmod 600 "
             + cfg + "\n");
  CHECK_FALSE(contains(res.err, "sk-literal-key-123"));
  // The same file, 0600: no warning.
  REQUIRE(::chmod(cfg.c_str(), 0600) == 0);
  auto quiet = quarry({"--config", cfg, "config", "show"});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  // A reference to the environment, 0644: no warning.
  auto env_cfg = dir.write("env.yaml", "llm:\n"
                                       "  providers:\n"
                                       "    x:\n"
                                       "      plugin: openai\n"
                                       "      api_key: ${QUARRY_TEST_KEY}\n"
                                       "      model: m\n");
  REQUIRE(::chmod(env_cfg.c_str(), 0644) == 0);
  auto env = quarry({"--config", env_cfg, "config", "show"}, {{"QUARRY_TEST_KEY", "sk-env"}});
  CHECK(env.exit_code == 0);
  CHECK(env.err.empty());
  // config check lists it with the other warnings.
  REQUIRE(::chmod(cfg.c_str(), 0640) == 0);
  auto check = quarry({"--config", cfg, "config", "check", "--offline"});
  CHECK(check.exit_code == 0);
  CHECK(contains(check.out, "warning: " + cfg
                              + " holds secrets (llm.providers.x.api_key) "
                                "and is readable by other users (mode 0640)"));
}

TEST_CASE_FIXTURE(files_fixture,
                  "quarry plugins refuses plugins that others could change, and says why") {
  auto root = dir.path();
  // Safe: loads.
  echo_in(root + "/safe", 0755, 0755);
  auto [safe, safe_res] = echo_row(root + "/safe");
  CHECK(safe["status"] == "ok");
  CHECK_FALSE(safe.contains("unsafe"));
  // A plugin folder writable by everyone, with and without the sticky bit.
  for (mode_t mode : {0777, 01777}) {
    auto folder = root + "/world" + std::to_string(mode);
    echo_in(folder, mode, 0755);
    auto [row, res] = echo_row(folder);
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
    CHECK(row["status"] == "error");
    CHECK(row["error"].get<std::string>().rfind(
            "folder " + folder + " is writable by every user (mode " + octal
              + "); a plugin must be changeable by no one but root and the user "
                "running Quarry (plugins.allow_unsafe_permissions loads it anyway)",
            0)
          == 0);
  }
  // The file writable by everyone.
  for (mode_t mode : {0666, 0777}) {
    auto folder = root + "/file" + std::to_string(mode);
    echo_in(folder, 0755, mode);
    auto [row, res] = echo_row(folder);
    CHECK(row["status"] == "error");
    CHECK(row["error"].get<std::string>().rfind("the file is writable by every user", 0) == 0);
  }
  // Under a parent writable by everyone.
  echo_in(root + "/open/plugins", 0755, 0755);
  REQUIRE(::chmod((root + "/open").c_str(), 0777) == 0);
  auto [under, under_res] = echo_row(root + "/open/plugins");
  CHECK(under["status"] == "error");
  CHECK(under["error"].get<std::string>().rfind(
          "folder " + root + "/open is writable by every user (mode 0777)", 0)
        == 0);
  // Owned by another user (root may give a file away).
  if (::geteuid() == 0) {
    auto file = echo_in(root + "/other", 0755, 0755);
    REQUIRE(::chown(file.c_str(), 12345, 12345) == 0);
    auto [other, other_res] = echo_row(root + "/other");
    CHECK(other["status"] == "error");
    CHECK(other["error"].get<std::string>().rfind(
            "the file is owned by uid 12345, not by root or the user running Quarry", 0)
          == 0);
  }
  // The table shows the reason too; a configured plugin that was refused is
  // named with it (exit 1).
  auto table = quarry({"plugins", "--plugin-dir", root + "/world511"});
  CHECK(table.exit_code == 0);
  CHECK(contains(table.out, "error"));
  CHECK(contains(table.out, "is writable by every user (mode 0777)"));
  auto cfg = dir.write("quarry.yaml", "tools:\n  t:\n    plugin: echo\n");
  REQUIRE(::chmod(cfg.c_str(), 0600) == 0);
  auto configured = quarry({"--config", cfg, "plugins", "--plugin-dir", root + "/world511"});
  CHECK(configured.exit_code == 1);
  CHECK(contains(configured.err, "configured plugin 'echo' (tools.t, " + cfg + ":2) "));
}

TEST_CASE_FIXTURE(
  files_fixture,
  "plugins.allow_unsafe_permissions loads them with a warning, and quarry plugins shows it") {
  auto folder = dir.path() + "/world";
  echo_in(folder, 0777, 0666);
  auto [row, res] = echo_row(folder, {"--set", "plugins.allow_unsafe_permissions=true"});
  CHECK(row["status"] == "ok");
  CHECK(row["name"] == "echo");
  CHECK(row["unsafe"] == "the file is writable by every user (mode 0666)");
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["allow_unsafe_permissions"] == true);
  CHECK(contains(res.err, "quarry: warning: " + folder
                            + "/quarry_tp_echo.so: loaded only because "
                              "plugins.allow_unsafe_permissions is true: the file is "
                              "writable by every user (mode 0666)\n"));
  CHECK(contains(res.err, "quarry: warning: plugins.allow_unsafe_permissions is true: "
                          "plugin files that others could change are loaded"));
  // The table marks the file `unsafe`.
  auto table = quarry(
    {"plugins", "--plugin-dir", folder, "--set", "plugins.allow_unsafe_permissions=true"});
  CHECK(table.exit_code == 0);
  auto at = table.out.find("\necho ");
  REQUIRE(at != std::string::npos);
  auto line = table.out.substr(at + 1, table.out.find('\n', at + 1) - at - 1);
  CHECK(contains(line, " unsafe "));
  // Without the override: refused, and the JSON says the override is off.
  auto [refused, refused_res] = echo_row(folder);
  CHECK(refused["status"] == "error");
  CHECK(nlohmann::json::parse(refused_res.out)["allow_unsafe_permissions"] == false);
  CHECK_FALSE(contains(refused_res.err, "allow_unsafe_permissions is true"));
  // The same from the configuration file.
  auto cfg = dir.write("quarry.yaml", "plugins:\n  allow_unsafe_permissions: true\n");
  auto [from_file, file_res] = echo_row(folder, {"--config", cfg});
  CHECK(from_file["status"] == "ok");
}

} // namespace config_file_cli_test
