// Claim-by-claim verification of a final report against the stored text of
// the documents it cites, in seven stages, each a pure function:
//   1. split_claims: the report's claims (sentences carrying citation
//      markers, and uncited factual sentences);
//   2. map_claims: each claim's cited documents that have stored text;
//   3. candidate_passages: BM25 over the passages of a cited document;
//   4. select_evidence: the evidence span within the best passages;
//   5. judge_lexically (or a model through judge_tool / read_judgements):
//      supported, partly supported, unsupported, no evidence;
//   6. find_recitation and apply_verification: re-cite a claim to another
//      read document that supports it, mark (or drop) the unsupported;
//   7. summarize: counts, rate, and the report's verification section.
// The verifier actor runs them, with a deadline: claims it did not reach are
// `unverified`.

#pragma once

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core::verification {

/// How a claim stands against its evidence.
enum class verdict : uint8_t {
  supported,
  partly_supported,
  unsupported,
  /// Nothing in the cited text is about the claim (or no text is stored).
  no_evidence,
  /// Not judged: the deadline came first.
  unverified,
};

/// `supported`, `partly_supported`, `unsupported`, `no_evidence`,
/// `unverified`.
const char* to_string(verdict x) noexcept;
std::optional<verdict> parse_verdict(std::string_view x);

/// What is done with an unsupported claim.
enum class action : uint8_t { mark, drop };
const char* to_string(action x) noexcept;
std::optional<action> parse_action(std::string_view x);

// -- 1. claims ------------------------------------------------------------------

/// One claim of the report.
struct claim {
  /// Position in the report's claim list.
  size_t index = 0;
  /// The sentence without its citation markers, white space collapsed.
  std::string text;
  /// Byte range of the sentence in the report, markers included.
  size_t begin = 0;
  size_t end = 0;
  /// Citation numbers of its markers, in order, without repeats.
  std::vector<int> citations;
};

/// Splits a Markdown report into claims: every sentence (of paragraphs, list
/// items and table cells) that carries citation markers (`[1]`, `[1, 2]`,
/// `[[1]](url)`; a marker after the sentence's full stop belongs to it), and
/// every uncited sentence that states a fact (six words or more, not a
/// question, with a number or a name in it). Headings, fenced code, quotes
/// of the question, the Sources list at the end and an earlier verification
/// section are skipped. At most `max_claims`.
std::vector<claim> split_claims(std::string_view report, size_t max_claims = 500);

// -- 2. claims to documents ----------------------------------------------------

/// A cited document with the text that was read.
struct source_text {
  int number = 0;
  std::string title;
  std::string url;
  /// What was read (page or passage text); the search snippet when nothing
  /// of it was read; empty when nothing is stored.
  std::string text;
  /// `text` is a search engine's snippet: the page was never opened.
  bool snippet_only = false;
  /// The document's id (the store and the API name it so).
  std::string document_id;
};

/// A passage of a document: about `words` words, on sentence boundaries
/// where possible.
struct passage {
  size_t begin = 0;
  size_t end = 0;
};

/// A document ready for matching: its text in passages, and their words.
struct indexed_document {
  source_text source;
  std::vector<passage> passages;
  std::vector<std::vector<std::string>> tokens;
};

/// Splits and tokenizes `doc` (stage 3's preparation, once per document).
/// Passages hold about `words` words; at most `max_passages`.
indexed_document index_document(source_text doc, size_t words = 80, size_t max_passages = 4000);

/// The documents a claim cites: the numbers with stored text, and those
/// without any (unknown numbers included).
struct claim_sources {
  std::vector<int> with_text;
  std::vector<int> missing;
};

claim_sources map_claim(const claim& c, const std::map<int, indexed_document>& docs);

// -- 3. passages ------------------------------------------------------------------

/// The `k` passages of `doc` that match `claim_text` best (BM25), best
/// first; none when nothing matches.
std::vector<size_t> candidate_passages(std::string_view claim_text, const indexed_document& doc,
                                       size_t k = 3);

// -- 4. evidence ------------------------------------------------------------------

/// An evidence span for a claim.
struct evidence {
  int number = 0;
  /// The quoted span (one to three consecutive sentences of a passage).
  std::string quote;
  /// Share of the claim's words the span holds, 0 to 1.
  double coverage = 0;
  /// The claim's numbers all appear in the span.
  bool numbers_match = true;
  /// Byte range of the span in the document's text (source_text::text;
  /// the quote may be clipped, the range is not).
  size_t begin = 0;
  size_t end = 0;
  /// The document's text is a search snippet only.
  bool snippet_only = false;
};

/// The span of one to three consecutive sentences of `passage_text` that
/// holds most of the claim's words (the shorter one on a tie).
evidence select_evidence(std::string_view claim_text, std::string_view passage_text);

/// Stages 3 and 4 over one document: its best evidence for the claim, or
/// nothing when no passage matches.
std::optional<evidence> best_evidence(std::string_view claim_text, const indexed_document& doc);

// -- 5. judging ---------------------------------------------------------------------

/// A verdict with its quote.
struct judgement {
  verdict result = verdict::unverified;
  std::string quote;
  int number = 0;
  /// The evidence's byte range in source `number`'s text (0, 0 without one).
  size_t begin = 0;
  size_t end = 0;
  /// The evidence is a search snippet only (the page was never opened).
  bool snippet_only = false;
  /// Who judged: `lexical` (judge_lexically) or `model` (read_judgements);
  /// empty when nobody did.
  std::string judge;
};

/// The lexical judge (the extractive provider's judge role): supported when
/// the span holds at least 75 % of the claim's words and all its numbers,
/// partly supported from 45 % (or numbers missing), unsupported below.
judgement judge_lexically(std::string_view claim_text, const std::optional<evidence>& ev);

/// `judge_claims`: the judge role's tool; one verdict per claim id.
sdk::tool_definition judge_tool();

/// The judge's request text: each claim with its id and evidence.
std::string judge_prompt(const std::vector<claim>& claims,
                         const std::vector<std::optional<evidence>>& evidence);

/// The research context of the judge's request: what judge_prompt states,
/// claim i with the quote of its evidence (empty without one) as id i.
sdk::research_context judge_context(const std::vector<claim>& claims,
                                    const std::vector<std::optional<evidence>>& evidence);

/// Reads `judge_claims` arguments for `count` claims (ids 0 .. count-1).
/// A claim without a verdict keeps `unverified`; a `supported` verdict whose
/// quote is not in the claim's evidence becomes `partly_supported` (the
/// judge must quote the source). Invalid when nothing usable is there.
std::variant<std::vector<judgement>, std::string>
read_judgements(const nlohmann::json& args, const std::vector<std::optional<evidence>>& evidence);

// -- 6. repair ----------------------------------------------------------------------

/// The best other read document of `docs` that supports `c` (judged
/// lexically), if any: never one the claim cites already.
std::optional<judgement> find_recitation(const claim& c,
                                         const std::map<int, indexed_document>& docs);

/// A claim's outcome.
struct claim_result {
  claim subject;
  judgement judged;
  /// Set when the claim was re-cited: the number it now cites.
  std::optional<int> recited_to;
};

/// The report with repairs applied: re-cited claims get their new marker
/// (an uncited one gains it, a cited one has its markers replaced);
/// unsupported claims, and cited claims with no evidence, are marked
/// ` *(unverified)*` or, with `action::drop`, removed. Uncited claims without
/// support are left as they are. A new marker takes the form of the ones it
/// replaces: `[[n]](url)` when the claim had links and `urls` has one for
/// `n`, else `[n]`.
///
/// With `spans`, it is resized to `results.size()` and receives each claim's
/// byte range in the returned text (nothing for a dropped claim or one
/// whose range was not in the report).
using span = std::pair<size_t, size_t>;
std::string apply_verification(std::string_view report, const std::vector<claim_result>& results,
                               action what, const std::map<int, std::string>& urls = {},
                               std::vector<std::optional<span>>* spans = nullptr);

// -- 7. summary ------------------------------------------------------------------------

struct summary {
  size_t claims = 0;
  size_t cited = 0;
  size_t supported = 0;
  size_t partly_supported = 0;
  size_t unsupported = 0;
  size_t no_evidence = 0;
  size_t unverified = 0;
  size_t recited = 0;
  /// Judged claims whose evidence is a search snippet only.
  size_t snippet_only = 0;
  /// Supported (re-cited ones included: they carry their new source's
  /// verdict) / judged claims (all but unverified); 0 when none were judged.
  double rate = 0;
};

summary summarize(const std::vector<claim_result>& results);

/// A short `## Verification` section for the report.
std::string summary_section(const summary& s, action what);

/// Packets: `claim_verified` (`id`: the claim's index, `claim`,
/// `citations`, `verdict`, `judge`, `evidence`, `source`, `snippet_only`,
/// `recited_to`) and `verification_summary`.
nlohmann::json claim_verified_packet(const claim_result& r);
nlohmann::json summary_packet(const summary& s);

/// The claims as the store and the API keep them: a JSON array, one object
/// per result: `id`, `claim`, `report_begin`/`report_end` (byte range in
/// the verified report, from `spans`; null for a dropped claim), `citations`,
/// `verdict`, `judge`, `recited_to`, and the evidence: `source` (citation
/// number), `document_id` (from `documents`), `evidence_begin`/
/// `evidence_end` (byte range in that document's stored text), `evidence`
/// (the quote) and `snippet_only`. Null fields where there is no evidence.
nlohmann::json claim_records(const std::vector<claim_result>& results,
                             const std::vector<std::optional<span>>& spans,
                             const std::map<int, std::string>& documents);

} // namespace quarry::core::verification
