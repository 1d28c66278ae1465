// The configuration schema table: the one place that lists every key.
//
// To add a key: add the field (with its default initializer) to settings.hpp,
// add one entry to make_schema() below, and document the key in
// config/quarry.yaml and docs/configuration.md (unit tests check both).

#include "quarry/core/config_schema.hpp"

#include "quarry/core/config_limits.hpp"
#include "quarry/core/duration.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

namespace quarry::core {

namespace {

using namespace std::chrono_literals;

// -- bindings -----------------------------------------------------------------

template <class T>
config_value to_value(const T& x) {
  if constexpr (std::is_same_v<T, int>)
    return config_value{int64_t{x}};
  else
    return config_value{x};
}

template <class T>
void from_value(T& dst, config_value&& x) {
  if constexpr (std::is_same_v<T, int>) {
    // The validator checked the range against type_min/type_max.
    if (auto ptr = std::get_if<int64_t>(&x))
      dst = static_cast<int>(*ptr);
  } else {
    if (auto ptr = std::get_if<T>(&x))
      dst = std::move(*ptr);
  }
}

template <class T>
void set_type_limits(config_binding& result) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    result.type_min = static_cast<int64_t>(std::numeric_limits<T>::min());
    result.type_max = static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Binds a field of a section, e.g. `field(&settings::http,
// &http_settings::proxy)`.
template <class Section, class T>
config_binding field(Section settings::*section, T Section::*member) {
  config_binding result;
  result.store = [section, member](settings& s, config_value x) {
    from_value(s.*section.*member, std::move(x));
  };
  result.load = [section, member](const settings& s) { return to_value(s.*section.*member); };
  set_type_limits<T>(result);
  return result;
}

// Binds a field of a subsection, e.g. `field(&settings::cluster,
// &cluster_settings::tls, &cluster_tls_settings::cert)`.
template <class Section, class Sub, class T>
config_binding field(Section settings::*section, Sub Section::*sub, T Sub::*member) {
  config_binding result;
  result.store = [section, sub, member](settings& s, config_value x) {
    from_value(s.*section.*sub.*member, std::move(x));
  };
  result.load = [section, sub, member](const settings& s) {
    return to_value(s.*section.*sub.*member);
  };
  set_type_limits<T>(result);
  return result;
}

// Binds a top-level field, e.g. `field(&settings::tools)`.
template <class T>
config_binding field(T settings::*member) {
  config_binding result;
  result.store = [member](settings& s, config_value x) { from_value(s.*member, std::move(x)); };
  result.load = [member](const settings& s) { return to_value(s.*member); };
  set_type_limits<T>(result);
  return result;
}

// -- table builder ------------------------------------------------------------

class key_builder {
public:
  explicit key_builder(config_key& key) : key_(key) {
    // nop
  }

  key_builder& doc(std::string text) {
    key_.doc = std::move(text);
    return *this;
  }

  key_builder& range(int64_t min, int64_t max) {
    key_.min = min;
    key_.max = max;
    return *this;
  }

  key_builder& at_least(int64_t min) {
    key_.min = min;
    return *this;
  }

  key_builder& range(std::chrono::milliseconds min, std::chrono::milliseconds max) {
    return range(static_cast<int64_t>(min.count()), static_cast<int64_t>(max.count()));
  }

  key_builder& one_of(std::vector<std::string> values) {
    key_.allowed = std::move(values);
    return *this;
  }

  key_builder& secret() {
    key_.secret = true;
    return *this;
  }

private:
  config_key& key_;
};

class schema_builder {
public:
  key_builder add(std::string path, config_type type, config_binding binding) {
    auto& key = keys_.emplace_back();
    key.path = std::move(path);
    key.type = type;
    key.binding = std::move(binding);
    return key_builder{key};
  }

  std::vector<config_key> finish() && {
    return std::move(keys_);
  }

private:
  std::vector<config_key> keys_;
};

// -- the schema ---------------------------------------------------------------

std::vector<config_key> make_schema() {
  using t = config_type;
  constexpr int64_t tib = int64_t{1} << 40;
  schema_builder s;
  // runtime
  s.add("runtime.scheduler_threads", t::integer,
        field(&settings::runtime, &runtime_settings::scheduler_threads))
    .range(0, 1024)
    .doc("Actor scheduler threads; 0 means one per CPU core.");
  s.add("runtime.blocking_threads", t::integer,
        field(&settings::runtime, &runtime_settings::blocking_threads))
    .range(1, 1024)
    .doc("Threads of the pool that runs plugins' blocking work.");
  s.add("runtime.blocking_queue", t::integer,
        field(&settings::runtime, &runtime_settings::blocking_queue))
    .range(1, 10'000'000)
    .doc("Most queued blocking jobs before new ones are refused (busy).");
  s.add("runtime.data_dir", t::string, field(&settings::runtime, &runtime_settings::data_dir))
    .doc("Folder for persistent data; empty means $XDG_DATA_HOME/quarry "
         "(or ~/.local/share/quarry).");
  s.add("runtime.shutdown_grace", t::duration,
        field(&settings::runtime, &runtime_settings::shutdown_grace))
    .range(0ms, 1h)
    .doc("How long in-flight work may take to stop after SIGINT/SIGTERM.");
  // log
  s.add("log.level", t::string, field(&settings::log, &log_settings::level))
    .one_of({"trace", "debug", "info", "warn", "error", "off"})
    .doc("Least severe level that is logged.");
  s.add("log.format", t::string, field(&settings::log, &log_settings::format))
    .one_of({"text", "json"})
    .doc("text, or json for one JSON object per line.");
  // plugins
  s.add("plugins.dirs", t::string_list, field(&settings::plugins, &plugin_settings::dirs))
    .doc("Folders searched for plugins, after --plugin-dir folders and "
         "before the built-in folder.");
  s.add("plugins.allow_unsafe_permissions", t::boolean,
        field(&settings::plugins, &plugin_settings::allow_unsafe_permissions))
    .doc("Load plugin files that others than root and you could change "
         "(writable by others, owned by another user, in such a folder), "
         "with a warning each; for development only.");
  // http
  s.add("http.connect_timeout", t::duration,
        field(&settings::http, &http_settings::connect_timeout))
    .range(1ms, 1h)
    .doc("Longest time to establish a connection (TCP and TLS).");
  s.add("http.total_timeout", t::duration, field(&settings::http, &http_settings::total_timeout))
    .range(1ms, 24h)
    .doc("Longest time for a whole exchange, redirects included.");
  s.add("http.stall_timeout", t::duration, field(&settings::http, &http_settings::stall_timeout))
    .range(1ms, 24h)
    .doc("Longest time without receiving a byte once connected.");
  s.add("http.max_response_bytes", t::size,
        field(&settings::http, &http_settings::max_response_bytes))
    .range(1, tib)
    .doc("Largest response body accepted (e.g. 64MiB; bare number: bytes).");
  s.add("http.max_redirects", t::integer, field(&settings::http, &http_settings::max_redirects))
    .range(0, 100)
    .doc("Largest number of redirects followed.");
  s.add("http.proxy", t::string, field(&settings::http, &http_settings::proxy))
    .secret()
    .doc("Proxy URL (e.g. http://proxy:3128); empty means none. Secret "
         "because it may hold credentials.");
  s.add("http.no_proxy", t::string, field(&settings::http, &http_settings::no_proxy))
    .doc("Comma-separated hosts that bypass the proxy.");
  s.add("http.ca_file", t::string, field(&settings::http, &http_settings::ca_file))
    .doc("CA bundle file; empty means the system default.");
  s.add("http.ca_path", t::string, field(&settings::http, &http_settings::ca_path))
    .doc("CA certificate folder; empty means the system default.");
  s.add("http.verify_tls", t::boolean, field(&settings::http, &http_settings::verify_tls))
    .doc("Whether to verify TLS certificates and host names.");
  s.add("http.user_agent", t::string, field(&settings::http, &http_settings::user_agent))
    .doc("User-Agent header of every request.");
  s.add("http.max_connections", t::integer, field(&settings::http, &http_settings::max_connections))
    .range(1, 100'000)
    .doc("Most open connections kept in the shared connection cache.");
  s.add("http.max_host_connections", t::integer,
        field(&settings::http, &http_settings::max_host_connections))
    .range(0, 100'000)
    .doc("Most connections to one host; 0 means unlimited.");
  // llm
  s.add("llm.default", t::string, field(&settings::llm, &llm_settings::default_provider))
    .doc("Provider used when a role has none; may stay empty if exactly one "
         "provider is configured.");
  s.add("llm.providers", t::instances, field(&settings::llm, &llm_settings::providers))
    .doc("Named LLM provider instances: NAME: {plugin: PLUGIN, limits: "
         "{...}, ...the plugin's options}.");
  s.add("llm.roles", t::string_map, field(&settings::llm, &llm_settings::roles))
    .doc("Role (orchestrator, research_agent, final_report, ...) to "
         "provider name.");
  // tools
  s.add("tools", t::instances, field(&settings::tools))
    .doc("Tool instances by tool name: NAME: {plugin: PLUGIN, limits: "
         "{...}, ...the plugin's options}.");
  // research
  s.add("research.deadline", t::duration, field(&settings::research, &research_settings::deadline))
    .range(1s, 24h)
    .doc("Research ends by this time after the start; the final report "
         "follows.");
  s.add("research.final_report_timeout", t::duration,
        field(&settings::research, &research_settings::final_report_timeout))
    .range(1s, 1h)
    .doc("Longest time for the final report itself.");
  s.add("research.max_parallel_agents", t::integer,
        field(&settings::research, &research_settings::max_parallel_agents))
    .range(1, 16)
    .doc("Research agents running at once; further calls of the same turn "
         "wait for a free slot.");
  s.add("research.max_cycles", t::integer,
        field(&settings::research, &research_settings::max_cycles))
    .range(0, 32)
    .doc("Orchestrator cycles; 0 means 8, or 4 for reasoning models.");
  s.add("research.agent_max_cycles", t::integer,
        field(&settings::research, &research_settings::agent_max_cycles))
    .range(1, 32)
    .doc("Research cycles (search or read steps) of one agent.");
  s.add("research.max_plan_steps", t::integer,
        field(&settings::research, &research_settings::max_plan_steps))
    .range(1, 20)
    .doc("Steps of the research plan.");
  s.add("research.agent_report_after", t::duration,
        field(&settings::research, &research_settings::agent_report_after))
    .range(1s, 24h)
    .doc("An agent stops researching and writes its report after this long.");
  s.add("research.agent_timeout", t::duration,
        field(&settings::research, &research_settings::agent_timeout))
    .range(1s, 24h)
    .doc("An agent stops after this long and keeps what it found (its report as far as "
         "it was written, else the sources it read).");
  s.add("research.clarify", t::boolean, field(&settings::research, &research_settings::clarify))
    .doc("Ask clarifying questions first when the question is unclear.");
  s.add("research.reasoning_model", t::string,
        field(&settings::research, &research_settings::reasoning_model))
    .one_of({"auto", "on", "off", "true", "false"})
    .doc("The models reason natively (no think_tool, 4 orchestrator cycles): auto "
         "(from the provider's metadata, the model's name, or a reasoning channel in "
         "its first answer), on or off.");
  s.add("research.max_tokens.orchestrator", t::integer,
        field(&settings::research, &research_settings::orchestrator_max_tokens))
    .range(64, 1'000'000)
    .doc("Output tokens of one orchestrator call (the design's 1,024; it also "
         "bounds think_tool text, and a call cut inside its tool call is retried "
         "once with twice the room).");
  s.add("research.max_tokens.agent_step", t::integer,
        field(&settings::research, &research_settings::agent_step_max_tokens))
    .range(64, 1'000'000)
    .doc("Output tokens of one research-agent step (the design's 1,000).");
  s.add("research.max_tokens.agent_report", t::integer,
        field(&settings::research, &research_settings::agent_report_max_tokens))
    .range(64, 1'000'000)
    .doc("Output tokens of a research agent's report (the design's 10,000).");
  s.add("research.max_tokens.final_report", t::integer,
        field(&settings::research, &research_settings::final_report_max_tokens))
    .range(64, 1'000'000)
    .doc("Output tokens of the final report (the design's 20,000).");
  s.add("research.report_continuations", t::integer,
        field(&settings::research, &research_settings::report_continuations))
    .range(0, 10)
    .doc("Follow-up calls that continue a report the output token limit cut; a "
         "report still cut after them is delivered marked as cut.");
  s.add("research.context_tokens", t::integer,
        field(&settings::research, &research_settings::context_tokens))
    .range(1000, 10'000'000)
    .doc("Prompt tokens the models accept. Left at 128000, a research uses the "
         "smallest context window its models' servers report; any other value wins.");
  s.add("research.allow_small_context", t::boolean,
        field(&settings::research, &research_settings::allow_small_context))
    .doc("Research even when a model's context window is below 50,000 tokens "
         "(refused otherwise): each call holds less history and fewer sources, and "
         "reports may be cut.");
  s.add("research.corpus", t::string, field(&settings::research, &research_settings::corpus))
    .doc("A folder of documents indexed and searched with internal_search; "
         "empty means none (or examples/corpus with the embedded defaults).");
  s.add("research.prompts_dir", t::string,
        field(&settings::research, &research_settings::prompts_dir))
    .doc("A folder of prompt templates (NAME.md) that replace the built-in "
         "ones; empty means the built-in prompts.");
  s.add("research.verify", t::string, field(&settings::research, &research_settings::verify))
    .one_of({"auto", "on", "off"})
    .doc("Check the final report claim by claim against the text of its sources: "
         "auto (when a model, not the extractive provider, writes the report), on "
         "or off.");
  s.add("research.verify_action", t::string,
        field(&settings::research, &research_settings::verify_action))
    .one_of({"mark", "drop"})
    .doc("What happens to an unsupported claim: marked (unverified) or dropped.");
  s.add("research.verify_timeout", t::duration,
        field(&settings::research, &research_settings::verify_timeout))
    .range(1s, 1h)
    .doc("Longest time the check takes, never more than a second past the "
         "research deadline; claims it does not reach are reported unverified.");
  s.add("research.strategy", t::string, field(&settings::research, &research_settings::strategy))
    .one_of({"orchestrator", "reflective"})
    .doc("The research strategy: orchestrator (parallel research agents under an "
         "orchestrator) or reflective (a plan researched step by step, with a "
         "reflection after each step).");
  s.add("research.mode", t::string, field(&settings::research, &research_settings::mode))
    .one_of({"simple", "web_search", "deep_research"})
    .doc("Reflective strategy: simple (a direct answer), web_search (one light step) "
         "or deep_research.");
  s.add("research.depth", t::string, field(&settings::research, &research_settings::depth))
    .one_of({"auto", "light", "medium", "extended"})
    .doc("Reflective strategy: auto (from the question's complexity), light (1-3 "
         "steps), medium (3-6) or extended (5-10).");
  s.add("research.max_plan_iterations", t::integer,
        field(&settings::research, &research_settings::max_plan_iterations))
    .range(1, 10)
    .doc("Reflective strategy: plans at most (the first and each adjustment).");
  s.add("research.max_search_queries", t::integer,
        field(&settings::research, &research_settings::max_search_queries))
    .range(1, 10)
    .doc("Reflective strategy, light depth: searches per step.");
  s.add("research.max_urls_to_crawl", t::integer,
        field(&settings::research, &research_settings::max_urls_to_crawl))
    .range(0, 20)
    .doc("Reflective strategy, light depth: pages read per step.");
  s.add("research.max_clarifying_questions", t::integer,
        field(&settings::research, &research_settings::max_clarifying_questions))
    .range(0, 10)
    .doc("Reflective strategy: clarifying questions the coordinator may ask.");
  s.add("research.web_search_fallback", t::duration,
        field(&settings::research, &research_settings::web_search_fallback))
    .range(1s, 10min)
    .doc("Reflective strategy: the web_search mode answers directly after this.");
  s.add("research.deep_research_deadline", t::duration,
        field(&settings::research, &research_settings::deep_research_deadline))
    .range(1s, 24h)
    .doc("Reflective strategy: the deep_research mode's research deadline (the "
         "five-agent design's 300 s); research.deadline is every other session's. "
         "--deadline overrides both.");
  // store
  s.add("store.enabled", t::boolean, field(&settings::store, &store_settings::enabled))
    .doc("Keep every research session (packets, sources, reports, "
         "checkpoints) so it can be listed, exported and resumed.");
  s.add("store.path", t::string, field(&settings::store, &store_settings::path))
    .doc("The database file; empty means <runtime.data_dir>/quarry.db.");
  // server
  s.add("server.listen", t::string, field(&settings::server, &server_settings::listen))
    .doc("HOST:PORT that quarry serve listens on; an address other than "
         "loopback needs server.auth_token.");
  s.add("server.auth_token", t::string, field(&settings::server, &server_settings::auth_token))
    .secret()
    .doc("Bearer token every API request needs; empty means none (loopback "
         "only).");
  s.add("server.max_body_bytes", t::size,
        field(&settings::server, &server_settings::max_body_bytes))
    .range(1024, 64 * 1024 * 1024)
    .doc("Largest request body; larger ones are answered 413.");
  s.add("server.max_upload_bytes", t::size,
        field(&settings::server, &server_settings::max_upload_bytes))
    .range(1024, 1024LL * 1024 * 1024)
    .doc("Largest file uploaded to a research (POST /v1/uploads); larger ones "
         "are answered 413.");
  s.add("server.max_pending_uploads", t::integer,
        field(&settings::server, &server_settings::max_pending_uploads))
    .range(1, 100'000)
    .doc("Uploaded files kept at most while no research uses them; more are "
         "answered 429.");
  s.add("server.max_pending_upload_bytes", t::size,
        field(&settings::server, &server_settings::max_pending_upload_bytes))
    .range(1024, 1024LL * 1024 * 1024 * 1024)
    .doc("Bytes of uploaded files kept at most while no research uses them; "
         "more are answered 429.");
  s.add("server.max_running_sessions", t::integer,
        field(&settings::server, &server_settings::max_running_sessions))
    .range(1, 100'000)
    .doc("Sessions researching at once; more are answered 429 with "
         "Retry-After.");
  s.add("server.max_connections", t::integer,
        field(&settings::server, &server_settings::max_connections))
    .range(1, 1'000'000)
    .doc("Open HTTP connections at most; more are answered 429.");
  s.add("server.max_event_streams", t::integer,
        field(&settings::server, &server_settings::max_event_streams))
    .range(1, 1'000'000)
    .doc("Open event streams at most; more are answered 429.");
  s.add("server.heartbeat", t::duration, field(&settings::server, &server_settings::heartbeat))
    .range(100ms, 1h)
    .doc("A comment line on every open event stream this often.");
  s.add("server.cors_origins", t::string_list,
        field(&settings::server, &server_settings::cors_origins))
    .doc("Origins (e.g. http://localhost:3000) that get CORS headers; empty "
         "means no CORS headers at all.");
  s.add("server.allowed_hosts", t::string_list,
        field(&settings::server, &server_settings::allowed_hosts))
    .doc("Without server.auth_token: Host values answered besides this "
         "server's own (its listen address, localhost, 127.0.0.1, [::1]); NAME "
         "(the server's port) or NAME:PORT. Others are answered 403.");
  s.add("server.allowed_origins", t::string_list,
        field(&settings::server, &server_settings::allowed_origins))
    .doc("Without server.auth_token: origins (e.g. http://localhost:3000) "
         "that may send POST and DELETE requests besides this server's own "
         "pages; others are answered 403.");
  s.add("server.io_threads", t::integer, field(&settings::server, &server_settings::io_threads))
    .range(1, 64)
    .doc("Threads of the HTTP server.");
  // cluster
  s.add("cluster.workers", t::string_list, field(&settings::cluster, &cluster_settings::workers))
    .doc("HOST:PORT of the workers (quarry worker) that research agents are "
         "placed on; empty means every agent runs on this node.");
  s.add("cluster.listen", t::string, field(&settings::cluster, &cluster_settings::listen))
    .doc("HOST:PORT where quarry serve publishes its research service to "
         "other CAF programs (empty: not published); the default of quarry "
         "worker --listen.");
  s.add("cluster.tls.cert", t::string,
        field(&settings::cluster, &cluster_settings::tls, &cluster_tls_settings::cert))
    .doc("This node's certificate (PEM file); with tls.key and tls.ca, nodes "
         "talk over mutual TLS and refuse plaintext peers.");
  s.add("cluster.tls.key", t::string,
        field(&settings::cluster, &cluster_settings::tls, &cluster_tls_settings::key))
    .doc("This node's private key (PEM file).");
  s.add("cluster.tls.ca", t::string,
        field(&settings::cluster, &cluster_settings::tls, &cluster_tls_settings::ca))
    .doc("The cluster's certificate authority (PEM file): peers must present "
         "a certificate it signed.");
  s.add("cluster.allow_plaintext_remote", t::boolean,
        field(&settings::cluster, &cluster_settings::allow_plaintext_remote))
    .doc("Without TLS, listen on addresses other than loopback anyway. "
         "Dangerous: anyone who reaches the port can run agents with this "
         "node's keys (docs/cluster.md).");
  s.add("cluster.heartbeat", t::duration, field(&settings::cluster, &cluster_settings::heartbeat))
    .range(50ms, 1min)
    .doc("Every worker is asked for its status this often.");
  s.add("cluster.heartbeat_timeout", t::duration,
        field(&settings::cluster, &cluster_settings::heartbeat_timeout))
    .range(100ms, 10min)
    .doc("A worker silent for this long is taken as lost; its agents are "
         "placed again elsewhere.");
  s.add("cluster.spawn_timeout", t::duration,
        field(&settings::cluster, &cluster_settings::spawn_timeout))
    .range(100ms, 10min)
    .doc("Longest wait for a worker to start an agent.");
  s.add("cluster.max_agents", t::integer, field(&settings::cluster, &cluster_settings::max_agents))
    .range(1, 10'000)
    .doc("Research agents a worker (quarry worker) runs at once at most.");
  s.add("cluster.max_message_size", t::size,
        field(&settings::cluster, &cluster_settings::max_message_size))
    .range(64 * 1024, int64_t{1} << 30)
    .doc("Largest message another node may send once its handshake is done "
         "(e.g. 64MiB; bare number: bytes); a connection announcing more is "
         "closed. Before the handshake the limit is 64KiB.");
  s.add("cluster.handshake_timeout", t::duration,
        field(&settings::cluster, &cluster_settings::handshake_timeout))
    .range(100ms, 10min)
    .doc("A connection from or to another node that has not finished its "
         "handshake (TLS included) this long after it was opened is closed.");
  return std::move(s).finish();
}

} // namespace

const char* to_string(config_type x) noexcept {
  switch (x) {
    case config_type::integer:
      return "int";
    case config_type::boolean:
      return "bool";
    case config_type::string:
      return "string";
    case config_type::duration:
      return "duration";
    case config_type::size:
      return "size";
    case config_type::string_list:
      return "list";
    case config_type::string_map:
      return "map";
    case config_type::instances:
      return "instances";
  }
  return "string";
}

const std::vector<config_key>& config_schema() {
  static const std::vector<config_key> schema = make_schema();
  return schema;
}

const config_key* find_config_key(std::string_view path) {
  for (const auto& key : config_schema())
    if (key.path == path)
      return &key;
  return nullptr;
}

bool is_config_section(std::string_view path) {
  if (path.empty())
    return false;
  for (const auto& key : config_schema())
    if (key.path.size() > path.size() && key.path.compare(0, path.size(), path) == 0
        && key.path[path.size()] == '.')
      return true;
  return false;
}

nlohmann::json to_json(const config_value& value, config_type type) {
  using json = nlohmann::json;
  if (auto ptr = std::get_if<int64_t>(&value))
    return json(*ptr);
  if (auto ptr = std::get_if<bool>(&value))
    return json(*ptr);
  if (auto ptr = std::get_if<std::string>(&value))
    return json(*ptr);
  if (auto ptr = std::get_if<std::chrono::milliseconds>(&value))
    return json(format_duration(*ptr));
  if (auto ptr = std::get_if<std::vector<std::string>>(&value))
    return json(*ptr);
  if (auto ptr = std::get_if<std::map<std::string, std::string>>(&value)) {
    auto result = json::object();
    for (const auto& [k, v] : *ptr)
      result[k] = v;
    return result;
  }
  auto instances = [](const auto& map) {
    auto result = json::object();
    for (const auto& [name, instance] : map) {
      auto entry = instance.config.is_object() ? instance.config : json::object();
      entry["plugin"] = instance.plugin;
      entry["limits"] = to_json(instance.limits);
      result[name] = std::move(entry);
    }
    return result;
  };
  if (auto ptr = std::get_if<std::map<std::string, llm_instance>>(&value))
    return instances(*ptr);
  if (auto ptr = std::get_if<std::map<std::string, tool_instance>>(&value))
    return instances(*ptr);
  static_cast<void>(type);
  return json();
}

nlohmann::json to_json(const settings& values) {
  auto result = nlohmann::json::object();
  for (const auto& key : config_schema()) {
    auto* node = &result;
    std::string_view path = key.path;
    for (auto dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.')) {
      node = &(*node)[std::string{path.substr(0, dot)}];
      path.remove_prefix(dot + 1);
    }
    (*node)[std::string{path}] = to_json(key.binding.load(values), key.type);
  }
  return result;
}

std::string default_as_yaml(const config_key& key) {
  auto value = key.binding.load(settings{});
  switch (key.type) {
    case config_type::integer:
    case config_type::boolean:
      return to_json(value, key.type).dump();
    case config_type::duration:
      if (auto ptr = std::get_if<std::chrono::milliseconds>(&value))
        return format_duration(*ptr);
      return "0s";
    case config_type::size:
      if (auto ptr = std::get_if<int64_t>(&value))
        return format_size(*ptr);
      return "0";
    case config_type::string: {
      auto str = std::get_if<std::string>(&value);
      if (str == nullptr || str->empty())
        return "\"\"";
      return *str;
    }
    case config_type::string_list: {
      auto json = to_json(value, key.type);
      return json.empty() ? "[]" : json.dump();
    }
    case config_type::string_map:
    case config_type::instances: {
      auto json = to_json(value, key.type);
      return json.empty() ? "{}" : json.dump();
    }
  }
  return "";
}

} // namespace quarry::core
