// Running a tool plugin in a test: one call, waited for, and checked to
// answer exactly once. Header-only; include it from doctest test files only.

#pragma once

#include "quarry/sdk/tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>

namespace quarry::test {

/// Runs `tool` with `args` and returns its result; fails the test when the
/// tool gives no call handle or no result within `timeout`, and checks that
/// the result came exactly once.
inline sdk::tool_result run_tool(sdk::tool& tool, const nlohmann::json& args,
                                 std::chrono::seconds timeout = std::chrono::seconds{60}) {
  auto promise = std::make_shared<std::promise<sdk::tool_result>>();
  auto future = promise->get_future();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto handle = tool.run(args, [promise, calls](sdk::tool_result r) {
    if (calls->fetch_add(1) == 0)
      promise->set_value(std::move(r));
  });
  REQUIRE(handle != nullptr);
  REQUIRE(future.wait_for(timeout) == std::future_status::ready);
  auto result = future.get();
  CHECK(calls->load() == 1);
  return result;
}

} // namespace quarry::test
