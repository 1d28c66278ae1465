// Rendering of the effective configuration: secret redaction and YAML output
// in schema order.

#include "quarry/core/config.hpp"

#include "quarry/core/duration.hpp"
#include "quarry/sdk/strings.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>

namespace quarry::core {

namespace {

using json = nlohmann::json;

constexpr std::string_view redacted_text = "***";

bool is_empty(const json& x) {
  if (x.is_string())
    return x.get_ref<const std::string&>().empty();
  return x.is_null() || (x.is_structured() && x.empty());
}

json* find_path(json& root, std::string_view path) {
  auto* node = &root;
  while (true) {
    if (!node->is_object())
      return nullptr;
    auto dot = path.find('.');
    auto pos = node->find(std::string{path.substr(0, dot)});
    if (pos == node->end())
      return nullptr;
    node = &*pos;
    if (dot == std::string_view::npos)
      return node;
    path.remove_prefix(dot + 1);
  }
}

// Calls `fn` on every non-empty value of a key named like a secret at any
// depth of a plugin's config.
template <class F>
void for_each_instance_secret(json& x, F& fn) {
  if (x.is_object()) {
    for (auto& [key, value] : x.items()) {
      if (is_secret_key_name(key) && !is_empty(value))
        fn(value);
      else
        for_each_instance_secret(value, fn);
    }
  } else if (x.is_array()) {
    for (auto& item : x)
      for_each_instance_secret(item, fn);
  }
}

// Calls `fn` on every non-empty secret of the effective tree `root`.
template <class F>
void for_each_secret(json& root, F fn) {
  for (const auto& key : config_schema()) {
    auto* value = find_path(root, key.path);
    if (value == nullptr)
      continue;
    if (key.secret && !is_empty(*value)) {
      fn(*value);
    } else if (key.type == config_type::instances && value->is_object()) {
      for (auto& [name, instance] : value->items())
        for_each_instance_secret(instance, fn);
    }
  }
}

// Adds every string (and every other scalar, as JSON) in `x` to `out`.
void collect(const json& x, std::vector<std::string>& out) {
  if (x.is_string())
    out.push_back(x.get<std::string>());
  else if (x.is_structured())
    for (const auto& item : x)
      collect(item, out);
  else if (!x.is_null())
    out.push_back(x.dump());
}

// -- YAML output --------------------------------------------------------------

// Returns whether `x` might be read as a number by a YAML reader: it starts
// like a number and uses only characters of decimal, hex, octal and float
// notation (`12`, `1e3`, `0x1F`, `1_000`), but not `10s` or `64MiB`.
bool is_number_like(std::string_view x) {
  auto start = x;
  if (!start.empty() && (start.front() == '-' || start.front() == '+'))
    start.remove_prefix(1);
  if (start.empty())
    return false;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!digit(start.front()) && start.front() != '.')
    return false;
  return std::all_of(x.begin(), x.end(), [&](char c) {
    return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == 'x' || c == 'X'
           || c == 'o' || c == 'O' || c == '.' || c == '_' || c == '+' || c == '-';
  });
}

// Returns whether `x` can be written as a plain YAML scalar and is read back
// as the same string (not as a bool, a number or null).
bool is_plain_safe(std::string_view x) {
  if (x.empty() || x.size() > 200 || is_number_like(x) || x.substr(0, 2) == "..")
    return false;
  std::string low;
  for (auto c : x)
    low += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  static constexpr std::string_view reserved[] = {
    "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan",
  };
  for (auto word : reserved)
    if (low == word)
      return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(x.front()) && x.front() != '_' && x.front() != '/' && x.front() != '.')
    return false;
  if (x.back() == ':')
    return false;
  return std::all_of(x.begin(), x.end(), [&](char c) {
    return alnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '+' || c == '@'
           || c == ':';
  });
}

// Doubles every `$`, so that ${...} substitution gives back `x`.
json escape_dollars(const json& x) {
  if (x.is_string()) {
    const auto& str = x.get_ref<const std::string&>();
    if (str.find('$') == std::string::npos)
      return x;
    std::string result;
    for (auto c : str) {
      result += c;
      if (c == '$')
        result += '$';
    }
    return json(std::move(result));
  }
  if (x.is_array()) {
    auto result = json::array();
    for (const auto& item : x)
      result.push_back(escape_dollars(item));
    return result;
  }
  if (x.is_object()) {
    auto result = json::object();
    for (const auto& [key, value] : x.items())
      result[key] = escape_dollars(value);
    return result;
  }
  return x;
}

// Writes a string: plain if that reads back the same, otherwise double-quoted
// with YAML's escapes (the emitter's).
void emit_string(YAML::Emitter& out, const std::string& x) {
  auto text = sdk::repair_utf8(x);
  if (is_plain_safe(text))
    out << text;
  else
    out << YAML::DoubleQuoted << text;
}

// Writes a value that is not in the schema's order: `$` doubled in strings,
// maps in key order, empty collections as `{}` and `[]`.
void emit_value(YAML::Emitter& out, const json& x) {
  if (x.is_object()) {
    if (x.empty())
      out << YAML::Flow;
    out << YAML::BeginMap;
    for (const auto& [key, value] : x.items()) {
      out << YAML::Key;
      emit_string(out, key);
      out << YAML::Value;
      emit_value(out, value);
    }
    out << YAML::EndMap;
  } else if (x.is_array()) {
    if (x.empty())
      out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const auto& item : x)
      emit_value(out, item);
    out << YAML::EndSeq;
  } else if (x.is_string()) {
    emit_string(out, escape_dollars(x).get<std::string>());
  } else if (x.is_boolean()) {
    out << x.get<bool>();
  } else if (x.is_null()) {
    out << YAML::Null;
  } else {
    // A number as JSON writes it, which YAML reads back as the same number.
    out << x.dump();
  }
}

// Returns the position of `path` in schema order (keys and sections).
size_t schema_rank(const std::string& path) {
  const auto& schema = config_schema();
  for (size_t i = 0; i < schema.size(); ++i) {
    const auto& key = schema[i].path;
    if (key == path
        || (key.size() > path.size() && key.compare(0, path.size(), path) == 0
            && key[path.size()] == '.'))
      return i;
  }
  return schema.size();
}

// What a JSON object in the effective tree is.
enum class map_kind {
  // A section (or the root): keys in schema order.
  section,
  // The value of an `instances` key: instance names.
  instances,
  // One plugin instance: `plugin` first.
  instance,
  // Anything else: alphabetical.
  other,
};

void emit(YAML::Emitter& out, const json& obj, const std::string& path, map_kind kind) {
  std::vector<std::pair<std::string, const json*>> entries;
  for (const auto& [key, value] : obj.items())
    entries.emplace_back(key, &value);
  auto join = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (kind == map_kind::section) {
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
      return schema_rank(join(a.first)) < schema_rank(join(b.first));
    });
  } else if (kind == map_kind::instance) {
    std::stable_partition(entries.begin(), entries.end(),
                          [](const auto& x) { return x.first == "plugin"; });
  }
  out << YAML::BeginMap;
  for (const auto& [key, value] : entries) {
    auto child = join(key);
    out << YAML::Key;
    emit_string(out, key);
    out << YAML::Value;
    if (value->is_object() && !value->empty()) {
      auto child_kind = map_kind::other;
      if (kind == map_kind::section) {
        auto spec = find_config_key(child);
        if (spec != nullptr && spec->type == config_type::instances)
          child_kind = map_kind::instances;
        else if (is_config_section(child))
          child_kind = map_kind::section;
      } else if (kind == map_kind::instances) {
        child_kind = map_kind::instance;
      }
      emit(out, *value, child, child_kind);
      continue;
    }
    // Sizes read better with units; parse_size reads them back.
    auto spec = kind == map_kind::section ? find_config_key(child) : nullptr;
    if (spec != nullptr && spec->type == config_type::size && value->is_number_integer())
      out << format_size(value->get<int64_t>());
    else
      emit_value(out, *value);
  }
  out << YAML::EndMap;
}

} // namespace

nlohmann::json loaded_config::redacted() const {
  auto result = effective;
  for_each_secret(result, [](json& value) { value = redacted_text; });
  return result;
}

std::vector<std::string> loaded_config::secret_values() const {
  std::vector<std::string> result;
  auto tree = effective;
  for_each_secret(tree, [&result](json& value) { collect(value, result); });
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

std::string loaded_config::render_yaml() const {
  auto tree = redacted();
  auto label = source;
  std::replace(label.begin(), label.end(), '\n', ' ');
  std::replace(label.begin(), label.end(), '\r', ' ');
  std::string out;
  out += "# Effective configuration (source: " + label + "); secrets are shown as ***.\n";
  for (const auto& added : environment_defaults)
    out += "# " + added.key + ": added by the embedded defaults: " + added.description + "\n";
  if (!tree.is_object() || tree.empty()) {
    out += "{}\n";
    return out;
  }
  YAML::Emitter yaml;
  emit(yaml, tree, "", map_kind::section);
  // The emitter writes DEL as it is, which Quarry's loader refuses (it is a
  // control character); only quoted scalars can hold it, so escape it there.
  for (auto c : std::string_view{yaml.c_str(), yaml.size()}) {
    if (c == '\x7f')
      out += "\\x7F";
    else
      out += c;
  }
  out += '\n';
  return out;
}

} // namespace quarry::core
