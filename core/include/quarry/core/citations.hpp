// Citation machinery of deep research (pure logic, no CAF): the streaming
// citation processor, collapse of agent-local numbers, order extraction.

#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

// Behaviour follows Onyx's deep research (chat/citation_processor.py and
// chat/citation_utils.py as described in section 11 of the Onyx
// specification). Deliberate deviations, each fixing a listed quirk or
// following from such a fix:
//
// 1. Leading space (Onyx quirk 9). Onyx decides whether to put a space before
//    a hyperlink by looking at the text between the previous marker and this
//    one *within the current held segment*; a citation that starts a new
//    segment never gets a space ("Text" + "[1]" -> "Text[[1]](u)"). Here the
//    decision looks at the output actually produced: a space is added unless
//    the output is empty, ends with whitespace, or ends with another citation
//    link (so "[1][2]" stays "[[1]](u1)[[2]](u2)" as in Onyx).
// 2. Unknown numbers (quirk 10). In hyperlink mode a marker none of whose
//    numbers is in the mapping is removed with the spacing rule of remove mode
//    ("x [99] y" -> "x y", "x [99]." -> "x."), where Onyx leaves "x  y". In
//    every mode unknown numbers are reported (`citation_chunk::unknown`,
//    `citation_processor::unknown_citations`). `collapse_citations` removes
//    numbers that are not in the agent's mapping instead of leaving them, so a
//    stray "[7]" can never end up pointing at global document 7.
// 3. Code blocks (quirk 11). Onyx uses the parity of the ``` count over all
//    output at the end of each token, so a chunk with a whole fenced block and
//    a later citation gets the markers inside the block rewritten. Here fence
//    state is tracked by position: a marker is processed only if an even number
//    of ``` precede it. Every language-less opening fence (``` directly
//    followed by a newline) is labelled "```plaintext"; Onyx labels only the
//    first fence of a held segment and only when the parity is odd at the end
//    of the token. `collapse_citations` and `extract_citation_order` also
//    leave fenced code alone (Onyx rewrites and counts markers there).
// 4. Spacing of removed markers uses the output produced so far (trailing
//    whitespace is held back until the next character is known) rather than
//    the text since the previous marker in the segment, so "A [1][2] B" becomes
//    "A B" in remove mode (Onyx: "A  B") and the result never depends on how
//    the text was split into tokens.
// 5. Split invariance: the output (text, citation events, seen and cited
//    documents) is the same for any split of the input into tokens, including
//    splits inside UTF-8 sequences. Text is held back only while it may still
//    become a marker, a fence (a trailing run of backticks), or while trailing
//    whitespace may still be removed; which text is held therefore differs
//    from Onyx's partial-citation regex, but only the timing of output does.
// 6. Onyx's "recently cited" set (reset after 5 non-citation characters) is
//    not kept: it is a subset of the permanent cited set, so it never changes
//    which citation_info events are produced.
// 7. Digits are ASCII 0-9 and whitespace is ASCII whitespace (Python's `\d`
//    and `isspace` also accept other Unicode digits and spaces). Numbers that
//    do not fit an `int` are never in a mapping and are not reported.
// 8. Onyx's optional stop-stream pattern (off by default) is not implemented.
// 9. In collapse, a double-bracket marker with mixed bracket kinds ("[【1]】")
//    is renumbered like any other (Onyx leaves it unchanged although its
//    processor treats it as citation 1).

namespace quarry::sdk {
struct document;
} // namespace quarry::sdk

namespace quarry::core {

// -- documents and mappings ---------------------------------------------------

/// What a citation number resolves to: the document's identity (which decides
/// de-duplication), its link and its title.
struct document_ref {
  /// Stable identity, e.g. the normalised URL of a web page or a corpus id.
  std::string document_id;
  /// Where the hyperlink points; may be empty (rendered as `[[n]]()`).
  std::string link;
  /// Human-readable title, for source lists.
  std::string title;

  /// Compares all fields.
  friend bool operator==(const document_ref& x, const document_ref& y) {
    return x.document_id == y.document_id && x.link == y.link && x.title == y.title;
  }

  /// Compares all fields.
  friend bool operator!=(const document_ref& x, const document_ref& y) {
    return !(x == y);
  }
};

/// Converts an SDK document (id, url, title) to a document reference.
document_ref make_document_ref(const sdk::document& doc);

/// Citation number -> document, iterated in insertion order (like Onyx's
/// Python dict: `collapse_citations` depends on that order).
class citation_mapping {
public:
  /// One entry: number and document.
  using value_type = std::pair<int, document_ref>;
  /// Iterates entries in insertion order.
  using const_iterator = std::vector<value_type>::const_iterator;

  /// Creates an empty mapping.
  citation_mapping() = default;

  /// Creates a mapping from entries in order; later duplicates are ignored.
  citation_mapping(std::initializer_list<value_type> entries);

  /// Adds `number -> doc` unless `number` is present; returns whether it was
  /// added (existing keys are never overwritten).
  bool insert(int number, document_ref doc);

  /// Adds `number -> doc`, replacing the document of an existing number in
  /// place (its position in the order stays).
  void insert_or_assign(int number, document_ref doc);

  /// Adds every entry of `other` in its order. Without `overwrite`, existing
  /// numbers keep their documents (Onyx's update_citation_mapping default).
  void merge(const citation_mapping& other, bool overwrite = false);

  /// Returns the document for `number`, or null.
  const document_ref* find(int number) const noexcept;

  /// Returns whether `number` is present.
  bool contains(int number) const noexcept {
    return find(number) != nullptr;
  }

  /// Returns the largest number, or nothing when empty.
  std::optional<int> max_number() const noexcept;

  /// Returns the largest number + 1, or 1 when empty.
  int next_number() const noexcept;

  /// Returns the number of entries.
  std::size_t size() const noexcept {
    return entries_.size();
  }

  /// Returns whether there are no entries.
  bool empty() const noexcept {
    return entries_.empty();
  }

  /// Returns the numbers in insertion order.
  std::vector<int> numbers() const;

  /// Returns the first entry.
  const_iterator begin() const noexcept {
    return entries_.begin();
  }

  /// Returns the end of the entries.
  const_iterator end() const noexcept {
    return entries_.end();
  }

  /// Compares entries including their order.
  friend bool operator==(const citation_mapping& x, const citation_mapping& y) {
    return x.entries_ == y.entries_;
  }

  /// Compares entries including their order.
  friend bool operator!=(const citation_mapping& x, const citation_mapping& y) {
    return !(x == y);
  }

private:
  std::vector<value_type> entries_;
  std::unordered_map<int, std::size_t> index_;
};

// -- streaming processor ------------------------------------------------------

/// What the processor does with citation markers.
enum class citation_mode : uint8_t {
  /// Replace markers by `[[n]](link)` and produce citation_info events (the
  /// final report).
  hyperlink,
  /// Output markers unchanged, record seen citations (intermediate reports).
  keep_markers,
  /// Delete markers with spacing fixes, record seen citations.
  remove,
};

/// Returns `hyperlink`, `keep_markers` or `remove`.
const char* to_string(citation_mode x) noexcept;

/// The payload of a `citation_info` packet: the first citation of a document.
struct citation_info {
  /// The number as it was cited.
  int citation_number = 0;
  /// The cited document.
  std::string document_id;

  /// Compares all fields.
  friend bool operator==(const citation_info& x, const citation_info& y) {
    return x.citation_number == y.citation_number && x.document_id == y.document_id;
  }
};

/// A citation_info event and where it belongs in the text of its chunk.
struct citation_event {
  /// Offset into `citation_chunk::text`: the event comes before the text from
  /// this offset on (Onyx sends citation_info just before the hyperlink).
  std::size_t offset = 0;
  /// The event itself.
  citation_info info;
};

/// The result of feeding one token (or of finishing the stream).
struct citation_chunk {
  /// Text that is now safe to show.
  std::string text;
  /// New citation_info events, in order (hyperlink mode only).
  std::vector<citation_event> citations;
  /// Numbers cited here that are not in the mapping, each reported once per
  /// processor, in order of first appearance.
  std::vector<int> unknown;
};

/// Streaming citation processor (Onyx's DynamicCitationProcessor; see the
/// deviations at the top of this file). Runs in time linear in the input,
/// however it is split into tokens. Not thread-safe; one per LLM stream.
class citation_processor {
public:
  /// Creates a processor in `mode` with an empty mapping.
  explicit citation_processor(citation_mode mode = citation_mode::hyperlink);

  /// Returns the mode.
  citation_mode mode() const noexcept {
    return mode_;
  }

  /// Adds entries to the mapping. Without `overwrite`, numbers already present
  /// keep their documents (a web-search result beats an open_url document
  /// given the same number).
  void update_mapping(const citation_mapping& update, bool overwrite = false);

  /// Returns the mapping.
  const citation_mapping& mapping() const noexcept {
    return mapping_;
  }

  /// Returns the largest mapped number + 1, or 1 with an empty mapping.
  int next_citation_number() const noexcept {
    return mapping_.next_number();
  }

  /// Feeds the next token; returns the text that can be shown now and new
  /// events. Text that may still turn into a marker is held back.
  citation_chunk process(std::string_view token);

  /// Ends the stream: flushes everything held back. Seen and cited documents
  /// are kept; the text state (fences, spacing) starts afresh, so the
  /// processor can take another stream.
  citation_chunk finish();

  /// Returns the mapped numbers that were cited (outside code), in order of
  /// first citation, with their documents.
  const citation_mapping& seen_citations() const noexcept {
    return seen_;
  }

  /// Returns the cited documents in order of first citation (hyperlink mode).
  const std::vector<document_ref>& cited_documents() const noexcept {
    return cited_docs_;
  }

  /// Returns the ids of `cited_documents()`.
  std::vector<std::string> cited_document_ids() const;

  /// Returns the numbers cited but missing from the mapping at the time, in
  /// order of first appearance.
  const std::vector<int>& unknown_citations() const noexcept {
    return unknown_;
  }

  /// Returns how many bytes are held back (input and trailing whitespace).
  std::size_t held_bytes() const noexcept {
    return buf_.size() + pending_ws_.size();
  }

private:
  void drain(bool final, citation_chunk& out);
  void emit(std::string_view text, citation_chunk& out);
  void flush_pending(citation_chunk& out);
  bool would_remove(std::string_view marker) const;
  void handle_marker(std::string_view marker, int next, citation_chunk& out);
  void note_unknown(int number, citation_chunk& out);

  citation_mode mode_;
  citation_mapping mapping_;
  citation_mapping seen_;
  std::vector<document_ref> cited_docs_;
  std::unordered_set<std::string> cited_ids_;
  std::vector<int> unknown_;
  std::unordered_set<int> unknown_set_;

  // Unconsumed input; a held candidate (marker, backtick run, bracket
  // prefix) always starts at buf_[0].
  std::string buf_;
  // How many bytes of the candidate were scanned, and the scanner state.
  std::size_t cand_scanned_ = 0;
  uint8_t cand_state_ = 0;
  // Inside a fenced code block.
  bool in_code_ = false;
  // Trailing whitespace of the output, held until we know whether a removed
  // marker strips it.
  std::string pending_ws_;
  bool has_emitted_ = false;
  char last_emitted_ = '\0';
  bool last_was_link_ = false;
};

// -- helpers ------------------------------------------------------------------

/// Returns whether `text` ends with what may be the start of a citation
/// (Onyx's partial pattern `[\[【［]+(?:\d+(?:, ?\d+)*(?:, ?)?)?$`, including
/// Python's `$` matching before a final newline). Linear time.
bool ends_with_partial_citation(std::string_view text);

/// The result of @ref collapse_citations.
struct collapse_result {
  /// The text with global numbers.
  std::string text;
  /// `existing` plus the documents that got new numbers.
  citation_mapping mapping;
  /// Old (agent-local) number -> global number, in the order of `new`.
  std::vector<std::pair<int, int>> renumbered;
  /// Numbers removed from the text because they were not in `new` (first
  /// appearance order; numbers too large for an int are removed unlisted).
  std::vector<int> removed;
};

/// Renumbers the markers of an intermediate report (`new_citations` holds its
/// agent-local numbers in first-seen order) into the global numbering of
/// `existing` (Onyx's collapse_citations): a document already in `existing`
/// keeps its number, others get max(existing)+1, ... in the order of
/// `new_citations`; one pass, so replacements never chain; bracket style is
/// kept and lists are re-joined with ", ". Unlike Onyx, numbers missing from
/// `new_citations` are removed (a marker left empty disappears, with the
/// spacing rule of remove mode), and fenced code is left alone.
collapse_result collapse_citations(std::string_view text, const citation_mapping& existing,
                                   const citation_mapping& new_citations);

/// Returns the citation numbers of `text` in order of first appearance (for
/// replaying a saved message). Uses Onyx's looser pattern that allows any
/// spaces around commas (`[1 , 2]`); skips fenced code.
std::vector<int> extract_citation_order(std::string_view text);

} // namespace quarry::core
