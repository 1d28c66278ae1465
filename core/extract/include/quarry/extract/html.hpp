// Main-content extraction from HTML pages (readability-style), charset
// decoding to UTF-8 and content-type sniffing.
#pragma once

#include "quarry/sdk/types.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace quarry::extract {

/// What a page yields: metadata and the main content as Markdown-like text.
struct extraction {
  /// Article title (JSON-LD, Open Graph, meta tags or <title>).
  std::string title;
  /// Author(s), several joined with "; ".
  std::string byline;
  /// Publication date as found on the page (usually ISO 8601).
  std::string published;
  /// Date of the last modification as found on the page (usually ISO 8601),
  /// empty when the page gives none.
  std::string modified;
  /// Name of the site or publisher.
  std::string site_name;
  /// Language from <html lang> or meta tags.
  std::string lang;
  /// The canonical URL (<link rel=canonical> or og:url), resolved against the page URL.
  std::string canonical_url;
  /// Short description (meta description / og:description).
  std::string excerpt;
  /// The schema.org type of the page's main JSON-LD object (`NewsArticle`,
  /// `BlogPosting`...), empty when there is none.
  std::string page_type;
  /// Main content as Markdown: headings as `#`, list items as `- ` or `1. `,
  /// tables as Markdown tables (`| a | b |` rows, a `| --- |` rule after the
  /// first row), code blocks fenced with ``` with their whitespace kept,
  /// links as their text. Boilerplate (navigation, share bars, cookie and
  /// newsletter boxes, related-article lists, bylines, image credits) and
  /// the comment section are left out.
  std::string text;
  /// The page's comment section (readers' comments), rendered like `text`,
  /// empty when the page has none.
  std::string comments;
};

/// Elements nested deeper than this are not given to the HTML parser as
/// elements (their tags are dropped, their text kept): gumbo's work grows
/// with depth times size, so a hostile page could otherwise take minutes.
inline constexpr size_t max_html_depth = 256;

/// Bounds on one extraction.
struct extract_options {
  /// The extraction stops with errc::timeout once this point has passed.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Polled now and then; returning true stops the extraction with
  /// errc::cancelled.
  std::function<bool()> cancelled;
};

/// Extracts metadata and the main content of an HTML page (UTF-8 input).
/// `url` is the page's address, used to resolve a relative canonical URL.
/// Time is linear in the size of the page (nesting beyond
/// @ref max_html_depth is flattened). Never fails.
extraction extract_html(std::string_view html, std::string_view url = {});

/// Same as @ref extract_html, but stops early when `opts.deadline` passes
/// (errc::timeout) or `opts.cancelled` says so (errc::cancelled). The
/// deadline is checked before parsing and regularly during the work.
std::variant<extraction, sdk::error> try_extract_html(std::string_view html, std::string_view url,
                                                      const extract_options& opts);

/// Renders the whole <body> of a page as Markdown-like text without any
/// content scoring (scripts, styles and hidden elements are skipped).
std::string html_to_text(std::string_view html);

/// Returns `html` with the tags of elements nested deeper than `max_depth`
/// removed (each replaced by a space; text, comments and shallower markup
/// unchanged), or an empty optional if nothing is that deep. A linear scan
/// that follows the HTML tokenizer closely enough for this purpose: raw-text
/// elements, comments, quoted attributes, void elements, end tags that close
/// several elements, elements whose end tag is optional, and self-closing
/// tags in SVG and MathML.
std::optional<std::string> limit_html_nesting(std::string_view html,
                                              size_t max_depth = max_html_depth);

/// A document converted to UTF-8 by @ref decode_document.
struct decoded_text {
  /// The text, valid UTF-8.
  std::string text;
  /// The encoding it was read in (`UTF-8`, `Shift_JIS`, `windows-1251`...).
  std::string charset;
  /// Empty, or how the charset was chosen when the document did not name
  /// one that can be read: `unknown charset "x-foo": read as UTF-8`,
  /// `encoding guessed: gb18030 (no charset label)` (the WHATWG name).
  std::string note;
  /// Whether nothing named the charset (no BOM, no Content-Type charset, no
  /// <meta>) and the bytes are not UTF-8, so that the charset is a guess.
  bool guessed = false;
};

/// Guesses the encoding of a document whose bytes name none: returns a
/// label (a WHATWG label such as `shift_jis` or `gb18030`, any case) or ""
/// when it is unsure. Quarry's open_url plugin gives one built on uchardet;
/// the decoder itself links no detector.
using charset_detector = std::function<std::string(std::string_view bytes)>;

/// Most decoded characters that may be junk (U+FFFD or a control character
/// other than blanks) for a guessed encoding to be taken: 1 in 200. Text in
/// its right encoding has none (a stray byte at most); random bytes read as
/// windows-1252 give about 13 % (28 C0 controls and DEL of 256 byte values,
/// 5 undefined), and a wrong CJK guess gives U+FFFD at every other pair.
inline constexpr double max_guess_junk = 0.005;

/// Converts a document to UTF-8. The charset comes from a byte-order mark, the
/// `charset=` parameter of the Content-Type header, or a <meta charset> /
/// http-equiv tag in the first 4 KiB, in that order; UTF-8 otherwise. The
/// labels are the WHATWG Encoding Standard's and are decoded with glibc's
/// iconv as browsers do: ISO-8859-1 and US-ASCII as windows-1252, Shift_JIS
/// as windows-31j, GBK and GB2312 as GB18030, EUC-KR as windows-949; also
/// UTF-16LE/BE, windows-125x, ISO-8859-x, KOI8-R/U, EUC-JP, ISO-2022-JP,
/// Big5. Every byte sequence that is invalid in the charset becomes U+FFFD
/// (the work is linear in the size). An unknown charset is read as UTF-8
/// and said so in `note`.
///
/// With no label at all, bytes that are valid UTF-8 are UTF-8. Other bytes
/// are read the way browsers read them when `detect` is given: the
/// detector's guess, if it names an encoding above and decodes the bytes
/// with at most `max_guess_junk` junk; else the browsers' fallback,
/// windows-1252, under the same condition; `note` names the guess
/// (`encoding guessed: Shift_JIS (no charset label)`) and `guessed` is set.
/// When neither fits (random bytes), they are read as UTF-8 (U+FFFD for
/// each invalid sequence) and `note` says so. Without `detect`, unlabelled
/// bytes are read as UTF-8.
decoded_text decode_document(std::string_view bytes, std::string_view content_type_header,
                             const charset_detector& detect = {});

/// The text of @ref decode_document.
std::string decode_to_utf8(std::string_view bytes, std::string_view content_type_header);

/// The broad kind of a fetched document.
enum class content_kind { html, pdf, text, json, other };

/// Decides the kind of a document from its Content-Type and first bytes. The
/// bytes win over a missing, generic or wrong header (%PDF-, <html, <!doctype,
/// a JSON object or array). Untyped bytes are text unless
/// @ref looks_binary says otherwise.
content_kind sniff(std::string_view content_type, std::string_view first_bytes);

/// How many leading bytes @ref looks_binary inspects.
inline constexpr size_t binary_sniff_bytes = 512;

/// Returns whether a document looks like binary data rather than text,
/// judged by its first @ref binary_sniff_bytes bytes (after a UTF-8
/// byte-order mark): a NUL byte, or more than 2 + 1/32 of those bytes being
/// control characters other than tab, line feed, vertical tab, form feed,
/// carriage return and escape (so a stray bell or colour codes in a log
/// keep it text; random and compressed bytes are about 11% control
/// characters). The rule @ref sniff applies to untyped bytes; for a document
/// labelled as text (a `.txt` file, `text/plain`), give it the text after
/// @ref decode_to_utf8, so UTF-16 text is not mistaken for binary.
bool looks_binary(std::string_view first_bytes) noexcept;

/// Returns `text` made safe to store and print: invalid UTF-8 replaced by
/// U+FFFD, CR LF and a lone CR turned into LF, and every other control
/// character (C0 except tab and line feed, DEL, C1) removed.
std::string clean_text(std::string_view text);

} // namespace quarry::extract
