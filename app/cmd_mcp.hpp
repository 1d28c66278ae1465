// `quarry mcp`: Quarry as a Model Context Protocol server over stdio
// (docs/mcp.md). cmd_mcp.cpp has the command and its transport;
// cmd_mcp_tools.cpp the tools and resources it offers.

#pragma once

#include "context.hpp"
#include "serve_sessions.hpp"

#include "quarry/core/mcp.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <variant>

namespace quarry::sdk {
class blocking_pool;
} // namespace quarry::sdk

namespace quarry::store {
class store;
} // namespace quarry::store

namespace quarry::app {

class research_engine;

/// `quarry mcp`: reads JSON-RPC messages from standard input, one per line,
/// and writes the answers to standard output; logs go to standard error.
/// Runs until standard input ends (the client went away: running researches
/// are cancelled) or SIGINT/SIGTERM (they are stopped and kept as
/// interrupted). Exit 0, or 1 when the store or the engine cannot start.
int cmd_mcp(context& ctx);

/// What the tools of `quarry mcp` work with. Lives as long as the server.
struct mcp_service {
  context& ctx;
  research_engine& engine;
  session_manager_actor manager;
  std::string store_file;
  sdk::blocking_pool& pool;
  /// A connection for reading (resources/list and resources/read), used
  /// under `reader_mtx`.
  std::shared_ptr<store::store> reader;
  /// Why researches are refused (the models' context windows are too
  /// small), or empty.
  std::string refusal;
  std::mutex reader_mtx;
};

/// The server's setup: its name and version, the tools (deep_research,
/// quick_search, read_url, get_report, list_sessions) with their schemas and
/// handlers, and the stored reports as resources
/// (`quarry://sessions/{id}/report`, `quarry://sessions/{id}/sources`).
/// `write` is left to the caller.
core::mcp::server_setup mcp_server_setup(std::shared_ptr<mcp_service> svc);

/// A stored session's report as deep_research and get_report return it:
/// `{"session_id", "state", "question", "report", "sources": [{"number",
/// "title", "url", "passage", "snippet_only"}], "partial", "truncated"}` and
/// the report as Markdown with its numbered sources; or why there is none
/// (unknown session, no report yet, a store that cannot be read).
std::variant<std::pair<nlohmann::json, std::string>, std::string>
stored_report_result(store::store& db, const std::string& id);

/// The message a packet of a research shows as MCP progress (the plan, an
/// agent's task, its searches and reads, the number of sources found, the
/// final report starting), or empty. Keeps what it needs between packets.
class research_progress {
public:
  std::string on_packet(const std::string& line);

private:
  std::string plan_;
  bool plan_sent_ = false;
  std::set<std::string> sources_;
};

} // namespace quarry::app
