// Fuzz target for the extractive provider's logic: every role answers any
// conversation without crashing, and reports cite only documents that exist.

#include "extractive.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

using namespace quarry;
using namespace quarry::plugins::llm_extractive;

namespace {

// Returns the numbers of the `[n]` markers in `text`.
std::vector<long> markers_of(const std::string& text) {
  std::vector<long> result;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '[')
      continue;
    size_t j = i + 1;
    long value = 0;
    while (j < text.size() && j < i + 8 && text[j] >= '0' && text[j] <= '9')
      value = value * 10 + (text[j++] - '0');
    if (j > i + 1 && j < text.size() && text[j] == ']')
      result.push_back(value);
  }
  return result;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> result;
  size_t pos = 0;
  while (true) {
    auto end = text.find(sep, pos);
    result.push_back(text.substr(pos, end == std::string_view::npos ? end : end - pos));
    if (end == std::string_view::npos)
      return result;
    pos = end + 1;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input{reinterpret_cast<const char*>(data), size};
  split_sentences(input);
  tokenize(input);
  split_question(input);
  // Reports cite only the documents they were given.
  auto docs = parse_tool_result(input);
  std::set<long> numbers;
  for (const auto& doc : docs)
    numbers.insert(doc.number);
  auto report = compose_report(input.substr(0, 80), docs, 8);
  for (auto n : markers_of(report))
    if (numbers.count(n) == 0)
      std::abort();
  // A conversation: system, user, then tool calls and results.
  auto parts = split(input, '\x01');
  std::vector<sdk::chat_message> messages;
  static const char* names[] = {"research_agent", "web_search", "open_url", "internal_search",
                                "think_tool"};
  for (size_t i = 0; i < parts.size() && i < 12; ++i) {
    sdk::chat_message msg;
    msg.content = std::string{parts[i]};
    if (i == 0) {
      msg.author = sdk::role::system;
    } else if (i == 1 || i % 4 == 0) {
      msg.author = sdk::role::user;
    } else if (i % 2 == 0) {
      msg.author = sdk::role::assistant;
      sdk::tool_call call;
      call.id = "c" + std::to_string(i);
      call.name = names[i % 5];
      call.arguments = msg.content;
      msg.tool_calls.push_back(call);
    } else {
      msg.author = sdk::role::tool;
      msg.tool_call_id = "c" + std::to_string(i - 1);
      msg.tool_name = names[(i - 1) % 5];
    }
    messages.push_back(std::move(msg));
  }
  for (auto tag : {"clarify", "plan", "orchestrate", "research", "report", "final", "x"}) {
    sdk::chat_request req;
    req.role_tag = tag;
    req.messages = messages;
    for (auto name : {"generate_plan", "research_agent", "think_tool", "generate_report",
                      "web_search", "open_url", "internal_search"}) {
      sdk::tool_definition def;
      def.name = name;
      req.tools.push_back(def);
    }
    compose_options opts;
    opts.max_parallel = 3;
    auto res = respond(req, opts);
    if (std::string_view{tag} == "orchestrate") {
      size_t agents = 0;
      for (const auto& call : res.tool_calls)
        agents += call.name == "research_agent" ? 1 : 0;
      if (agents > 3)
        std::abort();
    }
  }
  return 0;
}
