// Parsing and formatting of durations and byte sizes (see duration.hpp).

#include "quarry/core/duration.hpp"
#include "quarry/sdk/strings.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace quarry::core {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// A non-negative decimal number split into its integer digits and fraction
// digits, as read from the front of some text.
struct decimal {
  std::string_view whole;
  std::string_view fraction;
};

// Reads `digits[.digits]` (at least one digit overall) from the front of `x`
// and removes it from `x`.
std::optional<decimal> read_decimal(std::string_view& x) {
  size_t i = 0;
  while (i < x.size() && is_digit(x[i]))
    ++i;
  decimal result;
  result.whole = x.substr(0, i);
  if (i < x.size() && x[i] == '.') {
    auto start = ++i;
    while (i < x.size() && is_digit(x[i]))
      ++i;
    result.fraction = x.substr(start, i - start);
  }
  if (result.whole.empty() && result.fraction.empty())
    return std::nullopt;
  x.remove_prefix(i);
  return result;
}

// Returns `value * unit` if it is a whole number that fits into int64_t.
std::optional<int64_t> scale(const decimal& value, int64_t unit) {
  int64_t whole = 0;
  for (auto c : value.whole) {
    if (__builtin_mul_overflow(whole, int64_t{10}, &whole)
        || __builtin_add_overflow(whole, int64_t{c - '0'}, &whole))
      return std::nullopt;
  }
  int64_t result = 0;
  if (__builtin_mul_overflow(whole, unit, &result))
    return std::nullopt;
  // The fraction contributes fraction_digits * unit / 10^n; it must be whole.
  // Trailing zeros change nothing, so drop them first.
  auto fraction = value.fraction;
  while (!fraction.empty() && fraction.back() == '0')
    fraction.remove_suffix(1);
  if (fraction.empty())
    return result;
  // Any unit we use is below 10^13, so more than 13 significant fraction
  // digits can never give a whole number.
  if (fraction.size() > 13)
    return std::nullopt;
  int64_t digits = 0;
  int64_t divisor = 1;
  for (auto c : fraction) {
    digits = digits * 10 + (c - '0');
    divisor *= 10;
  }
  int64_t part = 0;
  if (__builtin_mul_overflow(digits, unit, &part) || part % divisor != 0)
    return std::nullopt;
  if (__builtin_add_overflow(result, part / divisor, &result))
    return std::nullopt;
  return result;
}

} // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto x = sdk::trim(text);
  if (x.empty())
    return std::nullopt;
  int64_t total = 0;
  bool first = true;
  while (!x.empty()) {
    auto number = read_decimal(x);
    if (!number)
      return std::nullopt;
    while (!x.empty() && is_space(x.front()))
      x.remove_prefix(1);
    int64_t unit = 0;
    if (x.empty()) {
      // A bare number is only allowed on its own.
      if (!first)
        return std::nullopt;
      unit = 1000;
    } else if (x.size() >= 2 && lower(x[0]) == 'm' && lower(x[1]) == 's') {
      unit = 1;
      x.remove_prefix(2);
    } else if (lower(x[0]) == 's') {
      unit = 1000;
      x.remove_prefix(1);
    } else if (lower(x[0]) == 'm') {
      unit = 60 * 1000;
      x.remove_prefix(1);
    } else if (lower(x[0]) == 'h') {
      unit = 60 * 60 * 1000;
      x.remove_prefix(1);
    } else {
      return std::nullopt;
    }
    auto part = scale(*number, unit);
    if (!part || __builtin_add_overflow(total, *part, &total))
      return std::nullopt;
    while (!x.empty() && is_space(x.front()))
      x.remove_prefix(1);
    first = false;
  }
  return std::chrono::milliseconds{total};
}

std::string format_duration(std::chrono::milliseconds value) {
  auto count = static_cast<int64_t>(value.count());
  if (count == 0)
    return "0s";
  std::string sign;
  uint64_t magnitude = 0;
  if (count < 0) {
    sign = "-";
    magnitude = static_cast<uint64_t>(-(count + 1)) + 1;
  } else {
    magnitude = static_cast<uint64_t>(count);
  }
  static constexpr std::array<std::pair<uint64_t, const char*>, 3> units{{
    {60 * 60 * 1000, "h"},
    {60 * 1000, "m"},
    {1000, "s"},
  }};
  for (const auto& [unit, suffix] : units)
    if (magnitude % unit == 0)
      return sign + std::to_string(magnitude / unit) + suffix;
  return sign + std::to_string(magnitude) + "ms";
}

std::optional<int64_t> parse_size(std::string_view text) {
  auto x = sdk::trim(text);
  auto number = read_decimal(x);
  if (!number)
    return std::nullopt;
  x = sdk::trim(x);
  std::string unit;
  for (auto c : x)
    unit += lower(c);
  int64_t factor = 0;
  if (unit.empty() || unit == "b")
    factor = 1;
  else if (unit == "kb")
    factor = 1000;
  else if (unit == "mb")
    factor = 1000 * 1000;
  else if (unit == "gb")
    factor = 1000 * 1000 * 1000;
  else if (unit == "tb")
    factor = int64_t{1000} * 1000 * 1000 * 1000;
  else if (unit == "kib")
    factor = int64_t{1} << 10;
  else if (unit == "mib")
    factor = int64_t{1} << 20;
  else if (unit == "gib")
    factor = int64_t{1} << 30;
  else if (unit == "tib")
    factor = int64_t{1} << 40;
  else
    return std::nullopt;
  return scale(*number, factor);
}

std::string format_size(int64_t bytes) {
  if (bytes <= 0)
    return std::to_string(bytes);
  static constexpr std::array<std::pair<int64_t, const char*>, 8> units{{
    {int64_t{1} << 40, "TiB"},
    {int64_t{1} << 30, "GiB"},
    {int64_t{1} << 20, "MiB"},
    {int64_t{1} << 10, "KiB"},
    {int64_t{1000} * 1000 * 1000 * 1000, "TB"},
    {int64_t{1000} * 1000 * 1000, "GB"},
    {int64_t{1000} * 1000, "MB"},
    {int64_t{1000}, "KB"},
  }};
  for (const auto& [unit, suffix] : units)
    if (bytes % unit == 0)
      return std::to_string(bytes / unit) + suffix;
  return std::to_string(bytes);
}

} // namespace quarry::core
