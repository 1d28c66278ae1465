// Request body construction for the Anthropic Messages API.

#include "anthropic_request.hpp"

#include "anthropic_thinking.hpp"

#include "quarry/sdk/json.hpp"

#include <cstdint>
#include <limits>
#include <utility>

namespace quarry::plugins::llm_anthropic {

namespace {

using nlohmann::json;

// A message under construction: a role and its content blocks.
struct pending_message {
  std::string role;
  json blocks = json::array();
};

json text_block(const std::string& text) {
  return {{"type", "text"}, {"text", text}};
}

json tool_input(const sdk::tool_call& call, std::vector<std::string>& warnings) {
  if (call.arguments.empty())
    return json::object();
  auto parsed = sdk::parse_json(call.arguments);
  if (parsed.is_object())
    return parsed;
  warnings.push_back("anthropic: arguments of tool call `" + call.id + "` (" + call.name
                     + ") are not a JSON object (or nest too deeply); "
                       "sending {}");
  return json::object();
}

void append(std::vector<pending_message>& out, const std::string& role, json blocks) {
  if (blocks.empty())
    return;
  if (out.empty() || out.back().role != role)
    out.push_back(pending_message{role, json::array()});
  for (auto& block : blocks)
    out.back().blocks.push_back(std::move(block));
}

bool is_tool_result(const json& block) {
  return block.value("type", "") == "tool_result";
}

// Returns whether the array `content` has a block of type `type`.
bool has_block(const json& content, const char* type) {
  if (!content.is_array())
    return false;
  for (const auto& block : content)
    if (block.is_object() && block.value("type", "") == type)
      return true;
  return false;
}

// The thinking blocks to send back with assistant message `msg` (number
// `index` of the request), or none when its state cannot go back whole.
std::vector<thinking_block> thinking_of(const sdk::chat_message& msg, size_t index, bool merging,
                                        std::vector<std::string>& warnings) {
  if (msg.reasoning_state.empty() || (msg.content.empty() && msg.tool_calls.empty()))
    return {};
  auto refuse = [&](const std::string& why) {
    warnings.push_back("anthropic: the reasoning state of message " + std::to_string(index)
                       + " (assistant) " + why + "; sending that turn without its thinking blocks");
    return std::vector<thinking_block>{};
  };
  std::string why;
  auto blocks = decode_reasoning_state(msg.reasoning_state, why);
  if (!blocks)
    return refuse("is unusable: " + why);
  // A block after the last tool call would end the message, which the API
  // refuses; the state then belongs to another turn.
  if (auto last = blocks->back().after_tools; last > 0 && last >= msg.tool_calls.size())
    return refuse("places a block after tool call " + std::to_string(msg.tool_calls.size()));
  if (merging)
    return refuse("would land in the middle of a merged assistant message");
  return std::move(*blocks);
}

// Returns `a + b` for non-negative values, saturated at INT64_MAX.
int64_t saturated_add(int64_t a, int64_t b) {
  constexpr auto top = std::numeric_limits<int64_t>::max();
  return a > top - b ? top : a + b;
}

} // namespace

converted_messages convert_messages(const std::vector<sdk::chat_message>& messages,
                                    std::vector<std::string>& warnings, bool with_thinking) {
  converted_messages result;
  std::vector<pending_message> out;
  for (size_t index = 0; index < messages.size(); ++index) {
    const auto& msg = messages[index];
    switch (msg.author) {
      case sdk::role::system:
        if (!msg.content.empty()) {
          if (!result.system.empty())
            result.system += "\n\n";
          result.system += msg.content;
        }
        break;
      case sdk::role::user: {
        auto blocks = json::array();
        if (!msg.content.empty())
          blocks.push_back(text_block(msg.content));
        append(out, "user", std::move(blocks));
        break;
      }
      case sdk::role::assistant: {
        std::vector<thinking_block> thinking;
        if (with_thinking) {
          auto merging = !out.empty() && out.back().role == "assistant";
          thinking = thinking_of(msg, index, merging, warnings);
        }
        auto blocks = json::array();
        // Puts back the thinking blocks that came after `tools` tool calls.
        size_t next = 0;
        auto put_thinking = [&](size_t tools) {
          while (next < thinking.size() && thinking[next].after_tools <= tools)
            blocks.push_back(to_content_block(thinking[next++]));
        };
        put_thinking(0);
        if (!msg.content.empty())
          blocks.push_back(text_block(msg.content));
        for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
          put_thinking(k);
          const auto& call = msg.tool_calls[k];
          blocks.push_back({{"type", "tool_use"},
                            {"id", call.id},
                            {"name", call.name},
                            {"input", tool_input(call, warnings)}});
        }
        append(out, "assistant", std::move(blocks));
        break;
      }
      case sdk::role::tool: {
        auto blocks = json::array();
        blocks.push_back({{"type", "tool_result"},
                          {"tool_use_id", msg.tool_call_id},
                          {"content", msg.content},
                          {"is_error", false}});
        append(out, "user", std::move(blocks));
        break;
      }
    }
  }
  for (auto& msg : out) {
    // Anthropic wants the answers to tool calls before any other user text.
    auto blocks = json::array();
    for (auto& block : msg.blocks)
      if (is_tool_result(block))
        blocks.push_back(std::move(block));
    for (auto& block : msg.blocks)
      if (!block.is_null() && !is_tool_result(block))
        blocks.push_back(std::move(block));
    json content;
    if (blocks.size() == 1 && blocks[0].value("type", "") == "text")
      content = blocks[0]["text"];
    else
      content = std::move(blocks);
    result.messages.push_back({{"role", msg.role}, {"content", std::move(content)}});
  }
  return result;
}

bool tool_turn_lacks_thinking(const json& messages) {
  if (!messages.is_array() || messages.size() < 2)
    return false;
  const auto& last = messages[messages.size() - 1];
  const auto& prev = messages[messages.size() - 2];
  if (!last.is_object() || last.value("role", "") != "user"
      || !has_block(last.value("content", json()), "tool_result"))
    return false;
  if (!prev.is_object() || prev.value("role", "") != "assistant")
    return false;
  auto content = prev.value("content", json());
  if (!has_block(content, "tool_use"))
    return false;
  auto first = content[0].is_object() ? content[0].value("type", "") : "";
  return first != "thinking" && first != "redacted_thinking";
}

json build_request_body(const config& cfg, const sdk::chat_request& req,
                        std::vector<std::string>& warnings) {
  json body = json::object();
  body["model"] = req.model.empty() ? cfg.model : req.model;
  auto max_tokens = req.max_tokens > 0 ? req.max_tokens : cfg.max_tokens;
  auto thinking = cfg.thinking_enabled() && req.reasoning_effort != "none";
  auto conv = convert_messages(req.messages, warnings, thinking);
  if (thinking && tool_turn_lacks_thinking(conv.messages)) {
    // The API's own remedy: "To avoid this requirement, disable thinking".
    warnings.push_back("anthropic: the assistant tool-use turn this request "
                       "continues carries no signed thinking blocks (no "
                       "usable reasoning_state); sending this request without "
                       "extended thinking, as the API requires");
    thinking = false;
    std::vector<std::string> again; // the same warnings a second time
    conv = convert_messages(req.messages, again, false);
  }
  if (!conv.system.empty())
    body["system"] = std::move(conv.system);
  body["messages"] = std::move(conv.messages);
  if (!req.tools.empty()) {
    auto tools = json::array();
    for (const auto& tool : req.tools) {
      auto schema = tool.parameters;
      if (!schema.is_object() || schema.empty())
        schema = {{"type", "object"}, {"properties", json::object()}};
      json entry = {{"name", tool.name}, {"input_schema", std::move(schema)}};
      if (!tool.description.empty())
        entry["description"] = tool.description;
      tools.push_back(std::move(entry));
    }
    body["tools"] = std::move(tools);
    switch (req.choice) {
      case sdk::tool_choice::automatic:
        body["tool_choice"] = {{"type", "auto"}};
        break;
      case sdk::tool_choice::required:
        // With thinking the API allows only `auto` and `none`: the host
        // checks that a tool was called and retries once with a reminder.
        body["tool_choice"] = {{"type", thinking ? "auto" : "any"}};
        break;
      case sdk::tool_choice::none:
        body["tool_choice"] = {{"type", "none"}};
        break;
    }
  }
  if (thinking) {
    // max_tokens includes the thinking and must exceed the budget: keep the
    // caller's answer room when the budget would eat it.
    if (max_tokens - cfg.thinking_budget < min_answer_tokens)
      max_tokens = saturated_add(max_tokens, cfg.thinking_budget);
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", cfg.thinking_budget}};
  } else if (auto t = req.temperature ? req.temperature : cfg.temperature) {
    body["temperature"] = *t;
  }
  body["max_tokens"] = max_tokens;
  body["stream"] = true;
  return body;
}

} // namespace quarry::plugins::llm_anthropic
