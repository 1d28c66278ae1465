// `quarry extract FILE|URL [--json]`: reads a document exactly as the
// open_url tool does (same fetching rules, same extraction) and prints its
// text or, with --json, its metadata and text.

#include "cli.hpp"
#include "context.hpp"

#include "quarry/extract/charset_detect.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/fetch/local_file.hpp"
#include "quarry/fetch/url.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>

namespace quarry::app {

namespace {

constexpr std::chrono::milliseconds pdf_time_limit{120000};

// The media type a file's extension suggests (the bytes still win).
std::string type_from_extension(const std::filesystem::path& path) {
  auto ext = sdk::to_lower(path.extension().string());
  if (ext == ".html" || ext == ".htm" || ext == ".xhtml")
    return "text/html";
  if (ext == ".pdf")
    return "application/pdf";
  if (ext == ".json")
    return "application/json";
  if (ext == ".txt" || ext == ".md" || ext == ".markdown" || ext == ".rst")
    return "text/plain";
  return {};
}

int print(const fetch::page& p, bool json) {
  if (p.failure) {
    std::cerr << "quarry: cannot read " << p.url << ": " << p.reason << "\n";
    return exit_failure;
  }
  if (json) {
    nlohmann::ordered_json out;
    out["url"] = p.final_url;
    out["title"] = p.title;
    out["byline"] = p.byline;
    out["published"] = p.published;
    if (!p.modified.empty())
      out["modified"] = p.modified;
    out["site_name"] = p.site_name;
    out["lang"] = p.lang;
    if (!p.canonical_url.empty())
      out["canonical_url"] = p.canonical_url;
    if (p.pages > 0) {
      out["pages"] = p.pages;
      out["pages_read"] = p.pages_read;
    }
    if (!p.charset_note.empty())
      out["note"] = p.charset_note;
    out["text"] = p.text;
    if (!p.comments.empty())
      out["comments"] = p.comments;
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    // A guessed encoding is said on stderr: stdout stays the document.
    if (!p.charset_note.empty())
      std::cerr << "quarry: note: " << p.url << ": " << p.charset_note << "\n";
    std::cout << p.text;
    if (!p.text.empty() && p.text.back() != '\n')
      std::cout << "\n";
  }
  return exit_ok;
}

} // namespace

std::variant<fetch::fetch_options, std::string> open_url_fetch_options(const core::settings& cfg) {
  auto config = nlohmann::json::object();
  for (const auto& [name, entry] : cfg.tools)
    if (entry.plugin == "open_url") {
      config = entry.config;
      break;
    }
  auto parsed = fetch::parse_fetch_options(config);
  if (auto* err = std::get_if<std::string>(&parsed))
    return "tools.open_url: " + *err;
  return std::get<fetch::fetch_options>(std::move(parsed));
}

int cmd_extract(context& ctx, const extract_options& opts) {
  auto options = open_url_fetch_options(ctx.config.values);
  if (auto* err = std::get_if<std::string>(&options)) {
    std::cerr << "quarry: " << *err << "\n";
    return exit_usage;
  }
  auto& fopts = std::get<fetch::fetch_options>(options);
  // An http(s) URL that does not parse is still fetched, so that its error
  // says what is wrong with it.
  auto scheme = sdk::to_lower(opts.source.substr(0, 8));
  auto web = fetch::is_http_url(opts.source) || sdk::starts_with(scheme, "http://")
             || sdk::starts_with(scheme, "https://");
  if (!web) {
    std::string path = opts.source;
    auto parsed = fetch::parse_url(path);
    if (auto* u = std::get_if<fetch::url>(&parsed)) {
      if (u->scheme != "file") {
        std::cerr << "quarry: cannot read " << opts.source
                  << ": only http, https and file URLs or file paths\n";
        return exit_usage;
      }
      path = u->path_and_query();
    }
    // Regular files only (a FIFO is never opened, so never waited on), and
    // no more than open_url would read of a fetched page.
    auto read = fetch::read_local_file(path, fetch::local_limits(fopts));
    if (auto* err = std::get_if<sdk::error>(&read)) {
      std::cerr << "quarry: " << path << ": " << err->message << "\n";
      // A path that names no file, or not a file, is a usage error.
      return err->code == sdk::errc::not_found || err->code == sdk::errc::bad_request
               ? exit_usage
               : exit_failure;
    }
    auto page = fetch::read_document(std::get<std::string>(read), type_from_extension(path), path,
                                     pdf_time_limit, extract::make_charset_detector());
    return print(page, opts.json);
  }
  auto policy = fetch::address_policy::make(fopts.allow);
  auto shared_policy = std::make_shared<const fetch::address_policy>(
    std::get<fetch::address_policy>(std::move(policy)));
  if (!ctx.services)
    ctx.services = std::make_unique<host::host_services>(ctx.config.values);
  std::mutex mtx;
  std::condition_variable cv;
  std::optional<fetch::fetched> result;
  auto deadline = std::chrono::steady_clock::now() + fopts.call_timeout;
  auto call = fetch::start_fetch(ctx.services->http(), opts.source, shared_policy, fopts, deadline,
                                 [&](fetch::fetched f) {
                                   std::lock_guard<std::mutex> guard{mtx};
                                   result = std::move(f);
                                   cv.notify_all();
                                 });
  {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait(guard, [&] { return result.has_value(); });
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - std::chrono::steady_clock::now());
  auto page = fetch::read_fetched(*result, std::max(left, std::chrono::milliseconds{1}),
                                  extract::make_charset_detector());
  return print(page, opts.json);
}

} // namespace quarry::app
