// Token F1 between two texts: the measure of extraction quality shared by the
// extraction tests and the extraction benchmark (header-only, no
// dependencies).

#pragma once

#include <cctype>
#include <string>
#include <unordered_map>
#include <vector>

namespace quarry::test {

/// Lower-cased tokens: runs of ASCII letters/digits or non-ASCII bytes, so
/// whitespace is folded and Markdown marks (#, -, |) do not count.
inline std::vector<std::string> f1_tokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (auto ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      cur += static_cast<char>(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty())
    out.push_back(std::move(cur));
  return out;
}

/// The harmonic mean of token precision and recall of `got` against `want`
/// (multiset overlap); 1 for two empty texts.
inline double token_f1(const std::string& got, const std::string& want) {
  auto a = f1_tokens(got);
  auto b = f1_tokens(want);
  if (a.empty() && b.empty())
    return 1;
  if (a.empty() || b.empty())
    return 0;
  std::unordered_map<std::string, int> counts;
  for (auto& t : b)
    ++counts[t];
  size_t common = 0;
  for (auto& t : a)
    if (auto i = counts.find(t); i != counts.end() && i->second > 0) {
      --i->second;
      ++common;
    }
  if (common == 0)
    return 0;
  auto p = static_cast<double>(common) / static_cast<double>(a.size());
  auto r = static_cast<double>(common) / static_cast<double>(b.size());
  return 2 * p * r / (p + r);
}

} // namespace quarry::test
