// What a model call costs: the price table Quarry ships for common hosted
// models, the rule that matches a model's name against it, and the order in
// which a provider's configured `prices` and the table apply
// (docs/configuration.md, "Prices").

#pragma once

#include "quarry/core/settings.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::core {

/// One row of the shipped price table.
struct model_price_row {
  /// The model's name as its vendor's API takes it, lowercase, without a
  /// date or version suffix, e.g. `gpt-4o` or `claude-sonnet-4-5`.
  std::string_view model;
  /// US dollars per million input and output tokens (the standard rate of
  /// a request without batch or cache discounts; for models priced by prompt
  /// length, the rate of the shortest prompts).
  token_prices prices;
  /// The vendor's pricing page the figures were read from.
  std::string_view source;
};

/// The day the shipped table was made (`YYYY-MM-DD`). Vendors change their
/// prices; a row older than this may be out of date, and configured `prices`
/// override it.
inline constexpr std::string_view price_table_date = "2026-12-01";

/// The shipped table, grouped by vendor. Only figures that the vendor's own
/// page (or copies of it that agree) confirmed are in it: DeepSeek, whose
/// `deepseek-chat` and `deepseek-reasoner` names were repriced several times
/// as the model behind them changed, and Mistral are left out.
const std::vector<model_price_row>& shipped_model_prices();

/// The name a model is looked up by: lowercase, without a provider prefix
/// (everything up to the last `/`, as in `openai/gpt-4o` of OpenRouter or
/// `models/gemini-2.5-pro` of the Gemini API); a Claude name's dots become
/// dashes (OpenRouter's `claude-sonnet-4.5` is Anthropic's
/// `claude-sonnet-4-5`).
std::string canonical_model_name(std::string_view model);

/// The shipped row of `model`, if any. The rule: the canonical name
/// (canonical_model_name) as a row's name; else the canonical name without
/// one trailing version suffix (`-YYYY-MM-DD` as in `gpt-4o-2024-08-06`,
/// `-YYYYMMDD` as in `claude-sonnet-4-5-20250929`, `-latest`, or a
/// three-digit `-NNN` as in `gemini-2.0-flash-001`) as a row's name. No
/// other prefix matching: `gpt-4o-mini` is not `gpt-4o`, and a name with a
/// tag (`llama3.1:8b`, `openai/gpt-4o:free`) matches nothing.
const model_price_row* shipped_price(std::string_view model);

/// Where the price of a call comes from.
enum class price_source : uint8_t {
  /// The provider's `prices` for this model.
  configured_model,
  /// The provider's `prices` for every model (`{input, output}`).
  configured_all,
  /// The shipped table.
  table,
  /// No price applies: the cost is unknown (reported as `unpriced`, never
  /// as free).
  none,
};

/// The price of one model under a provider's limits.
struct model_price {
  token_prices prices;
  price_source source = price_source::none;
};

/// The price of `model` under `limits`, in this order: `prices` for the
/// model (a key equal to the name, or whose canonical name, without a
/// version suffix, is the model's), `prices` for every model, the shipped
/// table unless `price_table` is off, else none.
model_price price_for(const llm_limits& limits, std::string_view model);

/// US dollars for `input` and `output` tokens at `prices`.
double cost_usd(const token_prices& prices, int64_t input, int64_t output);

/// How the cost of a call is known.
enum class cost_basis : uint8_t {
  /// Priced by configured `prices` or the shipped table (a price of 0 is a
  /// known cost of 0).
  priced,
  /// A model without a price (a local model, a name the table lacks): its
  /// cost is unknown and counted as 0.
  unpriced,
  /// No model ran: the offline extractive provider. Its token counts are
  /// estimates and are not shown as tokens.
  offline,
};

/// `priced`, `unpriced` or `offline`.
const char* to_string(cost_basis x) noexcept;

/// The basis named `x`; `unpriced` for any other text.
cost_basis cost_basis_from(std::string_view x) noexcept;

} // namespace quarry::core
