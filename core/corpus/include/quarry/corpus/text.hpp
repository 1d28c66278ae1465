// Text helpers of the local corpus: passage splitting, FTS5 query sanitising,
// content hashing and file URLs. (HTML is read by quarry_extract.)

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::corpus {

/// A piece of a document of about 1,000-2,000 characters.
struct passage {
  /// The nearest heading above the passage (without `#` marks), or empty.
  std::string heading;
  /// The passage text: the paragraphs of the source, trimmed and joined
  /// with a blank line.
  std::string text;
  /// Where the passage lies in the source text: the bytes from `offset`
  /// (its first paragraph's first non-blank byte) to `offset + length` (its
  /// last paragraph's last non-blank byte). The index stores only these
  /// offsets and reads the passage back from the document's text.
  size_t offset = 0;
  size_t length = 0;
};

/// Splits Markdown-like text into passages on paragraph and heading
/// boundaries. A heading always starts a new passage; paragraphs are joined
/// until adding the next one would exceed `max_chars`; a paragraph longer than
/// `max_chars` is cut at whitespace (or at a UTF-8 character boundary).
std::vector<passage> split_passages(std::string_view text, size_t max_chars = 2000);

/// Turns arbitrary user or LLM text into a safe FTS5 MATCH expression: every
/// word becomes a quoted string, joined with OR. Returns an empty string when
/// the text has no words (the caller must then not run the query).
std::string sanitize_fts_query(std::string_view query, size_t max_terms = 32);

/// A search query taken apart: plain words, phrases in double quotes and
/// path filters (`path:sub/dir` or `site:example.org`: the file path must
/// contain the text). Everything else is ignored, so any text is a valid
/// query.
struct search_query {
  /// The words outside quotes (FTS5 operators among them are plain words).
  std::vector<std::string> words;
  /// Each phrase in double quotes, as its words (one word or more).
  std::vector<std::vector<std::string>> phrases;
  /// Substrings the file path must contain (all of them).
  std::vector<std::string> paths;
};

/// Parses `query` (at most `max_terms` words in all, at most 4 path
/// filters of at most 512 bytes each; an unbalanced quote runs to the end).
search_query parse_search_query(std::string_view query, size_t max_terms = 32);

/// A short excerpt of `text` (about `max_words` words) around the first
/// word that matches a word of `terms` (case-insensitively, by a common
/// prefix, so inflections count), with "..." where text was cut.
std::string make_snippet(std::string_view text, const std::vector<std::string>& terms,
                         size_t max_words = 40);

/// Returns the first Markdown heading (`# Title`) of `text`, or empty.
std::string markdown_title(std::string_view text);

/// Returns the title a plain text file gives itself: its first line, when
/// a blank line (or the end) follows it and it is short (at most 120 bytes
/// and 16 words) and does not end as a sentence does (`.`, `,`, `;`). A
/// line in capitals is set in title case ("NOTES FOR A HEAT PUMP" becomes
/// "Notes for a Heat Pump"). Empty when the text gives none.
std::string text_title(std::string_view text);

/// A 64-bit FNV-1a hash of `bytes`, as 16 hex digits.
std::string content_hash(std::string_view bytes);

/// Returns a `file://` URL for an absolute path (percent-encoded).
std::string file_url(std::string_view absolute_path);

/// Returns the absolute path of a `file://` URL (`file:///a/b%20c` or
/// `file://localhost/a/b`; `.` and `..` segments resolved), or an empty
/// string for anything else (another host, a `%` without two hex digits, an
/// encoded NUL, text that is no URL).
std::string path_from_file_url(std::string_view url);

} // namespace quarry::corpus
