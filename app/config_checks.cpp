// Checks of the configured plugin instances and the probe of `config check`.

#include "config_checks.hpp"

#include "quarry/core/instances.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <variant>

namespace quarry::app {

namespace {

using json = nlohmann::json;

std::string location(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

} // namespace

std::vector<core::config_error> check_configured_instances(context& ctx,
                                                           const instance_check_options& options) {
  ctx.load_plugins();
  auto keys = [&](const std::string& plugin) -> std::optional<std::vector<std::string>> {
    if (const auto* info = ctx.registry->find(plugin))
      return info->keys;
    return std::nullopt;
  };
  // Limits written beside the options (older files) move under `limits`,
  // with a warning each; the effective configuration shows where they went.
  std::vector<core::config_error> warnings;
  auto errors = core::check_instances(ctx.config.values, keys, &warnings);
  if (!warnings.empty()) {
    for (const auto& w : warnings)
      ctx.config.warnings.push_back(w.to_string());
    ctx.config.effective = core::to_json(ctx.config.values);
  }
  const auto& cfg = ctx.config.values;
  // Instances with key errors are not created: their plugin would only
  // repeat the first of them, without a line.
  std::set<std::string> bad;
  for (const auto& err : errors) {
    auto second_dot = err.key.find('.', err.key.rfind("llm.providers.", 0) == 0
                                          ? std::string{"llm.providers."}.size()
                                          : std::string{"tools."}.size());
    bad.insert(err.key.substr(0, second_dot));
  }
  auto fail_at = [&](const core::plugin_instance& entry, const std::string& key,
                     std::string message) {
    errors.push_back({entry.file, entry.line, key, std::move(message)});
  };
  if (options.make_llms) {
    for (const auto& [name, entry] : cfg.llm.providers) {
      auto key = "llm.providers." + name;
      if (bad.count(key) > 0)
        continue;
      auto made = ctx.registry->make_llm(entry.plugin, entry.config, name);
      if (auto* err = std::get_if<std::string>(&made))
        fail_at(entry, key, *err);
    }
  }
  if (options.make_tools) {
    // The name the model calls a tool by -> the instance that provides it.
    std::map<std::string, std::string> names;
    for (const auto& [name, entry] : cfg.tools) {
      auto key = "tools." + name;
      if (bad.count(key) > 0)
        continue;
      auto made = ctx.registry->make_tools(entry.plugin, entry.config, name);
      if (auto* err = std::get_if<std::string>(&made)) {
        fail_at(entry, key, *err);
        continue;
      }
      const auto* info = ctx.registry->find(entry.plugin);
      auto hint = info != nullptr && info->tool_set ? " (give it another name under rename)"
                                                    : std::string{};
      for (const auto& tool : std::get<std::vector<host::made_tool>>(made)) {
        auto tool_name = tool.tool->name();
        const auto& reserved = core::reserved_tool_names();
        if (std::find(reserved.begin(), reserved.end(), tool_name) != reserved.end()) {
          fail_at(entry, key,
                  "provides the tool `" + tool_name
                    + "`, a name of Quarry's own research tools: the model could not tell them "
                      "apart"
                    + hint);
          continue;
        }
        auto [pos, fresh] = names.emplace(tool_name, key);
        if (fresh)
          continue;
        const auto& first = cfg.tools.at(pos->second.substr(6));
        const auto* first_info = ctx.registry->find(first.plugin);
        auto rename = !hint.empty() || (first_info != nullptr && first_info->tool_set)
                        ? " (or give the MCP tool another name under rename)"
                        : std::string{};
        fail_at(entry, key,
                "provides the tool `" + tool_name + "`, like " + pos->second + " ("
                  + location(first.file, first.line)
                  + "): the model could call only one of them; remove one" + rename);
      }
    }
  }
  return errors;
}

void print_config_errors(const std::vector<core::config_error>& errors) {
  std::cerr << "quarry: invalid configuration:\n";
  for (const auto& err : errors)
    std::cerr << "  " << err.to_string() << "\n";
}

// -- the probe ----------------------------------------------------------------

const char* to_string(probe_status x) noexcept {
  switch (x) {
    case probe_status::reachable:
      return "reachable";
    case probe_status::local:
      return "local";
    case probe_status::not_probed:
      return "not probed";
    case probe_status::refused:
      return "refused";
    case probe_status::unreachable:
      return "unreachable";
    case probe_status::timeout:
      return "no answer";
    case probe_status::unauthorised:
      return "unauthorised";
    case probe_status::wrong_protocol:
      return "wrong protocol";
    case probe_status::failed:
      return "failed";
  }
  return "?";
}

bool is_probe_failure(probe_status x) noexcept {
  return x != probe_status::reachable && x != probe_status::local && x != probe_status::not_probed;
}

namespace {

// Waits for a number of probes, each finishing at most once.
struct probe_board {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<probe_result> results;
  std::vector<bool> done;
  size_t pending = 0;

  /// Adds a probe; `finished` for results known at once.
  size_t add(probe_result x, bool finished = false) {
    std::lock_guard<std::mutex> guard{mtx};
    results.push_back(std::move(x));
    done.push_back(finished);
    if (!finished)
      ++pending;
    return results.size() - 1;
  }

  void finish(size_t i, probe_status status, std::string detail) {
    std::lock_guard<std::mutex> guard{mtx};
    if (done[i])
      return;
    done[i] = true;
    results[i].status = status;
    results[i].detail = std::move(detail);
    --pending;
    cv.notify_all();
  }
};

std::string trim_base(std::string url) {
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  return url;
}

std::string string_key(const json& config, const char* key, std::string fallback) {
  auto i = config.find(key);
  if (i != config.end() && i->is_string() && !i->get<std::string>().empty())
    return i->get<std::string>();
  return fallback;
}

// The status of a failed transfer or tool run, from its error class and text.
probe_status classify(const sdk::error& err) {
  auto msg = sdk::to_lower(err.message);
  auto has = [&](const char* needle) { return sdk::contains(msg, needle); };
  switch (err.code) {
    case sdk::errc::auth:
      return probe_status::unauthorised;
    case sdk::errc::timeout:
    case sdk::errc::stall:
      return probe_status::timeout;
    case sdk::errc::invalid_response:
    case sdk::errc::not_found:
      return probe_status::wrong_protocol;
    case sdk::errc::network:
      if (has("refused") || has("couldn't connect") || has("could not connect"))
        return probe_status::refused;
      return probe_status::unreachable;
    default:
      return probe_status::failed;
  }
}

// One GET whose answer must be a JSON object.
class probe_sink final : public sdk::http_response_sink {
public:
  probe_sink(std::shared_ptr<probe_board> board, size_t index, std::string hint)
    : board_(std::move(board)), index_(index), hint_(std::move(hint)) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers& headers) override {
    status_ = status;
    content_type_ = sdk::find_header(headers, "content-type").value_or("");
    return true;
  }

  bool on_data(std::string_view bytes) override {
    if (body_.size() < max_body)
      body_.append(bytes.substr(0, max_body - body_.size()));
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    if (failure) {
      board_->finish(index_, classify(*failure), failure->message);
      return;
    }
    auto http = "HTTP " + std::to_string(status_);
    if (status_ == 401 || status_ == 403) {
      board_->finish(index_, probe_status::unauthorised,
                     http + ": the server rejected the credentials (api_key)");
      return;
    }
    if (status_ == 404) {
      board_->finish(index_, probe_status::wrong_protocol, http + ": no such API path" + hint_);
      return;
    }
    if (status_ < 200 || status_ >= 300) {
      board_->finish(index_, probe_status::failed, http);
      return;
    }
    // Whatever answered is not trusted: the parse is depth-bounded.
    auto parsed = sdk::parse_json(body_);
    if (parsed.is_discarded() || !parsed.is_object()) {
      auto what = content_type_.empty() ? std::string{"an answer"}
                                        : "a " + content_type_ + " answer";
      if (content_type_.find(';') != std::string::npos)
        what = "a " + content_type_.substr(0, content_type_.find(';')) + " answer";
      board_->finish(index_, probe_status::wrong_protocol,
                     http + " with " + what + " that is not a JSON object" + hint_);
      return;
    }
    board_->finish(index_, probe_status::reachable, http);
  }

private:
  static constexpr size_t max_body = 1 << 20;
  std::shared_ptr<probe_board> board_;
  size_t index_;
  std::string hint_;
  int status_ = 0;
  std::string content_type_;
  std::string body_;
};

} // namespace

std::vector<probe_result> probe_instances(context& ctx, std::chrono::milliseconds timeout) {
  ctx.load_plugins();
  auto board = std::make_shared<probe_board>();
  std::vector<std::shared_ptr<sdk::http_call>> calls;
  std::vector<std::shared_ptr<sdk::tool_run>> runs;
  std::vector<std::shared_ptr<sdk::tool>> tools; // alive while they run
  auto get = [&](size_t index, std::string url, sdk::http_headers headers, std::string hint) {
    sdk::http_request req;
    req.url = std::move(url);
    req.headers = std::move(headers);
    req.headers.emplace_back("Accept", "application/json");
    req.connect_timeout = timeout;
    req.total_timeout = timeout;
    req.stall_timeout = timeout;
    req.max_response_bytes = 16 << 20;
    calls.push_back(ctx.services->http().start(
      std::move(req), std::make_shared<probe_sink>(board, index, std::move(hint))));
  };
  auto extra_headers = [](const json& config, sdk::http_headers& out) {
    auto i = config.find("headers");
    if (i == config.end() || !i->is_object())
      return;
    for (const auto& [name, value] : i->items())
      if (value.is_string())
        out.emplace_back(name, value.get<std::string>());
  };
  for (const auto& inst : configured_instances(ctx.config.values)) {
    const auto& entry = *inst.entry;
    const auto& config = entry.config;
    probe_result r{inst.key, entry.plugin, {}, probe_status::not_probed, {}};
    if (entry.plugin == "openai") {
      auto base = trim_base(string_key(config, "base_url", "https://api.openai.com/v1"));
      r.target = "GET " + base + "/models";
      sdk::http_headers headers;
      auto key = string_key(config, "api_key", "");
      auto azure = config.value("azure", false);
      if (!key.empty())
        headers.emplace_back(azure ? "api-key" : "Authorization", azure ? key : "Bearer " + key);
      extra_headers(config, headers);
      auto url = base + "/models";
      auto version = string_key(config, "api_version", "");
      if (!version.empty())
        url += "?api-version=" + version;
      auto i = board->add(r);
      get(i, url, std::move(headers),
          " (OpenAI-compatible servers serve {base_url}/models; base_url "
          "usually ends in /v1)");
    } else if (entry.plugin == "anthropic") {
      auto base = trim_base(string_key(config, "base_url", "https://api.anthropic.com"));
      r.target = "GET " + base + "/v1/models";
      sdk::http_headers headers{{"x-api-key", string_key(config, "api_key", "")},
                                {"anthropic-version",
                                 string_key(config, "anthropic_version", "2023-06-01")}};
      extra_headers(config, headers);
      auto i = board->add(r);
      get(i, base + "/v1/models", std::move(headers),
          " (Anthropic serves {base_url}/v1/models; base_url has no /v1)");
    } else if (entry.plugin == "extractive") {
      r.status = probe_status::local;
      r.detail = "offline, nothing to reach";
      board->add(r, true);
    } else if (entry.plugin == "local_corpus" || entry.plugin == "open_url") {
      r.status = probe_status::local;
      r.detail = entry.plugin == "open_url" ? "reads the URLs it is given" : "a local index";
      board->add(r, true);
    } else if (const auto* set = ctx.registry->find(entry.plugin);
               set != nullptr && set->tool_set) {
      // A plugin that offers a set (an MCP server): making the set reaches
      // the server and lists its tools.
      r.target = entry.plugin == "mcp" ? "list the server's tools" : "make the tools";
      auto i = board->add(r);
      auto made = ctx.registry->make_tools(entry.plugin, config, inst.instance);
      if (auto* err = std::get_if<std::string>(&made)) {
        board->finish(i, probe_status::failed, *err);
        continue;
      }
      std::string names;
      for (const auto& t : std::get<std::vector<host::made_tool>>(made))
        names += (names.empty() ? "" : ", ") + t.tool->name() + " (" + sdk::to_string(t.kind) + ")";
      auto n = std::get<std::vector<host::made_tool>>(made).size();
      board->finish(i, probe_status::reachable,
                    std::to_string(n) + (n == 1 ? " tool" : " tools")
                      + (names.empty() ? std::string{} : ": " + names));
    } else if (const auto* info = ctx.registry->find(entry.plugin);
               info != nullptr && info->tool_kind == sdk::tool_kind::web_search) {
      // One search through the plugin itself: its own URL, headers and error
      // classification.
      r.target = "search for \"quarry\"";
      auto made = ctx.registry->make_tool(entry.plugin, config, inst.instance);
      auto i = board->add(r);
      if (auto* err = std::get_if<std::string>(&made)) {
        board->finish(i, probe_status::failed, *err);
        continue;
      }
      auto tool = std::get<std::shared_ptr<sdk::tool>>(std::move(made));
      tools.push_back(tool);
      runs.push_back(
        tool->run(json{{"queries", json::array({"quarry"})}}, [board, i](sdk::tool_result res) {
          // No results is an answer of the API.
          if (res.failure && res.failure->code == sdk::errc::not_found)
            board->finish(i, probe_status::reachable, res.failure->message);
          else if (res.failure)
            board->finish(i, classify(*res.failure), res.failure->message);
          else
            board->finish(i, probe_status::reachable,
                          std::to_string(res.documents.size()) + " results");
        }));
    } else {
      r.detail = "Quarry probes only the plugins that come with it";
      board->add(r, true);
    }
  }
  {
    std::unique_lock<std::mutex> guard{board->mtx};
    // The transfers have their own time limit; this one covers tool runs and
    // anything slower to give up.
    board->cv.wait_for(guard, timeout + std::chrono::seconds{1},
                       [&] { return board->pending == 0; });
  }
  size_t count = 0;
  {
    std::lock_guard<std::mutex> guard{board->mtx};
    count = board->results.size();
  }
  for (size_t i = 0; i < count; ++i)
    board->finish(i, probe_status::timeout,
                  "no answer within " + std::to_string(timeout.count() / 1000) + "s");
  for (auto& call : calls)
    call->cancel();
  for (auto& run : runs)
    if (run)
      run->cancel();
  std::lock_guard<std::mutex> guard{board->mtx};
  return board->results;
}

} // namespace quarry::app
