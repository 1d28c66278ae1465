// The Tavily backend of the `web_search` tool.

#include "tavily_search.hpp"

#include "quarry/sdk/json.hpp"

#include <stdexcept>

namespace quarry::plugins::web_search_tavily {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(cfg, "tavily", default_base_url, true,
                                            {{"search_depth", &result.search_depth, "basic"},
                                             {"topic", &result.topic, "general"},
                                             {"country", &result.country}});
  wsc::require_one_of(result.search_depth, {"basic", "advanced", "fast", "ultra-fast"}, false,
                      "tavily: 'search_depth' must be basic, advanced, fast "
                      "or ultra-fast");
  wsc::require_one_of(result.topic, {"general", "news", "finance"}, false,
                      "tavily: 'topic' must be general, news or finance");
  return result;
}

sdk::http_request make_request(const config& cfg, const std::string& query) {
  nlohmann::ordered_json body;
  body["query"] = query;
  body["search_depth"] = cfg.search_depth;
  body["topic"] = cfg.topic;
  body["max_results"] = cfg.common.max_results;
  wsc::set_unless_empty(body, "country", cfg.country);
  return wsc::json_post(cfg.common.base_url + "/search",
                        {"Authorization", "Bearer " + cfg.common.api_key}, body);
}

namespace {

// Refines the default classification of an error response.
void refine_error(sdk::error& err, int status, [[maybe_unused]] std::string_view body) {
  // 432 and 433 are Tavily's plan and credit limits.
  if (status == 432 || status == 433)
    err.code = sdk::errc::quota;
}

// What Tavily's errors mean to the person holding the key.
const wsc::error_advice advice{
  "Tavily",
  "Check api_key in this tool's settings (tools.NAME.api_key): a Tavily key "
  "(tvly-...), sent as a bearer token.",
  "The Tavily plan's or pay-as-you-go credit limit is reached: see the usage "
  "in Tavily's dashboard, or raise the plan.",
  "Tavily limits requests per minute by plan: lower this tool's "
  "limits.max_concurrency, or raise the plan."};

} // namespace

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Tavily", out);
  if (j.is_discarded())
    return out;
  if (auto* results = wsc::array_member(j, "results", "Tavily", out, true))
    wsc::append_results(*results, {"title", "url", "content", "published_date"}, out.results);
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg) {
  return wsc::make_search_tool(host, parse_config(cfg),
                               {&make_request, &wsc::body_only<config, parse_response>,
                                &refine_error, &advice});
}

} // namespace quarry::plugins::web_search_tavily
