// Message-history construction within a token budget.

#include "quarry/core/history.hpp"

#include <nlohmann/json.hpp>

#include <set>

namespace quarry::core {

int64_t estimate_tokens(const sdk::chat_message& m) {
  size_t chars = m.content.size() + m.reasoning.size();
  for (const auto& call : m.tool_calls)
    chars += call.name.size() + call.arguments.size() + 40;
  return static_cast<int64_t>((chars + 3) / 4) + 4;
}

sdk::chat_message make_reminder(const std::string& text) {
  sdk::chat_message m;
  m.author = sdk::role::user;
  m.content = "<system-reminder>\n" + text + "\n</system-reminder>";
  return m;
}

void append_tool_round(std::vector<sdk::chat_message>& history,
                       const std::vector<sdk::tool_call>& calls,
                       const std::function<std::string(const sdk::tool_call&)>& result_of,
                       turn_reasoning reasoning) {
  sdk::chat_message assistant;
  assistant.author = sdk::role::assistant;
  assistant.reasoning = std::move(reasoning.text);
  assistant.reasoning_state = std::move(reasoning.state);
  assistant.tool_calls = calls;
  history.push_back(std::move(assistant));
  for (const auto& call : calls) {
    sdk::chat_message m;
    m.author = sdk::role::tool;
    m.tool_call_id = call.id;
    m.tool_name = call.name;
    m.content = result_of(call);
    history.push_back(std::move(m));
  }
}

std::vector<sdk::chat_message> pair_tool_results(std::vector<sdk::chat_message> messages) {
  std::vector<sdk::chat_message> out;
  out.reserve(messages.size());
  std::set<std::string> called;
  std::set<std::string> answered;
  // Calls of the latest assistant message still waiting for a result.
  std::vector<sdk::tool_call> open_copy;
  auto close_open = [&] {
    for (const auto& call : open_copy)
      if (answered.count(call.id) == 0) {
        sdk::chat_message r;
        r.author = sdk::role::tool;
        r.tool_call_id = call.id;
        r.tool_name = call.name;
        r.content = missing_tool_result_text;
        answered.insert(call.id);
        out.push_back(std::move(r));
      }
    open_copy.clear();
  };
  for (auto& m : messages) {
    if (m.author == sdk::role::tool) {
      if (called.count(m.tool_call_id) == 0 || answered.count(m.tool_call_id) > 0)
        continue; // orphan or duplicate
      answered.insert(m.tool_call_id);
      out.push_back(std::move(m));
      continue;
    }
    close_open();
    if (m.author == sdk::role::assistant)
      for (const auto& call : m.tool_calls) {
        called.insert(call.id);
        open_copy.push_back(call);
      }
    out.push_back(std::move(m));
  }
  close_open();
  return out;
}

std::variant<std::vector<sdk::chat_message>, std::string>
build_history(history_input in, const token_counter& count) {
  int64_t fixed = count(in.system);
  if (in.custom)
    fixed += count(*in.custom);
  for (const auto& m : in.context)
    fixed += count(m);
  if (in.reminder)
    fixed += count(*in.reminder);
  auto budget = in.available_tokens - fixed;
  if (budget < 0)
    return "not enough tokens for the system prompt, instructions and "
           "reminder: they need "
           + std::to_string(fixed) + ", the model allows " + std::to_string(in.available_tokens);
  std::vector<sdk::chat_message> out;
  // Each part is moved into the result once it is no longer read.
  auto append_rest = [&out, &in] {
    if (in.custom)
      out.push_back(std::move(*in.custom));
    for (auto& m : in.context)
      out.push_back(std::move(m));
  };
  if (in.history.empty()) {
    out.reserve(2 + in.context.size());
    out.push_back(std::move(in.system));
    append_rest();
    if (in.reminder)
      out.push_back(std::move(*in.reminder));
    return out;
  }
  auto history = pair_tool_results(std::move(in.history));
  size_t start = 0;
  // The last user message splits the history.
  size_t last_user = history.size();
  for (size_t i = history.size(); i-- > 0;)
    if (history[i].author == sdk::role::user) {
      last_user = i;
      break;
    }
  if (in.last_n_user_messages) {
    if (last_user == history.size())
      return std::string{"the history has no user message"};
    size_t seen = 0;
    for (size_t i = history.size(); i-- > 0;)
      if (history[i].author == sdk::role::user
          && ++seen == std::max<size_t>(*in.last_n_user_messages, 1)) {
        start = i;
        break;
      }
  }
  if (last_user == history.size())
    last_user = start; // no user message: everything is "after"
  int64_t tail = 0;
  for (size_t i = last_user; i < history.size(); ++i)
    tail += count(history[i]);
  if (tail > budget)
    return "not enough tokens for the last user message and what follows "
           "it: they need "
           + std::to_string(tail) + ", " + std::to_string(budget) + " are left";
  budget -= tail;
  // Older messages, newest first, while they fit.
  size_t keep_from = last_user;
  while (keep_from > start) {
    auto need = count(history[keep_from - 1]);
    if (need > budget)
      break;
    budget -= need;
    --keep_from;
  }
  out.reserve(3 + in.context.size() + history.size() - keep_from);
  out.push_back(std::move(in.system));
  for (size_t i = keep_from; i < last_user; ++i)
    out.push_back(std::move(history[i]));
  append_rest();
  for (size_t i = last_user; i < history.size(); ++i)
    out.push_back(std::move(history[i]));
  if (in.reminder)
    out.push_back(std::move(*in.reminder));
  // Cutting the older part may orphan results of calls that were dropped.
  return pair_tool_results(std::move(out));
}

} // namespace quarry::core
