// The Tavily backend of the `web_search` tool.

#include "tavily_search.hpp"

#include "quarry/sdk/json.hpp"

#include <stdexcept>

namespace quarry::plugins::web_search_tavily {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  static const std::vector<std::string> extra{"search_depth", "topic",
                                              "country"};
  config result;
  result.common = wsc::parse_common_config(cfg, "tavily", default_base_url,
                                           true, extra);
  if (cfg.is_object()) {
    result.search_depth = wsc::string_option(cfg, "search_depth", "basic",
                                             "tavily");
    result.topic = wsc::string_option(cfg, "topic", "general", "tavily");
    result.country = wsc::string_option(cfg, "country", "", "tavily");
  }
  if (result.search_depth != "basic" && result.search_depth != "advanced"
      && result.search_depth != "fast" && result.search_depth != "ultra-fast")
    throw std::invalid_argument("tavily: 'search_depth' must be basic, "
                                "advanced, fast or ultra-fast");
  if (result.topic != "general" && result.topic != "news"
      && result.topic != "finance")
    throw std::invalid_argument("tavily: 'topic' must be general, news or "
                                "finance");
  return result;
}

backend::backend(config cfg) : cfg_(std::move(cfg)) {
  // nop
}

sdk::http_request backend::make_request(const std::string& query) const {
  sdk::http_request req;
  req.method = "POST";
  req.url = cfg_.common.base_url + "/search";
  req.headers = {{"Authorization", "Bearer " + cfg_.common.api_key},
                 {"Content-Type", "application/json"},
                 {"Accept", "application/json"}};
  nlohmann::ordered_json body;
  body["query"] = query;
  body["search_depth"] = cfg_.search_depth;
  body["topic"] = cfg_.topic;
  body["max_results"] = cfg_.common.max_results;
  if (!cfg_.country.empty())
    body["country"] = cfg_.country;
  req.body = body.dump(-1, ' ', false,
                       nlohmann::json::error_handler_t::replace);
  return req;
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
