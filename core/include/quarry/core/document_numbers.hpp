// A research agent's own citation numbers for the documents its tools
// return: 1, 2, 3, ... in order of first appearance, one per document.

#pragma once

#include "quarry/sdk/types.hpp"

#include <map>
#include <string>

namespace quarry::core {

/// Agent-local document numbers. A document is known by its id, or by its
/// URL when it has no id; the first document seen under a key keeps the
/// number (and is the one `documents()` holds).
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
