// Entry point of the `mcp` tool plugin: the tools of an MCP server (stdio or
// Streamable HTTP) as tools of Quarry's research agents.

#include "mcp_tool.hpp"

#include "quarry/sdk/plugin.hpp"

#include <memory>
#include <stdexcept>

namespace {

// The descriptor's factory: a host that does not read QUARRY_TOOL_SET
// cannot offer a server's tools.
std::unique_ptr<quarry::sdk::plugin_object> make(quarry::sdk::host_context&,
                                                 const nlohmann::json&) {
  throw std::invalid_argument("mcp: this Quarry does not support tool sets (QUARRY_TOOL_SET)");
}

} // namespace

QUARRY_PLUGIN(mcp, quarry::sdk::plugin_kind::tool, "0.1.0",
              "the tools of an MCP server (stdio command or Streamable HTTP URL) as research "
              "tools",
              &make)

QUARRY_PLUGIN_KEYS("command", "env", "cwd", "url", "headers", "include", "exclude", "kind",
                   "rename", "timeout", "startup_timeout", "max_tools", "max_output_bytes",
                   "max_message_bytes", "max_results")

QUARRY_TOOL_SET(&quarry::plugins::mcp::make_server_tools)
