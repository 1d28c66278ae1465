// The question sets of `quarry eval run`: DeepResearch Bench's format, one
// JSON object per line with an `id` and a `prompt` (other fields are kept as
// they are), read strictly so that a bad line is an error naming its line
// before anything runs.

#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::app::eval {

/// A question's id as tables and progress lines show it: a string as it
/// is, an integer's digits (the same text as question::key).
std::string id_text(const nlohmann::json& id);

/// One question of a set.
struct question {
  /// The `id` as given: an integer or a non-empty string.
  nlohmann::json id;
  /// The id as text (an integer's decimal digits, a string as it is): ids
  /// are compared by it, so `1` and `"1"` are the same id.
  std::string key;
  /// The question asked (trimmed; at most max_prompt_bytes).
  std::string prompt;
  /// The whole line as it was read: `id`, `prompt` and every other field
  /// (`topic`, `language`, `must_cite`, ...).
  nlohmann::json fields;
  /// Where it was read: its line in the file, from 1.
  size_t line = 0;
};

/// A questions file larger than this is refused (bytes).
inline constexpr size_t max_questions_bytes = size_t{64} << 20;

/// A prompt longer than this is refused (bytes): the research's own limit
/// on a question.
inline constexpr size_t max_prompt_bytes = 64 * 1024;

/// At most this many bad lines are reported; the count of the others is.
inline constexpr size_t max_reported_errors = 20;

/// Reads the text of a questions file: one JSON object per line; empty
/// lines (only blanks) are skipped and a UTF-8 byte order mark at the start
/// is ignored. Each object needs an `id` (an integer or a non-empty string of
/// at most 200 bytes) and a `prompt` (a non-empty string of at most
/// max_prompt_bytes); `must_cite`, when present, is an array of non-empty
/// strings. Returns the questions in file order, or one message per bad
/// line (`LINE: why`, at most max_reported_errors of them and then one that
/// counts the rest): a line that is not JSON or not an object, a missing or
/// malformed id or prompt, an id used before (`line 7: id 3 is used on line
/// 2 already`), two ids kept under one file name, or a file without any
/// question.
std::variant<std::vector<question>, std::vector<std::string>>
parse_questions(std::string_view text);

/// Reads and parses the questions file at `path` (a regular file of at most
/// max_questions_bytes); messages start with `path:` (`path:LINE: why` for a
/// bad line).
std::variant<std::vector<question>, std::vector<std::string>>
read_questions_file(const std::string& path);

/// The file name (without the folder and the `.json`) under which the result
/// of the question with id text `key` is kept: `key` itself when it is 1-64
/// letters, digits, `.`, `_` and `-` not starting with `.` or `-`;
/// otherwise `id-` and 16 hex digits of its 64-bit FNV-1a hash.
std::string file_stem(std::string_view key);

/// A question's `must_cite` field: the sources a good answer cites (file
/// names or URLs, see cites_expected()); empty without one.
std::vector<std::string> must_cite(const question& q);

/// Whether a cited source (its `url` and `title`) is the expected source
/// `expected`: the URL equals it, or the URL's path (a file:// URL's local
/// path, percent-decoded) ends with `/expected`, or the title equals it.
bool cites_expected(const std::string& url, const std::string& title, const std::string& expected);

} // namespace quarry::app::eval
