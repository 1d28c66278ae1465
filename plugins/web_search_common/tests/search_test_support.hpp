// What the tests of every web_search backend share: running a tool to its
// result, and one in-tree module loaded through the real plugin registry.

#pragma once

#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <memory>
#include <string>

namespace quarry::test {

/// Runs `tool` with `args` and waits for its result.
inline sdk::tool_result run_tool(sdk::tool& tool, const nlohmann::json& args) {
  auto promise = std::make_shared<std::promise<sdk::tool_result>>();
  auto future = promise->get_future();
  tool.run(args, [promise](sdk::tool_result r) { promise->set_value(std::move(r)); });
  return future.get();
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
  std::shared_ptr<sdk::tool> tool(const std::string& plugin,
                                  const nlohmann::json& config) {
    auto made = registry->make_tool(plugin, config);
    REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
    return std::get<std::shared_ptr<sdk::tool>>(made);
  }
};

} // namespace quarry::test
