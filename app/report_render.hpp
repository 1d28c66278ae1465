// The report files of `quarry research`: Markdown (what is printed and
// written with --out) and a standalone HTML page (--html) whose every link
// works, local sources included.

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
