// The local corpus index: a SQLite database with an FTS5 table of passages
// of local Markdown, text, HTML and PDF files, updated incrementally.

#pragma once

#include "quarry/fetch/fetch.hpp"
#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace quarry::corpus {

/// The schema version stored in `PRAGMA user_version`.
/// Version 2 stores each text once, with a contentless FTS5 index and
/// document dates; version 3 adds document languages, Snowball stemming and
/// CJK character pairs (the `quarry` tokenizer) and keeps no passage sizes
/// in the FTS5 index; version 4 adds an index of document titles, which
/// ranks a document whose title holds the query's words higher. A database
/// of an older version is emptied on open and filled again by the next
/// update (the index is derived data).
inline constexpr int schema_version = 4;

/// The `PRAGMA application_id` that marks a Quarry corpus database.
inline constexpr int application_id = 0x51525259; // "QRRY"

/// How long opening or updating a database waits for another process (or
/// connection) that is writing it, e.g. a second `quarry index` run.
inline constexpr int busy_wait_ms = 10 * 60 * 1000;

/// How far an update has come (see @ref update_options::progress).
struct update_progress {
  /// Files looked at (indexed, unchanged or skipped) of the files found.
  size_t files_done = 0;
  size_t files_total = 0;
  /// Their sizes, in bytes.
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

/// Limits of @ref corpus_index::update: the size caps of open_url, so a
/// local file is read only if a fetched page of its size would be.
struct update_options {
  /// Largest Markdown, text or HTML file, in bytes.
  int64_t max_html_bytes = fetch::default_max_html_bytes;
  /// Largest PDF file, in bytes.
  int64_t max_pdf_bytes = fetch::default_max_pdf_bytes;
  /// Called after each file found has been looked at (from the updating
  /// thread, outside any transaction), e.g. to show a rate and an ETA.
  std::function<void(const update_progress&)> progress;
  /// Whether the reading thread tokenizes and stems the passages it reads
  /// (texts up to 4 MB), so that the indexing thread, which holds the
  /// write lock, only inserts them. False tokenizes them as they are
  /// inserted; the index is the same either way.
  bool tokenize_while_reading = true;
  /// Called with each file's path before it is read and extracted (outside
  /// any transaction, on the update's reading thread); a hook for tests.
  std::function<void(const std::string&)> before_read;
};

/// What @ref corpus_index::update did.
struct update_result {
  /// Files indexed for the first time.
  size_t added = 0;
  /// Files whose content changed and that were indexed again.
  size_t updated = 0;
  /// Files removed from the index because they no longer exist.
  size_t removed = 0;
  /// Files skipped because their modification time or content is unchanged.
  size_t unchanged = 0;
  /// Files found but not indexed, each with a note saying why: symbolic
  /// links that lead out of the folder being indexed, FIFOs, sockets and
  /// devices, files over the size caps, binary data in a text file,
  /// unreadable PDF files.
  size_t skipped = 0;
  /// Passages written by this update.
  size_t passages = 0;
  /// Remarks for the user, e.g. skipped files or missing paths.
  std::vector<std::string> notes;
  /// Set when the update failed. Writes are committed in short batches, so
  /// the batches before the failing one are kept; the next update goes on
  /// from there.
  std::optional<sdk::error> failure;
};

/// One search hit: the best passage of one document.
struct search_hit {
  /// The document's id in the index.
  int64_t document_id = 0;
  /// The passage's id in the index.
  int64_t passage_id = 0;
  /// The absolute file path.
  std::string path;
  /// The path as a `file://` URL.
  std::string url;
  std::string title;
  /// The heading above the passage, or empty.
  std::string heading;
  /// A short excerpt of the passage around the matching words.
  std::string snippet;
  /// The whole passage.
  std::string text;
  /// The passage's BM25 score, negated (lower is better, as FTS5 ranks),
  /// heading matches counted twice, plus the bonus for the query's words
  /// near each other and the document's title bonus.
  double score = 0;
  /// The document's date, "YYYY-MM-DD" (UTC), or empty.
  std::string date;
  /// Where the date comes from: "html" (the page's metadata), "pdf" (the
  /// PDF's creation date) or "mtime" (the file's modification time, when
  /// the document gives no date).
  std::string date_source;
  /// The document's language as detected from its text (or declared by an
  /// HTML page): a code of stemmed_languages(), "zh", "ja", "ko", or empty
  /// when unknown (then indexed as English).
  std::string language;
};

/// What @ref corpus_index::search found.
struct search_result {
  /// At most one hit per document, best first.
  std::vector<search_hit> hits;
  /// Set when the search failed.
  std::optional<sdk::error> failure;
};

/// How @ref corpus_index::search ranks beyond the query's own words.
struct search_options {
  /// Pseudo-relevance feedback (RM3: Lavrenko and Croft's relevance model,
  /// mixed with the query as Anserini mixes it): the best passages of the
  /// first ranking's `feedback_documents` best documents give the words
  /// that weigh most in them, and the `feedback_terms` heaviest join the
  /// query with `query_share` of the weight left to the query's own words;
  /// then the search ranks again. 0 documents: one ranking, no feedback.
  /// Anserini's defaults (10, 10, 0.5) raised nDCG@10 by 9 % and
  /// recall@100 by 5 % over a plain BM25 on Cranfield 1400
  /// (bench/README.md, `quarry_bench_retrieval`). Both counts are capped
  /// at 100.
  size_t feedback_documents = 0;
  size_t feedback_terms = 10;
  /// At least 0.05 (a smaller share counts as 0.05); 1 or more keeps the
  /// query as it is (no second ranking).
  double query_share = 0.5;
};

/// A whole indexed document.
struct stored_document {
  int64_t id = 0;
  std::string path;
  std::string url;
  std::string title;
  /// The full extracted text.
  std::string text;
  /// As in @ref search_hit.
  std::string date;
  std::string date_source;
  std::string language;
};

/// One document of the index, as `quarry corpus list` shows it.
struct listed_document {
  int64_t id = 0;
  std::string path;
  std::string title;
  /// The file's size in bytes and modification time (seconds since the
  /// epoch) when it was indexed.
  int64_t size = 0;
  int64_t mtime = 0;
  /// Passages it was split into.
  size_t passages = 0;
};

class corpus_index;

/// What @ref corpus_index::open produced: an index or an error.
struct open_result {
  std::unique_ptr<corpus_index> index;
  std::optional<sdk::error> failure;
};

/// A corpus database. All member functions are thread-safe (serialised) and
/// blocking: call them from the host's blocking pool.
class corpus_index {
public:
  /// Opens the database at `path`, creating it (and its folder) when it does
  /// not exist or is empty. A file that is not a SQLite database, a SQLite
  /// database of another application, or a newer schema gives an error and
  /// is left untouched. A database of an older schema is emptied and set up
  /// anew (it is derived data): the next update indexes the files again. Several processes may open (and create) the same
  /// database at once: the schema is created in one `BEGIN IMMEDIATE`
  /// transaction by whichever comes first, and the others wait for it (up to
  /// @ref busy_wait_ms).
  static open_result open(const std::string& path);

  ~corpus_index();

  corpus_index(const corpus_index&) = delete;
  corpus_index& operator=(const corpus_index&) = delete;

  /// Indexes the files under `paths` (files or folders, recursively; hidden
  /// entries skipped): Markdown (.md, .markdown), text (.txt, .text), HTML
  /// (.html, .htm, .xhtml) and PDF (.pdf); a file of another type named in
  /// `paths` is skipped with a note. Unchanged files are skipped (same
  /// modification time and size, or same content hash); changed files are
  /// indexed again; indexed files under `paths` that no longer exist, or
  /// are now skipped, are removed.
  ///
  /// Files are read and extracted outside any transaction, on a thread of
  /// the update's own that stays up to 128 files (or 128 MB of text) ahead
  /// of the indexing, so both run at once; their writes are committed in short
  /// batches (about 8 MB of text, 512 files or 2 s
  /// of reading), so other connections can write between them even while a
  /// slow PDF is being read. The index's term statistics are refreshed when
  /// an update changed a tenth of its passages.
  ///
  /// The walk never leaves a folder named in `paths`: a symbolic link whose
  /// target lies outside it is skipped with a note; a link to a file inside
  /// it indexes that file once, under its own path; links to folders are
  /// not followed (their files are reached through the folders themselves),
  /// so links cannot loop. FIFOs, sockets and devices are never opened, and
  /// files over the caps of `options` are not read (both skipped with a
  /// note). Files are opened without following a link and without blocking,
  /// so one swapped for a link or a FIFO after the walk is skipped too.
  ///
  /// Markdown and text are decoded to UTF-8 (byte-order mark; invalid
  /// sequences become U+FFFD); text that is binary data
  /// (extract::looks_binary) is skipped with a note, and control characters
  /// other than tab and line feed are removed (extract::clean_text).
  ///
  /// HTML is decoded to UTF-8 (byte-order mark or meta charset) and reduced
  /// to its main content (extract::extract_html), unless that holds less
  /// than a third of the page's visible letters and digits (documentation,
  /// index and FAQ pages, where scoring may keep one section of many): then
  /// the whole page text (extract::html_to_text) is indexed, so nothing is
  /// lost. The title comes from the page's metadata or <title>. PDF text comes from
  /// extract::extract_pdf (60 s per file); a PDF that cannot be read is
  /// skipped with a note and tried again by the next update.
  update_result update(const std::vector<std::string>& paths, const update_options& options = {});

  /// Ranks passages by BM25 against the words of `query` (any text: FTS5
  /// syntax is neutralised; see parse_search_query), with a bonus for the
  /// query's words and phrases near each other in a passage (Büttcher,
  /// Clarke and Lushman's term proximity, SIGIR 2006), and returns the best
  /// passage of up to `limit` documents. Any word may match (OR); words in
  /// double quotes are a phrase that must match; `path:TEXT` or `site:TEXT`
  /// keeps documents whose file path contains TEXT. An empty query finds
  /// nothing. With feedback (`options`), the words the first ranking's best
  /// passages share are added to the query as optional words, and the
  /// documents are ranked again; phrases and path filters still apply.
  search_result search(const std::string& query, size_t limit, const search_options& options = {});

  /// The index terms of `text` as the index's tokenizer gives them for a
  /// query word by word, in order: lower case, stemmed with Snowball in
  /// English (or the corpus's first language), CJK text as pairs of
  /// characters; at most `max_terms`. Stop words are kept (search() drops
  /// those of a query before tokenizing it). For measuring rankings on the
  /// index's own tokens, e.g. a plain BM25 beside search() in a benchmark.
  std::vector<std::string> terms(std::string_view text, size_t max_terms = 64);

  /// Returns the document with id `id`, if it exists.
  std::optional<stored_document> get_document(int64_t id);

  /// Returns the document whose file is `path` (absolute), if it is indexed.
  std::optional<stored_document> find_document(const std::string& path);

  /// Number of documents and passages in the index.
  std::pair<size_t, size_t> size();

  /// The documents in path order, at most `limit` from the `offset`th.
  std::vector<listed_document> documents(size_t limit = SIZE_MAX, size_t offset = 0);

  /// The database file.
  const std::string& path() const noexcept {
    return path_;
  }

private:
  struct token {};

public:
  /// Wraps an open connection; use @ref open instead.
  corpus_index(token, sqlite3* db, std::string path);

private:
  struct pending_write;
  struct search_state;

  /// Commits a batch of queued writes in one short transaction.
  bool write_batch(std::vector<pending_write>& batch, update_result& result);

  /// Refreshes the table of term frequencies the ranking reads.
  bool refresh_term_stats();

  sqlite3* db_;
  std::string path_;
  std::mutex mtx_;
  std::unique_ptr<search_state> state_;
};

} // namespace quarry::corpus
