// Classification of Anthropic API errors: HTTP error responses and `error`
// events inside a stream.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <string_view>

namespace quarry::plugins::llm_anthropic {

/// Maps an Anthropic error type (`overloaded_error`, `rate_limit_error`, ...)
/// and its message to an error class. Falls back to the HTTP status (or to
/// errc::server_error without one) for unknown types.
sdk::errc classify_error_type(std::string_view type, std::string_view message,
                              int http_status);

/// Classifies the JSON of an error (`{"type":"error","error":{"type",
/// "message"}}`) sent mid-stream or as an error response body with
/// `http_status` (0 mid-stream). Never fails: a body that is not JSON gives
/// a classification by status and a message quoting the start of the body.
sdk::error classify_error_body(std::string_view body, int http_status);

/// Classifies an HTTP error response: body and status as above, plus
/// `retry_after_ms` from `retry-after-ms` / `Retry-After` and `retry_hint`
/// from `x-should-retry`.
sdk::error classify_http_error(int http_status, const sdk::http_headers& headers,
                               std::string_view body);

} // namespace quarry::plugins::llm_anthropic
