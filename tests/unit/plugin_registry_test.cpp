// Plugin loading: good plugins, every kind of broken plugin, pinning.

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include <sys/stat.h>
#include <unistd.h>

namespace plugin_registry_test {

using namespace quarry;

namespace {

std::string plugin_dir(const std::string& name) {
  return std::string{QUARRY_TEST_PLUGIN_DIR} + "/" + name;
}

struct registry_fixture {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;

  registry_fixture() {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
  }

  // Loads one folder of test plugins and returns the single error line.
  std::string error_of(const std::string& folder) {
    registry->load_directories({plugin_dir(folder)});
    REQUIRE(registry->plugins().size() == 1);
    const auto& info = registry->plugins().front();
    CHECK_FALSE(info.ok);
    return info.error;
  }
};

/// Sets QUARRY_TEST_PLUGIN_MARKER while it lives: test plugins built with
/// QUARRY_TEST_MARKER create that file from a static constructor, which runs
/// when (and only when) the library is loaded.
struct marker_env {
  std::string path;

  explicit marker_env(std::string file) : path(std::move(file)) {
    std::filesystem::remove(path);
    setenv("QUARRY_TEST_PLUGIN_MARKER", path.c_str(), 1);
  }

  ~marker_env() {
    unsetenv("QUARRY_TEST_PLUGIN_MARKER");
  }

  bool written() const {
    return std::filesystem::exists(path);
  }
};

/// Waits for a chat to finish and records what streamed.
struct recording_sink : sdk::chat_sink {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> deltas;
  std::optional<sdk::chat_result> result;
  std::optional<sdk::error> failure;

  void on_text(std::string_view delta) override {
    std::lock_guard<std::mutex> guard{mtx};
    deltas.emplace_back(delta);
  }
  void on_reasoning(std::string_view) override {
    // nop
  }
  void on_tool_call(const sdk::tool_call_delta&) override {
    // nop
  }
  void on_usage(const sdk::usage&) override {
    // nop
  }
  void on_done(const sdk::chat_result& res) override {
    std::lock_guard<std::mutex> guard{mtx};
    result = res;
    cv.notify_all();
  }
  void on_error(const sdk::error& err, bool) override {
    std::lock_guard<std::mutex> guard{mtx};
    failure = err;
    cv.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, std::chrono::seconds{10}, [this] { return result || failure; });
  }
};

} // namespace

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry loads good plugins") {
  auto problems = registry->load_directories({plugin_dir("good")});
  CHECK(problems.empty());
  REQUIRE(registry->plugins().size() == 2);
  const auto* echo = registry->find("echo");
  REQUIRE(echo != nullptr);
  CHECK(echo->ok);
  CHECK(echo->kind == sdk::plugin_kind::tool);
  CHECK(echo->version == "1.2.3");
  CHECK(echo->description == "Echoes its input (test plugin)");
  CHECK(echo->sdk_version == sdk::sdk_version);
  CHECK(echo->file.find("quarry_tp_echo.so") != std::string::npos);
  const auto* llm = registry->find("echo_llm");
  REQUIRE(llm != nullptr);
  CHECK(llm->kind == sdk::plugin_kind::llm);
  CHECK(registry->find("nothing") == nullptr);
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry creates working tools") {
  registry->load_directories({plugin_dir("good")});
  auto res = registry->make_tool("echo", {{"prefix", ">> "}}, "my_echo");
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(res));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(res);
  CHECK(tool->name() == "echo");
  CHECK(tool->definition().to_openai()["function"]["name"] == "echo");
  std::optional<sdk::tool_result> got;
  tool->run({{"text", "hello"}}, [&](sdk::tool_result r) { got = std::move(r); });
  REQUIRE(got.has_value());
  CHECK(got->llm_text == ">> hello (run 1)");
  REQUIRE(got->documents.size() == 1);
  CHECK(got->documents[0].url == "https://example.org/echo");
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry creates LLM providers that use the host pool") {
  registry->load_directories({plugin_dir("good")});
  auto res = registry->make_llm("echo_llm", nlohmann::json::object());
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::llm_provider>>(res));
  auto llm = std::get<std::shared_ptr<sdk::llm_provider>>(res);
  CHECK(llm->info().model == "echo-1");
  auto sink = std::make_shared<recording_sink>();
  sdk::chat_request req;
  req.messages.push_back({sdk::role::user, "one two three", {}, {}, {}, {}, {}});
  llm->chat(req, sink);
  REQUIRE(sink->wait());
  REQUIRE(sink->result.has_value());
  CHECK(sink->result->text == "one two three");
  CHECK(sink->deltas == std::vector<std::string>{"one ", "two ", "three"});
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin objects keep their library loaded after the registry is gone") {
  registry->load_directories({plugin_dir("good")});
  auto res = registry->make_tool("echo", {{"prefix", "pinned:"}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(res));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(res);
  registry.reset();
  // The vtable and code live in the plugin: this call crashes if the
  // library was unloaded with the registry.
  CHECK(tool->description() == "Repeats its arguments.");
  std::optional<sdk::tool_result> got;
  tool->run({{"text", "x"}}, [&](sdk::tool_result r) { got = std::move(r); });
  REQUIRE(got.has_value());
  CHECK(got->llm_text == "pinned:x (run 1)");
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry refuses a file that is not a shared object") {
  auto path = tmp.write("plugins/garbage.so", "this is not a library\n");
  auto err = registry->load_file(path);
  REQUIRE(err.has_value());
  CHECK(*err == path + ": not a shared object (no ELF header)");
  REQUIRE(registry->plugins().size() == 1);
  CHECK_FALSE(registry->plugins()[0].ok);
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry refuses a truncated ELF file with the loader's reason") {
  auto path = tmp.write("plugins/truncated.so", std::string{"\x7f"
                                                            "ELF\x02\x01\x01",
                                                            7}
                                                  + std::string(20, '\0'));
  auto err = registry->load_file(path);
  REQUIRE(err.has_value());
  CHECK(err->rfind(path + ": cannot load: ", 0) == 0);
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry refuses a library without entry point") {
  CHECK(error_of("no_entry") == "no entry symbol quarry_plugin_v4 (not a Quarry plugin)");
}

TEST_CASE_FIXTURE(
  registry_fixture,
  "plugin_registry checks a file before loading it: no static constructor of a refused file runs") {
  marker_env marker{tmp.file("marker")};
  SUBCASE("the control: loading runs the static constructor") {
    registry->load_directories({plugin_dir("marker")});
    REQUIRE(registry->find("marker") != nullptr);
    CHECK(marker.written());
  }
  SUBCASE("no entry symbol") {
    CHECK(error_of("no_entry") == "no entry symbol quarry_plugin_v4 (not a Quarry plugin)");
    CHECK_FALSE(marker.written());
  }
  SUBCASE("built with JSON_DIAGNOSTICS=1") {
    auto err = error_of("json_diag");
    CHECK(err
          == "built with nlohmann::json namespace json_abi_diag_v"
               + std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "_"
               + std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "_"
               + std::to_string(NLOHMANN_JSON_VERSION_PATCH)
               + " (JSON_DIAGNOSTICS=1), but this host uses nlohmann::json "
                 "namespace json_abi_v"
               + std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "_"
               + std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "_"
               + std::to_string(NLOHMANN_JSON_VERSION_PATCH)
               + " (the layout of nlohmann::json differs)");
    CHECK_FALSE(marker.written());
  }
  SUBCASE("built with _GLIBCXX_DEBUG") {
    CHECK(error_of("glibcxx_debug")
          == "built with the standard library's debug mode (_GLIBCXX_DEBUG), "
             "but this host is not (the layout of every container differs)");
    CHECK_FALSE(marker.written());
  }
  SUBCASE("not an ELF file") {
    auto path = tmp.write("plugins/script.so", "#!/bin/sh\ntouch marker\n");
    auto err = registry->load_file(path);
    REQUIRE(err.has_value());
    CHECK(*err == path + ": not a shared object (no ELF header)");
    CHECK_FALSE(marker.written());
  }
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry loads a stripped plugin (the check reads the dynamic symbols)") {
  registry->load_directories({plugin_dir("stripped")});
  REQUIRE(registry->plugins().size() == 1);
  CHECK(registry->plugins()[0].error == "");
  REQUIRE(registry->find("stripped") != nullptr);
  auto res = registry->make_tool("stripped", {{"prefix", "s:"}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(res));
}

TEST_CASE_FIXTURE(
  registry_fixture,
  "plugin_registry refuses a plugin without the ABI mark or with a foreign one, naming the fact") {
  // A copy of a good plugin with its mark's name changed in place (same
  // length, so the file stays well-formed): the host reads the new name.
  auto bytes = test::read_file(std::string{QUARRY_TEST_PLUGIN_DIR} + "/good/quarry_tp_echo.so");
  std::string mark = sdk::abi_mark;
  auto at = bytes.find(mark);
  REQUIRE(at != std::string::npos);
  auto patched = [&](std::string replacement) {
    REQUIRE(replacement.size() == mark.size());
    auto copy = bytes;
    for (auto pos = copy.find(mark); pos != std::string::npos; pos = copy.find(mark, pos + 1))
      copy.replace(pos, mark.size(), replacement);
    return tmp.write("patched/echo.so", copy);
  };
  SUBCASE("another standard library") {
    auto other = mark;
    auto pos = other.find("_stdlib_") + 8;
    auto end = other.find("_debug_");
    other.replace(pos, end - pos, std::string(end - pos, 'x'));
    auto err = registry->load_file(patched(other));
    REQUIRE(err.has_value());
    CHECK(err->find("built with the standard library 'xxxxxxxxx', but this "
                    "host uses libstdc++ with the C++11 ABI")
          != std::string::npos);
  }
  SUBCASE("another SDK minor version (0.x)") {
    auto other = mark;
    auto pos = other.find("_sdk_") + 5;
    auto end = other.find("_json_");
    auto ours = other.substr(pos, end - pos); // e.g. 0_1
    auto theirs = ours;
    theirs.back() = theirs.back() == '9' ? '8' : '9';
    other.replace(pos, end - pos, theirs);
    auto err = registry->load_file(patched(other));
    REQUIRE(err.has_value());
    std::replace(ours.begin(), ours.end(), '_', '.');
    std::replace(theirs.begin(), theirs.end(), '_', '.');
    CHECK(err->find("built against SDK " + theirs + ", but this host has SDK " + ours
                    + " (major versions must match; 0.x minor versions too)")
          != std::string::npos);
  }
  SUBCASE("no mark at all") {
    auto other = mark;
    other.replace(0, 6, "qu_rry");
    auto err = registry->load_file(patched(other));
    REQUIRE(err.has_value());
    CHECK(err->find("exports no ABI mark (quarry_abi_v...): built with an "
                    "older SDK; rebuild it against this host's SDK")
          != std::string::npos);
  }
}

TEST_CASE("check_abi_mark allows an older minor SDK version from 1.0 on, nothing else") {
  auto mark = [](const char* sdk_version, const char* json, const char* debug) {
    return std::string{"quarry_abi_v3_sdk_"} + sdk_version + "_json_" + json
           + "_stdlib_gnu_cxx11_debug_" + debug;
  };
  auto host = mark("1_3", "json_abi_v3_11_2", "0");
  CHECK_FALSE(host::check_abi_mark(host, host).has_value());
  CHECK_FALSE(host::check_abi_mark(mark("1_2", "json_abi_v3_11_2", "0"), host).has_value());
  CHECK(host::check_abi_mark(mark("1_4", "json_abi_v3_11_2", "0"), host)
        == "built against SDK 1.4, but this host has SDK 1.3 (major versions "
           "must match; 0.x minor versions too)");
  CHECK(host::check_abi_mark(mark("2_0", "json_abi_v3_11_2", "0"), host).has_value());
  CHECK(
    host::check_abi_mark(mark("0_2", "json_abi_v3_11_2", "0"), mark("0_3", "json_abi_v3_11_2", "0"))
      .has_value());
  CHECK(host::check_abi_mark(mark("1_2", "json_abi_ldvcmp_v3_11_2", "0"), host)
        == "built with nlohmann::json namespace json_abi_ldvcmp_v3_11_2 "
           "(JSON_USE_LEGACY_DISCARDED_VALUE_COMPARISON=1), but this host uses "
           "nlohmann::json namespace json_abi_v3_11_2 (the layout of "
           "nlohmann::json differs)");
  CHECK(
    host::check_abi_mark(mark("1_3", "json_abi_v3_11_2", "0"), mark("1_3", "json_abi_v3_11_2", "1"))
    == "built without the standard library's debug mode (_GLIBCXX_DEBUG), "
       "but this host uses it (the layout of every container differs)");
  CHECK(host::check_abi_mark("quarry_abi_vX", host)->find("is not one this host can read")
        != std::string::npos);
  // Names from a file reach messages only as identifier characters.
  auto odd = mark("1_3", "json\x1b[31m", "0");
  auto why = host::check_abi_mark(odd, host);
  REQUIRE(why.has_value());
  CHECK(why->find('\x1b') == std::string::npos);
  CHECK(why->find("json??31m") != std::string::npos);
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry refuses malformed ELF files without loading them") {
  // A valid ELF identification followed by section tables that point
  // anywhere: every offset is checked against the file's size.
  auto bytes = test::read_file(std::string{QUARRY_TEST_PLUGIN_DIR} + "/good/quarry_tp_echo.so");
  REQUIRE(bytes.size() > 64);
  auto write_u64 = [](std::string& x, size_t at, uint64_t v) {
    std::memcpy(&x[at], &v, sizeof(v));
  };
  SUBCASE("section table beyond the end of the file") {
    auto copy = bytes;
    write_u64(copy, 0x28, uint64_t{1} << 62); // e_shoff
    auto err = registry->load_file(tmp.write("bad/far.so", copy));
    REQUIRE(err.has_value());
    CHECK(err->find("cannot load: malformed ELF file (section table beyond "
                    "the end of the file)")
          != std::string::npos);
  }
  SUBCASE("cut in the middle") {
    auto err = registry->load_file(tmp.write("bad/cut.so", bytes.substr(0, bytes.size() / 2)));
    REQUIRE(err.has_value());
    CHECK(err->find("cannot load: malformed ELF file") != std::string::npos);
  }
  SUBCASE("a 32-bit file") {
    auto copy = bytes;
    copy[4] = 1; // ELFCLASS32
    auto err = registry->load_file(tmp.write("bad/elf32.so", copy));
    REQUIRE(err.has_value());
    CHECK(err->find("cannot load: built for another machine (32-bit ELF file)")
          != std::string::npos);
  }
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry names the ABI of a plugin built for another one") {
  CHECK(error_of("entry_next")
        == "built for another plugin ABI (exports quarry_plugin_v5, this host "
           "needs quarry_plugin_v4)");
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry refuses unresolved symbols at load time") {
  auto err = error_of("unresolved");
  CHECK(err.find("cannot load: ") == 0);
  CHECK(err.find("undefined symbol: quarry_symbol_nobody_defines") != std::string::npos);
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry refuses version mismatches naming both versions") {
  SUBCASE("ABI") {
    CHECK(error_of("abi")
          == "plugin ABI version 99, but this host supports plugin ABI "
             "version 4");
  }
  SUBCASE("SDK") {
    CHECK(error_of("sdk")
          == "built against SDK 1.0.0, but this host has SDK "
               + sdk::version_string(sdk::sdk_version)
               + " (major versions must match; 0.x minor versions too)");
  }
  SUBCASE("standard library") {
    CHECK(error_of("stdlib")
          == std::string{"built with standard library 'libc++ abi=1', but "
                         "this host uses '"}
               + sdk::stdlib_abi_tag + "'");
  }
  SUBCASE("json") {
    CHECK(error_of("json")
          == "built against nlohmann::json 3.9, but this host uses "
             "nlohmann::json "
               + std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "."
               + std::to_string(NLOHMANN_JSON_VERSION_MINOR));
  }
  SUBCASE("kind") {
    CHECK(error_of("kind") == "unknown plugin kind 7");
  }
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry refuses a duplicate plugin name") {
  registry->load_directories({plugin_dir("dup")});
  REQUIRE(registry->plugins().size() == 2);
  const auto& first = registry->plugins()[0];
  const auto& second = registry->plugins()[1];
  CHECK(first.ok);
  CHECK_FALSE(second.ok);
  CHECK(second.error == "duplicate plugin name 'echo' (already loaded from " + first.file + ")");
  CHECK(registry->find("echo")->file == first.file);
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry reports a factory that throws") {
  registry->load_directories({plugin_dir("throws")});
  REQUIRE(registry->find("throws") != nullptr);
  auto res = registry->make_tool("throws", nlohmann::json::object(), "search");
  REQUIRE(std::holds_alternative<std::string>(res));
  auto err = std::get<std::string>(res);
  CHECK(err
        == "plugin 'throws' (" + registry->find("throws")->file
             + ") for 'search' rejected its configuration: api_key is "
               "required");
}

TEST_CASE_FIXTURE(registry_fixture, "plugin_registry checks the kind and the name asked for") {
  registry->load_directories({plugin_dir("good")});
  auto wrong_kind = registry->make_llm("echo", nlohmann::json::object(), "main");
  REQUIRE(std::holds_alternative<std::string>(wrong_kind));
  CHECK(std::get<std::string>(wrong_kind)
        == "plugin 'echo' for 'main' is a tool plugin, not a llm plugin");
  auto missing = registry->make_tool("brave", nlohmann::json::object());
  REQUIRE(std::holds_alternative<std::string>(missing));
  CHECK(std::get<std::string>(missing) == "no plugin named 'brave'");
  auto bad_cfg = registry->make_tool("echo", {{"fail", true}});
  REQUIRE(std::holds_alternative<std::string>(bad_cfg));
  CHECK(std::get<std::string>(bad_cfg).find("rejected its configuration: "
                                            "'fail' is set")
        != std::string::npos);
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry skips missing folders and ignores non-.so files") {
  tmp.write("plugins/readme.txt", "not a plugin");
  auto problems = registry->load_directories({tmp.file("does-not-exist"), tmp.file("plugins")});
  CHECK(problems.empty());
  CHECK(registry->plugins().empty());
}

TEST_CASE("bounded_pool refuses work beyond its capacity and runs the rest") {
  std::mutex mtx;
  std::condition_variable cv;
  bool started = false;
  bool release = false;
  std::atomic<int> ran{0};
  host::bounded_pool pool{1, 2};
  // The first job occupies the only thread until released.
  REQUIRE(pool.submit([&] {
    std::unique_lock<std::mutex> guard{mtx};
    started = true;
    cv.notify_all();
    cv.wait(guard, [&] { return release; });
    ++ran;
  }));
  {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, std::chrono::seconds{10}, [&] { return started; }));
  }
  // Two queue slots, then refusal.
  CHECK(pool.submit([&] { ++ran; }));
  CHECK(pool.submit([&] { ++ran; }));
  CHECK_FALSE(pool.submit([&] { ++ran; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    release = true;
  }
  cv.notify_all();
  pool.shutdown();
  CHECK(ran.load() == 3);
  CHECK_FALSE(pool.submit([&] { ++ran; }));
}

TEST_CASE_FIXTURE(registry_fixture,
                  "every in-tree plugin declares exactly the keys its factory accepts") {
  registry->load_directories({QUARRY_PLUGIN_DIR});
  // Test plugins declare nothing: the host then leaves the keys to them.
  registry->load_directories({plugin_dir("good")});
  REQUIRE(registry->find("echo") != nullptr);
  CHECK_FALSE(registry->find("echo")->keys.has_value());
  for (auto name : {"openai", "anthropic", "extractive", "brave", "tavily", "searxng", "exa",
                    "serper", "open_url", "local_corpus"}) {
    CAPTURE(name);
    const auto* info = registry->find(name);
    REQUIRE(info != nullptr);
    REQUIRE(info->keys.has_value());
    CHECK_FALSE(info->keys->empty());
    auto make = [&](const nlohmann::json& config) -> std::string {
      if (info->kind == sdk::plugin_kind::llm) {
        auto made = registry->make_llm(name, config);
        auto* err = std::get_if<std::string>(&made);
        return err ? *err : std::string{};
      }
      auto made = registry->make_tool(name, config);
      auto* err = std::get_if<std::string>(&made);
      return err ? *err : std::string{};
    };
    // A declared key is never refused as unknown (a wrong value may be).
    for (const auto& key : *info->keys) {
      CAPTURE(key);
      auto err = make({{key, nlohmann::json::array({1})}});
      CHECK(err.find("unknown") == std::string::npos);
    }
    // An undeclared key is refused by the factory, too.
    CHECK(make({{"not_a_key_of_any_plugin", 1}}).find("unknown") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(
  registry_fixture,
  "in-tree tool plugins declare what they are; plugins know nothing of Quarry's limits") {
  registry->load_directories({QUARRY_PLUGIN_DIR});
  registry->load_directories({plugin_dir("good")});
  for (auto name : {"brave", "tavily", "searxng", "exa", "serper"}) {
    CAPTURE(name);
    REQUIRE(registry->find(name) != nullptr);
    CHECK(registry->find(name)->tool_kind == sdk::tool_kind::web_search);
  }
  CHECK(registry->find("local_corpus")->tool_kind == sdk::tool_kind::internal_search);
  CHECK(registry->find("open_url")->tool_kind == sdk::tool_kind::page_reader);
  // A plugin that says nothing provides an `other` tool; LLM plugins none.
  CHECK(registry->find("echo")->tool_kind == sdk::tool_kind::other);
  CHECK(registry->find("openai")->tool_kind == sdk::tool_kind::other);
  CHECK(std::string{sdk::to_string(sdk::tool_kind::page_reader)} == "page_reader");
  // The limits go to the actors, never to a plugin: a plugin that got one
  // would refuse it like any key it does not know.
  using json = nlohmann::json;
  for (const auto& name_config :
       {std::pair{"openai", json{{"model", "m"}, {"max_retries", 2}}},
        std::pair{"anthropic", json{{"model", "m"}, {"api_key", "k"}, {"max_retries", 2}}},
        std::pair{"extractive", json{{"max_retries", 2}}}}) {
    const auto& name = name_config.first;
    const auto& config = name_config.second;
    CAPTURE(name);
    auto made = registry->make_llm(name, config);
    REQUIRE(std::holds_alternative<std::string>(made));
    CHECK(std::get<std::string>(made).find("max_retries") != std::string::npos);
  }
  for (const auto& name_config :
       {std::pair{"brave", json{{"api_key", "k"}, {"max_concurrency", 2}}},
        std::pair{"open_url", json{{"max_concurrency", 2}}},
        std::pair{"local_corpus", json{{"db", "x.db"}, {"max_concurrency", 2}}}}) {
    const auto& name = name_config.first;
    const auto& config = name_config.second;
    CAPTURE(name);
    auto made = registry->make_tool(name, config);
    REQUIRE(std::holds_alternative<std::string>(made));
    CHECK(std::get<std::string>(made).find("max_concurrency") != std::string::npos);
  }
}

// -- who may change a plugin -------------------------------------------------

namespace {

namespace fs = std::filesystem;

/// A copy of the good echo plugin at `dir/name`, with `mode`.
std::string echo_copy(const std::string& dir, mode_t mode,
                      const std::string& name = "quarry_tp_echo.so") {
  fs::create_directories(dir);
  auto file = dir + "/" + name;
  fs::copy_file(plugin_dir("good") + "/quarry_tp_echo.so", file,
                fs::copy_options::overwrite_existing);
  REQUIRE(::chmod(file.c_str(), mode) == 0);
  return file;
}

/// `dir` with `mode` (chmod, so the umask does not interfere).
std::string folder(const std::string& dir, mode_t mode) {
  fs::create_directories(dir);
  REQUIRE(::chmod(dir.c_str(), mode) == 0);
  return dir;
}

} // namespace

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry refuses plugins that others could change, saying why") {
  auto root = folder(tmp.path() + "/p", 0755);
  auto load = [&](const std::string& file) {
    host::plugin_registry reg{*services};
    auto err = reg.load_file(file);
    REQUIRE(reg.plugins().size() == 1);
    return std::make_pair(err, reg.plugins().front());
  };
  // Safe: the file and its folders belong to root or to us, writable by no
  // one else (the temp folder's parents include a sticky /tmp).
  auto [ok_err, ok_info] = load(echo_copy(folder(root + "/safe", 0755), 0755));
  CHECK_FALSE(ok_err.has_value());
  CHECK(ok_info.ok);
  CHECK(ok_info.unsafe.empty());
  CHECK(load(echo_copy(folder(root + "/safe_0644", 0755), 0644)).second.ok);
  // The file writable by everyone.
  for (mode_t mode : {0666, 0777}) {
    auto dir = folder(root + "/file" + std::to_string(mode), 0755);
    auto [err, info] = load(echo_copy(dir, mode));
    CHECK_FALSE(info.ok);
    char expected[16];
    std::snprintf(expected, sizeof(expected), "(mode %04o)", static_cast<unsigned>(mode));
    CHECK(info.unsafe == "the file is writable by every user " + std::string{expected});
    CHECK(info.error.rfind(info.unsafe
                             + "; a plugin must be changeable by no one but "
                               "root and the user running Quarry "
                               "(plugins.allow_unsafe_permissions loads it anyway)",
                           0)
          == 0);
    REQUIRE(err.has_value());
    CHECK(err->rfind(dir + "/quarry_tp_echo.so: the file is writable", 0) == 0);
  }
  // The plugin folder writable by everyone, with or without the sticky bit.
  for (mode_t mode : {0777, 01777, 0773}) {
    auto dir = folder(root + "/world" + std::to_string(mode), mode);
    auto [err, info] = load(echo_copy(dir, 0755));
    CHECK_FALSE(info.ok);
    char expected[16];
    std::snprintf(expected, sizeof(expected), "(mode %04o)", static_cast<unsigned>(mode));
    CHECK(info.unsafe == "folder " + dir + " is writable by every user " + expected);
  }
  // A folder under a parent writable by everyone (without the sticky bit).
  auto open_parent = folder(root + "/open", 0777);
  auto [under_err, under] = load(echo_copy(folder(open_parent + "/plugins", 0755), 0755));
  CHECK_FALSE(under.ok);
  CHECK(under.unsafe == "folder " + open_parent + " is writable by every user (mode 0777)");
  // A parent writable by everyone with the sticky bit is fine (as /tmp is).
  auto sticky_parent = folder(root + "/sticky", 01777);
  CHECK(load(echo_copy(folder(sticky_parent + "/plugins", 0755), 0755)).second.ok);
  // A link in a safe folder to a file in an unsafe one, and the other way.
  auto safe_dir = folder(root + "/links", 0755);
  fs::create_symlink(open_parent + "/plugins/quarry_tp_echo.so", safe_dir + "/to_unsafe.so");
  CHECK(load(safe_dir + "/to_unsafe.so").second.unsafe
        == "folder " + open_parent + " is writable by every user (mode 0777)");
  auto unsafe_dir = folder(root + "/world_links", 0777);
  fs::create_symlink(root + "/safe/quarry_tp_echo.so", unsafe_dir + "/to_safe.so");
  CHECK(load(unsafe_dir + "/to_safe.so").second.unsafe
        == "folder " + unsafe_dir + " is writable by every user (mode 0777)");
  // A link to a safe file from a safe folder loads.
  fs::create_symlink(root + "/safe/quarry_tp_echo.so", safe_dir + "/to_safe.so");
  CHECK(load(safe_dir + "/to_safe.so").second.ok);
  if (::geteuid() == 0) {
    // Owned by another user (root may chown), or writable by a group that
    // is not the owner's own.
    auto other = echo_copy(folder(root + "/other", 0755), 0755);
    REQUIRE(::chown(other.c_str(), 12345, 12345) == 0);
    CHECK(load(other).second.unsafe
          == "the file is owned by uid 12345, not by root or the user running Quarry");
    auto other_dir = folder(root + "/other_dir", 0755);
    echo_copy(other_dir, 0755);
    REQUIRE(::chown(other_dir.c_str(), 12345, 12345) == 0);
    CHECK(load(other_dir + "/quarry_tp_echo.so").second.unsafe
          == "folder " + other_dir
               + " is owned by uid 12345, not by root or the user running Quarry");
    auto group = echo_copy(folder(root + "/group", 0755), 0775);
    REQUIRE(::chown(group.c_str(), 0, 12345) == 0);
    CHECK(load(group).second.unsafe == "the file is writable by group 12345 (mode 0775)");
  }
}

TEST_CASE_FIXTURE(registry_fixture,
                  "plugin_registry loads unsafe plugins only when allowed, and says so") {
  auto dir = folder(tmp.path() + "/world", 0777);
  auto file = echo_copy(dir, 0666);
  registry->allow_unsafe_permissions(true);
  CHECK(registry->allow_unsafe_permissions());
  CHECK_FALSE(registry->load_file(file).has_value());
  const auto& info = registry->plugins().front();
  CHECK(info.ok);
  CHECK(info.unsafe == "the file is writable by every user (mode 0666)");
  CHECK(registry->find("echo") != nullptr);
  // Only permissions are overridden: a FIFO is still no plugin.
  REQUIRE(::mkfifo((dir + "/fifo.so").c_str(), 0600) == 0);
  auto err = registry->load_file(dir + "/fifo.so");
  REQUIRE(err.has_value());
  CHECK(*err == dir + "/fifo.so: is a FIFO");
}

TEST_CASE_FIXTURE(
  registry_fixture,
  "plugin_registry lists *.so entries that are not regular files, without blocking") {
  auto dir = folder(tmp.path() + "/odd", 0755);
  REQUIRE(::mkfifo((dir + "/a_fifo.so").c_str(), 0600) == 0);
  fs::create_symlink(dir + "/nothing", dir + "/b_dangling.so");
  fs::create_symlink(dir + "/c_loop.so", dir + "/c_loop.so");
  fs::create_directory(dir + "/d_folder.so");
  echo_copy(dir, 0755, "e_echo.so");
  CHECK(registry->load_directories({dir}).empty());
  const auto& infos = registry->plugins();
  REQUIRE(infos.size() == 5);
  CHECK(infos[0].error == "is a FIFO");
  CHECK(infos[1].error == "is a dangling symbolic link");
  CHECK(infos[2].error == "is a symbolic link loop");
  CHECK(infos[3].error == "is a directory");
  CHECK(infos[4].ok);
}

TEST_CASE("check_plugin_folders walks up to the root") {
  CHECK_FALSE(host::check_plugin_folders("/").has_value());
  CHECK_FALSE(host::check_plugin_folders(QUARRY_TEST_PLUGIN_DIR).has_value());
  auto missing = host::check_plugin_folders("/no/such/folder/here");
  REQUIRE(missing.has_value());
  CHECK(missing->rfind("cannot check folder /no/such/folder/here: ", 0) == 0);
}

} // namespace plugin_registry_test
