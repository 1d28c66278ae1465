// An IR test collection in the Cranfield / SMART layout (documents, queries
// and graded relevance judgments) and the measures of a ranking against it:
// nDCG@k, average precision and recall at a cut-off. Used by the retrieval
// benchmark (bench/retrieval_bench.cpp) and its unit tests.

#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace quarry::test::ir {

/// One document: its number in the collection and its fields.
struct document {
  int id = 0;
  /// `.T`: the title (lines joined with spaces).
  std::string title;
  /// `.W`: the text, as its lines.
  std::string text;
};

/// One query: its number (1, 2, ... in file order, as the relevance
/// judgments number them) and its text (`.W`, lines joined with spaces).
struct query {
  int number = 0;
  std::string text;
};

/// Relevance judgments: query number -> document id -> gain (1 or more).
/// Documents judged not relevant are left out.
using judgments = std::map<int, std::map<int, int>>;

/// Reads documents in the SMART layout: records opened by `.I <id>`, fields
/// opened by `.T`, `.A`, `.B` or `.W` on a line of their own; only `.T` and
/// `.W` are kept. Nothing on a malformed file (a field before any `.I`, an
/// id that is not a positive number, an id given twice); `why` says what.
std::optional<std::vector<document>> read_documents(const std::string& text, std::string& why);

/// Reads queries in the same layout (`.I` and `.W`); the `.I` values are
/// ignored (Cranfield's are not contiguous) and the queries numbered 1, 2,
/// ... in file order.
std::optional<std::vector<query>> read_queries(const std::string& text, std::string& why);

/// Reads judgments as `query document code` lines with Cleverdon's codes:
/// 1 (a complete answer) to 4 (of minimum interest) become the gains 4 to 1;
/// any other code (Cranfield's copies also hold -1, not relevant, and 5, of
/// no interest) is left out. A pair given twice keeps its higher gain.
/// Nothing on a line that is not three integers.
std::optional<judgments> read_cleverdon_judgments(const std::string& text, std::string& why);

/// The measures of one ranked list (best first, document ids) against the
/// judged documents of its query (`relevant`: id -> gain, none of them 0).
struct measures {
  /// Normalised discounted cumulative gain of the first `k` (gain / log2(rank
  /// + 1), as trec_eval's ndcg_cut), against the ideal order of all judged
  /// documents.
  double ndcg = 0;
  /// Average precision of the first `depth`: the precision at the rank of
  /// each relevant document found there, summed and divided by the number of
  /// relevant documents (found or not), as trec_eval's map_cut.
  double average_precision = 0;
  /// The share of the relevant documents found in the first `depth`.
  double recall = 0;
};

/// Measures `ranking` (a document listed twice counts once, at its first
/// rank) with nDCG at `k` and average precision and recall at `depth`.
/// All zero when `relevant` is empty.
measures measure(const std::vector<int>& ranking, const std::map<int, int>& relevant, size_t k,
                 size_t depth);

} // namespace quarry::test::ir
