// The result of one question of `quarry eval run`: what its research's
// packets tell (sources, tokens, cost, verification, errors), what its report
// cites, and the JSON kept for it in the run's folder.

#pragma once

#include "eval_questions.hpp"
#include "report_render.hpp"

#include "quarry/core/packets.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::app::eval {

/// What the packets of one research tell about it, gathered one packet at a
/// time (not thread-safe; one research's packets come one after another).
struct packet_tally {
  /// Every document a search returned or a page read gave (`document_id`s
  /// of `search_tool_documents_delta` and `open_url_documents`).
  std::set<std::string> found;
  /// The documents whose text was read: pages opened (`open_url_documents`)
  /// and passages of the local corpus (documents that are not from the
  /// internet in `search_tool_documents_delta`: the passage is the text).
  std::set<std::string> read;
  /// `usage` packets: one per model call.
  int64_t model_calls = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  /// The last `verification_summary` packet's object; null when the report
  /// was not verified.
  nlohmann::json verification;
  /// The messages of `error` packets, in order.
  std::vector<std::string> errors;

  /// Counts packet `p` (any type; unknown ones are ignored).
  void add(const core::packet& p);
};

/// Citation markers in a report body (`[[n]](url)` or `[n]`, as the report
/// writes them; a marker of several numbers, `[1, 2]`, counts each).
struct citation_count {
  /// Every number of every marker.
  size_t markers = 0;
  /// Distinct numbers.
  size_t distinct = 0;
};

/// Counts the citation markers of `body` (Markdown; code spans and fences
/// are not skipped, a report has none that hold markers).
citation_count count_citations(std::string_view body);

/// How one question's research ended, as the result records it.
struct finished_research {
  /// `completed` (a report), `failed` or `clarification`.
  std::string status;
  /// The stored session's id; empty when nothing was stored.
  std::string session;
  /// The report as Markdown (title, body, Sources): DeepResearch Bench's
  /// `article`. Empty without a report.
  std::string article;
  /// The report body alone (its citation markers are counted).
  std::string body;
  std::vector<cited_source> cited;
  /// Why the research failed.
  std::string failure;
  std::vector<std::string> notices;
  /// Wall-clock time of the research (s).
  double seconds = 0;
  /// When it ended: RFC 3339 in UTC (`2026-11-25T07:30:00.123Z`).
  std::string finished_at;
};

/// The JSON kept for a question (`questions/<file_stem>.json` of the run's
/// folder):
///
/// ```
/// {"id", "prompt", "fields": {the question's line}, "status", "session",
///  "article", "failure"?, "sources_found", "sources_read", "citations",
///  "unique_cited_sources", "cited": [{"number", "title", "url"}],
///  "claims": {"claims", "verified", "supported", "partly_supported",
///             "unsupported", "no_evidence", "unverified", "rate"} | null,
///  "tokens": {"input", "output", "total"}, "model_calls", "cost_usd",
///  "seconds", "errors": [...], "notices": [...],
///  "must_cite"?: {"expected": [...], "cited": [...], "missing": [...],
///                 "recall"}, "finished_at"}
/// ```
///
/// `claims.verified` is the claims judged (all but the unverified ones);
/// `must_cite` is there when the question names sources a good answer cites
/// (cites_expected() matches them against `cited`); its `recall` is the
/// share of them cited (0-1).
nlohmann::json result_json(const question& q, const finished_research& r, const packet_tally& t);

/// Whether a stored result is a finished question: it is an object whose
/// `status` is `completed`, whose `id` is `q`'s id and whose `prompt` is
/// `q`'s. A failed question is not finished (a resumed run asks it again).
bool is_finished(const nlohmann::json& result, const question& q);

/// DeepResearch Bench's line for a result: `{"id", "prompt", "article"}` and
/// the question's other fields, as one line of JSON (no newline; invalid
/// UTF-8 replaced).
std::string article_line(const nlohmann::json& result);

} // namespace quarry::app::eval
