// Secret masking in log lines.

#include "quarry/host/logging.hpp"

#include <doctest/doctest.h>

using namespace quarry;

TEST_CASE("logging masks every occurrence of every secret") {
  std::vector<std::string> secrets{"sk-abc123", "tok_999"};
  CHECK(host::mask_secrets("key sk-abc123 and sk-abc123, token tok_999", secrets)
        == "key *** and ***, token ***");
  CHECK(host::mask_secrets("nothing to hide", secrets) == "nothing to hide");
}

TEST_CASE("logging ignores secrets too short to mask safely") {
  // Masking "ab" would mangle ordinary words and reveal the secret's length.
  CHECK(host::mask_secrets("about abc", {"ab"}) == "about abc");
}

TEST_CASE("logging accepts exactly the documented levels") {
  for (const auto* level : {"trace", "debug", "info", "warn", "error", "off"})
    CHECK(host::valid_log_level(level));
  CHECK_FALSE(host::valid_log_level("verbose"));
  CHECK_FALSE(host::valid_log_level("INFO"));
  CHECK_FALSE(host::valid_log_level(""));
}
