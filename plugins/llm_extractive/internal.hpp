// What the files of the extractive provider share beyond extractive.hpp:
// text helpers (text.cpp), reading a request's history and tools
// (history.cpp), choosing units for reports (selection.cpp), plan steps
// (plans.cpp), following references (references.cpp) and the research
// agent's role (research.cpp). Internal to the plugin.

#pragma once

#include "extractive.hpp"

#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::plugins::llm_extractive {

// -- text (text.cpp) ----------------------------------------------------------

/// ASCII digit, upper-case letter, and the lower case of an ASCII letter.
bool is_digit(char c);
bool is_upper(char c);
char to_lower(char c);

/// Whether `x` contains `needle`.
bool contains(std::string_view x, std::string_view needle);

/// `x` with runs of white space made one space, trimmed.
std::string collapse_spaces(std::string_view x);

/// The lines of `x` (without their line feeds; a last empty line when `x`
/// ends with one).
std::vector<std::string_view> split_lines(std::string_view x);

/// The length of a citation-like marker (`[12]`, `[1, 2]`) at the start of
/// `x`, or 0.
size_t marker_length(std::string_view x);

/// `x` without `[...truncated]` notes and, with `strip_markers`, without
/// citation markers (until none is left: "[[2]5]" loses both).
std::string clean_text(std::string_view x, bool strip_markers);

/// Splits text into sentences (split_sentences, with `strip_markers` to
/// choose whether citation markers go); a heading or list item ends one.
std::vector<std::string> split_impl(std::string_view text, bool strip_markers);

/// The paragraphs of `text` (split at blank lines), each with its line
/// feeds.
std::vector<std::string> paragraphs(std::string_view text);

/// The form of a sentence that tells repeats apart: its tokens, markers
/// removed (the lower-case sentence when it has none).
std::string sentence_key(std::string_view sentence);

/// `sentence` with the marker `[number]` before its end mark (one added).
std::string with_marker(std::string_view sentence, int number);

/// The first `max_words` words of `sentence` and an ellipsis, or the
/// sentence when it is not longer.
std::string truncate_words(std::string_view sentence, size_t max_words);

/// The distinct words of `tokens`, sorted.
std::vector<std::string> word_set(std::vector<std::string> tokens);

/// The Jaccard similarity of two sorted sets of words (0 when either is
/// empty).
double jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b);

/// Words for the same change ("drop", "fall", "decline", "decrease"; "rise",
/// "increase", "grow"): each group's words as written and their stems; the
/// first stem stands for the others (tokenize).
struct change_group {
  std::vector<std::string> spelt;
  std::vector<std::string> stems;
};
const std::vector<change_group>& change_words();

// -- requests (history.cpp) ---------------------------------------------------

/// The question of a request: research_context::question, or, in a request
/// without a research context (one not built by Quarry's research: a plain
/// chat, a test's), its first user message, trimmed.
std::string question_of(const sdk::chat_request& req);

/// The task of a request: research_context::task, or, without one, the
/// first user message, trimmed.
std::string task_of(const sdk::chat_request& req);

/// Tool-call arguments as a JSON object (double-encoded JSON tolerated; an
/// empty object for anything else).
nlohmann::json parse_arguments(std::string_view text);

/// A tool call of the history and the message that answers it (null while
/// unanswered).
struct call_record {
  sdk::tool_call call;
  const sdk::chat_message* result = nullptr;
};

/// The tool calls of `messages` in order, each with its result; a result
/// whose call is not in the history counts as a call of its tool. Points
/// into `messages`.
std::vector<call_record> collect_calls(const std::vector<sdk::chat_message>& messages);

/// The number of tool calls in `messages` (the next call id follows it).
size_t count_calls(const std::vector<sdk::chat_message>& messages);

/// Whether a research_agent result says the agent did not run, failed or
/// timed out (or says nothing).
bool looks_failed(std::string_view text);

/// The tool `name` the request offers, or null.
const sdk::tool_definition* find_tool(const sdk::chat_request& req, std::string_view name);

/// A tool call with id `call_<number>`.
sdk::tool_call make_call(size_t number, std::string name, const nlohmann::json& args);

/// Whether `tool` takes an array parameter `key` (how a model tells tools
/// apart: by their definitions, not by their names, which users choose).
bool takes_array(const sdk::tool_definition& tool, const char* key);

/// The name of the tool that searches the files the user attached to a
/// research (the server's uploads): searched first, together with the next
/// search tool, since the person chose those files for this question.
inline constexpr std::string_view attached_files_tool = "session_files";

/// The search tools of a request (any tool taking `queries`): the attached
/// files' tool first, then one named `internal_search`, then the others in
/// the request's order.
std::vector<std::string> search_tools(const sdk::chat_request& req);

/// The first page reader of a request (a tool taking `urls`), or null.
const sdk::tool_definition* page_reader(const sdk::chat_request& req);

/// The search tool of the first search in `calls` (else the first of
/// `searches`; empty without one).
std::string calls_of_search(const std::vector<call_record>& calls,
                            const std::vector<std::string>& searches);

// -- plans (plans.cpp) --------------------------------------------------------

/// The index of the step of `steps` that best matches `text` (an exact
/// match first, then BM25), or -1.
int match_step(const std::vector<std::string>& steps, std::string_view text);

// -- choosing units (selection.cpp) -------------------------------------------

/// Units at least this similar (Jaccard of their word sets) to one already
/// chosen are repeats and never chosen.
inline constexpr double near_duplicate = 0.6;

/// What a unit that opens with a word pointing back (opens_with_reference)
/// keeps of its relevance.
inline constexpr double reference_discount = 0.6;

/// A unit of a report taken from a source: one sentence, or a question
/// together with the answer that follows it.
struct source_unit {
  size_t source;
  std::string text;
};

/// The units of the texts of each source (texts[source]), without
/// repeats: sentences that can stand alone (six words at least, no list
/// lead-in, heading, pointer to another document or bare quotation; a
/// trailing cross-reference cut; at most 60 words) and questions with their
/// answers (at most 90 words).
std::vector<source_unit> report_units(const std::vector<std::vector<std::string>>& texts);

/// Whether a unit opens with a word that points back at text the reader of
/// a quotation does not have ("It excels at ...", "This is one reason ...").
bool opens_with_reference(std::string_view text);

/// How well each unit (a token list) answers `query`: the weights of the
/// distinct query words it holds, each the word's inverse document
/// frequency among the units capped at 2, plus a twentieth of its BM25
/// score to break ties.
std::vector<double> relevance_scores(const std::vector<std::vector<std::string>>& units,
                                     const std::vector<std::string>& query);

/// Chooses up to `k` units by maximal marginal relevance (relevance scaled
/// to the best, weighed 0.7 against the similarity to what is chosen
/// already, `taken`, which grows; 0.25 less for each unit already chosen
/// from its group). Units without relevance and near repeats are never
/// chosen. The indexes in the order chosen.
std::vector<size_t> select_mmr(const std::vector<std::vector<std::string>>& tokens,
                               const std::vector<double>& relevance,
                               const std::vector<size_t>& groups, size_t k,
                               std::vector<std::vector<std::string>>& taken);

/// The coverage pass: each group without a unit among `picked` whose best
/// unit reaches its `share` (by group) of the best relevance adds that
/// unit, unless it nearly repeats one taken; the strongest first, at most
/// `limit` units.
void cover_groups(const std::vector<std::vector<std::string>>& tokens,
                  const std::vector<double>& relevance, const std::vector<size_t>& groups,
                  const std::vector<double>& share, size_t limit, std::vector<size_t>& picked,
                  std::vector<std::vector<std::string>>& taken);

/// Chosen units as paragraphs: the first (the most direct answer) alone,
/// then the others grouped by source, sources in the order chosen.
std::string arrange(const std::vector<std::string>& units, const std::vector<size_t>& groups);

// -- following references (references.cpp) ------------------------------------

/// A pointer from one document to others: the words that name what it
/// points to, and whether it names several ("the documents on
/// refrigerants").
struct reference {
  std::string text;
  bool plural = false;
};

/// The references an agent follows: those of the passages of `found` that
/// speak to `task` (half the best passage's relevance at least), and every
/// one of the document that speaks to it best; each once, the heaviest
/// first.
std::vector<reference> task_references(const std::string& task,
                                       const std::vector<source_doc>& found);

/// The indexes of the documents of `titles` (their word sets) that a
/// reference (its tokens) names; a plural reference names every title
/// that holds all its words, when one does.
std::vector<size_t> resolve_reference(const std::vector<std::string>& reference,
                                      const std::vector<std::vector<std::string>>& titles,
                                      bool plural);

// -- the research agent's role (research.cpp) ---------------------------------

/// A research agent's step: search, search again with a refined query, read
/// the best pages, follow their references, then generate_report.
answer respond_research(const sdk::chat_request& req);

} // namespace quarry::plugins::llm_extractive
