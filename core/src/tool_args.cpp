// Robust parsing of tool-call arguments.

#include "quarry/core/tool_args.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace quarry::core {

namespace {

// Strips a ```json ... ``` fence around the whole text.
std::string_view unfence(std::string_view x) {
  x = sdk::trim(x);
  if (x.substr(0, 3) != "```" || x.size() < 6 || x.substr(x.size() - 3) != "```")
    return x;
  auto body = x.substr(3, x.size() - 6);
  auto nl = body.find('\n');
  if (nl != std::string_view::npos && body.substr(0, nl).find('{') == std::string_view::npos)
    body = body.substr(nl + 1);
  return sdk::trim(body);
}

// Parses string values that hold a JSON array or object, one level deep.
void expand_nested(nlohmann::json& obj) {
  for (auto& [key, value] : obj.items()) {
    if (!value.is_string())
      continue;
    auto text = sdk::trim(value.get_ref<const std::string&>());
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
  return "The arguments nest arrays or objects deeper than " + std::to_string(max_argument_depth)
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

std::variant<nlohmann::json, std::string> parse_tool_arguments(std::string_view text) {
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

namespace {

const char* type_name_of(const nlohmann::json& x) {
  if (x.is_object())
    return "an object";
  if (x.is_array())
    return "an array";
  if (x.is_string())
    return "a string";
  if (x.is_boolean())
    return "true or false";
  if (x.is_number_integer() || x.is_number_unsigned())
    return "an integer";
  if (x.is_number())
    return "a number";
  return "null";
}

bool has_type(const nlohmann::json& x, const std::string& type) {
  if (type == "object")
    return x.is_object();
  if (type == "array")
    return x.is_array();
  if (type == "string")
    return x.is_string();
  if (type == "boolean")
    return x.is_boolean();
  if (type == "integer")
    return x.is_number_integer() || x.is_number_unsigned()
           || (x.is_number_float() && std::abs(x.get<double>()) < 9.0e15
               && std::floor(x.get<double>()) == x.get<double>());
  if (type == "number")
    return x.is_number();
  if (type == "null")
    return x.is_null();
  return true; // a type this checker does not know: accepted
}

std::optional<std::string> check_value(const nlohmann::json& schema, const nlohmann::json& x,
                                       const std::string& where, int depth) {
  if (!schema.is_object() || depth > 32)
    return std::nullopt;
  if (auto t = schema.find("type"); t != schema.end()) {
    std::vector<std::string> types;
    if (t->is_string())
      types.push_back(t->get<std::string>());
    else if (t->is_array())
      for (const auto& e : *t)
        if (e.is_string())
          types.push_back(e.get<std::string>());
    if (!types.empty() && std::none_of(types.begin(), types.end(), [&](const std::string& ty) {
          return has_type(x, ty);
        })) {
      std::string want;
      for (size_t i = 0; i < types.size(); ++i)
        want += (i == 0 ? "" : " or ") + types[i];
      return where + " must be " + want + ", not " + type_name_of(x);
    }
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    if (std::find(e->begin(), e->end(), x) == e->end())
      return where + " must be one of " + e->dump();
  }
  if (x.is_object()) {
    if (auto req = schema.find("required"); req != schema.end() && req->is_array())
      for (const auto& name : *req)
        if (name.is_string() && !x.contains(name.get<std::string>()))
          return where + " needs '" + name.get<std::string>() + "'";
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object())
      for (const auto& [key, value] : x.items())
        if (auto p = props->find(key); p != props->end())
          if (auto err = check_value(*p, value, "'" + key + "'", depth + 1))
            return err;
  }
  if (x.is_array())
    if (auto items = schema.find("items"); items != schema.end())
      for (size_t i = 0; i < x.size(); ++i)
        if (auto err = check_value(*items, x[i], where + "[" + std::to_string(i) + "]", depth + 1))
          return err;
  return std::nullopt;
}

} // namespace

std::optional<std::string> check_tool_arguments(const nlohmann::json& schema,
                                                const nlohmann::json& args) {
  return check_value(schema, args, "the arguments", 0);
}

} // namespace quarry::core
