// What a configuration file must be (core/regular_file.hpp, core/config.hpp):
// a regular file or a link to one, opened without blocking, at most 1 MiB,
// however it is named (--config, $QUARRY_CONFIG, the default location); the
// same rule for prompt overrides; and the warning for a file that holds
// secrets and that others may read.

#include "support/process.hpp"

#include "quarry/core/config.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/regular_file.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace config_file_test {

using namespace quarry;
using namespace quarry::core;

namespace {

namespace fs = std::filesystem;

config_getenv_fn stub_env(std::map<std::string, std::string> env) {
  return [env = std::move(env)](const std::string& name) -> std::optional<std::string> {
    if (auto i = env.find(name); i != env.end())
      return i->second;
    return std::nullopt;
  };
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

file_error refused(const std::string& path, size_t cap = 1024) {
  auto read = read_regular_file(path, cap);
  REQUIRE(std::holds_alternative<file_error>(read));
  return std::get<file_error>(read);
}

/// Every shape that is not a regular file, by name, made in `dir`; the
/// message read_regular_file gives for each.
std::map<std::string, std::pair<std::string, std::string>> make_shapes(const test::temp_dir& dir) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  auto fifo = dir.file("fifo.yaml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  out["fifo"] = {fifo, "is a FIFO"};
  auto folder = dir.file("folder.yaml");
  fs::create_directory(folder);
  out["directory"] = {folder, "is a directory"};
  out["device"] = {"/dev/zero", "is a character device"};
  auto dangling = dir.file("dangling.yaml");
  fs::create_symlink(dir.file("nothing-here.yaml"), dangling);
  out["dangling link"] = {dangling, "is a dangling symbolic link"};
  auto loop = dir.file("loop.yaml");
  fs::create_symlink(dir.file("loop2.yaml"), loop);
  fs::create_symlink(loop, dir.file("loop2.yaml"));
  out["link loop"] = {loop, "is a symbolic link loop"};
  auto big = dir.write("big.yaml", "# " + std::string(max_config_file_size, 'x') + "\n");
  out["oversized"] = {big, "is larger than 1MiB"};
  return out;
}

} // namespace

TEST_CASE("read_regular_file reads a regular file or a link to one, with its status") {
  test::temp_dir dir;
  auto file = dir.write("a.yaml", "log: {level: warn}\n");
  ::chmod(file.c_str(), 0640);
  auto read = read_regular_file(file, 1024);
  REQUIRE(std::holds_alternative<regular_file_text>(read));
  CHECK(std::get<regular_file_text>(read).text == "log: {level: warn}\n");
  CHECK((std::get<regular_file_text>(read).status.st_mode & 07777) == 0640);
  // A link to a regular file is followed; the status is the target's.
  fs::create_symlink(file, dir.file("link.yaml"));
  auto linked = read_regular_file(dir.file("link.yaml"), 1024);
  REQUIRE(std::holds_alternative<regular_file_text>(linked));
  CHECK(std::get<regular_file_text>(linked).text == "log: {level: warn}\n");
  CHECK(S_ISREG(std::get<regular_file_text>(linked).status.st_mode));
  // Exactly the cap is fine, one byte more is not.
  auto exact = dir.write("exact", std::string(1024, 'x'));
  CHECK(std::holds_alternative<regular_file_text>(read_regular_file(exact, 1024)));
  auto over = refused(dir.write("over", std::string(1025, 'x')));
  CHECK(over.what == file_error::kind::too_large);
  CHECK(over.message == "is larger than 1KiB");
  // An empty file is a file.
  auto empty = read_regular_file(dir.write("empty", ""), 1024);
  REQUIRE(std::holds_alternative<regular_file_text>(empty));
  CHECK(std::get<regular_file_text>(empty).text.empty());
}

TEST_CASE("read_regular_file says what a path is when it is not a regular file, without blocking") {
  test::temp_dir dir;
  for (const auto& shape_x : make_shapes(dir)) {
    const auto& shape = shape_x.first;
    const auto& x = shape_x.second;
    if (shape == "oversized")
      continue;
    INFO(shape);
    auto err = refused(x.first);
    CHECK(err.what == file_error::kind::not_regular);
    CHECK(err.message == x.second);
  }
  // A link to a FIFO is the FIFO.
  fs::create_symlink(dir.file("fifo.yaml"), dir.file("to-fifo.yaml"));
  CHECK(refused(dir.file("to-fifo.yaml")).message == "is a FIFO");
  // A socket.
  auto sock_path = dir.file("s.sock");
  auto fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(sock_path.size() < sizeof(addr.sun_path));
  std::copy(sock_path.begin(), sock_path.end(), addr.sun_path);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  CHECK(refused(sock_path).message == "is a socket");
  ::close(fd);
  // Nothing there; a path through a file.
  auto missing = refused(dir.file("missing.yaml"));
  CHECK(missing.what == file_error::kind::not_found);
  CHECK(missing.message == "no such file");
  auto through = refused(dir.write("plain", "x") + "/below.yaml");
  CHECK(through.what == file_error::kind::not_found);
  CHECK(through.message == "a part of the path is not a directory");
  CHECK(refused("").what == file_error::kind::not_found);
}

TEST_CASE("config: one rule for --config, $QUARRY_CONFIG and the default location") {
  test::temp_dir dir;
  test::temp_dir home;
  auto shapes = make_shapes(dir);
  auto default_file = home.path() + "/.config/quarry/quarry.yaml";
  fs::create_directories(fs::path{default_file}.parent_path());
  for (const auto& shape_x : shapes) {
    const auto& shape = shape_x.first;
    const auto& x = shape_x.second;
    const auto& path = x.first;
    const auto& what = x.second;
    for (const std::string way : {"--config", "QUARRY_CONFIG", "default"}) {
      INFO(shape << " named by " << way);
      load_options opts;
      std::string named = path;
      if (way == "--config") {
        opts.file = path;
        opts.getenv = stub_env({{"HOME", home.path()}});
      } else if (way == "QUARRY_CONFIG") {
        opts.getenv = stub_env({{"QUARRY_CONFIG", path}, {"HOME", home.path()}});
      } else {
        // The default location holds a link to the shape (the device and the
        // loop are links anyway), or the shape itself.
        fs::remove(default_file);
        if (shape == "fifo")
          REQUIRE(::mkfifo(default_file.c_str(), 0600) == 0);
        else if (shape == "directory")
          fs::create_directory(default_file);
        else if (shape == "dangling link")
          fs::create_symlink(home.file("nothing.yaml"), default_file);
        else if (shape == "link loop")
          fs::create_symlink(default_file, default_file);
        else
          fs::create_symlink(path, default_file);
        named = default_file;
        opts.getenv = stub_env({{"HOME", home.path()}});
      }
      auto res = load_config(opts);
      REQUIRE_FALSE(res.config.has_value());
      REQUIRE(res.errors.size() == 1);
      const auto& err = res.errors.front();
      CHECK(err.file == named);
      CHECK(err.line == 0);
      CHECK(contains(err.message, "cannot read the configuration file: it " + what));
      if (shape != "oversized")
        CHECK(contains(err.message, "it must be a regular file (or a symbolic link to one)"));
      else
        CHECK(contains(err.message, "the largest configuration file Quarry reads"));
      if (way == "default") {
        std::error_code ec;
        fs::remove_all(default_file, ec);
      }
    }
  }
  // A link to a regular file works, named every way.
  auto real = dir.write("real.yaml", "log: {level: warn}\n");
  fs::create_symlink(real, dir.file("real-link.yaml"));
  fs::create_symlink(dir.file("real-link.yaml"), default_file);
  load_options by_flag;
  by_flag.file = dir.file("real-link.yaml");
  by_flag.getenv = stub_env({});
  load_options by_env;
  by_env.getenv = stub_env({{"QUARRY_CONFIG", dir.file("real-link.yaml")}});
  load_options by_default;
  by_default.getenv = stub_env({{"HOME", home.path()}});
  for (const auto* opts : {&by_flag, &by_env, &by_default}) {
    auto res = load_config(*opts);
    REQUIRE(res.config.has_value());
    CHECK(res.config->values.log.level == "warn");
  }
  CHECK(load_config(by_default).config->source == default_file);
  // Nothing at the default location: the embedded defaults; a missing
  // --config or $QUARRY_CONFIG file is an error.
  fs::remove(default_file);
  auto defaults = load_config(by_default);
  REQUIRE(defaults.config.has_value());
  CHECK(defaults.config->source == "embedded defaults");
  load_options missing;
  missing.file = dir.file("missing.yaml");
  missing.getenv = stub_env({});
  auto res = load_config(missing);
  REQUIRE(res.errors.size() == 1);
  CHECK(res.errors[0].to_string()
        == dir.file("missing.yaml") + ": cannot read the configuration file: no such file");
  // ~/.config/quarry being a file: nothing can be at the default location.
  fs::remove_all(home.path() + "/.config/quarry");
  home.write(".config/quarry", "not a folder");
  CHECK(load_config(by_default).config.has_value());
}

TEST_CASE("config: a file that holds secrets and that others may read gives one warning") {
  test::temp_dir dir;
  auto load = [&](const std::string& name, const std::string& text, mode_t mode,
                  std::vector<std::string> overrides = {}) {
    auto path = dir.write(name, text);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    load_options opts;
    opts.file = path;
    opts.overrides = std::move(overrides);
    opts.getenv = stub_env({{"KEY", "sk-from-the-environment"}});
    auto res = load_config(opts);
    REQUIRE(res.config.has_value());
    return std::make_pair(path, *res.config);
  };
  auto provider = [](const std::string& key_line) {
    return "llm:\n  providers:\n    x:\n      plugin: openai\n      " + key_line
           + "\n      model: m\n";
  };
  // A literal key, readable by all: one warning naming file, key and mode.
  auto [open_path, open_cfg] = load("open.yaml", provider("api_key: sk-literal-123"), 0644);
  REQUIRE(open_cfg.warnings.size() == 1);
  CHECK(open_cfg.warnings[0]
        == open_path
             + " holds secrets (llm.providers.x.api_key) and is readable "
               "by other users (mode 0644); chmod 600 "
             + open_path);
  CHECK(open_cfg.literal_secrets == std::vector<std::string>{"llm.providers.x.api_key"});
  // Readable by the group only: a warning too.
  CHECK(load("group.yaml", provider("api_key: sk-literal-123"), 0640).second.warnings.size() == 1);
  // 0600: none.
  CHECK(load("private.yaml", provider("api_key: sk-literal-123"), 0600).second.warnings.empty());
  // A reference to the environment: none, whatever the mode.
  CHECK(load("env.yaml", provider("api_key: ${KEY}"), 0644).second.warnings.empty());
  CHECK(load("env2.yaml", provider("api_key: \"${KEY:-}\""), 0644).second.warnings.empty());
  // A default written in the file is a secret in the file.
  CHECK(load("default.yaml", provider("api_key: ${KEY:-sk-fallback}"), 0644).second.warnings.size()
        == 1);
  // A value given with --set is not in the file.
  CHECK(load("set.yaml", provider("organization: o"), 0644, {"llm.providers.x.api_key=sk-set"})
          .second.warnings.empty());
  // Secret-named keys at any depth of an instance; schema secrets; a proxy
  // URL only with credentials.
  auto [deep_path, deep] = load(
    "deep.yaml",
    "http:\n  proxy: http://user:pw@proxy:3128\n"
    "server:\n  auth_token: t0ken-literal\n"
    "tools:\n  t:\n    plugin: brave\n    headers:\n      x_auth_token: abc\n"
    "    client_secret: s3\n    password: p\n",
    0604);
  REQUIRE(deep.warnings.size() == 1);
  CHECK(contains(
    deep.warnings[0],
    "holds secrets (http.proxy, server.auth_token, tools.t.headers.x_auth_token and 2 more)"));
  CHECK(contains(deep.warnings[0], "(mode 0604)"));
  CHECK(load("proxy.yaml", "http:\n  proxy: http://proxy:3128\n", 0644).second.warnings.empty());
  // Nothing secret at all: none.
  CHECK(load("plain.yaml", "log: {level: warn}\n", 0666).second.warnings.empty());
  // A path a shell would split is quoted in the advice.
  auto [spaced_path, spaced] = load("with space.yaml", provider("api_key: sk-1"), 0644);
  REQUIRE(spaced.warnings.size() == 1);
  CHECK(contains(spaced.warnings[0], "chmod 600 '" + spaced_path + "'"));
}

TEST_CASE("prompts: an override that is not a regular file is refused, saying what it is") {
  test::temp_dir dir;
  auto lib = prompt_library::embedded();
  auto folder = dir.file("fifo");
  fs::create_directories(folder);
  REQUIRE(::mkfifo((folder + "/final_report.md").c_str(), 0600) == 0);
  auto r = lib.load_overrides(folder);
  REQUIRE(std::holds_alternative<prompt_error>(r));
  CHECK(std::get<prompt_error>(r).message == folder + "/final_report.md: is a FIFO");
  fs::create_directories(dir.file("dangling"));
  fs::create_symlink(dir.file("none.md"), dir.file("dangling/final_report.md"));
  auto d = lib.load_overrides(dir.file("dangling"));
  REQUIRE(std::holds_alternative<prompt_error>(d));
  CHECK(contains(std::get<prompt_error>(d).message, "is a dangling symbolic link"));
  dir.write("big/final_report.md", std::string(max_prompt_file_size + 1, 'x'));
  auto big = lib.load_overrides(dir.file("big"));
  REQUIRE(std::holds_alternative<prompt_error>(big));
  CHECK(contains(std::get<prompt_error>(big).message, "is larger than 1MiB"));
  // A link to a regular file is fine.
  auto real = dir.write("real.md", "Report. {current_datetime}\n");
  fs::create_directories(dir.file("linked"));
  fs::create_symlink(real, dir.file("linked/final_report.md"));
  auto ok = lib.load_overrides(dir.file("linked"));
  REQUIRE(std::holds_alternative<size_t>(ok));
  CHECK(std::get<size_t>(ok) == 1);
}

} // namespace config_file_test
