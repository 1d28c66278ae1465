// Quarry's one SQLite statement wrapper, for the research store and the corpus
// index: a statement prepared for one use site (finalised with it) or taken
// from a connection's cache (reset and unbound after its use), with binds
// that copy nothing, the first error of preparing or binding kept, and
// columns read as all their bytes.

#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace quarry::sqlite {

/// Prepared statements of one connection, by SQL text (SQLite's
/// `SQLITE_PREPARE_PERSISTENT`). Only fixed SQL goes in (never user text),
/// so the cache stays small.
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

/// One statement: prepared here and finalised on destruction, or borrowed
/// from a statement_cache and reset (bindings cleared) on destruction, so
/// that no statement keeps a read transaction open.
class statement {
public:
  /// Prepares `sql` on `db`; status() says whether it worked.
  statement(sqlite3* db, std::string_view sql) : owned_(true) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
    if (rc_ != SQLITE_OK) {
      sqlite3_finalize(stmt_);
      stmt_ = nullptr;
    } else if (stmt_ == nullptr) {
      rc_ = SQLITE_MISUSE; // empty SQL: a bug of the caller
    }
  }

  /// The cached statement for `sql`.
  statement(statement_cache& cache, const std::string& sql) {
    stmt_ = cache.get(sql, rc_);
  }

  ~statement() {
    if (stmt_ == nullptr)
      return;
    if (owned_) {
      sqlite3_finalize(stmt_);
    } else {
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

  /// Whether the statement was prepared.
  bool ok() const noexcept {
    return stmt_ != nullptr;
  }

  sqlite3_stmt* get() const noexcept {
    return stmt_;
  }

  /// Makes the statement ready to run again: reset, bindings cleared, the
  /// binding error forgotten.
  void reset() {
    if (stmt_ == nullptr)
      return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    rc_ = SQLITE_OK;
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
    note(sqlite3_bind_text64(stmt_, i, p, static_cast<sqlite3_uint64>(x.size()), SQLITE_STATIC,
                             SQLITE_UTF8));
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

  /// All bytes of a text column without copying them: valid until the next
  /// step, reset or destruction of the statement.
  std::string_view view_at(int i) const {
    const auto* p = sqlite3_column_blob(stmt_, i);
    auto n = sqlite3_column_bytes(stmt_, i);
    if (p == nullptr || n <= 0)
      return {};
    return {static_cast<const char*>(p), static_cast<size_t>(n)};
  }

private:
  void note(int rc) {
    if (rc != SQLITE_OK && rc_ == SQLITE_OK)
      rc_ = rc;
  }

  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
  bool owned_ = false;
};

} // namespace quarry::sqlite
