// Classification of Anthropic API errors: HTTP error responses and `error`
// events inside a stream.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <string_view>

namespace quarry::plugins::llm_anthropic {

/// Maps an Anthropic error type (`overloaded_error`, `rate_limit_error`, ...)
/// and its message to an error class. A cause the message (or the type)
/// proves wins over everything else: the prompt does not fit the context
/// (context_too_long), no credit or quota (quota), the model does not exist
/// (not_found), bad credentials (auth), as sdk::cause_in_message reads them,
/// plus Anthropic's "exceed context limit". Then the type; then the HTTP
/// status (or errc::server_error without one) for unknown types.
sdk::errc classify_error_type(std::string_view type, std::string_view message, int http_status);

/// Classifies the JSON of an error sent mid-stream or as a response body
/// with `http_status` (0 mid-stream): Anthropic's `{"type":"error","error":
/// {"type","message"}}`, and the envelopes of gateways that front it
/// (`{"error":{"message","code":502,"metadata":{"raw"}}}` of OpenRouter and
/// LiteLLM, `{"error":"text"}`). A status relayed in `error.code` stands in
/// for a missing or 200 transport status; OpenRouter's `metadata.raw` (the
/// upstream's error, at most 500 bytes) joins the message. Never fails: a
/// body that is not JSON gives a classification by status (or by the cause
/// its first 200 bytes prove) and a message quoting the start of the body.
sdk::error classify_error_body(std::string_view body, int http_status);

/// Classifies an HTTP error response: body and status as above, plus
/// `retry_after_ms` from `retry-after-ms` / `Retry-After` and `retry_hint`
/// from `x-should-retry`. A 529 is errc::overloaded and a 429
/// errc::rate_limited (unless errc::quota) whatever the body says, except
/// when the message proves a cause: then that class stands and `retry_hint`
/// is false, whatever `x-should-retry` said (no retry cures it).
sdk::error classify_http_error(int http_status, const sdk::http_headers& headers,
                               std::string_view body);

} // namespace quarry::plugins::llm_anthropic
