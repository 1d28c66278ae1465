// `quarry config show` and `quarry config check`.

#include "cli.hpp"
#include "context.hpp"

#include <iostream>
#include <variant>

namespace quarry::app {

int cmd_config_show(context& ctx) {
  std::cout << ctx.config.render_yaml();
  return exit_ok;
}

int cmd_config_check(context& ctx) {
  // The file itself is valid (or we would not be here). Now check that every
  // configured instance names a plugin that loads, and that the plugin
  // accepts its configuration.
  ctx.load_plugins();
  std::vector<std::string> errors;
  for (const auto& inst : configured_instances(ctx.config.values)) {
    auto where = inst.entry->file + ":" + std::to_string(inst.entry->line) + ": "
                 + inst.key + ": ";
    std::string problem;
    if (inst.is_llm) {
      auto res = ctx.registry->make_llm(inst.entry->plugin, inst.entry->config,
                                        inst.instance);
      if (auto* err = std::get_if<std::string>(&res))
        problem = *err;
    } else {
      auto res = ctx.registry->make_tool(inst.entry->plugin, inst.entry->config,
                                         inst.instance);
      if (auto* err = std::get_if<std::string>(&res))
        problem = *err;
    }
    if (!problem.empty())
      errors.push_back(where + problem);
  }
  for (const auto& warning : ctx.config.warnings)
    std::cout << "warning: " << warning << "\n";
  if (!errors.empty()) {
    for (const auto& err : errors)
      std::cerr << err << "\n";
    std::cerr << "configuration invalid: " << errors.size()
              << (errors.size() == 1 ? " error\n" : " errors\n");
    return exit_usage;
  }
  std::cout << "configuration OK (" << ctx.config.source << ")\n";
  return exit_ok;
}

} // namespace quarry::app
