// The `web_search` tool: the normalised queries that no agent ran in the
// last 10 minutes go to the backend in parallel (sdk::run_search); per-query
// failures are tolerated, results interleaved and rendered for the LLM.

#include "web_search_tool.hpp"

#include "quarry/sdk/ttl_cache.hpp"

#include <utility>

namespace quarry::plugins::web_search_common {

namespace {

// Largest response body a search API may send.
constexpr int64_t max_body_bytes = 8 * 1024 * 1024;

// A finished run: cancel does nothing.
class finished_run final : public sdk::tool_run {
public:
  void cancel() override {
    // nop
  }
};

} // namespace

struct search_tool::query_cache : sdk::ttl_cache<std::vector<search_result>> {
  /// 10 minutes and 256 queries (the host's defaults for a tool's calls)
  /// until the host gives its limits, on the host's clock.
  explicit query_cache(sdk::host_context& host)
    : ttl_cache(std::chrono::minutes{10}, 256, [&host] { return host.steady_now(); }) {
    // nop
  }
};

namespace {

// Merges the cached answers (`cached[i]` for query i) with the batch of the
// others (in query order), keeps the new successes, and writes the result.
sdk::tool_result assemble(const std::vector<std::string>& queries,
                          std::vector<std::optional<std::vector<search_result>>> cached,
                          sdk::search_batch batch, search_tool::query_cache& cache) {
  sdk::tool_result out;
  if (batch.cancelled) {
    out.llm_text = "The web search was cancelled.";
    out.failure = sdk::make_error(sdk::errc::cancelled, "cancelled");
    return out;
  }
  std::vector<std::pair<std::string, std::string>> failed;
  // The failure the host gets when every query failed: the first one that
  // no retry can mend, else (all of them retryable, e.g. a 429 for each
  // query) the one asking for the longest wait, so that a retry of the run
  // honours every Retry-After.
  std::optional<sdk::error> first_failure;
  auto weigh = [&first_failure](const sdk::error& x) {
    if (!first_failure) {
      first_failure = x;
      return;
    }
    if (!first_failure->retryable())
      return;
    if (!x.retryable() || x.retry_after_ms.value_or(0) > first_failure->retry_after_ms.value_or(0))
      first_failure = x;
  };
  std::vector<std::vector<search_result>> lists;
  size_t next = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (cached[i]) {
      lists.push_back(std::move(*cached[i]));
      continue;
    }
    auto& answer = batch.outcomes[next++];
    if (answer.failure) {
      failed.emplace_back(queries[i], sdk::to_string(*answer.failure));
      weigh(*answer.failure);
    } else {
      cache.put(queries[i], answer.results);
      lists.push_back(std::move(answer.results));
    }
  }
  if (failed.size() == queries.size()) {
    out.llm_text = all_failed_message(failed);
    out.failure = first_failure;
    out.failure->message = "all web search queries failed: " + first_failure->message;
    return out;
  }
  auto merged = interleave(lists, max_results_cap);
  if (merged.empty()) {
    out.llm_text = no_results_message();
    out.failure = sdk::make_error(sdk::errc::not_found, "the web search found no results");
    return out;
  }
  out.llm_text = format_results(merged);
  out.documents = to_documents(merged);
  return out;
}

} // namespace

sdk::error classify_answer(int status, const sdk::http_headers& headers, std::string_view body,
                           void (*refine)(sdk::error&, int, std::string_view),
                           const error_advice* advice) {
  auto err = classify_status(status, headers, error_text(headers, body));
  if (refine != nullptr)
    refine(err, status, body);
  explain(err, advice != nullptr ? *advice : error_advice{nullptr});
  return err;
}

search_tool::search_tool(sdk::host_context& host, std::shared_ptr<const backend> impl,
                         common_config cfg)
  : host_(host),
    impl_(std::move(impl)),
    cfg_(std::move(cfg)),
    cache_(std::make_shared<query_cache>(host)) {
  // nop
}

bool search_tool::own_cache(std::chrono::milliseconds ttl, size_t max_entries) {
  cache_->limit(ttl, max_entries);
  return true;
}

std::string search_tool::name() const {
  return "web_search";
}

std::string search_tool::description() const {
  return tool_description();
}

nlohmann::json search_tool::parameters() const {
  return tool_parameters();
}

std::shared_ptr<sdk::tool_run> search_tool::run(const nlohmann::json& arguments,
                                                sdk::tool_callback done) {
  auto fail = [&](std::string text, std::string message) {
    sdk::tool_result result;
    result.llm_text = std::move(text);
    result.failure = sdk::make_error(sdk::errc::bad_request, std::move(message));
    done(std::move(result));
    return std::make_shared<finished_run>();
  };
  if (!arguments.is_object() || !arguments.contains("queries"))
    return fail(missing_queries_message(), "missing 'queries' argument");
  auto queries = normalize_queries(arguments["queries"]);
  if (queries.empty())
    return fail(empty_queries_message(), "no valid queries");
  std::vector<std::optional<std::vector<search_result>>> cached(queries.size());
  std::vector<std::string> to_send;
  for (size_t i = 0; i < queries.size(); ++i) {
    cached[i] = cache_->get(queries[i]);
    if (!cached[i])
      to_send.push_back(queries[i]);
  }
  sdk::search_options options;
  options.max_results = cfg_.max_results;
  options.timeout = cfg_.timeout;
  options.max_body_bytes = max_body_bytes;
  return sdk::run_search(host_.http(), impl_, std::move(to_send), options,
                         [queries, cached = std::move(cached), cache = cache_,
                          done = std::move(done)](sdk::search_batch batch) mutable {
                           done(assemble(queries, std::move(cached), std::move(batch), *cache));
                         });
}

} // namespace quarry::plugins::web_search_common
