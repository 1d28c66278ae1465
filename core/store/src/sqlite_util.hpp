// SQLite helpers of the research store: a cache of prepared statements, a
// statement guard that resets what it used, error classification.

#pragma once

#include "quarry/sdk/types.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace quarry::store::detail {

/// Prepared statements of one connection, by SQL text. Only fixed SQL of the
/// store goes in (never user text), so the cache stays small.
class statement_cache {
public:
  explicit statement_cache(sqlite3* db) : db_(db) {
    // nop
  }

  ~statement_cache();

  statement_cache(const statement_cache&) = delete;
  statement_cache& operator=(const statement_cache&) = delete;

  /// The prepared statement for `sql`, or nullptr (then `rc` is the error).
  sqlite3_stmt* get(const std::string& sql, int& rc);

  sqlite3* db() const noexcept {
    return db_;
  }

private:
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

/// One use of a cached statement: binds, steps, reads columns, and resets
/// the statement (clearing its bindings) when it goes out of scope, so that
/// no statement keeps a read transaction open.
class statement {
public:
  statement(statement_cache& cache, const std::string& sql) {
    stmt_ = cache.get(sql, rc_);
  }

  ~statement() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }

  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  /// SQLITE_OK, or the first error of preparing or binding.
  int status() const noexcept {
    return rc_;
  }

  void bind(int i, int64_t x) {
    if (stmt_ != nullptr)
      note(sqlite3_bind_int64(stmt_, i, x));
  }

  void bind_double(int i, double x) {
    if (stmt_ != nullptr)
      note(sqlite3_bind_double(stmt_, i, x));
  }

  void bind_null(int i) {
    if (stmt_ != nullptr)
      note(sqlite3_bind_null(stmt_, i));
  }

  /// A temporary string would be gone before the step.
  void bind(int i, std::string&& x) = delete;

  /// Binds text (any bytes, NUL included) without copying: `x` must outlive
  /// the step.
  void bind(int i, std::string_view x) {
    if (stmt_ == nullptr)
      return;
    const char* p = x.data() != nullptr ? x.data() : "";
    note(sqlite3_bind_text64(stmt_, i, p, static_cast<sqlite3_uint64>(x.size()),
                             SQLITE_STATIC, SQLITE_UTF8));
  }

  /// SQLITE_ROW, SQLITE_DONE or an error code (also a preparing or binding
  /// error).
  int step() {
    if (rc_ != SQLITE_OK)
      return rc_;
    return sqlite3_step(stmt_);
  }

  int64_t int_at(int i) const {
    return sqlite3_column_int64(stmt_, i);
  }

  double double_at(int i) const {
    return sqlite3_column_double(stmt_, i);
  }

  bool null_at(int i) const {
    return sqlite3_column_type(stmt_, i) == SQLITE_NULL;
  }

  /// All bytes of a text column (NUL bytes included).
  std::string text_at(int i) const {
    const auto* p = sqlite3_column_blob(stmt_, i);
    auto n = sqlite3_column_bytes(stmt_, i);
    if (p == nullptr || n <= 0)
      return {};
    return std::string{static_cast<const char*>(p), static_cast<size_t>(n)};
  }

private:
  void note(int rc) {
    if (rc != SQLITE_OK && rc_ == SQLITE_OK)
      rc_ = rc;
  }

  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

/// Whether `rc` means another connection holds a lock.
inline bool is_busy(int rc) {
  auto primary = rc & 0xFF;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

/// Runs `sql` (no results), retrying while another connection holds a lock
/// that the busy handler does not wait for (SQLite fails some lock upgrades
/// at once to avoid deadlocks), until `wait_ms` have passed. Returns the
/// SQLite result code.
int exec_retrying(sqlite3* db, const char* sql, int wait_ms);

/// Classifies a SQLite failure: the error names the database, what was being
/// done and why (a full disk, a read-only file, an I/O error, ...).
/// The message starts with "research store: ", never with the file's path:
/// such errors reach HTTP clients, and the CLI adds the path itself.
sdk::error db_error(std::string_view what, int rc, sqlite3* db);

} // namespace quarry::store::detail
