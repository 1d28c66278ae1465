// Robust parsing of tool-call arguments.

#include "quarry/core/tool_args.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

namespace quarry::core {

namespace {

std::string_view trim(std::string_view x) {
  while (!x.empty() && (x.front() == ' ' || x.front() == '\t' || x.front() == '\n'
                        || x.front() == '\r'))
    x.remove_prefix(1);
  while (!x.empty() && (x.back() == ' ' || x.back() == '\t' || x.back() == '\n'
                        || x.back() == '\r'))
    x.remove_suffix(1);
  return x;
}

// Strips a ```json ... ``` fence around the whole text.
std::string_view unfence(std::string_view x) {
  x = trim(x);
  if (x.substr(0, 3) != "```" || x.size() < 6 || x.substr(x.size() - 3) != "```")
    return x;
  auto body = x.substr(3, x.size() - 6);
  auto nl = body.find('\n');
  if (nl != std::string_view::npos && body.substr(0, nl).find('{') == std::string_view::npos)
    body = body.substr(nl + 1);
  return trim(body);
}

// Parses string values that hold a JSON array or object, one level deep.
void expand_nested(nlohmann::json& obj) {
  for (auto& [key, value] : obj.items()) {
    if (!value.is_string())
      continue;
    auto text = trim(value.get_ref<const std::string&>());
    if (text.size() < 2)
      continue;
    if ((text.front() == '[' && text.back() == ']')
        || (text.front() == '{' && text.back() == '}')) {
      auto parsed = sdk::parse_json(text);
      if (!parsed.is_discarded())
        value = std::move(parsed);
    }
  }
}

std::string too_deep() {
  return "The arguments nest arrays or objects deeper than "
         + std::to_string(max_argument_depth)
         + " levels. Call the tool again with a JSON object that matches its "
           "parameters.";
}

} // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  if (s.find('\0') != std::string_view::npos) {
    out.reserve(s.size());
    for (auto c : s)
      if (c != '\0')
        out += c;
    sdk::repair_utf8_in_place(out);
    return out;
  }
  return sdk::repair_utf8(s);
}

std::variant<nlohmann::json, std::string>
parse_tool_arguments(std::string_view text) {
  auto clean = sanitize_utf8(text);
  auto body = unfence(clean);
  if (body.empty())
    return nlohmann::json::object();
  if (sdk::json_nesting_depth(body, max_argument_depth) > max_argument_depth)
    return too_deep();
  auto j = sdk::parse_json(body);
  // Some models double-encode: a JSON string that holds the object.
  for (int depth = 0; depth < 2 && !j.is_discarded() && j.is_string(); ++depth) {
    auto inner = j.get<std::string>();
    if (sdk::json_nesting_depth(inner, max_argument_depth) > max_argument_depth)
      return too_deep();
    j = sdk::parse_json(inner);
  }
  if (j.is_discarded())
    return std::string{"The arguments are not valid JSON. Call the tool again "
                       "with a JSON object that matches its parameters."};
  if (j.is_null())
    return nlohmann::json::object();
  if (!j.is_object())
    return std::string{"The arguments must be a JSON object that matches the "
                       "tool's parameters."};
  expand_nested(j);
  return j;
}

} // namespace quarry::core
