// Pure logic of the extractive provider: sentence splitting, BM25 scoring,
// plan splitting, reading tool results from the history, composing answers.
// It reads what a request is about from its role tag, the tools it offers
// and its research context (sdk::research_context), never from the wording
// of Quarry's prompts. The files: text.cpp, plans.cpp, history.cpp,
// selection.cpp, compose.cpp, references.cpp, research.cpp, respond.cpp and
// roles.cpp (internal.hpp declares what they share).

#pragma once

#include "quarry/sdk/types.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_extractive {

// -- text ---------------------------------------------------------------------

/// Splits `text` into sentences at `.`, `!` and `?` followed by white space,
/// and at blank lines and line breaks. Markdown heading and list markers,
/// `[...truncated]` notes and bracketed numbers such as `[12]` are removed;
/// white space is collapsed. Never returns empty sentences.
std::vector<std::string> split_sentences(std::string_view text);

/// Returns the words of `text` as lexical::tokenize gives them (lower case,
/// without stop words, stemmed by the English Snowball stemmer), each word
/// for the same change ("drop", "fall", "decline", "decrease"; "rise",
/// "increase", "grow") as the first of its group.
std::vector<std::string> tokenize(std::string_view text);

/// Returns the number of white-space separated words in `text`.
size_t count_words(std::string_view text);

/// Estimates tokens as words * 4 / 3, rounded up.
int64_t estimate_tokens(std::string_view text);

/// Scores every document of `docs` (each a token list) against `query` with
/// Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))).
std::vector<double> bm25_scores(const std::vector<std::vector<std::string>>& docs,
                                const std::vector<std::string>& query);

/// Returns the indexes of the `k` best positive scores, best first; ties go to
/// the lower index.
std::vector<size_t> top_k(const std::vector<double>& scores, size_t k);

// -- plans --------------------------------------------------------------------

/// Splits a question into 2 to `max_steps` sub-questions: at question marks,
/// semicolons and line breaks, then at commas and ` and ` where both sides
/// keep at least two content words. With fewer than two parts, falls back to
/// aspects of the question's key phrase (background, current state, evidence).
std::vector<std::string> split_question(std::string_view question, size_t max_steps = 6);

/// Renders steps as a numbered list (`1. ...`, one per line).
std::string format_plan(const std::vector<std::string>& steps);

// -- tool results -------------------------------------------------------------

/// A document as a tool result presented it to the model.
struct source_doc {
  /// The citation number (`document` field).
  int number = 0;
  /// The `title` field.
  std::string title;
  /// The `url` field; empty for internal documents without one.
  std::string url;
  /// Content or snippet; if the document came back several times (snippet,
  /// then page), all distinct texts in order of arrival.
  std::vector<std::string> texts;
  /// Whether a page reader returned it (the agent chose to read it whole).
  bool read = false;
};

/// Parses a tool message in Onyx's format `{"results": [{"document": n,
/// "title", "url"?, "content"}]}`. Returns nothing for other text.
std::vector<source_doc> parse_tool_result(std::string_view content);

/// Collects the documents of every tool message in `messages`, merged by
/// number, in order of first appearance.
std::vector<source_doc> collect_documents(const std::vector<sdk::chat_message>& messages);

// -- answers ------------------------------------------------------------------

/// Knobs of the composition.
struct compose_options {
  /// Largest number of research_agent calls per orchestrator turn.
  int max_parallel = 3;
  /// Largest number of sentences in an intermediate report.
  int max_sentences = 12;
};

/// What the provider answers: text and/or tool calls.
struct answer {
  /// The answer text (empty when the answer is only tool calls).
  std::string text;
  /// The tool calls, with ids `call_<n>`.
  std::vector<sdk::tool_call> tool_calls;
};

/// Picks the sentences of `docs` that best match `task` and writes them as
/// paragraphs (one per document, best document first), each sentence carrying
/// its document's marker `[n]`. Then every document left out whose best
/// sentence is strong (half the best sentence's relevance; a quarter for a
/// document read whole) adds that sentence.
std::string compose_report(std::string_view task, const std::vector<source_doc>& docs,
                           int max_sentences);

/// One finished research task and the report it produced.
struct finding {
  /// The `task` argument of the research_agent call.
  std::string task;
  /// The report the agent returned (with its citation markers).
  std::string report;
};

/// Writes the final report on `question` (the question asked: of a
/// follow-up, its own question): a short intro, a note that the report is
/// extractive, one `##` section per plan step (headed by the step without its
/// "(regarding: ...)" context) with the report sentences that belong to it
/// (markers kept; a sentence in several reports goes to the step it matches
/// best), and a section for findings that fit no step. When the sentences
/// hold too little of the question, a short report that says so.
std::string compose_final(std::string_view question, const std::vector<std::string>& plan,
                          const std::vector<finding>& findings);

/// Answers a structured call of the reflective strategy and of
/// verification (one tool offered: classify_question, search_queries,
/// write_plan, reflect or judge_claims) with one call to it, from the
/// request's research context; nothing for any other request.
std::optional<answer> respond_structured(const sdk::chat_request& request);

/// The reflective strategy's synthesis: the research context's completed
/// steps with their observations, written as compose_final does, one
/// section per step, markers kept.
answer respond_synthesize(const sdk::chat_request& request);

/// Answers `request` by its role tag (`clarify`, `plan`, `orchestrate`,
/// `research`, `report`, `final`, `synthesize`; anything else is a plain
/// chat answered with the best-matching sentences of the conversation) and
/// its research context: the question (`plan`, `orchestrate`, `final`), the
/// plan's steps and the parallel limit (`orchestrate`, `final`), the task
/// (`research`, `report`). A request without a research context (one not
/// built by Quarry's research) is read as a chat: its first user message
/// is the question or the task, and the question is split into the plan.
/// Deterministic.
answer respond(const sdk::chat_request& request, const compose_options& opts);

} // namespace quarry::plugins::llm_extractive
