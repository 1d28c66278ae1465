// Text helpers of the research store: hashes, ids, search words, cursors.

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::store::detail {

/// SHA-256 of `bytes`, 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);

/// Whether `x` has the form of a SHA-256 in hex (64 lower-case hex digits).
bool is_sha256_hex(std::string_view x);

/// An FTS5 query that finds questions holding every word of `search` (at
/// most `max_words`) as a word beginning: each word quoted (`"word"*`), so
/// that no character of the user's text is query syntax. Empty when the text
/// has no words.
std::string fts_query(std::string_view search, size_t max_words);

/// A cursor of list_sessions(): where the last page ended.
struct cursor {
  int64_t created_at = 0;
  std::string id;
};

std::string encode_cursor(const cursor& c);

/// The cursor encoded in `text`, if it is one encode_cursor() wrote.
std::optional<cursor> decode_cursor(std::string_view text);

} // namespace quarry::store::detail
