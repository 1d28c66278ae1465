// `quarry tool run`: runs a configured tool exactly as a research agent would
// (through the tool provider actor) and prints what the LLM would see.

#include "cli.hpp"
#include "context.hpp"

#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/core/tool_args.hpp"

#include <caf/all.hpp>

#include <iostream>
#include <string>
#include <variant>

namespace quarry::app {

namespace {

/// The configured tool `name` names: an instance (with one tool), a tool of
/// an instance by the name the model calls it, or `INSTANCE/TOOL`.
struct found_tool {
  std::string instance;
  std::shared_ptr<sdk::tool> tool;
};

/// Why no tool was found, and the exit code: a name that fits no tool is a
/// usage error, an instance that cannot be made a failure.
struct tool_not_found {
  std::string message;
  int code = exit_usage;
};

std::variant<found_tool, tool_not_found> find_tool(context& ctx, const std::string& name) {
  const auto& tools = ctx.config.values.tools;
  auto make = [&](const std::string& instance) {
    const auto& entry = tools.at(instance);
    auto made = ctx.registry->make_tools(entry.plugin, entry.config, instance);
    if (auto* err = std::get_if<std::string>(&made))
      return std::variant<std::vector<host::made_tool>, std::string>{
        entry.file + ":" + std::to_string(entry.line) + ": tools." + instance + ": " + *err};
    return made;
  };
  auto names_of = [](const std::vector<host::made_tool>& xs) {
    std::string out;
    for (const auto& x : xs)
      out += (out.empty() ? "" : ", ") + x.tool->name();
    return out;
  };
  auto slash = name.find('/');
  auto instance = name.substr(0, slash);
  if (tools.count(instance) > 0) {
    auto made = make(instance);
    if (auto* err = std::get_if<std::string>(&made))
      return tool_not_found{*err, exit_failure};
    auto& set = std::get<std::vector<host::made_tool>>(made);
    if (slash != std::string::npos) {
      auto wanted = name.substr(slash + 1);
      for (auto& x : set)
        if (x.tool->name() == wanted)
          return found_tool{instance, x.tool};
      return tool_not_found{"tools." + instance + " offers no tool named '" + wanted
                            + "' (it offers: " + (set.empty() ? "none" : names_of(set)) + ")"};
    }
    if (set.size() == 1)
      return found_tool{instance, set.front().tool};
    if (set.empty())
      return tool_not_found{"tools." + instance + " offers no tool"};
    return tool_not_found{"tools." + instance + " offers several tools (" + names_of(set)
                          + "): name one, e.g. " + instance + "/" + set.front().tool->name()};
  }
  // The name the model calls a tool by.
  for (const auto& [key, _] : tools) {
    auto made = make(key);
    if (auto* set = std::get_if<std::vector<host::made_tool>>(&made))
      for (auto& x : *set)
        if (x.tool->name() == name)
          return found_tool{key, x.tool};
  }
  std::string msg = "no tool named '" + name + "' is configured (configured: ";
  auto first = true;
  for (const auto& [key, _] : tools) {
    msg += (first ? "" : ", ") + key;
    first = false;
  }
  return tool_not_found{msg + (first ? "none; add one under tools in the configuration" : "")
                        + ")"};
}

} // namespace

int cmd_tool_run(context& ctx, const tool_run_options& opts) {
  const auto& tools = ctx.config.values.tools;
  auto args = core::parse_tool_arguments(opts.arguments);
  if (auto* why = std::get_if<std::string>(&args)) {
    std::cerr << "quarry: invalid arguments for " << opts.name << ": " << *why << "\n";
    return exit_usage;
  }
  ctx.load_plugins();
  auto found = find_tool(ctx, opts.name);
  if (auto* err = std::get_if<tool_not_found>(&found)) {
    std::cerr << "quarry: " << err->message << "\n";
    return err->code;
  }
  auto [instance, tool] = std::get<found_tool>(std::move(found));
  const auto& entry = tools.at(instance);
  const auto* info = ctx.registry->find(entry.plugin);
  auto actor_name = info != nullptr && info->tool_set ? instance + "/" + tool->name() : instance;
  auto settings = actors::tool_actor_settings::of(actor_name, entry.limits);
  // A person typed these: wrongly typed arguments are a usage error (a model
  // gets the tool's own answer instead, which tells it what to change).
  if (auto why = core::check_tool_arguments(tool->definition().parameters,
                                            std::get<nlohmann::json>(args))) {
    std::cerr << "quarry: invalid arguments for " << opts.name << ": " << *why
              << "\n  expected: " << tool->definition().parameters.dump() << "\n";
    return exit_usage;
  }
  sdk::tool_result result;
  int interrupted = 0;
  {
    actors::runtime rt{ctx.config.values};
    auto hdl = actors::spawn_tool_provider(rt.system(), tool, std::move(settings));
    rt.add_stoppable(hdl);
    actors::signal_watcher watcher{[&](int) { rt.stop(); }};
    caf::scoped_actor self{rt.system()};
    self
      ->request(hdl, caf::infinite, actors::run_atom::value,
                actors::tool_call_msg{1, opts.arguments})
      .receive([&](actors::tool_reply& reply) { result = std::move(reply.result); },
               [&](const caf::error& err) {
                 result.llm_text = "The tool could not run.";
                 result.failure = sdk::make_error(sdk::errc::internal, caf::to_string(err));
               });
    interrupted = watcher.received();
  }
  if (opts.json) {
    nlohmann::json out{{"llm_text", result.llm_text}, {"documents", result.documents}};
    if (result.failure)
      out["error"] = *result.failure;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cout << result.llm_text;
    if (result.llm_text.empty() || result.llm_text.back() != '\n')
      std::cout << "\n";
    if (result.failure)
      std::cerr << "quarry: " << opts.name << " failed: " << sdk::to_string(*result.failure)
                << "\n";
  }
  if (interrupted != 0) {
    std::cerr << "quarry: interrupted\n";
    return actors::exit_code_for_signal(interrupted);
  }
  return result.failure ? exit_failure : exit_ok;
}

} // namespace quarry::app
