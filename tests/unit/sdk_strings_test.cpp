// The SDK's ASCII string helpers, shared by the host and the plugins.

#include "quarry/sdk/strings.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace quarry;

TEST_CASE("sdk strings: trim, case, prefixes and percent-encoding") {
  CHECK(sdk::trim(" \t\r\n\f\vword word\n ") == "word word");
  CHECK(sdk::trim("   ").empty());
  CHECK(sdk::trim("").empty());
  // Only ASCII whitespace: a no-break space (U+00A0) stays.
  CHECK(sdk::trim("\xc2\xa0x") == "\xc2\xa0x");
  CHECK(sdk::to_lower("MiXeD ÄÖ 123") == "mixed ÄÖ 123");
  CHECK(sdk::ascii_lower('Q') == 'q');
  CHECK(sdk::ascii_lower('\xc4') == '\xc4');
  CHECK(sdk::starts_with("quarry", "qua"));
  CHECK_FALSE(sdk::starts_with("qu", "quarry"));
  CHECK(sdk::ends_with("report.md", ".md"));
  CHECK_FALSE(sdk::ends_with("md", "report.md"));
  CHECK(sdk::contains("heat pump", "t p"));
  CHECK(sdk::url_encode("a b&c=d/é~-._") == "a%20b%26c%3Dd%2F%C3%A9~-._");
  CHECK(sdk::url_encode(std::string{"\0\xff", 2}) == "%00%FF");
}
