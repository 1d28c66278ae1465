// The Tavily backend of the `web_search` tool.

#include "tavily_search.hpp"

#include "quarry/sdk/json.hpp"

#include <stdexcept>

namespace quarry::plugins::web_search_tavily {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(
    cfg, "tavily", default_base_url, true,
    {{"search_depth", &result.search_depth, "basic"},
     {"topic", &result.topic, "general"},
     {"country", &result.country}});
  wsc::require_one_of(result.search_depth,
                      {"basic", "advanced", "fast", "ultra-fast"}, false,
                      "tavily: 'search_depth' must be basic, advanced, fast "
                      "or ultra-fast");
  wsc::require_one_of(result.topic, {"general", "news", "finance"}, false,
                      "tavily: 'topic' must be general, news or finance");
  return result;
}

sdk::http_request backend::make_request(const std::string& query) const {
  nlohmann::ordered_json body;
  body["query"] = query;
  body["search_depth"] = cfg_.search_depth;
  body["topic"] = cfg_.topic;
  body["max_results"] = cfg_.common.max_results;
  wsc::set_unless_empty(body, "country", cfg_.country);
  return wsc::json_post(cfg_.common.base_url + "/search",
                        {"Authorization", "Bearer " + cfg_.common.api_key},
                        body);
}

wsc::parse_result backend::parse(std::string_view body) const {
  return parse_response(body);
}

sdk::error backend::classify(int status, const sdk::http_headers& headers,
                             std::string_view body) const {
  auto err = wsc::backend::classify(status, headers, body);
  // 432 and 433 are Tavily's plan and credit limits.
  if (status == 432 || status == 433)
    err.code = sdk::errc::quota;
  return err;
}

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Tavily", out);
  if (j.is_discarded())
    return out;
  if (auto* results = wsc::array_member(j, "results", "Tavily", out, true))
    wsc::append_results(*results, {"title", "url", "content", "published_date"},
                        out.results);
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host,
                                     const nlohmann::json& cfg) {
  return wsc::make_search_tool<backend>(host, parse_config(cfg));
}

} // namespace quarry::plugins::web_search_tavily
