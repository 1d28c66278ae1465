// The Serper (Google results) backend of the `web_search` tool.

#include "serper_search.hpp"

#include "quarry/sdk/json.hpp"

namespace quarry::plugins::web_search_serper {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(
    cfg, "serper", default_base_url, true,
    {{"gl", &result.gl}, {"hl", &result.hl}, {"tbs", &result.tbs}});
  return result;
}

sdk::http_request make_request(const config& cfg, const std::string& query) {
  nlohmann::ordered_json body;
  body["q"] = query;
  body["num"] = cfg.common.max_results;
  wsc::set_unless_empty(body, "gl", cfg.gl);
  wsc::set_unless_empty(body, "hl", cfg.hl);
  wsc::set_unless_empty(body, "tbs", cfg.tbs);
  return wsc::json_post(cfg.common.base_url + "/search", {"X-API-KEY", cfg.common.api_key}, body);
}

namespace {

// Refines the default classification of an error response: Serper answers
// a key without credits left with "Not enough credits".
void refine_error(sdk::error& err, [[maybe_unused]] int status, std::string_view body) {
  auto text = sdk::to_lower(body.substr(0, wsc::max_error_scan));
  if (text.find("not enough credits") != std::string::npos)
    err.code = sdk::errc::quota;
}

// What Serper's errors mean to the person holding the key.
const wsc::error_advice advice{
  "Serper",
  "Check api_key in this tool's settings (tools.NAME.api_key): a Serper key, "
  "sent as X-API-KEY.",
  "The Serper account has no credits left: top it up in Serper's dashboard.",
  "Serper limits queries per second by plan: lower this tool's "
  "limits.max_concurrency, or raise the plan."};

} // namespace

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Serper", out);
  if (j.is_discarded())
    return out;
  // No organic results at all is no results.
  if (auto* organic = wsc::array_member(j, "organic", "Serper", out, false))
    wsc::append_results(*organic, {"title", "link", "snippet", "date"}, out.results);
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg) {
  return wsc::make_search_tool(host, parse_config(cfg),
                               {&make_request, &wsc::body_only<config, parse_response>,
                                &refine_error, &advice});
}

} // namespace quarry::plugins::web_search_serper
