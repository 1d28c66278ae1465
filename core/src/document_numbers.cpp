// Agent-local document numbers.

#include "quarry/core/document_numbers.hpp"

#include "quarry/sdk/text.hpp"

namespace quarry::core {

bool merge_document(sdk::document& into, const sdk::document& from) {
  bool changed = false;
  auto fill = [&](std::string& field, const std::string& value) {
    if (field.empty() && !value.empty()) {
      field = value;
      changed = true;
    }
  };
  fill(into.url, from.url);
  fill(into.title, from.title);
  fill(into.snippet, from.snippet);
  if (!into.published && from.published) {
    into.published = from.published;
    changed = true;
  }
  const auto& add = from.content;
  if (add.empty() || add == into.content)
    return changed;
  if (into.content.empty() || add.find(into.content) != std::string::npos) {
    into.content = std::string{sdk::utf8_prefix(add, max_merged_text_bytes)};
    return true;
  }
  if (into.content.find(add) != std::string::npos
      || into.content.size() + 2 >= max_merged_text_bytes)
    return changed;
  into.content += "\n\n";
  into.content += sdk::utf8_prefix(add, max_merged_text_bytes - into.content.size());
  return true;
}

int document_numbers::number_for(const sdk::document& doc) {
  auto key = doc.id.empty() ? doc.url : doc.id;
  if (auto i = by_key_.find(key); i != by_key_.end()) {
    merge_document(by_number_.at(i->second), doc);
    return i->second;
  }
  auto n = by_number_.empty() ? 1 : by_number_.rbegin()->first + 1;
  by_key_.emplace(key, n);
  by_number_.emplace(n, doc);
  return n;
}

} // namespace quarry::core
