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

namespace quarry::app {

int cmd_tool_run(context& ctx, const tool_run_options& opts) {
  const auto& tools = ctx.config.values.tools;
  auto entry = tools.find(opts.name);
  if (entry == tools.end()) {
    std::cerr << "quarry: no tool named '" << opts.name << "' is configured (configured: ";
    auto first = true;
    for (const auto& [key, _] : tools) {
      std::cerr << (first ? "" : ", ") << key;
      first = false;
    }
    std::cerr << (first ? "none; add one under tools in the configuration" : "") << ")\n";
    return exit_usage;
  }
  auto args = core::parse_tool_arguments(opts.arguments);
  if (auto* why = std::get_if<std::string>(&args)) {
    std::cerr << "quarry: invalid arguments for " << opts.name << ": " << *why << "\n";
    return exit_usage;
  }
  auto settings = actors::tool_actor_settings::of(opts.name, entry->second.limits);
  ctx.load_plugins();
  auto made = ctx.registry->make_tool(entry->second.plugin, entry->second.config, opts.name);
  if (auto* err = std::get_if<std::string>(&made)) {
    std::cerr << "quarry: " << entry->second.file << ":" << entry->second.line << ": tools."
              << opts.name << ": " << *err << "\n";
    return exit_failure;
  }
  auto tool = std::get<std::shared_ptr<sdk::tool>>(std::move(made));
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
