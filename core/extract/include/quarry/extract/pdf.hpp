// PDF text extraction with poppler-cpp.
#pragma once

#include "quarry/sdk/types.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::extract {

/// What a PDF yields.
struct pdf_extraction {
  /// The document's Title metadata (UTF-8), or empty.
  std::string title;
  /// The Author metadata, or empty.
  std::string author;
  /// The creation date as ISO 8601 (`2024-05-01T12:00:00Z`), or empty.
  std::string published;
  /// Number of pages in the document.
  int pages = 0;
  /// Number of pages whose text was read (fewer than `pages` when the time
  /// limit was reached).
  int pages_read = 0;
  /// The text of the pages read in reading order (poppler's
  /// non-raw, non-physical layout: no column padding), trailing whitespace
  /// and form feeds removed, pages separated by a blank line.
  std::string text;
  /// Set when the document could not be read at all (not a PDF, damaged,
  /// encrypted with a password other than the empty one). A time limit
  /// reached after some pages is not a failure: `pages_read < pages`.
  std::optional<sdk::error> failure;
};

/// Extracts the text of a PDF held in memory. Blocking and CPU-heavy: call it
/// on the host's blocking pool. The limit counts from the call (loading
/// included) and is checked before each page, the first one too (zero means
/// no limit); encrypted documents are tried with an empty password. Safe to
/// call from several threads at once. Failures have class
/// `errc::invalid_response`.
pdf_extraction extract_pdf(std::string_view bytes,
                           std::chrono::milliseconds time_limit = std::chrono::milliseconds{0});

/// Like @ref extract_pdf with an absolute deadline (none: no limit). Before
/// each page, extraction stops once `steady_clock::now() >= *deadline`: a
/// deadline already past when the call starts reads no page at all (but
/// still reports `pages` and the metadata).
pdf_extraction extract_pdf_until(std::string_view bytes,
                                 std::optional<std::chrono::steady_clock::time_point> deadline);

} // namespace quarry::extract
