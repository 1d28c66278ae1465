// SQLite helpers of the research store: the statement wrapper
// (quarry/sqlite/statement.hpp), lock retries, error classification.

#pragma once

#include "quarry/sdk/types.hpp"
#include "quarry/sqlite/statement.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace quarry::store::detail {

using sqlite::statement;
using sqlite::statement_cache;

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
