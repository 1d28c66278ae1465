// The configuration of an `mcp` tool instance (mcp_config.hpp).

#include "mcp_config.hpp"

#include "quarry/sdk/strings.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

namespace quarry::plugins::mcp {

namespace {

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw std::invalid_argument("mcp: '" + key + "' " + why);
}

std::vector<std::string> string_list(const nlohmann::json& config, const char* key) {
  std::vector<std::string> out;
  auto i = config.find(key);
  if (i == config.end())
    return out;
  if (!i->is_array())
    fail(key, "must be a list of strings");
  for (const auto& x : *i) {
    if (!x.is_string() || x.get<std::string>().empty())
      fail(key, "must be a list of non-empty strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> string_map(const nlohmann::json& config, const char* key) {
  std::map<std::string, std::string> out;
  auto i = config.find(key);
  if (i == config.end())
    return out;
  if (!i->is_object())
    fail(key, "must be a map of strings");
  for (const auto& [k, v] : i->items()) {
    if (!v.is_string())
      fail(std::string{key} + "." + k, "must be a string");
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

std::chrono::milliseconds seconds(const nlohmann::json& config, const char* key,
                                  std::chrono::milliseconds fallback) {
  auto i = config.find(key);
  if (i == config.end())
    return fallback;
  if (!i->is_number() || !(i->get<double>() > 0) || i->get<double>() > 3600)
    fail(key, "must be a number of seconds greater than 0, at most 3600");
  return std::chrono::milliseconds{static_cast<int64_t>(std::llround(i->get<double>() * 1000))};
}

size_t count(const nlohmann::json& config, const char* key, size_t fallback, size_t lo, size_t hi) {
  auto i = config.find(key);
  if (i == config.end())
    return fallback;
  if (!i->is_number_integer() || i->get<int64_t>() < static_cast<int64_t>(lo)
      || i->get<int64_t>() > static_cast<int64_t>(hi))
    fail(key, "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<size_t>(i->get<int64_t>());
}

} // namespace

std::string server_config::label() const {
  if (!command.empty()) {
    auto slash = command.front().rfind('/');
    return slash == std::string::npos ? command.front() : command.front().substr(slash + 1);
  }
  auto start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  auto end = url.find_first_of("/?#", start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::optional<sdk::tool_kind> parse_kind(const std::string& x) {
  if (x == "generic" || x == "other")
    return sdk::tool_kind::other;
  if (x == "search" || x == "internal_search")
    return sdk::tool_kind::internal_search;
  if (x == "web_search")
    return sdk::tool_kind::web_search;
  if (x == "page_reader")
    return sdk::tool_kind::page_reader;
  return std::nullopt;
}

server_config parse_config(const nlohmann::json& config) {
  if (!config.is_object())
    throw std::invalid_argument("mcp: the configuration must be a map");
  static const std::set<std::string> known{"command",
                                           "env",
                                           "cwd",
                                           "url",
                                           "headers",
                                           "include",
                                           "exclude",
                                           "kind",
                                           "rename",
                                           "timeout",
                                           "startup_timeout",
                                           "max_tools",
                                           "max_output_bytes",
                                           "max_message_bytes",
                                           "max_results"};
  for (const auto& [key, _] : config.items())
    if (known.count(key) == 0)
      throw std::invalid_argument("mcp: unknown configuration key '" + key + "'");
  server_config cfg;
  cfg.command = string_list(config, "command");
  if (auto i = config.find("url"); i != config.end()) {
    if (!i->is_string())
      fail("url", "must be an http or https URL");
    cfg.url = i->get<std::string>();
    if (!sdk::starts_with(cfg.url, "http://") && !sdk::starts_with(cfg.url, "https://"))
      fail("url", "must be an http or https URL");
  }
  if (cfg.command.empty() == cfg.url.empty())
    throw std::invalid_argument("mcp: give either 'command' (a stdio server: the program and its "
                                "arguments) or 'url' (a Streamable HTTP server), not "
                                + std::string{cfg.command.empty() ? "neither" : "both"});
  cfg.env = string_map(config, "env");
  for (const auto& [name, _] : cfg.env)
    if (name.empty() || name.find('=') != std::string::npos)
      fail("env", "has an invalid variable name '" + name + "'");
  if (auto i = config.find("cwd"); i != config.end()) {
    if (!i->is_string() || i->get<std::string>().empty())
      fail("cwd", "must be a folder");
    cfg.cwd = i->get<std::string>();
  }
  for (auto& [name, value] : string_map(config, "headers")) {
    if (name.empty() || name.find_first_of(":\r\n ") != std::string::npos
        || value.find_first_of("\r\n") != std::string::npos)
      fail("headers", "has an invalid header '" + name + "'");
    cfg.headers.emplace_back(name, value);
  }
  if (!cfg.command.empty() && !cfg.headers.empty())
    fail("headers", "are for a 'url' server");
  if (!cfg.url.empty() && (!cfg.env.empty() || !cfg.cwd.empty()))
    fail(cfg.env.empty() ? "cwd" : "env", "is for a 'command' server");
  cfg.include = string_list(config, "include");
  cfg.exclude = string_list(config, "exclude");
  if (auto i = config.find("kind"); i != config.end()) {
    auto bad = [&](const std::string& key) {
      fail(key, "must be generic, search, web_search, internal_search or page_reader");
    };
    if (i->is_string()) {
      auto k = parse_kind(i->get<std::string>());
      if (!k)
        bad("kind");
      cfg.default_kind = *k;
    } else if (i->is_object()) {
      for (const auto& [tool, value] : i->items()) {
        auto k = value.is_string() ? parse_kind(value.get<std::string>()) : std::nullopt;
        if (!k)
          bad("kind." + tool);
        cfg.kinds.emplace(tool, *k);
      }
    } else {
      fail("kind", "must be a kind for every tool, or a map from tool names to kinds");
    }
  }
  cfg.rename = string_map(config, "rename");
  for (const auto& [from, to] : cfg.rename)
    if (to.empty() || to.size() > 64 || model_tool_name(to) != to)
      fail("rename." + from, "must be 1 to 64 letters, digits, '_' or '-'");
  cfg.call_timeout = seconds(config, "timeout", cfg.call_timeout);
  cfg.startup_timeout = seconds(config, "startup_timeout", cfg.startup_timeout);
  cfg.max_tools = count(config, "max_tools", cfg.max_tools, 1, 256);
  cfg.max_output_bytes = count(config, "max_output_bytes", cfg.max_output_bytes, 1024,
                               16 * 1024 * 1024);
  cfg.max_message_bytes = count(config, "max_message_bytes", cfg.max_message_bytes, 64 * 1024,
                                256 * 1024 * 1024);
  cfg.max_results = count(config, "max_results", cfg.max_results, 1, 100);
  return cfg;
}

std::string model_tool_name(const std::string& name) {
  std::string out;
  for (auto c : name) {
    if (out.size() == 64)
      break;
    auto ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
              || c == '-';
    out.push_back(ok ? c : '_');
  }
  return out;
}

} // namespace quarry::plugins::mcp
