// Pure parts of the open_url tool: argument normalisation, snippet matching,
// the 15,000-character window, the 150,000-character budget and the
// LLM-facing texts (Onyx's behaviour, spec section 13).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::plugins::open_url {

/// Most URLs one call opens.
inline constexpr size_t default_max_urls = 10;

/// Characters of a page the LLM sees.
inline constexpr size_t default_window_chars = 15000;

/// Characters of all pages of one call the LLM sees.
inline constexpr size_t default_budget_chars = 150000;

/// The normalised `urls` argument.
struct url_list {
  /// The URLs to open, in order, without duplicates.
  std::vector<std::string> urls;
  /// URLs dropped because of the limit.
  size_t dropped = 0;
};

/// Normalises the `urls` argument like Onyx: a bare string is one URL; every
/// item is converted to a string and trimmed; empties are dropped; duplicates
/// are dropped keeping the first (exact match, then the same URL without its
/// fragment and with a lower-case scheme and host); at most `max_urls` are
/// kept. Returns nothing when the argument is missing or not a string/array.
std::optional<url_list> normalize_urls(const nlohmann::json& arguments,
                                       size_t max_urls = default_max_urls);

/// The key for de-duplication, snippet lookup and document ids: the URL as
/// libcurl normalises it (lower-case scheme and host, `.` and `..` segments
/// resolved; an empty path stays empty), without user name, password and
/// fragment; text that is no URL (`corpus:3`) without its fragment.
std::string url_key(std::string_view url);

/// The message for a call without usable URLs.
std::string missing_urls_message();

/// Number of Unicode code points in UTF-8 text.
size_t count_chars(std::string_view text) noexcept;

/// Cuts UTF-8 text to at most `max_chars` code points.
std::string_view cut_chars(std::string_view text, size_t max_chars) noexcept;

/// Finds `snippet` in `content` (Onyx's snippet matcher): first exactly after
/// normalising both (zero-width characters dropped, curly quotes made
/// straight, punctuation and whitespace folded into single spaces, ASCII
/// lower-cased), then approximately (the best window of the content's words
/// that contains at least 80 % of the snippet's words). Returns the byte
/// range [first, last) in `content`.
std::optional<std::pair<size_t, size_t>> find_snippet(std::string_view content,
                                                      std::string_view snippet);

/// Returns the part of `content` the LLM sees: a window of `window_chars`
/// code points centred on the snippet when it is found, else the start;
/// `[...truncated] ` before and ` [...truncated]` after where text was cut.
std::string window_text(std::string_view content, std::string_view snippet,
                        size_t window_chars = default_window_chars);

/// One document of the LLM-facing answer.
struct section {
  std::string title;
  std::string url;
  /// ISO 8601, or empty.
  std::string updated_at;
  /// The windowed text.
  std::string content;
  /// How the page was read, when the model should know (the charset it
  /// named was unknown, or none was named and it was guessed:
  /// `encoding guessed: gb18030 (no charset label)`), else empty.
  std::string note;
};

/// Builds `{"results": [{"document", "title", "updated_at"?, "url",
/// "note"?, "content"}, ...]}` (2-space indent) within the character budget: a
/// section whose remaining budget is under 200 characters is dropped with all
/// later ones; the last one kept may be cut. Documents are numbered from
/// `first_document`. `failures` (url, reason) are listed under `"failed"`
/// and `note` under `"note"` when not empty. Returns the text and the number
/// of sections included.
std::pair<std::string, size_t>
format_sections(const std::vector<section>& sections,
                const std::vector<std::pair<std::string, std::string>>& failures,
                const std::string& note, size_t budget_chars = default_budget_chars,
                int first_document = 1);

/// Tells the model that only the first `opened` URLs of a call were tried
/// and the other `dropped` were not (so that none is silently lost), e.g.
/// "Only the first 10 of 500 URLs were opened (open_url opens at most 10 per
/// call); the other 490 were not tried: call open_url again with them."
std::string dropped_note(size_t opened, size_t dropped);

/// Onyx's message when nothing could be read: "Failed to fetch content from
/// documents a, b and URLs x (reason), y (reason)".
std::string failure_message(std::vector<std::string> missing_documents,
                            std::vector<std::pair<std::string, std::string>> failed_urls);

} // namespace quarry::plugins::open_url
