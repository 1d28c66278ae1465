// Request body construction for the Anthropic Messages API.

#include "anthropic_request.hpp"

#include "quarry/sdk/json.hpp"

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
  warnings.push_back("anthropic: arguments of tool call `" + call.id + "` ("
                     + call.name
                     + ") are not a JSON object (or nest too deeply); "
                       "sending {}");
  return json::object();
}

void append(std::vector<pending_message>& out, const std::string& role,
            json blocks) {
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

} // namespace

converted_messages convert_messages(const std::vector<sdk::chat_message>& messages,
                                    std::vector<std::string>& warnings) {
  converted_messages result;
  std::vector<pending_message> out;
  for (const auto& msg : messages) {
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
        auto blocks = json::array();
        if (!msg.content.empty())
          blocks.push_back(text_block(msg.content));
        for (const auto& call : msg.tool_calls)
          blocks.push_back({{"type", "tool_use"},
                            {"id", call.id},
                            {"name", call.name},
                            {"input", tool_input(call, warnings)}});
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

json build_request_body(const config& cfg, const sdk::chat_request& req,
                        std::vector<std::string>& warnings) {
  json body = json::object();
  body["model"] = req.model.empty() ? cfg.model : req.model;
  auto max_tokens = req.max_tokens > 0 ? req.max_tokens : cfg.max_tokens;
  auto conv = convert_messages(req.messages, warnings);
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
        body["tool_choice"] = {{"type", "any"}};
        break;
      case sdk::tool_choice::none:
        body["tool_choice"] = {{"type", "none"}};
        break;
    }
  }
  auto thinking = cfg.thinking_enabled() && req.reasoning_effort != "none";
  if (thinking && !req.tools.empty() && req.choice == sdk::tool_choice::required) {
    warnings.push_back("anthropic: extended thinking is not allowed when tool "
                       "use is forced; sending the request without thinking");
    thinking = false;
  }
  if (thinking) {
    // max_tokens includes the thinking budget: keep the caller's answer room.
    if (max_tokens <= cfg.thinking_budget)
      max_tokens += cfg.thinking_budget;
    body["thinking"] = {{"type", "enabled"},
                        {"budget_tokens", cfg.thinking_budget}};
  } else if (auto t = req.temperature ? req.temperature : cfg.temperature) {
    body["temperature"] = *t;
  }
  body["max_tokens"] = max_tokens;
  body["stream"] = true;
  return body;
}

} // namespace quarry::plugins::llm_anthropic
