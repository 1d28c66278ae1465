// Classification of Anthropic API errors.

#include "anthropic_errors.hpp"

#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

namespace quarry::plugins::llm_anthropic {

namespace {

// Longest piece of a non-JSON body quoted in an error message.
constexpr size_t max_quoted_body = 200;

bool contains_icase(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size())
    return false;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i)
    if (sdk::iequals(haystack.substr(i, needle.size()), needle))
      return true;
  return false;
}

bool says_prompt_too_long(std::string_view message) {
  return contains_icase(message, "prompt is too long")
         || contains_icase(message, "exceed context limit")
         || contains_icase(message, "context window");
}

} // namespace

sdk::errc classify_error_type(std::string_view type, std::string_view message,
                              int http_status) {
  if (type == "overloaded_error")
    return sdk::errc::overloaded;
  if (type == "rate_limit_error")
    return sdk::errc::rate_limited;
  if (type == "api_error")
    return sdk::errc::server_error;
  if (type == "invalid_request_error")
    return says_prompt_too_long(message) ? sdk::errc::context_too_long
                                         : sdk::errc::bad_request;
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
    const nlohmann::json* err = nullptr;
    if (auto i = parsed.find("error"); i != parsed.end() && i->is_object())
      err = &*i;
    if (err != nullptr) {
      std::string type;
      std::string message;
      if (auto i = err->find("type"); i != err->end() && i->is_string())
        type = i->get<std::string>();
      if (auto i = err->find("message"); i != err->end() && i->is_string())
        message = i->get<std::string>();
      auto code = classify_error_type(type, message, http_status);
      std::string text = "anthropic: ";
      text += type.empty() ? std::string{"error"} : type;
      if (!message.empty()) {
        text += ": ";
        text += message;
      }
      if (auto i = parsed.find("request_id"); i != parsed.end() && i->is_string())
        text += " (request " + i->get<std::string>() + ")";
      return sdk::make_error(code, sdk::repair_utf8(text), http_status);
    }
  }
  auto code = http_status != 0 ? sdk::classify_http_status(http_status)
                               : sdk::errc::invalid_response;
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
  // A 529 or 429 is what it says even if the body disagrees or is missing.
  if (http_status == 529)
    result.code = sdk::errc::overloaded;
  else if (http_status == 429 && result.code != sdk::errc::quota)
    result.code = sdk::errc::rate_limited;
  result.retry_after_ms = sdk::retry_after_ms(headers);
  result.retry_hint = sdk::should_retry_header(headers);
  return result;
}

} // namespace quarry::plugins::llm_anthropic
