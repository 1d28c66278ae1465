// Registration of Quarry's custom message types.

#include "quarry/actors/message_types.hpp"

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

namespace quarry::actors {

namespace {

/// Calls `add<T>(name)` on `r` for every message payload type (and every
/// typed handle that travels inside a message). The one list of them.
template <class Registrar>
void announce(Registrar& r) {
  // Names must be identical on every node. Atoms need no entry.
  r.template add<sdk::error>("quarry.error");
  r.template add<llm_call>("quarry.llm_call");
  r.template add<llm_delta>("quarry.llm_delta");
  r.template add<llm_reply>("quarry.llm_reply");
  r.template add<llm_sink_event>("quarry.llm_sink_event");
  r.template add<tool_call_msg>("quarry.tool_call");
  r.template add<tool_reply>("quarry.tool_reply");
  r.template add<tool_done_event>("quarry.tool_done_event");
  r.template add<packet_msg>("quarry.packet");
  r.template add<line_sink_actor>("quarry.line_sink_actor");
  r.template add<agent_result>("quarry.agent_result");
  r.template add<collapse_request>("quarry.collapse_request");
  r.template add<collapse_reply>("quarry.collapse_reply");
  r.template add<session_result>("quarry.session_result");
}

struct config_registrar {
  caf::actor_system_config& cfg;

  template <class T>
  void add(const char* name) {
    cfg.add_message_type<T>(name);
  }
};

struct name_registrar {
  std::vector<std::string> names;

  template <class T>
  void add(const char* name) {
    names.emplace_back(name);
  }
};

} // namespace

void register_message_types(caf::actor_system_config& cfg) {
  config_registrar r{cfg};
  announce(r);
}

const std::vector<std::string>& message_type_names() {
  static const auto names = [] {
    name_registrar r;
    announce(r);
    return std::move(r.names);
  }();
  return names;
}

} // namespace quarry::actors
