// Internal helpers of quarry_http (not installed).

#pragma once

#include <map>
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

} // namespace quarry::http::detail
