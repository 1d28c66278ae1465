// The SearXNG backend of the `web_search` tool.

#include "searxng_search.hpp"

#include "quarry/sdk/json.hpp"

namespace quarry::plugins::web_search_searxng {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(cfg, "searxng", default_base_url, false,
                                            {{"categories", &result.categories},
                                             {"language", &result.language},
                                             {"time_range", &result.time_range},
                                             {"safesearch", &result.safesearch},
                                             {"engines", &result.engines}});
  wsc::require_one_of(result.safesearch, {"0", "1", "2"}, true,
                      "searxng: 'safesearch' must be \"0\", \"1\" or \"2\"");
  wsc::require_one_of(result.time_range, {"day", "month", "year"}, true,
                      "searxng: 'time_range' must be day, month or year");
  return result;
}

sdk::http_request make_request(const config& cfg, const std::string& query) {
  sdk::http_request req;
  req.method = "GET";
  std::string url = cfg.common.base_url + "/search?q=" + wsc::url_encode(query)
                    + "&format=json&pageno=1";
  wsc::append_query(url, {{"categories", cfg.categories},
                          {"language", cfg.language},
                          {"time_range", cfg.time_range},
                          {"safesearch", cfg.safesearch},
                          {"engines", cfg.engines}});
  req.url = std::move(url);
  req.headers = {{"Accept", "application/json"}};
  if (!cfg.common.api_key.empty())
    req.headers.emplace_back("Authorization", "Bearer " + cfg.common.api_key);
  return req;
}

namespace {

// What SearXNG's errors mean to the person running it. SearXNG answers 403
// to format=json unless `search.formats` lists json; its limiter (the
// `server.limiter` setting, rules in limiter.toml) answers 429 with an HTML
// page, which public instances turn on.
const wsc::error_advice advice{
  "SearXNG",
  "A 403 from SearXNG usually means the instance does not allow format=json: "
  "add json to search.formats in its settings.yml. Behind a proxy that wants "
  "a token, set api_key (sent as a bearer token).",
  nullptr,
  "The SearXNG instance's limiter refused this client: use your own instance "
  "(base_url), or configure its limiter (limiter: false under server: in "
  "settings.yml, or this client's address in pass_ip of limiter.toml's "
  "[botdetection.ip_lists])."};

} // namespace

wsc::parse_result parse_response(std::string_view body, size_t limit) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "SearXNG", out, " (is format=json enabled?)");
  if (j.is_discarded())
    return out;
  if (auto* results = wsc::array_member(j, "results", "SearXNG", out, true))
    wsc::append_results(*results, {"title", "url", "content", "publishedDate"}, out.results, limit);
  return out;
}

namespace {

// The parser with the configured limit.
wsc::parse_result parse_limited(const config& cfg, std::string_view body) {
  return parse_response(body, cfg.common.max_results);
}

} // namespace

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg) {
  return wsc::make_search_tool(host, parse_config(cfg),
                               {&make_request, &parse_limited, nullptr, &advice});
}

} // namespace quarry::plugins::web_search_searxng
