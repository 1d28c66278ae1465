// The report files of `quarry research`: Markdown (what is printed and
// written with --out), a standalone HTML page (--html) whose every link
// works, local sources included, and the HTML page the PDF and DOCX exports
// are made from (report_export.hpp), which links no local file.

#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace quarry::app {

/// A cited source as the report lists it.
struct cited_source {
  /// The number shown: in a stored report, 1, 2, ... in the order the body
  /// first cites them (renumber_citations).
  int number = 0;
  std::string title;
  /// An http(s) URL, a file:// URL of a local document, or empty.
  std::string url;
  /// Only its search snippet was known (never opened): listed as
  /// "snippet only".
  bool snippet_only = false;
  /// The number in the session's stored numbering (store::citation_row),
  /// which claims and packets use; 0 when it is `number`.
  int stored_number = 0;
  /// The stored document's id; empty when not known.
  std::string document_id = {};

  /// The number in the stored numbering.
  int stored() const noexcept {
    return stored_number != 0 ? stored_number : number;
  }
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

/// The report as one HTML page, its body rendered by report_html_fragment.
/// With `source_pages` empty (the file `quarry research --html` writes,
/// opened from disk): citations of local documents link to their entry in
/// the Sources list (`#source-N`), which shows the file's path and links it
/// with a file:// URL; web sources link to the page. With `source_pages`,
/// the URL path of the session's sources on the server
/// (`/v1/research/ID/sources`): every local citation and Sources entry links
/// `<source_pages>/N?format=html` and the page holds no file:// URL; web
/// citations keep their links.
std::string html_report(const report_parts& r, const std::string& source_pages = {});

/// A report body (Markdown, citations `[[n]](url)`) as an HTML fragment (no
/// `<html>`, no title, no Sources list): the one renderer of every HTML
/// form of a report (the web page, the HTML page, the PDF and DOCX). GitHub's
/// Markdown by cmark-gfm (tables, strikethrough); raw HTML in the Markdown
/// is shown as text (escaped); links other than http(s):, mailto: and
/// `#...` (javascript:, data:, file:, relative ones) become their text;
/// images become links to their URL, so that nothing is fetched. Safe to
/// assign to innerHTML.
///
/// A citation `[[N]](url)` becomes `<a class="cite" data-n="N"
/// href="...">[N]</a>`, web ones with `data-url="URL"`. The href: with
/// `source_pages` (see html_report), `<source_pages>/N?format=html` for a
/// number in `sources` (every number when `every_number`); else the web URL,
/// or `#source-N` for a number in `sources`. A citation with nowhere to go
/// is the text `[N]`.
std::string report_html_fragment(const std::string& body, const std::vector<cited_source>& sources,
                                 const std::string& source_pages, bool every_number = false);

/// The citation numbers of `body` (its `[[n]]` markers, n of 1 to 6 digits)
/// in the order of their first appearance, without repeats.
std::vector<int> citation_order(const std::string& body);

/// A body renumbered by renumber_citations.
struct renumbered_body {
  std::string text;
  /// Where the text changed: (offset in the old text just after a changed
  /// marker, bytes added there, negative when removed), in order.
  std::vector<std::pair<size_t, long>> edits;

  /// Offset `x` of the old text in the new one (an offset inside a changed
  /// marker does not move; one at its end or after it does).
  size_t shifted(size_t x) const;
};

/// `body` with each `[[n]]` marker's number replaced by `shown[n]`; a marker
/// of a number not in `shown` is removed with its link.
renumbered_body renumber_citations(const std::string& body, const std::map<int, int>& shown);

/// `1, 2, ...` for the numbers of citation_order(body): the gap-free
/// numbering of a report, in the order it first cites its sources.
std::map<int, int> first_cited_numbering(const std::string& body);

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

/// A source's short location, as terminal_report shows it: a local
/// document's path relative to `corpus_root` (shown_local_path), a web
/// page's host and path (`example.org/a/b`: no scheme, `www.`, query or
/// fragment).
std::string source_location(const std::string& url, const std::string& corpus_root);

/// Whether `url` is an http:// or https:// URL.
bool is_web_url(const std::string& url);

/// Whether `url` is a file:// URL.
bool is_file_url(const std::string& url);

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
