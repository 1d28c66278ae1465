// Registration of Quarry's custom message types.

#include "quarry/actors/message_types.hpp"

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/cluster/register.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

namespace quarry::actors {

namespace {

/// Calls `add<T>(name)` on `r` for every message payload type (and every
/// typed handle that travels inside a message). The one list of them.
template <class Registrar>
void announce(Registrar& r) {
  // Names must be identical on every node. Atoms need no entry. First the
  // types of the node interfaces (quarry/cluster), then Quarry's own.
  cluster::announce_types(r);
  r.template add<sdk::error>("quarry.error");
  r.template add<llm_call>("quarry.llm_call");
  r.template add<llm_reply>("quarry.llm_reply");
  r.template add<llm_deltas>("quarry.llm_deltas");
  r.template add<sdk::model_info>("quarry.model_info");
  r.template add<tool_call_msg>("quarry.tool_call");
  r.template add<tool_reply>("quarry.tool_reply");
  r.template add<tool_done_event>("quarry.tool_done_event");
  r.template add<collapse_request>("quarry.collapse_request");
  r.template add<collapse_reply>("quarry.collapse_reply");
}

using config_registrar = cluster::detail::config_registrar;

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
  // The application identifier too, as cluster::register_types sets it.
  cluster::set_app_identifier(cfg);
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
