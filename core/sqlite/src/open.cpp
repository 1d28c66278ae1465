// Opening a SQLite file without ever opening its descriptor outside SQLite.

#include "quarry/sqlite/open.hpp"

#include <cstring>

namespace quarry::sqlite {

opened_database open_database(const std::string& path, int flags, const char* vfs) {
  opened_database out;
  sqlite3* db = nullptr;
  out.rc = sqlite3_open_v2(path.c_str(), &db, flags, vfs);
  if (out.rc != SQLITE_OK) {
    out.message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(out.rc);
    sqlite3_close_v2(db);
    return out;
  }
  // The pager opened the file when the connection was made; reading its
  // header through that handle takes no lock and reads no journal.
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK
      || file == nullptr || file->pMethods == nullptr) {
    // Not opened yet (SQLite opens lazily in some builds): nothing to read
    // it with but SQLite, which checks the header itself on the first read.
    out.db = db;
    out.kind = file_kind::database;
    return out;
  }
  sqlite3_int64 size = 0;
  if (file->pMethods->xFileSize(file, &size) != SQLITE_OK) {
    out.rc = SQLITE_IOERR;
    out.message = "cannot read the file's size";
    sqlite3_close_v2(db);
    return out;
  }
  if (size == 0) {
    out.db = db;
    out.kind = file_kind::empty;
    return out;
  }
  char head[sizeof(magic)] = {};
  // A file shorter than the header reads as SQLITE_IOERR_SHORT_READ with
  // the rest zeroed: not a database.
  auto rc = file->pMethods->xRead(file, head, sizeof(head), 0);
  if ((rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ)
      && (rc != SQLITE_OK || std::memcmp(head, magic, sizeof(magic)) != 0)) {
    out.kind = file_kind::other;
    sqlite3_close_v2(db);
    return out;
  }
  if (rc != SQLITE_OK) {
    out.rc = rc;
    out.message = sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return out;
  }
  out.db = db;
  out.kind = file_kind::database;
  return out;
}

} // namespace quarry::sqlite
