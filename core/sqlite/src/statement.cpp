// The statement cache of quarry/sqlite/statement.hpp.

#include "quarry/sqlite/statement.hpp"

namespace quarry::sqlite {

statement_cache::~statement_cache() {
  for (auto& entry : cache_)
    sqlite3_finalize(entry.second);
}

sqlite3_stmt* statement_cache::get(const std::string& sql, int& rc) {
  if (auto i = cache_.find(sql); i != cache_.end()) {
    rc = SQLITE_OK;
    return i->second;
  }
  sqlite3_stmt* stmt = nullptr;
  rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                          &stmt, nullptr);
  if (rc != SQLITE_OK || stmt == nullptr) {
    sqlite3_finalize(stmt);
    if (rc == SQLITE_OK)
      rc = SQLITE_MISUSE; // empty SQL: a bug of the caller
    return nullptr;
  }
  cache_.emplace(sql, stmt);
  return stmt;
}

} // namespace quarry::sqlite
