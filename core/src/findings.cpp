// Digests of findings, renumbered tool results and capped plans.

#include "quarry/core/findings.hpp"

#include "quarry/sdk/json.hpp"

#include <algorithm>
#include <cctype>

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

std::string renumber_documents(const std::string& llm_text,
                               const std::vector<sdk::document>& documents,
                               const std::function<int(const sdk::document&)>& number_of) {
  // A tool's text comes from outside: bound the depth before parsing.
  if (sdk::json_nesting_depth(llm_text, sdk::default_max_json_depth) > sdk::default_max_json_depth)
    return llm_text;
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
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
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
