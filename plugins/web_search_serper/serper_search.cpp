// The Serper (Google results) backend of the `web_search` tool.

#include "serper_search.hpp"

#include "quarry/sdk/json.hpp"

namespace quarry::plugins::web_search_serper {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  static const std::vector<std::string> extra{"gl", "hl", "tbs"};
  config result;
  result.common = wsc::parse_common_config(cfg, "serper", default_base_url,
                                           true, extra);
  if (cfg.is_object()) {
    result.gl = wsc::string_option(cfg, "gl", "", "serper");
    result.hl = wsc::string_option(cfg, "hl", "", "serper");
    result.tbs = wsc::string_option(cfg, "tbs", "", "serper");
  }
  return result;
}

backend::backend(config cfg) : cfg_(std::move(cfg)) {
  // nop
}

sdk::http_request backend::make_request(const std::string& query) const {
  sdk::http_request req;
  req.method = "POST";
  req.url = cfg_.common.base_url + "/search";
  req.headers = {{"X-API-KEY", cfg_.common.api_key},
                 {"Content-Type", "application/json"},
                 {"Accept", "application/json"}};
  nlohmann::ordered_json body;
  body["q"] = query;
  body["num"] = cfg_.common.max_results;
  if (!cfg_.gl.empty())
    body["gl"] = cfg_.gl;
  if (!cfg_.hl.empty())
    body["hl"] = cfg_.hl;
  if (!cfg_.tbs.empty())
    body["tbs"] = cfg_.tbs;
  req.body = body.dump(-1, ' ', false,
                       nlohmann::json::error_handler_t::replace);
  return req;
}

wsc::parse_result backend::parse(std::string_view body) const {
  return parse_response(body);
}

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Serper", out);
  if (j.is_discarded())
    return out;
  // No organic results at all is no results.
  if (auto* organic = wsc::array_member(j, "organic", "Serper", out, false))
    wsc::append_results(*organic, {"title", "link", "snippet", "date"},
                        out.results);
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host,
                                     const nlohmann::json& cfg) {
  return wsc::make_search_tool<backend>(host, parse_config(cfg));
}

} // namespace quarry::plugins::web_search_serper
