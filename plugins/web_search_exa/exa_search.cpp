// The Exa backend of the `web_search` tool.

#include "exa_search.hpp"

#include "quarry/sdk/json.hpp"

#include <stdexcept>

namespace quarry::plugins::web_search_exa {

namespace wsc = web_search_common;

config parse_config(const nlohmann::json& cfg) {
  config result;
  result.common = wsc::parse_backend_config(cfg, "exa", default_base_url, true,
                                            {{"type", &result.type, "auto"},
                                             {"category", &result.category}});
  wsc::require_one_of(result.type, {"auto", "neural", "fast", "deep", "instant"}, false,
                      "exa: 'type' must be auto, neural, fast, deep or instant");
  return result;
}

sdk::http_request make_request(const config& cfg, const std::string& query) {
  nlohmann::ordered_json body;
  body["query"] = query;
  body["type"] = cfg.type;
  body["numResults"] = cfg.common.max_results;
  wsc::set_unless_empty(body, "category", cfg.category);
  body["contents"] = {{"highlights", {{"numSentences", 2}, {"highlightsPerUrl", 1}}}};
  return wsc::json_post(cfg.common.base_url + "/search", {"x-api-key", cfg.common.api_key}, body);
}

namespace {

// What Exa's errors mean to the person holding the key.
const wsc::error_advice advice{
  "Exa",
  "Check api_key in this tool's settings (tools.NAME.api_key): an Exa key, "
  "sent as x-api-key.",
  "The Exa account's credits are used up: see billing in Exa's dashboard.",
  "Exa limits requests per second: lower this tool's limits.max_concurrency, "
  "or ask Exa for a higher limit."};

} // namespace

wsc::parse_result parse_response(std::string_view body) {
  wsc::parse_result out;
  auto j = wsc::parse_object(body, "Exa", out);
  if (j.is_discarded())
    return out;
  auto* results = wsc::array_member(j, "results", "Exa", out, true);
  if (results == nullptr)
    return out;
  for (const auto& item : *results) {
    if (!item.is_object())
      continue;
    std::string snippet;
    if (auto h = item.find("highlights"); h != item.end() && h->is_array())
      for (const auto& x : *h)
        if (x.is_string() && snippet.empty())
          snippet = x.get<std::string>();
    if (snippet.empty())
      snippet = wsc::string_field(item, "summary");
    if (snippet.empty())
      snippet = wsc::string_field(item, "text");
    std::optional<std::string> published;
    if (auto date = wsc::string_field(item, "publishedDate"); !date.empty())
      published = date;
    auto url = wsc::string_field(item, "url");
    if (url.empty())
      url = wsc::string_field(item, "id");
    if (auto r = wsc::make_result(wsc::string_field(item, "title"), url, snippet, published))
      out.results.push_back(std::move(*r));
  }
  return out;
}

std::unique_ptr<sdk::tool> make_tool(sdk::host_context& host, const nlohmann::json& cfg) {
  return wsc::make_search_tool(host, parse_config(cfg),
                               {&make_request, &wsc::body_only<config, parse_response>, nullptr,
                                &advice});
}

} // namespace quarry::plugins::web_search_exa
