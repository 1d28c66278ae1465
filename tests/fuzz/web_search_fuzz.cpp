// Fuzzes the web_search response parsers and the shared cleaning code: any
// bytes must parse or fail cleanly, and every result must render.

#include "brave_search.hpp"
#include "exa_search.hpp"
#include "searxng_search.hpp"
#include "serper_search.hpp"
#include "tavily_search.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace wsc = quarry::plugins::web_search_common;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body{reinterpret_cast<const char*>(data), size};
  std::vector<std::vector<wsc::search_result>> lists;
  lists.push_back(quarry::plugins::web_search_brave::parse_response(body).results);
  lists.push_back(quarry::plugins::web_search_tavily::parse_response(body).results);
  lists.push_back(quarry::plugins::web_search_searxng::parse_response(body, 20).results);
  lists.push_back(quarry::plugins::web_search_exa::parse_response(body).results);
  lists.push_back(quarry::plugins::web_search_serper::parse_response(body).results);
  auto merged = wsc::interleave(lists);
  if (merged.size() > wsc::max_results_cap)
    __builtin_trap();
  auto text = wsc::format_results(merged);
  if (text.empty())
    __builtin_trap();
  // The raw bytes as text, URL, query and error body.
  auto cleaned = wsc::clean_text(body);
  if (cleaned.size() > body.size() * 4 + 4)
    __builtin_trap();
  auto url = wsc::clean_url(body);
  if (url.size() > body.size())
    __builtin_trap();
  wsc::normalize_queries(std::string{body});
  wsc::error_message_of(body);
  return 0;
}
