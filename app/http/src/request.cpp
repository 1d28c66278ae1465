// Requests, responses and their helpers (no Beast here).

#include "quarry/http/server.hpp"

#include "detail.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

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
      auto raw_value = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
      if (!percent_decode(raw_name, true, name) || !percent_decode(raw_value, true, value))
        return std::string{"the query has an invalid percent escape"};
      if (!valid_utf8(name) || !valid_utf8(value))
        return std::string{"the query is not valid UTF-8"};
      if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos)
        return std::string{"the query contains NUL"};
      result.query.emplace(name, value); // the first value wins
    }
    if (amp >= raw_query.size())
      break;
  }
  return result;
}

bool is_token(std::string_view text) noexcept {
  if (text.empty())
    return false;
  for (char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      continue;
    if (std::string_view{"!#$%&'*+-.^_`|~"}.find(c) == std::string_view::npos)
      return false;
  }
  return true;
}

namespace {

bool is_ows(char c) noexcept {
  return c == ' ' || c == '\t';
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && is_ows(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back()))
    s.remove_suffix(1);
  return s;
}

// Calls `fn` with each element of a comma-separated list (RFC 9110 section
// 5.6.1), trimmed of OWS; empty elements included.
template <class F>
void for_each_element(std::string_view list, F fn) {
  while (true) {
    auto comma = list.find(',');
    fn(trim_ows(list.substr(0, comma)));
    if (comma == std::string_view::npos)
      return;
    list.remove_prefix(comma + 1);
  }
}

// 1*DIGIT within 64 bits, or nothing.
std::optional<std::uint64_t> parse_decimal(std::string_view s) noexcept {
  if (s.empty())
    return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

// unreserved / sub-delims (RFC 3986 section 2).
bool is_host_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return std::string_view{"-._~!$&'()*+,;="}.find(c) != std::string_view::npos;
}

// Whether `value` is `uri-host [":" port]` (RFC 9110 section 7.2, RFC 3986
// section 3.2.2); an empty value is allowed. An IP literal may hold an IPv6
// address or an IPvFuture.
bool valid_host(std::string_view value) noexcept {
  std::string_view port;
  if (!value.empty() && value.front() == '[') {
    auto close = value.find(']');
    if (close == std::string_view::npos || close == 1)
      return false;
    for (char c : value.substr(1, close - 1))
      if (!is_host_char(c) && c != ':')
        return false;
    auto rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return false;
      port = rest.substr(1);
    }
  } else {
    auto colon = value.find(':');
    auto host = value.substr(0, colon);
    if (colon != std::string_view::npos)
      port = value.substr(colon + 1);
    for (size_t i = 0; i < host.size(); ++i) {
      if (host[i] == '%') {
        if (i + 2 >= host.size() || hex_value(host[i + 1]) < 0 || hex_value(host[i + 2]) < 0)
          return false;
        i += 2;
      } else if (!is_host_char(host[i])) {
        return false;
      }
    }
  }
  for (char c : port)
    if (c < '0' || c > '9')
      return false;
  return true;
}

// At most 64 bytes of a token, for an error message.
std::string shown(std::string_view token) {
  return std::string{token.substr(0, 64)};
}

// The transfer codings of all Transfer-Encoding fields, as one list
// (RFC 9112 section 6.1): chunked exactly once, last, without parameters,
// and nothing else.
std::optional<std::string> check_transfer_codings(const std::vector<std::string_view>& fields) {
  struct coding {
    std::string_view name;
    bool has_parameters = false;
  };
  std::vector<coding> codings;
  std::optional<std::string> error;
  for (auto field : fields) {
    for_each_element(field, [&](std::string_view element) {
      if (element.empty() || error)
        return; // empty list elements are allowed (RFC 9110 section 5.6.1)
      auto semicolon = element.find(';');
      coding c{trim_ows(element.substr(0, semicolon)), semicolon != std::string_view::npos};
      if (!is_token(c.name))
        error = "invalid Transfer-Encoding (RFC 9112 section 6.1)";
      codings.push_back(c);
    });
  }
  if (error)
    return error;
  if (codings.empty())
    return "Transfer-Encoding names no transfer coding (RFC 9112 section 6.1)";
  if (!iequals(codings.back().name, "chunked"))
    return "the final transfer coding must be chunked, not '" + shown(codings.back().name)
           + "' (RFC 9112 section 6.3)";
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (iequals(codings[i].name, "chunked"))
      return std::string{"chunked is applied more than once (RFC 9112 section 6.1)"};
  }
  if (codings.size() > 1)
    return "unsupported transfer coding '" + shown(codings.front().name)
           + "': only chunked is accepted (RFC 9112 section 6.1)";
  if (codings.back().has_parameters)
    return std::string{"the chunked transfer coding takes no parameters (RFC 9112 section 7)"};
  return std::nullopt;
}

} // namespace

std::optional<authority> parse_authority(std::string_view text) {
  if (text.empty() || !valid_host(text))
    return std::nullopt;
  authority out;
  std::string_view host = text;
  std::string_view port;
  if (text.front() == '[') {
    auto close = text.find(']');
    host = text.substr(0, close + 1);
    if (close + 1 < text.size())
      port = text.substr(close + 2);
  } else if (auto colon = text.find(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || (host.front() != '[' && host.find(':') != std::string_view::npos))
    return std::nullopt;
  if (!port.empty()) {
    auto v = parse_decimal(port);
    if (!v || *v > 65535)
      return std::nullopt;
    out.port = static_cast<std::uint16_t>(*v);
  }
  out.host.reserve(host.size());
  for (char c : host)
    out.host.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  return out;
}

std::optional<origin> parse_origin(std::string_view text) {
  auto sep = text.find("://");
  if (sep == std::string_view::npos)
    return std::nullopt;
  origin out;
  auto scheme = text.substr(0, sep);
  if (iequals(scheme, "http"))
    out.scheme = "http";
  else if (iequals(scheme, "https"))
    out.scheme = "https";
  else
    return std::nullopt;
  auto rest = text.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/')
    rest.remove_suffix(1);
  // parse_authority refuses a path, query, fragment or user info (`/`,
  // `?`, `#` and `@` are not host characters).
  auto at = parse_authority(rest);
  if (!at)
    return std::nullopt;
  out.at = std::move(*at);
  if (!out.at.port)
    out.at.port = out.scheme == "http" ? 80 : 443;
  return out;
}

std::variant<request_framing, std::string> check_request_head(std::string_view head,
                                                              unsigned version) {
  auto fail = [](std::string message) {
    return std::variant<request_framing, std::string>{std::move(message)};
  };
  // Empty lines before the request line are ignored (RFC 9112 section 2.2).
  while (head.substr(0, 2) == "\r\n")
    head.remove_prefix(2);
  auto eol = head.find("\r\n");
  if (eol == std::string_view::npos)
    return fail("the request head is incomplete");
  head.remove_prefix(eol + 2);

  std::vector<std::string_view> transfer_encodings;
  std::vector<std::string_view> content_lengths;
  std::vector<std::string_view> hosts;
  for (bool first = true;; first = false) {
    eol = head.find("\r\n");
    if (eol == std::string_view::npos)
      return fail("the request head is incomplete");
    auto line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.empty())
      break;
    if (is_ows(line.front()))
      return fail(first ? "whitespace between the request line and the first header field "
                          "(RFC 9112 section 2.2)"
                        : "a header line starts with whitespace: obsolete line folding "
                          "(RFC 9112 section 5.2)");
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      return fail("a header line has no colon (RFC 9112 section 5)");
    auto name = line.substr(0, colon);
    if (!name.empty() && is_ows(name.back()))
      return fail("whitespace between a header field name and its colon "
                  "(RFC 9112 section 5.1)");
    if (!is_token(name))
      return fail("a header field name is not a token (RFC 9110 section 5.1)");
    auto value = trim_ows(line.substr(colon + 1));
    if (iequals(name, "Transfer-Encoding"))
      transfer_encodings.push_back(value);
    else if (iequals(name, "Content-Length"))
      content_lengths.push_back(value);
    else if (iequals(name, "Host"))
      hosts.push_back(value);
  }

  if (hosts.size() > 1)
    return fail("more than one Host header field (RFC 9112 section 3.2)");
  if (hosts.empty() && version >= 11)
    return fail("an HTTP/1.1 request needs a Host header field (RFC 9112 section 3.2)");
  if (!hosts.empty() && !valid_host(hosts.front()))
    return fail("the Host header field is not a host and port (RFC 9112 section 3.2)");

  if (!transfer_encodings.empty()) {
    if (version < 11)
      return fail("Transfer-Encoding in an HTTP/1.0 request (RFC 9112 section 6.1)");
    if (!content_lengths.empty())
      return fail("both Transfer-Encoding and Content-Length (RFC 9112 section 6.1)");
    if (auto error = check_transfer_codings(transfer_encodings))
      return fail(std::move(*error));
    return request_framing{body_framing::chunked, 0};
  }

  if (!content_lengths.empty()) {
    std::optional<std::uint64_t> length;
    std::optional<std::string> error;
    for (auto field : content_lengths) {
      for_each_element(field, [&](std::string_view element) {
        if (error)
          return;
        auto v = parse_decimal(element);
        if (!v)
          error = "invalid Content-Length '" + shown(element) + "' (RFC 9112 section 6.3)";
        else if (length && *length != *v)
          error = std::string{"Content-Length values differ (RFC 9112 section 6.3)"};
        else
          length = v;
      });
    }
    if (error)
      return fail(std::move(*error));
    return request_framing{body_framing::content_length, *length};
  }
  return request_framing{};
}

} // namespace detail

std::optional<std::string_view> request::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (detail::iequals(key, name))
      return std::string_view{value};
  return std::nullopt;
}

std::optional<std::string_view> request::query_param(std::string_view name) const {
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
