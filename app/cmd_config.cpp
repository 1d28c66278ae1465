// `quarry config show` and `quarry config check`.

#include "cli.hpp"
#include "config_checks.hpp"
#include "context.hpp"

#include "quarry/sdk/secrets.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>

namespace quarry::app {

namespace {

/// How long `config check` waits for each provider and tool.
constexpr std::chrono::seconds probe_timeout{5};

} // namespace

int cmd_config_show(context& ctx) {
  // Limits that an older file wrote beside a plugin's options are shown
  // under `limits`, where they take effect, with a warning each. Other
  // problems of the instances are `config check`'s to report.
  const auto& values = ctx.config.values;
  if (!values.llm.providers.empty() || !values.tools.empty()) {
    auto seen = ctx.config.warnings.size();
    static_cast<void>(check_configured_instances(ctx, {}));
    for (auto i = seen; i < ctx.config.warnings.size(); ++i)
      spdlog::warn("{}", ctx.config.warnings[i]);
  }
  // The header names the source and, as comments, every instance added from
  // the environment.
  std::cout << ctx.config.render_yaml();
  return exit_ok;
}

int cmd_config_check(context& ctx, bool offline) {
  // The file itself is valid (or we would not be here). Now check every
  // configured instance: the keys the host reads, the keys its plugin
  // declares, the plugin itself (it must load and accept its configuration)
  // and the names of the tools.
  instance_check_options check;
  check.make_llms = true;
  check.make_tools = true;
  auto errors = check_configured_instances(ctx, check);
  for (const auto& warning : ctx.config.warnings)
    std::cout << "warning: " << warning << "\n";
  if (!errors.empty()) {
    for (const auto& err : errors)
      std::cerr << err.to_string() << "\n";
    std::cerr << "configuration invalid: " << errors.size()
              << (errors.size() == 1 ? " error\n" : " errors\n");
    return exit_usage;
  }
  for (const auto& added : ctx.config.environment_defaults)
    std::cout << added.key << ": added by the embedded defaults: " << added.description << "\n";
  if (!offline) {
    auto secrets = ctx.config.secret_values();
    size_t failures = 0;
    for (const auto& r : probe_instances(ctx, probe_timeout)) {
      std::cout << r.key << " (" << r.plugin << "): " << to_string(r.status);
      // Transfer errors name the request already.
      if (!r.target.empty() && r.detail.find(r.target) == std::string::npos)
        std::cout << ", " << sdk::mask_secrets(r.target, secrets);
      if (!r.detail.empty())
        std::cout << ": " << sdk::mask_secrets(r.detail, secrets);
      std::cout << "\n";
      if (is_probe_failure(r.status))
        ++failures;
    }
    if (failures > 0) {
      std::cout.flush();
      std::cerr << "configuration valid, but " << failures
                << (failures == 1 ? " provider or tool is" : " providers or tools are")
                << " not reachable (--offline skips this check)\n";
      return exit_failure;
    }
  }
  std::cout << "configuration OK (" << ctx.config.source << ")\n";
  return exit_ok;
}

} // namespace quarry::app
