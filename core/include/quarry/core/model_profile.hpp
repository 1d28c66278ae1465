// What Quarry can tell about a model before it answers: whether it reasons
// natively (the design's "reasoning model": 4 orchestrator cycles, no
// think_tool).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace quarry::core {

/// Whether `model` is a well-known reasoning model by its name: OpenAI's o1,
/// o3 and o4 families and gpt-5, DeepSeek's reasoner and R1 (with its
/// distillations), QwQ, Qwen3's thinking models, Gemini 2.5, Grok's
/// reasoning models, Magistral, Phi-4 reasoning. A gateway's vendor prefix
/// (`openai/o3-mini`, `deepseek/deepseek-r1`) is ignored. Matched
/// case-insensitively; an unknown name is not a reasoning model.
bool reasoning_model_by_name(std::string_view model);

/// Whether an LLM provider instance of plugin `plugin` with options `config`
/// reasons natively: its own setting (`openai`: `reasoning: true`;
/// `anthropic`: a `thinking_budget`), else its model's name (see
/// @ref reasoning_model_by_name). The extractive provider never does.
bool reasoning_model_by_config(const std::string& plugin, const nlohmann::json& config);

} // namespace quarry::core
