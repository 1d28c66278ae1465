// libFuzzer target: the HTML nesting limiter and extraction under a deadline.
// The first byte repeats the rest of the input (1-256 times) so that short
// inputs can build deep pages. Checks: the limiter only removes tags (never
// adds bytes beyond one space per removed tag, keeps text outside tags),
// extraction output is valid UTF-8 for valid input, and an expired deadline
// always gives a timeout error.

#include "quarry/extract/html.hpp"
#include "quarry/sdk/text.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

namespace ce = quarry::extract;
namespace sdk = quarry::sdk;

namespace {

void check(bool condition) {
  if (!condition)
    std::abort();
}

size_t count(std::string_view s, char c) {
  size_t n = 0;
  for (auto x : s)
    n += x == c ? 1 : 0;
  return n;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  size_t times = 1 + data[0];
  std::string_view unit{reinterpret_cast<const char*>(data) + 1, size - 1};
  std::string html;
  html.reserve(unit.size() * times);
  for (size_t i = 0; i < times; ++i)
    html.append(unit);
  html = sdk::repair_utf8(html);
  for (size_t max_depth : {size_t{4}, ce::max_html_depth}) {
    auto limited = ce::limit_html_nesting(html, max_depth);
    if (limited) {
      check(limited->size() <= html.size());
      check(count(*limited, '<') < count(html, '<'));
      check(sdk::is_valid_utf8(*limited));
    }
  }
  auto x = ce::extract_html(html, "https://example.com/");
  check(sdk::is_valid_utf8(x.text));
  check(sdk::is_valid_utf8(x.title));
  ce::extract_options expired;
  expired.deadline = std::chrono::steady_clock::now() - std::chrono::seconds{1};
  auto r = ce::try_extract_html(html, "", expired);
  auto* err = std::get_if<sdk::error>(&r);
  check(err != nullptr && err->code == sdk::errc::timeout);
  return 0;
}
