// Agent-local document numbers.

#include "quarry/core/document_numbers.hpp"

namespace quarry::core {

int document_numbers::number_for(const sdk::document& doc) {
  auto key = doc.id.empty() ? doc.url : doc.id;
  if (auto i = by_key_.find(key); i != by_key_.end())
    return i->second;
  auto n = by_number_.empty() ? 1 : by_number_.rbegin()->first + 1;
  by_key_.emplace(key, n);
  by_number_.emplace(n, doc);
  return n;
}

} // namespace quarry::core
