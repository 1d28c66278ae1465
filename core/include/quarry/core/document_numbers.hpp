// A research agent's own citation numbers for the documents its tools
// return: 1, 2, 3, ... in order of first appearance, one per document.

#pragma once

#include "quarry/sdk/types.hpp"

#include <cstddef>
#include <map>
#include <string>

namespace quarry::core {

/// The most bytes of read text merge_document() keeps for one document
/// (the verifier reads at most 1 MiB of a document; the rest is margin for
/// passages read from several places of it).
inline constexpr size_t max_merged_text_bytes = 2 * 1024 * 1024;

/// What `from` adds to `into`, the same document seen again (the page a
/// search result names, opened later; another passage of a corpus file):
/// read text that `into` lacks is kept (content that holds the old content
/// replaces it; other new content is appended after a blank line, up to
/// max_merged_text_bytes), and empty fields (URL, title, snippet, date) are
/// filled in. Nothing `into` holds is lost. Returns whether `into` changed.
bool merge_document(sdk::document& into, const sdk::document& from);

/// Whether only a search engine's snippet of `doc` is known: nothing of it
/// was read.
inline bool snippet_only(const sdk::document& doc) noexcept {
  return doc.content.empty();
}

/// Agent-local document numbers. A document is known by its id, or by its
/// URL when it has no id; the first document seen under a key keeps the
/// number, and what later ones read is merged into it (merge_document), so
/// `documents()` holds the page an agent opened, not only its snippet.
class document_numbers {
public:
  /// The number of `doc`, given on first sight (one more than the largest).
  int number_for(const sdk::document& doc);

  /// Every numbered document by number.
  const std::map<int, sdk::document>& documents() const noexcept {
    return by_number_;
  }

  size_t size() const noexcept {
    return by_number_.size();
  }

private:
  std::map<std::string, int> by_key_;
  std::map<int, sdk::document> by_number_;
};

} // namespace quarry::core
