// The time limits of the designs as configuration: the five-agent design's
// deep_research mode has its own research deadline (300 s), apart from
// research.deadline.

#include "quarry/core/config.hpp"
#include "quarry/core/settings.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace session_limits_test {

using namespace quarry::core;
using namespace std::chrono_literals;

namespace {

settings loaded(std::string_view yaml, std::vector<std::string> overrides = {}) {
  load_options opts;
  opts.overrides = std::move(overrides);
  opts.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto res = load_config_text(yaml, "test.yaml", opts);
  std::string errors;
  for (const auto& e : res.errors)
    errors += e.to_string() + "\n";
  INFO(errors);
  REQUIRE(res.config.has_value());
  return res.config->values;
}

} // namespace

TEST_CASE("session limits: the reflective deep_research mode's deadline is 300 s by default, "
          "every other session's research.deadline") {
  research_settings r;
  CHECK(r.deep_research_deadline == 300s);
  CHECK(r.deadline == 30min);
  // The configured strategy and mode (orchestrator, deep_research).
  CHECK(r.deadline_for("", "") == 30min);
  CHECK(r.deadline_for("reflective", "") == 300s);
  CHECK(r.deadline_for("reflective", "deep_research") == 300s);
  CHECK(r.deadline_for("reflective", "web_search") == 30min);
  CHECK(r.deadline_for("reflective", "simple") == 30min);
  CHECK(r.deadline_for("orchestrator", "deep_research") == 30min);
  r.strategy = "reflective";
  CHECK(r.deadline_for("", "") == 300s);
  CHECK(r.deadline_for("orchestrator", "") == 30min);
  r.mode = "web_search";
  CHECK(r.deadline_for("", "") == 30min);
  CHECK(r.deadline_for("", "deep_research") == 300s);
}

TEST_CASE("session limits: research.deep_research_deadline is configurable and checked") {
  auto s = loaded("research:\n  deep_research_deadline: 90s\n  strategy: reflective\n");
  CHECK(s.research.deep_research_deadline == 90s);
  CHECK(s.research.deadline_for("", "") == 90s);
  CHECK(s.research.deadline == 30min);
  auto set = loaded("{}\n", {"research.deep_research_deadline=12m"});
  CHECK(set.research.deep_research_deadline == 12min);
  CHECK(set.research.deadline_for("reflective", "deep_research") == 12min);
  load_options opts;
  opts.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto bad = load_config_text("research:\n  deep_research_deadline: 0s\n", "test.yaml", opts);
  REQUIRE_FALSE(bad.config.has_value());
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors.front().to_string().find("research.deep_research_deadline")
        != std::string::npos);
}

} // namespace session_limits_test
