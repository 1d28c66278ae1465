// The `open_url` tool: fetches every URL of a call in parallel through the
// host's HTTP client, reads the responses on the host's pool and answers with
// Onyx's LLM-facing JSON.

#include "open_url_tool.hpp"

#include "quarry/extract/charset_detect.hpp"

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/sdk/ttl_cache.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace quarry::plugins::open_url {

namespace {

using clock_type = std::chrono::steady_clock;

size_t size_option(const nlohmann::json& config, const char* key, size_t fallback, size_t lo,
                   size_t hi) {
  auto i = config.find(key);
  if (i == config.end())
    return fallback;
  if (!i->is_number_integer() || i->get<int64_t>() < static_cast<int64_t>(lo)
      || i->get<int64_t>() > static_cast<int64_t>(hi))
    throw std::invalid_argument("open_url: '" + std::string{key} + "' must be an integer from "
                                + std::to_string(lo) + " to " + std::to_string(hi));
  return i->get<size_t>();
}

bool starts_with(std::string_view x, std::string_view prefix) {
  return x.substr(0, prefix.size()) == prefix;
}

// `corpus:<n>` ids of the local corpus.
std::optional<int64_t> corpus_id(std::string_view url) {
  if (!starts_with(url, "corpus:"))
    return std::nullopt;
  auto digits = url.substr(7);
  if (digits.empty() || digits.size() > 18)
    return std::nullopt;
  int64_t id = 0;
  for (auto c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    id = id * 10 + (c - '0');
  }
  return id;
}

// A date the LLM can read as `updated_at` (ISO 8601 dates only).
std::string iso_date(const std::string& x) {
  if (x.size() >= 10 && std::isdigit(static_cast<unsigned char>(x[0])) && x[4] == '-'
      && x[7] == '-')
    return x;
  return {};
}

std::string excerpt_of(const fetch::page& p) {
  if (!p.excerpt.empty())
    return p.excerpt;
  return std::string{cut_chars(p.text, 300)};
}

} // namespace

tool_config parse_config(const nlohmann::json& config, const std::string& data_dir) {
  if (!config.is_null() && !config.is_object())
    throw std::invalid_argument("open_url: the configuration must be a mapping");
  tool_config out;
  auto known = fetch::fetch_option_keys();
  for (auto x : {"max_urls", "window_chars", "budget_chars", "corpus_db"})
    known.emplace_back(x);
  if (config.is_object())
    for (const auto& [key, _] : config.items())
      if (std::find(known.begin(), known.end(), key) == known.end())
        throw std::invalid_argument("open_url: unknown key '" + key + "'");
  auto fetched = fetch::parse_fetch_options(config);
  if (auto* err = std::get_if<std::string>(&fetched))
    throw std::invalid_argument("open_url: " + *err);
  out.fetch = std::get<fetch::fetch_options>(std::move(fetched));
  if (!config.is_object())
    return out;
  out.max_urls = size_option(config, "max_urls", default_max_urls, 1, 50);
  out.window_chars = size_option(config, "window_chars", default_window_chars, 500, 1000000);
  out.budget_chars = size_option(config, "budget_chars", default_budget_chars, 1000, 10000000);
  if (auto i = config.find("corpus_db"); i != config.end()) {
    if (!i->is_string())
      throw std::invalid_argument("open_url: 'corpus_db' must be a file path "
                                  "(or empty to disable)");
    out.corpus_db = i->get<std::string>();
  } else if (!data_dir.empty()) {
    // The local_corpus plugin's default database: its data folder is a
    // sibling of ours.
    out.corpus_db = (std::filesystem::path{data_dir}.parent_path() / "local_corpus" / "corpus.db")
                      .string();
  }
  return out;
}

// -- shared state ---------------------------------------------------------------

struct open_url_tool::state {
  tool_config config;
  std::shared_ptr<const fetch::address_policy> policy;
  std::mutex mtx;
  std::unique_ptr<corpus::corpus_index> index;

  // Pages read recently, by url_key: a URL any agent already read is not
  // fetched again. Failures are not kept. 10 minutes and 128 pages until
  // the host gives its limits (own_cache), on the host's clock.
  sdk::ttl_cache<fetch::page> pages;

  explicit state(sdk::host_context& host)
    : pages(std::chrono::minutes{10}, 128, [&host] { return host.steady_now(); }) {
    // nop
  }

  // Guesses the charset of pages that name none (uchardet).
  extract::charset_detector detect = extract::make_charset_detector();

  /// Opens the corpus on first use (pool threads only).
  corpus::corpus_index* corpus(std::string& why) {
    std::lock_guard<std::mutex> guard{mtx};
    if (index)
      return index.get();
    if (config.corpus_db.empty()) {
      why = "no local corpus is configured";
      return nullptr;
    }
    if (!std::filesystem::exists(config.corpus_db)) {
      why = "the local corpus has not been indexed yet";
      return nullptr;
    }
    auto opened = corpus::corpus_index::open(config.corpus_db);
    if (opened.failure) {
      why = "the local corpus cannot be opened (" + opened.failure->message + ")";
      return nullptr;
    }
    index = std::move(opened.index);
    return index.get();
  }
};

namespace {

// One open_url call: all its URLs, their outcomes and the callback.
class call final : public sdk::tool_run {
public:
  struct item {
    std::string url;
    std::string snippet;
    std::optional<int64_t> document;
    /// For `file://` URLs: the local file, opened only if it is indexed.
    bool file = false;
    std::optional<fetch::page> page;
  };

  call(std::vector<item> items, size_t dropped, tool_config config, sdk::tool_callback done)
    : items_(std::move(items)),
      pending_(items_.size()),
      dropped_(dropped),
      config_(std::move(config)),
      done_(std::move(done)) {
    // nop
  }

  void add_http_call(std::shared_ptr<sdk::http_call> x) {
    if (!x)
      return;
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        cancel_now = true;
      else
        calls_.push_back(std::move(x));
    }
    if (cancel_now)
      x->cancel();
  }

  void cancel() override {
    std::vector<std::shared_ptr<sdk::http_call>> calls;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      calls.swap(calls_);
    }
    sdk::tool_result result;
    result.failure = sdk::make_error(sdk::errc::cancelled, "open_url cancelled");
    result.llm_text = "The call to open_url was cancelled.";
    finish(std::move(result));
    for (auto& x : calls)
      x->cancel();
  }

  bool finished() {
    std::lock_guard<std::mutex> guard{mtx_};
    return finished_;
  }

  /// Stores the outcome of item `i`; the last one builds the answer.
  void complete(size_t i, fetch::page page) {
    bool last = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      items_[i].page = std::move(page);
      last = --pending_ == 0;
    }
    if (last)
      finish(build());
  }

  const item& at(size_t i) const {
    return items_[i];
  }

  size_t size() const {
    return items_.size();
  }

  /// Calls the callback unless it was called already.
  void finish(sdk::tool_result result) {
    sdk::tool_callback done;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_)
        return;
      finished_ = true;
      done = std::move(done_);
      calls_.clear();
    }
    done(std::move(result));
  }

private:
  sdk::tool_result build() {
    sdk::tool_result result;
    std::vector<section> sections;
    std::vector<std::pair<std::string, std::string>> failures;
    std::vector<std::pair<std::string, std::string>> missing_documents;
    std::optional<sdk::error> first_failure;
    for (auto& x : items_) {
      auto& p = *x.page;
      if (p.failure) {
        if (!first_failure)
          first_failure = p.failure;
        if (x.document)
          missing_documents.emplace_back(x.url, p.reason);
        else
          failures.emplace_back(x.url, p.reason);
        continue;
      }
      section sec;
      sec.title = p.title.empty() ? x.url : p.title;
      sec.url = x.document ? p.final_url : x.url;
      sec.updated_at = iso_date(p.published);
      sec.content = window_text(p.text, x.snippet, config_.window_chars);
      sec.note = p.charset_note;
      sections.push_back(std::move(sec));
      sdk::document doc;
      doc.id = x.document ? x.url : url_key(x.url);
      doc.url = x.document ? p.final_url : x.url;
      if (x.file && !p.canonical_url.empty())
        doc.id = p.canonical_url; // the corpus id, as internal_search gives it
      doc.title = p.title.empty() ? x.url : p.title;
      doc.snippet = excerpt_of(p);
      // The document carries the note too: whoever reads the source later
      // (the report's reader, the web page) sees that its charset was a
      // guess.
      doc.content = p.charset_note.empty() ? p.text : "[" + p.charset_note + "]\n\n" + p.text;
      if (!p.published.empty())
        doc.published = p.published;
      doc.kind = x.document || starts_with(x.url, "file:") ? sdk::source_kind::internal
                                                           : sdk::source_kind::web;
      result.documents.push_back(std::move(doc));
    }
    if (sections.empty()) {
      std::vector<std::string> ids;
      for (const auto& entry : missing_documents)
        ids.push_back(entry.first);
      result.llm_text = failure_message(std::move(ids), failures);
      if (dropped_ > 0)
        result.llm_text += ". " + dropped_note(config_.max_urls, dropped_);
      result.failure = first_failure ? *first_failure
                                     : sdk::make_error(sdk::errc::internal, "nothing was read");
      result.failure->message = result.llm_text;
      return result;
    }
    failures.insert(failures.end(), missing_documents.begin(), missing_documents.end());
    std::string note;
    if (dropped_ > 0)
      note = dropped_note(config_.max_urls, dropped_);
    result.llm_text = format_sections(sections, failures, note, config_.budget_chars).first;
    return result;
  }

  std::mutex mtx_;
  std::vector<item> items_;
  size_t pending_;
  size_t dropped_;
  tool_config config_;
  bool finished_ = false;
  std::vector<std::shared_ptr<sdk::http_call>> calls_;
  sdk::tool_callback done_;
};

fetch::page failed_page(const std::string& url, sdk::errc code, std::string reason) {
  fetch::page p;
  p.url = url;
  p.final_url = url;
  p.failure = sdk::make_error(code, url + ": " + reason);
  p.reason = std::move(reason);
  return p;
}

} // namespace

open_url_tool::open_url_tool(sdk::host_context& host, tool_config config)
  : host_(host), state_(std::make_shared<state>(host)) {
  auto policy = fetch::address_policy::make(config.fetch.allow);
  if (auto* err = std::get_if<std::string>(&policy))
    throw std::invalid_argument("open_url: " + *err);
  state_->policy = std::make_shared<const fetch::address_policy>(
    std::get<fetch::address_policy>(std::move(policy)));
  state_->config = std::move(config);
}

open_url_tool::~open_url_tool() {
  // nop
}

bool open_url_tool::own_cache(std::chrono::milliseconds ttl, size_t max_entries) {
  state_->pages.limit(ttl, max_entries);
  return true;
}

std::string open_url_tool::name() const {
  return "open_url";
}

std::string open_url_tool::description() const {
  return "Open and read the content of one or more URLs.";
}

nlohmann::json open_url_tool::parameters() const {
  return {{"type", "object"},
          {"properties",
           {{"urls",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"description", "List of URLs to open and read, can be a single URL or "
                              "multiple URLs. This will return the text content of the "
                              "page(s)."}}}}},
          {"required", {"urls"}}};
}

std::shared_ptr<sdk::tool_run> open_url_tool::run(const nlohmann::json& arguments,
                                                  sdk::tool_callback done) {
  const auto& cfg = state_->config;
  auto list = normalize_urls(arguments, cfg.max_urls);
  if (!list || list->urls.empty()) {
    auto handle = std::make_shared<call>(std::vector<call::item>{}, 0, cfg, std::move(done));
    sdk::tool_result result;
    result.llm_text = missing_urls_message();
    result.failure = sdk::make_error(sdk::errc::bad_request, "open_url: no 'urls' to open");
    handle->finish(std::move(result));
    return handle;
  }
  // Snippets the host passed along (the search engines' excerpts).
  const nlohmann::json* snippets = nullptr;
  if (auto q = arguments.find("_quarry"); q != arguments.end() && q->is_object())
    if (auto s = q->find("snippets"); s != q->end() && s->is_object())
      snippets = &*s;
  std::vector<call::item> items;
  for (auto& url : list->urls) {
    call::item x;
    x.url = url;
    x.document = corpus_id(url);
    x.file = starts_with(url, "file:");
    if (snippets != nullptr) {
      auto s = snippets->find(url);
      if (s == snippets->end())
        s = snippets->find(url_key(url));
      if (s != snippets->end() && s->is_string())
        x.snippet = s->get<std::string>();
    }
    items.push_back(std::move(x));
  }
  auto handle = std::make_shared<call>(std::move(items), list->dropped, cfg, std::move(done));
  auto deadline = clock_type::now() + cfg.fetch.call_timeout;
  auto st = state_;
  std::vector<std::pair<size_t, fetch::page>> cached;
  auto& host = host_;
  for (size_t i = 0; i < handle->size(); ++i) {
    const auto& x = handle->at(i);
    if (x.document || x.file) {
      auto id = x.document.value_or(0);
      auto by_id = x.document.has_value();
      auto url = x.url;
      auto job = [st, handle, i, id, by_id, url] {
        if (handle->finished())
          return;
        std::string why;
        auto* index = st->corpus(why);
        if (index == nullptr) {
          handle->complete(i, failed_page(url, by_id ? sdk::errc::not_found : sdk::errc::refused,
                                          by_id ? why
                                                : "file URLs can only open "
                                                  "documents of the local "
                                                  "corpus, and "
                                                    + why));
          return;
        }
        std::optional<corpus::stored_document> doc;
        if (by_id) {
          doc = index->get_document(id);
        } else {
          auto path = corpus::path_from_file_url(url);
          if (!path.empty())
            doc = index->find_document(path);
        }
        if (!doc) {
          handle->complete(i, by_id ? failed_page(url, sdk::errc::not_found,
                                                  "no such document in the "
                                                  "local corpus")
                                    : failed_page(url, sdk::errc::refused,
                                                  "file URLs can only open "
                                                  "documents of the local "
                                                  "corpus index"));
          return;
        }
        fetch::page p;
        p.url = url;
        p.final_url = doc->url;
        p.kind = extract::content_kind::text;
        p.title = doc->title;
        p.text = std::move(doc->text);
        p.canonical_url = "corpus:" + std::to_string(doc->id);
        handle->complete(i, std::move(p));
      };
      if (!host.pool().submit(std::move(job)))
        handle->complete(i, failed_page(x.url, sdk::errc::busy, "the reader is busy; try again"));
      continue;
    }
    auto on_fetched = [st, handle, i, deadline, &host](fetch::fetched f) {
      if (handle->finished())
        return;
      if (f.failure) {
        handle->complete(i, fetch::read_fetched(f, {}));
        return;
      }
      auto shared = std::make_shared<fetch::fetched>(std::move(f));
      auto job = [st, handle, i, deadline, shared] {
        if (handle->finished())
          return;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline
                                                                          - clock_type::now());
        auto page = fetch::read_fetched(*shared, std::max(left, std::chrono::milliseconds{1}),
                                        st->detect);
        if (!page.failure)
          st->pages.put(url_key(shared->url), page);
        handle->complete(i, std::move(page));
      };
      if (!host.pool().submit(std::move(job)))
        handle->complete(i, failed_page(shared->url, sdk::errc::busy,
                                        "the reader is busy; try again"));
    };
    if (auto page = st->pages.get(url_key(x.url))) {
      cached.emplace_back(i, std::move(*page));
      continue;
    }
    handle->add_http_call(fetch::start_fetch(host.http(), x.url, st->policy, cfg.fetch, deadline,
                                             std::move(on_fetched)));
  }
  // Pages read before are answered last, so that the call cannot finish
  // before every fetch has been registered for cancellation.
  for (auto& [i, page] : cached) {
    page.url = handle->at(i).url;
    handle->complete(i, std::move(page));
  }
  return handle;
}

} // namespace quarry::plugins::open_url
