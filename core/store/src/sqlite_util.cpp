// SQLite helpers of the research store.

#include "sqlite_util.hpp"

#include <thread>

namespace quarry::store::detail {

int exec_retrying(sqlite3* db, const char* sql, int wait_ms) {
  auto until = std::chrono::steady_clock::now()
               + std::chrono::milliseconds{wait_ms > 0 ? wait_ms : 0};
  for (;;) {
    auto rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK || !is_busy(rc) || std::chrono::steady_clock::now() >= until)
      return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

sdk::error db_error(std::string_view what, int rc, sqlite3* db) {
  sdk::errc code = sdk::errc::internal;
  const char* reason = "a database error";
  switch (rc & 0xFF) {
    case SQLITE_FULL:
      code = sdk::errc::too_large;
      reason = "the disk is full";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      code = sdk::errc::refused;
      reason = "the database is read-only";
      break;
    case SQLITE_IOERR:
      code = sdk::errc::internal;
      reason = "an I/O error";
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      code = sdk::errc::internal;
      reason = "the database is corrupt";
      break;
    case SQLITE_CONSTRAINT:
      code = sdk::errc::bad_request;
      reason = "a constraint failed";
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      code = sdk::errc::busy;
      reason = "locked by another connection for too long";
      break;
    case SQLITE_TOOBIG:
      code = sdk::errc::too_large;
      reason = "a value is too large";
      break;
    case SQLITE_NOMEM:
      code = sdk::errc::internal;
      reason = "out of memory";
      break;
    case SQLITE_CANTOPEN:
      code = sdk::errc::internal;
      reason = "cannot open the file";
      break;
    default:
      break;
  }
  std::string msg = "research store: ";
  msg += what;
  msg += ": ";
  msg += reason;
  // SQLite's own words, when they belong to this failure.
  const char* detail = sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_extended_errcode(db) == rc)
    detail = sqlite3_errmsg(db);
  if (detail != nullptr && *detail != '\0') {
    msg += " (";
    msg += detail;
    msg += ")";
  }
  return sdk::make_error(code, std::move(msg));
}

} // namespace quarry::store::detail
