// This file is part of the Quarry plugin SDK.
// Plain data types shared by host and plugins: chat messages, tool calls,
// tool definitions, chat requests (with the research context of Quarry's
// own requests), documents, usage and classified errors.

#pragma once

#include "quarry/sdk/version.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::sdk {

// -- errors -------------------------------------------------------------------

/// Classifies every failure a plugin or a host service reports. The class
/// decides what the host does next (retry, back off, give up, shorten).
///
/// No class has the value 0: errors travel between actors as CAF errors, and
/// a CAF error whose code is 0 means "no error".
enum class errc : uint8_t {
  /// The provider asked us to slow down (HTTP 429). Retryable after
  /// @ref error::retry_after_ms.
  rate_limited = 1,
  /// The provider is overloaded (HTTP 529, 503). Retryable.
  overloaded,
  /// The provider failed (HTTP 5xx). Retryable.
  server_error,
  /// A connect or total timeout expired. Retryable.
  timeout,
  /// No bytes arrived for longer than the stall timeout. Retryable.
  stall,
  /// Connection refused or reset, DNS failure, TLS failure. Retryable.
  network,
  /// The prompt does not fit the model's context window. Not retryable as is.
  context_too_long,
  /// Credentials missing or rejected (HTTP 401, 403). Not retryable.
  auth,
  /// The account has no quota left (e.g. `insufficient_quota`). Never retried.
  quota,
  /// The request was malformed (HTTP 400, 422). Not retryable.
  bad_request,
  /// The model, page or endpoint does not exist (HTTP 404). Not retryable.
  not_found,
  /// The caller cancelled the operation.
  cancelled,
  /// A response exceeded its size limit.
  too_large,
  /// A policy refused the operation (e.g. an address the SSRF rules forbid).
  refused,
  /// More redirects than allowed.
  too_many_redirects,
  /// The peer sent something we cannot parse.
  invalid_response,
  /// A bounded queue is full; try again later.
  busy,
  /// A bug or an unexpected condition inside the plugin or the host.
  internal,
  /// The model's answer held nothing: no choice, no text, no tool call (and
  /// no finish reason, or one that explains nothing). Retryable a bounded
  /// number of times, like a server error. Appended after `internal` so
  /// that the values of the older classes stay what they were.
  empty_response,
};

/// The first and the last error class, for iterating over all of them.
constexpr errc errc_first = errc::rate_limited;
constexpr errc errc_last = errc::empty_response;

/// Returns the stable, lower-case name of an error class, e.g. `rate_limited`.
inline const char* to_string(errc x) noexcept {
  switch (x) {
    case errc::rate_limited:
      return "rate_limited";
    case errc::overloaded:
      return "overloaded";
    case errc::server_error:
      return "server_error";
    case errc::timeout:
      return "timeout";
    case errc::stall:
      return "stall";
    case errc::network:
      return "network";
    case errc::context_too_long:
      return "context_too_long";
    case errc::auth:
      return "auth";
    case errc::quota:
      return "quota";
    case errc::bad_request:
      return "bad_request";
    case errc::not_found:
      return "not_found";
    case errc::cancelled:
      return "cancelled";
    case errc::too_large:
      return "too_large";
    case errc::refused:
      return "refused";
    case errc::too_many_redirects:
      return "too_many_redirects";
    case errc::invalid_response:
      return "invalid_response";
    case errc::busy:
      return "busy";
    case errc::internal:
      return "internal";
    case errc::empty_response:
      return "empty_response";
  }
  return "internal";
}

/// Returns whether the host may retry an operation that failed with `x`.
inline bool is_retryable(errc x) noexcept {
  switch (x) {
    case errc::rate_limited:
    case errc::overloaded:
    case errc::server_error:
    case errc::timeout:
    case errc::stall:
    case errc::network:
    case errc::busy:
    case errc::empty_response:
      return true;
    default:
      return false;
  }
}

/// A classified failure. Errors are values: plugins report them through
/// callbacks, never by throwing across the plugin boundary.
struct error {
  /// What kind of failure this is.
  errc code = errc::internal;
  /// A human-readable message. Never contains secrets.
  std::string message;
  /// The HTTP status that caused the failure, or 0.
  int http_status = 0;
  /// How long the server asked us to wait before retrying, if it said so.
  std::optional<int64_t> retry_after_ms;
  /// The server's own verdict on retrying (e.g. `x-should-retry`), which
  /// overrides the class's default when set.
  std::optional<bool> retry_hint;

  /// Returns whether the host may retry.
  bool retryable() const noexcept {
    if (code == errc::quota || code == errc::cancelled)
      return false; // never, whatever the server says
    return retry_hint ? *retry_hint : is_retryable(code);
  }
};

/// Makes an error of class `code` (use this rather than brace-initialising
/// @ref error, whose field list may grow).
inline error make_error(errc code, std::string message, int http_status = 0) {
  error result;
  result.code = code;
  result.message = std::move(message);
  result.http_status = http_status;
  return result;
}

/// Renders an error as `class: message` (plus the HTTP status if any).
inline std::string to_string(const error& x) {
  std::string result = to_string(x.code);
  if (x.http_status != 0)
    result += " (HTTP " + std::to_string(x.http_status) + ")";
  if (!x.message.empty()) {
    result += ": ";
    result += x.message;
  }
  return result;
}

// -- chat ---------------------------------------------------------------------

/// The author of a chat message.
enum class role : uint8_t {
  system,
  user,
  assistant,
  tool,
};

/// Returns `system`, `user`, `assistant` or `tool`.
inline const char* to_string(role x) noexcept {
  switch (x) {
    case role::system:
      return "system";
    case role::user:
      return "user";
    case role::assistant:
      return "assistant";
    case role::tool:
      return "tool";
  }
  return "user";
}

/// A complete tool call made by the model.
struct tool_call {
  /// Identifier chosen by the provider (or synthesised by the plugin).
  std::string id;
  /// Name of the tool, e.g. `web_search`.
  std::string name;
  /// The arguments as the model produced them: a JSON text, possibly broken.
  std::string arguments;
};

/// One message of a conversation.
struct chat_message {
  role author = role::user;
  /// Text content (for `tool` messages: the tool's LLM-facing result).
  std::string content;
  /// Reasoning text the model produced before this message, if any.
  std::string reasoning;
  /// Tool calls of an assistant message.
  std::vector<tool_call> tool_calls;
  /// For `tool` messages: the id of the call this message answers.
  std::string tool_call_id;
  /// For `tool` messages: the name of the tool that ran.
  std::string tool_name;
  /// What the provider needs back with this turn's reasoning, as it put it
  /// in @ref chat_result::reasoning_state (opaque to the host; e.g. the
  /// Anthropic plugin's signed and redacted thinking blocks as JSON text).
  /// Empty for most providers.
  std::string reasoning_state;
};

/// A tool the model may call, in OpenAI function format.
struct tool_definition {
  std::string name;
  std::string description;
  /// JSON schema of the arguments (`{"type": "object", ...}`).
  nlohmann::json parameters = nlohmann::json::object();

  /// Returns `{"type": "function", "function": {"name", "description",
  /// "parameters"}}`.
  nlohmann::json to_openai() const {
    return {{"type", "function"},
            {"function",
             {{"name", name}, {"description", description}, {"parameters", parameters}}}};
  }
};

/// Whether and how the model must call tools.
enum class tool_choice : uint8_t {
  /// The model decides.
  automatic,
  /// The model must call at least one tool.
  required,
  /// The model must not call tools.
  none,
};

/// Returns `auto`, `required` or `none` (the OpenAI spelling).
inline const char* to_string(tool_choice x) noexcept {
  switch (x) {
    case tool_choice::automatic:
      return "auto";
    case tool_choice::required:
      return "required";
    case tool_choice::none:
      return "none";
  }
  return "auto";
}

/// Token counts of one LLM call.
struct usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  /// Part of `output_tokens` spent on reasoning, if the provider says.
  int64_t reasoning_tokens = 0;
  /// Part of `input_tokens` served from a prompt cache, if the provider says.
  int64_t cached_input_tokens = 0;
};

/// A step of a research and what it found (research_context::findings).
struct research_finding {
  /// The step as the plan names it.
  std::string task;
  /// What the step found (its observation), with its citation markers
  /// (`[n]`).
  std::string report;
};

/// A claim of a report and the passage it is to be judged against
/// (research_context::claims).
struct claim_evidence {
  /// The claim, as the report states it.
  std::string claim;
  /// The passage of a cited source that comes closest to the claim, as
  /// quoted to the judge; empty when the cited sources hold none.
  std::string evidence;
};

/// What a request of a research is about, as Quarry's research strategies
/// know it: the facts their prompts state in words, typed. Quarry fills in
/// what the request's role (chat_request::role_tag, and for a structured
/// call the one tool it offers) needs and leaves the rest empty; a request
/// that is no part of a research leaves all of it empty. A provider that
/// answers without a model (the `extractive` provider) reads it instead of
/// the prompts; a provider that sends the messages to a model ignores it.
struct research_context {
  /// The question researched (every role of a research). Of a follow-up,
  /// its own question: the conversation before it is in the messages.
  std::string question;
  /// The question follows earlier research of the same conversation.
  bool follow_up = false;
  /// What this request researches or reports on: a research agent's task
  /// (`research`, `report`), or the plan step a researcher searches for
  /// (the `search_queries` tool).
  std::string task;
  /// The research plan, one step per item, in order (`orchestrate`,
  /// `final`; `write_plan`: the plan written again, empty for a first
  /// plan).
  std::vector<std::string> plan;
  /// Research agents that may run at once (`orchestrate`); 0: not said.
  int max_parallel_agents = 0;
  /// How many steps a plan written now has, at least and at most
  /// (`write_plan`); 0: not said.
  int min_steps = 0;
  int max_steps = 0;
  /// Sources found by the step just completed that no earlier step had
  /// (`reflect`); -1: not said.
  int new_sources = -1;
  /// The plan's completed steps, each with what it found (`synthesize`;
  /// `write_plan`: the steps a plan written again keeps).
  std::vector<research_finding> findings;
  /// The claims to judge, claim i being verdict id i (`judge_claims`).
  std::vector<claim_evidence> claims;
};

/// A request to an LLM provider.
struct chat_request {
  std::vector<chat_message> messages;
  std::vector<tool_definition> tools;
  tool_choice choice = tool_choice::automatic;
  /// Upper bound on generated tokens; 0 means the provider's default.
  int64_t max_tokens = 0;
  /// Sampling temperature, if the caller wants one.
  std::optional<double> temperature;
  /// `low`, `medium`, `high` or empty (provider default).
  std::string reasoning_effort;
  /// What the call is for: `clarify`, `plan`, `orchestrate`, `research`,
  /// `report`, `final` (the orchestrator strategy); `classify`, `plan`,
  /// `report`, `simple`, `synthesize` (the reflective strategy); `judge`
  /// (verification); `chat` (a plain chat). Real providers may ignore it.
  std::string role_tag;
  /// Overrides the configured model for this call, if not empty.
  std::string model;
  /// What the call is about within a research (see research_context);
  /// empty outside one. Real providers may ignore it.
  research_context research;
};

/// A fragment of a tool call as it streams in.
struct tool_call_delta {
  /// Position of the call in the assistant message.
  int index = 0;
  /// Set on the first fragment of a call.
  std::string id;
  /// Set on the first fragment of a call.
  std::string name;
  /// The next piece of the argument text.
  std::string arguments;
};

/// Why the model stopped.
enum class finish_reason : uint8_t {
  /// The answer is complete.
  stop,
  /// The output token limit cut the answer.
  length,
  /// The model stopped to call tools.
  tool_calls,
  /// A safety filter stopped or replaced the answer.
  content_filter,
  /// A reason this SDK does not know.
  other,
  /// The server sent no finish reason at all (the answer may be whole or
  /// not; never to be read as `stop`).
  unknown,
};

/// Returns `stop`, `length`, `tool_calls`, `content_filter`, `other` or
/// `unknown`.
inline const char* to_string(finish_reason x) noexcept {
  switch (x) {
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
    case finish_reason::tool_calls:
      return "tool_calls";
    case finish_reason::content_filter:
      return "content_filter";
    case finish_reason::other:
      return "other";
    case finish_reason::unknown:
      return "unknown";
  }
  return "other";
}

/// What an LLM call produced, delivered once at the end.
struct chat_result {
  std::string text;
  std::string reasoning;
  std::vector<tool_call> tool_calls;
  finish_reason finish = finish_reason::stop;
  sdk::usage usage;
  /// The model that actually answered.
  std::string model;
  /// Provider data to send back with this turn (see
  /// @ref chat_message::reasoning_state).
  std::string reasoning_state;
};

/// Static facts about a configured model.
struct model_info {
  std::string model;
  /// The model's context window in tokens, 0 when unknown.
  int64_t context_window = 0;
  bool supports_tools = true;
  bool supports_reasoning = false;
  /// Where @ref context_window comes from, for people: `config` (the
  /// provider's own option), or the server's field that said it, e.g.
  /// `vllm /v1/models max_model_len`, `ollama /api/show num_ctx`,
  /// `openrouter context_length`, `lm studio max_context_length`. Empty when
  /// the window is unknown or the plugin does not say; when the window is
  /// unknown, it may instead say why (e.g. that Ollama serves the model with
  /// its default context) and what to do.
  std::string context_window_source;
};

// -- documents ----------------------------------------------------------------

/// Where a document comes from.
enum class source_kind : uint8_t {
  web,
  internal,
  file,
  other,
};

/// Returns `web`, `internal`, `file` or `other`.
inline const char* to_string(source_kind x) noexcept {
  switch (x) {
    case source_kind::web:
      return "web";
    case source_kind::internal:
      return "internal";
    case source_kind::file:
      return "file";
    case source_kind::other:
      return "other";
  }
  return "other";
}

/// A source a tool found or read.
struct document {
  /// Stable identifier (the URL for web pages, a corpus id for internal ones).
  std::string id;
  std::string url;
  std::string title;
  /// A short excerpt, e.g. the search engine's snippet.
  std::string snippet;
  /// Full text, if it was read.
  std::string content;
  /// Publication date as ISO 8601, if known.
  std::optional<std::string> published;
  source_kind kind = source_kind::web;
};

} // namespace quarry::sdk
