// The `internal_search` tool: BM25 search over the local corpus index, with
// Onyx's schema and the same LLM-facing JSON as web_search.

#include "local_corpus_tool.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/search.hpp"

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

namespace quarry::plugins::local_corpus {

namespace {

constexpr size_t max_max_results = 100;

std::string fold_query(const std::string& raw) {
  std::string result;
  bool space = false;
  for (auto ch : raw) {
    auto c = static_cast<unsigned char>(ch);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      space = true;
      continue;
    }
    if (c < 0x20 || c == 0x7F)
      continue; // control character
    if (space && !result.empty())
      result += ' ';
    space = false;
    result += static_cast<char>(c);
  }
  return result;
}

// Indented by 2, as the web searches and open_url write what the model reads.
std::string dump(const nlohmann::json& x) {
  return sdk::dump_json(x, 2);
}

} // namespace

tool_config parse_config(const nlohmann::json& config, const std::string& data_dir) {
  tool_config result;
  if (!config.is_null() && !config.is_object())
    throw std::invalid_argument("internal_search: the configuration must be "
                                "an object");
  if (config.is_object()) {
    for (const auto& [key, value] : config.items()) {
      if (key == "db") {
        if (!value.is_string() || value.get<std::string>().empty())
          throw std::invalid_argument("internal_search: 'db' must be a "
                                      "non-empty path");
        result.db = value.get<std::string>();
      } else if (key == "max_results") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1
            || value.get<int64_t>() > static_cast<int64_t>(max_max_results))
          throw std::invalid_argument("internal_search: 'max_results' must "
                                      "be an integer from 1 to 100");
        result.max_results = value.get<size_t>();
      } else if (key == "feedback") {
        if (!value.is_boolean())
          throw std::invalid_argument("internal_search: 'feedback' must be true or false");
        result.feedback = value.get<bool>();
      } else if (key == "id_prefix") {
        auto ok = value.is_string() && !value.get<std::string>().empty()
                  && value.get<std::string>().size() <= 32;
        for (auto c : ok ? value.get<std::string>() : std::string{})
          ok = ok
               && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                   || c == '_');
        if (!ok)
          throw std::invalid_argument("internal_search: 'id_prefix' must be 1 to 32 letters, "
                                      "digits or '_'");
        result.id_prefix = value.get<std::string>();
      } else {
        throw std::invalid_argument("internal_search: unknown configuration "
                                    "key '"
                                    + key + "' (known: db, max_results, feedback, id_prefix)");
      }
    }
  }
  if (result.db.empty()) {
    if (data_dir.empty())
      throw std::invalid_argument("internal_search: no data folder: set 'db'");
    result.db = (std::filesystem::path{data_dir} / "corpus.db").string();
  }
  return result;
}

std::optional<std::vector<std::string>> normalize_queries(const nlohmann::json& arguments) {
  if (!arguments.is_object() || !arguments.contains("queries"))
    return std::nullopt;
  const auto& raw = arguments["queries"];
  if (!raw.is_string() && !raw.is_array())
    return std::nullopt;
  return sdk::distinct_queries(sdk::query_strings(raw), fold_query, sdk::max_search_queries);
}

sdk::tool_result search_corpus(corpus_index& index, const std::vector<std::string>& queries,
                               size_t max_results, bool feedback, const std::string& id_prefix) {
  corpus::search_options options;
  if (feedback)
    options.feedback_documents = feedback_documents;
  sdk::tool_result result;
  std::vector<std::vector<search_hit>> lists;
  std::optional<sdk::error> last_error;
  for (const auto& q : queries) {
    auto found = index.search(q, max_results, options);
    if (found.failure)
      last_error = std::move(found.failure);
    else
      lists.push_back(std::move(found.hits));
  }
  if (lists.empty() && last_error) {
    result.failure = last_error;
    result.llm_text = "Internal search failed for all queries: " + last_error->message
                      + ". Try again later or use other sources.";
    return result;
  }
  // Round-robin interleave, one entry per document.
  std::vector<const search_hit*> picked;
  std::set<int64_t> seen;
  for (size_t rank = 0; picked.size() < max_results; ++rank) {
    bool any = false;
    for (const auto& list : lists) {
      if (rank >= list.size())
        continue;
      any = true;
      const auto& hit = list[rank];
      if (picked.size() < max_results && seen.insert(hit.document_id).second)
        picked.push_back(&hit);
    }
    if (!any)
      break;
  }
  auto results = nlohmann::json::array();
  int n = 0;
  for (const auto* hit : picked) {
    nlohmann::json item{
      {"document", ++n}, {"title", hit->title}, {"url", hit->url}, {"content", hit->text}};
    // A date the document itself gives (not the file's modification time)
    // is its publication date, for the model and the citation.
    auto dated = !hit->date.empty() && hit->date_source != "mtime";
    if (dated)
      item["date"] = hit->date;
    results.push_back(std::move(item));
    sdk::document doc;
    doc.id = id_prefix + ":" + std::to_string(hit->document_id);
    doc.url = hit->url;
    doc.title = hit->title;
    doc.snippet = hit->snippet;
    // The passage the model read: what its citations are checked against.
    doc.content = hit->text;
    doc.kind = sdk::source_kind::internal;
    if (dated)
      doc.published = hit->date;
    result.documents.push_back(std::move(doc));
  }
  result.llm_text = dump(nlohmann::json{{"results", std::move(results)}});
  return result;
}

// -- the tool -----------------------------------------------------------------

struct internal_search_tool::state {
  tool_config config;
  std::mutex mtx;
  std::unique_ptr<corpus_index> index;

  /// Returns the index, opening it on first use.
  corpus_index* get(std::optional<sdk::error>& failure) {
    std::lock_guard<std::mutex> guard{mtx};
    if (!index) {
      auto opened = corpus_index::open(config.db);
      if (opened.failure) {
        failure = std::move(opened.failure);
        return nullptr;
      }
      index = std::move(opened.index);
    }
    return index.get();
  }
};

namespace {

class run_impl final : public sdk::tool_run {
public:
  explicit run_impl(sdk::tool_callback done) : done_(std::move(done)) {
    // nop
  }

  void cancel() override {
    sdk::tool_result result;
    result.failure = sdk::make_error(sdk::errc::cancelled, "cancelled");
    result.llm_text = "The internal search was cancelled.";
    finish(std::move(result));
  }

  bool cancelled() const noexcept {
    return finished_.load();
  }

  void finish(sdk::tool_result result) {
    if (finished_.exchange(true))
      return;
    auto done = std::move(done_);
    done(std::move(result));
  }

private:
  std::atomic<bool> finished_{false};
  sdk::tool_callback done_;
};

sdk::tool_result failed(sdk::errc code, std::string message, std::string llm_text) {
  sdk::tool_result result;
  result.failure = sdk::make_error(code, std::move(message));
  result.llm_text = std::move(llm_text);
  return result;
}

} // namespace

internal_search_tool::internal_search_tool(sdk::host_context& host, tool_config config)
  : host_(host), state_(std::make_shared<state>()) {
  state_->config = std::move(config);
}

internal_search_tool::~internal_search_tool() {
  // nop
}

std::string internal_search_tool::name() const {
  return "internal_search";
}

std::string internal_search_tool::description() const {
  return "Search connected applications for information.";
}

nlohmann::json internal_search_tool::parameters() const {
  return {{"type", "object"},
          {"properties",
           {{"queries",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"description", "List of search queries to execute, typically a single query. Query "
                              "expansion and filter extraction steps will be run automatically "
                              "downstream, do not include time or source type scoping details in "
                              "your query."}}}}},
          {"required", {"queries"}}};
}

std::shared_ptr<sdk::tool_run> internal_search_tool::run(const nlohmann::json& arguments,
                                                         sdk::tool_callback done) {
  auto handle = std::make_shared<run_impl>(std::move(done));
  auto queries = normalize_queries(arguments);
  if (!queries) {
    handle->finish(failed(sdk::errc::bad_request, "internal_search: missing 'queries'",
                          "internal_search needs a 'queries' argument: a "
                          "list of search strings."));
    return handle;
  }
  if (queries->empty()) {
    handle->finish(failed(sdk::errc::bad_request, "internal_search: no non-empty query",
                          "internal_search got only empty queries: pass at "
                          "least one search string."));
    return handle;
  }
  auto st = state_;
  auto job = [st, handle, qs = std::move(*queries)] {
    if (handle->cancelled())
      return;
    std::optional<sdk::error> failure;
    auto* index = st->get(failure);
    if (index == nullptr) {
      auto msg = failure ? failure->message : std::string{"cannot open"};
      handle->finish(
        failed(failure ? failure->code : sdk::errc::internal, msg,
               "The internal search index is unavailable (" + msg + "). Use other sources."));
      return;
    }
    handle->finish(
      search_corpus(*index, qs, st->config.max_results, st->config.feedback, st->config.id_prefix));
  };
  if (!host_.pool().submit(std::move(job)))
    handle->finish(failed(sdk::errc::busy, "internal_search: pool is full",
                          "The internal search is busy. Try again later."));
  return handle;
}

} // namespace quarry::plugins::local_corpus
