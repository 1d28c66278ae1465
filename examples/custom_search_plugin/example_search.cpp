// An example search tool plugin for Quarry. It runs each query against a
// SearXNG-compatible JSON endpoint through the host's HTTP client, merges the
// results, and answers the LLM with a numbered JSON list of documents.
//
// Configuration (in quarry.yaml):
//
//   tools:
//     custom_search:
//       plugin: example_search
//       endpoint: "https://search.example.org/search"
//       api_key: "${EXAMPLE_SEARCH_KEY:-}"   # optional, sent as a bearer token
//       max_results: 10

#include <quarry/sdk/plugin.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace example_search {

using namespace quarry;

/// Percent-encodes a query string component.
std::string url_encode(const std::string& in) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
        || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// Collects one response body.
class body_sink final : public sdk::http_response_sink {
public:
  using callback = std::function<void(int, std::string, std::optional<sdk::error>)>;

  explicit body_sink(callback done) : done_(std::move(done)) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers&) override {
    status_ = status;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    body_.append(bytes.data(), bytes.size());
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    done_(status_, std::move(body_), std::move(failure));
  }

private:
  callback done_;
  int status_ = 0;
  std::string body_;
};

/// Shared state of one run: the answers of all queries.
struct run_state {
  size_t pending = 0;
  std::vector<sdk::document> documents;
  std::vector<std::string> failures;
  sdk::tool_callback done;
  size_t max_results = 10;
  std::mutex mtx;
};

class search_tool final : public sdk::tool {
public:
  search_tool(sdk::host_context& host, std::string endpoint, std::string api_key,
              size_t max_results)
    : host_(host), endpoint_(std::move(endpoint)), api_key_(std::move(api_key)),
      max_results_(max_results) {
    // nop
  }

  std::string name() const override {
    return "custom_search";
  }

  std::string description() const override {
    return "Searches the configured search service. Give one or more short "
           "queries; results are merged and numbered.";
  }

  nlohmann::json parameters() const override {
    return {{"type", "object"},
            {"properties",
             {{"queries",
               {{"type", "array"},
                {"items", {{"type", "string"}}},
                {"description", "One or more search queries"}}}}},
            {"required", {"queries"}}};
  }

  std::shared_ptr<sdk::tool_run> run(const nlohmann::json& arguments,
                                     sdk::tool_callback done) override {
    std::vector<std::string> queries;
    if (arguments.contains("queries")) {
      const auto& q = arguments["queries"];
      if (q.is_string())
        queries.push_back(q.get<std::string>());
      else if (q.is_array())
        for (const auto& x : q)
          if (x.is_string() && !x.get<std::string>().empty())
            queries.push_back(x.get<std::string>());
    }
    if (queries.empty()) {
      sdk::tool_result result;
      result.llm_text = "No queries were given. Call custom_search with "
                        "{\"queries\": [\"...\"]}.";
      result.failure = sdk::make_error(sdk::errc::bad_request, "no queries");
      done(std::move(result));
      return nullptr;
    }
    auto state = std::make_shared<run_state>();
    state->pending = queries.size();
    state->done = std::move(done);
    state->max_results = max_results_;
    for (const auto& query : queries) {
      sdk::http_request req;
      req.url = endpoint_ + "?q=" + url_encode(query) + "&format=json";
      req.headers.emplace_back("Accept", "application/json");
      if (!api_key_.empty())
        req.headers.emplace_back("Authorization", "Bearer " + api_key_);
      req.total_timeout = std::chrono::seconds{30};
      auto sink = std::make_shared<body_sink>(
        [state, query](int status, std::string body,
                       std::optional<sdk::error> failure) {
          on_answer(*state, query, status, body, failure);
        });
      host_.http().start(std::move(req), std::move(sink));
    }
    return nullptr;
  }

private:
  static void on_answer(run_state& st, const std::string& query, int status,
                        const std::string& body,
                        const std::optional<sdk::error>& failure) {
    std::unique_lock<std::mutex> guard{st.mtx};
    if (failure) {
      st.failures.push_back(query + ": " + sdk::to_string(*failure));
    } else if (status != 200) {
      st.failures.push_back(query + ": HTTP " + std::to_string(status));
    } else {
      auto json = nlohmann::json::parse(body, nullptr, false);
      if (json.is_discarded() || !json.contains("results")
          || !json["results"].is_array()) {
        st.failures.push_back(query + ": response is not SearXNG JSON");
      } else {
        for (const auto& r : json["results"]) {
          if (!r.is_object())
            continue;
          sdk::document doc;
          doc.url = r.value("url", std::string{});
          doc.id = doc.url;
          doc.title = r.value("title", std::string{});
          doc.snippet = r.value("content", std::string{});
          if (r.contains("publishedDate") && r["publishedDate"].is_string())
            doc.published = r["publishedDate"].get<std::string>();
          auto dup = false;
          for (const auto& d : st.documents)
            dup = dup || d.url == doc.url;
          if (!doc.url.empty() && !dup && st.documents.size() < st.max_results)
            st.documents.push_back(std::move(doc));
        }
      }
    }
    if (--st.pending > 0)
      return;
    sdk::tool_result result;
    result.documents = std::move(st.documents);
    auto done = std::move(st.done);
    auto failures = std::move(st.failures);
    guard.unlock();
    if (result.documents.empty() && !failures.empty()) {
      result.llm_text = "The search failed: " + failures.front();
      result.failure = sdk::make_error(sdk::errc::network, failures.front());
    } else if (result.documents.empty()) {
      result.llm_text = "No results found.";
    } else {
      auto list = nlohmann::json::array();
      int n = 1;
      for (const auto& d : result.documents)
        list.push_back({{"document", n++}, {"title", d.title}, {"url", d.url},
                        {"content", d.snippet}});
      result.llm_text = nlohmann::json{{"results", list}}.dump();
    }
    done(std::move(result));
  }

  sdk::host_context& host_;
  std::string endpoint_;
  std::string api_key_;
  size_t max_results_;
};

std::unique_ptr<sdk::plugin_object> make(sdk::host_context& host,
                                         const nlohmann::json& config) {
  if (!config.contains("endpoint") || !config["endpoint"].is_string())
    throw std::invalid_argument("'endpoint' (the search URL) is required");
  auto endpoint = config["endpoint"].get<std::string>();
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0)
    throw std::invalid_argument("'endpoint' must be an http or https URL");
  auto max_results = config.value("max_results", 10);
  if (max_results < 1 || max_results > 50)
    throw std::invalid_argument("'max_results' must be between 1 and 50");
  return std::make_unique<search_tool>(host, endpoint,
                                       config.value("api_key", std::string{}),
                                       static_cast<size_t>(max_results));
}

} // namespace example_search

QUARRY_PLUGIN(example_search, quarry::sdk::plugin_kind::tool, "1.0.0",
              "Searches a SearXNG-compatible JSON endpoint (example plugin)",
              &example_search::make)

// A web search: Quarry shows its calls as searches and hands the snippets it
// finds to open_url, as for the search backends that come with Quarry.
QUARRY_TOOL_KIND(quarry::sdk::tool_kind::web_search)
