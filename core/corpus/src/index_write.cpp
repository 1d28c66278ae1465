// The writes of the corpus index: a batch of queued writes committed in one
// short transaction (documents, passages, their full-text entries), and the
// refresh of the table of common terms' document frequencies.

#include "index_internal.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::corpus {

using detail::db_error;
using detail::exec;
using detail::query_int;
using detail::statement;
using detail::stem_language;

bool corpus_index::write_batch(std::vector<pending_write>& batch, update_result& result) {
  auto fail = [&](const std::string& what) {
    result.failure = db_error(db_, what);
    exec(db_, "ROLLBACK");
    return false;
  };
  if (!exec(db_, "BEGIN IMMEDIATE")) {
    result.failure = db_error(db_, "cannot start a transaction");
    return false;
  }
  statement find{db_, "SELECT id, hash FROM documents WHERE path=?1"};
  statement touch{db_, "UPDATE documents SET mtime=?2, size=?3 WHERE id=?1"};
  statement insert_doc{db_, "INSERT INTO documents(path, title, mtime, size, "
                            "hash, date, date_source, body, language) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"};
  statement update_doc{db_, "UPDATE documents SET title=?2, mtime=?3, "
                            "size=?4, hash=?5, date=?6, date_source=?7, "
                            "body=?8, language=?9 WHERE id=?1"};
  statement old_body{db_, "SELECT body, language, title FROM documents "
                          "WHERE id=?1"};
  statement old_passages{db_, "SELECT id, start, length, heading FROM "
                              "passages WHERE document_id=?1"};
  statement unindex{db_, "INSERT INTO passages_fts(passages_fts, rowid, "
                         "heading, body) VALUES ('delete', ?1, ?2, ?3)"};
  statement unindex_title{db_, "INSERT INTO titles_fts(titles_fts, rowid, "
                               "title) VALUES ('delete', ?1, ?2)"};
  statement index_title{db_, "INSERT INTO titles_fts(rowid, title) "
                             "VALUES (?1, ?2)"};
  statement drop_passages{db_, "DELETE FROM passages WHERE document_id=?1"};
  statement drop_doc{db_, "DELETE FROM documents WHERE id=?1"};
  statement insert_passage{db_, "INSERT INTO passages(document_id, start, "
                                "length, heading) VALUES (?1, ?2, ?3, ?4)"};
  statement index_passage{db_, "INSERT INTO passages_fts(rowid, heading, "
                               "body) VALUES (?1, ?2, ?3)"};
  if (!find.ok() || !touch.ok() || !insert_doc.ok() || !update_doc.ok() || !old_body.ok()
      || !old_passages.ok() || !unindex.ok() || !drop_passages.ok() || !drop_doc.ok()
      || !insert_passage.ok() || !index_passage.ok() || !unindex_title.ok() || !index_title.ok())
    return fail("cannot prepare the update");
  bool ok = true;
  size_t passages_changed = 0;
  auto run = [&](statement& st) {
    auto rc = st.step();
    st.reset();
    if (rc != SQLITE_DONE)
      ok = false;
  };
  // Takes a document's title and passages out of the full-text indexes (a
  // contentless FTS5 table needs the text that was indexed) and deletes the
  // passages.
  auto drop_all = [&](int64_t id) {
    std::string body;
    old_body.bind(1, id);
    if (old_body.step() == SQLITE_ROW) {
      body = old_body.text_at(0);
      // Deleted with the tokens it was indexed with.
      state_->languages->document_language = stem_language(old_body.text_at(1));
      auto old_title = old_body.text_at(2);
      unindex_title.bind(1, id);
      unindex_title.bind(2, old_title);
      run(unindex_title);
    }
    old_body.reset();
    old_passages.bind(1, id);
    int rc = SQLITE_ROW;
    while (ok && (rc = old_passages.step()) == SQLITE_ROW) {
      auto start = static_cast<size_t>(old_passages.int_at(1));
      auto length = static_cast<size_t>(old_passages.int_at(2));
      if (start > body.size() || length > body.size() - start) {
        ok = false;
        break;
      }
      auto heading = old_passages.text_at(3);
      unindex.bind(1, old_passages.int_at(0));
      unindex.bind(2, heading);
      unindex.bind(3, std::string_view{body}.substr(start, length));
      run(unindex);
      ++passages_changed;
    }
    if (rc != SQLITE_DONE)
      ok = false;
    old_passages.reset();
    drop_passages.bind(1, id);
    run(drop_passages);
  };
  for (auto& w : batch) {
    if (!ok)
      break;
    // What the index holds now, under the write lock (another connection
    // may have written the same file since the update began).
    find.bind(1, w.path);
    int64_t id = 0;
    std::string hash;
    if (find.step() == SQLITE_ROW) {
      id = find.int_at(0);
      hash = find.text_at(1);
    }
    find.reset();
    if (w.kind == pending_write::upsert && id != 0 && hash == w.hash) {
      w.kind = pending_write::touch;
      ++result.unchanged;
    }
    switch (w.kind) {
      case pending_write::touch:
        if (id != 0) {
          touch.bind(1, id);
          touch.bind(2, w.mtime);
          touch.bind(3, w.size);
          run(touch);
        }
        break;
      case pending_write::remove:
        if (id != 0) {
          drop_all(id);
          drop_doc.bind(1, id);
          run(drop_doc);
          ++result.removed;
        }
        break;
      case pending_write::upsert: {
        if (id != 0) {
          drop_all(id);
          update_doc.bind(1, id);
          update_doc.bind(2, w.title);
          update_doc.bind(3, w.mtime);
          update_doc.bind(4, w.size);
          update_doc.bind(5, w.hash);
          update_doc.bind(6, w.date);
          update_doc.bind(7, w.date_source);
          update_doc.bind(8, w.text);
          update_doc.bind(9, w.language);
          run(update_doc);
          ++result.updated;
        } else {
          insert_doc.bind(1, w.path);
          insert_doc.bind(2, w.title);
          insert_doc.bind(3, w.mtime);
          insert_doc.bind(4, w.size);
          insert_doc.bind(5, w.hash);
          insert_doc.bind(6, w.date);
          insert_doc.bind(7, w.date_source);
          insert_doc.bind(8, w.text);
          insert_doc.bind(9, w.language);
          run(insert_doc);
          id = sqlite3_last_insert_rowid(db_);
          ++result.added;
        }
        std::string_view text = w.text;
        state_->languages->document_language = stem_language(w.language);
        index_title.bind(1, id);
        index_title.bind(2, w.title);
        run(index_title);
        for (const auto& p : w.passages) {
          insert_passage.bind(1, id);
          insert_passage.bind(2, static_cast<int64_t>(p.offset));
          insert_passage.bind(3, static_cast<int64_t>(p.length));
          insert_passage.bind(4, p.heading);
          run(insert_passage);
          index_passage.bind(1, sqlite3_last_insert_rowid(db_));
          index_passage.bind(2, p.heading);
          auto body = text.substr(p.offset, p.length);
          index_passage.bind(3, body);
          // The tokens the reading thread recorded, if it did.
          auto& languages = *state_->languages;
          auto n = static_cast<size_t>(&p - w.passages.data());
          if (n < w.tokens.bounds.size()) {
            const auto& b = w.tokens.bounds[n];
            languages.replay[0] = {p.heading, &w.tokens, b[0], b[1]};
            languages.replay[1] = {body, &w.tokens, b[1], b[2]};
            languages.replay_count = 2;
          }
          run(index_passage);
          languages.replay_count = 0;
          ++result.passages;
          ++passages_changed;
        }
        break;
      }
    }
  }
  statement changed{db_, "UPDATE meta SET value=value+?1 WHERE key='changed'"};
  if (ok && changed.ok()) {
    changed.bind(1, static_cast<int64_t>(passages_changed));
    run(changed);
  }
  if (!ok || !changed.ok() || !exec(db_, "COMMIT"))
    return fail("cannot update the index");
  return true;
}

bool corpus_index::refresh_term_stats() {
  auto changed = query_int(db_, "SELECT value FROM meta WHERE key='changed'");
  auto base = query_int(db_, "SELECT value FROM meta WHERE "
                             "key='stats_passages'");
  if (!changed || !base)
    return false;
  // Document frequencies change IDFs little until a tenth of the index
  // changed; terms missing from the table are counted at query time.
  if (*changed == 0 || *changed * 10 < *base)
    return true;
  auto passages = query_int(db_, "SELECT count(*) FROM passages").value_or(0);
  auto min_df = std::max<int64_t>(64, passages / 1000);
  // Read in a read transaction (the whole index is scanned), then written
  // under the write lock.
  std::vector<std::pair<std::string, int64_t>> common;
  {
    statement st{db_, "SELECT term, doc FROM passages_vocab"};
    if (!st.ok())
      return false;
    int rc = SQLITE_ROW;
    while ((rc = st.step()) == SQLITE_ROW) {
      auto df = st.int_at(1);
      if (df >= min_df)
        common.emplace_back(st.text_at(0), df);
    }
    if (rc != SQLITE_DONE)
      return false;
  }
  if (!exec(db_, "BEGIN IMMEDIATE"))
    return false;
  bool ok = exec(db_, "DELETE FROM terms");
  statement insert{db_, "INSERT INTO terms(term, df) VALUES (?1, ?2)"};
  ok = ok && insert.ok();
  for (const auto& [term, df] : common) {
    if (!ok)
      break;
    insert.bind(1, term);
    insert.bind(2, df);
    ok = insert.step() == SQLITE_DONE;
    insert.reset();
  }
  statement meta{db_, "UPDATE meta SET value=CASE key WHEN 'changed' THEN 0 "
                      "ELSE ?1 END"};
  ok = ok && meta.ok();
  if (ok) {
    meta.bind(1, passages);
    ok = meta.step() == SQLITE_DONE;
  }
  if (!ok || !exec(db_, "COMMIT")) {
    exec(db_, "ROLLBACK");
    return false;
  }
  return true;
}

} // namespace quarry::corpus
