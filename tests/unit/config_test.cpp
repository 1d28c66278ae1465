// Unit tests of the configuration loader (core/config.hpp), the schema and the
// duration/size units, including config/quarry.yaml and docs/configuration.md.

#include "quarry/core/config.hpp"
#include "quarry/core/config_limits.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/instances.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace config_test {

using namespace quarry::core;
using namespace std::chrono_literals;

namespace {

namespace fs = std::filesystem;

using env_map = std::map<std::string, std::string>;

config_getenv_fn stub_env(env_map env) {
  return [env = std::move(env)](const std::string& name) -> std::optional<std::string> {
    if (auto i = env.find(name); i != env.end())
      return i->second;
    return std::nullopt;
  };
}

load_result load_text(std::string_view yaml, std::vector<std::string> overrides = {},
                      env_map env = {}) {
  load_options opts;
  opts.overrides = std::move(overrides);
  opts.getenv = stub_env(std::move(env));
  return load_config_text(yaml, "test.yaml", opts);
}

std::string all_errors(const load_result& res) {
  std::string result;
  for (const auto& err : res.errors)
    result += err.to_string() + "\n";
  return result;
}

// Checks that `res` failed with exactly one error and returns it.
config_error single_error(const load_result& res) {
  INFO(all_errors(res));
  REQUIRE_FALSE(res.config.has_value());
  REQUIRE(res.errors.size() == 1);
  return res.errors.front();
}

// Requires success and returns the configuration.
const loaded_config& ok(const load_result& res) {
  INFO(all_errors(res));
  REQUIRE(res.errors.empty());
  REQUIRE(res.config.has_value());
  return *res.config;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// A fresh temporary folder, removed at the end of the test.
class temp_dir {
public:
  temp_dir() {
    auto pattern = (fs::temp_directory_path() / "quarry-config-XXXXXX").string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path_ = buf.data();
  }

  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const fs::path& path() const {
    return path_;
  }

  // Writes `text` to `name` (creating folders) and returns the full path.
  std::string write(const std::string& name, std::string_view text) const {
    auto file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream out{file, std::ios::binary};
    out << text;
    return file.string();
  }

private:
  fs::path path_;
};

std::string read_source_file(const std::string& relative) {
  std::ifstream in{std::string{QUARRY_SOURCE_DIR} + "/" + relative, std::ios::binary};
  REQUIRE(in.good());
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

const char* full_config = R"yaml(runtime:
  scheduler_threads: 3
  blocking_threads: 8
  blocking_queue: 50
  data_dir: /var/lib/quarry
  shutdown_grace: 2500ms
log:
  level: debug
  format: json
plugins:
  dirs: [/opt/a, "/opt/b c"]
http:
  connect_timeout: 3s
  total_timeout: 10m
  stall_timeout: 1.5
  max_response_bytes: 1GiB
  max_redirects: 0
  proxy: http://user:pa55@proxy:3128
  no_proxy: localhost,.internal
  ca_file: /etc/ssl/ca.pem
  ca_path: /etc/ssl/certs
  verify_tls: no
  user_agent: "Quarry/0.1 (test)"
  max_connections: 16
  max_host_connections: 4
llm:
  default: main
  providers:
    main:
      plugin: openai
      api_key: sk-main-secret
      model: gpt-4o
      temperature: 0.7
      max_tokens: 4096
      stream: true
      org: "12345"
      extra: ~
      headers:
        X-Custom: value
        x_auth_token: tok-hidden
      stops: [a, 2]
    fast:
      plugin: anthropic
      api_key: ""
  roles:
    orchestrator: main
    research_agent: fast
tools:
  web_search:
    plugin: brave
    api_key: brave-secret
    max_results: 10
  open_url:
    plugin: open_url
)yaml";

} // namespace

// -- units --------------------------------------------------------------------

TEST_CASE("config durations parse and format") {
  CHECK(parse_duration("500ms") == 500ms);
  CHECK(parse_duration("10s") == 10s);
  CHECK(parse_duration("2m") == 2min);
  CHECK(parse_duration("1h") == 1h);
  CHECK(parse_duration("1h30m") == 90min);
  CHECK(parse_duration("1m 30s") == 90s);
  CHECK(parse_duration("10") == 10s);
  CHECK(parse_duration("0.25") == 250ms);
  CHECK(parse_duration("1.5s") == 1500ms);
  CHECK(parse_duration(" 7 ms ") == 7ms);
  CHECK(parse_duration("0") == 0ms);
  CHECK_FALSE(parse_duration(""));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("-1s"));
  CHECK_FALSE(parse_duration("10 parsecs"));
  CHECK_FALSE(parse_duration("1.5ms"));
  CHECK_FALSE(parse_duration("1s 5"));
  CHECK_FALSE(parse_duration("99999999999999999999s"));
  CHECK_FALSE(parse_duration("9223372036854775807h"));
  CHECK(format_duration(0ms) == "0s");
  CHECK(format_duration(5000ms) == "5s");
  CHECK(format_duration(90000ms) == "90s");
  CHECK(format_duration(300000ms) == "5m");
  CHECK(format_duration(7200000ms) == "2h");
  CHECK(format_duration(1500ms) == "1500ms");
  for (auto ms : {0LL, 1LL, 999LL, 1000LL, 61000LL, 3600000LL, 86400001LL})
    CHECK(parse_duration(format_duration(std::chrono::milliseconds{ms}))
          == std::chrono::milliseconds{ms});
}

TEST_CASE("config sizes parse and format") {
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("123") == 123);
  CHECK(parse_size("10B") == 10);
  CHECK(parse_size("512KiB") == 512 * 1024);
  CHECK(parse_size("64MiB") == 64 * 1024 * 1024);
  CHECK(parse_size("1GiB") == int64_t{1} << 30);
  CHECK(parse_size("2TiB") == int64_t{2} << 40);
  CHECK(parse_size("1KB") == 1000);
  CHECK(parse_size("3MB") == 3'000'000);
  CHECK(parse_size("1gb") == 1'000'000'000);
  CHECK(parse_size("64 mib") == 64 * 1024 * 1024);
  CHECK(parse_size("1.5KiB") == 1536);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("-1"));
  CHECK_FALSE(parse_size("12 apples"));
  CHECK_FALSE(parse_size("1.0001KB"));
  CHECK_FALSE(parse_size("99999999TiB"));
  CHECK(format_size(64 * 1024 * 1024) == "64MiB");
  CHECK(format_size(2'000'000) == "2MB");
  CHECK(format_size(1'000'001) == "1000001");
  CHECK(format_size(0) == "0");
  for (int64_t x : {int64_t{0}, int64_t{1}, int64_t{1024}, int64_t{1000}, int64_t{1536},
                    int64_t{3} << 40, int64_t{123456789}})
    CHECK(parse_size(format_size(x)) == x);
}

// -- schema -------------------------------------------------------------------

TEST_CASE("config schema bindings match the declared types") {
  const auto& schema = config_schema();
  REQUIRE(schema.size() >= 24);
  for (const auto& key : schema) {
    INFO(key.path);
    CHECK_FALSE(key.doc.empty());
    auto value = key.binding.load(settings{});
    switch (key.type) {
      case config_type::integer:
      case config_type::size:
        CHECK(std::holds_alternative<int64_t>(value));
        break;
      case config_type::boolean:
        CHECK(std::holds_alternative<bool>(value));
        break;
      case config_type::string:
        CHECK(std::holds_alternative<std::string>(value));
        break;
      case config_type::duration:
        CHECK(std::holds_alternative<std::chrono::milliseconds>(value));
        break;
      case config_type::string_list:
        CHECK(std::holds_alternative<std::vector<std::string>>(value));
        break;
      case config_type::string_map:
        CHECK(std::holds_alternative<std::map<std::string, std::string>>(value));
        break;
      case config_type::instances:
        CHECK((std::holds_alternative<std::map<std::string, llm_instance>>(value)
               || std::holds_alternative<std::map<std::string, tool_instance>>(value)));
        break;
    }
    // Store and load round-trip through the binding.
    settings s;
    key.binding.store(s, value);
    CHECK(to_json(key.binding.load(s), key.type) == to_json(value, key.type));
  }
  CHECK(find_config_key("http.connect_timeout") != nullptr);
  CHECK(find_config_key("http") == nullptr);
  CHECK(is_config_section("http"));
  CHECK(is_config_section("llm"));
  CHECK_FALSE(is_config_section("http.proxy"));
  CHECK_FALSE(is_config_section("tools"));
  CHECK_FALSE(is_config_section("htt"));
  CHECK(default_as_yaml(*find_config_key("http.connect_timeout")) == "10s");
  CHECK(default_as_yaml(*find_config_key("http.max_response_bytes")) == "64MiB");
  CHECK(default_as_yaml(*find_config_key("http.proxy")) == "\"\"");
  CHECK(default_as_yaml(*find_config_key("plugins.dirs")) == "[]");
  CHECK(default_as_yaml(*find_config_key("tools")) == "{}");
  CHECK(default_as_yaml(*find_config_key("http.verify_tls")) == "true");
}

TEST_CASE("config secret key names") {
  CHECK(is_secret_key_name("api_key"));
  CHECK(is_secret_key_name("API_KEY"));
  CHECK(is_secret_key_name("brave_key"));
  CHECK(is_secret_key_name("access_token"));
  CHECK(is_secret_key_name("token"));
  CHECK(is_secret_key_name("bearerToken"));
  CHECK(is_secret_key_name("password"));
  CHECK(is_secret_key_name("db_Password"));
  CHECK(is_secret_key_name("client_secret"));
  CHECK_FALSE(is_secret_key_name("key"));
  CHECK_FALSE(is_secret_key_name("monkey"));
  CHECK_FALSE(is_secret_key_name("max_tokens"));
  CHECK_FALSE(is_secret_key_name("model"));
  CHECK_FALSE(is_secret_key_name("plugin"));
}

// -- good files ---------------------------------------------------------------

TEST_CASE("config embedded defaults") {
  load_options opts;
  opts.getenv = stub_env({});
  auto res = load_config(opts);
  const auto& cfg = ok(res);
  CHECK(cfg.source == "embedded defaults");
  CHECK(cfg.warnings.empty());
  CHECK(cfg.effective == to_json(settings{}));
  const auto& v = cfg.values;
  CHECK(v.runtime.blocking_threads == 4);
  CHECK(v.http.connect_timeout == 10s);
  CHECK(v.http.max_response_bytes == 64 * 1024 * 1024);
  CHECK(v.log.level == "info");
  CHECK(v.llm.providers.empty());
  CHECK(cfg.effective["http"]["connect_timeout"] == "10s");
  CHECK(cfg.effective["http"]["total_timeout"] == "5m");
  CHECK(cfg.effective["http"]["max_response_bytes"] == 67108864);
  CHECK(cfg.effective["llm"]["default"] == "");
  CHECK(cfg.effective["tools"] == nlohmann::json::object());
  CHECK(cfg.effective["plugins"]["dirs"] == nlohmann::json::array());
}

TEST_CASE("config full file") {
  auto res = load_text(full_config);
  const auto& cfg = ok(res);
  CHECK(cfg.source == "test.yaml");
  CHECK(cfg.warnings.empty());
  const auto& v = cfg.values;
  CHECK(v.runtime.scheduler_threads == 3);
  CHECK(v.runtime.blocking_threads == 8);
  CHECK(v.runtime.blocking_queue == 50);
  CHECK(v.runtime.data_dir == "/var/lib/quarry");
  CHECK(v.runtime.shutdown_grace == 2500ms);
  CHECK(v.log.level == "debug");
  CHECK(v.log.format == "json");
  CHECK(v.plugins.dirs == std::vector<std::string>{"/opt/a", "/opt/b c"});
  CHECK(v.http.connect_timeout == 3s);
  CHECK(v.http.total_timeout == 10min);
  CHECK(v.http.stall_timeout == 1500ms);
  CHECK(v.http.max_response_bytes == int64_t{1} << 30);
  CHECK(v.http.max_redirects == 0);
  CHECK(v.http.proxy == "http://user:pa55@proxy:3128");
  CHECK(v.http.no_proxy == "localhost,.internal");
  CHECK(v.http.ca_file == "/etc/ssl/ca.pem");
  CHECK(v.http.ca_path == "/etc/ssl/certs");
  CHECK(v.http.verify_tls == false);
  CHECK(v.http.user_agent == "Quarry/0.1 (test)");
  CHECK(v.http.max_connections == 16);
  CHECK(v.http.max_host_connections == 4);
  CHECK(v.llm.default_provider == "main");
  REQUIRE(v.llm.providers.size() == 2);
  const auto& main = v.llm.providers.at("main");
  CHECK(main.plugin == "openai");
  CHECK(main.file == "test.yaml");
  CHECK(main.line == 29);
  auto expected = nlohmann::json::parse(R"({
    "api_key": "sk-main-secret", "model": "gpt-4o", "temperature": 0.7,
    "max_tokens": 4096, "stream": true, "org": "12345", "extra": null,
    "headers": {"X-Custom": "value", "x_auth_token": "tok-hidden"},
    "stops": ["a", 2]})");
  CHECK(main.config == expected);
  CHECK(main.config["max_tokens"].is_number_integer());
  CHECK(main.config["org"].is_string());
  CHECK(v.llm.providers.at("fast").plugin == "anthropic");
  CHECK(v.llm.providers.at("fast").line == 42);
  CHECK(
    v.llm.roles
    == std::map<std::string, std::string>{{"orchestrator", "main"}, {"research_agent", "fast"}});
  REQUIRE(v.tools.size() == 2);
  CHECK(v.tools.at("web_search").plugin == "brave");
  CHECK(v.tools.at("web_search").config["max_results"] == 10);
  CHECK(v.tools.at("open_url").config == nlohmann::json::object());
  // The effective tree mirrors the values.
  CHECK(cfg.effective == to_json(v));
  CHECK(cfg.effective["runtime"]["shutdown_grace"] == "2500ms");
  CHECK(cfg.effective["http"]["stall_timeout"] == "1500ms");
  CHECK(cfg.effective["http"]["max_response_bytes"] == 1073741824);
  CHECK(cfg.effective["llm"]["providers"]["main"]["plugin"] == "openai");
  CHECK(cfg.effective["tools"]["web_search"]["api_key"] == "brave-secret");
}

TEST_CASE("config minimal file") {
  auto res = load_text("log:\n  level: warn\n");
  const auto& cfg = ok(res);
  auto expected = settings{};
  expected.log.level = "warn";
  CHECK(cfg.effective == to_json(expected));
}

TEST_CASE("config empty files are valid") {
  for (auto text : {"", "{}", "# only a comment\n", "---\n", "\n\n",
                    "runtime:\nlog: ~\nhttp:\n  proxy:\n  max_redirects: ~\n"}) {
    INFO(text);
    auto res = load_text(text);
    const auto& cfg = ok(res);
    CHECK(cfg.effective == to_json(settings{}));
  }
}

TEST_CASE("config booleans accept yes/no and on/off") {
  for (auto text_value : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                   {"False", false},
                                                                   {"yes", true},
                                                                   {"NO", false},
                                                                   {"on", true},
                                                                   {"off", false},
                                                                   {"\"true\"", true}}) {
    auto text = text_value.first;
    auto value = text_value.second;
    INFO(text);
    auto res = load_text("http:\n  verify_tls: " + text + "\n");
    CHECK(ok(res).values.http.verify_tls == value);
  }
}

TEST_CASE("config llm.default may stay empty with one provider") {
  auto res = load_text("llm:\n  providers:\n    only: {plugin: openai}\n");
  CHECK(ok(res).values.llm.default_provider == "only");
  CHECK(ok(res).effective["llm"]["default"] == "only");
}

// -- errors -------------------------------------------------------------------

TEST_CASE("config error rendering") {
  CHECK(config_error{"a.yaml", 3, "http.proxy", "bad"}.to_string() == "a.yaml:3: http.proxy: bad");
  CHECK(config_error{"a.yaml", 0, "http.proxy", "bad"}.to_string() == "a.yaml: http.proxy: bad");
  CHECK(config_error{"a.yaml", 2, "", "bad"}.to_string() == "a.yaml:2: bad");
  CHECK(config_error{"--set", 0, "log.level", "bad"}.to_string() == "--set: log.level: bad");
}

TEST_CASE("config unknown key at the top level") {
  auto err = single_error(load_text("log:\n  level: info\nhtpp:\n  x: 1\n"));
  CHECK(err.file == "test.yaml");
  CHECK(err.line == 3);
  CHECK(err.key == "htpp");
  CHECK(contains(err.message, "unknown key"));
  CHECK(contains(err.message, "did you mean `http`?"));
  CHECK(err.to_string() == "test.yaml:3: htpp: unknown key; did you mean `http`?");
}

TEST_CASE("config unknown nested key") {
  auto res = load_text("http:\n  verify_tls: true\n\n  conect_timeout: 5s\n"
                       "log:\n  level: info\n  colour: red\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 2);
  CHECK(res.errors[0].line == 4);
  CHECK(res.errors[0].key == "http.conect_timeout");
  CHECK(contains(res.errors[0].message, "did you mean `http.connect_timeout`?"));
  CHECK(res.errors[1].line == 7);
  CHECK(res.errors[1].key == "log.colour");
  CHECK(res.errors[1].message == "unknown key");
  // A key that exists in another section.
  auto err = single_error(load_text("log:\n  proxy: x\n"));
  CHECK(err.key == "log.proxy");
  CHECK(contains(err.message, "did you mean `http.proxy`?"));
}

TEST_CASE("config wrong types") {
  auto res = load_text("runtime:\n"
                       "  blocking_threads: many\n"
                       "  data_dir: [a]\n"
                       "http:\n"
                       "  verify_tls: maybe\n"
                       "  max_response_bytes: lots\n"
                       "plugins:\n"
                       "  dirs: /single/dir\n"
                       "llm:\n"
                       "  roles: [a]\n"
                       "tools: 5\n"
                       "log: text\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 8);
  CHECK(res.errors[0].to_string()
        == "test.yaml:2: runtime.blocking_threads: expected int, got \"many\"");
  CHECK(res.errors[1].to_string() == "test.yaml:3: runtime.data_dir: expected string, got list");
  CHECK(res.errors[2].line == 5);
  CHECK(res.errors[2].key == "http.verify_tls");
  CHECK(contains(res.errors[2].message, "expected bool"));
  CHECK(res.errors[3].line == 6);
  CHECK(res.errors[3].key == "http.max_response_bytes");
  CHECK(contains(res.errors[3].message, "expected size"));
  CHECK(res.errors[4].to_string()
        == "test.yaml:8: plugins.dirs: expected list of strings, got "
           "\"/single/dir\"");
  CHECK(res.errors[5].line == 10);
  CHECK(res.errors[5].key == "llm.roles");
  CHECK(contains(res.errors[5].message, "expected map of strings, got list"));
  CHECK(res.errors[6].line == 11);
  CHECK(res.errors[6].key == "tools");
  CHECK(res.errors[7].to_string() == "test.yaml:12: log: expected map (a section), got string");
}

TEST_CASE("config list items must be strings") {
  auto err = single_error(load_text("plugins:\n  dirs:\n    - a\n    - {b: 1}\n"));
  CHECK(err.key == "plugins.dirs[1]");
  CHECK(err.line == 4);
  CHECK(err.message == "expected string, got map");
}

TEST_CASE("config values out of range") {
  auto res = load_text("runtime:\n  blocking_threads: 0\n"
                       "  scheduler_threads: 99999999999999999999\n"
                       "http:\n  connect_timeout: 2h\n"
                       "  max_response_bytes: 0\n  max_redirects: -1\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 5);
  CHECK(res.errors[0].to_string()
        == "test.yaml:2: runtime.blocking_threads: must be between 1 and "
           "1024, got 0");
  CHECK(res.errors[1].key == "runtime.scheduler_threads");
  CHECK(contains(res.errors[1].message, "expected int"));
  CHECK(res.errors[2].to_string()
        == "test.yaml:5: http.connect_timeout: must be between 1ms and 1h, "
           "got 2h");
  CHECK(res.errors[3].to_string()
        == "test.yaml:6: http.max_response_bytes: must be between 1 and "
           "1TiB, got 0");
  CHECK(res.errors[4].key == "http.max_redirects");
  CHECK(res.errors[4].line == 7);
}

TEST_CASE("config bad enum value") {
  auto err = single_error(load_text("log:\n  format: text\n  level: verbose\n"));
  CHECK(err.to_string()
        == "test.yaml:3: log.level: must be one of "
           "trace|debug|info|warn|error|off, got \"verbose\"");
  auto err2 = single_error(load_text("log: {format: xml}"));
  CHECK(err2.key == "log.format");
  CHECK(err2.line == 1);
  CHECK(contains(err2.message, "one of text|json"));
}

TEST_CASE("config bad duration") {
  auto err = single_error(load_text("http:\n  connect_timeout: 10 parsecs\n"));
  CHECK(err.line == 2);
  CHECK(err.key == "http.connect_timeout");
  CHECK(contains(err.message, "expected duration"));
  CHECK(contains(err.message, "got \"10 parsecs\""));
}

TEST_CASE("config YAML syntax errors") {
  auto err = single_error(load_text("log:\n  level: [info\nhttp: {}\n"));
  CHECK(err.file == "test.yaml");
  CHECK(err.line == 3);
  CHECK(err.key.empty());
  CHECK(contains(err.message, "YAML syntax error"));
  auto err2 = single_error(load_text("log:\n  level: info\n format: text\n"));
  CHECK(err2.line == 3);
  CHECK(contains(err2.message, "YAML syntax error"));
}

TEST_CASE("config top level must be a map") {
  auto err = single_error(load_text("- a\n- b\n"));
  CHECK(err.line == 1);
  CHECK(err.message == "the top level must be a map of sections, got list");
  auto err2 = single_error(load_text("just text"));
  CHECK(err2.message == "the top level must be a map of sections, got string");
}

TEST_CASE("config duplicate keys and multiple documents") {
  auto err = single_error(load_text("log:\n  level: info\n  level: debug\n"));
  CHECK(err.key == "log.level");
  CHECK(err.line == 3);
  CHECK(err.message == "duplicate key (first defined on line 2)");
  auto err2 = single_error(load_text("log: {}\n---\nhttp: {}\n"));
  CHECK(err2.line == 2);
  CHECK(contains(err2.message, "more than one YAML document"));
}

TEST_CASE("config reports all errors") {
  auto res = load_text("bogus: 1\nlog:\n  level: loud\nhttp:\n"
                       "  connect_timeout: soon\n  extra: 1\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 4);
  CHECK(res.errors[0].key == "bogus");
  CHECK(res.errors[1].key == "log.level");
  CHECK(res.errors[2].key == "http.connect_timeout");
  CHECK(res.errors[3].key == "http.extra");
  CHECK(res.errors[0].line == 1);
  CHECK(res.errors[1].line == 3);
  CHECK(res.errors[2].line == 5);
  CHECK(res.errors[3].line == 6);
}

TEST_CASE("config provider without plugin") {
  auto res = load_text("llm:\n"
                       "  default: a\n"
                       "  providers:\n"
                       "    a:\n"
                       "      model: x\n"
                       "    b:\n"
                       "      plugin: \"\"\n"
                       "    c: openai\n"
                       "    d:\n"
                       "      plugin: [x]\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 4);
  CHECK(res.errors[0].to_string()
        == "test.yaml:4: llm.providers.a: missing required key `plugin` (the "
           "plugin that provides this instance)");
  CHECK(res.errors[1].key == "llm.providers.b.plugin");
  CHECK(res.errors[1].line == 7);
  CHECK(contains(res.errors[1].message, "empty string"));
  CHECK(res.errors[2].key == "llm.providers.c");
  CHECK(res.errors[2].line == 8);
  CHECK(contains(res.errors[2].message, "got string"));
  CHECK(res.errors[3].key == "llm.providers.d.plugin");
  CHECK(res.errors[3].line == 10);
  // The same rules hold for tools.
  auto err = single_error(load_text("tools:\n  web_search:\n    count: 3\n"));
  CHECK(err.key == "tools.web_search");
  CHECK(err.line == 2);
}

TEST_CASE("config default and roles must name configured providers") {
  auto err = single_error(load_text("llm:\n"
                                    "  providers:\n"
                                    "    main: {plugin: openai}\n"
                                    "  default: mian\n"));
  CHECK(err.to_string()
        == "test.yaml:4: llm.default: names provider \"mian\", which is not "
           "configured (configured: main)");
  auto err2 = single_error(load_text("llm:\n  default: main\n"));
  CHECK(err2.line == 2);
  CHECK(contains(err2.message, "no providers are configured"));
  auto err3 = single_error(load_text("llm:\n"
                                     "  providers:\n"
                                     "    a: {plugin: openai}\n"
                                     "    b: {plugin: anthropic}\n"));
  CHECK(err3.key == "llm.default");
  CHECK(err3.message == "must name one of the configured providers (a, b)");
  auto res = load_text("llm:\n"
                       "  providers:\n"
                       "    a: {plugin: openai}\n"
                       "  roles:\n"
                       "    orchestrator: a\n"
                       "    final_report: b\n"
                       "    research_agent: c\n");
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 2);
  CHECK(res.errors[0].key == "llm.roles.final_report");
  CHECK(res.errors[0].line == 6);
  CHECK(res.errors[1].key == "llm.roles.research_agent");
  CHECK(res.errors[1].line == 7);
  // An invalid provider is still "configured": no follow-up error.
  auto err4 = single_error(load_text("llm:\n  default: a\n  providers:\n"
                                     "    a: {model: x}\n"));
  CHECK(err4.key == "llm.providers.a");
}

TEST_CASE("config malformed substitution") {
  auto err = single_error(load_text("http:\n  user_agent: \"x ${FOO\"\n"));
  CHECK(err.line == 2);
  CHECK(err.key == "http.user_agent");
  CHECK(contains(err.message, "malformed ${...}"));
  auto err2 = single_error(load_text("log:\n  level: ${1BAD}\n"));
  CHECK(err2.line == 2);
  CHECK(err2.key == "log.level");
  CHECK(contains(err2.message, "malformed ${...}"));
  auto err3 = single_error(load_text("plugins:\n  dirs:\n    - ok\n    - ${}\n"));
  CHECK(err3.line == 4);
  CHECK(err3.key == "plugins.dirs[1]");
}

// -- substitution -------------------------------------------------------------

TEST_CASE("config environment substitution") {
  env_map env{{"AGENT", "bot"}, {"THREADS", "6"}, {"EMPTY", ""}, {"KEY", "sk-from-env"}};
  auto res = load_text("runtime:\n"
                       "  blocking_threads: ${THREADS}\n"
                       "  data_dir: ${DATA:-/tmp/q}\n"
                       "http:\n"
                       "  user_agent: \"${AGENT}/1 costs $$5 and $9\"\n"
                       "  no_proxy: ${EMPTY:-fallback}\n"
                       "  ca_file: pre-${EMPTY}-post\n"
                       "  ca_path: ${MISSING}\n"
                       "llm:\n"
                       "  providers:\n"
                       "    main:\n"
                       "      plugin: openai\n"
                       "      api_key: ${KEY}\n"
                       "      retries: ${THREADS}\n"
                       "      quoted: \"${THREADS}\"\n",
                       {}, env);
  const auto& cfg = ok(res);
  const auto& v = cfg.values;
  CHECK(v.runtime.blocking_threads == 6);
  CHECK(v.runtime.data_dir == "/tmp/q");
  CHECK(v.http.user_agent == "bot/1 costs $5 and $9");
  CHECK(v.http.no_proxy == "fallback");
  CHECK(v.http.ca_file == "pre--post");
  CHECK(v.http.ca_path.empty());
  const auto& main = v.llm.providers.at("main");
  CHECK(main.config["api_key"] == "sk-from-env");
  CHECK(main.config["retries"] == 6);
  CHECK(main.config["quoted"] == "6");
  REQUIRE(cfg.warnings.size() == 1);
  CHECK(cfg.warnings[0]
        == "test.yaml:8: http.ca_path: environment variable MISSING is not "
           "set; using an empty value");
}

// -- overrides ----------------------------------------------------------------

TEST_CASE("config overrides") {
  auto res = load_text("log:\n  level: info\nllm:\n  providers:\n"
                       "    main:\n      plugin: openai\n      model: a\n",
                       {"log.level=debug", "plugins.dirs=[a, b]", "http.connect_timeout = 2s",
                        "llm.providers.main.model=gpt-4o", "llm.providers.fast.plugin=anthropic",
                        "llm.providers.fast.api_key=${KEY}", "llm.default=main",
                        "http.user_agent=Quarry: test",
                        "runtime.data_dir=", "llm.roles={orchestrator: fast}",
                        "tools.web_search.plugin=brave", "tools.web_search.count=5"},
                       {{"KEY", "sk-override"}});
  const auto& v = ok(res).values;
  CHECK(v.log.level == "debug");
  CHECK(v.plugins.dirs == std::vector<std::string>{"a", "b"});
  CHECK(v.http.connect_timeout == 2s);
  CHECK(v.http.user_agent == "Quarry: test");
  CHECK(v.runtime.data_dir.empty());
  REQUIRE(v.llm.providers.size() == 2);
  CHECK(v.llm.providers.at("main").config["model"] == "gpt-4o");
  CHECK(v.llm.providers.at("main").file == "test.yaml");
  CHECK(v.llm.providers.at("main").line == 5);
  CHECK(v.llm.providers.at("fast").plugin == "anthropic");
  CHECK(v.llm.providers.at("fast").file == "--set");
  CHECK(v.llm.providers.at("fast").config["api_key"] == "sk-override");
  CHECK(v.llm.roles.at("orchestrator") == "fast");
  CHECK(v.tools.at("web_search").plugin == "brave");
  CHECK(v.tools.at("web_search").config["count"] == 5);
  // Overrides on the embedded defaults.
  load_options opts;
  opts.getenv = stub_env({});
  opts.overrides = {"http.verify_tls=off"};
  auto res2 = load_config(opts);
  CHECK(ok(res2).values.http.verify_tls == false);
  CHECK(ok(res2).source == "embedded defaults");
  // An override can fix a wrong value in the file.
  auto res3 = load_text("log: loud\n", {"log.level=warn"});
  CHECK(ok(res3).values.log.level == "warn");
}

TEST_CASE("config override errors") {
  auto res = load_text("",
                       {"log.levle=debug", "log.level=loud", "http.max_redirects=[1, 2",
                        "no-equals-sign", "=value", "http..proxy=x", "http.connect_timeout=fast"});
  INFO(all_errors(res));
  REQUIRE(res.errors.size() == 7);
  // Syntax errors come first (while reading), validation errors after.
  CHECK(res.errors[0].to_string()
        == "--set: http.max_redirects: invalid YAML value: end of sequence "
           "flow not found");
  CHECK(res.errors[1].to_string() == "--set: malformed override #4: expected key.path=value");
  CHECK(res.errors[2].to_string() == "--set: malformed override #5: the key is empty");
  CHECK(res.errors[3].to_string()
        == "--set: http..proxy: malformed override #6: empty key segment");
  CHECK(res.errors[4].to_string() == "--set: log.levle: unknown key; did you mean `log.level`?");
  CHECK(res.errors[5].to_string()
        == "--set: log.level: must be one of trace|debug|info|warn|error|off, "
           "got \"loud\"");
  CHECK(res.errors[6].key == "http.connect_timeout");
  CHECK(res.errors[6].file == "--set");
  CHECK(res.errors[6].line == 0);
  // Overrides are checked together with the file.
  auto res2 = load_text("log:\n  level: loud\n", {"log.format=xml"});
  REQUIRE(res2.errors.size() == 2);
  CHECK(res2.errors[0].file == "test.yaml");
  CHECK(res2.errors[1].file == "--set");
}

// -- secrets ------------------------------------------------------------------

TEST_CASE("config secrets are redacted in render_yaml") {
  auto res = load_text(full_config);
  const auto& cfg = ok(res);
  auto yaml = cfg.render_yaml();
  INFO(yaml);
  for (auto secret : {"sk-main-secret", "tok-hidden", "brave-secret", "pa55"})
    CHECK_FALSE(contains(yaml, secret));
  CHECK(contains(yaml, "      api_key: \"***\"\n"));
  CHECK(contains(yaml, "        x_auth_token: \"***\"\n"));
  CHECK(contains(yaml, "  proxy: \"***\"\n"));
  // Empty secrets stay visible as empty.
  CHECK(contains(yaml, "    fast:\n      plugin: anthropic\n      api_key: \"\"\n"));
  // Non-secrets are shown.
  CHECK(contains(yaml, "      model: gpt-4o\n"));
  CHECK(contains(yaml, "  user_agent: \"Quarry/0.1 (test)\"\n"));
  // The redacted tree matches.
  auto red = cfg.redacted();
  CHECK(red["llm"]["providers"]["main"]["api_key"] == "***");
  CHECK(red["llm"]["providers"]["fast"]["api_key"] == "");
  CHECK(red["tools"]["web_search"]["api_key"] == "***");
  CHECK(red["http"]["proxy"] == "***");
  CHECK(red["llm"]["providers"]["main"]["model"] == "gpt-4o");
  // The effective tree keeps the real values for the program.
  CHECK(cfg.effective["llm"]["providers"]["main"]["api_key"] == "sk-main-secret");
}

TEST_CASE("config render_yaml round-trips") {
  auto res = load_text(full_config);
  const auto& cfg = ok(res);
  auto yaml = cfg.render_yaml();
  auto again = load_text(yaml);
  INFO(yaml);
  const auto& cfg2 = ok(again);
  CHECK(cfg2.effective == cfg.redacted());
  // Order follows the schema, plugin first in instances.
  auto runtime = yaml.find("runtime:");
  auto log = yaml.find("\nlog:");
  auto tools = yaml.find("\ntools:");
  CHECK(runtime < log);
  CHECK(log < tools);
  CHECK(contains(yaml, "    main:\n      plugin: openai\n"));
  CHECK(contains(yaml, "  max_response_bytes: 1GiB\n"));
  CHECK(contains(yaml, "  stall_timeout: 1500ms\n"));
  // Defaults round-trip, too.
  load_options opts;
  opts.getenv = stub_env({});
  auto defaults = load_config(opts);
  auto again2 = load_text(ok(defaults).render_yaml());
  CHECK(ok(again2).effective == to_json(settings{}));
  // Strings that look like other types stay strings.
  auto tricky = load_text("tools:\n  t:\n    plugin: p\n    a: \"true\"\n"
                          "    b: \"12\"\n    c: \"\"\n    d: \"x: y\"\n"
                          "    e: \"~\"\n    f: \"***\"\n    g: [1, \"1\", {h: i}]\n"
                          "    'odd key': 1.5e3\n    $k: \"$${X} $$ $\"\n"
                          "    l: [\"$${Y}\", {m: \"$$\"}]\n");
  const auto& tricky_cfg = ok(tricky);
  CHECK(tricky_cfg.values.tools.at("t").config["$k"] == "${X} $ $");
  auto again3 = load_text(tricky_cfg.render_yaml());
  INFO(tricky_cfg.render_yaml());
  CHECK(ok(again3).effective == tricky_cfg.effective);
}

TEST_CASE("config render_yaml quotes and escapes through the YAML emitter") {
  // A file may write any character with YAML's escapes; the rendered file
  // must load again (Quarry's loader refuses raw control characters) and
  // give the same values.
  const std::string odd
    = std::string{"tab\there \x7f del \x01 one, \"quote\" 'single' "}
      + "\\ back: slash # hash \xC2\x85 next-line \xE2\x80\xA8 sep \xE6\x97\xA5";
  auto res = load_text("tools:\n  t:\n    plugin: p\n"
                       "    v: \"tab\\there \\x7f del \\x01 one, \\\"quote\\\" 'single' "
                       "\\\\ back: slash # hash \\x85 next-line \\u2028 sep \\u65E5\"\n"
                       "    nested: [[a, [b]], {}, [], {k: [1, {z: null}]}]\n"
                       "    flag: true\n    num: -0.5\n");
  const auto& cfg = ok(res);
  REQUIRE(cfg.values.tools.at("t").config["v"] == odd);
  auto yaml = cfg.render_yaml();
  INFO(yaml);
  CHECK(yaml.find('\x7f') == std::string::npos);
  CHECK(yaml.find('\x01') == std::string::npos);
  CHECK(contains(yaml, "    flag: true\n"));
  CHECK(contains(yaml, "    num: -0.5\n"));
  auto again = load_text(yaml);
  CHECK(ok(again).effective == cfg.effective);
}

TEST_CASE("config secrets never appear in errors or warnings") {
  const std::string secret = "SUPERSECRETVALUE";
  std::vector<load_result> results;
  // A wrong-typed secret schema key.
  results.push_back(load_text("http:\n  proxy: {user: " + secret + "}\n"));
  // A malformed reference inside a secret.
  results.push_back(load_text("tools:\n  t:\n    plugin: p\n    api_key: \"" + secret + "${\"\n"));
  results.push_back(
    load_text("tools:\n  t:\n    plugin: p\n    api_key: " + secret + "${bad name}\n"));
  // An unknown key holding a secret.
  results.push_back(load_text("htpp:\n  proxy: " + secret + "\n"));
  // Overrides with a secret and a wrong separator or a bad value.
  results.push_back(load_text("", {"tools.t.api_key:" + secret}));
  results.push_back(load_text("", {"tools.t.api_key=[" + secret}));
  results.push_back(load_text("", {"http.proxy={" + secret + ": 1}"}));
  // A secret from the environment in a wrong-typed place.
  results.push_back(load_text("http:\n  proxy: [${S}]\n", {}, {{"S", secret}}));
  for (const auto& res : results) {
    INFO(all_errors(res));
    CHECK_FALSE(res.errors.empty());
    for (const auto& err : res.errors)
      CHECK_FALSE(contains(err.to_string(), secret));
  }
  // Warnings name the variable and the key, never values.
  auto res = load_text("tools:\n  t:\n    plugin: p\n    token: ${TOKEN}\n"
                       "    api_key: ${KEY}\n",
                       {}, {{"KEY", secret}});
  const auto& cfg = ok(res);
  REQUIRE(cfg.warnings.size() == 1);
  CHECK(cfg.warnings[0]
        == "test.yaml:4: tools.t.token: environment variable TOKEN is not "
           "set; using an empty value");
  CHECK_FALSE(contains(cfg.render_yaml(), secret));
}

// -- files --------------------------------------------------------------------

TEST_CASE("config file lookup order") {
  temp_dir tmp;
  auto explicit_file = tmp.write("explicit.yaml", "log: {level: error}\n");
  auto env_file = tmp.write("env.yaml", "log: {level: warn}\n");
  auto xdg_file = tmp.write("xdg/quarry/quarry.yaml", "log: {level: debug}\n");
  auto home_file = tmp.write("home/.config/quarry/quarry.yaml", "log: {level: trace}\n");
  auto xdg = (tmp.path() / "xdg").string();
  auto home = (tmp.path() / "home").string();
  auto load = [](std::optional<std::string> file, env_map env) {
    load_options opts;
    opts.file = std::move(file);
    opts.getenv = stub_env(std::move(env));
    return load_config(opts);
  };
  env_map all{{"QUARRY_CONFIG", env_file}, {"XDG_CONFIG_HOME", xdg}, {"HOME", home}};
  // --config wins.
  auto r1 = load(explicit_file, all);
  CHECK(ok(r1).source == explicit_file);
  CHECK(ok(r1).values.log.level == "error");
  // Then $QUARRY_CONFIG.
  auto r2 = load(std::nullopt, all);
  CHECK(ok(r2).source == env_file);
  CHECK(ok(r2).values.log.level == "warn");
  // Then $XDG_CONFIG_HOME/quarry/quarry.yaml.
  auto r3 = load(std::nullopt, {{"XDG_CONFIG_HOME", xdg}, {"HOME", home}});
  CHECK(ok(r3).source == xdg_file);
  CHECK(ok(r3).values.log.level == "debug");
  // Then ~/.config/quarry/quarry.yaml when $XDG_CONFIG_HOME is unset or empty.
  auto r4 = load(std::nullopt, {{"XDG_CONFIG_HOME", ""}, {"HOME", home}});
  CHECK(ok(r4).source == home_file);
  CHECK(ok(r4).values.log.level == "trace");
  // Then the embedded defaults.
  auto r5 = load(std::nullopt, {{"XDG_CONFIG_HOME", xdg + "/nothing"}, {"HOME", home}});
  CHECK(ok(r5).source == "embedded defaults");
  CHECK(ok(r5).values.log.level == "info");
  auto r6 = load(std::nullopt, {});
  CHECK(ok(r6).source == "embedded defaults");
  load_options opts;
  opts.getenv = stub_env({{"HOME", home}});
  CHECK(find_config_file(opts) == home_file);
  // Errors name the file that was read.
  auto bad = tmp.write("bad.yaml", "log:\n  level: nope\n");
  auto r7 = load(bad, {});
  REQUIRE(r7.errors.size() == 1);
  CHECK(r7.errors[0].file == bad);
  CHECK(r7.errors[0].line == 2);
}

TEST_CASE("config missing files") {
  temp_dir tmp;
  auto missing = (tmp.path() / "nope.yaml").string();
  load_options opts;
  opts.file = missing;
  opts.getenv = stub_env({});
  auto err = single_error(load_config(opts));
  CHECK(err.file == missing);
  CHECK(err.line == 0);
  CHECK(contains(err.message, "cannot read the configuration file"));
  CHECK(contains(err.to_string(), missing));
  // A missing $QUARRY_CONFIG is an error, too (no silent fallback).
  load_options opts2;
  opts2.getenv = stub_env({{"QUARRY_CONFIG", missing}});
  auto err2 = single_error(load_config(opts2));
  CHECK(err2.file == missing);
  // A folder is not a file.
  load_options opts3;
  opts3.file = tmp.path().string();
  opts3.getenv = stub_env({});
  auto err3 = single_error(load_config(opts3));
  CHECK(contains(err3.message, "directory"));
}

TEST_CASE("config hostile input is rejected cleanly") {
  // Self-referencing and exponential aliases.
  auto e1 = single_error(load_text("tools:\n  t: &a\n    plugin: p\n    x: [*a]\n"));
  CHECK(e1.to_string()
        == "test.yaml:4: tools.t.x[0]: an alias refers to a node that "
           "contains it");
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c)
    bomb += std::string{c} + ": &" + c + " [*" + static_cast<char>(c - 1) + ", *"
            + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *"
            + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *"
            + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *"
            + static_cast<char>(c - 1) + "]\n";
  auto e2 = single_error(load_text(bomb));
  CHECK(contains(e2.message, "too many values"));
  // Deep nesting.
  auto e3 = single_error(load_text(std::string(100, '[') + std::string(100, ']')));
  CHECK(contains(e3.message, "nested deeper than 64 levels"));
  // Invalid UTF-8 and control characters.
  auto err = single_error(load_text("log:\n  level: \xff\n"));
  CHECK(err.line == 2);
  auto err2 = single_error(load_text(std::string_view{"log: {level: \0}", 15}));
  CHECK(err2.line == 1);
  // Input on which YAML::LoadAll would loop forever.
  CHECK_FALSE(load_text("   , \nb}").errors.empty());
  // Non-string keys.
  auto err3 = single_error(load_text("? [a, b]\n: 1\nlog: {}\n"));
  CHECK(err3.message == "keys must be non-empty strings, got a list");
  CHECK(err3.line == 1);
}

// -- the documented default file and the docs ---------------------------------

TEST_CASE("config quarry.yaml equals the embedded defaults") {
  auto text = read_source_file("config/quarry.yaml");
  auto res = load_config_text(text, "config/quarry.yaml", load_options{{}, {}, stub_env({})});
  const auto& cfg = ok(res);
  CHECK(cfg.warnings.empty());
  CHECK(cfg.effective == to_json(settings{}));
  // Loading the file by path works the same.
  load_options opts;
  opts.file = std::string{QUARRY_SOURCE_DIR} + "/config/quarry.yaml";
  opts.getenv = stub_env({});
  auto res2 = load_config(opts);
  CHECK(ok(res2).effective == to_json(settings{}));
}

TEST_CASE("config quarry.yaml documents every key") {
  auto text = read_source_file("config/quarry.yaml");
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  // Finds `name:` at exactly `indent` spaces within [first, last).
  auto find_key = [&](const std::string& name, size_t indent, size_t first,
                      size_t last) -> std::optional<size_t> {
    auto prefix = std::string(indent, ' ') + name + ":";
    for (auto i = first; i < last; ++i) {
      const auto& line = lines[i];
      if (line.compare(0, prefix.size(), prefix) == 0
          && (line.size() == prefix.size() || line[prefix.size()] == ' '))
        return i;
    }
    return std::nullopt;
  };
  for (const auto& key : config_schema()) {
    INFO(key.path);
    size_t first = 0;
    size_t last = lines.size();
    size_t indent = 0;
    std::string_view path = key.path;
    std::optional<size_t> at;
    while (true) {
      auto dot = path.find('.');
      auto name = std::string{path.substr(0, dot)};
      at = find_key(name, indent, first, last);
      REQUIRE(at.has_value());
      if (dot == std::string_view::npos)
        break;
      // The section ends at the next line with less or equal indentation.
      first = *at + 1;
      for (auto i = first; i < last; ++i) {
        const auto& line = lines[i];
        auto text_start = line.find_first_not_of(' ');
        if (text_start == std::string::npos || line[text_start] == '#')
          continue;
        if (text_start <= indent) {
          last = i;
          break;
        }
      }
      indent += 2;
      path.remove_prefix(dot + 1);
    }
    // The key is documented by a comment right above it.
    REQUIRE(*at > 0);
    auto above = lines[*at - 1];
    auto comment = above.find_first_not_of(' ');
    CHECK((comment != std::string::npos && above[comment] == '#'));
  }
}

TEST_CASE("config docs list every key") {
  auto text = read_source_file("docs/configuration.md");
  for (const auto& key : config_schema()) {
    INFO(key.path);
    CHECK(contains(text, "`" + key.path + "`"));
  }
}

// -- embedded defaults from the environment ------------------------------------

namespace {

loaded_config with_env_defaults(std::string_view yaml, env_map env) {
  auto res = load_text(yaml);
  INFO(all_errors(res));
  REQUIRE(res.config.has_value());
  auto cfg = std::move(*res.config);
  apply_environment_defaults(cfg, stub_env(std::move(env)));
  return cfg;
}

} // namespace

TEST_CASE("environment defaults: OpenAI from OPENAI_API_KEY, shown masked with their origin") {
  auto cfg = with_env_defaults("", {{"OPENAI_API_KEY", "sk-env-secret-1234"},
                                    {"OPENAI_MODEL", "gpt-test"},
                                    {"BRAVE_API_KEY", "brave-secret-5678"}});
  const auto& p = cfg.values.llm.providers.at("default");
  CHECK(p.plugin == "openai");
  CHECK(p.config["api_key"] == "sk-env-secret-1234");
  CHECK(p.config["model"] == "gpt-test");
  CHECK_FALSE(p.config.contains("base_url"));
  CHECK(cfg.values.llm.default_provider == "default");
  CHECK(cfg.values.tools.at("web_search").plugin == "brave");
  CHECK(cfg.values.tools.at("open_url").plugin == "open_url");
  // The effective tree, the secrets and the rendered YAML include them.
  CHECK(cfg.effective["llm"]["providers"]["default"]["plugin"] == "openai");
  auto secrets = cfg.secret_values();
  CHECK(std::find(secrets.begin(), secrets.end(), "sk-env-secret-1234") != secrets.end());
  CHECK(std::find(secrets.begin(), secrets.end(), "brave-secret-5678") != secrets.end());
  auto yaml = cfg.render_yaml();
  CHECK(yaml.find("sk-env-secret-1234") == std::string::npos);
  CHECK(yaml.find("# llm.providers.default: added by the embedded defaults: "
                  "OpenAI (gpt-test) from OPENAI_API_KEY")
        != std::string::npos);
  CHECK(yaml.find("# tools.web_search: added by the embedded defaults: web search "
                  "with Brave (BRAVE_API_KEY)")
        != std::string::npos);
  // The rendered configuration loads again.
  CHECK(load_text(yaml).config.has_value());
}

TEST_CASE("environment defaults: OPENAI_BASE_URL without a key uses openai without a key") {
  auto cfg = with_env_defaults("", {{"OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"},
                                    {"OPENAI_MODEL", "llama3.2"},
                                    {"ANTHROPIC_API_KEY", "sk-ant-unused"}});
  const auto& p = cfg.values.llm.providers.at("default");
  CHECK(p.plugin == "openai");
  CHECK(p.config["base_url"] == "http://127.0.0.1:11434/v1");
  CHECK(p.config["model"] == "llama3.2");
  CHECK_FALSE(p.config.contains("api_key"));
  REQUIRE(cfg.environment_defaults.size() == 1);
  CHECK(cfg.environment_defaults[0].description.find("no key is sent") != std::string::npos);
}

TEST_CASE("environment defaults: Anthropic, Tavily, the extractive fallback, and empty variables") {
  auto ant = with_env_defaults("", {{"ANTHROPIC_API_KEY", "sk-ant-1234567"},
                                    {"ANTHROPIC_BASE_URL", "http://127.0.0.1:1"},
                                    {"OPENAI_API_KEY", ""},
                                    {"TAVILY_API_KEY", "tvly-1234567"}});
  CHECK(ant.values.llm.providers.at("default").plugin == "anthropic");
  CHECK(ant.values.llm.providers.at("default").config["base_url"] == "http://127.0.0.1:1");
  CHECK(ant.values.llm.providers.at("default").config["model"] == "claude-sonnet-4-5");
  CHECK(ant.values.tools.at("web_search").plugin == "tavily");
  auto offline = with_env_defaults("", {});
  CHECK(offline.values.llm.providers.at("default").plugin == "extractive");
  CHECK(offline.values.tools.empty());
  CHECK(offline.environment_defaults.size() == 1);
}

TEST_CASE("environment defaults: a local Ollama model from OLLAMA_HOST and OLLAMA_MODEL") {
  auto cfg = with_env_defaults("", {{"OLLAMA_HOST", "0.0.0.0"}, {"OLLAMA_MODEL", "qwen3:8b"}});
  const auto& p = cfg.values.llm.providers.at("default");
  CHECK(p.plugin == "openai");
  CHECK(p.config["base_url"] == "http://0.0.0.0:11434/v1");
  CHECK(p.config["model"] == "qwen3:8b");
  CHECK_FALSE(p.config.contains("api_key"));
  CHECK(cfg.environment_defaults[0].description
        == "the Ollama server at http://0.0.0.0:11434/v1 (model qwen3:8b from OLLAMA_MODEL)");
  // The model alone: Ollama's usual address; the host alone: a default model.
  auto model_only = with_env_defaults("", {{"OLLAMA_MODEL", "mistral"}});
  CHECK(model_only.values.llm.providers.at("default").config["base_url"]
        == "http://127.0.0.1:11434/v1");
  auto host_only = with_env_defaults("", {{"OLLAMA_HOST", "https://gpu.example.com"}});
  CHECK(host_only.values.llm.providers.at("default").config["model"] == "llama3.2");
  CHECK(host_only.values.llm.providers.at("default").config["base_url"]
        == "https://gpu.example.com:443/v1");
  // OpenAI and Anthropic, named explicitly, come first.
  auto both = with_env_defaults("",
                                {{"OLLAMA_MODEL", "mistral"}, {"ANTHROPIC_API_KEY", "sk-a-123"}});
  CHECK(both.values.llm.providers.at("default").plugin == "anthropic");
  CHECK(ollama_base_url("") == "http://127.0.0.1:11434/v1");
  CHECK(ollama_base_url("10.0.0.5:8080") == "http://10.0.0.5:8080/v1");
  CHECK(ollama_base_url("http://box/") == "http://box:11434/v1");
  CHECK(ollama_base_url("[::1]") == "http://[::1]:11434/v1");
  CHECK(ollama_base_url("[::1]:9000") == "http://[::1]:9000/v1");
}

TEST_CASE("environment defaults: Exa, Serper and SearXNG add web search in that order") {
  auto exa = with_env_defaults("", {{"EXA_API_KEY", "exa-123456"},
                                    {"SERPER_API_KEY", "serper-123456"},
                                    {"SEARXNG_URL", "http://127.0.0.1:8888"}});
  CHECK(exa.values.tools.at("web_search").plugin == "exa");
  CHECK(exa.values.tools.at("web_search").config["api_key"] == "exa-123456");
  CHECK(exa.values.tools.at("open_url").plugin == "open_url");
  auto serper = with_env_defaults("", {{"SERPER_API_KEY", "serper-123456"},
                                       {"SEARXNG_URL", "http://127.0.0.1:8888"}});
  CHECK(serper.values.tools.at("web_search").plugin == "serper");
  auto searxng = with_env_defaults("", {{"SEARXNG_URL", "http://127.0.0.1:8888"}});
  CHECK(searxng.values.tools.at("web_search").plugin == "searxng");
  CHECK(searxng.values.tools.at("web_search").config["base_url"] == "http://127.0.0.1:8888");
  auto secrets = exa.secret_values();
  CHECK(std::find(secrets.begin(), secrets.end(), "exa-123456") != secrets.end());
  auto brave = with_env_defaults("", {{"BRAVE_API_KEY", "b-123456"}, {"EXA_API_KEY", "e-123456"}});
  CHECK(brave.values.tools.at("web_search").plugin == "brave");
}

TEST_CASE("environment defaults never replace configured providers or tools") {
  auto cfg = with_env_defaults("llm:\n  providers:\n    mine:\n      plugin: extractive\n"
                               "tools:\n  s:\n    plugin: searxng\n",
                               {{"OPENAI_API_KEY", "sk-1234567890"},
                                {"BRAVE_API_KEY", "b-1234567890"}});
  CHECK(cfg.values.llm.providers.size() == 1);
  CHECK(cfg.values.llm.providers.count("mine") == 1);
  CHECK(cfg.values.tools.size() == 1);
  CHECK(cfg.environment_defaults.empty());
  CHECK(cfg.render_yaml().find("embedded defaults:") == std::string::npos);
}

// -- checks of plugin instances ------------------------------------------------

namespace {

std::optional<std::vector<std::string>> test_plugin_keys(const std::string& plugin) {
  if (plugin == "openai")
    return std::vector<std::string>{"base_url", "api_key", "model", "context_window"};
  if (plugin == "brave")
    return std::vector<std::string>{"api_key", "max_results"};
  if (plugin == "searxng") // its own `timeout`: one search request
    return std::vector<std::string>{"base_url", "timeout"};
  return std::nullopt;
}

std::vector<config_error> check_yaml(std::string_view yaml, std::vector<std::string> overrides = {},
                                     std::vector<config_error>* warnings = nullptr,
                                     settings* checked = nullptr) {
  auto res = load_text(yaml, std::move(overrides));
  INFO(all_errors(res));
  REQUIRE(res.config.has_value());
  auto errors = check_instances(res.config->values, test_plugin_keys, warnings);
  if (checked != nullptr)
    *checked = res.config->values;
  return errors;
}

std::string joined(const std::vector<config_error>& errors) {
  std::string out;
  for (const auto& err : errors)
    out += err.to_string() + "\n";
  return out;
}

} // namespace

TEST_CASE("instance checks report every bad limit of an older file at its line, all at once") {
  auto errors = check_yaml("llm:\n"                      // 1
                           "  providers:\n"              // 2
                           "    main:\n"                 // 3
                           "      plugin: openai\n"      // 4
                           "      model: m\n"            // 5
                           "      max_retries: -5\n"     // 6
                           "      max_concurrency: -3\n" // 7
                           "      stall_timeout: 0s\n"   // 8
                           "      retries: 0\n"          // 9
                           "      context_windw: 1000\n" // 10
                           "      prices: {input: -1}\n" // 11
                           "tools:\n"                    // 12
                           "  web_search:\n"             // 13
                           "    plugin: brave\n"         // 14
                           "    timeout: banana\n"       // 15
                           "    max_reslts: 5\n"         // 16
                           "    cache_entries: 1.5\n");  // 17
  auto text = joined(errors);
  INFO(text);
  CHECK(errors.size() == 9);
  CHECK(text.find("test.yaml:6: llm.providers.main.max_retries: must be an integer "
                  "from 0 to 100, got -5\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:7: llm.providers.main.max_concurrency: must be an "
                  "integer from 1 to 10000, got -3\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:8: llm.providers.main.stall_timeout: must be longer "
                  "than 0, got \"0s\"\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:9: llm.providers.main.retries: unknown key; did you "
                  "mean `llm.providers.main.limits.max_retries`?\n")
        != std::string::npos);
  // context_window is an option of the plugin (the model's window).
  CHECK(text.find("test.yaml:10: llm.providers.main.context_windw: unknown key; did "
                  "you mean `llm.providers.main.context_window`?\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:11: llm.providers.main.prices: ") != std::string::npos);
  CHECK(text.find("test.yaml:15: tools.web_search.timeout: expected a duration such "
                  "as 30s or 500ms, got \"banana\"\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:16: tools.web_search.max_reslts: unknown key; did you "
                  "mean `tools.web_search.max_results`?\n")
        != std::string::npos);
  CHECK(text.find("test.yaml:17: tools.web_search.cache_entries: expected an "
                  "integer")
        != std::string::npos);
  // In the order of the file.
  for (size_t i = 1; i < errors.size(); ++i)
    CHECK(errors[i - 1].line <= errors[i].line);
}

TEST_CASE("instance checks accept good values and leave unknown plugins' keys to them") {
  auto errors = check_yaml("llm:\n"
                           "  providers:\n"
                           "    main:\n"
                           "      plugin: openai\n"
                           "      model: m\n"
                           "      context_window: 32768\n"
                           "      max_retries: 0\n"
                           "      max_concurrency: 4\n"
                           "      stall_timeout: 30\n"
                           "      total_timeout: 10m\n"
                           "      retry_base: 500ms\n"
                           "      requests_per_minute: 60\n"
                           "      prices: {gpt-x: {input: 1.5, output: 6}}\n"
                           "tools:\n"
                           "  mine:\n"
                           "    plugin: my_own_plugin\n"
                           "    anything: goes\n"
                           "    cache_ttl: 0s\n"
                           "    timeout: 2m\n");
  CHECK(joined(errors).empty());
}

TEST_CASE("instance checks name --set for overridden keys") {
  auto errors = check_yaml("", {"llm.providers.main.plugin=openai", "llm.providers.main.model=m",
                                "llm.providers.main.max_retries=-1"});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].to_string()
        == "--set: llm.providers.main.max_retries: must be an integer from 0 to "
           "100, got -1");
}

TEST_CASE("closest_name suggests only likely typos") {
  std::vector<std::string> keys{"max_retries", "model", "base_url"};
  CHECK(closest_name("retries", keys) == "max_retries");
  CHECK(closest_name("modle", keys) == "model");
  CHECK(closest_name("base-url", keys) == "base_url");
  CHECK(closest_name("temperature", keys).empty());
}

// -- limits: Quarry's own keys of an instance -----------------------------------

TEST_CASE("config limits are read from `limits:`, typed, apart from the plugin's options") {
  auto res = load_text("llm:\n"
                       "  providers:\n"
                       "    main:\n"
                       "      plugin: openai\n"
                       "      model: m\n"
                       "      limits:\n"
                       "        max_concurrency: 4\n"
                       "        max_retries: 0\n"
                       "        stall_timeout: 90\n"
                       "        total_timeout: 2m\n"
                       "        requests_per_minute: 60\n"
                       "        prices: {gpt-x: {input: 1.5, output: 6}}\n"
                       "tools:\n"
                       "  web_search:\n"
                       "    plugin: brave\n"
                       "    api_key: k\n"
                       "    limits: {timeout: 45s, cache_ttl: 0s, cache_entries: 3}\n"
                       "  open_url:\n"
                       "    plugin: open_url\n"
                       "    limits:\n");
  const auto& cfg = ok(res);
  const auto& main = cfg.values.llm.providers.at("main");
  CHECK(main.config == nlohmann::json{{"model", "m"}});
  CHECK(main.limits.max_concurrency == 4);
  CHECK(main.limits.max_retries == 0);
  CHECK(main.limits.stall_timeout == 90s);
  CHECK(main.limits.total_timeout == 2min);
  CHECK(main.limits.requests_per_minute == 60);
  CHECK(main.limits.retry_base == llm_limits{}.retry_base);
  CHECK(main.limits.model_prices.at("gpt-x").output == 6);
  CHECK(main.location_of("limits.max_retries") == std::pair<std::string, int>{"test.yaml", 8});
  const auto& ws = cfg.values.tools.at("web_search");
  CHECK(ws.config == nlohmann::json{{"api_key", "k"}});
  CHECK(ws.limits.timeout == 45s);
  CHECK(ws.limits.cache_ttl == 0s);
  CHECK(ws.limits.cache_entries == 3u);
  CHECK(ws.limits.max_concurrency == tool_limits{}.max_concurrency);
  CHECK(cfg.values.tools.at("open_url").limits.timeout == tool_limits{}.timeout);
  // The effective configuration shows every limit; it loads again to the same.
  CHECK(cfg.effective["llm"]["providers"]["main"]["limits"]["max_retries"] == 0);
  CHECK(cfg.effective["llm"]["providers"]["main"]["limits"]["retry_base"] == "500ms");
  CHECK(cfg.effective["tools"]["web_search"]["limits"]["timeout"] == "45s");
  CHECK_FALSE(cfg.effective["tools"]["web_search"].contains("timeout"));
  auto again = load_text(cfg.render_yaml());
  INFO(cfg.render_yaml());
  CHECK(ok(again).effective == cfg.redacted());
  // --set reaches them too.
  auto set = load_text("", {"tools.t.plugin=p", "tools.t.limits.max_concurrency=2"});
  CHECK(ok(set).values.tools.at("t").limits.max_concurrency == 2);
}

TEST_CASE("config limits: every bad value and unknown key at its line, with did-you-mean") {
  auto res = load_text("llm:\n"                        // 1
                       "  providers:\n"                // 2
                       "    main:\n"                   // 3
                       "      plugin: openai\n"        // 4
                       "      limits:\n"               // 5
                       "        max_retries: -5\n"     // 6
                       "        retries: 2\n"          // 7
                       "        stall_timeout: 0s\n"   // 8
                       "        prices: {input: -1}\n" // 9
                       "tools:\n"                      // 10
                       "  web_search:\n"               // 11
                       "    plugin: brave\n"           // 12
                       "    limits:\n"                 // 13
                       "      timeout: banana\n"       // 14
                       "      cache_entries: 1.5\n"    // 15
                       "      model: m\n"              // 16
                       "  open_url:\n"                 // 17
                       "    plugin: open_url\n"        // 18
                       "    limits: 5\n",              // 19
                       {"llm.providers.main.limits.max_concurrency=0"});
  auto text = all_errors(res);
  INFO(text);
  REQUIRE_FALSE(res.config.has_value());
  CHECK(res.errors.size() == 9);
  CHECK(contains(text, "test.yaml:6: llm.providers.main.limits.max_retries: must be an "
                       "integer from 0 to 100, got -5"));
  CHECK(contains(text, "test.yaml:7: llm.providers.main.limits.retries: unknown key; "
                       "did you mean `llm.providers.main.limits.max_retries`?"));
  CHECK(contains(text, "test.yaml:8: llm.providers.main.limits.stall_timeout: must be "
                       "longer than 0, got \"0s\""));
  CHECK(contains(text, "test.yaml:9: llm.providers.main.limits.prices: "));
  CHECK(contains(text, "--set: llm.providers.main.limits.max_concurrency: must be an "
                       "integer from 1 to 10000, got 0"));
  CHECK(contains(text, "test.yaml:14: tools.web_search.limits.timeout: expected a "
                       "duration such as 30s or 500ms, got \"banana\""));
  CHECK(contains(text, "test.yaml:15: tools.web_search.limits.cache_entries: expected "
                       "an integer"));
  CHECK(contains(text, "test.yaml:16: tools.web_search.limits.model: unknown key; the "
                       "limits are max_concurrency, timeout, max_retries, retry_base, "
                       "retry_max, cache_ttl, cache_entries"));
  CHECK(contains(text, "test.yaml:19: tools.open_url.limits: expected a map of "
                       "Quarry's limits"));
}

TEST_CASE("read_limits: the one reader of limits, for the loader and the actors") {
  llm_limits l;
  auto bad = [&](nlohmann::json j) {
    auto problems = read_limits(j, l);
    REQUIRE(problems.size() == 1);
    return problems[0].key + ": " + problems[0].message;
  };
  CHECK(bad({{"max_concurrency", 0}}).find("max_concurrency: must be") == 0);
  CHECK(bad({{"stall_timeout", "soon"}}).find("stall_timeout: expected a duration") == 0);
  CHECK(bad({{"prices", {{"input", -1}}}}).find("prices: ") == 0);
  CHECK(bad({{"max_retrys", 1}}) == "max_retrys: unknown key; did you mean `limits.max_retries`?");
  CHECK(bad(5).find(": expected a map") == 0);
  llm_limits good;
  CHECK(read_limits({{"max_concurrency", 3},
                     {"total_timeout", "2m"},
                     {"retry_base", 0.25},
                     {"prices", {{"gpt-4o", {{"input", 2.5}, {"output", 10}}}}}},
                    good)
          .empty());
  CHECK(good.max_concurrency == 3);
  CHECK(good.total_timeout == 2min);
  CHECK(good.retry_base == 250ms);
  CHECK(good.model_prices.at("gpt-4o").output == 10);
  tool_limits t;
  CHECK(read_limits({{"timeout", 5}, {"cache_ttl", "0s"}}, t).empty());
  CHECK(t.timeout == 5s);
  CHECK(t.cache_ttl == 0s);
  CHECK(read_limits(nlohmann::json(), t).empty());
  // Every key of the table is read, and only those.
  for (auto kind : {instance_kind::llm, instance_kind::tool})
    for (const auto& key : limit_keys(kind)) {
      INFO(key.name);
      CHECK(is_limit_key(kind, key.name));
    }
  CHECK_FALSE(is_limit_key(instance_kind::tool, "stall_timeout"));
  CHECK(is_limit_key(instance_kind::tool, "max_retries"));
  CHECK(read_limits({{"max_retries", 1}, {"retry_base", "250ms"}}, t).empty());
  CHECK(t.max_retries == 1);
  CHECK(t.retry_base == 250ms);
  CHECK_FALSE(read_limits({{"max_retries", -1}}, t).empty());
  CHECK_FALSE(is_limit_key(instance_kind::llm, "timeout"));
}

TEST_CASE(
  "instance checks: an older file's limits beside the options keep working, with a warning saying what to write") {
  std::vector<config_error> warnings;
  settings checked;
  auto errors = check_yaml("llm:\n"                 // 1
                           "  providers:\n"         // 2
                           "    main:\n"            // 3
                           "      plugin: openai\n" // 4
                           "      model: m\n"       // 5
                           "      max_retries: 2\n" // 6
                           "tools:\n"               // 7
                           "  web_search:\n"        // 8
                           "    plugin: searxng\n"  // 9
                           "    timeout: 20\n"      // 10
                           "  mine:\n"              // 11
                           "    plugin: my_own\n"   // 12
                           "    cache_ttl: 0s\n",   // 13
                           {}, &warnings, &checked);
  CHECK(joined(errors).empty());
  auto text = joined(warnings);
  INFO(text);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].to_string()
        == "test.yaml:6: llm.providers.main.max_retries: Quarry's limits now go "
           "under `limits:`; write `limits: {max_retries: 2}` instead (read as "
           "llm.providers.main.limits.max_retries until then)");
  CHECK(contains(warnings[1].to_string(), "test.yaml:13: tools.mine.cache_ttl: "));
  // Moved: the plugin no longer sees them; the actors get them.
  const auto& main = checked.llm.providers.at("main");
  CHECK(main.limits.max_retries == 2);
  CHECK(main.config == nlohmann::json{{"model", "m"}});
  CHECK(main.location_of("limits.max_retries") == std::pair<std::string, int>{"test.yaml", 6});
  CHECK(checked.tools.at("mine").limits.cache_ttl == 0s);
  CHECK_FALSE(checked.tools.at("mine").config.contains("cache_ttl"));
  // A plugin's own option of the same name stays the plugin's.
  const auto& ws = checked.tools.at("web_search");
  CHECK(ws.config["timeout"] == 20);
  CHECK(ws.limits.timeout == tool_limits{}.timeout);
}

TEST_CASE("instance checks: a limit both beside the options and under `limits:` is an error") {
  auto errors = check_yaml("llm:\n"
                           "  providers:\n"
                           "    main:\n"
                           "      plugin: openai\n"
                           "      model: m\n"
                           "      max_retries: 2\n"
                           "      limits: {max_retries: 3}\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].to_string()
        == "test.yaml:6: llm.providers.main.max_retries: is one of Quarry's limits "
           "and is also set under `limits:` (test.yaml:7); remove this one");
}

TEST_CASE("instance checks: options the plugin does not declare are refused") {
  auto errors = check_yaml("tools:\n"
                           "  web_search:\n"
                           "    plugin: brave\n"
                           "    api_key: k\n"
                           "    colour: blue\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].to_string()
        == "test.yaml:5: tools.web_search.colour: unknown key; `brave` reads only its "
           "own options and Quarry's `limits`");
}

TEST_CASE("config limits: the table, the defaults, quarry.yaml and the docs agree") {
  auto docs = read_source_file("docs/configuration.md");
  auto yaml = read_source_file("config/quarry.yaml");
  auto check = [&](instance_kind kind, const nlohmann::json& defaults) {
    for (const auto& key : limit_keys(kind)) {
      INFO(key.name);
      REQUIRE(defaults.contains(key.name));
      const auto& d = defaults[key.name];
      CHECK((d.is_string() ? d.get<std::string>() : d.dump()) == key.default_yaml);
      CHECK(contains(docs, "| `" + key.name + "` | `" + key.default_yaml + "` |"));
      CHECK(contains(yaml, "#         " + key.name + ": "));
    }
    CHECK(defaults.size() == limit_keys(kind).size());
  };
  check(instance_kind::llm, to_json(llm_limits{}));
  check(instance_kind::tool, to_json(tool_limits{}));
}

} // namespace config_test
