// The shipped price table: name matching, configured prices over the table,
// the table turned off, and how a usage packet says what it knows.

#include "quarry/core/config_limits.hpp"
#include "quarry/core/model_prices.hpp"
#include "quarry/core/packets.hpp"

#include <doctest/doctest.h>

#include <set>

namespace model_prices_test {

using namespace quarry::core;

namespace {

// The table's input price of `model`, or -1 when the table has none.
double table_input(std::string_view model) {
  const auto* row = shipped_price(model);
  return row == nullptr ? -1 : row->prices.input;
}

llm_limits limits_of(const nlohmann::json& j) {
  llm_limits out;
  auto errors = read_limits(j, out);
  REQUIRE(errors.empty());
  return out;
}

} // namespace

TEST_CASE("model prices: names match exactly, with a version suffix or a provider prefix") {
  CHECK(table_input("gpt-4o") == doctest::Approx(2.50));
  CHECK(table_input("gpt-4o-2024-08-06") == doctest::Approx(2.50));
  // An exact row wins over the suffix rule: the first snapshot kept its price.
  CHECK(table_input("gpt-4o-2024-05-13") == doctest::Approx(5));
  CHECK(table_input("gpt-4o-mini") == doctest::Approx(0.15));
  CHECK(table_input("claude-sonnet-4-5-20250929") == doctest::Approx(3));
  CHECK(table_input("claude-opus-4-20250514") == doctest::Approx(15));
  CHECK(table_input("claude-3-5-haiku-latest") == doctest::Approx(0.80));
  CHECK(table_input("openai/gpt-4.1-mini") == doctest::Approx(0.40));
  CHECK(table_input("anthropic/claude-sonnet-4.5") == doctest::Approx(3));
  CHECK(table_input("models/gemini-2.5-flash-lite") == doctest::Approx(0.10));
  CHECK(table_input("GPT-5-Nano") == doctest::Approx(0.05));
  // No prefix matching, tags and local models match nothing.
  CHECK(table_input("gpt-4o-mini-tts") == -1);
  CHECK(table_input("gpt-5-nano-extra") == -1);
  CHECK(table_input("openai/gpt-4o:free") == -1);
  CHECK(table_input("llama3.1:8b") == -1);
  CHECK(table_input("qwen2.5-72b-instruct") == -1);
  CHECK(table_input("deepseek-chat") == -1);
  CHECK(table_input("") == -1);
  CHECK(table_input("extractive") == -1);
}

TEST_CASE("model prices: every row is named once, lowercase, with a vendor's page") {
  std::set<std::string_view> names;
  for (const auto& row : shipped_model_prices()) {
    INFO(row.model);
    CHECK(names.insert(row.model).second);
    CHECK(canonical_model_name(row.model) == row.model);
    CHECK(row.prices.input > 0);
    CHECK(row.prices.output >= row.prices.input);
    CHECK(row.source.rfind("https://", 0) == 0);
  }
  CHECK(price_table_date.size() == 10);
}

TEST_CASE("model prices: configured prices override the table, and the table can be off") {
  auto table = price_for(llm_limits{}, "gpt-4.1");
  CHECK(table.source == price_source::table);
  CHECK(table.prices.output == doctest::Approx(8));
  CHECK(price_for(llm_limits{}, "llama3.1:8b").source == price_source::none);

  auto all = limits_of({{"prices", {{"input", 1}, {"output", 2}}}});
  auto p = price_for(all, "gpt-4.1");
  CHECK(p.source == price_source::configured_all);
  CHECK(p.prices.output == doctest::Approx(2));
  // A configured price of 0 is a known cost of 0, not unpriced.
  auto free = limits_of({{"prices", {{"input", 0}, {"output", 0}}}});
  CHECK(price_for(free, "llama3.1:8b").source == price_source::configured_all);

  auto per_model = limits_of({{"prices", {{"gpt-4.1", {{"input", 7}, {"output", 9}}}}}});
  CHECK(price_for(per_model, "gpt-4.1").prices.input == doctest::Approx(7));
  // The model's dated name finds the configured key by the same rule.
  auto dated = price_for(per_model, "gpt-4.1-2025-04-14");
  CHECK(dated.source == price_source::configured_model);
  CHECK(dated.prices.input == doctest::Approx(7));
  // Other models still come from the table.
  CHECK(price_for(per_model, "gpt-4o").source == price_source::table);

  auto off = limits_of({{"price_table", false}});
  CHECK_FALSE(off.price_table);
  CHECK(price_for(off, "gpt-4.1").source == price_source::none);
  auto off_but_set = limits_of(
    {{"price_table", false}, {"prices", {{"gpt-4.1", {{"input", 1}, {"output", 1}}}}}});
  CHECK(price_for(off_but_set, "gpt-4.1").source == price_source::configured_model);
  CHECK(price_for(off_but_set, "gpt-4o").source == price_source::none);

  llm_limits bad;
  CHECK_FALSE(read_limits({{"price_table", "no"}}, bad).empty());
  CHECK(cost_usd({2, 8}, 1'000'000, 500'000) == doctest::Approx(6));
}

TEST_CASE("model prices: a usage packet says who answered and whether its cost is known") {
  quarry::sdk::usage u;
  u.input_tokens = 10;
  auto priced = packets::usage("plan", u, 0.5, {"main", "gpt-4o", cost_basis::priced});
  CHECK(priced["provider"] == "main");
  CHECK(priced["model"] == "gpt-4o");
  CHECK(priced["cost_known"] == true);
  CHECK(priced["offline"] == false);
  auto unpriced = packets::usage("plan", u, 0, {"local", "llama3.1:8b", cost_basis::unpriced});
  CHECK(unpriced["cost_known"] == false);
  auto offline = packets::usage("plan", u, 0, {"offline", "extractive", cost_basis::offline});
  CHECK(offline["model"].is_null());
  CHECK(offline["offline"] == true);
  CHECK(offline["cost_known"] == true);
  CHECK(cost_basis_from(to_string(cost_basis::offline)) == cost_basis::offline);
  CHECK(cost_basis_from("something else") == cost_basis::unpriced);
}

} // namespace model_prices_test
