// A session's usage summed: models, tokens of model calls only, the cost
// and whether it is known, the duration.

#include "session_usage.hpp"

#include <doctest/doctest.h>

namespace session_usage_test {

using namespace quarry;

TEST_CASE("session usage: models are listed once, the offline provider without tokens") {
  std::vector<store::usage_group> groups{
    {"plan", "main", "gpt-4o", "priced", 2, 100, 20, 0.5},
    {"plan", "main", "gpt-4o", "unpriced", 1, 10, 2, 0},
    {"report", "offline", "", "offline", 3, 500, 50, 0},
    {"agent", "", "", "priced", 1, 1, 1, 0.25}, // a row of schema 3
  };
  auto u = app::summarize_usage(groups);
  CHECK(u.calls == 7);
  CHECK(u.offline_calls == 3);
  CHECK(u.model_calls() == 4);
  CHECK(u.unpriced_calls == 1);
  CHECK(u.input_tokens == 111);
  CHECK(u.output_tokens == 23);
  CHECK(u.cost == doctest::Approx(0.75));
  CHECK_FALSE(u.cost_known());
  CHECK(app::cost_text(u) == "at least $0.7500 (1 call unpriced)");
  auto models = app::session_models_json(u);
  REQUIRE(models.size() == 2);
  CHECK(models[0]
        == nlohmann::json{{"role", "plan"},
                          {"provider", "main"},
                          {"model", "gpt-4o"},
                          {"offline", false},
                          {"calls", 3},
                          {"input_tokens", 110},
                          {"output_tokens", 22},
                          {"cost", 0.5},
                          {"cost_known", false}});
  CHECK(models[1]
        == nlohmann::json{{"role", "report"},
                          {"provider", "offline"},
                          {"model", nullptr},
                          {"offline", true},
                          {"calls", 3}});
  auto j = app::session_usage_json(u);
  CHECK(j["model_calls"] == 4);
  CHECK(j["cost_known"] == false);

  auto offline = app::summarize_usage({{"report", "offline", "", "offline", 3, 500, 50, 0}});
  CHECK(app::cost_text(offline).empty());
  CHECK(app::session_usage_json(offline)["input_tokens"] == 0);
  auto unpriced = app::summarize_usage({{"plan", "local", "llama3.1:8b", "unpriced", 2, 1, 1, 0}});
  CHECK(app::cost_text(unpriced) == "cost unknown");
}

TEST_CASE("session usage: the duration runs to the end, to now while running") {
  store::session_row row;
  row.created_at = 1000;
  row.updated_at = 4000;
  CHECK(app::session_duration_ms(row, store::session_state::running, 9000) == 8000);
  CHECK(app::session_duration_ms(row, store::session_state::interrupted, 9000) == 3000);
  row.finished_at = 6000;
  CHECK(app::session_duration_ms(row, store::session_state::completed, 9000) == 5000);
  row.finished_at = 0;
  row.created_at = 10000;
  CHECK(app::session_duration_ms(row, store::session_state::pending, 9000) == 0);
}

} // namespace session_usage_test
