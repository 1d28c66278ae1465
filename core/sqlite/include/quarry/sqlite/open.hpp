// Opening a SQLite file that other connections, in this process or in
// others, may be using.
//
// POSIX advisory locks belong to a process and an inode, not to a
// descriptor: closing *any* descriptor of a database file drops every lock
// the process holds on it ("How To Corrupt An SQLite Database File", 2.2,
// https://www.sqlite.org/howtocorrupt.html). A header check with
// std::ifstream next to an open connection therefore unlocks that
// connection, and another process that then closes its own connection
// believes it is the last user, checkpoints and deletes the `-wal` and
// `-shm` files the first process still writes into. SQLite's unix VFS keeps
// one record per inode for all connections of the process and defers such a
// close; this helper reads through it and never opens the file itself.

#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

namespace quarry::sqlite {

/// The first 16 bytes of every SQLite database file (file format, 1.3.1).
inline constexpr char magic[] = "SQLite format 3";

/// What open_database() found.
enum class file_kind : uint8_t {
  /// A SQLite database (its header reads "SQLite format 3\0").
  database,
  /// An empty file, or one SQLite just created: a new database.
  empty,
  /// Something else: the connection was closed before SQLite read or wrote
  /// anything of it.
  other,
};

/// A connection and what the file held when it was opened.
struct opened_database {
  /// SQLITE_OK, or the error of opening (then `db` is null).
  int rc = SQLITE_OK;
  /// The connection, owned by the caller (close it with sqlite3_close_v2);
  /// null unless `rc` is SQLITE_OK and `kind` is not `other`.
  sqlite3* db = nullptr;
  file_kind kind = file_kind::empty;
  /// SQLite's words for a failed open ("unable to open database file").
  std::string message;
};

/// Opens `path` like sqlite3_open_v2() (`flags`, `vfs`: null for the
/// default) and, before any statement runs, reads the file's header through
/// the connection's own file handle (SQLITE_FCNTL_FILE_POINTER), so that no
/// descriptor of the file is ever opened or closed outside SQLite. A file
/// that is neither empty nor a SQLite database is reported as
/// file_kind::other with the connection closed: SQLite has not locked,
/// read past the header, or written it, and no hot journal was rolled back
/// into it. The header check is also what keeps a file of another kind
/// (someone's notes given as `store.path`) untouched.
opened_database open_database(const std::string& path, int flags, const char* vfs = nullptr);

} // namespace quarry::sqlite
