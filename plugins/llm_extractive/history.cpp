// What a request holds for the extractive provider: its question and task,
// its tool calls with their results, the tools it offers, and the documents
// of its tool results.

#include "internal.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <map>

namespace quarry::plugins::llm_extractive {

namespace {

// The first user message with text, trimmed.
std::string first_user_text(const std::vector<sdk::chat_message>& messages) {
  for (const auto& msg : messages)
    if (msg.author == sdk::role::user && !sdk::trim(msg.content).empty())
      return std::string{sdk::trim(msg.content)};
  return {};
}

} // namespace

std::string question_of(const sdk::chat_request& req) {
  return req.research.question.empty() ? first_user_text(req.messages) : req.research.question;
}

std::string task_of(const sdk::chat_request& req) {
  return req.research.task.empty() ? first_user_text(req.messages) : req.research.task;
}

// Parses tool-call arguments; tolerates double-encoded JSON.
nlohmann::json parse_arguments(std::string_view text) {
  auto value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  return value.is_object() ? value : nlohmann::json::object();
}

std::vector<call_record> collect_calls(const std::vector<sdk::chat_message>& messages) {
  std::vector<call_record> result;
  std::map<std::string, size_t> by_id;
  for (const auto& msg : messages) {
    if (msg.author == sdk::role::assistant) {
      for (const auto& call : msg.tool_calls) {
        by_id[call.id] = result.size();
        result.push_back({call, nullptr});
      }
    } else if (msg.author == sdk::role::tool) {
      auto i = by_id.find(msg.tool_call_id);
      if (i != by_id.end() && result[i->second].result == nullptr) {
        result[i->second].result = &msg;
      } else if (!msg.tool_name.empty()) {
        // A result whose call is not in the history still counts.
        sdk::tool_call call;
        call.id = msg.tool_call_id;
        call.name = msg.tool_name;
        result.push_back({std::move(call), &msg});
      }
    }
  }
  return result;
}

size_t count_calls(const std::vector<sdk::chat_message>& messages) {
  size_t result = 0;
  for (const auto& msg : messages)
    result += msg.tool_calls.size();
  return result;
}

bool looks_failed(std::string_view text) {
  auto x = sdk::to_lower(text.substr(0, 400));
  return sdk::trim(x).empty() || contains(x, "not run") || contains(x, "failed")
         || contains(x, "timed out");
}

const sdk::tool_definition* find_tool(const sdk::chat_request& req, std::string_view name) {
  for (const auto& tool : req.tools)
    if (tool.name == name)
      return &tool;
  return nullptr;
}

sdk::tool_call make_call(size_t number, std::string name, const nlohmann::json& args) {
  sdk::tool_call result;
  result.id = "call_" + std::to_string(number);
  result.name = std::move(name);
  result.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return result;
}

// Whether `tool` takes an array parameter `key` (how a model tells tools
// apart: by their definitions, not by their names, which users choose).
bool takes_array(const sdk::tool_definition& tool, const char* key) {
  const auto& params = tool.parameters;
  if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object())
    return false;
  const auto& props = params["properties"];
  if (!props.contains(key) || !props[key].is_object())
    return false;
  // A plugin's schema may say anything: `type` may be a list or missing.
  const auto& param = props[key];
  return param.contains("type") && param["type"].is_string()
         && param["type"].get_ref<const std::string&>() == "array";
}

// The search tools of a request (any tool taking `queries`): the files the
// user attached to the research (`session_files`) first, then one named
// `internal_search`, then the others in the request's order.
std::vector<std::string> search_tools(const sdk::chat_request& req) {
  std::vector<std::string> first;
  std::vector<std::string> internal;
  std::vector<std::string> other;
  for (const auto& tool : req.tools) {
    if (!takes_array(tool, "queries"))
      continue;
    if (tool.name == attached_files_tool)
      first.push_back(tool.name);
    else if (tool.name == "internal_search")
      internal.push_back(tool.name);
    else
      other.push_back(tool.name);
  }
  first.insert(first.end(), internal.begin(), internal.end());
  first.insert(first.end(), other.begin(), other.end());
  return first;
}

// The first page reader of a request (a tool taking `urls`), or null.
const sdk::tool_definition* page_reader(const sdk::chat_request& req) {
  for (const auto& tool : req.tools)
    if (takes_array(tool, "urls"))
      return &tool;
  return nullptr;
}

// The search tool of the first search in `calls`.
std::string calls_of_search(const std::vector<call_record>& calls,
                            const std::vector<std::string>& searches) {
  for (const auto& rec : calls)
    if (std::find(searches.begin(), searches.end(), rec.call.name) != searches.end())
      return rec.call.name;
  return searches.empty() ? std::string{} : searches.front();
}

std::vector<source_doc> parse_tool_result(std::string_view content) {
  std::vector<source_doc> result;
  auto value = nlohmann::json::parse(content, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  if (!value.is_object() || !value.contains("results") || !value["results"].is_array())
    return result;
  for (const auto& item : value["results"]) {
    if (!item.is_object() || !item.contains("document"))
      continue;
    const auto& num = item["document"];
    int number = 0;
    if (num.is_number_integer()) {
      auto n = num.get<int64_t>();
      number = n > 0 && n < 1000000 ? static_cast<int>(n) : 0;
    } else if (num.is_string()) {
      auto s = num.get<std::string>();
      if (!s.empty() && s.size() < 7
          && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c); }))
        number = std::stoi(s);
    }
    if (number <= 0)
      continue;
    source_doc doc;
    doc.number = number;
    auto text_of = [&](const char* key) {
      return item.contains(key) && item[key].is_string() ? item[key].get<std::string>()
                                                         : std::string{};
    };
    doc.title = text_of("title");
    doc.url = text_of("url");
    for (auto key : {"content", "snippet"}) {
      auto text = text_of(key);
      if (!sdk::trim(text).empty()) {
        doc.texts.push_back(std::move(text));
        break;
      }
    }
    result.push_back(std::move(doc));
  }
  return result;
}

std::vector<source_doc> collect_documents(const std::vector<sdk::chat_message>& messages) {
  std::vector<source_doc> result;
  std::map<int, size_t> by_number;
  for (const auto& msg : messages) {
    if (msg.author != sdk::role::tool)
      continue;
    for (auto& doc : parse_tool_result(msg.content)) {
      auto i = by_number.find(doc.number);
      if (i == by_number.end()) {
        by_number.emplace(doc.number, result.size());
        result.push_back(std::move(doc));
        continue;
      }
      auto& known = result[i->second];
      if (known.title.empty())
        known.title = doc.title;
      if (known.url.empty())
        known.url = doc.url;
      for (auto& text : doc.texts)
        if (std::find(known.texts.begin(), known.texts.end(), text) == known.texts.end())
          known.texts.push_back(std::move(text));
    }
  }
  return result;
}

} // namespace quarry::plugins::llm_extractive
