// What the tests of every web_search backend share: a fake search API that
// records requests, the table of error answers every backend must classify,
// and one in-tree module loaded through the real plugin registry.

#pragma once

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"
#include "support/process.hpp"
#include "support/run_tool.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace quarry::test {

/// The bytes of a recorded search API answer, `name` below the fixtures'
/// `search/` folder (e.g. `exa/....json`).
inline std::string search_fixture(const std::string& name) {
  return read_file(std::string{QUARRY_FIXTURES_DIR} + "/search/" + name);
}

/// `base` with the keys of `extra` added or replaced.
inline nlohmann::json with_keys(nlohmann::json base, const nlohmann::json& extra) {
  for (const auto& [key, value] : extra.items())
    base[key] = value;
  return base;
}

/// A test host and a fake search API on 127.0.0.1 that records every
/// request. The host shuts down before the server goes.
struct search_env {
private:
  // Declared first, destroyed last: the server's threads may still record a
  // late request (one a cancelled run had already sent) while it stops.
  std::mutex mtx_;
  std::vector<request> seen_;
  int status_ = 200;
  std::string body_;

public:
  test_host host;
  http_server server;

  search_env() = default;
  search_env(const search_env&) = delete;
  search_env& operator=(const search_env&) = delete;

  ~search_env() {
    host.shutdown();
  }

  /// Answers every `method` request on `path` through `fn`, recording it.
  void serve(const std::string& method, const std::string& path,
             std::function<response_plan(const request&)> fn) {
    server.route(method, path, [this, fn](const request& req) {
      {
        std::lock_guard<std::mutex> guard{mtx_};
        seen_.push_back(req);
      }
      return fn(req);
    });
  }

  /// Answers every `method` request on `path` with the current answer (see
  /// `answer`), a JSON content type, recording it.
  void serve_answer(const std::string& method, const std::string& path) {
    serve(method, path, [this](const request&) {
      std::lock_guard<std::mutex> guard{mtx_};
      return response_plan::text(status_, body_, "application/json");
    });
  }

  /// Sets the status and body of `serve_answer`'s answers.
  void answer(int status, std::string body) {
    std::lock_guard<std::mutex> guard{mtx_};
    status_ = status;
    body_ = std::move(body);
  }

  /// The requests so far, oldest first.
  std::vector<request> requests() {
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_;
  }
};

/// An error answer of a search API and the class it must get.
struct error_row {
  int status;
  std::string body;
  sdk::errc code;
};

/// Answers each row in turn (through `env.answer`) and checks that a search
/// of `tool` fails with the row's class, that the LLM text starts with "All
/// web search queries failed." and does not name `secret` (unless empty);
/// `more` sees each failed result for a backend's own checks.
inline void
check_error_rows(search_env& env, sdk::tool& tool, const std::vector<error_row>& rows,
                 const std::string& secret,
                 const std::function<void(const error_row&, const sdk::tool_result&)>& more = {}) {
  for (const auto& r : rows) {
    CAPTURE(r.status);
    env.answer(r.status, r.body);
    auto failed = run_tool(tool, {{"queries", {"q"}}});
    REQUIRE(failed.failure.has_value());
    CHECK(failed.failure->code == r.code);
    CHECK(failed.llm_text.rfind("All web search queries failed.", 0) == 0);
    if (!secret.empty())
      CHECK(failed.llm_text.find(secret) == std::string::npos);
    if (more)
      more(r, failed);
  }
}

/// Host services and a plugin registry that loaded one module of the build's
/// plugin folder (e.g. `quarry_brave.so`).
struct module_fixture {
  temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;

  explicit module_fixture(const std::string& file) {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    REQUIRE_FALSE(registry->load_file(std::string{QUARRY_PLUGIN_DIR} + "/" + file));
  }

  ~module_fixture() {
    services->shutdown();
  }

  /// Creates a tool of the loaded plugin named `plugin`.
  std::shared_ptr<sdk::tool> tool(const std::string& plugin, const nlohmann::json& config) {
    auto made = registry->make_tool(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    return std::get<std::shared_ptr<sdk::tool>>(made);
  }
};

} // namespace quarry::test
