// Classification of Anthropic API errors.

#include "anthropic_errors.hpp"

#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace quarry::plugins::llm_anthropic {

namespace {

// Longest piece of a non-JSON body quoted in an error message.
constexpr size_t max_quoted_body = 200;

// Longest piece of a gateway's relayed upstream error (`metadata.raw`)
// added to the message.
constexpr size_t max_quoted_raw = 500;

bool contains_icase(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size())
    return false;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i)
    if (sdk::iequals(haystack.substr(i, needle.size()), needle))
      return true;
  return false;
}

// Anthropic's own phrasings of a prompt that does not fit (besides the
// SDK's list): "input length and `max_tokens` exceed context limit".
bool says_prompt_too_long(std::string_view message) {
  return contains_icase(message, "exceed context limit");
}

// The class a message proves, whatever type or status wrap it.
std::optional<sdk::errc> proven_cause(std::string_view message) {
  if (auto cause = sdk::cause_in_message(message))
    return cause;
  if (says_prompt_too_long(message))
    return sdk::errc::context_too_long;
  return std::nullopt;
}

// Returns the member `key` of `x` as text: a string as is, a number or
// another value as JSON; empty if absent or null.
std::string member_text(const nlohmann::json& x, const char* key) {
  auto i = x.find(key);
  if (i == x.end() || i->is_null())
    return {};
  if (i->is_string())
    return i->get<std::string>();
  return sdk::dump_json(*i);
}

} // namespace

sdk::errc classify_error_type(std::string_view type, std::string_view message, int http_status) {
  // What the message proves wins over a wrapper's type or status (a relayed
  // 5xx, `overloaded_error` or `api_error` around "prompt is too long").
  if (auto cause = proven_cause(message))
    return *cause;
  if (auto cause = proven_cause(type)) // e.g. `context_length_exceeded`
    return *cause;
  if (type == "overloaded_error")
    return sdk::errc::overloaded;
  if (type == "rate_limit_error")
    return sdk::errc::rate_limited;
  if (type == "api_error")
    return sdk::errc::server_error;
  if (type == "invalid_request_error")
    return sdk::errc::bad_request;
  if (type == "authentication_error" || type == "permission_error")
    return sdk::errc::auth;
  if (type == "not_found_error")
    return sdk::errc::not_found;
  if (type == "request_too_large")
    return sdk::errc::bad_request;
  if (type == "billing_error")
    return sdk::errc::quota;
  if (type == "timeout_error")
    return sdk::errc::timeout;
  if (http_status != 0)
    return sdk::classify_http_status(http_status);
  return sdk::errc::server_error;
}

sdk::error classify_error_body(std::string_view body, int http_status) {
  auto parsed = sdk::parse_json(body);
  if (parsed.is_object()) {
    auto i = parsed.find("error");
    if (i != parsed.end() && (i->is_object() || i->is_string())) {
      std::string type;
      std::string message;
      // A status relayed inside the body (`"code": 502` of a gateway), used
      // when the transport's status says nothing (HTTP 200 or mid-stream).
      int relayed = 0;
      if (i->is_string()) {
        message = i->get<std::string>();
      } else {
        const auto& err = *i;
        type = member_text(err, "type");
        message = member_text(err, "message");
        if (auto c = err.find("code"); c != err.end() && c->is_number_integer()) {
          auto n = c->get<int64_t>();
          if (n >= 400 && n <= 599)
            relayed = static_cast<int>(n);
        } else if (type.empty()) {
          type = member_text(err, "code"); // e.g. `context_length_exceeded`
        }
        // OpenRouter relays the upstream's own error as `metadata.raw`.
        if (auto m = err.find("metadata"); m != err.end() && m->is_object()) {
          auto raw = member_text(*m, "raw");
          if (!raw.empty()) {
            if (!message.empty())
              message += " ";
            message += "(upstream: ";
            message += sdk::utf8_prefix(raw, max_quoted_raw);
            message += ")";
          }
        }
      }
      auto status = http_status != 0 && http_status != 200 ? http_status : relayed;
      auto code = classify_error_type(type, message, status);
      std::string text = "anthropic: ";
      text += type.empty() ? std::string{"error"} : type;
      if (!message.empty()) {
        text += ": ";
        text += message;
      }
      if (auto id = parsed.find("request_id"); id != parsed.end() && id->is_string())
        text += " (request " + id->get<std::string>() + ")";
      return sdk::make_error(code, sdk::repair_utf8(text), http_status);
    }
  }
  auto code = http_status != 0 ? sdk::classify_http_status(http_status)
                               : sdk::errc::invalid_response;
  // An HTML or text error page may still say what went wrong.
  if (auto cause = proven_cause(sdk::utf8_prefix(body, max_quoted_body)))
    code = *cause;
  std::string text = "anthropic: unexpected error body";
  if (!body.empty()) {
    text += ": ";
    text += sdk::repair_utf8(sdk::utf8_prefix(body, max_quoted_body));
  }
  return sdk::make_error(code, std::move(text), http_status);
}

sdk::error classify_http_error(int http_status, const sdk::http_headers& headers,
                               std::string_view body) {
  auto result = classify_error_body(body, http_status);
  result.retry_after_ms = sdk::retry_after_ms(headers);
  result.retry_hint = sdk::should_retry_header(headers);
  if (proven_cause(result.message)) {
    // The message proves a cause no retry cures: it wins over the status
    // and over the server's retry hint.
    result.retry_hint = false;
    return result;
  }
  // A 529 or 429 is what it says even if the body disagrees or is missing.
  if (http_status == 529)
    result.code = sdk::errc::overloaded;
  else if (http_status == 429 && result.code != sdk::errc::quota)
    result.code = sdk::errc::rate_limited;
  return result;
}

} // namespace quarry::plugins::llm_anthropic
