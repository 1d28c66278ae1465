// The Brave Search backend of the `web_search` tool.

#include "brave_search.hpp"

#include "quarry/sdk/json.hpp"

namespace quarry::plugins::web_search_brave {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(cfg, "brave", default_base_url, true,
                                            {{"country", &result.country},
                                             {"search_lang", &result.search_lang},
                                             {"ui_lang", &result.ui_lang},
                                             {"safesearch", &result.safesearch},
                                             {"freshness", &result.freshness}});
  wsc::require_one_of(result.safesearch, {"off", "moderate", "strict"}, true,
                      "brave: 'safesearch' must be off, moderate or strict");
  return result;
}

sdk::http_request make_request(const config& cfg, const std::string& query) {
  sdk::http_request req;
  req.method = "GET";
  std::string url = cfg.common.base_url + "/res/v1/web/search?q=" + wsc::url_encode(query)
                    + "&count=" + std::to_string(cfg.common.max_results)
                    + "&text_decorations=false&result_filter=web";
  wsc::append_query(url, {{"country", cfg.country},
                          {"search_lang", cfg.search_lang},
                          {"ui_lang", cfg.ui_lang},
                          {"safesearch", cfg.safesearch},
                          {"freshness", cfg.freshness}});
  req.url = std::move(url);
  req.headers = {{"Accept", "application/json"}, {"X-Subscription-Token", cfg.common.api_key}};
  return req;
}

namespace {

// Refines the default classification of an error response.
void refine_error(sdk::error& err, [[maybe_unused]] int status, std::string_view body) {
  auto j = sdk::parse_json(body);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    auto code = wsc::string_field(j["error"], "code");
    // Brave reports a bad key as 422 SUBSCRIPTION_TOKEN_INVALID.
    if (code.find("TOKEN") != std::string::npos)
      err.code = sdk::errc::auth;
    else if (code == "CREDIT_EXHAUSTED" || code.find("QUOTA") != std::string::npos)
      err.code = sdk::errc::quota;
  }
}

// What Brave's errors mean to the person holding the key.
const wsc::error_advice advice{
  "Brave Search",
  "Check api_key in this tool's settings (tools.NAME.api_key): a Brave Search "
  "API subscription token, sent as X-Subscription-Token.",
  "The Brave Search API plan's monthly quota or credits are used up: see the "
  "subscription in the Brave Search API dashboard, or wait for the quota to "
  "renew.",
  "The Brave Search API plan allows a few requests per second: lower this "
  "tool's limits.max_concurrency, or raise the plan."};

} // namespace

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Brave", out);
  if (j.is_discarded())
    return out;
  if (wsc::string_field(j, "type") == "ErrorResponse") {
    out.failure = sdk::make_error(sdk::errc::invalid_response,
                                  "Brave returned an error: " + wsc::error_message_of(body));
    return out;
  }
  // No web results at all is no results.
  if (auto web = j.find("web"); web != j.end())
    if (auto* results = wsc::array_member(*web, "results", "Brave", out, false))
      wsc::append_results(*results, {"title", "url", "description", "page_age"}, out.results);
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg) {
  return wsc::make_search_tool(host, parse_config(cfg),
                               {&make_request, &wsc::body_only<config, parse_response>,
                                &refine_error, &advice});
}

} // namespace quarry::plugins::web_search_brave
