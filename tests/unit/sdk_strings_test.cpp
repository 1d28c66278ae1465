// The SDK's string helpers, shared by the host and the plugins.

#include "quarry/sdk/strings.hpp"

#include <doctest/doctest.h>

#include <string>

namespace sdk_strings_test {

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

TEST_CASE("sdk strings: hex digits and percent-decoding") {
  CHECK(sdk::hex_digit_value('0') == 0);
  CHECK(sdk::hex_digit_value('9') == 9);
  CHECK(sdk::hex_digit_value('a') == 10);
  CHECK(sdk::hex_digit_value('F') == 15);
  CHECK(sdk::hex_digit_value('g') == -1);
  CHECK(sdk::hex_digit_value('\0') == -1);
  CHECK(sdk::percent_decode("a%20b%2fc%C3%A9") == "a b/c\xC3\xA9");
  // A % without two hex digits stays, also at the very end.
  CHECK(sdk::percent_decode("100% %zz %4") == "100% %zz %4");
  CHECK(sdk::percent_decode("%41") == "A");
  CHECK(sdk::percent_decode("%00") == std::string(1, '\0'));
  CHECK(sdk::percent_decode(sdk::url_encode("any \x01 bytes/é")) == "any \x01 bytes/é");
  CHECK(sdk::percent_decode_strict("a%20b") == "a b");
  CHECK_FALSE(sdk::percent_decode_strict("a%2"));
  CHECK_FALSE(sdk::percent_decode_strict("a%zz"));
  CHECK_FALSE(sdk::percent_decode_strict("%"));
  CHECK(sdk::percent_decode_strict("") == "");
}

TEST_CASE("sdk strings: UTF-8 decoding and appending code points") {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  uint32_t want[] = {'a', 0xE9, 0x20AC, 0x1F600};
  size_t lengths[] = {1, 2, 3, 4};
  size_t pos = 0;
  for (size_t k = 0; k < 4; ++k) {
    auto c = sdk::decode_utf8(text, pos);
    CHECK(c.code_point == want[k]);
    CHECK(c.length == lengths[k]);
    std::string again;
    sdk::append_utf8(again, c.code_point);
    CHECK(again == text.substr(pos, c.length));
    pos += c.length;
  }
  // Invalid bytes: one U+FFFD per byte, never past the end.
  for (auto bad : {"\xFF", "\xC3", "\xE2\x82", "\xC0\xAF", "\xED\xA0\x80", "\x80"}) {
    std::string s = bad;
    CAPTURE(s);
    auto c = sdk::decode_utf8(s, 0);
    CHECK(c.code_point == 0xFFFD);
    CHECK(c.length == 1);
  }
  std::string out;
  sdk::append_utf8(out, 0xD800);   // a surrogate
  sdk::append_utf8(out, 0x110000); // beyond Unicode
  CHECK(out == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("sdk strings: digit groups for counts in messages, to the ends of int64") {
  using quarry::sdk::digit_groups;
  CHECK(digit_groups(0) == "0");
  CHECK(digit_groups(999) == "999");
  CHECK(digit_groups(1000) == "1,000");
  CHECK(digit_groups(131072) == "131,072");
  CHECK(digit_groups(-1000) == "-1,000");
  CHECK(digit_groups(INT64_MAX) == "9,223,372,036,854,775,807");
  CHECK(digit_groups(INT64_MIN) == "-9,223,372,036,854,775,808");
}

} // namespace sdk_strings_test
