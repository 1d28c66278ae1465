// The text of GET /metrics (see serve_metrics_text.hpp).

#include "serve_metrics_text.hpp"

#include "quarry/core/metrics.hpp"

#include <cmath>
#include <map>
#include <stdexcept>
#include <variant>

namespace quarry::app {

namespace {

using nlohmann::json;

/// Most buckets a stats reply may name.
constexpr size_t max_buckets = 64;

/// A count from a stats reply: a finite number >= 0, else 0.
double count_of(const json& j, const char* key) {
  if (!j.is_object())
    return 0;
  auto i = j.find(key);
  if (i == j.end() || !i->is_number())
    return 0;
  auto x = i->get<double>();
  return std::isfinite(x) && x > 0 ? x : 0;
}

/// A label value from a stats reply (a name), or nothing.
std::optional<std::string> name_of(const json& j, const char* key) {
  if (!j.is_object())
    return std::nullopt;
  auto i = j.find(key);
  if (i == j.end() || !i->is_string() || i->get_ref<const std::string&>().empty()
      || i->get_ref<const std::string&>().size() > 200)
    return std::nullopt;
  return i->get<std::string>();
}

/// The bucket bounds of a histogram in a stats reply, if well formed.
std::optional<std::vector<double>> bounds_of(const json& hist) {
  if (!hist.is_object() || !hist.contains("bounds") || !hist["bounds"].is_array()
      || hist["bounds"].size() > max_buckets)
    return std::nullopt;
  std::vector<double> out;
  for (const auto& b : hist["bounds"]) {
    if (!b.is_number())
      return std::nullopt;
    auto x = b.get<double>();
    if (!std::isfinite(x) || (!out.empty() && x <= out.back()))
      return std::nullopt;
    out.push_back(x);
  }
  return out;
}

/// The snapshot of a histogram in a stats reply with `bounds`, if well
/// formed.
std::optional<core::metric_histogram::snapshot> snapshot_of(const json& hist,
                                                            const std::vector<double>& bounds) {
  auto b = bounds_of(hist);
  if (!b || *b != bounds || !hist.contains("counts") || !hist["counts"].is_array()
      || hist["counts"].size() != bounds.size() + 1)
    return std::nullopt;
  core::metric_histogram::snapshot out;
  auto whole = [](const json& x) {
    return x.is_number_unsigned() || (x.is_number_integer() && x.get<int64_t>() >= 0);
  };
  for (const auto& c : hist["counts"]) {
    if (!whole(c))
      return std::nullopt;
    out.counts.push_back(c.get<uint64_t>());
  }
  if (!hist.contains("count") || !whole(hist["count"]))
    return std::nullopt;
  out.count = hist["count"].get<uint64_t>();
  out.sum = count_of(hist, "sum");
  return out;
}

/// The bounds of the first well-formed histogram `key` among `stats`.
std::vector<double> first_bounds(const std::vector<json>& stats, const char* key) {
  for (const auto& s : stats)
    if (s.is_object() && s.contains(key))
      if (auto b = bounds_of(s[key]))
        return *b;
  return {};
}

template <class T>
T* must(std::variant<T*, sdk::error> added) {
  // The names below are fixed and valid: a failure is a bug of this file.
  if (auto* p = std::get_if<T*>(&added))
    return *p;
  throw std::logic_error{std::get<sdk::error>(added).message};
}

} // namespace

std::vector<std::string> metrics_family_names() {
  return {"quarry_sessions",          "quarry_sessions_running",
          "quarry_llm_calls_total",   "quarry_llm_tokens_total",
          "quarry_llm_retries_total", "quarry_llm_call_seconds",
          "quarry_tool_calls_total",  "quarry_tool_call_seconds",
          "quarry_errors_total",      "quarry_http_requests_total",
          "quarry_event_streams"};
}

std::string render_metrics(const metrics_snapshot& snap) {
  core::metrics_registry reg;
  auto* sessions = must(
    reg.add_gauge("quarry_sessions", "Stored research sessions by state.", {"state"}));
  auto* running = must(
    reg.add_gauge("quarry_sessions_running", "Research sessions running in this process."));
  auto* llm_calls = must(reg.add_counter(
    "quarry_llm_calls_total", "LLM calls by provider instance and outcome (ok, error, cancelled).",
    {"provider", "outcome"}));
  auto* llm_tokens = must(reg.add_counter("quarry_llm_tokens_total",
                                          "LLM tokens by provider instance and direction "
                                          "(input, output).",
                                          {"provider", "direction"}));
  auto* llm_retries = must(reg.add_counter("quarry_llm_retries_total",
                                           "LLM call attempts that were retried.", {"provider"}));
  auto llm_bounds = first_bounds(snap.llm_stats, "call_seconds");
  auto* llm_seconds = must(reg.add_histogram(
    "quarry_llm_call_seconds",
    "Duration of LLM calls that ended (not cancelled), queueing and retries included.",
    {"provider"}, llm_bounds));
  auto* tool_calls = must(reg.add_counter(
    "quarry_tool_calls_total",
    "Tool calls by tool instance and outcome (ok, cached, error, timeout, cancelled).",
    {"tool", "outcome"}));
  auto tool_bounds = first_bounds(snap.tool_stats, "call_seconds");
  auto* tool_seconds = must(reg.add_histogram(
    "quarry_tool_call_seconds", "Duration of tool runs that ended (cache hits excluded).", {"tool"},
    tool_bounds));
  auto* errors = must(reg.add_counter(
    "quarry_errors_total", "Failed LLM calls and tool calls by error class.", {"class"}));
  auto* http_requests = must(
    reg.add_counter("quarry_http_requests_total", "HTTP responses sent by status code.", {"code"}));
  auto* streams = must(reg.add_gauge("quarry_event_streams", "Event streams open now."));

  for (const auto& [state, n] : snap.sessions)
    sessions->with({state}).set(static_cast<double>(n));
  if (snap.sessions_running)
    running->with().set(static_cast<double>(*snap.sessions_running));

  std::map<std::string, double> by_class;
  auto count_errors = [&](const json& s) {
    if (!s.is_object() || !s.contains("errors") || !s["errors"].is_object())
      return;
    for (auto it = s["errors"].begin(); it != s["errors"].end(); ++it)
      if (!it.key().empty() && it.key().size() <= 64)
        by_class[it.key()] += count_of(s["errors"], it.key().c_str());
  };

  for (const auto& s : snap.llm_stats) {
    auto provider = name_of(s, "provider");
    if (!provider)
      continue;
    const auto& outcomes = s.is_object() && s.contains("outcomes") ? s["outcomes"] : json{};
    for (const char* o : {"ok", "error", "cancelled"})
      llm_calls->with({*provider, o}).inc(count_of(outcomes, o));
    llm_tokens->with({*provider, "input"}).inc(count_of(s, "input_tokens"));
    llm_tokens->with({*provider, "output"}).inc(count_of(s, "output_tokens"));
    llm_retries->with({*provider}).inc(count_of(s, "retries"));
    if (s.contains("call_seconds"))
      if (auto h = snapshot_of(s["call_seconds"], llm_bounds))
        llm_seconds->with({*provider}).add(*h);
    count_errors(s);
  }
  for (const auto& s : snap.tool_stats) {
    auto tool = name_of(s, "tool");
    if (!tool)
      continue;
    const auto& outcomes = s.is_object() && s.contains("outcomes") ? s["outcomes"] : json{};
    for (const char* o : {"ok", "cached", "error", "timeout", "cancelled"})
      tool_calls->with({*tool, o}).inc(count_of(outcomes, o));
    if (s.contains("call_seconds"))
      if (auto h = snapshot_of(s["call_seconds"], tool_bounds))
        tool_seconds->with({*tool}).add(*h);
    count_errors(s);
  }
  for (const auto& [cls, n] : by_class)
    errors->with({cls}).inc(n);

  if (snap.http) {
    for (const auto& [code, n] : snap.http->responses_by_status)
      http_requests->with({std::to_string(code)}).inc(static_cast<double>(n));
    streams->with().set(static_cast<double>(snap.http->open_event_streams));
  }
  return reg.render();
}

} // namespace quarry::app
