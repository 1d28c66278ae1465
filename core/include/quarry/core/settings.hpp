// Typed view of the validated configuration. Filled by the configuration
// loader (config.hpp); read everywhere else. Every field has the default
// documented in config/quarry.yaml.

#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::core {

/// The `runtime` section.
struct runtime_settings {
  /// CAF scheduler threads; 0 means one per core.
  int scheduler_threads = 0;
  /// Threads of the blocking-work pool given to plugins.
  int blocking_threads = 4;
  /// Largest number of queued blocking jobs before submit() refuses.
  int blocking_queue = 1024;
  /// Folder for persistent data; empty means the per-user data folder
  /// ($XDG_DATA_HOME/quarry or ~/.local/share/quarry).
  std::string data_dir;
  /// How long in-flight work may take to stop after SIGINT/SIGTERM.
  std::chrono::milliseconds shutdown_grace{5000};
};

/// The `log` section.
struct log_settings {
  /// trace, debug, info, warn, error or off.
  std::string level = "info";
  /// text or json (one JSON object per line).
  std::string format = "text";
};

/// The `plugins` section.
struct plugin_settings {
  /// Folders searched for plugin files, after --plugin-dir folders and before
  /// the built-in folder.
  std::vector<std::string> dirs;
  /// Load plugin files that others than root and the user running Quarry
  /// could change (for development only); each loads with a warning.
  bool allow_unsafe_permissions = false;
};

/// The `http` section: defaults of the shared HTTP client.
struct http_settings {
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds total_timeout{300000};
  std::chrono::milliseconds stall_timeout{60000};
  int64_t max_response_bytes = 64 * 1024 * 1024;
  int max_redirects = 10;
  /// Proxy URL (e.g. `http://proxy:3128`); empty means none.
  std::string proxy;
  /// Comma-separated hosts that bypass the proxy.
  std::string no_proxy;
  /// CA bundle file; empty means the system default.
  std::string ca_file;
  /// CA folder; empty means the system default.
  std::string ca_path;
  /// Whether to verify TLS certificates and host names.
  bool verify_tls = true;
  std::string user_agent = "Quarry";
  /// Largest number of open connections kept in the shared connection cache.
  int max_connections = 256;
  /// Largest number of connections to one host; 0 means unlimited.
  int max_host_connections = 0;
};

/// Prices in US dollars per million tokens.
struct token_prices {
  double input = 0;
  double output = 0;
};

/// The limits of an LLM provider instance that Quarry itself applies (the
/// provider actor): its `limits:` map. Parsed and checked by core
/// (`quarry/core/config_limits.hpp`); plugins never see them.
struct llm_limits {
  /// Largest number of calls in flight (also the ceiling of the adaptive
  /// limit).
  int max_concurrency = 16;
  /// Requests per minute; 0 means unlimited.
  double requests_per_minute = 0;
  /// Tokens per minute (estimated input plus requested output); 0 means
  /// unlimited.
  double tokens_per_minute = 0;
  /// Retries after the first attempt, for retryable failures only.
  int max_retries = 4;
  /// First backoff step; doubles per attempt (full jitter).
  std::chrono::milliseconds retry_base{500};
  /// Largest backoff step.
  std::chrono::milliseconds retry_max{30000};
  /// Longest time without a streamed piece.
  std::chrono::milliseconds stall_timeout{60000};
  /// Longest time for a whole call, retries included.
  std::chrono::milliseconds total_timeout{600000};
  /// Prices for any model (`prices: {input, output}`); none when not
  /// configured. A configured price of 0 is a known cost of 0.
  std::optional<token_prices> default_prices;
  /// Prices by model name (override `default_prices`).
  std::map<std::string, token_prices> model_prices;
  /// Whether models without configured prices are priced by the table Quarry
  /// ships (core/model_prices.hpp); off, they are unpriced.
  bool price_table = true;
};

/// The limits of a tool instance that Quarry itself applies (the tool
/// actor): its `limits:` map.
struct tool_limits {
  /// Runs in flight at once.
  int max_concurrency = 8;
  /// Longest time for one run, its retries included; the run is cancelled
  /// and reported as timed out.
  std::chrono::milliseconds timeout{120000};
  /// Retries of a run whose failure is retryable (sdk::is_retryable: a 429
  /// or 503 of a search service, a network error...), after a backoff that
  /// is at least the server's Retry-After (core::retry_policy, as for the
  /// LLM providers) and ends before `timeout`.
  int max_retries = 3;
  /// First backoff step; doubles per attempt (full jitter).
  std::chrono::milliseconds retry_base{1000};
  /// Largest backoff step.
  std::chrono::milliseconds retry_max{20000};
  /// How long an identical run's result is reused; 0 disables the cache.
  std::chrono::milliseconds cache_ttl{600000};
  /// Largest number of cached results; 0 disables the cache.
  size_t cache_entries = 256;
};

/// A named instance of a plugin: `{plugin: NAME, limits: {...}, ...the
/// plugin's own options}`.
struct plugin_instance {
  /// Name of the plugin that creates the instance.
  std::string plugin;
  /// The plugin's own options: every key of the instance except `plugin` and
  /// `limits`, after substitution. This, and only this, goes to the plugin.
  nlohmann::json config = nlohmann::json::object();
  /// Where the instance was configured, for error messages.
  std::string file;
  int line = 0;
  /// Where each top-level key of `config` was written (`file` is `--set` for
  /// overrides), so that checks can point at the key's own line. Keys of
  /// `limits` are recorded as `limits.KEY`.
  std::map<std::string, std::pair<std::string, int>> key_lines;

  /// Returns `file:line` of `key`, falling back to the instance's location.
  std::pair<std::string, int> location_of(const std::string& key) const {
    if (auto i = key_lines.find(key); i != key_lines.end())
      return i->second;
    return {file, line};
  }
};

/// An entry of `llm.providers`: the plugin's options and Quarry's limits.
struct llm_instance : plugin_instance {
  llm_limits limits;
};

/// An entry of `tools`: the plugin's options and Quarry's limits.
struct tool_instance : plugin_instance {
  tool_limits limits;
};

/// The `llm` section.
struct llm_settings {
  /// Name of the provider used when a role has none.
  std::string default_provider;
  /// Provider instances by name.
  std::map<std::string, llm_instance> providers;
  /// Role (orchestrator, research_agent, final_report, ...) to provider name.
  std::map<std::string, std::string> roles;
};

/// The `research` section: limits and behaviour of research sessions.
struct research_settings {
  /// Research ends by this time after the start; the final report follows.
  std::chrono::milliseconds deadline{std::chrono::minutes{30}};
  /// Longest time for the final report itself.
  std::chrono::milliseconds final_report_timeout{std::chrono::minutes{5}};
  /// Research agents running at once.
  int max_parallel_agents = 3;
  /// Orchestrator cycles; 0 means 8, or 4 for reasoning models.
  int max_cycles = 0;
  /// Research cycles of one agent.
  int agent_max_cycles = 8;
  /// Steps of the research plan.
  int max_plan_steps = 6;
  /// An agent writes its report after this long.
  std::chrono::milliseconds agent_report_after{std::chrono::minutes{12}};
  /// An agent stops after this long (Onyx's RESEARCH_AGENT_TIMEOUT_SECONDS,
  /// 1800 s), keeping what it found.
  std::chrono::milliseconds agent_timeout{std::chrono::minutes{30}};
  /// Ask clarifying questions when the question is unclear.
  bool clarify = true;
  /// The models reason natively (no think_tool, 4 cycles): `auto` (from
  /// the provider's metadata, the model's name, or a reasoning channel in
  /// its first answer), `on` or `off` (`true`/`false` are accepted too).
  std::string reasoning_model = "auto";
  /// Prompt tokens the models accept. Left at this default, a research uses
  /// the smallest context window its models' servers report instead
  /// (app/model_check.hpp); set to anything else, it wins.
  int64_t context_tokens = 128000;
  /// Research even with a model whose known context window is below the
  /// design's minimum for deep research (50,000 tokens, Onyx's dr_loop.py):
  /// the session's prompt budget is that window, so less history and fewer
  /// sources fit in each call, and reports may be cut.
  bool allow_small_context = false;
  /// Output token caps per call, from the design (Onyx's dr_loop.py and
  /// research_agent.py): orchestrator 1,024, research-agent step 1,000,
  /// intermediate report 10,000, final report 20,000.
  int64_t orchestrator_max_tokens = 1024;
  int64_t agent_step_max_tokens = 1000;
  int64_t agent_report_max_tokens = 10000;
  int64_t final_report_max_tokens = 20000;
  /// Follow-up calls that continue a report cut by the output token limit;
  /// a report still cut after them is delivered marked as cut.
  int report_continuations = 2;
  /// A folder of documents indexed and searched with internal_search.
  std::string corpus;
  /// A folder of prompt templates that replace the built-in ones.
  std::string prompts_dir;
  /// Check the final report claim by claim against its sources: `auto` (when
  /// a model, not the extractive provider, writes the report), `on`, `off`.
  std::string verify = "auto";
  /// What happens to an unsupported claim: `mark` or `drop`.
  std::string verify_action = "mark";
  /// Longest time the check takes (never more than a second past the
  /// research deadline); what it does not reach is reported unverified.
  std::chrono::milliseconds verify_timeout{std::chrono::minutes{2}};
  /// The research strategy: `orchestrator` (an orchestrator dispatches
  /// parallel research agents) or `reflective` (a plan researched step by
  /// step, with a reflection after each step).
  std::string strategy = "orchestrator";
  /// Reflective strategy: `simple` (a direct answer), `web_search` (one
  /// light step) or `deep_research`.
  std::string mode = "deep_research";
  /// Reflective strategy: `auto` (from the question's complexity), `light`
  /// (1-3 steps), `medium` (3-6) or `extended` (5-10).
  std::string depth = "auto";
  /// Reflective strategy: plans at most (the first and each adjustment).
  int max_plan_iterations = 3;
  /// Reflective strategy, light depth: searches and page reads per step.
  int max_search_queries = 2;
  int max_urls_to_crawl = 3;
  /// Reflective strategy: clarifying questions the coordinator may ask.
  int max_clarifying_questions = 3;
  /// Reflective strategy: the web_search mode answers directly after this.
  std::chrono::milliseconds web_search_fallback{std::chrono::seconds{15}};
  /// Reflective strategy: the deep_research mode's own research deadline
  /// (the five-agent design's 300 s); `deadline` is every other session's.
  std::chrono::milliseconds deep_research_deadline{std::chrono::seconds{300}};

  /// The deadline of a session of `strategy` in `mode` (empty: the
  /// configured ones) that asked for none: `deep_research_deadline` for the
  /// reflective strategy's deep_research mode, else `deadline`.
  std::chrono::milliseconds deadline_for(std::string_view strategy, std::string_view mode) const {
    auto s = strategy.empty() ? std::string_view{this->strategy} : strategy;
    auto m = mode.empty() ? std::string_view{this->mode} : mode;
    return s == "reflective" && m == "deep_research" ? deep_research_deadline : deadline;
  }
};

/// The research store.
struct store_settings {
  /// Keep every research session (`--no-store` turns it off for one run).
  bool enabled = true;
  /// The database file; empty means `<runtime.data_dir>/quarry.db`.
  std::string path;
};

/// `quarry serve`: the HTTP API and the web page.
struct server_settings {
  /// HOST:PORT to listen on; only loopback without `auth_token`.
  std::string listen = "127.0.0.1:8700";
  /// Bearer token every API request needs; empty: none (loopback only).
  std::string auth_token;
  /// Largest request body, in bytes.
  int64_t max_body_bytes = 1024 * 1024;
  /// Largest file uploaded with POST /v1/uploads, in bytes (that route's
  /// body limit).
  int64_t max_upload_bytes = 20 * 1024 * 1024;
  /// Uploads kept at most while no research uses them; more are answered
  /// 429.
  int max_pending_uploads = 100;
  /// Bytes of uploads kept at most while no research uses them; more are
  /// answered 429.
  int64_t max_pending_upload_bytes = 200 * 1024 * 1024;
  /// Sessions researching at once; more are answered 429.
  int max_running_sessions = 64;
  /// Open connections at most.
  int max_connections = 2048;
  /// Open event streams at most.
  int max_event_streams = 4096;
  /// A comment on every open event stream this often.
  std::chrono::milliseconds heartbeat{std::chrono::seconds{15}};
  /// Origins that get CORS headers; empty: none.
  std::vector<std::string> cors_origins;
  /// Without `auth_token`: Host values answered besides the server's own
  /// addresses (`name` or `name:port`).
  std::vector<std::string> allowed_hosts;
  /// Without `auth_token`: origins (`http[s]://host[:port]`) that may send
  /// requests that change state, besides the server's own.
  std::vector<std::string> allowed_origins;
  /// Threads of the HTTP server.
  int io_threads = 2;
};

/// Certificates of the nodes of a cluster (mutual TLS): all three or none.
struct cluster_tls_settings {
  /// This node's certificate and private key (PEM files).
  std::string cert;
  std::string key;
  /// The cluster's certificate authority (PEM): a peer must present a
  /// certificate it signed.
  std::string ca;

  /// Whether any of the three is set (TLS is then required between nodes).
  bool configured() const noexcept {
    return !cert.empty() || !key.empty() || !ca.empty();
  }
};

/// Nodes across machines: `quarry worker` and the sessions that place
/// research agents on workers (docs/cluster.md).
struct cluster_settings {
  /// HOST:PORT of the workers a session places its agents on; empty: every
  /// agent runs on this node.
  std::vector<std::string> workers;
  /// HOST:PORT where `quarry serve` publishes its research service to other
  /// CAF programs (empty: not published); the default of `quarry worker
  /// --listen`.
  std::string listen;
  /// Mutual TLS between nodes.
  cluster_tls_settings tls;
  /// Without TLS, a node listens on loopback only unless this is set.
  bool allow_plaintext_remote = false;
  /// Every worker is asked for its status this often.
  std::chrono::milliseconds heartbeat{std::chrono::seconds{1}};
  /// A worker that has not answered for this long is taken as lost: its
  /// agents are placed again elsewhere.
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds{5}};
  /// Longest wait for a worker to start an agent.
  std::chrono::milliseconds spawn_timeout{std::chrono::seconds{10}};
  /// Research agents a worker runs at once at most (`quarry worker`).
  int max_agents = 8;
  /// Largest message (bytes) another node may send once its handshake is
  /// done; a connection announcing more is closed.
  int64_t max_message_size = 64 * 1024 * 1024;
  /// A connection that has not finished its handshake (TLS included) this
  /// long after it was opened is closed.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
};

/// The whole configuration.
struct settings {
  runtime_settings runtime;
  log_settings log;
  plugin_settings plugins;
  http_settings http;
  llm_settings llm;
  /// Tool instances by tool name (`web_search`, `open_url`, ...).
  std::map<std::string, tool_instance> tools;
  /// Research sessions.
  research_settings research;
  /// Where sessions are kept.
  store_settings store;
  /// The HTTP service.
  server_settings server;
  /// Nodes across machines.
  cluster_settings cluster;
};

} // namespace quarry::core
