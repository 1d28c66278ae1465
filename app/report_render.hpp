// The report files of `quarry research`: Markdown (what is printed and
// written with --out), a standalone HTML page (--html) whose every link
// works, local sources included, and the HTML page the PDF and DOCX exports
// are made from (report_export.hpp), which links no local file.

#pragma once

#include <string>
#include <vector>

namespace quarry::app {

/// A cited source as the report lists it.
struct cited_source {
  int number = 0;
  std::string title;
  /// An http(s) URL, a file:// URL of a local document, or empty.
  std::string url;
  /// Only its search snippet was known (never opened): listed as
  /// "snippet only".
  bool snippet_only = false;
};

/// What a report is made of.
struct report_parts {
  std::string question;
  /// The body in Markdown, citations as `[[n]](url)`.
  std::string body;
  std::vector<cited_source> sources;
  /// The research was interrupted: the report says so under its title.
  bool partial = false;
  /// The corpus folder (absolute) that sendable_html_report shows local
  /// documents' paths relative to; empty, or a document outside it: the
  /// file's name alone.
  std::string corpus_root;
};

/// `x` with `<`, `>`, `&`, `"` and `'` as HTML character references.
std::string escape_html(const std::string& x);

/// The report as Markdown: the question as the title, the body, and the
/// numbered sources.
std::string markdown_report(const report_parts& r);

/// The numbered sources as markdown_report lists them (`## Sources`, then
/// `n. Title <url>` lines); empty without sources.
std::string sources_markdown(const std::vector<cited_source>& sources);

/// The report as one HTML page. Citations of local documents link to their
/// entry in the Sources list (`#source-N`), which shows the file's path and
/// links it with a file:// URL; web sources link to the page.
std::string html_report(const report_parts& r);

/// The report as one HTML page to send (what the PDF and DOCX exports
/// render): the same body and Sources as html_report, but no file:// link
/// and nothing fetched: a local source is its title and its path relative
/// to `corpus_root` as text, a web source its linked title and its URL as
/// text (readable on paper), images become links, a Content-Security-Policy
/// forbids every load, and the Sources keep their numbers in any converter
/// (an `<ol start>` per run of consecutive numbers).
std::string sendable_html_report(const report_parts& r);

/// The report for reading in a terminal `width` columns wide (clamped to
/// 20-200): the question as a title underlined with `=`, the body rendered
/// from Markdown to plain text by cmark-gfm (paragraphs and list items
/// wrapped to the width, citations as `[n]`, links as their text, headings
/// underlined with `-`, tables kept as rows), then "Sources" with `[n] Title`
/// and, indented below, a short location: a local document's path relative
/// to `corpus_root` (as sendable_html_report shows it), a web page's host
/// and path, cut to the width with "...". What quarry research prints when
/// standard output is a terminal.
std::string terminal_report(const report_parts& r, int width);

/// Where a local source is shown in a report to send: `path` relative to
/// `corpus_root` when it lies inside it, else its file name.
std::string shown_local_path(const std::string& path, const std::string& corpus_root);

/// Report text (Markdown or HTML) as it is printed: cleaned of escape
/// sequences and controls (sdk::strip_terminal_controls) when it goes to a
/// terminal (`terminal`), since a model's or a page's text must not retitle
/// the window, write the clipboard or clear the screen; byte for byte to a
/// pipe or a file, where it is data (as the --out and --html files are).
std::string printed_report(std::string text, bool terminal);

/// The local path of a file:// URL (percent-decoded), or empty when `url`
/// is not one (or not a well-formed one).
std::string local_path_of(const std::string& url);

} // namespace quarry::app
