// Which models Quarry treats as reasoning models before they answer.

#include "quarry/core/model_profile.hpp"

#include <doctest/doctest.h>

namespace model_profile_test {

using quarry::core::reasoning_model_by_config;
using quarry::core::reasoning_model_by_name;

TEST_CASE("reasoning models by name: the well-known families, through gateways") {
  for (auto name : {"o1", "o1-mini", "o3", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini",
                    "deepseek-reasoner", "deepseek-r1:14b", "DeepSeek-R1-Distill-Qwen-32B", "qwq",
                    "qwq:32b", "qwen3:8b", "Qwen/Qwen3-235B-A22B-Thinking-2507", "gemini-2.5-pro",
                    "openai/o3-mini", "deepseek/deepseek-r1", "phi-4-reasoning", "magistral-small"})
    CHECK_MESSAGE(reasoning_model_by_name(name), name);
  for (auto name : {"gpt-4o", "gpt-4.1-mini", "llama3.2", "deepseek-chat", "qwen2.5:7b",
                    "Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-coder:30b", "claude-sonnet-4-5",
                    "mistral-large", "o1x", "pro3", "", "grok-4-fast-non-reasoning"})
    CHECK_FALSE_MESSAGE(reasoning_model_by_name(name), name);
}

TEST_CASE("reasoning models by configuration: the provider's own setting wins over the name") {
  CHECK(reasoning_model_by_config("openai", {{"model", "my-model"}, {"reasoning", true}}));
  CHECK_FALSE(reasoning_model_by_config("openai", {{"model", "o3"}, {"reasoning", false}}));
  CHECK(reasoning_model_by_config("openai", {{"model", "o3"}}));
  CHECK(reasoning_model_by_config("anthropic",
                                  {{"model", "claude-sonnet-4-5"}, {"thinking_budget", 4096}}));
  CHECK_FALSE(reasoning_model_by_config("anthropic",
                                        {{"model", "claude-sonnet-4-5"}, {"thinking_budget", 0}}));
  CHECK_FALSE(reasoning_model_by_config("extractive", {{"model", "o3"}}));
  CHECK_FALSE(reasoning_model_by_config("openai", nlohmann::json::array()));
}

} // namespace model_profile_test
