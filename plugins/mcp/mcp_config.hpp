// The configuration of one `mcp` tool instance: which MCP server to reach
// (a command over stdio or a Streamable HTTP URL), which of its tools to
// offer, under which names and kinds, and the caps that contain it.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/tool.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace quarry::plugins::mcp {

/// Tools offered per instance by default; a server that lists more offers
/// only the first ones (after include/exclude) and the rest are named in
/// the log. The model's context holds every tool's schema: 32 is already
/// far more than a research agent uses.
inline constexpr size_t default_max_tools = 32;

/// Most tools read from a server's listing, over all its pages (a server
/// listing more is cut there, with a warning).
inline constexpr size_t max_listed_tools = 1000;

/// Most pages of `tools/list` followed.
inline constexpr size_t max_list_pages = 50;

/// Bytes of one JSON-RPC message accepted from a server (a longer line or
/// event fails the request it answers, or every pending one when it cannot
/// be told apart).
inline constexpr size_t default_max_message_bytes = 16 * 1024 * 1024;

/// Bytes of a tool's text given to the model by default (the rest is cut
/// with a note); open_url's page budget is of the same order.
inline constexpr size_t default_max_output_bytes = 128 * 1024;

/// Longest description of a tool or of a parameter schema kept, in bytes.
inline constexpr size_t max_description_bytes = 4096;

/// Largest input schema kept, in bytes of JSON (a larger one is refused:
/// the tool is not offered).
inline constexpr size_t max_schema_bytes = 64 * 1024;

/// The options of one instance.
struct server_config {
  /// The command to start a stdio server, program first (found in PATH
  /// when it has no slash). Empty for an HTTP server.
  std::vector<std::string> command;
  /// Variables added to the server's environment. The server otherwise
  /// sees only HOME, LOGNAME, PATH, SHELL, TERM and USER of Quarry's (the
  /// official TypeScript SDK's stdio client inherits the same six): API
  /// keys of Quarry's own never reach it unless given here.
  std::map<std::string, std::string> env;
  /// The server's working folder; empty: Quarry's.
  std::string cwd;
  /// The endpoint of a Streamable HTTP server (http or https); empty for
  /// a stdio server.
  std::string url;
  /// Header fields sent with every HTTP request (e.g. Authorization).
  sdk::http_headers headers;
  /// The server's tools to offer; empty: all of them.
  std::vector<std::string> include;
  /// The server's tools never offered (applied after `include`).
  std::vector<std::string> exclude;
  /// What each offered tool is, by the server's tool name; tools not named
  /// get `default_kind`.
  std::map<std::string, sdk::tool_kind> kinds;
  sdk::tool_kind default_kind = sdk::tool_kind::other;
  /// The name the model calls a tool by, by the server's tool name; others
  /// keep theirs (characters a model API refuses become `_`).
  std::map<std::string, std::string> rename;
  /// Time for the server to start and answer `initialize` and
  /// `tools/list`.
  std::chrono::milliseconds startup_timeout{30000};
  /// Time for one tool call (Quarry's `limits.timeout` bounds a whole run,
  /// retries included).
  std::chrono::milliseconds call_timeout{60000};
  size_t max_tools = default_max_tools;
  size_t max_output_bytes = default_max_output_bytes;
  size_t max_message_bytes = default_max_message_bytes;
  /// Results a search tool keeps per call (as the web search plugins).
  size_t max_results = 10;

  /// A short name of the server for messages: the program's file name or
  /// the URL's host.
  std::string label() const;
};

/// Reads a kind: `generic` (or `other`), `search` (= `internal_search`),
/// `web_search`, `internal_search` or `page_reader`.
std::optional<sdk::tool_kind> parse_kind(const std::string& x);

/// Validates the options (see the README). Throws std::invalid_argument
/// naming the key for a missing, invalid or unknown one.
server_config parse_config(const nlohmann::json& config);

/// The name a model API accepts for `name`: 1 to 64 of `A-Z a-z 0-9 _ -`
/// (OpenAI's function name pattern), others replaced by `_`, cut at 64.
std::string model_tool_name(const std::string& name);

} // namespace quarry::plugins::mcp
