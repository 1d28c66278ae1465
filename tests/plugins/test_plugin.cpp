// Test plugins: a well-behaved echo tool and echo LLM, and deliberately broken
// variants selected with QUARRY_TEST_VARIANT_* compile definitions.

#include "quarry/sdk/plugin.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace quarry::test_plugins {

/// Answers with its arguments and one document; `prefix` comes from config.
class echo_tool final : public sdk::tool {
public:
  echo_tool(sdk::host_context& host, std::string prefix, std::string own_cache = {})
    : host_(host), prefix_(std::move(prefix)), own_cache_(std::move(own_cache)) {
    // nop
  }

  /// With `own_cache: true` in its configuration, the tool says it caches
  /// itself (it does not) and shows the limits it was given in its answers;
  /// with `own_cache: "throw"` (`"throw_int"`), asking throws an exception
  /// (an int).
  bool own_cache(std::chrono::milliseconds ttl, size_t max_entries) override {
    if (own_cache_ == "throw")
      throw std::runtime_error("no cache today");
    if (own_cache_ == "throw_int")
      throw 42;
    if (own_cache_ != "true")
      return false;
    limits_ = " own_cache=" + std::to_string(ttl.count()) + "ms/" + std::to_string(max_entries);
    return true;
  }

  std::string name() const override {
    return "echo";
  }

  std::string description() const override {
    return "Repeats its arguments.";
  }

  nlohmann::json parameters() const override {
    return {
      {"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}, {"required", {"text"}}};
  }

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override {
    auto text = arguments.value("text", std::string{});
    if (text == "hang") {
      // Never finishes on its own; cancel() completes it.
      return std::make_shared<hanging_run>(std::move(done));
    }
    if (text == "fail") {
      sdk::tool_result failed;
      failed.llm_text = "echo failed as asked";
      failed.failure = sdk::make_error(sdk::errc::bad_request, "asked to fail");
      done(std::move(failed));
      return nullptr;
    }
    ++runs_;
    sdk::tool_result result;
    result.llm_text = prefix_ + text + " (run " + std::to_string(runs_) + ")" + limits_;
    // What the host added for page readers, so that tests can see it.
    if (auto hints = arguments.find("_quarry"); hints != arguments.end())
      result.llm_text += " _quarry=" + hints->dump();
    sdk::document doc;
    doc.id = "echo:1";
    doc.url = "https://example.org/echo";
    doc.title = "Echo";
    doc.content = result.llm_text;
    doc.kind = sdk::source_kind::other;
    result.documents.push_back(std::move(doc));
    host_.log().log(sdk::log_level::debug, "echo ran");
    done(std::move(result));
    return nullptr;
  }

private:
  /// A run that only ends when cancelled.
  class hanging_run final : public sdk::tool_run {
  public:
    explicit hanging_run(sdk::tool_callback done) : done_(std::move(done)) {
      // nop
    }
    void cancel() override {
      if (auto done = std::exchange(done_, nullptr)) {
        sdk::tool_result r;
        r.llm_text = "cancelled";
        r.failure = sdk::make_error(sdk::errc::cancelled, "cancelled");
        done(std::move(r));
      }
    }

  private:
    sdk::tool_callback done_;
  };

  sdk::host_context& host_;
  std::string prefix_;
  std::string own_cache_;
  std::string limits_;
  int runs_ = 0;
};

/// The error class named `name` (sdk::to_string), if there is one.
std::optional<sdk::errc> errc_named(const std::string& name) {
  for (int i = static_cast<int>(sdk::errc_first); i <= static_cast<int>(sdk::errc_last); ++i)
    if (name == sdk::to_string(static_cast<sdk::errc>(i)))
      return static_cast<sdk::errc>(i);
  return std::nullopt;
}

/// Streams the last message back word by word, from the host's pool.
class echo_llm final : public sdk::llm_provider {
public:
  explicit echo_llm(sdk::host_context& host) : host_(host) {
    // nop
  }

  sdk::model_info info() const override {
    return {"echo-1", 8192, true, false, ""};
  }

  std::shared_ptr<sdk::chat_call> chat(sdk::chat_request request,
                                       std::shared_ptr<sdk::chat_sink> sink) override {
    auto text = request.messages.empty() ? std::string{} : request.messages.back().content;
    // "fail:<class>" fails the call with that error class, e.g.
    // "fail:rate_limited", for tests of every class end to end.
    if (text.rfind("fail:", 0) == 0) {
      auto name = text.substr(5);
      if (auto code = errc_named(name)) {
        auto err = sdk::make_error(*code, "echo_llm failed as asked with " + name);
        if (code == sdk::errc::rate_limited)
          err.retry_after_ms = 10;
        sink->on_error(err, false);
        return nullptr;
      }
    }
    // "after-text:<class> words" streams the words, then fails with that
    // class and says that nothing streamed: a plugin that misreports.
    std::optional<sdk::errc> fail_after;
    if (text.rfind("after-text:", 0) == 0) {
      auto space = text.find(' ');
      fail_after = errc_named(text.substr(11, space == std::string::npos ? space : space - 11));
      text = space == std::string::npos ? std::string{} : text.substr(space + 1);
    }
    auto ok = host_.pool().submit([sink, text, fail_after] {
      sdk::chat_result result;
      result.text = text;
      result.model = "echo-1";
      size_t pos = 0;
      while (pos < text.size()) {
        auto next = text.find(' ', pos);
        next = next == std::string::npos ? text.size() : next + 1;
        sink->on_text(std::string_view{text}.substr(pos, next - pos));
        pos = next;
      }
      if (fail_after) {
        sink->on_error(sdk::make_error(*fail_after, "echo_llm failed after its text as asked"),
                       false);
        return;
      }
      result.usage.input_tokens = 1;
      result.usage.output_tokens = 1;
      sink->on_usage(result.usage);
      sink->on_done(result);
    });
    if (!ok)
      sink->on_error(sdk::make_error(sdk::errc::busy, "pool full"), false);
    return nullptr;
  }

private:
  sdk::host_context& host_;
};

std::unique_ptr<sdk::plugin_object> make(sdk::host_context& host, const nlohmann::json& config) {
#if defined(QUARRY_TEST_VARIANT_FACTORY_THROWS)
  (void)host;
  (void)config;
  throw std::runtime_error("api_key is required");
#elif defined(QUARRY_TEST_KIND_LLM)
  (void)config;
  return std::make_unique<echo_llm>(host);
#else
  if (config.contains("fail"))
    throw std::invalid_argument("'fail' is set");
  std::string own_cache;
  if (auto it = config.find("own_cache"); it != config.end())
    own_cache = it->is_boolean() ? (it->get<bool>() ? "true" : "") : it->get<std::string>();
  return std::make_unique<echo_tool>(host, config.value("prefix", std::string{}),
                                     std::move(own_cache));
#endif
}

} // namespace quarry::test_plugins

#ifndef QUARRY_TEST_PLUGIN_NAME
#  define QUARRY_TEST_PLUGIN_NAME echo
#endif

#if defined(QUARRY_TEST_KIND_LLM)
#  define QUARRY_TEST_KIND ::quarry::sdk::plugin_kind::llm
#else
#  define QUARRY_TEST_KIND ::quarry::sdk::plugin_kind::tool
#endif

#if defined(QUARRY_TEST_MARKER)

// A static constructor that leaves a trace: it creates the file named by the
// environment variable QUARRY_TEST_PLUGIN_MARKER, if set. Tests use it to
// prove that the host refused a file without loading it.
namespace {

const bool marker_written = [] {
  if (const char* path = std::getenv("QUARRY_TEST_PLUGIN_MARKER")) {
    if (auto* file = std::fopen(path, "w")) {
      std::fputs("loaded\n", file);
      std::fclose(file);
      return true;
    }
  }
  return false;
}();

} // namespace

#endif

#define QUARRY_TEST_STR2(x) #x
#define QUARRY_TEST_STR(x)  QUARRY_TEST_STR2(x)

#if defined(QUARRY_TEST_VARIANT_NO_ENTRY)

// Exports something, but not the entry point.
extern "C" QUARRY_SDK_API int quarry_not_a_plugin() {
  return 42;
}

#elif defined(QUARRY_TEST_VARIANT_ENTRY_NEXT)

// A plugin built for a future plugin ABI: only the v5 entry point exists.
extern "C" QUARRY_SDK_API const void* quarry_plugin_v5() {
  return nullptr;
}

#elif defined(QUARRY_TEST_VARIANT_UNRESOLVED)

// Refers to a symbol that nothing defines: RTLD_NOW must refuse the file.
extern "C" int quarry_symbol_nobody_defines(int);
QUARRY_PLUGIN(QUARRY_TEST_PLUGIN_NAME, QUARRY_TEST_KIND, "1.0.0", "Needs a missing symbol",
              &quarry::test_plugins::make)
extern "C" QUARRY_SDK_API int quarry_use_missing() {
  return quarry_symbol_nobody_defines(1);
}

#elif defined(QUARRY_TEST_DESCRIPTOR_OVERRIDE)

// A hand-written descriptor with one field replaced by the test's value.
#  ifndef QUARRY_TEST_ABI
#    define QUARRY_TEST_ABI QUARRY_PLUGIN_ABI_VERSION
#  endif
#  ifndef QUARRY_TEST_SDK
#    define QUARRY_TEST_SDK ::quarry::sdk::sdk_version
#  endif
#  ifndef QUARRY_TEST_STDLIB
#    define QUARRY_TEST_STDLIB ::quarry::sdk::stdlib_abi_tag
#  endif
#  ifndef QUARRY_TEST_JSON
#    define QUARRY_TEST_JSON ::quarry::sdk::json_version
#  endif
#  ifndef QUARRY_TEST_KIND_VALUE
#    define QUARRY_TEST_KIND_VALUE QUARRY_TEST_KIND
#  endif
QUARRY_PLUGIN_DEFINE_ABI_MARK()
extern "C" QUARRY_SDK_API const ::quarry::sdk::plugin_descriptor* quarry_plugin_v4() {
  static const ::quarry::sdk::plugin_descriptor descriptor{QUARRY_TEST_ABI,
                                                           QUARRY_TEST_SDK,
                                                           QUARRY_TEST_STDLIB,
                                                           QUARRY_TEST_JSON,
                                                           QUARRY_TEST_STR(QUARRY_TEST_PLUGIN_NAME),
                                                           QUARRY_TEST_KIND_VALUE,
                                                           "1.0.0",
                                                           "A plugin with a wrong descriptor",
                                                           &quarry::test_plugins::make};
  return &descriptor;
}

#else

QUARRY_PLUGIN(QUARRY_TEST_PLUGIN_NAME, QUARRY_TEST_KIND, "1.2.3", "Echoes its input (test plugin)",
              &quarry::test_plugins::make)

#endif
