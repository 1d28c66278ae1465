// `quarry llm chat`: one streaming call through the provider actor, the way
// the research agents make it. How a user checks a provider configuration.

#include "cli.hpp"
#include "context.hpp"

#include "quarry/sdk/json.hpp"

#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/core/regular_file.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <optional>
#include <iostream>

namespace quarry::app {

namespace {

int print_failure(const llm_chat_options& opts, const sdk::error& err) {
  if (opts.json) {
    nlohmann::json j{{"error",
                      {{"class", sdk::to_string(err.code)},
                       {"message", err.message},
                       {"status", err.http_status}}}};
    std::cout << sdk::dump_json(j) << std::endl;
  } else {
    std::cout.flush();
    std::cerr << "quarry: llm chat failed: " << sdk::to_string(err) << "\n";
  }
  return exit_failure;
}

} // namespace

int cmd_llm_chat(context& ctx, const llm_chat_options& opts) {
  const auto& llm = ctx.config.values.llm;
  auto name = opts.provider.empty() ? llm.default_provider : opts.provider;
  if (name.empty()) {
    std::cerr << "quarry: no LLM provider configured: add one under "
                 "llm.providers in the configuration (see config/quarry.yaml), "
                 "or pass --set llm.providers.NAME.plugin=...\n";
    return exit_usage;
  }
  auto entry = llm.providers.find(name);
  if (entry == llm.providers.end()) {
    std::cerr << "quarry: no LLM provider named '" << name << "' (configured: ";
    auto first = true;
    for (const auto& [key, _] : llm.providers) {
      std::cerr << (first ? "" : ", ") << key;
      first = false;
    }
    std::cerr << (first ? "none" : "") << ")\n";
    return exit_usage;
  }
  // The request.
  sdk::chat_request req;
  if (!opts.system.empty())
    req.messages.push_back({sdk::role::system, opts.system, {}, {}, {}, {}, {}});
  req.messages.push_back({sdk::role::user, opts.message, {}, {}, {}, {}, {}});
  req.model = opts.model;
  req.max_tokens = opts.max_tokens;
  req.role_tag = "chat";
  if (auto choice = core::parse_tool_choice(opts.tool_choice))
    req.choice = *choice;
  if (!opts.tools_file.empty()) {
    // A regular file within 1 MiB, never a FIFO that would hang the command.
    auto read = core::read_regular_file(opts.tools_file, 1 << 20);
    if (auto* err = std::get_if<core::file_error>(&read)) {
      std::cerr << "quarry: cannot read " << opts.tools_file << ": " << err->message << "\n";
      return exit_usage;
    }
    auto j = nlohmann::json::parse(std::get<core::regular_file_text>(read).text, nullptr, false);
    if (j.is_discarded()) {
      std::cerr << "quarry: " << opts.tools_file << ": not valid JSON\n";
      return exit_usage;
    }
    if (auto err = core::parse_tool_definitions(j, req.tools)) {
      std::cerr << "quarry: " << opts.tools_file << ": " << *err << "\n";
      return exit_usage;
    }
  }
  // The provider.
  auto settings = actors::llm_actor_settings::of(name, entry->second.limits);
  settings.offline = entry->second.plugin == "extractive"; // no model runs
  ctx.load_plugins();
  auto made = ctx.registry->make_llm(entry->second.plugin, entry->second.config, name);
  if (auto* err = std::get_if<std::string>(&made)) {
    std::cerr << "quarry: " << entry->second.file << ":" << entry->second.line << ": llm.providers."
              << name << ": " << *err << "\n";
    return exit_failure;
  }
  auto provider = std::get<std::shared_ptr<sdk::llm_provider>>(std::move(made));
  int rc = exit_ok;
  {
    actors::runtime rt{ctx.config.values};
    auto hdl = actors::spawn_llm_provider(rt.system(), provider, std::move(settings));
    rt.add_stoppable(hdl);
    std::atomic<int> interrupted{0};
    actors::signal_watcher watcher{[&](int sig) {
      interrupted = sig;
      caf::anon_send(hdl, actors::cancel_atom::value, uint64_t{1});
    }};
    caf::scoped_actor self{rt.system()};
    // A plain send: the reply (or error) comes back as an ordinary message
    // after the deltas. The provider actor bounds the call's total time.
    self->send(hdl, actors::chat_atom::value, actors::llm_call{1, std::move(req)});
    auto done = false;
    auto streamed_text = false;
    std::optional<nlohmann::json> answer; // --json: the answer to print
    while (!done) {
      self->receive(
        [&](actors::delta_atom, const actors::llm_deltas& ds) {
          if (opts.json)
            return;
          for (const auto& d : ds) {
            if (d.kind == actors::delta_kind::text) {
              std::cout << d.text << std::flush;
              streamed_text = true;
            } else if (d.kind == actors::delta_kind::reasoning && opts.show_reasoning) {
              std::cerr << d.text << std::flush;
            }
          }
        },
        [&](actors::llm_reply& reply) {
          done = true;
          const auto& r = reply.result;
          if (opts.json) {
            auto calls = nlohmann::json::array();
            for (const auto& tc : r.tool_calls) {
              // Bounded: arguments nested too deep stay a string.
              auto args = sdk::parse_json(tc.arguments);
              calls.push_back(
                {{"id", tc.id},
                 {"name", tc.name},
                 {"arguments", args.is_discarded() ? nlohmann::json(tc.arguments) : args}});
            }
            nlohmann::json out{
              {"text", r.text},
              {"reasoning", r.reasoning},
              {"tool_calls", calls},
              {"finish_reason", sdk::to_string(r.finish)},
              {"usage",
               {{"input_tokens", r.usage.input_tokens}, {"output_tokens", r.usage.output_tokens}}},
              {"provider", reply.provider},
              {"model", r.model},
              {"attempts", reply.attempts},
              {"cost_usd", reply.cost_usd},
              {"cost_known", reply.basis != core::cost_basis::unpriced}};
            answer = std::move(out); // printed with the context window below

          } else {
            if (streamed_text && (r.text.empty() || r.text.back() != '\n'))
              std::cout << "\n";
            for (const auto& tc : r.tool_calls)
              std::cout << "[tool call " << tc.name << " " << tc.arguments << "]\n";
            std::cout.flush();
            spdlog::info("{} ({}): {} in, {} out tokens, {} attempt(s), "
                         "finish {}",
                         reply.provider, r.model, r.usage.input_tokens, r.usage.output_tokens,
                         reply.attempts, sdk::to_string(r.finish));
          }
        },
        [&](caf::error& err) {
          done = true;
          rc = print_failure(opts, actors::from_caf_error(err));
        });
    }
    if (answer) {
      // The model's context window as the provider found it (one probe of
      // the server, bounded by the actor's time limit).
      nlohmann::json window{{"tokens", nullptr}, {"source", ""}};
      self
        ->request(hdl, actors::llm_describe_timeout + std::chrono::seconds{2},
                  actors::describe_atom::value)
        .receive(
          [&](const sdk::model_info& info) {
            if (info.context_window > 0)
              window["tokens"] = info.context_window;
            window["source"] = info.context_window_source;
          },
          [](const caf::error&) {});
      (*answer)["context_window"] = std::move(window);
      std::cout << sdk::dump_json(*answer) << std::endl;
    }
    if (auto sig = interrupted.load(); sig != 0) {
      std::cerr << "quarry: interrupted\n";
      rc = actors::exit_code_for_signal(sig);
    }
  }
  return rc;
}

} // namespace quarry::app
