// JSON forms of the SDK's LLM types.

#include "quarry/core/llm_json.hpp"

namespace quarry::sdk {

using nlohmann::json;

void to_json(json& j, const tool_call& x) {
  j = json{{"id", x.id}, {"name", x.name}, {"arguments", x.arguments}};
}

void from_json(const json& j, tool_call& x) {
  x.id = j.value("id", std::string{});
  x.name = j.value("name", std::string{});
  x.arguments = j.value("arguments", std::string{});
}

void to_json(json& j, const chat_message& x) {
  j = json{{"role", to_string(x.author)}, {"content", x.content}};
  if (!x.reasoning.empty())
    j["reasoning"] = x.reasoning;
  if (!x.tool_calls.empty())
    j["tool_calls"] = x.tool_calls;
  if (!x.tool_call_id.empty())
    j["tool_call_id"] = x.tool_call_id;
  if (!x.tool_name.empty())
    j["tool_name"] = x.tool_name;
}

void from_json(const json& j, chat_message& x) {
  x.author = core::parse_role(j.value("role", std::string{"user"}))
               .value_or(role::user);
  x.content = j.value("content", std::string{});
  x.reasoning = j.value("reasoning", std::string{});
  x.tool_calls = j.value("tool_calls", std::vector<tool_call>{});
  x.tool_call_id = j.value("tool_call_id", std::string{});
  x.tool_name = j.value("tool_name", std::string{});
}

void to_json(json& j, const tool_definition& x) {
  j = json{{"name", x.name},
           {"description", x.description},
           {"parameters", x.parameters}};
}

void from_json(const json& j, tool_definition& x) {
  x.name = j.value("name", std::string{});
  x.description = j.value("description", std::string{});
  x.parameters = j.value("parameters", json::object());
}

void to_json(json& j, const usage& x) {
  j = json{{"input_tokens", x.input_tokens},
           {"output_tokens", x.output_tokens},
           {"reasoning_tokens", x.reasoning_tokens},
           {"cached_input_tokens", x.cached_input_tokens}};
}

void from_json(const json& j, usage& x) {
  x.input_tokens = j.value("input_tokens", int64_t{0});
  x.output_tokens = j.value("output_tokens", int64_t{0});
  x.reasoning_tokens = j.value("reasoning_tokens", int64_t{0});
  x.cached_input_tokens = j.value("cached_input_tokens", int64_t{0});
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
}

void from_json(const json& j, chat_request& x) {
  x.messages = j.value("messages", std::vector<chat_message>{});
  x.tools = j.value("tools", std::vector<tool_definition>{});
  x.choice = core::parse_tool_choice(j.value("tool_choice", std::string{"auto"}))
               .value_or(tool_choice::automatic);
  x.max_tokens = j.value("max_tokens", int64_t{0});
  x.reasoning_effort = j.value("reasoning_effort", std::string{});
  x.role_tag = j.value("role_tag", std::string{});
  x.model = j.value("model", std::string{});
  if (j.contains("temperature") && j["temperature"].is_number())
    x.temperature = j["temperature"].get<double>();
  else
    x.temperature.reset();
}

void to_json(json& j, const chat_result& x) {
  j = json{{"text", x.text},
           {"reasoning", x.reasoning},
           {"tool_calls", x.tool_calls},
           {"finish_reason", to_string(x.finish)},
           {"usage", x.usage},
           {"model", x.model}};
}

void from_json(const json& j, chat_result& x) {
  x.text = j.value("text", std::string{});
  x.reasoning = j.value("reasoning", std::string{});
  x.tool_calls = j.value("tool_calls", std::vector<tool_call>{});
  x.finish = core::parse_finish_reason(j.value("finish_reason", std::string{"stop"}))
               .value_or(finish_reason::other);
  x.usage = j.value("usage", usage{});
  x.model = j.value("model", std::string{});
}

void to_json(json& j, const tool_call_delta& x) {
  j = json{{"index", x.index},
           {"id", x.id},
           {"name", x.name},
           {"arguments", x.arguments}};
}

void from_json(const json& j, tool_call_delta& x) {
  x.index = j.value("index", 0);
  x.id = j.value("id", std::string{});
  x.name = j.value("name", std::string{});
  x.arguments = j.value("arguments", std::string{});
}

void to_json(json& j, const error& x) {
  j = json{{"class", to_string(x.code)},
           {"message", x.message},
           {"status", x.http_status}};
  if (x.retry_after_ms)
    j["retry_after_ms"] = *x.retry_after_ms;
  if (x.retry_hint)
    j["retry_hint"] = *x.retry_hint;
}

void from_json(const json& j, error& x) {
  x.code = core::parse_errc(j.value("class", std::string{"internal"}))
             .value_or(errc::internal);
  x.message = j.value("message", std::string{});
  x.http_status = j.value("status", 0);
  if (j.contains("retry_after_ms") && j["retry_after_ms"].is_number())
    x.retry_after_ms = j["retry_after_ms"].get<int64_t>();
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
  x.id = j.value("id", std::string{});
  x.url = j.value("url", std::string{});
  x.title = j.value("title", std::string{});
  x.snippet = j.value("snippet", std::string{});
  x.content = j.value("content", std::string{});
  if (j.contains("published") && j["published"].is_string())
    x.published = j["published"].get<std::string>();
  else
    x.published.reset();
  x.kind = core::parse_source_kind(j.value("kind", std::string{"web"}))
             .value_or(source_kind::other);
}

} // namespace quarry::sdk

namespace quarry::core {

std::optional<sdk::source_kind> parse_source_kind(std::string_view x) {
  for (auto k : {sdk::source_kind::web, sdk::source_kind::internal,
                 sdk::source_kind::file, sdk::source_kind::other})
    if (x == sdk::to_string(k))
      return k;
  return std::nullopt;
}

std::optional<sdk::role> parse_role(std::string_view x) {
  for (auto r : {sdk::role::system, sdk::role::user, sdk::role::assistant,
                 sdk::role::tool})
    if (x == sdk::to_string(r))
      return r;
  return std::nullopt;
}

std::optional<sdk::tool_choice> parse_tool_choice(std::string_view x) {
  for (auto c : {sdk::tool_choice::automatic, sdk::tool_choice::required,
                 sdk::tool_choice::none})
    if (x == sdk::to_string(c))
      return c;
  return std::nullopt;
}

std::optional<sdk::finish_reason> parse_finish_reason(std::string_view x) {
  for (auto f : {sdk::finish_reason::stop, sdk::finish_reason::length,
                 sdk::finish_reason::tool_calls, sdk::finish_reason::content_filter,
                 sdk::finish_reason::other})
    if (x == sdk::to_string(f))
      return f;
  return std::nullopt;
}

std::optional<sdk::errc> parse_errc(std::string_view x) {
  for (int i = static_cast<int>(sdk::errc_first);
       i <= static_cast<int>(sdk::errc_last); ++i) {
    auto code = static_cast<sdk::errc>(i);
    if (x == sdk::to_string(code))
      return code;
  }
  return std::nullopt;
}

std::optional<std::string>
parse_tool_definitions(const nlohmann::json& j,
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
      def.parameters = fn["parameters"];
    } else {
      def.parameters = {{"type", "object"}, {"properties", nlohmann::json::object()}};
    }
    out.push_back(std::move(def));
  }
  return std::nullopt;
}

} // namespace quarry::core
