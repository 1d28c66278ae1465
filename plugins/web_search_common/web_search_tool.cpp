// The `web_search` tool: parallel queries through a backend, per-query
// failures tolerated, results interleaved and rendered for the LLM.

#include "web_search_tool.hpp"

#include "quarry/sdk/ttl_cache.hpp"

#include <atomic>
#include <mutex>
#include <utility>

namespace quarry::plugins::web_search_common {

namespace {

// Largest response body a search API may send.
constexpr int64_t max_body_bytes = 8 * 1024 * 1024;

} // namespace

struct search_tool::query_cache : sdk::ttl_cache<std::vector<search_result>> {
  query_cache() : ttl_cache(std::chrono::minutes{10}, 256) {
    // nop
  }
};

namespace {

// The state of one run, shared by the sinks of all its queries.
class run_state final : public sdk::tool_run,
                        public std::enable_shared_from_this<run_state> {
public:
  run_state(std::shared_ptr<const backend> impl, std::vector<std::string> qs,
            size_t max_results, sdk::tool_callback done,
            std::shared_ptr<search_tool::query_cache> cache)
    : cache_(std::move(cache)),
      impl_(std::move(impl)),
      queries_(std::move(qs)),
      max_results_(max_results),
      done_(std::move(done)),
      results_(queries_.size()),
      failures_(queries_.size()),
      pending_(queries_.size()) {
    // nop
  }

  void cancel() override {
    std::vector<std::shared_ptr<sdk::http_call>> calls;
    sdk::tool_callback done;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      finished_ = true;
      calls = calls_;
      done = std::move(done_);
    }
    for (auto& call : calls)
      if (call)
        call->cancel();
    sdk::tool_result result;
    result.llm_text = "The web search was cancelled.";
    result.failure = sdk::make_error(sdk::errc::cancelled, "cancelled");
    done(std::move(result));
  }

  void add_call(std::shared_ptr<sdk::http_call> call) {
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      calls_.push_back(call);
      cancel_now = finished_;
    }
    if (cancel_now && call)
      call->cancel();
  }

  const backend& impl() const {
    return *impl_;
  }

  // Records the outcome of query `index`; the last one finishes the run.
  void complete(size_t index, std::vector<search_result> results,
                std::optional<sdk::error> failure, bool from_cache = false) {
    sdk::tool_result out;
    sdk::tool_callback done;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      if (failure) {
        failures_[index] = std::move(failure);
      } else {
        if (results.size() > max_results_)
          results.resize(max_results_);
        if (cache_ && !from_cache)
          cache_->put(queries_[index], results);
        results_[index] = std::move(results);
      }
      if (--pending_ > 0)
        return;
      finished_ = true;
      done = std::move(done_);
      out = assemble();
    }
    done(std::move(out));
  }

private:
  sdk::tool_result assemble() {
    sdk::tool_result out;
    std::vector<std::pair<std::string, std::string>> failed;
    std::optional<sdk::error> first_failure;
    std::vector<std::vector<search_result>> lists;
    for (size_t i = 0; i < queries_.size(); ++i) {
      if (failures_[i]) {
        failed.emplace_back(queries_[i], sdk::to_string(*failures_[i]));
        if (!first_failure)
          first_failure = failures_[i];
      } else {
        lists.push_back(std::move(results_[i]));
      }
    }
    if (failed.size() == queries_.size()) {
      out.llm_text = all_failed_message(failed);
      out.failure = first_failure;
      out.failure->message = "all web search queries failed: "
                             + first_failure->message;
      return out;
    }
    auto merged = interleave(lists, max_results_cap);
    if (merged.empty()) {
      out.llm_text = no_results_message();
      out.failure = sdk::make_error(sdk::errc::not_found,
                                    "the web search found no results");
      return out;
    }
    out.llm_text = format_results(merged);
    out.documents = to_documents(merged);
    return out;
  }

  std::shared_ptr<search_tool::query_cache> cache_;
  std::shared_ptr<const backend> impl_;
  std::vector<std::string> queries_;
  size_t max_results_;
  std::mutex mtx_;
  bool finished_ = false;
  sdk::tool_callback done_;
  std::vector<std::vector<search_result>> results_;
  std::vector<std::optional<sdk::error>> failures_;
  size_t pending_;
  std::vector<std::shared_ptr<sdk::http_call>> calls_;
};

// Collects one response and hands it to the run state.
class query_sink final : public sdk::http_response_sink {
public:
  query_sink(std::shared_ptr<run_state> state, size_t index)
    : state_(std::move(state)), index_(index) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers& headers) override {
    status_ = status;
    headers_ = headers;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    body_.append(bytes.data(), bytes.size());
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    if (failure) {
      state_->complete(index_, {}, std::move(failure));
      return;
    }
    if (status_ < 200 || status_ > 299) {
      state_->complete(index_, {},
                       state_->impl().classify(status_, headers_, body_));
      return;
    }
    auto parsed = state_->impl().parse(body_);
    state_->complete(index_, std::move(parsed.results),
                     std::move(parsed.failure));
  }

private:
  std::shared_ptr<run_state> state_;
  size_t index_;
  int status_ = 0;
  sdk::http_headers headers_;
  std::string body_;
};

// A finished run: cancel does nothing.
class finished_run final : public sdk::tool_run {
public:
  void cancel() override {
    // nop
  }
};

} // namespace

sdk::error backend::classify(int status, const sdk::http_headers& headers,
                             std::string_view body) const {
  return classify_status(status, headers, error_message_of(body));
}

search_tool::search_tool(sdk::host_context& host,
                         std::shared_ptr<const backend> impl,
                         common_config cfg)
  : host_(host), impl_(std::move(impl)), cfg_(std::move(cfg)),
    cache_(std::make_shared<query_cache>()) {
  // nop
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

std::shared_ptr<sdk::tool_run>
search_tool::run(const nlohmann::json& arguments, sdk::tool_callback done) {
  auto fail = [&](std::string text, std::string message) {
    sdk::tool_result result;
    result.llm_text = std::move(text);
    result.failure = sdk::make_error(sdk::errc::bad_request,
                                     std::move(message));
    done(std::move(result));
    return std::make_shared<finished_run>();
  };
  if (!arguments.is_object() || !arguments.contains("queries"))
    return fail(missing_queries_message(), "missing 'queries' argument");
  auto queries = normalize_queries(arguments["queries"]);
  if (queries.empty())
    return fail(empty_queries_message(), "no valid queries");
  auto state = std::make_shared<run_state>(impl_, queries, cfg_.max_results,
                                           std::move(done), cache_);
  std::vector<size_t> to_send;
  std::vector<std::pair<size_t, std::vector<search_result>>> cached;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (auto hit = cache_->get(queries[i]))
      cached.emplace_back(i, std::move(*hit));
    else
      to_send.push_back(i);
  }
  // Requests first, so that answering from the cache cannot finish the run
  // before every request has been registered for cancellation.
  for (auto i : to_send) {
    auto req = impl_->make_request(queries[i]);
    if (req.total_timeout.count() == 0)
      req.total_timeout = cfg_.timeout;
    if (req.max_response_bytes == 0)
      req.max_response_bytes = max_body_bytes;
    auto sink = std::make_shared<query_sink>(state, i);
    state->add_call(host_.http().start(std::move(req), std::move(sink)));
  }
  for (auto& [i, results] : cached)
    state->complete(i, std::move(results), std::nullopt, true);
  return state;
}

} // namespace quarry::plugins::web_search_common
