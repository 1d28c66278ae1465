// Validation of the `anthropic` plugin's instance configuration.

#include "anthropic_config.hpp"

#include "quarry/sdk/llm_provider.hpp"

#include <cstdint>
#include <stdexcept>
#include <string_view>

namespace quarry::plugins::llm_anthropic {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("anthropic: " + what);
}

std::string get_string(const nlohmann::json& x, const char* key) {
  const auto& value = x.at(key);
  if (!value.is_string())
    fail(std::string{"`"} + key + "` must be a string");
  return value.get<std::string>();
}

int64_t get_int(const nlohmann::json& x, const char* key, int64_t min_value) {
  const auto& value = x.at(key);
  if (!value.is_number_integer() && !value.is_number_unsigned())
    fail(std::string{"`"} + key + "` must be an integer");
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail(std::string{"`"} + key + "` is too large");
  auto result = value.get<int64_t>();
  if (result < min_value)
    fail(std::string{"`"} + key + "` must be at least " + std::to_string(min_value));
  return result;
}

bool starts_with(std::string_view x, std::string_view prefix) {
  return x.substr(0, prefix.size()) == prefix;
}

// Returns whether `url` points at the public Anthropic API.
bool is_public_api(std::string_view url) {
  for (std::string_view scheme : {"https://", "http://"}) {
    if (starts_with(url, scheme)) {
      auto rest = url.substr(scheme.size());
      auto host = rest.substr(0, rest.find_first_of("/:?#"));
      return host == "api.anthropic.com";
    }
  }
  return false;
}

} // namespace

std::string config::messages_url() const {
  return base_url + "/v1/messages";
}

config parse_config(const nlohmann::json& x) {
  if (!x.is_object())
    fail("the configuration must be an object");
  config result;
  bool has_reasoning = false;
  for (const auto& [key, value] : x.items()) {
    if (key == "base_url") {
      result.base_url = get_string(x, "base_url");
      while (!result.base_url.empty() && result.base_url.back() == '/')
        result.base_url.pop_back();
      if (!starts_with(result.base_url, "http://") && !starts_with(result.base_url, "https://"))
        fail("`base_url` must start with http:// or https://");
    } else if (key == "api_key") {
      result.api_key = get_string(x, "api_key");
    } else if (key == "model") {
      result.model = get_string(x, "model");
    } else if (key == "anthropic_version") {
      result.anthropic_version = get_string(x, "anthropic_version");
      if (result.anthropic_version.empty())
        fail("`anthropic_version` must not be empty");
    } else if (key == "beta") {
      if (value.is_string()) {
        result.beta.push_back(value.get<std::string>());
      } else if (value.is_array()) {
        for (const auto& item : value) {
          if (!item.is_string())
            fail("`beta` must be a list of strings");
          result.beta.push_back(item.get<std::string>());
        }
      } else {
        fail("`beta` must be a list of strings");
      }
    } else if (key == "max_tokens") {
      result.max_tokens = get_int(x, "max_tokens", 1);
    } else if (key == "thinking_budget") {
      result.thinking_budget = get_int(x, "thinking_budget", 0);
      if (result.thinking_budget > 0 && result.thinking_budget < min_thinking_budget)
        fail("`thinking_budget` must be 0 (off) or at least " + std::to_string(min_thinking_budget)
             + " (the API's minimum)");
    } else if (key == "headers") {
      if (!value.is_object())
        fail("`headers` must be an object of strings");
      for (const auto& [name, field] : value.items()) {
        if (!field.is_string())
          fail("`headers." + name + "` must be a string");
        if (name.empty())
          fail("`headers` must not contain an empty name");
        result.headers.emplace_back(name, field.get<std::string>());
      }
    } else if (key == "context_window") {
      result.context_window = get_int(x, "context_window", 1);
    } else if (key == "temperature") {
      if (!value.is_number())
        fail("`temperature` must be a number");
      auto t = value.get<double>();
      if (t < 0 || t > 2)
        fail("`temperature` must be between 0 and 2");
      result.temperature = t;
    } else if (key == "reasoning") {
      // A host key; a boolean also says whether the model reasons.
      if (value.is_boolean()) {
        result.reasoning = value.get<bool>();
        has_reasoning = true;
      }
    } else {
      fail("unknown configuration key `" + key + "`");
    }
  }
  if (result.model.empty())
    fail("`model` is required");
  if (result.api_key.empty() && is_public_api(result.base_url))
    fail("`api_key` is required for " + result.base_url);
  if (!has_reasoning)
    result.reasoning = result.thinking_budget > 0;
  return result;
}

sdk::http_headers make_headers(const config& cfg) {
  sdk::http_headers result;
  result.emplace_back("content-type", "application/json");
  result.emplace_back("accept", "text/event-stream");
  if (!cfg.api_key.empty())
    result.emplace_back("x-api-key", cfg.api_key);
  result.emplace_back("anthropic-version", cfg.anthropic_version);
  if (!cfg.beta.empty()) {
    std::string joined;
    for (const auto& item : cfg.beta) {
      if (!joined.empty())
        joined += ',';
      joined += item;
    }
    result.emplace_back("anthropic-beta", std::move(joined));
  }
  for (const auto& field : cfg.headers)
    result.push_back(field);
  return result;
}

} // namespace quarry::plugins::llm_anthropic
