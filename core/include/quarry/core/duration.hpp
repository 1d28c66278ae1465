// Parsing and formatting of the human-friendly units used in configuration:
// durations ("500ms", "10s", "2m", "1h30m") and byte sizes ("64MiB", "1GB").

#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::core {

/// Parses a duration. The text is one or more `<number><unit>` parts, where
/// the unit is `ms`, `s`, `m` or `h` and the number is a non-negative decimal
/// (`1.5s`); parts add up (`1h30m`). A bare number means seconds (`10` is ten
/// seconds, `0.25` is 250 milliseconds). Whitespace around the text and
/// between a number and its unit is ignored. Returns `std::nullopt` for
/// anything else, for negative values, for values that are not a whole number
/// of milliseconds and for values that do not fit.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// Formats a duration with the largest unit that represents it exactly, e.g.
/// `5000ms` -> `"5s"`, `90000ms` -> `"90s"`, `1500ms` -> `"1500ms"`,
/// `0ms` -> `"0s"`. The result always parses back to the same value.
std::string format_duration(std::chrono::milliseconds value);

/// Parses a size in bytes: a non-negative number, optionally followed by a
/// unit: `B`, decimal `KB`, `MB`, `GB`, `TB` (powers of 1000) or binary
/// `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024). Units are case-insensitive;
/// a bare number means bytes. Fractions are allowed if the result is a whole
/// number of bytes (`1.5KiB` is 1536). Returns `std::nullopt` for anything
/// else and for values that do not fit into int64_t.
std::optional<int64_t> parse_size(std::string_view text);

/// Formats a size with the largest binary unit that represents it exactly
/// (`67108864` -> `"64MiB"`), else the largest decimal unit (`"2MB"`), else
/// as bytes (`"1000001"`). For non-negative sizes the result always parses
/// back to the same value.
std::string format_size(int64_t bytes);

} // namespace quarry::core
