// Fuzz target for the local corpus text helpers: every sanitised query is a
// valid FTS5 MATCH expression, and passages respect their size and shape.

#include "quarry/corpus/text.hpp"

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace quarry::corpus;

namespace {

sqlite3* db = nullptr;
sqlite3_stmt* match = nullptr;

void setup() {
  if (db != nullptr)
    return;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK
      || sqlite3_exec(db,
                      "CREATE VIRTUAL TABLE t USING fts5(heading, body, "
                      "tokenize='porter unicode61 remove_diacritics 2');"
                      "INSERT INTO t VALUES ('Roots', 'water and minerals');",
                      nullptr, nullptr, nullptr)
           != SQLITE_OK
      || sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE t MATCH ?1", -1, &match, nullptr)
           != SQLITE_OK)
    std::abort();
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t non_space(std::string_view x) {
  size_t n = 0;
  for (auto c : x)
    if (!is_space(c))
      ++n;
  return n;
}

void check_query(std::string_view input) {
  auto q = sanitize_fts_query(input);
  if (q.empty())
    return;
  // Shape: "w" OR "w" ... with no quote inside a word.
  size_t i = 0;
  while (true) {
    if (q[i] != '"')
      std::abort();
    auto end = q.find('"', i + 1);
    if (end == std::string::npos || end == i + 1)
      std::abort();
    i = end + 1;
    if (i == q.size())
      break;
    if (q.compare(i, 4, " OR ") != 0)
      std::abort();
    i += 4;
  }
  sqlite3_reset(match);
  sqlite3_bind_text(match, 1, q.data(), static_cast<int>(q.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(match) != SQLITE_ROW)
    std::abort(); // FTS5 rejected the expression
}

void check_passages(std::string_view input, size_t max_chars) {
  size_t total = 0;
  for (const auto& p : split_passages(input, max_chars)) {
    if (p.text.empty() || p.text.size() > max_chars || is_space(p.text.front())
        || is_space(p.text.back()))
      std::abort();
    total += non_space(p.text);
  }
  if (total > non_space(input))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  setup();
  std::string_view input{reinterpret_cast<const char*>(data), size};
  check_query(input);
  auto max_chars = size > 0 ? 16 + data[0] % 200 : 2000;
  check_passages(input, max_chars);
  content_hash(input);
  auto url = file_url(input);
  if (url.rfind("file://", 0) != 0)
    std::abort();
  // A file URL of a path gives the path back (`.` and `..` segments are
  // resolved, so only for paths without them).
  if (!input.empty() && input.front() == '/' && input.find('\0') == std::string_view::npos
      && input.find("/.") == std::string_view::npos && path_from_file_url(url) != input)
    std::abort();
  (void)path_from_file_url(input);
  return 0;
}
