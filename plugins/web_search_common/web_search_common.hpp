// Shared pieces of the `web_search` tool plugins: results, query
// normalisation, URL and snippet cleaning, interleaving and LLM-facing text.
#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/http_buffer.hpp"
#include "quarry/sdk/search.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::plugins::web_search_common {

/// Most results a search returns to the LLM (Onyx's cap).
constexpr size_t max_results_cap = 20;

/// One search result, already cleaned (the URL by clean_url).
using search_result = sdk::search_result;

/// What parsing one response body produced.
using parse_result = sdk::search_page;

/// Returns the queries of the `queries` argument as Onyx normalises them: a
/// bare string is one query, other non-arrays give none, null items are
/// skipped, other non-strings are rendered as text, ASCII control characters
/// are removed, whitespace runs fold to one space, the ends are trimmed,
/// empties and duplicates are dropped.
std::vector<std::string> normalize_queries(const nlohmann::json& value);

/// The longest query sent to a search backend, in bytes (Brave's limit; a
/// query is a few words, never a paragraph of prompt text).
inline constexpr size_t max_query_size = 400;

/// Normalises one query (control characters removed, whitespace folded,
/// trimmed) and cuts it to `max_query_size` bytes at a word boundary where
/// there is one, never inside a UTF-8 sequence.
std::string normalize_query(std::string_view text);

/// Drops the fragment and the tracking parameters (utm_*, fbclid, gclid, ...)
/// of `url` and keeps the rest of the query string.
std::string clean_url(std::string_view url);

/// Returns whether a query parameter named `name` only tracks the visitor.
bool is_tracking_parameter(std::string_view name);

/// Decodes HTML character references (named, decimal and hexadecimal).
std::string decode_entities(std::string_view text);

/// Removes HTML tags, decodes entities, folds whitespace and trims.
std::string clean_text(std::string_view html);

/// Percent-encoding of query values: the SDK's (RFC 3986 unreserved kept).
using sdk::url_encode;

/// Builds a cleaned result from raw provider fields; returns nothing when it
/// has neither a title nor a snippet or no URL.
std::optional<search_result> make_result(std::string_view title, std::string_view url,
                                         std::string_view snippet,
                                         std::optional<std::string> published);

/// Returns the string member `key` of `obj`, or "" if it is missing or not a
/// string.
std::string string_field(const nlohmann::json& obj, const char* key);

/// Parses a response body that must be a JSON object. Otherwise sets
/// `out.failure` (errc::invalid_response, "<service> returned a body that is
/// not a JSON object" and `hint`) and returns a discarded value.
nlohmann::json parse_object(std::string_view body, std::string_view service, parse_result& out,
                            std::string_view hint = {});

/// Returns the array member `key` of `obj`, or nullptr when it is missing or
/// not an array; then, if `required`, sets `out.failure` ("<service>
/// returned no '<key>' array").
const nlohmann::json* array_member(const nlohmann::json& obj, const char* key,
                                   std::string_view service, parse_result& out, bool required);

/// Member names of one result object in a provider's response.
struct result_fields {
  const char* title;
  const char* url;
  const char* snippet;
  const char* published;
};

/// Turns each object of the array `items` into a result (see make_result)
/// and appends it to `out`, until `out` holds `limit` results.
void append_results(const nlohmann::json& items, const result_fields& fields,
                    std::vector<search_result>& out, size_t limit = static_cast<size_t>(-1));

/// Round-robin interleave with (title, url) de-duplication (the SDK's).
inline std::vector<search_result> interleave(const std::vector<std::vector<search_result>>& lists,
                                             size_t limit = max_results_cap) {
  return sdk::interleave_results(lists, limit);
}

/// The LLM-facing JSON of the results (the SDK's search_results_json).
inline std::string format_results(const std::vector<search_result>& results,
                                  int first_document = 1) {
  return sdk::search_results_json(results, first_document);
}

/// Converts results to SDK documents (id = url, kind web).
inline std::vector<sdk::document> to_documents(const std::vector<search_result>& results) {
  return sdk::search_documents(results);
}

/// The LLM-facing text when the arguments lack a `queries` array.
std::string missing_queries_message();

/// The LLM-facing text when every query was empty or whitespace.
std::string empty_queries_message();

/// The LLM-facing text when every query failed: the failures as a JSON
/// object query -> error, in query order. An error said already for an
/// earlier query is not repeated ("the same error as for \"q1\""): a
/// rate limit that refused ten queries is told once.
std::string all_failed_message(const std::vector<std::pair<std::string, std::string>>& failures);

/// The LLM-facing text when the search found nothing.
std::string no_results_message();

/// The tool's description (Onyx's).
std::string tool_description();

/// The tool's parameter schema (Onyx's).
nlohmann::json tool_parameters();

/// A readable message from an error response body (the SDK's
/// http_error_message: JSON `error.detail`, `detail.error`, `detail`,
/// `error`, `message`, at most 300 bytes; else a prefix of the body).
inline std::string error_message_of(std::string_view body) {
  return sdk::http_error_message(body);
}

/// Classifies an error response by its status and headers (the SDK's
/// http_status_error).
inline sdk::error classify_status(int status, const sdk::http_headers& headers,
                                  std::string message) {
  return sdk::http_status_error(status, headers, std::move(message));
}

/// Most bytes of an error body that are read to reduce it to text: an error
/// page's title and first words are near its start, and a hostile body
/// cannot make the reduction slow.
inline constexpr size_t max_error_scan = 64 * 1024;

/// Longest text taken from an error body, in bytes (the explanation and
/// the remedy come on top, see `explain`).
inline constexpr size_t max_error_text = 200;

/// Whether an error body is an HTML page: its Content-Type is `text/html` or
/// `application/xhtml+xml`, or its first bytes (after a BOM and blanks) open
/// a document (`<!doctype html`, `<html`, `<head`, `<body`, `<title`).
bool is_html_body(const sdk::http_headers& headers, std::string_view body);

/// The readable text of an HTML error page (reads at most `max_error_scan`
/// bytes): its `<title>`, then its first blocks of text (script, style,
/// template, svg and comments dropped, tags removed, entities decoded); a
/// block that the title already says is left out, blocks are joined as
/// sentences ("429 Too Many Requests: Rate limit exceeded for this
/// client."). Never markup: at most `max_size` bytes of valid UTF-8 on one
/// line, without control characters (sdk::strip_terminal_controls), cut at
/// a character. Empty when the page holds no text.
std::string html_error_text(std::string_view html, size_t max_size = max_error_text);

/// The readable text of an error body: html_error_text for an HTML page
/// (see is_html_body), else sdk::http_error_message (a JSON API's message,
/// else the start of the body), at most `max_size` bytes on one line.
std::string error_text(const sdk::http_headers& headers, std::string_view body,
                       size_t max_size = max_error_text);

/// What a search backend tells its users about the failures they can fix
/// themselves: each member is a remedy sentence, or null for none.
struct error_advice {
  /// The service as users know it, e.g. "Brave Search".
  const char* service;
  /// For errc::auth (HTTP 401, 403 and the backend's own key errors): which
  /// key setting to check.
  const char* auth = nullptr;
  /// For errc::quota (HTTP 402 and the backend's own plan limits): the plan
  /// or credits.
  const char* quota = nullptr;
  /// For errc::rate_limited (HTTP 429): what limits the rate and how to
  /// raise it.
  const char* rate_limited = nullptr;
};

/// Rewrites the message of `err`, a classified error answer of HTTP status
/// `err.http_status` whose message is the body's text (error_text), as
/// "<service> answered HTTP <status> (<text>)" and, for the classes of
/// `advice` that have a remedy, "<service> refused the request: <what>
/// (HTTP <status>: <text>). <remedy>"; e.g. "SearXNG refused the request:
/// too many requests (HTTP 429: 429 Too Many Requests: Rate limit exceeded
/// for this client.). The SearXNG instance's limiter refused this client;
/// ...". An empty text is left out.
void explain(sdk::error& err, const error_advice& advice);

/// Settings every web_search plugin reads.
struct common_config {
  std::string api_key;
  /// Without a trailing slash.
  std::string base_url;
  size_t max_results = 10;
  std::chrono::milliseconds timeout{30000};
};

/// Reads `api_key`, `base_url`, `max_results` (1..20) and `timeout`
/// (seconds) from `config` and rejects any other key not in `extra_keys`.
/// Throws std::invalid_argument with a clear message.
common_config parse_common_config(const nlohmann::json& config, std::string_view plugin,
                                  std::string default_base_url, bool api_key_required,
                                  const std::vector<std::string>& extra_keys);

/// Returns the string option `key` of `config` or `fallback`; throws
/// std::invalid_argument if present and not a string.
std::string string_option(const nlohmann::json& config, std::string_view key, std::string fallback,
                          std::string_view plugin);

/// One string option of a backend: its key, where its value goes, and the
/// value when it is absent.
struct string_setting {
  const char* key;
  std::string* target;
  const char* fallback = "";
};

/// parse_common_config with the keys of `settings` as the extra keys, then
/// each setting read by string_option (only from a mapping). Throws
/// std::invalid_argument with a clear message.
common_config parse_backend_config(const nlohmann::json& config, std::string_view plugin,
                                   std::string default_base_url, bool api_key_required,
                                   std::initializer_list<string_setting> settings);

/// Throws std::invalid_argument with `message` unless `value` is one of
/// `allowed` (or empty, where `empty_ok`).
void require_one_of(const std::string& value, std::initializer_list<std::string_view> allowed,
                    bool empty_ok, const char* message);

/// Appends `&key=value` (the value percent-encoded) to `url` for each
/// parameter whose value is not empty.
void append_query(std::string& url,
                  std::initializer_list<std::pair<const char*, std::string_view>> params);

/// A POST of `body` as JSON (invalid UTF-8 replaced) to `url`, with the
/// header `auth` first, then JSON's Content-Type and Accept.
sdk::http_request json_post(std::string url, std::pair<std::string, std::string> auth,
                            const nlohmann::ordered_json& body);

/// Sets `body[key]` to `value` unless the value is empty.
void set_unless_empty(nlohmann::ordered_json& body, const char* key, const std::string& value);

} // namespace quarry::plugins::web_search_common
