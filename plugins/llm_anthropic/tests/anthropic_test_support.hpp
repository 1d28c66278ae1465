// What the `anthropic` plugin's tests share: its recorded fixtures.

#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace quarry::test {

/// The bytes of a recorded Anthropic Messages fixture, `rel` below the
/// fixtures' `llm/anthropic_messages/` folder; fails the test when missing.
inline std::string anthropic_fixture(const std::string& rel) {
  std::ifstream in{std::string{QUARRY_FIXTURES_DIR} + "/llm/anthropic_messages/"
                     + rel,
                   std::ios::binary};
  REQUIRE_MESSAGE(in.good(), "missing fixture " << rel);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The recorded exchanges that hold HTTP error answers.
inline constexpr const char* recorded_error_exchanges[] = {
  "recorded_exchanges/_parse__TestAsyncParse__d743d628-16aa-4c9f-ae78-"
  "51deb578f746.json",
  "recorded_exchanges/_parse__TestAsyncStream__a8b7dbb8-2321-4624-abdb-"
  "7ba2136b5c38.json",
  "recorded_exchanges/tools__TestSyncRunTools__f59a9391-643b-422c-96dc-"
  "1f28bc7ea4d7.json"};

} // namespace quarry::test
