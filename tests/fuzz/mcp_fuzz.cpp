// libFuzzer target: arbitrary bytes as what an MCP client writes to
// `quarry mcp`'s standard input, cut into pieces at arbitrary places, through
// core::mcp::line_splitter and core::mcp::server (initialized first, with one
// tool that answers at once, reports progress, or waits and is cancelled).
// Checks: every line the server writes is one JSON-RPC 2.0 object without a
// newline (a response with an id or null, or a notification), every error
// has an integer code, nothing throws, every call ends.

#include "quarry/core/mcp.hpp"
#include "quarry/sdk/json.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mcp = quarry::core::mcp;
using nlohmann::json;

namespace {

void check(bool condition) {
  if (!condition)
    std::abort();
}

void check_line(const std::string& line) {
  check(line.find('\n') == std::string::npos);
  auto j = json::parse(line, nullptr, false);
  check(j.is_object());
  check(j.value("jsonrpc", "") == "2.0");
  if (j.contains("method")) {
    check(j["method"].is_string());
    return;
  }
  check(j.contains("id"));
  const auto& id = j["id"];
  check(id.is_null() || id.is_string() || id.is_number_integer());
  check(j.contains("result") != j.contains("error"));
  if (j.contains("error"))
    check(j["error"]["code"].is_number_integer() && j["error"]["message"].is_string());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  std::vector<std::shared_ptr<mcp::call>> waiting;
  mcp::server_setup s;
  s.name = "fuzz";
  s.version = "1";
  s.tools.push_back({"echo", "", "",
                     json{{"type", "object"},
                          {"properties", {{"text", {{"type", "string"}}}}},
                          {"required", {"text"}}},
                     json{{"type", "object"}}, nullptr});
  s.call_tool = [&waiting](std::shared_ptr<mcp::call> c) {
    auto text = c->arguments().value("text", "");
    if (text.size() % 3 == 0) {
      c->finish(mcp::tool_result({{"text", text}}, text));
    } else if (text.size() % 3 == 1) {
      c->progress(text);
      c->finish(mcp::tool_error(text));
    } else {
      waiting.push_back(std::move(c));
    }
  };
  s.list_resources = [](const std::string&) -> std::variant<mcp::resource_page, mcp::rpc_error> {
    return mcp::resource_page{};
  };
  s.read_resource =
    [](const std::string& uri) -> std::variant<std::vector<mcp::resource_text>, mcp::rpc_error> {
    if (uri.size() % 2 == 0)
      return mcp::rpc_error{mcp::error_code::resource_not_found, "Resource not found"};
    return std::vector<mcp::resource_text>{{uri, "text/plain", uri}};
  };
  size_t lines = 0;
  s.write = [&lines](const std::string& line) {
    check_line(line);
    ++lines;
  };
  mcp::server srv{std::move(s)};
  srv.handle(
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}})");
  check(lines == 1);
  // The first byte chooses where the stream is cut; the splitter's cap is
  // small so that oversized lines happen.
  size_t step = size > 0 ? 1 + static_cast<unsigned char>(bytes[0]) % 64 : 1;
  mcp::line_splitter splitter{4096};
  auto drain = [&](std::optional<mcp::line_splitter::line> l) {
    if (!l)
      return false;
    if (l->oversized)
      srv.handle_oversized();
    else
      srv.handle(l->text);
    return true;
  };
  for (size_t at = 0; at < bytes.size(); at += step) {
    splitter.feed(bytes.substr(at, step));
    while (drain(splitter.next())) {
    }
  }
  drain(splitter.finish());
  // The client goes away: every waiting call is cancelled, then ends.
  srv.cancel_all();
  for (auto& c : waiting) {
    check(c->cancelled());
    c->finish(mcp::tool_error("stopped"));
  }
  check(srv.running() == 0);
  return 0;
}
