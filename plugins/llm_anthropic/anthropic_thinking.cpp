// Encoding and decoding of the reasoning state (signed thinking blocks).

#include "anthropic_thinking.hpp"

#include "quarry/sdk/json.hpp"

#include <utility>

namespace quarry::plugins::llm_anthropic {

namespace {

using nlohmann::json;

// Returns the string member `key` of `x` if it is a string.
const std::string* string_member(const json& x, const char* key) {
  auto i = x.find(key);
  return i != x.end() && i->is_string() ? &i->get_ref<const std::string&>() : nullptr;
}

} // namespace

json to_content_block(const thinking_block& block) {
  if (block.redacted)
    return {{"type", "redacted_thinking"}, {"data", block.data}};
  return {{"type", "thinking"}, {"thinking", block.thinking}, {"signature", block.signature}};
}

std::string encode_reasoning_state(const std::vector<thinking_block>& blocks) {
  if (blocks.empty() || blocks.size() > max_thinking_blocks)
    return {};
  // Cheap size check before building anything (the JSON text is longer).
  size_t raw = 0;
  for (const auto& block : blocks) {
    if (!block.complete())
      return {};
    raw += block.thinking.size() + block.signature.size() + block.data.size();
  }
  if (raw > max_reasoning_state)
    return {};
  auto out = json::array();
  for (const auto& block : blocks) {
    auto entry = to_content_block(block);
    if (block.after_tools > 0)
      entry["after_tools"] = block.after_tools;
    out.push_back(std::move(entry));
  }
  // The text came from the API as UTF-8 (repaired by the stream decoder), so
  // no replacement happens here.
  auto text = sdk::dump_json(out);
  if (text.size() > max_reasoning_state)
    return {};
  return text;
}

std::optional<std::vector<thinking_block>> decode_reasoning_state(std::string_view text,
                                                                  std::string& why) {
  if (text.size() > max_reasoning_state) {
    why = "larger than " + std::to_string(max_reasoning_state) + " bytes";
    return std::nullopt;
  }
  sdk::json_limits limits;
  limits.max_depth = 2;       // an array of flat objects
  limits.repair_utf8 = false; // signed text must be sent back byte for byte
  std::string parse_error;
  auto parsed = sdk::parse_json(text, &parse_error, limits);
  if (parsed.is_discarded()) {
    why = "not JSON (" + parse_error + ")";
    return std::nullopt;
  }
  if (!parsed.is_array() || parsed.empty()) {
    why = "not a non-empty JSON array";
    return std::nullopt;
  }
  if (parsed.size() > max_thinking_blocks) {
    why = "more than " + std::to_string(max_thinking_blocks) + " blocks";
    return std::nullopt;
  }
  std::vector<thinking_block> result;
  result.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    const auto& entry = parsed[i];
    auto bad = [&](const std::string& what) {
      why = "block " + std::to_string(i) + ": " + what;
      return std::nullopt;
    };
    if (!entry.is_object())
      return bad("not an object");
    auto type = string_member(entry, "type");
    if (type == nullptr)
      return bad("no `type`");
    thinking_block block;
    size_t known = 1; // `type`
    if (*type == "thinking") {
      auto thinking = string_member(entry, "thinking");
      auto signature = string_member(entry, "signature");
      if (thinking == nullptr || signature == nullptr || signature->empty())
        return bad("a thinking block needs `thinking` and a non-empty `signature`");
      block.thinking = *thinking;
      block.signature = *signature;
      known += 2;
    } else if (*type == "redacted_thinking") {
      auto data = string_member(entry, "data");
      if (data == nullptr || data->empty())
        return bad("a redacted_thinking block needs a non-empty `data`");
      block.redacted = true;
      block.data = *data;
      known += 1;
    } else {
      return bad("unknown type");
    }
    if (auto j = entry.find("after_tools"); j != entry.end()) {
      if (!j->is_number_unsigned() || j->get<uint64_t>() > max_thinking_blocks)
        return bad("`after_tools` is not a small non-negative integer");
      block.after_tools = static_cast<size_t>(j->get<uint64_t>());
      ++known;
    }
    if (!result.empty() && block.after_tools < result.back().after_tools)
      return bad("`after_tools` goes backwards");
    if (entry.size() != known)
      return bad("unknown keys");
    result.push_back(std::move(block));
  }
  return result;
}

} // namespace quarry::plugins::llm_anthropic
