// Fuzzes open_url's pure parts and the SSRF policy: URL parsing, resolving
// and checking, address classification, argument normalisation, snippet
// matching and windows. Any bytes must give an answer without crashing, and windows
// must stay within their size (the snippet's span when that is longer).

#include "open_url_text.hpp"

#include "quarry/fetch/address_policy.hpp"
#include "quarry/fetch/url.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ou = quarry::plugins::open_url;
namespace qf = quarry::fetch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input{reinterpret_cast<const char*>(data), size};
  // Split the input: content | snippet.
  auto bar = input.find('|');
  auto content = input.substr(0, bar);
  auto snippet = bar == std::string_view::npos ? std::string_view{} : input.substr(bar + 1);
  static const auto policy = std::get<qf::address_policy>(
    qf::address_policy::make({"10.0.0.0/8", "intranet.example"}));
  (void)policy.check_url(input);
  (void)policy.check("intranet.example", content);
  (void)qf::classify_address(input);
  (void)qf::parse_legacy_ipv4(input);
  (void)qf::parse_url(input);
  (void)qf::resolve_url("http://a/b/c/d;p?q", input);
  (void)qf::resolve_url(content, snippet);
  (void)qf::redact_url(input);
  (void)qf::address_range::parse(input);
  (void)ou::url_key(input);
  auto args = nlohmann::json::parse(input, nullptr, false);
  if (!args.is_discarded())
    (void)ou::normalize_urls(args);
  (void)ou::normalize_urls({{"urls", std::string{input}}});
  if (auto span = ou::find_snippet(content, snippet)) {
    if (span->first > span->second || span->second > content.size())
      __builtin_trap();
  }
  // Windows of page text (always valid UTF-8 by then): at most 64
  // characters, or the snippet's span when that is longer (used as is), plus
  // the two "[...truncated]" markers.
  auto page = quarry::sdk::repair_utf8(content);
  auto wanted = quarry::sdk::repair_utf8(snippet);
  auto window = ou::window_text(page, wanted, 64);
  size_t allowed = 64;
  if (auto span = ou::find_snippet(page, wanted))
    allowed = std::max(allowed, ou::count_chars(std::string_view{page}.substr(
                                  span->first, span->second - span->first)));
  if (ou::count_chars(window) > allowed + 30 && ou::count_chars(page) > 64)
    __builtin_trap();
  // Invalid UTF-8 straight in: an answer, never a crash.
  (void)ou::window_text(content, snippet, 64);
  auto text = ou::format_sections({{"t", "u", "", std::string{content}, ""}},
                                  {{"u", std::string{snippet}}}, "", 1000)
                .first;
  if (text.empty())
    __builtin_trap();
  return 0;
}
