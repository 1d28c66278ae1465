// URL parsing and reference resolution over libcurl's URL API (CURLU).

#include "quarry/fetch/url.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <curl/curl.h>

#include <memory>
#include <optional>

namespace quarry::fetch {

namespace {

struct curlu_deleter {
  void operator()(CURLU* x) const noexcept {
    curl_url_cleanup(x);
  }
};

using curlu_ptr = std::unique_ptr<CURLU, curlu_deleter>;

// One part of a parsed URL, or nothing when the URL lacks it.
std::optional<std::string> get_part(CURLU* handle, CURLUPart part) {
  char* out = nullptr;
  auto rc = curl_url_get(handle, part, &out, 0);
  std::optional<std::string> result;
  if (rc == CURLUE_OK && out != nullptr)
    result = std::string{out};
  curl_free(out);
  return result;
}

// libcurl's reason, as the end of a sentence.
std::string curl_reason(CURLUcode rc) {
  std::string reason = curl_url_strerror(rc);
  if (!reason.empty())
    reason.front() = sdk::ascii_lower(reason.front());
  return "not a valid URL (" + reason + ")";
}

// What libcurl would refuse with a vague message, or silently accept (bytes
// it passes through unchecked), said clearly; nothing when `text` may go on.
std::optional<std::string> check_text(std::string_view text) {
  if (text.empty())
    return "the URL is empty";
  if (text.size() > max_url_bytes)
    return "the URL is longer than " + std::to_string(max_url_bytes) + " bytes";
  if (auto bad = sdk::first_invalid_utf8(text); bad != text.size())
    return "the URL is not valid UTF-8 (at byte " + std::to_string(bad) + ")";
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c <= 0x20 || c == 0x7F)
      return std::string{"the URL contains "} + (c == ' ' ? "a space" : "a control character")
             + " (at byte " + std::to_string(i) + ")";
  }
  return std::nullopt;
}

// The scheme of an absolute URL or reference (RFC 3986: a letter, then
// letters, digits, `+`, `-` and `.`, before the first `:`), or empty.
std::string_view scheme_of(std::string_view x) noexcept {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (x.empty() || !alpha(x.front()))
    return {};
  for (size_t i = 1; i < x.size(); ++i) {
    auto c = x[i];
    if (c == ':')
      return x.substr(0, i);
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.')
      return {};
  }
  return {};
}

// The parts of the URL in `handle`.
url_result from_handle(CURLU* handle) {
  url out;
  out.scheme = sdk::to_lower(get_part(handle, CURLUPART_SCHEME).value_or(""));
  out.has_userinfo = get_part(handle, CURLUPART_USER).has_value()
                     || get_part(handle, CURLUPART_PASSWORD).has_value();
  auto host = get_part(handle, CURLUPART_HOST).value_or("");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  while (!host.empty() && host.back() == '.')
    host.pop_back();
  out.host = sdk::to_lower(host);
  out.port = get_part(handle, CURLUPART_PORT).value_or("");
  out.path = get_part(handle, CURLUPART_PATH).value_or("/");
  if (out.path.empty())
    out.path = "/";
  if (auto query = get_part(handle, CURLUPART_QUERY)) {
    out.has_query = true;
    out.query = std::move(*query);
  }
  out.fragment = get_part(handle, CURLUPART_FRAGMENT).value_or("");
  out.text = get_part(handle, CURLUPART_URL).value_or("");
  if (out.scheme.empty() || out.text.empty())
    return std::string{"not a valid URL"};
  if (out.host.empty() && out.scheme != "file")
    return std::string{"the URL has no host"};
  return out;
}

// Parses `text` (already checked) into a fresh handle.
url_result parse_checked(std::string_view text) {
  auto scheme = scheme_of(text);
  if (scheme.empty())
    return std::string{"not an absolute URL (no scheme)"};
  auto lower_scheme = sdk::to_lower(scheme);
  auto rest = text.substr(scheme.size() + 1);
  // libcurl reads `http:///x` as `http://x/`; an empty authority names no
  // host (only file URLs may have one).
  if (!sdk::starts_with(rest, "//"))
    return "not an absolute URL (no // after " + lower_scheme + ":)";
  auto authority = rest.substr(2);
  if (lower_scheme != "file"
      && (authority.empty() || authority.front() == '/' || authority.front() == '?'
          || authority.front() == '#'))
    return std::string{"the URL has no host"};
  curlu_ptr handle{curl_url()};
  if (!handle)
    return std::string{"out of memory"};
  auto rc = curl_url_set(handle.get(), CURLUPART_URL, std::string{text}.c_str(),
                         CURLU_NON_SUPPORT_SCHEME);
  if (rc != CURLUE_OK)
    return curl_reason(rc);
  return from_handle(handle.get());
}

} // namespace

std::string url::path_and_query() const {
  return has_query ? path + "?" + query : path;
}

std::string url::origin() const {
  auto p = port;
  if (p.empty()) {
    if (scheme == "http" || scheme == "ws")
      p = "80";
    else if (scheme == "https" || scheme == "wss")
      p = "443";
  }
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + (p.empty() ? "" : ":" + p);
}

std::string url::redacted() const {
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + (port.empty() ? "" : ":" + port) + path;
}

std::string url::without_fragment() const {
  return text.substr(0, text.find('#'));
}

url_result parse_url(std::string_view text) {
  if (auto err = check_text(text))
    return std::move(*err);
  return parse_checked(text);
}

url_result resolve_url(std::string_view base, std::string_view ref) {
  auto parsed_base = parse_url(base);
  if (auto* err = std::get_if<std::string>(&parsed_base))
    return "the base URL: " + *err;
  const auto& b = std::get<url>(parsed_base);
  // libcurl 7.88 drops the last path segment of the base for an empty
  // reference and for a fragment alone; RFC 3986 keeps the whole base.
  if (ref.empty())
    return parse_checked(b.without_fragment());
  if (auto err = check_text(ref))
    return std::move(*err);
  if (ref.front() == '#')
    return parse_checked(b.without_fragment() + std::string{ref});
  // A reference with a scheme is absolute: it stands alone.
  if (!scheme_of(ref).empty())
    return parse_checked(ref);
  curlu_ptr handle{curl_url()};
  if (!handle)
    return std::string{"out of memory"};
  auto rc = curl_url_set(handle.get(), CURLUPART_URL, b.text.c_str(), CURLU_NON_SUPPORT_SCHEME);
  if (rc == CURLUE_OK)
    rc = curl_url_set(handle.get(), CURLUPART_URL, std::string{ref}.c_str(),
                      CURLU_NON_SUPPORT_SCHEME);
  if (rc != CURLUE_OK)
    return curl_reason(rc);
  return from_handle(handle.get());
}

bool is_http_url(std::string_view x) {
  auto parsed = parse_url(x);
  auto* u = std::get_if<url>(&parsed);
  return u != nullptr && (u->scheme == "http" || u->scheme == "https");
}

std::string redact_url(std::string_view x) {
  auto parsed = parse_url(x);
  if (auto* u = std::get_if<url>(&parsed))
    return u->redacted();
  return "(an invalid URL)";
}

} // namespace quarry::fetch
