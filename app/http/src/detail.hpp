// Internal helpers of quarry_http (not installed).

#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace quarry::http::detail {

/// A request target split into its decoded path and query.
struct parsed_target {
  std::string path;
  std::map<std::string, std::string> query;
};

/// Splits and decodes an origin-form target (`/path?query`). Returns an
/// error message for anything that is not a clean path: not starting with
/// `/`, bad percent escapes, NUL, invalid UTF-8, `.` or `..` segments.
std::variant<parsed_target, std::string> parse_target(std::string_view target);

/// Whether `text` is valid UTF-8 (no overlongs, no surrogates).
bool valid_utf8(std::string_view text) noexcept;

/// ASCII case-insensitive equality.
bool iequals(std::string_view a, std::string_view b) noexcept;

/// Whether `text` is a token (RFC 9110 section 5.6.2): one or more tchar.
bool is_token(std::string_view text) noexcept;

/// A host and port as a Host field or an origin names them.
struct authority {
  /// The host, ASCII lower-cased; an IP literal keeps its brackets
  /// (`[::1]`).
  std::string host;
  /// The port, if the text had one (`host:` has none).
  std::optional<std::uint16_t> port;
};

/// Parses `uri-host [":" port]` (RFC 9110 section 7.2): a registered name
/// or IPv4 address (host characters and percent escapes) or a bracketed
/// IP literal, and a port of at most 65535. Returns nothing for anything
/// else, an empty host included.
std::optional<authority> parse_authority(std::string_view text);

/// An origin (RFC 6454): scheme, host and port.
struct origin {
  /// `http` or `https`, lower-cased.
  std::string scheme;
  /// The host, and the port with the scheme's default (80, 443) filled in.
  authority at;
};

/// Parses an origin as a browser serializes it, `scheme "://" host [":"
/// port]`, for the schemes http and https; a single trailing `/` is
/// allowed (as written in a configuration). Returns nothing for anything
/// else: `null`, a path, user info, another scheme.
std::optional<origin> parse_origin(std::string_view text);

/// How the body of a request is delimited (RFC 9112 section 6.3).
enum class body_framing {
  /// No body: neither Transfer-Encoding nor Content-Length.
  none,
  /// Exactly `content_length` bytes follow the head.
  content_length,
  /// A chunked body follows the head (`Transfer-Encoding: chunked`).
  chunked,
};

/// The framing of a request head that check_request_head accepted.
struct request_framing {
  body_framing framing = body_framing::none;
  /// The body's length in bytes, for body_framing::content_length.
  std::uint64_t content_length = 0;
};

/// Checks the head of a request as received (`head`: the request line, the
/// field lines and the empty line, each ending in CR LF; Beast has parsed
/// it, so its lines are well formed) against the framing rules of RFC 9112.
/// `version` is the request's HTTP version (10 or 11). Returns the framing,
/// or the reason to answer 400 and close (the bytes after the head cannot be
/// trusted to start a request):
/// - a field line that starts with SP or HTAB: obsolete line folding
///   (section 5.2), or whitespace after the request line (section 2.2);
/// - whitespace between a field name and its colon (section 5.1), a name
///   that is not a token;
/// - an HTTP/1.1 request without Host, or any request with more than one
///   Host, or a Host that is not `uri-host [":" port]` (section 3.2);
/// - Transfer-Encoding in an HTTP/1.0 request (section 6.1);
/// - Transfer-Encoding and Content-Length together (section 6.1);
/// - Transfer-Encoding whose codings (all its fields, as one list) are not
///   exactly `chunked`: no coding, a final coding other than chunked
///   (section 6.3), chunked more than once (section 6.1), any other coding
///   (the server decodes none), chunked with parameters (section 7);
/// - Content-Length values (repeated fields or a list) that are not all
///   the same, or one that is not 1*DIGIT within 64 bits (section 6.3,
///   RFC 9110 section 8.6).
std::variant<request_framing, std::string> check_request_head(std::string_view head,
                                                              unsigned version);

} // namespace quarry::http::detail
