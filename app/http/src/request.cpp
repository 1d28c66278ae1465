// Requests, responses and their helpers (no Beast here).

#include "quarry/http/server.hpp"

#include "detail.hpp"

#include <algorithm>

namespace quarry::http {

namespace detail {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = static_cast<unsigned char>(a[i]);
    auto y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z')
      x = static_cast<unsigned char>(x + 32);
    if (y >= 'A' && y <= 'Z')
      y = static_cast<unsigned char>(y + 32);
    if (x != y)
      return false;
  }
  return true;
}

bool valid_utf8(std::string_view text) noexcept {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0u) != 0x80u)
        return false;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF
        || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` (and `+` as a space if `plus_space`); false on a bad
// escape.
bool percent_decode(std::string_view in, bool plus_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size())
        return false;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0)
        return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

} // namespace

std::variant<parsed_target, std::string> parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/')
    return std::string{"the request target must be a path starting with '/'"};
  if (auto hash = target.find('#'); hash != std::string_view::npos)
    target = target.substr(0, hash);
  std::string_view raw_path = target;
  std::string_view raw_query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    raw_path = target.substr(0, q);
    raw_query = target.substr(q + 1);
  }
  parsed_target result;
  if (!percent_decode(raw_path, false, result.path))
    return std::string{"the path has an invalid percent escape"};
  if (result.path.find('\0') != std::string::npos)
    return std::string{"the path contains NUL"};
  if (!valid_utf8(result.path))
    return std::string{"the path is not valid UTF-8"};
  // Segments `.` and `..` (also after decoding, and with backslashes as
  // separators, as some file systems read them).
  size_t start = 1;
  const auto& p = result.path;
  while (start <= p.size()) {
    size_t end = p.find_first_of("/\\", start);
    if (end == std::string::npos)
      end = p.size();
    auto seg = std::string_view{p}.substr(start, end - start);
    if (seg == "." || seg == "..")
      return std::string{"the path must not contain '.' or '..' segments"};
    start = end + 1;
  }
  std::string name;
  std::string value;
  size_t pos = 0;
  while (pos <= raw_query.size() && !raw_query.empty()) {
    size_t amp = raw_query.find('&', pos);
    if (amp == std::string_view::npos)
      amp = raw_query.size();
    auto pair = raw_query.substr(pos, amp - pos);
    pos = amp + 1;
    if (!pair.empty()) {
      auto eq = pair.find('=');
      auto raw_name = pair.substr(0, eq);
      auto raw_value = eq == std::string_view::npos ? std::string_view{}
                                                    : pair.substr(eq + 1);
      if (!percent_decode(raw_name, true, name)
          || !percent_decode(raw_value, true, value))
        return std::string{"the query has an invalid percent escape"};
      if (!valid_utf8(name) || !valid_utf8(value))
        return std::string{"the query is not valid UTF-8"};
      if (name.find('\0') != std::string::npos
          || value.find('\0') != std::string::npos)
        return std::string{"the query contains NUL"};
      result.query.emplace(name, value); // the first value wins
    }
    if (amp >= raw_query.size())
      break;
  }
  return result;
}

} // namespace detail

std::optional<std::string_view> request::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (detail::iequals(key, name))
      return std::string_view{value};
  return std::nullopt;
}

std::optional<std::string_view>
request::query_param(std::string_view name) const {
  auto i = query.find(std::string{name});
  if (i == query.end())
    return std::nullopt;
  return std::string_view{i->second};
}

std::string_view request::param(std::string_view name) const {
  auto i = params.find(std::string{name});
  if (i == params.end())
    return {};
  return i->second;
}

response json_response(int status, const nlohmann::json& json) {
  response res;
  res.status = status;
  res.content_type = "application/json";
  res.body = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return res;
}

response json_error(int status, std::string_view code, std::string_view message) {
  nlohmann::json body = {
    {"error", {{"code", std::string{code}}, {"message", std::string{message}}}}};
  return json_response(status, body);
}

bool constant_time_equals(std::string_view a, std::string_view b) noexcept {
  // Runs over the longer length whatever the contents; the lengths differ
  // only when the token is wrong anyway.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0u;
    auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0u;
    diff |= x ^ y;
  }
  // Keeps the compiler from ending the loop early.
  volatile unsigned sink = diff;
  return sink == 0;
}

} // namespace quarry::http
