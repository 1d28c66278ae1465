// What Quarry can tell about a model before it answers.

#include "quarry/core/model_profile.hpp"

#include "quarry/sdk/strings.hpp"

#include <initializer_list>

namespace quarry::core {

namespace {

/// Whether `name` starts with `prefix` followed by the end, a separator or
/// a digit-free suffix such as `-mini`.
bool family(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix)
    return false;
  if (name.size() == prefix.size())
    return true;
  auto next = name[prefix.size()];
  return next == '-' || next == ':' || next == '.' || next == '_' || next == '@';
}

} // namespace

bool reasoning_model_by_name(std::string_view model) {
  auto lower = sdk::to_lower(model);
  std::string_view name{lower};
  // `vendor/model` of gateways (OpenRouter, LiteLLM).
  if (auto slash = name.rfind('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  for (auto x : {"o1", "o3", "o4-mini", "o3-mini", "o1-mini", "o1-preview", "o3-pro", "o1-pro",
                 "gpt-5", "deepseek-reasoner", "deepseek-r1", "qwq", "magistral-small",
                 "magistral-medium", "phi-4-reasoning"})
    if (family(name, x))
      return true;
  if (name.rfind("gpt-5", 0) == 0 || name.rfind("gemini-2.5", 0) == 0
      || name.rfind("gemini-3", 0) == 0)
    return true;
  if (sdk::contains(name, "r1-distill") || sdk::contains(name, "-thinking")
      || sdk::contains(name, "grok-3-mini") || sdk::contains(name, "-reasoning"))
    return !sdk::contains(name, "non-reasoning");
  // Qwen3's hybrid models think unless told not to; its instruct and coder
  // releases do not.
  if (family(name, "qwen3") || name.rfind("qwen3", 0) == 0)
    return !sdk::contains(name, "instruct") && !sdk::contains(name, "coder");
  return false;
}

bool reasoning_model_by_config(const std::string& plugin, const nlohmann::json& config) {
  if (plugin == "extractive" || !config.is_object())
    return false;
  if (auto r = config.find("reasoning"); r != config.end() && r->is_boolean())
    return r->get<bool>();
  if (auto t = config.find("thinking_budget");
      t != config.end() && t->is_number_integer() && t->get<int64_t>() > 0)
    return true;
  if (auto m = config.find("model"); m != config.end() && m->is_string())
    return reasoning_model_by_name(m->get<std::string>());
  return false;
}

} // namespace quarry::core
