// Digests of findings, renumbered tool results and capped plans.

#include "quarry/core/findings.hpp"

#include "quarry/core/json_check.hpp"

#include "quarry/sdk/json.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <tuple>
#include <vector>

namespace quarry::core {

std::string findings_digest(const std::vector<std::pair<std::string, std::string>>& findings,
                            const citation_mapping& global) {
  if (findings.empty())
    return {};
  std::string digest = "Earlier research agents already found the following; "
                       "build on it and do not repeat it:";
  size_t per = std::max<size_t>(200, findings_digest_budget / findings.size());
  for (const auto& [task, report] : findings) {
    citation_processor strip{citation_mode::remove};
    strip.update_mapping(global);
    auto text = strip.process(report).text + strip.finish().text;
    for (auto& c : text)
      if (c == '\n')
        c = ' ';
    if (text.size() > per) {
      auto cut = text.rfind(' ', per);
      text = text.substr(0, cut == std::string::npos ? per : cut) + " ...";
    }
    digest += "\n- " + task + ": " + text;
  }
  return digest;
}

namespace {

// The old way, for text whose keys the in-place rewrite cannot read as the
// parser would (escaped or repeated keys): parsed, renumbered, written again.
std::string renumber_parsed(const std::string& llm_text,
                            const std::vector<sdk::document>& documents,
                            const std::function<int(const sdk::document&)>& number_of) {
  auto j = nlohmann::ordered_json::parse(llm_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return llm_text;
  auto results = j.find("results");
  if (results == j.end() || !results->is_array())
    return llm_text;
  size_t i = 0;
  for (auto& entry : *results) {
    if (i >= documents.size() || !entry.is_object() || !entry.contains("document"))
      break;
    entry["document"] = number_of(documents[i++]);
  }
  return sdk::dump_json(j, 2);
}

// A walk over text already known to be valid JSON (is_json): positions of
// members and elements, no tree.
class json_walk {
public:
  explicit json_walk(std::string_view text) : text_(text) {
  }

  size_t skip_space(size_t i) const {
    while (i < text_.size()
           && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r'))
      ++i;
    return i;
  }

  // One past the string that opens at i: the first quote after it that an
  // even number of backslashes precedes.
  size_t string_end(size_t i) const {
    while (true) {
      auto quote = text_.find('"', i + 1);
      size_t slashes = 0;
      while (text_[quote - 1 - slashes] == '\\')
        ++slashes;
      if (slashes % 2 == 0)
        return quote + 1;
      i = quote;
    }
  }

  // One past the value that begins at i.
  size_t value_end(size_t i) const {
    if (text_[i] == '"')
      return string_end(i);
    if (text_[i] == '{' || text_[i] == '[') {
      size_t depth = 0;
      while (true) {
        char c = text_[i];
        if (c == '"') {
          i = string_end(i);
          continue;
        }
        if (c == '{' || c == '[')
          ++depth;
        else if ((c == '}' || c == ']') && --depth == 0)
          return i + 1;
        ++i;
      }
    }
    while (i < text_.size() && text_[i] != ',' && text_[i] != '}' && text_[i] != ']'
           && text_[i] != ' ' && text_[i] != '\t' && text_[i] != '\n' && text_[i] != '\r')
      ++i;
    return i;
  }

  // For each member of the object at `open`: `member(key with its quotes,
  // value begin)` returns one past the value, or npos to stop. Returns one
  // past the object, or npos if stopped.
  template <class F>
  size_t members(size_t open, F&& member) const {
    return items(open, '}', [&](size_t key) {
      auto key_end = string_end(key);
      return member(text_.substr(key, key_end - key), skip_space(skip_space(key_end) + 1));
    });
  }

  // For each element of the array at `open`: `element(begin)` returns one
  // past it, or npos to stop. Returns one past the array, or npos if
  // stopped.
  template <class F>
  size_t elements(size_t open, F&& element) const {
    return items(open, ']', element);
  }

private:
  // The comma-separated items of the container at `open` up to `close`:
  // `item(begin)` returns one past the item, or npos to stop.
  template <class F>
  size_t items(size_t open, char close, F&& item) const {
    auto i = skip_space(open + 1);
    if (text_[i] == close)
      return i + 1;
    while (true) {
      auto end = item(i);
      if (end == std::string::npos)
        return end;
      i = skip_space(end);
      if (text_[i] == close)
        return i + 1;
      i = skip_space(i + 1);
    }
  }

  std::string_view text_;
};

} // namespace

std::string renumber_documents(const std::string& llm_text,
                               const std::vector<sdk::document>& documents,
                               const std::function<int(const sdk::document&)>& number_of) {
  // A tool's text comes from outside: valid JSON within the SDK's depth is
  // rewritten in place: only the numbers change, the rest is the tool's
  // text as it wrote it (the tools write it as nlohmann's dump(2) would, so
  // this is what parsing and writing it again gave).
  if (!is_json(llm_text, sdk::default_max_json_depth))
    return llm_text;
  json_walk walk{llm_text};
  // After a UTF-8 byte order mark, which the parser skips.
  auto root = walk.skip_space(llm_text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
  if (llm_text[root] != '{')
    return llm_text;
  constexpr auto npos = std::string::npos;
  // A key written with escapes, or given twice, is left to the parser.
  auto plain = [](std::string_view key) { return key.find('\\') == std::string_view::npos; };
  bool reparse = false;
  bool seen = false;
  // (begin, end, number) of each `document` value to replace.
  std::vector<std::tuple<size_t, size_t, int>> numbers;
  // The entries of `results`, renumbered until one is not an object with a
  // number; returns one past the array.
  auto entries = [&](size_t open) {
    size_t i = 0;
    bool renumbering = true;
    return walk.elements(open, [&](size_t begin) {
      if (!renumbering || i >= documents.size() || llm_text[begin] != '{') {
        renumbering = false;
        return walk.value_end(begin);
      }
      size_t value = npos;
      size_t value_end = 0;
      auto end = walk.members(begin, [&](std::string_view key, size_t at) {
        bool is_document = key == "\"document\"";
        if (!plain(key) || (is_document && value != npos)) {
          reparse = true;
          return npos;
        }
        auto after = walk.value_end(at);
        if (is_document) {
          value = at;
          value_end = after;
        }
        return after;
      });
      if (end == npos)
        return npos;
      if (value == npos)
        renumbering = false;
      else
        numbers.emplace_back(value, value_end, number_of(documents[i++]));
      return end;
    });
  };
  walk.members(root, [&](std::string_view key, size_t at) {
    if (!plain(key) || (key == "\"results\"" && seen)) {
      reparse = true;
      return npos;
    }
    if (key != "\"results\"")
      return walk.value_end(at);
    seen = true;
    if (llm_text[at] != '[')
      return walk.value_end(at);
    return entries(at);
  });
  if (reparse)
    return renumber_parsed(llm_text, documents, number_of);
  if (numbers.empty())
    return llm_text;
  std::string out;
  out.reserve(llm_text.size() + numbers.size() * 4);
  size_t copied = 0;
  for (const auto& [begin, end, n] : numbers) {
    out.append(llm_text, copied, begin - copied);
    out += std::to_string(n);
    copied = end;
  }
  out.append(llm_text, copied, npos);
  return out;
}

size_t plan_cap_end(const std::string& plan, int max_steps) {
  int steps = 0;
  size_t pos = 0;
  while (pos < plan.size()) {
    auto end = plan.find('\n', pos);
    auto first = plan.find_first_not_of(" \t", pos);
    bool numbered = first != std::string::npos && first < end
                    && std::isdigit(static_cast<unsigned char>(plan[first]));
    if (numbered && ++steps > max_steps)
      return pos;
    if (end == std::string::npos)
      break;
    pos = end + 1;
  }
  return std::string::npos;
}

std::string cap_plan(const std::string& plan, int max_steps) {
  auto out = plan.substr(0, plan_cap_end(plan, max_steps));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::string plan_stream_cap::feed(std::string_view piece) {
  std::string out;
  for (auto c : piece) {
    if (cut_)
      break;
    if (c == '\n') {
      out += held_;
      held_.clear();
      out += c;
      line_started_ = false;
    } else if (line_started_) {
      out += c;
    } else if (c == ' ' || c == '\t') {
      held_ += c;
    } else {
      line_started_ = true;
      if (std::isdigit(static_cast<unsigned char>(c)) && ++steps_ > max_steps_) {
        cut_ = true;
        held_.clear();
        break;
      }
      out += held_;
      held_.clear();
      out += c;
    }
  }
  return out;
}

} // namespace quarry::core
