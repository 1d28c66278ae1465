// The tools of one MCP server, offered to research agents: each listed tool
// the configuration selects becomes a Quarry tool under its own schema,
// whose calls go to the server as `tools/call`.

#pragma once

#include "mcp_client.hpp"
#include "mcp_config.hpp"
#include "mcp_results.hpp"

#include "quarry/sdk/plugin.hpp"
#include "quarry/sdk/tool.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace quarry::plugins::mcp {

/// What Quarry offers of one listed tool.
struct tool_spec {
  /// The server's name for it (in `tools/call`).
  std::string server_name;
  /// The name the model calls it by.
  std::string name;
  std::string description;
  /// Its `inputSchema`.
  nlohmann::json parameters;
  sdk::tool_kind kind = sdk::tool_kind::other;
};

/// Chooses the tools to offer from a `tools/list` answer (MCP tool objects:
/// `name`, `title`, `description`, `inputSchema`): `include` and `exclude`,
/// `rename` and `kind` applied, names made acceptable to model APIs, long
/// descriptions cut, tools whose schema is not an object schema or larger
/// than max_schema_bytes left out (named in `notes`), at most `max_tools`
/// (the rest named in `notes`). Throws std::invalid_argument when the
/// configuration names a tool the server does not list, or when two tools
/// would get the same name.
std::vector<tool_spec> select_tools(const std::vector<nlohmann::json>& listed,
                                    const server_config& cfg, std::vector<std::string>& notes);

/// One tool of an MCP server.
class mcp_tool final : public sdk::tool {
public:
  mcp_tool(std::shared_ptr<client> connection, tool_spec spec, const server_config& cfg);

  std::string name() const override;

  std::string description() const override;

  nlohmann::json parameters() const override;

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override;

private:
  std::shared_ptr<client> connection_;
  tool_spec spec_;
  result_options options_;
  std::chrono::milliseconds timeout_;
};

/// The QUARRY_TOOL_SET factory: starts the server (or reaches it), lists
/// its tools within `startup_timeout` and returns the selected ones, which
/// share the connection. Throws std::invalid_argument for a bad
/// configuration and std::runtime_error when the server cannot be started
/// or listed.
std::vector<sdk::tool_offer> make_server_tools(sdk::host_context& host,
                                               const nlohmann::json& config);

} // namespace quarry::plugins::mcp
