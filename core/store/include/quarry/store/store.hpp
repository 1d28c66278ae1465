// The research store: one SQLite database (WAL, versioned migrations) that
// keeps every session, its packets, the documents read with their text, the
// citations, the reports, usage and the checkpoints a session resumes from.
//
// No CAF here: the store actor (actors/) batches writes and calls this class
// from a thread of its own; the CLI reads it directly.

#pragma once

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

struct sqlite3;

namespace quarry::store {

/// The schema version this build writes (`PRAGMA user_version`). A database
/// of a newer version is refused; an older one is migrated step by step,
/// each step in one transaction.
inline constexpr int schema_version = 4;

/// `PRAGMA application_id` of a Quarry research store ("QRST").
inline constexpr int application_id = 0x51525354;

/// Where a session stands.
enum class session_state : uint8_t {
  /// Created, not started yet.
  pending,
  /// Research is running.
  running,
  /// Waiting for answers to clarifying questions.
  clarification,
  /// A report was written.
  completed,
  /// The research failed; `error` says why.
  failed,
  /// The user cancelled it.
  cancelled,
  /// The process stopped (signal, crash, kill -9) while it ran; it can be
  /// resumed from its last checkpoint.
  interrupted,
};

/// `pending`, `running`, ... as stored and shown.
const char* to_string(session_state s);
/// The state named `name`, if any.
std::optional<session_state> session_state_from(std::string_view name);

/// One research session.
struct session_row {
  /// `q` and 16 lower-case hex digits (make_session_id()).
  std::string id;
  /// The session this one follows up, or empty.
  std::string parent_id;
  std::string question;
  /// The options it runs with (strategy, depth, limits; the API's and
  /// `quarry research`'s options as JSON).
  nlohmann::json options = nlohmann::json::object();
  session_state state = session_state::pending;
  /// Why it failed or was interrupted; empty otherwise.
  std::string error;
  /// Milliseconds since the Unix epoch.
  int64_t created_at = 0;
  int64_t updated_at = 0;
  /// 0 while it has not finished.
  int64_t finished_at = 0;
  /// The last packet's seq (0 for none).
  uint64_t last_seq = 0;
};

/// A document that was read, with the text the model saw.
struct document_row {
  std::string document_id;
  std::string url;
  std::string title;
  /// The text that was read (the whole content, or the snippet when the page
  /// was never opened).
  std::string text;
  /// SHA-256 of `text`, hex.
  std::string sha256;
  /// Milliseconds since the Unix epoch.
  int64_t fetched_at = 0;
  /// `web`, `internal`, ... (sdk::document::source_type).
  std::string source_type;
  /// `text` is a search engine's snippet: the page was never opened. A read
  /// text replaces a snippet even when it is shorter.
  bool snippet_only = false;
};

/// A citation number of a session's global numbering.
struct citation_row {
  int number = 0;
  std::string document_id;
};

/// A cited source: a citation number with its document's title and URL,
/// without the text (for lists of sources).
struct source_row {
  int number = 0;
  std::string document_id;
  /// Empty when the document was not stored.
  std::string title;
  std::string url;
  /// Only the document's search snippet is stored (document_row).
  bool snippet_only = false;
};

/// A claim of a final report as the verifier judged it
/// (core::verification::claim_records).
struct claim_row {
  /// The claim's index in the report, from 0.
  int64_t claim = 0;
  /// The sentence without its citation markers.
  std::string text;
  /// Byte range in the stored final report; none for a claim the
  /// verification dropped.
  std::optional<int64_t> report_begin;
  std::optional<int64_t> report_end;
  /// The citation numbers the sentence carried.
  std::vector<int> citations;
  /// `supported`, `partly_supported`, `unsupported`, `no_evidence`,
  /// `unverified`.
  std::string verdict;
  /// `lexical` or `model`; empty when nobody judged the claim.
  std::string judge;
  /// The number it was re-cited to, if it was.
  std::optional<int> recited_to;
  /// The evidence: citation number, document and byte range in that
  /// document's stored text (documents.text), and the quote; none without
  /// evidence.
  std::optional<int> source;
  std::string document_id;
  std::optional<int64_t> evidence_begin;
  std::optional<int64_t> evidence_end;
  std::string evidence;
  /// The evidence is a search snippet only.
  bool snippet_only = false;
  /// Milliseconds since the Unix epoch.
  int64_t created_at = 0;
};

/// A claim from one object of core::verification::claim_records' array;
/// nothing when it lacks an `id` or a `verdict`.
std::optional<claim_row> claim_from_json(const nlohmann::json& j);

/// The claim as the API and `quarry sessions show --claims --json` give it
/// (claim_records' fields, and `created_at` in milliseconds).
nlohmann::json to_json(const claim_row& c);

/// A report: an agent's intermediate report or the final one.
struct report_row {
  /// `intermediate` or `final`.
  std::string kind;
  /// The agent's tab (intermediate reports), 0 for the final report.
  int tab = 0;
  int turn = 0;
  /// Markdown.
  std::string text;
  int64_t created_at = 0;
};

/// Tokens and cost of one LLM call.
struct usage_row {
  std::string role;
  /// The provider instance and the model that answered (empty in rows of
  /// schema 3 and before; the model is empty for the offline provider).
  std::string provider;
  std::string model;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  /// US dollars; 0 unless `cost_basis` is `priced`.
  double cost = 0;
  /// `priced`, `unpriced` (no price for the model: the cost is unknown) or
  /// `offline` (no model ran), as core::cost_basis names them.
  std::string cost_basis = "priced";
};

/// The usage of one session by role, provider, model and cost basis.
struct usage_group {
  std::string role;
  std::string provider;
  std::string model;
  std::string cost_basis;
  int64_t calls = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost = 0;
};

/// Usage summed over a session (or over all sessions).
struct usage_total {
  int64_t calls = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost = 0;
};

/// The state a session resumes from: written after each orchestrator cycle,
/// in the same transaction as the citations it numbers.
struct checkpoint_row {
  /// Increases with each checkpoint of a session.
  int64_t number = 0;
  /// The strategy's own state (history, plan, citation map, cycle, phase) as
  /// JSON; the store keeps it as it is.
  nlohmann::json state;
  /// The last packet's seq when it was taken.
  uint64_t last_seq = 0;
  int64_t created_at = 0;
};

/// One packet as stored: the encoded JSON line (core::encode) and its seq.
struct packet_row {
  uint64_t seq = 0;
  std::string line;
};

/// Everything one transaction writes. The store actor collects the writes of
/// a few milliseconds into one batch; all of a batch is written, or none of
/// it.
struct batch {
  /// New sessions. Their last_seq is ignored (the packets set it); a
  /// created_at of 0 means now, an updated_at of 0 the created_at. A
  /// parent_id must name a stored session (or one earlier in the batch).
  std::vector<session_row> new_sessions;
  struct packet_write {
    std::string session_id;
    packet_row packet;
  };
  /// Packets, in seq order per session. Each seq must be the session's last
  /// seq + 1, else the whole batch is refused (errc::bad_request) and
  /// nothing is written. A session's packets of one batch are stored as one
  /// row (a run of lines, up to 64 KiB); store::packets reads them one by one.
  std::vector<packet_write> packets;
  struct document_write {
    std::string session_id;
    document_row document;
  };
  /// Documents, inserted or, for a known document_id, updated when the new
  /// text is longer (a page read after its snippet was stored). An empty or
  /// malformed sha256 is computed from the text; a fetched_at of 0 is now.
  std::vector<document_write> documents;
  struct report_write {
    std::string session_id;
    report_row report;
  };
  std::vector<report_write> reports;
  struct usage_write {
    std::string session_id;
    usage_row usage;
  };
  std::vector<usage_write> usage;
  struct checkpoint_write {
    std::string session_id;
    checkpoint_row checkpoint;
    /// The citations numbered up to this checkpoint (all of them; the store
    /// adds those it does not have; a number already given to another
    /// document refuses the batch).
    std::vector<citation_row> citations;
    /// Only the citations are stored, no checkpoint (`checkpoint` is not
    /// read): the numbers a research's report uses when it ends after its
    /// last checkpoint (a cancelled research's findings).
    bool citations_only = false;
  };
  std::vector<checkpoint_write> checkpoints;
  struct claims_write {
    std::string session_id;
    /// The claims of the session's final report: they replace the ones
    /// stored (a resumed research's new report brings its own). Claim
    /// indexes must differ, verdicts be known, ranges be from 0 and ordered.
    std::vector<claim_row> claims;
  };
  std::vector<claims_write> claims;
  struct state_write {
    std::string session_id;
    session_state state = session_state::running;
    std::string error;
  };
  /// State changes, applied after everything else of the batch.
  std::vector<state_write> states;
  struct options_write {
    std::string session_id;
    /// A JSON object.
    nlohmann::json options;
  };
  /// New options of sessions (e.g. with the answers to their clarifying
  /// questions, so a resume runs with them); an options value that is not an
  /// object refuses the batch.
  std::vector<options_write> options;

  /// Whether there is nothing to write.
  bool empty() const noexcept;
  /// Number of writes in the batch.
  size_t size() const noexcept;
};

/// The most words of session_filter::search that are used; later ones are
/// ignored.
inline constexpr size_t max_search_words = 16;

/// The checkpoints kept per session: older ones are deleted when a new one is
/// written (only the latest is ever read; the others are a margin).
inline constexpr int64_t kept_checkpoints = 3;

/// What list_sessions() returns: newest first.
struct session_page {
  std::vector<session_row> sessions;
  /// Pass as `before` for the next page; empty when there is none.
  std::string next_cursor;
};

/// Filters of list_sessions().
struct session_filter {
  /// Words that must all appear in the question (case-insensitive), or empty.
  /// A word matches the words of the question that begin with it ("photo"
  /// finds "photosynthesis"); letters and digits make words, everything else
  /// separates them, and the text is only ever data (never query syntax).
  /// At most max_search_words words are used; a search without any word
  /// (only punctuation) finds nothing.
  std::string search;
  /// Only sessions in this state.
  std::optional<session_state> state;
  /// Page size, 1..500.
  int limit = 50;
  /// The cursor of the previous page, or empty for the first. A cursor that
  /// list_sessions() did not produce gives an empty page.
  std::string before;
};

/// Options of store::open().
struct open_options {
  /// Open without writing (`quarry sessions list/show/export`): no
  /// migration; a database that needs one is refused.
  bool read_only = false;
  /// SQLite VFS to use (tests inject faults through their own); empty for
  /// the default.
  std::string vfs;
  /// How long a write waits for another connection that writes.
  int busy_wait_ms = 10'000;
};

/// What a read of the store gives: the value (an empty optional or list
/// when nothing matched), or the error that kept the store from reading it:
/// a corrupt page (errc::internal), an I/O error (errc::internal), a lock
/// held past the busy wait (errc::busy). A failed read is never reported as
/// "nothing there".
template <class T>
class result {
public:
  result(T value) : value_(std::move(value)) {
    // nop
  }

  result(sdk::error err) : value_(std::move(err)) {
    // nop
  }

  /// Whether the read succeeded.
  explicit operator bool() const noexcept {
    return value_.index() == 0;
  }

  /// The value; only when the read succeeded.
  T& operator*() & {
    return std::get<0>(value_);
  }

  const T& operator*() const& {
    return std::get<0>(value_);
  }

  T&& operator*() && {
    return std::get<0>(std::move(value_));
  }

  T* operator->() {
    return &std::get<0>(value_);
  }

  const T* operator->() const {
    return &std::get<0>(value_);
  }

  /// The error; only when the read failed.
  const sdk::error& error() const {
    return std::get<1>(value_);
  }

private:
  std::variant<T, sdk::error> value_;
};

/// Whether `text` is a cursor that list_sessions() could have produced (a
/// `next_cursor`); any other text as session_filter::before finds nothing,
/// which an API answers as a bad request.
bool is_cursor(std::string_view text);

/// A session id: `q` and 16 hex digits from a random source.
std::string make_session_id();

/// Whether `id` has the form make_session_id() produces (checked before any
/// id from a request reaches a query, and in messages).
bool is_session_id(std::string_view id);

/// The research store. One connection; not thread-safe (one thread at a
/// time: the store actor's, or the CLI's).
class store {
public:
  /// Opens or creates the database at `path` (its folder is created),
  /// switches it to WAL and migrates it. Errors give the reason (not a
  /// Quarry store, a newer schema, read-only, I/O error, full disk) without
  /// the path. Any number of connections, in this process and in others,
  /// may use one file at once: the file is only ever opened through SQLite.
  static std::variant<std::unique_ptr<store>, sdk::error> open(const std::string& path,
                                                               const open_options& opts = {});

  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  /// Writes a batch in one transaction. On any error (SQLITE_FULL, I/O,
  /// read-only, constraint) the transaction is rolled back: the database
  /// keeps exactly what it had, and the error says what happened
  /// (errc::too_large for a full disk, errc::refused for read-only,
  /// errc::internal for I/O, errc::bad_request for a seq gap or a
  /// renumbered citation, an unknown session, an id that is not a session
  /// id, a checkpoint whose number does not increase or whose last_seq is
  /// beyond the session's last packet, a report kind other than
  /// `intermediate` or `final`). A store opened read-only refuses every
  /// batch (errc::refused). The store stays usable after a failed write.
  std::optional<sdk::error> write(const batch& b);

  // Reads. Each is one statement (one snapshot); an id that is not a
  // session id finds nothing. An error says what kept the store from
  // reading (see result).

  result<std::optional<session_row>> session(const std::string& id);
  result<session_page> list_sessions(const session_filter& f);
  /// Packets with seq >= from_seq, at most `limit`, in order.
  result<std::vector<packet_row>> packets(const std::string& id, uint64_t from_seq = 1,
                                          size_t limit = SIZE_MAX);
  result<std::vector<document_row>> documents(const std::string& id);
  result<std::vector<citation_row>> citations(const std::string& id);
  /// The citations with their documents' titles and URLs, by number.
  result<std::vector<source_row>> sources(const std::string& id);
  result<std::vector<report_row>> reports(const std::string& id);
  /// The final report, if one was written.
  result<std::optional<report_row>> final_report(const std::string& id);
  result<std::optional<checkpoint_row>> latest_checkpoint(const std::string& id);
  /// The claims of the final report, by index.
  result<std::vector<claim_row>> claims(const std::string& id);
  /// Usage of session `id`, or of all sessions when `id` is empty.
  result<usage_total> usage(const std::string& id);
  /// Usage of session `id` by role, provider, model and cost basis, in the
  /// order each was first used.
  result<std::vector<usage_group>> usage_groups(const std::string& id);
  /// The follow-ups of a session, oldest first.
  result<std::vector<session_row>> children(const std::string& id);
  /// Number of sessions in each state: every state, in the order of the
  /// enum, zeros included.
  result<std::vector<std::pair<session_state, int64_t>>> count_by_state();

  /// Removes a session and everything it owns (packets, documents, ...); its
  /// follow-ups keep their rows with parent_id cleared. False if unknown.
  std::variant<bool, sdk::error> remove(const std::string& id);

  /// Marks every `running` or `pending` session `interrupted` (a process
  /// that died left them so); returns their ids. Called when a process that
  /// runs sessions starts.
  std::variant<std::vector<std::string>, sdk::error> mark_interrupted(const std::string& why);

  /// The database file. Error messages of the store never name it (they
  /// reach HTTP clients); a command line adds it where it helps.
  const std::string& path() const noexcept;

private:
  store(sqlite3* db, std::string path, bool read_only);
  /// The prepared statements cached on the connection.
  struct statements;
  sqlite3* db_;
  std::string path_;
  bool read_only_;
  std::unique_ptr<statements> stmts_;
};

} // namespace quarry::store
