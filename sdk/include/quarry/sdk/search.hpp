// This file is part of the Quarry plugin SDK.
// The search-backend helper: what every search tool repeats. A backend says
// how to ask one query and how to read one answer; the helper reads the
// queries from the tool's arguments, runs one request per query in parallel
// through the host's HTTP client (bounded bodies, error statuses classified,
// per-query failures kept apart, cancellation), and shapes the results for
// the model and the host (interleaved, de-duplicated, numbered JSON,
// documents). `search_tool` puts it all together as a ready tool.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/http_buffer.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/tool.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::sdk {

/// One search result.
struct search_result {
  std::string title;
  std::string url;
  std::string snippet;
  /// Publication date as the backend gave it.
  std::optional<std::string> published;
};

/// What reading one answer produced.
struct search_page {
  std::vector<search_result> results;
  /// Set when the body was not a valid answer.
  std::optional<error> failure;
};

/// A search service: one request per query, the reader of one answer.
class search_backend {
public:
  virtual ~search_backend() = default;

  /// Builds the HTTP request for one query.
  virtual http_request make_request(const std::string& query) const = 0;

  /// Reads one successful (2xx) response body.
  virtual search_page parse(std::string_view body) const = 0;

  /// Classifies an error response (status outside 2xx). The default is
  /// http_status_error with http_error_message(body).
  virtual error classify(int status, const http_headers& headers, std::string_view body) const {
    return http_status_error(status, headers, http_error_message(body));
  }
};

/// Limits of one batch of queries.
struct search_options {
  /// Results kept per query.
  size_t max_results = 10;
  /// Time for each request, unless the backend's request sets one.
  std::chrono::milliseconds timeout{30000};
  /// Largest response body accepted.
  int64_t max_body_bytes = 8 * 1024 * 1024;
};

/// The outcome of one query: results, or why it failed.
struct search_outcome {
  std::string query;
  std::vector<search_result> results;
  std::optional<error> failure;
};

/// The outcomes of a batch, in query order.
struct search_batch {
  std::vector<search_outcome> outcomes;
  /// Whether the batch was cancelled (unfinished queries then fail with
  /// errc::cancelled).
  bool cancelled = false;
};

/// The strings of a `queries` value: a string is one, an array gives its
/// strings (other items are skipped); anything else gives none.
inline std::vector<std::string> query_strings(const nlohmann::json& value) {
  std::vector<std::string> out;
  if (value.is_string())
    out.push_back(value.get<std::string>());
  else if (value.is_array())
    for (const auto& item : value)
      if (item.is_string())
        out.push_back(item.get<std::string>());
  return out;
}

/// Each of `raw` through `normalise` (a string to a string), keeping the
/// first of each distinct non-empty result, at most `max_queries`.
template <class Normalise>
std::vector<std::string> distinct_queries(const std::vector<std::string>& raw, Normalise normalise,
                                          size_t max_queries = SIZE_MAX) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& x : raw) {
    if (out.size() >= max_queries)
      break;
    auto q = normalise(x);
    if (!q.empty() && seen.insert(q).second)
      out.push_back(std::move(q));
  }
  return out;
}

/// Most queries one search call runs; a model asking for more gets the first
/// ones (each query is a request to the backend, and they run at once).
inline constexpr size_t max_search_queries = 10;

/// Reads the `queries` argument (see query_strings); each is trimmed, empty
/// ones and repeats are dropped, and at most `max_queries` are kept.
inline std::vector<std::string> search_queries(const nlohmann::json& arguments,
                                               size_t max_queries = max_search_queries) {
  if (!arguments.is_object() || !arguments.contains("queries"))
    return {};
  return distinct_queries(
    query_strings(arguments["queries"]), [](const std::string& q) { return std::string{trim(q)}; },
    max_queries);
}

/// Round-robin interleave: result 0 of every list, then result 1, ...,
/// skipping (title, url) pairs already taken, until `limit` results.
inline std::vector<search_result>
interleave_results(const std::vector<std::vector<search_result>>& lists, size_t limit) {
  std::vector<search_result> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t rank = 0; out.size() < limit; ++rank) {
    bool any_left = false;
    for (const auto& list : lists) {
      if (rank >= list.size())
        continue;
      any_left = true;
      const auto& r = list[rank];
      if (seen.emplace(r.title, r.url).second) {
        out.push_back(r);
        if (out.size() >= limit)
          break;
      }
    }
    if (!any_left)
      break;
  }
  return out;
}

/// Returns `{"results": [{"document", "title", "updated_at"?, "url",
/// "content"}]}` indented by 2, numbering documents from `first_document`:
/// the text the model reads.
inline std::string search_results_json(const std::vector<search_result>& results,
                                       int first_document = 1) {
  auto arr = nlohmann::ordered_json::array();
  int n = first_document;
  for (const auto& r : results) {
    nlohmann::ordered_json obj;
    obj["document"] = n++;
    obj["title"] = r.title;
    if (r.published)
      obj["updated_at"] = *r.published;
    obj["url"] = r.url;
    obj["content"] = r.snippet;
    arr.push_back(std::move(obj));
  }
  nlohmann::ordered_json root;
  root["results"] = std::move(arr);
  return root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Converts results to documents (id = url, kind web) for the host.
inline std::vector<document> search_documents(const std::vector<search_result>& results) {
  std::vector<document> out;
  out.reserve(results.size());
  for (const auto& r : results) {
    document doc;
    doc.id = r.url;
    doc.url = r.url;
    doc.title = r.title;
    doc.snippet = r.snippet;
    doc.published = r.published;
    doc.kind = source_kind::web;
    out.push_back(std::move(doc));
  }
  return out;
}

namespace detail {

/// The state of one batch, shared by the sinks of its queries.
class search_run final : public tool_run, public std::enable_shared_from_this<search_run> {
public:
  using callback = std::function<void(search_batch)>;

  search_run(std::vector<std::string> queries, size_t max_results, callback done)
    : max_results_(max_results),
      done_(std::move(done)),
      pending_(queries.size()),
      answered_(queries.size(), false) {
    batch_.outcomes.resize(queries.size());
    for (size_t i = 0; i < queries.size(); ++i)
      batch_.outcomes[i].query = std::move(queries[i]);
  }

  void cancel() override {
    std::vector<std::shared_ptr<http_call>> calls;
    callback done;
    search_batch batch;
    std::vector<bool> answered;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      finished_ = true;
      calls = calls_;
      done = std::move(done_);
      batch = std::move(batch_);
      answered = answered_;
    }
    for (auto& call : calls)
      if (call)
        call->cancel();
    batch.cancelled = true;
    for (size_t i = 0; i < batch.outcomes.size(); ++i)
      if (!answered[i])
        batch.outcomes[i].failure = make_error(errc::cancelled, "cancelled");
    done(std::move(batch));
  }

  void add_call(std::shared_ptr<http_call> call) {
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      calls_.push_back(call);
      cancel_now = finished_;
    }
    if (cancel_now && call)
      call->cancel();
  }

  /// Records the outcome of query `index`; the last one finishes the batch.
  void complete(size_t index, std::vector<search_result> results, std::optional<error> failure) {
    callback done;
    search_batch batch;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      auto& out = batch_.outcomes[index];
      answered_[index] = true;
      if (failure) {
        out.failure = std::move(failure);
      } else {
        if (results.size() > max_results_)
          results.resize(max_results_);
        out.results = std::move(results);
      }
      if (--pending_ > 0)
        return;
      finished_ = true;
      done = std::move(done_);
      batch = std::move(batch_);
    }
    done(std::move(batch));
  }

private:
  size_t max_results_;
  std::mutex mtx_;
  bool finished_ = false;
  callback done_;
  search_batch batch_;
  size_t pending_;
  std::vector<bool> answered_;
  std::vector<std::shared_ptr<http_call>> calls_;
};

/// A batch that finished before it started: cancelling it does nothing.
class finished_search final : public tool_run {
public:
  void cancel() override {
    // nop
  }
};

} // namespace detail

/// Runs one request per query through `client`, all at once, and calls
/// `done` once with every query's outcome (on the I/O thread, or at once
/// with no outcomes if `queries` is empty). Error statuses go through the backend's `classify`,
/// successful bodies through its `parse`. The returned handle cancels the
/// batch: `done` then runs at once with `cancelled` set.
inline std::shared_ptr<tool_run>
run_search(http_client& client, std::shared_ptr<const search_backend> backend,
           std::vector<std::string> queries, const search_options& options,
           std::function<void(search_batch)> done) {
  auto count = queries.size();
  if (count == 0) {
    done(search_batch{});
    return std::make_shared<detail::finished_search>();
  }
  auto run = std::make_shared<detail::search_run>(queries, options.max_results, std::move(done));
  for (size_t i = 0; i < count; ++i) {
    auto req = backend->make_request(queries[i]);
    if (req.total_timeout.count() == 0)
      req.total_timeout = options.timeout;
    auto on_answer = [run, backend, i](http_response response, std::optional<error> failure) {
      // An error status (the whole body arrived): the backend classifies.
      if (failure && failure->http_status != 0 && failure->http_status == response.status) {
        run->complete(i, {}, backend->classify(response.status, response.headers, response.body));
        return;
      }
      if (failure) {
        run->complete(i, {}, std::move(failure));
        return;
      }
      auto page = backend->parse(response.body);
      run->complete(i, std::move(page.results), std::move(page.failure));
    };
    run->add_call(
      fetch_buffered(client, std::move(req), options.max_body_bytes, std::move(on_answer)));
  }
  return run;
}

/// What a search tool tells the model and the host.
struct search_tool_info {
  /// The tool's name, e.g. `company_search`.
  std::string name;
  /// What the model reads about the tool.
  std::string description;
  search_options options;
  /// Most results given to the model over all queries.
  size_t max_total_results = 20;
};

/// A ready search tool over one backend: parameters `{"queries": [...]}`,
/// the queries run in parallel (run_search), results interleaved
/// (interleave_results), the model gets search_results_json and the host
/// search_documents. When only some queries fail, the others' results are
/// used; when all fail, the model is told why.
class search_tool : public tool {
public:
  search_tool(host_context& host, std::shared_ptr<const search_backend> backend,
              search_tool_info info)
    : host_(host), backend_(std::move(backend)), info_(std::move(info)) {
    // nop
  }

  std::string name() const override {
    return info_.name;
  }

  std::string description() const override {
    return info_.description;
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

  std::shared_ptr<tool_run> run(const nlohmann::json& arguments, tool_callback done) override {
    auto queries = search_queries(arguments);
    if (queries.empty()) {
      tool_result result;
      result.llm_text = "No queries were given. Call " + info_.name
                        + " with {\"queries\": [\"...\"]}.";
      result.failure = make_error(errc::bad_request, "no queries");
      done(std::move(result));
      return std::make_shared<detail::finished_search>();
    }
    auto limit = info_.max_total_results;
    return run_search(host_.http(), backend_, std::move(queries), info_.options,
                      [done = std::move(done), limit](search_batch batch) {
                        done(assemble(std::move(batch), limit));
                      });
  }

  /// Turns a batch into the tool's result (see the class).
  static tool_result assemble(search_batch batch, size_t limit) {
    tool_result out;
    std::vector<std::vector<search_result>> lists;
    std::optional<error> first_failure;
    std::string failures;
    for (auto& x : batch.outcomes) {
      if (x.failure) {
        failures += "\n- " + x.query + ": " + to_string(*x.failure);
        if (!first_failure)
          first_failure = x.failure;
      } else {
        lists.push_back(std::move(x.results));
      }
    }
    if (lists.empty()) {
      out.llm_text = batch.cancelled ? "The search was cancelled."
                                     : "Every query failed:" + failures;
      out.failure = first_failure;
      return out;
    }
    auto merged = interleave_results(lists, limit);
    if (merged.empty()) {
      out.llm_text = "No results found.";
      return out;
    }
    out.llm_text = search_results_json(merged);
    out.documents = search_documents(merged);
    return out;
  }

private:
  host_context& host_;
  std::shared_ptr<const search_backend> backend_;
  search_tool_info info_;
};

} // namespace quarry::sdk
