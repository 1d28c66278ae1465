// Safe fetching of one URL and reading it as text: the code shared by the
// open_url tool and `quarry extract`.
#pragma once

#include "quarry/fetch/address_policy.hpp"

#include "quarry/extract/html.hpp"
#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::fetch {

/// The default of `max_html_size`: the largest HTML or text document read.
inline constexpr int64_t default_max_html_bytes = 20 * 1024 * 1024;

/// The default of `max_pdf_size`: the largest PDF document read.
inline constexpr int64_t default_max_pdf_bytes = 50 * 1024 * 1024;

/// Limits and policy of fetching, from the `open_url` tool's configuration.
struct fetch_options {
  /// Addresses and hosts allowed despite the SSRF rules.
  std::vector<std::string> allow;
  std::chrono::milliseconds connect_timeout{5000};
  /// Longest time without receiving a byte.
  std::chrono::milliseconds stall_timeout{15000};
  /// Wall clock of one open_url call (all its URLs, reading included).
  std::chrono::milliseconds call_timeout{120000};
  int max_redirects = 10;
  /// Largest HTML, text or JSON document (a fetched page or a local file).
  int64_t max_html_bytes = default_max_html_bytes;
  /// Largest PDF document (a fetched page or a local file).
  int64_t max_pdf_bytes = default_max_pdf_bytes;
  /// The User-Agent header.
  std::string user_agent;
};

/// The configuration keys @ref parse_fetch_options reads.
const std::vector<std::string>& fetch_option_keys();

/// Reads `allow` (list of strings), `connect_timeout`, `stall_timeout`,
/// `call_timeout` (seconds as a number, or strings such as `5s`, `1m30s`,
/// `500ms`), `max_redirects` (0-20), `max_html_size`, `max_pdf_size` (bytes
/// as a number, or strings such as `20MiB`, `512KiB`) and `user_agent`.
/// Other keys are ignored. Returns a message naming the key on bad input.
std::variant<fetch_options, std::string> parse_fetch_options(const nlohmann::json& config);

/// What came back from the network for one URL.
struct fetched {
  /// The URL as requested.
  std::string url;
  /// The URL after redirects.
  std::string final_url;
  int status = 0;
  sdk::http_headers headers;
  std::string body;
  /// Set when nothing usable came back.
  std::optional<sdk::error> failure;
  /// Why, in the words the LLM sees (Onyx's wording where it has one).
  std::string reason;
};

/// Called once with the outcome, on the host's I/O thread.
using fetch_callback = std::function<void(fetched)>;

/// Starts fetching `url` with the SSRF policy checked on the URL, on every
/// redirect target and on the numeric address of every connection.
/// `deadline` bounds the whole exchange. Returns the call (to cancel it), or
/// nothing when `done` was already called (refused before any connection).
std::shared_ptr<sdk::http_call>
start_fetch(sdk::http_client& http, std::string url, std::shared_ptr<const address_policy> policy,
            const fetch_options& options, std::chrono::steady_clock::time_point deadline,
            fetch_callback done);

/// A document read as text.
struct page {
  /// The URL (or path) asked for.
  std::string url;
  /// The URL after redirects.
  std::string final_url;
  extract::content_kind kind = extract::content_kind::other;
  std::string title;
  std::string byline;
  std::string published;
  /// When the page says it was last changed (HTML), or empty.
  std::string modified;
  std::string site_name;
  std::string lang;
  std::string canonical_url;
  std::string excerpt;
  /// The main text (Markdown-like for HTML).
  std::string text;
  /// Readers' comments under an HTML article, kept apart from `text`.
  std::string comments;
  /// For PDFs: pages in the document and pages read.
  int pages = 0;
  int pages_read = 0;
  /// The encoding the text was read in (`UTF-8`, `Shift_JIS`...; empty for
  /// PDFs), and how it was chosen when nothing named it (see
  /// extract::decoded_text: `encoding guessed: gb18030 (no charset
  /// label)`), else empty.
  std::string charset;
  std::string charset_note;
  /// Set when the document has no readable text.
  std::optional<sdk::error> failure;
  /// Why, in the words the LLM sees.
  std::string reason;
};

/// Returns whether a document is a PDF: a PDF media type, a URL path ending
/// in `.pdf`, or `%PDF-` at the start of the bytes (after whitespace). Bytes
/// that are clearly HTML win over a URL ending in `.pdf`.
bool is_pdf(std::string_view content_type, std::string_view url, std::string_view first_bytes);

/// Reads a document's bytes as text: PDF with poppler and HTML with
/// main-content extraction after charset decoding (each at most `pdf_time`
/// when it is positive; errc::timeout after that), plain text and
/// JSON passed through as UTF-8 (refused when @ref extract::looks_binary
/// says the decoded text is binary data; control characters removed with
/// @ref extract::clean_text). Blocking and CPU-heavy: call it on the
/// host's pool. Applies the insufficient-content rule: no title and no text,
/// fewer than 50 characters of text, or just "Loading..." is a failure; and
/// the replacement rule: an HTML or text document whose text is more than
/// `max_replacement_share` U+FFFD is a failure (errc::invalid_response), not
/// a page. `detect` guesses the charset of HTML and text that name none
/// (see extract::decode_document); without it they are read as UTF-8.
page read_document(std::string_view bytes, std::string_view content_type, std::string_view url,
                   std::chrono::milliseconds pdf_time,
                   const extract::charset_detector& detect = {});

/// Reads a fetched response (a failure passes through); see read_document.
page read_fetched(const fetched& response, std::chrono::milliseconds pdf_time,
                  const extract::charset_detector& detect = {});

/// The largest share of U+FFFD among the characters (whitespace not
/// counted) of a document's text for it to be a page: a quarter. Text read
/// in its right encoding has none, or a few from a stray byte; text read in
/// a wrong one, or bytes that are no text, has them everywhere (every
/// invalid byte or pair becomes one: GBK read as UTF-8 gives about half,
/// random bytes more), and at one character in four no sentence can be
/// read any more.
inline constexpr double max_replacement_share = 0.25;

/// The share of U+FFFD among the code points of `text` that are not
/// whitespace (0 for none).
double replacement_share(std::string_view text) noexcept;

/// The last path segment of a URL or path, percent-decoded (a title of last
/// resort).
std::string last_path_segment(std::string_view url);

} // namespace quarry::fetch
