// The CLI's side of the research store: where it is, the lock that tells a
// running session from one whose process died, and the options a session
// is stored with (so `quarry sessions resume` can run it again).

#pragma once

#include "report_render.hpp"

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace quarry::core {
struct settings;
} // namespace quarry::core

#include "quarry/store/store.hpp"

namespace quarry::app {

/// Quarry's data folder: `runtime.data_dir`, else the per-user data folder
/// (host::default_data_dir).
std::string data_dir_of(const core::settings& cfg);

/// The store's file: `store.path`, else `<data folder>/quarry.db`.
std::string store_path(const core::settings& cfg);

/// Opens the store for writing (`read_only`: for reading); the error names
/// the file.
std::variant<std::shared_ptr<store::store>, std::string> open_store(const core::settings& cfg,
                                                                    bool read_only = false);

/// An exclusive lock on a session, held while a process runs it: one byte of
/// `<store folder>/locks/sessions.lock`, at an offset made from the session
/// id (its 64 bits shifted right by 2), locked with a POSIX record lock
/// (fcntl F_SETLK), so it is released however the process ends (kill -9
/// included). A session stored as `running` whose lock is free was left
/// behind by a process that died. One file serves every session: taking a
/// lock creates nothing (a file per session cost a new inode per research).
///
/// The process keeps the file open for as long as it runs (closing any
/// descriptor of it would release all the process's locks on it) and
/// remembers which sessions it holds, which record locks do not tell apart
/// within one process. Thread-safe.
class session_lock {
public:
  /// Takes the lock; an error says the session runs in another process
  /// (with the pid that holds it), runs in this one, or why the lock file
  /// cannot be opened.
  static std::variant<std::unique_ptr<session_lock>, std::string>
  take(const std::string& store_file, const std::string& session_id);

  /// Whether some process (this one included) holds the lock now.
  static bool held(const std::string& store_file, const std::string& session_id);

  ~session_lock();
  session_lock(const session_lock&) = delete;
  session_lock& operator=(const session_lock&) = delete;

  struct table;

private:
  session_lock(table* t, int64_t offset) : table_(t), offset_(offset) {
  }
  table* table_;
  int64_t offset_;
};

/// What a follow-up carries from the conversation before it, in the two
/// forms the models read it in.
struct conversation_context {
  /// The earlier research (question, report and sources of the session
  /// followed up) as text before the question (question_for_model); the
  /// research agents and the final report read it so.
  std::string text;
  /// The session's thread, oldest first: each earlier question as a user
  /// message and its report as an assistant message, from the fourth last
  /// question on (the question of the session itself makes five, Onyx's
  /// MAX_USER_MESSAGES_FOR_CONTEXT). The clarification, the plan, the
  /// orchestrator and the reflective coordinator read it as messages
  /// (actors::session_spec::conversation).
  std::vector<sdk::chat_message> thread;

  bool empty() const noexcept {
    return text.empty() && thread.empty();
  }
};

/// Earlier questions of a thread a follow-up keeps (with the follow-up's
/// own, core::max_user_messages_for_context).
inline constexpr size_t thread_questions = 4;

/// A file uploaded to a research (POST /v1/uploads, app/upload_files.hpp).
struct session_upload {
  /// The upload's id, as given when it was uploaded.
  std::string id;
  /// Its file name in the session's files folder (empty until the session
  /// took it).
  std::string name;
  /// Its size in bytes.
  int64_t bytes = 0;
  /// `pdf`, `markdown`, `text`, `html` or `docx`.
  std::string type;
};

/// What a stored session runs with: enough to run it again.
struct stored_options {
  /// The question as the user asked it.
  std::string question;
  /// Answers to clarifying questions, one per line (may be empty).
  std::string answers;
  bool clarify = true;
  /// 0: the configured deadline.
  int64_t deadline_ms = 0;
  /// 0: the configured number.
  int max_agents = 0;
  /// Orchestrator cycles at most; 0: the configured number (a larger one
  /// is cut to it).
  int max_cycles = 0;
  /// The corpus folder (absolute), or empty. A session with uploads: its
  /// own files folder (`<data_dir>/sessions/<id>/files`).
  std::string corpus;
  /// The files uploaded to this session (at most 20), searched with its own
  /// `session_files` tool.
  std::vector<session_upload> uploads;
  /// Context from the session this one follows up (or the messages before
  /// the question of an OpenAI-style request), or empty.
  conversation_context follow_up_context;
  /// `on` or `off` (`--verify`, `--no-verify`); empty: research.verify.
  std::string verify;
  /// `--strategy`, `--mode`, `--depth`; empty: research.strategy, .mode,
  /// .depth.
  std::string strategy;
  std::string mode;
  std::string depth;
};

/// What is wrong with a strategy, mode and depth (each may be empty: the
/// configured one), e.g. "mode: not simple, web_search or deep_research";
/// empty when nothing is.
std::string strategy_option_problem(const std::string& strategy, const std::string& mode,
                                    const std::string& depth);

/// Mode and depth belong to the reflective strategy, the only one that reads
/// them: given without a strategy they select it (`strategy` becomes
/// `reflective`, and true is returned); given with the orchestrator named,
/// they are a problem (`problem` says so). Otherwise nothing changes.
bool imply_reflective(std::string& strategy, const std::string& mode, const std::string& depth,
                      std::string& problem);

nlohmann::json to_json(const stored_options& x);
/// Reads stored options; missing fields keep their defaults, wrong types
/// are an error naming the field.
std::variant<stored_options, std::string> stored_options_from(const nlohmann::json& j);

/// The question as the models see it: with the answers and the context of
/// the session it follows up.
std::string question_for_model(const stored_options& x);

/// What a follow-up of session `id` carries: as text, the earlier session's
/// question, report and sources (the report cut at 24,000 characters); as
/// the thread, the questions and reports of `id` and the sessions it follows
/// up in turn (the thread stored with `id`, else its parent sessions'), from
/// the fourth last question on (@ref thread_questions), each report cut at
/// 16,000 bytes and followed by the sources it cites. When the session cannot
/// be followed up (unknown, no report) the result is empty and `problem`
/// says why; a store that cannot be read is an error.
store::result<conversation_context> follow_up_context(store::store& db, const std::string& id,
                                                      std::string& problem);

/// The end of `thread` a follow-up keeps: its user and assistant messages
/// with text from its @ref thread_questions-th last user message on, each
/// cut at 20,000 bytes.
std::vector<sdk::chat_message> kept_thread(std::vector<sdk::chat_message> thread);

/// A thread as stored: `[{"role": "user" | "assistant", "content"}]`.
nlohmann::json thread_json(const std::vector<sdk::chat_message>& thread);

/// A stored thread; an error names what is wrong.
std::variant<std::vector<sdk::chat_message>, std::string> thread_from(const nlohmann::json& j);

/// The state to show and act on: a stored `running` or `pending` session
/// whose lock is free was left by a process that died and is interrupted;
/// every other state is as stored. When the lock is found free the row is
/// read again, since the run may have ended between the read of `row` and
/// the look at the lock (a run's state is written before its lock goes); a
/// failed second read keeps the first.
store::session_state effective_state(store::store& db, const store::session_row& row);

/// The numbers a report shows: the store numbers every document a research
/// found and a report cites some of them, so a report's own numbers may
/// have gaps (1, 3, 7). Shown, they are 1, 2, ... in the order `body` first
/// cites them; numbers not in `known` (no stored citation) get none.
std::map<int, int> shown_numbering(const std::string& body, const std::set<int>& known);

/// The cited sources of a stored report (`body` as stored): the numbers its
/// body cites that the store numbers, each with its document's title, URL
/// and id, numbered as shown (shown_numbering; cited_source::stored_number
/// keeps the stored one), in that order.
store::result<std::vector<cited_source>> report_sources(store::store& db, const std::string& id,
                                                        const std::string& body);

/// Stored number -> shown number of `sources` (report_sources).
std::map<int, int> shown_numbers(const std::vector<cited_source>& sources);

/// The final report of a stored session (none if it has none), partial
/// unless it completed, numbered as shown: its body renumbered
/// (renumber_citations) to agree with its sources (report_sources). With
/// `as_stored`, body and sources keep the stored numbers (as the report was
/// streamed: the OpenAI-compatible endpoint answers a stored session as it
/// streamed it).
store::result<std::optional<report_parts>>
stored_report(store::store& db, const store::session_row& row, store::session_state state,
              bool as_stored = false);

/// The claims of a session in the numbering its report shows (stored_report):
/// citations, `source` and `recited_to` renumbered (a number the report
/// does not show is dropped from `citations` and kept elsewhere), report
/// ranges moved to the renumbered body. As stored without a final report.
store::result<std::vector<store::claim_row>> shown_claims(store::store& db, const std::string& id);

/// The claims of a session as the API and `quarry sessions show --claims
/// --json` give them: `{"id", "claims": [store::to_json(claim)...],
/// "summary": {"claims", "supported", "partly_supported", "unsupported",
/// "no_evidence", "unverified", "recited", "snippet_only"}}`.
nlohmann::json claims_json(const std::string& id, const std::vector<store::claim_row>& claims);

/// The longest question a research takes from outside (POST /v1/research,
/// the OpenAI-compatible endpoint, MCP's deep_research), in characters.
inline constexpr size_t max_question_chars = 20'000;

/// A store error as the command line prints it: with the store's file
/// (`research store 'FILE': ...`; the store's own messages never name it).
std::string with_store_path(const std::string& store_file, const sdk::error& err);

/// Milliseconds since the Unix epoch.
int64_t unix_ms();

/// `2026-11-25T07:30:00.123Z`.
std::string rfc3339(int64_t unix_ms);

} // namespace quarry::app

#include "quarry/core/checkpoint.hpp"

namespace quarry::app {

/// A stored session that goes on from its last checkpoint (or from the
/// start, when it died before the first one).
struct resume_info {
  std::string session_id;
  stored_options options;
  /// Null: start over.
  std::shared_ptr<const core::research_checkpoint> checkpoint;
  int64_t checkpoint_number = 0;
  /// The seq of the checkpoint and the session's last stored seq.
  uint64_t checkpoint_seq = 0;
  uint64_t last_seq = 0;
};

} // namespace quarry::app

namespace quarry::cluster {
struct session_result;
} // namespace quarry::cluster

namespace quarry::actors {
using cluster::session_result;
} // namespace quarry::actors

namespace quarry::app {

/// The store state a finished run leaves: completed, clarification, failed
/// or interrupted.
const char* state_after(const actors::session_result& r);

/// The report a session delivered, as report files show it (its sources
/// with their snippet-only labels, numbered as stored_report numbers them);
/// `partial` for an interrupted research.
report_parts report_of(const std::string& question, const actors::session_result& r, bool partial);

} // namespace quarry::app
