// Robust parsing of tool-call arguments.

#include "quarry/core/tool_args.hpp"

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
      auto parsed = nlohmann::json::parse(text, nullptr, false);
      if (!parsed.is_discarded())
        value = std::move(parsed);
    }
  }
}

} // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) {
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = 0;
    if (ok) {
      cp = c & (0x7f >> len);
      for (size_t k = 1; k < len && ok; ++k) {
        auto d = static_cast<unsigned char>(s[i + k]);
        ok = (d & 0xc0) == 0x80;
        cp = cp << 6 | (d & 0x3f);
      }
    }
    // Overlong forms, surrogates and values above U+10FFFF are invalid.
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
               || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
      ok = false;
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::variant<nlohmann::json, std::string>
parse_tool_arguments(std::string_view text) {
  auto clean = sanitize_utf8(text);
  auto body = unfence(clean);
  if (body.empty())
    return nlohmann::json::object();
  auto j = nlohmann::json::parse(body, nullptr, false);
  // Some models double-encode: a JSON string that holds the object.
  for (int depth = 0; depth < 2 && !j.is_discarded() && j.is_string(); ++depth)
    j = nlohmann::json::parse(j.get<std::string>(), nullptr, false);
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
