// URLs: parsing absolute URLs and resolving references (RFC 3986) with
// libcurl's URL API, for the fetcher, the SSRF policy, the HTTP client,
// content extraction and open_url. Everything here takes hostile text: every
// input is bounded and every failure is a message, never a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace quarry::fetch {

/// Longest URL (or reference) accepted, in bytes.
inline constexpr size_t max_url_bytes = 16 * 1024;

/// An absolute URL split into its parts.
struct url {
  /// Lower-case scheme without `:`, e.g. `https`.
  std::string scheme;
  /// Whether the URL names a user (or a password) before the host.
  bool has_userinfo = false;
  /// Host with ASCII letters lower-cased, trailing dots removed and IPv6
  /// literals without brackets (`::1`). Internationalised names stay in
  /// UTF-8. Empty for `file:` URLs.
  std::string host;
  /// The port as written (digits), or empty.
  std::string port;
  /// The path, at least `/` (percent-encoding kept as written).
  std::string path;
  /// The query without `?`; see @ref has_query.
  std::string query;
  /// Whether the URL has a `?` (possibly with an empty query).
  bool has_query = false;
  /// The fragment without `#`, or empty.
  std::string fragment;
  /// The whole URL, normalised by libcurl (scheme lower case, `.` and `..`
  /// segments removed, an empty path written as `/`).
  std::string text;

  /// The path and the query, e.g. `/a/b.pdf?x=1`.
  std::string path_and_query() const;

  /// `scheme://host:port` with the scheme's default port filled in, all
  /// lower case (the origin that credentials belong to).
  std::string origin() const;

  /// The URL without user name, password, query and fragment: safe to show
  /// in a log line or an error message.
  std::string redacted() const;

  /// @ref text without the fragment.
  std::string without_fragment() const;
};

/// A parsed URL, or why the text is not one (a message for the user).
using url_result = std::variant<url, std::string>;

/// Parses an absolute URL with an authority (`scheme://host/...`, or
/// `file:///path`). Refuses, with a message, text over @ref max_url_bytes,
/// invalid UTF-8, spaces and control characters, a missing scheme or host,
/// a port outside 0-65535 and whatever else libcurl refuses. Leading and
/// trailing whitespace is not trimmed (that is the caller's choice).
url_result parse_url(std::string_view text);

/// Resolves the reference `ref` against the absolute URL `base` as RFC 3986
/// section 5 says (`g`, `../g`, `?y`, `#s`, `//g`, `/g`; an absolute `ref`
/// stands alone). Two differences from the RFC, both from libcurl: a
/// reference with a scheme but no authority (`g:h`, `http:g`) is refused,
/// and an empty path after an authority becomes `/` (`//g` gives `http://g/`,
/// which RFC 3986 section 6.2.3 calls equivalent).
url_result resolve_url(std::string_view base, std::string_view ref);

/// Whether `x` parses as an `http` or `https` URL.
bool is_http_url(std::string_view x);

/// `x` redacted (see @ref url::redacted) when it parses; otherwise a
/// placeholder that names no part of it (it might hold a password).
std::string redact_url(std::string_view x);

} // namespace quarry::fetch
