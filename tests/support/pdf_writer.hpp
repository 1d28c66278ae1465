// Writes small, valid PDF 1.4 files by hand for tests (text pages in
// Helvetica, optional metadata). Damaged PDFs: truncate the bytes.

#pragma once

#include <string>
#include <vector>

namespace quarry::test {

/// What @ref make_pdf_document writes.
struct pdf_spec {
  /// The text of each page; lines are split on '\n'. UTF-8 characters of
  /// Latin-1 are written in WinAnsiEncoding, others become '?'.
  std::vector<std::string> pages;
  /// The Title metadata (any UTF-8), or empty for none.
  std::string title;
  /// The Author metadata, or empty for none.
  std::string author;
  /// The CreationDate metadata in PDF syntax (`D:20240501120000Z`), or empty.
  std::string creation_date;
  /// Adds an /Encrypt dictionary (standard security handler, RC4 40-bit)
  /// whose password is not the empty one, so readers ask for a password.
  /// The content itself stays in the clear: only for testing refusals.
  bool password_protected = false;
};

/// Returns the bytes of a PDF with one page per element of `pages` (at least
/// one page: an empty list gives one blank page) and, when `title` is not
/// empty, a Title entry in the document information dictionary.
std::string make_pdf(const std::vector<std::string>& pages, const std::string& title = {});

/// Returns the bytes of a PDF as described by `spec`.
std::string make_pdf_document(const pdf_spec& spec);

} // namespace quarry::test
