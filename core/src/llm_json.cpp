// JSON forms of the SDK's LLM types.

#include "quarry/core/llm_json.hpp"

#include "quarry/sdk/json.hpp"

#include <limits>

namespace quarry::sdk {

using nlohmann::json;

namespace {

// Readers that tolerate a missing member or one of the wrong type (JSON from
// outside must never throw): they return the fallback instead.

std::string text_of(const json& j, const char* key, std::string fallback = {}) {
  auto i = j.find(key);
  return i != j.end() && i->is_string() ? i->get<std::string>() : fallback;
}

template <class T>
T number_of(const json& j, const char* key, T fallback) {
  auto i = j.find(key);
  if (i == j.end() || !i->is_number())
    return fallback;
  if (i->is_number_float()) {
    auto d = i->get<double>();
    // Out-of-range floats would be undefined behaviour when converted.
    if (!(d >= static_cast<double>(std::numeric_limits<T>::min())
          && d < static_cast<double>(std::numeric_limits<T>::max())))
      return fallback;
    return static_cast<T>(d);
  }
  if (i->is_number_unsigned()) {
    auto u = i->get<uint64_t>();
    return u > static_cast<uint64_t>(std::numeric_limits<T>::max()) ? fallback : static_cast<T>(u);
  }
  auto v = i->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min())
      || (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
    return fallback;
  return static_cast<T>(v);
}

template <class T>
std::vector<T> list_of(const json& j, const char* key) {
  std::vector<T> out;
  auto i = j.find(key);
  if (i == j.end() || !i->is_array())
    return out;
  for (const auto& x : *i) {
    if (!x.is_object())
      continue;
    T item;
    from_json(x, item);
    out.push_back(std::move(item));
  }
  return out;
}

} // namespace

void to_json(json& j, const tool_call& x) {
  j = json{{"id", x.id}, {"name", x.name}, {"arguments", x.arguments}};
}

void from_json(const json& j, tool_call& x) {
  x.id = text_of(j, "id");
  x.name = text_of(j, "name");
  x.arguments = text_of(j, "arguments");
}

void to_json(json& j, const chat_message& x) {
  j = json{{"role", to_string(x.author)}, {"content", x.content}};
  if (!x.reasoning.empty())
    j["reasoning"] = x.reasoning;
  if (!x.reasoning_state.empty())
    j["reasoning_state"] = x.reasoning_state;
  if (!x.tool_calls.empty())
    j["tool_calls"] = x.tool_calls;
  if (!x.tool_call_id.empty())
    j["tool_call_id"] = x.tool_call_id;
  if (!x.tool_name.empty())
    j["tool_name"] = x.tool_name;
}

void from_json(const json& j, chat_message& x) {
  x.author = core::parse_role(text_of(j, "role", "user")).value_or(role::user);
  x.content = text_of(j, "content");
  x.reasoning = text_of(j, "reasoning");
  x.reasoning_state = text_of(j, "reasoning_state");
  x.tool_calls = list_of<tool_call>(j, "tool_calls");
  x.tool_call_id = text_of(j, "tool_call_id");
  x.tool_name = text_of(j, "tool_name");
}

void to_json(json& j, const tool_definition& x) {
  j = json{{"name", x.name}, {"description", x.description}, {"parameters", x.parameters}};
}

void from_json(const json& j, tool_definition& x) {
  x.name = text_of(j, "name");
  x.description = text_of(j, "description");
  auto p = j.find("parameters");
  x.parameters = p != j.end() && p->is_object() ? *p : json::object();
}

void to_json(json& j, const usage& x) {
  j = json{{"input_tokens", x.input_tokens},
           {"output_tokens", x.output_tokens},
           {"reasoning_tokens", x.reasoning_tokens},
           {"cached_input_tokens", x.cached_input_tokens}};
}

void from_json(const json& j, usage& x) {
  x.input_tokens = number_of<int64_t>(j, "input_tokens", 0);
  x.output_tokens = number_of<int64_t>(j, "output_tokens", 0);
  x.reasoning_tokens = number_of<int64_t>(j, "reasoning_tokens", 0);
  x.cached_input_tokens = number_of<int64_t>(j, "cached_input_tokens", 0);
}

void to_json(json& j, const research_finding& x) {
  j = json{{"task", x.task}, {"report", x.report}};
}

void from_json(const json& j, research_finding& x) {
  x.task = text_of(j, "task");
  x.report = text_of(j, "report");
}

void to_json(json& j, const claim_evidence& x) {
  j = json{{"claim", x.claim}, {"evidence", x.evidence}};
}

void from_json(const json& j, claim_evidence& x) {
  x.claim = text_of(j, "claim");
  x.evidence = text_of(j, "evidence");
}

void to_json(json& j, const research_context& x) {
  j = json::object();
  if (!x.question.empty())
    j["question"] = x.question;
  if (x.follow_up)
    j["follow_up"] = true;
  if (!x.task.empty())
    j["task"] = x.task;
  if (!x.plan.empty())
    j["plan"] = x.plan;
  if (x.max_parallel_agents != 0)
    j["max_parallel_agents"] = x.max_parallel_agents;
  if (x.min_steps != 0)
    j["min_steps"] = x.min_steps;
  if (x.max_steps != 0)
    j["max_steps"] = x.max_steps;
  if (x.new_sources != -1)
    j["new_sources"] = x.new_sources;
  if (!x.findings.empty())
    j["findings"] = x.findings;
  if (!x.claims.empty())
    j["claims"] = x.claims;
}

void from_json(const json& j, research_context& x) {
  x = research_context{};
  x.question = text_of(j, "question");
  if (auto i = j.find("follow_up"); i != j.end() && i->is_boolean())
    x.follow_up = i->get<bool>();
  x.task = text_of(j, "task");
  if (auto i = j.find("plan"); i != j.end() && i->is_array())
    for (const auto& step : *i)
      if (step.is_string())
        x.plan.push_back(step.get<std::string>());
  x.max_parallel_agents = number_of<int>(j, "max_parallel_agents", 0);
  x.min_steps = number_of<int>(j, "min_steps", 0);
  x.max_steps = number_of<int>(j, "max_steps", 0);
  x.new_sources = number_of<int>(j, "new_sources", -1);
  x.findings = list_of<research_finding>(j, "findings");
  x.claims = list_of<claim_evidence>(j, "claims");
}

void to_json(json& j, const chat_request& x) {
  j = json{{"messages", x.messages},
           {"tools", x.tools},
           {"tool_choice", to_string(x.choice)},
           {"max_tokens", x.max_tokens},
           {"reasoning_effort", x.reasoning_effort},
           {"role_tag", x.role_tag},
           {"model", x.model}};
  if (x.temperature)
    j["temperature"] = *x.temperature;
  json research = x.research;
  if (!research.empty())
    j["research"] = std::move(research);
}

void from_json(const json& j, chat_request& x) {
  x.messages = list_of<chat_message>(j, "messages");
  x.tools = list_of<tool_definition>(j, "tools");
  x.choice = core::parse_tool_choice(text_of(j, "tool_choice", "auto"))
               .value_or(tool_choice::automatic);
  x.max_tokens = number_of<int64_t>(j, "max_tokens", 0);
  x.reasoning_effort = text_of(j, "reasoning_effort");
  x.role_tag = text_of(j, "role_tag");
  x.model = text_of(j, "model");
  if (j.contains("temperature") && j["temperature"].is_number())
    x.temperature = j["temperature"].get<double>();
  else
    x.temperature.reset();
  if (auto i = j.find("research"); i != j.end() && i->is_object())
    from_json(*i, x.research);
  else
    x.research = research_context{};
}

void to_json(json& j, const chat_result& x) {
  j = json{{"text", x.text},
           {"reasoning", x.reasoning},
           {"tool_calls", x.tool_calls},
           {"finish_reason", to_string(x.finish)},
           {"usage", x.usage},
           {"model", x.model}};
  if (!x.reasoning_state.empty())
    j["reasoning_state"] = x.reasoning_state;
}

void from_json(const json& j, chat_result& x) {
  x.text = text_of(j, "text");
  x.reasoning = text_of(j, "reasoning");
  x.reasoning_state = text_of(j, "reasoning_state");
  x.tool_calls = list_of<tool_call>(j, "tool_calls");
  x.finish = core::parse_finish_reason(text_of(j, "finish_reason", "unknown"))
               .value_or(finish_reason::other);
  x.usage = usage{};
  if (auto u = j.find("usage"); u != j.end() && u->is_object())
    from_json(*u, x.usage);
  x.model = text_of(j, "model");
}

void to_json(json& j, const tool_call_delta& x) {
  j = json{{"index", x.index}, {"id", x.id}, {"name", x.name}, {"arguments", x.arguments}};
}

void from_json(const json& j, tool_call_delta& x) {
  x.index = number_of<int>(j, "index", 0);
  x.id = text_of(j, "id");
  x.name = text_of(j, "name");
  x.arguments = text_of(j, "arguments");
}

void to_json(json& j, const error& x) {
  j = json{{"class", to_string(x.code)}, {"message", x.message}, {"status", x.http_status}};
  if (x.retry_after_ms)
    j["retry_after_ms"] = *x.retry_after_ms;
  if (x.retry_hint)
    j["retry_hint"] = *x.retry_hint;
}

void from_json(const json& j, error& x) {
  x.code = core::parse_errc(text_of(j, "class", "internal")).value_or(errc::internal);
  x.message = text_of(j, "message");
  x.http_status = number_of<int>(j, "status", 0);
  if (j.contains("retry_after_ms") && j["retry_after_ms"].is_number())
    x.retry_after_ms = number_of<int64_t>(j, "retry_after_ms", 0);
  if (j.contains("retry_hint") && j["retry_hint"].is_boolean())
    x.retry_hint = j["retry_hint"].get<bool>();
}

void to_json(json& j, const document& x) {
  j = json{{"id", x.id},
           {"url", x.url},
           {"title", x.title},
           {"snippet", x.snippet},
           {"kind", to_string(x.kind)}};
  if (!x.content.empty())
    j["content"] = x.content;
  if (x.published)
    j["published"] = *x.published;
}

void from_json(const json& j, document& x) {
  x.id = text_of(j, "id");
  x.url = text_of(j, "url");
  x.title = text_of(j, "title");
  x.snippet = text_of(j, "snippet");
  x.content = text_of(j, "content");
  if (j.contains("published") && j["published"].is_string())
    x.published = j["published"].get<std::string>();
  else
    x.published.reset();
  x.kind = core::parse_source_kind(text_of(j, "kind", "web")).value_or(source_kind::other);
}

} // namespace quarry::sdk

namespace quarry::core {

std::optional<sdk::source_kind> parse_source_kind(std::string_view x) {
  for (auto k : {sdk::source_kind::web, sdk::source_kind::internal, sdk::source_kind::file,
                 sdk::source_kind::other})
    if (x == sdk::to_string(k))
      return k;
  return std::nullopt;
}

std::optional<sdk::role> parse_role(std::string_view x) {
  for (auto r : {sdk::role::system, sdk::role::user, sdk::role::assistant, sdk::role::tool})
    if (x == sdk::to_string(r))
      return r;
  return std::nullopt;
}

std::optional<sdk::tool_choice> parse_tool_choice(std::string_view x) {
  for (auto c : {sdk::tool_choice::automatic, sdk::tool_choice::required, sdk::tool_choice::none})
    if (x == sdk::to_string(c))
      return c;
  return std::nullopt;
}

std::optional<sdk::finish_reason> parse_finish_reason(std::string_view x) {
  for (auto f :
       {sdk::finish_reason::stop, sdk::finish_reason::length, sdk::finish_reason::tool_calls,
        sdk::finish_reason::content_filter, sdk::finish_reason::other, sdk::finish_reason::unknown})
    if (x == sdk::to_string(f))
      return f;
  return std::nullopt;
}

std::optional<sdk::errc> parse_errc(std::string_view x) {
  for (int i = static_cast<int>(sdk::errc_first); i <= static_cast<int>(sdk::errc_last); ++i) {
    auto code = static_cast<sdk::errc>(i);
    if (x == sdk::to_string(code))
      return code;
  }
  return std::nullopt;
}

std::optional<std::string> parse_tool_definitions(const nlohmann::json& j,
                                                  std::vector<sdk::tool_definition>& out) {
  if (!j.is_array())
    return std::string{"expected a JSON array of tool definitions"};
  size_t n = 0;
  for (const auto& entry : j) {
    auto where = "tool " + std::to_string(n++) + ": ";
    if (!entry.is_object())
      return where + "expected an object";
    const auto& fn = entry.contains("function") ? entry["function"] : entry;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()
        || fn["name"].get<std::string>().empty())
      return where + "missing \"name\"";
    sdk::tool_definition def;
    def.name = fn["name"].get<std::string>();
    if (fn.contains("description") && fn["description"].is_string())
      def.description = fn["description"].get<std::string>();
    if (fn.contains("parameters")) {
      if (!fn["parameters"].is_object())
        return where + "\"parameters\" must be a JSON schema object";
      if (sdk::json_deeper_than(fn["parameters"], max_schema_depth))
        return where + "\"parameters\" nests deeper than " + std::to_string(max_schema_depth)
               + " levels";
      def.parameters = fn["parameters"];
    } else {
      def.parameters = {{"type", "object"}, {"properties", nlohmann::json::object()}};
    }
    out.push_back(std::move(def));
  }
  return std::nullopt;
}

} // namespace quarry::core
