// Checking typed tool arguments against the schema a tool declares.

#include "quarry/core/tool_args.hpp"

#include <doctest/doctest.h>

namespace tool_args_schema_test {

using namespace quarry;
using json = nlohmann::json;

TEST_CASE("tool argument schema: types, required keys, items and enums") {
  auto schema = json::parse(R"({
    "type": "object",
    "properties": {
      "queries": {"type": "array", "items": {"type": "string"}},
      "limit": {"type": "integer"},
      "mode": {"type": "string", "enum": ["fast", "deep"]}
    },
    "required": ["queries"]})");
  CHECK_FALSE(core::check_tool_arguments(schema, json::parse(R"({"queries": ["a"]})")));
  CHECK_FALSE(core::check_tool_arguments(
    schema, json::parse(R"({"queries": [], "limit": 3.0, "mode": "deep", "extra": 1})")));
  auto missing = core::check_tool_arguments(schema, json::object());
  REQUIRE(missing);
  CHECK(*missing == "the arguments needs 'queries'");
  auto wrong = core::check_tool_arguments(schema, json::parse(R"({"queries": "a"})"));
  REQUIRE(wrong);
  CHECK(*wrong == "'queries' must be array, not a string");
  auto item = core::check_tool_arguments(schema, json::parse(R"({"queries": ["a", 7]})"));
  REQUIRE(item);
  CHECK(*item == "'queries'[1] must be string, not an integer");
  auto fraction = core::check_tool_arguments(schema,
                                             json::parse(R"({"queries": [], "limit": 2.5})"));
  REQUIRE(fraction);
  CHECK(fraction->find("'limit' must be integer") == 0);
  auto huge = core::check_tool_arguments(schema, json::parse(R"({"queries": [], "limit": 1e300})"));
  CHECK(huge);
  auto mode = core::check_tool_arguments(schema, json::parse(R"({"queries": [], "mode": "slow"})"));
  REQUIRE(mode);
  CHECK(mode->find("'mode' must be one of") == 0);
  // A schema this checker does not understand accepts everything.
  CHECK_FALSE(core::check_tool_arguments(json::object(), json::parse(R"({"x": 1})")));
  CHECK_FALSE(core::check_tool_arguments("nonsense", json::parse(R"({"x": 1})")));
}

} // namespace tool_args_schema_test
