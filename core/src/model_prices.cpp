// The shipped price table and the lookup of a model's price.

#include "quarry/core/model_prices.hpp"

#include <algorithm>
#include <cctype>

namespace quarry::core {

namespace {

// The vendors' pricing pages (read for price_table_date).
constexpr std::string_view openai_prices = "https://developers.openai.com/api/docs/pricing";
constexpr std::string_view anthropic_prices
  = "https://platform.claude.com/docs/en/about-claude/pricing";
constexpr std::string_view google_prices = "https://ai.google.dev/gemini-api/docs/pricing";

bool all_digits(std::string_view x) {
  return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `x` without one trailing version suffix (`-YYYY-MM-DD`, `-YYYYMMDD`,
// `-latest`, `-NNN`), or nullopt when it has none.
std::optional<std::string> without_version(std::string_view x) {
  auto ends_with = [&](size_t n, auto&& ok) {
    return x.size() > n + 1 && x[x.size() - n - 1] == '-' && ok(x.substr(x.size() - n));
  };
  auto date = [](std::string_view s) {
    return s.size() == 10 && all_digits(s.substr(0, 4)) && s[4] == '-' && all_digits(s.substr(5, 2))
           && s[7] == '-' && all_digits(s.substr(8, 2));
  };
  if (ends_with(10, date))
    return std::string{x.substr(0, x.size() - 11)};
  if (ends_with(8, all_digits))
    return std::string{x.substr(0, x.size() - 9)};
  if (ends_with(3, all_digits))
    return std::string{x.substr(0, x.size() - 4)};
  if (ends_with(6, [](std::string_view s) { return s == "latest"; }))
    return std::string{x.substr(0, x.size() - 7)};
  return std::nullopt;
}

} // namespace

const std::vector<model_price_row>& shipped_model_prices() {
  // USD per million input / output tokens, standard rate. Made on
  // price_table_date from the vendors' pages named in `source`.
  static const std::vector<model_price_row> rows{
    // OpenAI.
    {"gpt-5.1", {1.25, 10}, openai_prices},
    {"gpt-5", {1.25, 10}, openai_prices},
    {"gpt-5-mini", {0.25, 2}, openai_prices},
    {"gpt-5-nano", {0.05, 0.40}, openai_prices},
    {"gpt-4.1", {2, 8}, openai_prices},
    {"gpt-4.1-mini", {0.40, 1.60}, openai_prices},
    {"gpt-4.1-nano", {0.10, 0.40}, openai_prices},
    {"gpt-4o", {2.50, 10}, openai_prices},
    // The first GPT-4o snapshot kept its launch price.
    {"gpt-4o-2024-05-13", {5, 15}, openai_prices},
    {"gpt-4o-mini", {0.15, 0.60}, openai_prices},
    {"o3", {2, 8}, openai_prices},
    {"o4-mini", {1.10, 4.40}, openai_prices},
    // Anthropic (the rate of prompts up to 200K tokens).
    {"claude-opus-4-1", {15, 75}, anthropic_prices},
    {"claude-opus-4-0", {15, 75}, anthropic_prices},
    {"claude-opus-4", {15, 75}, anthropic_prices},
    {"claude-sonnet-4-5", {3, 15}, anthropic_prices},
    {"claude-sonnet-4-0", {3, 15}, anthropic_prices},
    {"claude-sonnet-4", {3, 15}, anthropic_prices},
    {"claude-3-7-sonnet", {3, 15}, anthropic_prices},
    {"claude-haiku-4-5", {1, 5}, anthropic_prices},
    {"claude-3-5-haiku", {0.80, 4}, anthropic_prices},
    {"claude-3-haiku", {0.25, 1.25}, anthropic_prices},
    // Google Gemini API (2.5 Pro: prompts up to 200K tokens).
    {"gemini-2.5-pro", {1.25, 10}, google_prices},
    {"gemini-2.5-flash", {0.30, 2.50}, google_prices},
    {"gemini-2.5-flash-lite", {0.10, 0.40}, google_prices},
  };
  return rows;
}

std::string canonical_model_name(std::string_view model) {
  if (auto slash = model.rfind('/'); slash != std::string_view::npos)
    model.remove_prefix(slash + 1);
  std::string out{model};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // OpenRouter writes Claude's versions with dots (`claude-sonnet-4.5`),
  // Anthropic with dashes.
  if (out.rfind("claude-", 0) == 0)
    std::replace(out.begin(), out.end(), '.', '-');
  return out;
}

const model_price_row* shipped_price(std::string_view model) {
  const auto& rows = shipped_model_prices();
  auto find = [&](std::string_view name) -> const model_price_row* {
    for (const auto& r : rows)
      if (r.model == name)
        return &r;
    return nullptr;
  };
  auto name = canonical_model_name(model);
  if (name.empty())
    return nullptr;
  if (const auto* r = find(name))
    return r;
  if (auto base = without_version(name))
    return find(*base);
  return nullptr;
}

model_price price_for(const llm_limits& limits, std::string_view model) {
  if (!limits.model_prices.empty()) {
    if (auto i = limits.model_prices.find(std::string{model}); i != limits.model_prices.end())
      return {i->second, price_source::configured_model};
    auto name = canonical_model_name(model);
    auto base = without_version(name);
    for (const auto& [key, prices] : limits.model_prices) {
      auto k = canonical_model_name(key);
      if (k == name || (base && k == *base))
        return {prices, price_source::configured_model};
    }
  }
  if (limits.default_prices)
    return {*limits.default_prices, price_source::configured_all};
  if (limits.price_table)
    if (const auto* r = shipped_price(model))
      return {r->prices, price_source::table};
  return {};
}

double cost_usd(const token_prices& prices, int64_t input, int64_t output) {
  return (static_cast<double>(input) * prices.input + static_cast<double>(output) * prices.output)
         / 1e6;
}

const char* to_string(cost_basis x) noexcept {
  switch (x) {
    case cost_basis::priced:
      return "priced";
    case cost_basis::unpriced:
      return "unpriced";
    case cost_basis::offline:
      return "offline";
  }
  return "unpriced";
}

cost_basis cost_basis_from(std::string_view x) noexcept {
  if (x == "priced")
    return cost_basis::priced;
  if (x == "offline")
    return cost_basis::offline;
  return cost_basis::unpriced;
}

} // namespace quarry::core
