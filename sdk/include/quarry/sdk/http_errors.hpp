// This file is part of the Quarry plugin SDK.
// Shared rules for turning HTTP failures of remote APIs into classified
// errors: status codes, Retry-After headers, and retry hints.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/types.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::sdk {

/// Maps an HTTP status of an API response to an error class. Providers refine
/// the result with what the body says (e.g. `insufficient_quota` is a 429
/// that must become errc::quota, `context_length_exceeded` a 400 that must
/// become errc::context_too_long).
inline errc classify_http_status(int status) noexcept {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return errc::bad_request;
    case 401:
    case 403:
      return errc::auth;
    case 402:
      return errc::quota;
    case 404:
      return errc::not_found;
    case 408:
      return errc::timeout;
    case 409:
    case 425:
      return errc::server_error;
    case 429:
      return errc::rate_limited;
    case 503:
    case 529:
      return errc::overloaded;
    default:
      return status >= 500 ? errc::server_error : errc::bad_request;
  }
}

/// Parses a duration hint such as `6ms`, `26.604s`, `1m30s` or `975ms` (the
/// formats of OpenAI's x-ratelimit-reset-* headers and error messages) into
/// milliseconds.
inline std::optional<int64_t> parse_duration_hint(std::string_view x) {
  double total = 0;
  bool any = false;
  size_t i = 0;
  while (i < x.size()) {
    size_t start = i;
    while (i < x.size() && (std::isdigit(static_cast<unsigned char>(x[i])) || x[i] == '.'))
      ++i;
    if (start == i)
      return std::nullopt;
    double value = 0;
    try {
      value = std::stod(std::string{x.substr(start, i - start)});
    } catch (...) {
      return std::nullopt;
    }
    size_t unit_start = i;
    while (i < x.size() && std::isalpha(static_cast<unsigned char>(x[i])))
      ++i;
    auto unit = x.substr(unit_start, i - unit_start);
    if (unit == "ms")
      total += value;
    else if (unit == "s" || unit.empty())
      total += value * 1000;
    else if (unit == "m")
      total += value * 60000;
    else if (unit == "h")
      total += value * 3600000;
    else
      return std::nullopt;
    any = true;
  }
  if (!any || !(total >= 0))
    return std::nullopt;
  // A hint beyond a day is not a hint; clamp instead of overflowing.
  constexpr double max_ms = 86400000.0;
  return static_cast<int64_t>(std::min(total, max_ms) + 0.5);
}

/// Reads how long the server wants us to wait from the response headers:
/// `retry-after-ms` (milliseconds), then `Retry-After` as seconds or as an
/// HTTP date (relative to `now`). Returns nothing if neither is present or
/// parseable.
inline std::optional<int64_t> retry_after_ms(const http_headers& headers,
                                             std::time_t now = std::time(nullptr)) {
  if (auto ms = find_header(headers, "retry-after-ms")) {
    try {
      auto value = std::stod(*ms);
      if (value >= 0)
        return static_cast<int64_t>(value);
    } catch (...) {
      // fall through
    }
  }
  auto ra = find_header(headers, "retry-after");
  if (!ra)
    return std::nullopt;
  try {
    size_t used = 0;
    auto secs = std::stod(*ra, &used);
    if (used > 0 && secs >= 0)
      return static_cast<int64_t>(std::min(secs, 86400.0) * 1000);
  } catch (...) {
    // not a number: try an HTTP date
  }
  std::tm tm{};
  if (strptime(ra->c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm) != nullptr) {
    auto when = timegm(&tm);
    auto diff = static_cast<int64_t>(when - now);
    return diff > 0 ? diff * 1000 : 0;
  }
  return std::nullopt;
}

/// Returns the `x-should-retry` header's verdict, if the server sent one.
inline std::optional<bool> should_retry_header(const http_headers& headers) {
  auto x = find_header(headers, "x-should-retry");
  if (!x)
    return std::nullopt;
  if (*x == "true")
    return true;
  if (*x == "false")
    return false;
  return std::nullopt;
}

/// The cause an error message states, when it proves one that no retry can
/// cure: the prompt is longer than the context window, the account has no
/// quota or credit, the model does not exist, or the credentials are wrong.
/// Gateways (OpenRouter, LiteLLM, Azure) relay such upstream errors inside
/// a 5xx code or a 200 envelope; the stated cause wins over that code.
/// `message` is matched case-insensitively against phrases of the major
/// APIs and servers (OpenAI, Anthropic, Gemini, DeepSeek, vLLM, llama.cpp,
/// Ollama, OpenRouter, LiteLLM).
inline std::optional<errc> cause_in_message(std::string_view message) {
  auto msg = to_lower(message);
  auto any = [&msg](std::initializer_list<std::string_view> phrases) {
    for (auto x : phrases)
      if (contains(msg, x))
        return true;
    return false;
  };
  if (any({"maximum context length", "context_length_exceeded", "context window", "context length",
           "exceeds the available context size", "exceed_context_size",
           "exceeds the maximum number of tokens", "prompt is too long",
           "too many tokens in the prompt", "input is too long", "prompt too long",
           "reduce the length of the messages", "maximum prompt length",
           "requested tokens exceed"}))
    return errc::context_too_long;
  if (any({"insufficient_quota", "exceeded your current quota", "insufficient credits",
           "insufficient balance", "credit balance is too low", "billing_hard_limit",
           "out of credits", "payment required", "quota exceeded for"}))
    return errc::quota;
  if (any({"model_not_found", "model not found", "no such model", "unknown model",
           "is not a valid model", "model does not exist", "no endpoints found for"})
      || (contains(msg, "model") && contains(msg, "does not exist")))
    return errc::not_found;
  if (any({"invalid api key", "incorrect api key", "invalid_api_key", "invalid x-api-key",
           "no auth credentials", "missing authentication", "api key not valid",
           "authentication_error", "invalid authentication"}))
    return errc::auth;
  return std::nullopt;
}

} // namespace quarry::sdk
