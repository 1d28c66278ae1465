// The tools of one MCP server (mcp_tool.hpp).

#include "mcp_tool.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace quarry::plugins::mcp {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& xs, size_t most = 20) {
  std::string out;
  for (size_t i = 0; i < xs.size() && i < most; ++i)
    out += (i > 0 ? ", " : "") + xs[i];
  if (xs.size() > most)
    out += " and " + std::to_string(xs.size() - most) + " more";
  return out.empty() ? "none" : out;
}

bool listed(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

/// Cancels a call: tells the server, ends the run.
class call_run final : public sdk::tool_run {
public:
  call_run(std::weak_ptr<client> connection, uint64_t handle)
    : connection_(std::move(connection)), handle_(handle) {
    // nop
  }

  void cancel() override {
    if (auto c = connection_.lock())
      c->cancel(handle_, "cancelled by Quarry");
  }

private:
  std::weak_ptr<client> connection_;
  uint64_t handle_;
};

} // namespace

std::vector<tool_spec> select_tools(const std::vector<json>& tools, const server_config& cfg,
                                    std::vector<std::string>& notes) {
  std::vector<std::string> names;
  for (const auto& t : tools)
    if (t.is_object() && t.contains("name") && t["name"].is_string())
      names.push_back(t["name"].get<std::string>());
  auto check_named = [&](const std::string& key, const std::string& name) {
    if (!listed(names, name))
      throw std::invalid_argument("mcp: '" + key + "' names the tool '" + name
                                  + "', which the "
                                    "MCP server "
                                  + cfg.label() + " does not offer (it offers: " + join(names)
                                  + ")");
  };
  for (const auto& n : cfg.include)
    check_named("include", n);
  for (const auto& n : cfg.exclude)
    check_named("exclude", n);
  for (const auto& [n, _] : cfg.kinds)
    check_named("kind." + n, n);
  for (const auto& [n, _] : cfg.rename)
    check_named("rename." + n, n);
  std::vector<tool_spec> out;
  std::vector<std::string> capped;
  std::map<std::string, std::string> taken; // model name -> server name
  std::set<std::string> seen;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      continue;
    auto name = t["name"].get<std::string>();
    if (name.empty() || name.size() > 256 || !seen.insert(name).second)
      continue;
    if ((!cfg.include.empty() && !listed(cfg.include, name)) || listed(cfg.exclude, name))
      continue;
    tool_spec spec;
    spec.server_name = name;
    auto r = cfg.rename.find(name);
    spec.name = r != cfg.rename.end() ? r->second : model_tool_name(name);
    if (spec.name.empty())
      continue;
    auto schema = t.contains("inputSchema") ? t["inputSchema"] : json{{"type", "object"}};
    if (!schema.is_object() || schema.value("type", json{}) != "object"
        || sdk::dump_json(schema).size() > max_schema_bytes) {
      notes.push_back("left out the tool '" + name
                      + "': its input schema is not an object "
                        "schema of at most "
                      + std::to_string(max_schema_bytes / 1024) + " KiB");
      continue;
    }
    spec.parameters = std::move(schema);
    auto description = t.contains("description") && t["description"].is_string()
                         ? t["description"].get<std::string>()
                         : std::string{};
    if (description.empty() && t.contains("title") && t["title"].is_string())
      description = t["title"].get<std::string>();
    spec.description = std::string{
      sdk::utf8_prefix(sdk::repair_utf8(description), max_description_bytes)};
    auto k = cfg.kinds.find(name);
    spec.kind = k != cfg.kinds.end() ? k->second : cfg.default_kind;
    if (out.size() >= cfg.max_tools) {
      capped.push_back(name);
      continue;
    }
    if (auto [pos, fresh] = taken.emplace(spec.name, name); !fresh)
      throw std::invalid_argument("mcp: the tools '" + pos->second + "' and '" + name
                                  + "' of the MCP server " + cfg.label() + " would both be called '"
                                  + spec.name + "'; give one another name under 'rename'");
    out.push_back(std::move(spec));
  }
  if (!capped.empty())
    notes.push_back("offers the first " + std::to_string(cfg.max_tools)
                    + " tools (max_tools); left out: " + join(capped));
  return out;
}

mcp_tool::mcp_tool(std::shared_ptr<client> connection, tool_spec spec, const server_config& cfg)
  : connection_(std::move(connection)), spec_(std::move(spec)), timeout_(cfg.call_timeout) {
  options_.tool = spec_.name;
  options_.kind = spec_.kind;
  options_.max_output_bytes = cfg.max_output_bytes;
  options_.max_results = cfg.max_results;
}

std::string mcp_tool::name() const {
  return spec_.name;
}

std::string mcp_tool::description() const {
  return spec_.description;
}

json mcp_tool::parameters() const {
  return spec_.parameters;
}

std::shared_ptr<sdk::tool_run> mcp_tool::run(const json& arguments, sdk::tool_callback done) {
  // The host's hints for page readers are Quarry's, not the server's.
  json args = arguments.is_object() ? arguments : json::object();
  args.erase("_quarry");
  json params{{"name", spec_.server_name}, {"arguments", args}};
  auto options = options_;
  auto handle = connection_->request("tools/call", std::move(params), timeout_,
                                     [options, args, done = std::move(done)](rpc_outcome out) {
                                       if (out.failure) {
                                         sdk::tool_result r;
                                         r.llm_text = "The tool " + options.tool
                                                      + " failed: " + out.failure->message;
                                         r.failure = std::move(out.failure);
                                         done(std::move(r));
                                         return;
                                       }
                                       done(convert_result(out.result, args, options));
                                     });
  return std::make_shared<call_run>(connection_, handle);
}

std::vector<sdk::tool_offer> make_server_tools(sdk::host_context& host, const json& config) {
  auto cfg = parse_config(config);
  auto connection = client::make(host, cfg);
  auto listed = connection->list_tools(cfg.startup_timeout);
  if (auto* err = std::get_if<sdk::error>(&listed)) {
    connection->close();
    throw std::runtime_error("cannot list the tools of the MCP server " + cfg.label() + ": "
                             + err->message);
  }
  std::vector<std::string> notes;
  std::vector<tool_spec> specs;
  try {
    specs = select_tools(std::get<std::vector<json>>(listed), cfg, notes);
  } catch (...) {
    connection->close();
    throw;
  }
  for (const auto& note : notes)
    host.log().log(sdk::log_level::warn, "mcp " + cfg.label() + ": " + note);
  std::vector<sdk::tool_offer> out;
  for (auto& spec : specs) {
    auto kind = spec.kind;
    out.push_back({std::make_unique<mcp_tool>(connection, std::move(spec), cfg), kind});
  }
  return out;
}

} // namespace quarry::plugins::mcp
