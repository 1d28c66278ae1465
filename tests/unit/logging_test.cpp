// Secret masking in log lines.

#include "quarry/host/logging.hpp"
#include "quarry/sdk/secrets.hpp"

#include <doctest/doctest.h>

namespace logging_test {

using namespace quarry;

TEST_CASE("logging masks every occurrence of every secret") {
  std::vector<std::string> secrets{"sk-abc123", "tok_99999"};
  CHECK(sdk::mask_secrets("key sk-abc123 and sk-abc123, token tok_99999", secrets)
        == "key *** and ***, token ***");
  CHECK(sdk::mask_secrets("url ?key=sk-abc123&x=1 \"sk-abc123\"", secrets)
        == "url ?key=***&x=1 \"***\"");
  CHECK(sdk::mask_secrets("nothing to hide", secrets) == "nothing to hide");
}

TEST_CASE("logging ignores secrets too short to mask safely") {
  // Masking "ab" would mangle ordinary words and reveal the secret's length.
  CHECK(sdk::mask_secrets("about abc", {"ab"}) == "about abc");
  // A user's one-letter test key garbled provider messages.
  CHECK(sdk::mask_secrets("invalid_api_key: check the key", {"k", "key", "api_key"})
        == "invalid_api_key: check the key");
}

TEST_CASE("logging masks whole values only, not pieces of longer words") {
  std::vector<std::string> secrets{"password1"};
  CHECK(sdk::mask_secrets("password12345 password1", secrets) == "password12345 ***");
  CHECK(sdk::mask_secrets("xpassword1 password1.", secrets) == "xpassword1 ***.");
}

TEST_CASE("logging accepts exactly the documented levels") {
  for (const auto* level : {"trace", "debug", "info", "warn", "error", "off"})
    CHECK(host::valid_log_level(level));
  CHECK_FALSE(host::valid_log_level("verbose"));
  CHECK_FALSE(host::valid_log_level("INFO"));
  CHECK_FALSE(host::valid_log_level(""));
}

} // namespace logging_test
