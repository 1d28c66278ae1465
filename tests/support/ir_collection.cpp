// An IR test collection in the SMART layout and the measures of a ranking.

#include "support/ir_collection.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

namespace quarry::test::ir {

namespace {

// A positive decimal number that fits an int, or nothing.
std::optional<int> positive_number(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto n = std::stoi(text);
  if (n <= 0)
    return std::nullopt;
  return n;
}

std::string trimmed(const std::string& line) {
  auto b = line.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return {};
  auto e = line.find_last_not_of(" \t\r");
  return line.substr(b, e - b + 1);
}

void append(std::string& to, const std::string& line, char joint) {
  if (!to.empty())
    to += joint;
  to += line;
}

// One record of the SMART layout: its `.I` value and its fields by letter.
struct record {
  std::string id;
  std::map<char, std::string> fields;
};

// Reads the records of `text`; `joints` tells how each field's lines are
// joined (a space unless given).
std::optional<std::vector<record>>
read_records(const std::string& text, const std::map<char, char>& joints, std::string& why) {
  std::vector<record> out;
  std::istringstream in{text};
  std::string line;
  char field = 0;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.rfind(".I", 0) == 0 && (line.size() == 2 || line[2] == ' ')) {
      out.emplace_back();
      out.back().id = trimmed(line.substr(2));
      field = 0;
      continue;
    }
    if (line.size() == 2 && line[0] == '.' && std::isupper(static_cast<unsigned char>(line[1]))) {
      if (out.empty()) {
        why = "line " + std::to_string(number) + ": a field before the first .I";
        return std::nullopt;
      }
      field = line[1];
      out.back().fields[field]; // present, if empty
      continue;
    }
    if (field == 0) {
      if (trimmed(line).empty())
        continue;
      why = "line " + std::to_string(number) + ": text outside a field";
      return std::nullopt;
    }
    auto j = joints.find(field);
    append(out.back().fields[field], j == joints.end() ? trimmed(line) : line,
           j == joints.end() ? ' ' : j->second);
  }
  return out;
}

} // namespace

std::optional<std::vector<document>> read_documents(const std::string& text, std::string& why) {
  auto records = read_records(text, {{'W', '\n'}}, why);
  if (!records)
    return std::nullopt;
  std::vector<document> out;
  std::set<int> seen;
  for (auto& r : *records) {
    auto id = positive_number(r.id);
    if (!id) {
      why = "document id '" + r.id + "' is not a positive number";
      return std::nullopt;
    }
    if (!seen.insert(*id).second) {
      why = "document " + r.id + " is given twice";
      return std::nullopt;
    }
    document d;
    d.id = *id;
    d.title = std::move(r.fields['T']);
    d.text = std::move(r.fields['W']);
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<std::vector<query>> read_queries(const std::string& text, std::string& why) {
  auto records = read_records(text, {}, why);
  if (!records)
    return std::nullopt;
  std::vector<query> out;
  for (auto& r : *records) {
    query q;
    q.number = static_cast<int>(out.size()) + 1;
    q.text = std::move(r.fields['W']);
    out.push_back(std::move(q));
  }
  return out;
}

std::optional<judgments> read_cleverdon_judgments(const std::string& text, std::string& why) {
  judgments out;
  std::istringstream in{text};
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (trimmed(line).empty())
      continue;
    std::istringstream fields{line};
    long q = 0;
    long d = 0;
    long code = 0;
    std::string rest;
    if (!(fields >> q >> d >> code) || (fields >> rest) || q <= 0 || d <= 0 || q > 1000000000
        || d > 1000000000) {
      why = "line " + std::to_string(number) + ": not 'query document code'";
      return std::nullopt;
    }
    if (code < 1 || code > 4)
      continue;
    auto& gain = out[static_cast<int>(q)][static_cast<int>(d)];
    gain = std::max(gain, static_cast<int>(5 - code));
  }
  return out;
}

measures measure(const std::vector<int>& ranking, const std::map<int, int>& relevant, size_t k,
                 size_t depth) {
  measures m;
  if (relevant.empty())
    return m;
  std::set<int> seen;
  double dcg = 0;
  double precision_sum = 0;
  size_t found = 0;
  size_t rank = 0;
  for (auto id : ranking) {
    if (!seen.insert(id).second)
      continue;
    ++rank;
    if (rank > std::max(k, depth))
      break;
    auto r = relevant.find(id);
    auto gain = r == relevant.end() ? 0 : r->second;
    if (rank <= k)
      dcg += gain / std::log2(static_cast<double>(rank) + 1);
    if (rank <= depth && gain > 0) {
      ++found;
      precision_sum += static_cast<double>(found) / static_cast<double>(rank);
    }
  }
  std::vector<int> gains;
  for (const auto& [id, gain] : relevant)
    gains.push_back(gain);
  std::sort(gains.rbegin(), gains.rend());
  double ideal = 0;
  for (size_t i = 0; i < gains.size() && i < k; ++i)
    ideal += gains[i] / std::log2(static_cast<double>(i) + 2);
  m.ndcg = ideal > 0 ? dcg / ideal : 0;
  m.average_precision = precision_sum / static_cast<double>(relevant.size());
  m.recall = static_cast<double>(found) / static_cast<double>(relevant.size());
  return m;
}

} // namespace quarry::test::ir
