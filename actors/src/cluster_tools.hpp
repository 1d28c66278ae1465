// What the cluster's actors share (agent_host.cpp, worker_directory.cpp,
// agent_runner.cpp). Internal to quarry_actors.

#pragma once

#include "quarry/actors/research_agent.hpp"

#include <string>
#include <vector>

namespace quarry::actors::detail {

/// The names of the tools in `tools`, in order.
inline std::vector<std::string> tool_names(const tool_set& tools) {
  std::vector<std::string> out;
  for (const auto& [name, entry] : tools.tools)
    out.push_back(name);
  return out;
}

} // namespace quarry::actors::detail
