// The Model Context Protocol (MCP) as a server speaks it, without any I/O:
// JSON-RPC 2.0 messages framed one per line (the stdio transport), the
// lifecycle (initialize, ping), tools, resources, progress and cancellation.
// `quarry mcp` (app/cmd_mcp.cpp) feeds it the lines it reads from standard
// input and gives it a function that writes lines to standard output.
//
// Protocol revision: 2025-11-25 (modelcontextprotocol.io/specification), the
// current one; 2025-06-18, 2025-03-26 and 2024-11-05 are answered too (what
// changed between them does not touch what this server offers: a client of
// an older revision ignores `structuredContent`, `outputSchema` and `title`).

#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core::mcp {

/// JSON-RPC 2.0 error codes (jsonrpc.org/specification, section 5.1) and the
/// one MCP adds for resources (specification, server/resources, "Error
/// Handling").
namespace error_code {
/// The line is not JSON (or nests deeper than @ref max_message_depth).
inline constexpr int parse_error = -32700;
/// JSON, but not a JSON-RPC 2.0 request or notification (a batch, a line
/// longer than @ref max_message_bytes, a wrong `jsonrpc`, `id` or `method`).
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
/// The method's `params` are wrong (an unknown tool, a missing uri, ...).
inline constexpr int invalid_params = -32602;
inline constexpr int internal_error = -32603;
/// resources/read of a URI the server does not have.
inline constexpr int resource_not_found = -32002;
} // namespace error_code

/// The longest message accepted: 4 MiB. A research question is at most
/// 20,000 characters; nothing a client sends this server comes near.
inline constexpr size_t max_message_bytes = size_t{4} << 20;

/// The deepest nesting of arrays and objects accepted in a message (checked
/// before anything is parsed). Tool arguments nest two or three levels.
inline constexpr size_t max_message_depth = 64;

/// Tool calls running at once; a further one is answered with a tool error.
inline constexpr size_t max_running_calls = 32;

/// The protocol revision answered to a client that asks for one this server
/// does not know.
inline constexpr std::string_view latest_protocol_version = "2025-11-25";

/// The revisions this server speaks, newest first.
const std::vector<std::string>& supported_protocol_versions();

/// The revision to answer a client that asked for `requested`: the same one
/// when it is supported, else @ref latest_protocol_version (the client then
/// decides whether it can speak it; lifecycle, "Version Negotiation").
std::string negotiate_version(std::string_view requested);

/// Splits a byte stream into lines, the stdio transport's framing: one
/// JSON-RPC message per line, ended by `\n` (a `\r` before it is dropped).
/// Holds at most `max_line` bytes of a line: a longer one is reported as
/// oversized once its end comes, its bytes dropped as they arrive.
class line_splitter {
public:
  /// One line of the stream.
  struct line {
    std::string text;
    /// The line was longer than the limit; `text` is empty.
    bool oversized = false;
  };

  explicit line_splitter(size_t max_line = max_message_bytes) : max_line_(max_line) {
  }

  /// Appends bytes read from the stream.
  void feed(std::string_view bytes);

  /// The next whole line, if one has ended.
  std::optional<line> next();

  /// At the end of the stream: the unterminated rest as a last line, if
  /// there is one.
  std::optional<line> finish();

private:
  size_t max_line_;
  std::string buffer_;
  // Lines that ended, oldest first, and the read position in `buffer_`.
  size_t scanned_ = 0;
  bool dropping_ = false;
  std::vector<line> ready_;
};

/// A JSON-RPC response line (no newline): `{"jsonrpc": "2.0", "id", "result"}`.
std::string result_line(const nlohmann::json& id, const nlohmann::json& result);

/// A JSON-RPC error line: `{"jsonrpc": "2.0", "id", "error": {"code",
/// "message", "data"?}}`; `id` is null when the request's id is unknown.
std::string error_line(const nlohmann::json& id, int code, std::string_view message,
                       const nlohmann::json& data = nullptr);

/// A notification line: `{"jsonrpc": "2.0", "method", "params"}`.
std::string notification_line(std::string_view method, const nlohmann::json& params);

/// One incoming line, read.
struct message {
  enum kind_t {
    /// A request: `id` (a string or an integer) and `method`.
    request,
    /// A notification: `method`, no `id`.
    notification,
    /// A response to a request of the server's (this server sends none):
    /// ignored.
    response,
    /// Not a JSON-RPC message: `error` is the error line to answer.
    invalid,
  };
  kind_t kind = invalid;
  nlohmann::json id;
  std::string method;
  /// An object (`{}` when the message had none).
  nlohmann::json params = nlohmann::json::object();
  std::string error;
};

/// Reads one line (without its newline) as a JSON-RPC 2.0 message: at most
/// @ref max_message_bytes, nested at most @ref max_message_depth deep
/// (deeper: a parse error, never parsed), invalid UTF-8 repaired. Not JSON:
/// -32700; a batch, not an object, `jsonrpc` not "2.0", an `id` that is not
/// a string or an integer, a `method` that is not a string, `params` that
/// are neither an object nor an array: -32600 (with the id when it could be
/// read); `params` as an array (MCP's methods take named parameters): -32602.
message read_message(std::string_view line);

/// A tool the server offers (server/tools, "Tool").
struct tool {
  std::string name;
  std::string title;
  std::string description;
  /// JSON Schema objects.
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  /// `readOnlyHint`, `openWorldHint`, ... (may be null).
  nlohmann::json annotations;
};

/// A successful tool result: `structured` as `structuredContent` (an object
/// matching the tool's output schema) and `text` as its one text block.
nlohmann::json tool_result(nlohmann::json structured, std::string text);

/// A tool error: `isError: true` with `message` as its text (the model
/// reads it and can act on it); never a JSON-RPC error.
nlohmann::json tool_error(std::string message);

class server;

/// A running `tools/call`. Its functions are safe from any thread.
class call {
public:
  const nlohmann::json& id() const noexcept {
    return id_;
  }
  const std::string& tool() const noexcept {
    return tool_;
  }
  /// An object.
  const nlohmann::json& arguments() const noexcept {
    return arguments_;
  }
  /// Whether the request carried a progress token.
  bool wants_progress() const noexcept {
    return !token_.is_null();
  }

  /// Sends `notifications/progress` with `message`, a progress that grows
  /// by one with each call (and `total` when given), if the request asked
  /// for progress and the call is neither finished nor cancelled.
  void progress(const std::string& message, std::optional<double> total = std::nullopt);

  /// Answers the call with `result` (tool_result() or tool_error()), once;
  /// nothing once it was answered or cancelled (the client no longer waits
  /// for it).
  void finish(const nlohmann::json& result);

  /// Whether the client cancelled the call (or went away).
  bool cancelled() const noexcept {
    return cancelled_.load();
  }

  /// Runs `f` when the call is cancelled (at once, on this thread, when it
  /// was cancelled already); replaces an earlier function.
  void on_cancel(std::function<void()> f);

  call(server* owner, nlohmann::json id, std::string tool, nlohmann::json arguments,
       nlohmann::json token)
    : owner_(owner),
      id_(std::move(id)),
      tool_(std::move(tool)),
      arguments_(std::move(arguments)),
      token_(std::move(token)) {
  }

private:
  friend class server;
  void cancel();

  server* owner_;
  nlohmann::json id_;
  std::string tool_;
  nlohmann::json arguments_;
  nlohmann::json token_;
  std::mutex mtx_;
  std::function<void()> on_cancel_;
  double progress_ = 0;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
};

/// A resource in resources/list.
struct resource {
  std::string uri;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

/// One page of resources/list; `next_cursor` empty on the last.
struct resource_page {
  std::vector<resource> resources;
  std::string next_cursor;
};

/// The text of a resource, for resources/read.
struct resource_text {
  std::string uri;
  std::string mime_type;
  std::string text;
};

/// A JSON-RPC error a handler answers with.
struct rpc_error {
  int code = error_code::internal_error;
  std::string message;
};

/// A resource template in resources/templates/list.
struct resource_template {
  std::string uri_template;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

/// What the server is and does.
struct server_setup {
  /// serverInfo: `name`, `title`, `version`.
  std::string name;
  std::string title;
  std::string version;
  /// `instructions` of the initialize result (may be empty).
  std::string instructions;
  std::vector<tool> tools;
  std::vector<resource_template> resource_templates;
  /// A tools/call of a known tool with object arguments: the handler answers
  /// through the call (call::finish), now or later, from any thread. Not
  /// called for a call over @ref max_running_calls.
  std::function<void(std::shared_ptr<call>)> call_tool;
  /// resources/list with the cursor of the page before (empty: the first).
  std::function<std::variant<resource_page, rpc_error>(const std::string& cursor)> list_resources;
  /// resources/read of a URI.
  std::function<std::variant<std::vector<resource_text>, rpc_error>(const std::string& uri)>
    read_resource;
  /// Writes one line (the newline is the writer's to add). Called from the
  /// thread that handles a message or finishes a call, one line at a time
  /// (the server serialises its calls).
  std::function<void(const std::string& line)> write;
};

/// The server side of one MCP connection. handle() takes each line the
/// client sends, in order; answers and notifications go to `setup.write`.
/// Thread-safe: calls finish and report progress from other threads.
class server {
public:
  explicit server(server_setup setup);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Handles one line (without its newline) of the client's.
  void handle(std::string_view line);

  /// Handles a line longer than @ref max_message_bytes (line_splitter says
  /// so): an invalid-request error with a null id.
  void handle_oversized();

  /// The client went away: every running call is cancelled (their handlers
  /// stop them; nothing more is written for them).
  void cancel_all();

  /// Calls running now.
  size_t running() const;

  /// The revision agreed in initialize (empty before).
  std::string protocol_version() const;

private:
  friend class call;
  void write(const std::string& line);
  void answer(const message& m);
  void call_tool(const message& m);
  void ended(const nlohmann::json& id);

  server_setup setup_;
  mutable std::mutex mtx_;
  // Serialises writes (a call's progress and result come from its thread).
  std::mutex write_mtx_;
  bool initialized_ = false;
  std::string version_;
  // Running calls by their id's JSON text.
  std::map<std::string, std::shared_ptr<call>> calls_;
};

} // namespace quarry::core::mcp
