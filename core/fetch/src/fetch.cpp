// Safe fetching of one URL and reading the response as text.

#include "quarry/fetch/fetch.hpp"
#include "quarry/fetch/url.hpp"

#include "quarry/extract/pdf.hpp"
#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/version.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace quarry::fetch {

namespace {

constexpr int64_t mib = 1024 * 1024;

std::string format_mib(int64_t bytes) {
  if (bytes % mib == 0)
    return std::to_string(bytes / mib) + " MiB";
  if (bytes % 1024 == 0)
    return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string seconds_text(std::chrono::milliseconds x) {
  auto ms = x.count();
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

std::optional<std::chrono::milliseconds> duration_value(const nlohmann::json& x) {
  if (x.is_number() && x.get<double>() > 0 && x.get<double>() < 86400.0 * 365)
    return std::chrono::milliseconds{static_cast<int64_t>(x.get<double>() * 1000.0 + 0.5)};
  if (x.is_string()) {
    auto ms = sdk::parse_duration_hint(x.get<std::string>());
    if (ms && *ms > 0)
      return std::chrono::milliseconds{*ms};
  }
  return std::nullopt;
}

std::optional<int64_t> size_value(const nlohmann::json& x) {
  if (x.is_number_integer() && x.get<int64_t>() > 0)
    return x.get<int64_t>();
  if (!x.is_string())
    return std::nullopt;
  auto text = x.get<std::string>();
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  if (pos == 0 || pos > 12)
    return std::nullopt;
  auto value = std::stoll(text.substr(0, pos));
  auto unit = sdk::to_lower(text.substr(pos));
  while (!unit.empty() && unit.front() == ' ')
    unit.erase(unit.begin());
  int64_t factor = 0;
  if (unit.empty() || unit == "b")
    factor = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    factor = 1024;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    factor = mib;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    factor = 1024 * mib;
  if (factor == 0 || value <= 0 || value > (int64_t{1} << 40) / factor)
    return std::nullopt;
  return value * factor;
}

bool cloudflare_signals(const sdk::http_headers& headers) {
  if (sdk::find_header(headers, "cf-ray") || sdk::find_header(headers, "cf-mitigated"))
    return true;
  auto server = sdk::find_header(headers, "server");
  return server && sdk::starts_with(sdk::to_lower(*server), "cloudflare");
}

sdk::errc status_code_class(int status) {
  if (status == 401 || status == 403)
    return sdk::errc::auth;
  if (status == 404 || status == 410)
    return sdk::errc::not_found;
  if (status == 429)
    return sdk::errc::rate_limited;
  if (status >= 500)
    return sdk::errc::server_error;
  return sdk::errc::bad_request;
}

std::string status_reason(int status, const sdk::http_headers& headers) {
  if (status >= 400 && cloudflare_signals(headers))
    return "the page is behind a Cloudflare bot challenge that the fetcher "
           "cannot solve (HTTP "
           + std::to_string(status) + "); try another URL with the same information";
  if (status == 403)
    return "upstream returned HTTP 403 \xE2\x80\x94 the page likely requires "
           "authentication or blocks automated access";
  return "upstream returned HTTP " + std::to_string(status);
}

const char* pdf_types[] = {"application/pdf",     "application/x-pdf", "application/acrobat",
                           "application/vnd.pdf", "text/pdf",          "text/x-pdf"};

std::string media_type(std::string_view content_type) {
  return sdk::to_lower(sdk::trim(content_type.substr(0, content_type.find(';'))));
}

bool trimmed_starts_with(std::string_view bytes, std::string_view prefix) {
  size_t i = 0;
  if (sdk::starts_with(bytes, "\xEF\xBB\xBF"))
    i = 3;
  return sdk::starts_with(sdk::trim(bytes.substr(i)), prefix);
}

// The path of a URL, or of a local file name (without a query).
std::string url_path(std::string_view x) {
  auto parsed = parse_url(x);
  if (auto* u = std::get_if<url>(&parsed))
    return u->path;
  return std::string{x.substr(0, x.find('?'))};
}

// The host of a URL the policy has accepted.
std::string host_of(std::string_view x) {
  auto parsed = parse_url(x);
  auto* u = std::get_if<url>(&parsed);
  return u != nullptr ? u->host : std::string{};
}

// Receives one response, enforcing the size limit of its kind.
class fetch_sink final : public sdk::http_response_sink {
public:
  fetch_sink(fetched init, fetch_options options, fetch_callback done)
    : result_(std::move(init)), options_(std::move(options)), done_(std::move(done)) {
    // nop
  }

  /// The host name of the URL being requested (changes on redirects).
  std::string current_host;

  bool on_response(int status, const sdk::http_headers& headers) override {
    result_.status = status;
    result_.headers = headers;
    if (status < 200 || status >= 300) {
      // A bot challenge does not go away when asked again: not retryable.
      fail(status >= 400 && cloudflare_signals(headers) ? sdk::errc::refused
                                                        : status_code_class(status),
           status_reason(status, headers));
      // The wait a 429 or 503 asks for, for the caller's retry.
      result_.failure->retry_after_ms = sdk::retry_after_ms(headers);
      return false;
    }
    content_type_ = sdk::find_header(headers, "content-type").value_or("");
    if (auto len = sdk::find_header(headers, "content-length")) {
      char* end = nullptr;
      auto n = std::strtoll(len->c_str(), &end, 10);
      auto pdf = is_pdf(content_type_, result_.final_url, {});
      if (n > (pdf ? options_.max_pdf_bytes : options_.max_html_bytes)) {
        fail(sdk::errc::too_large, too_large_reason(pdf));
        return false;
      }
    }
    return true;
  }

  bool on_data(std::string_view bytes) override {
    result_.body.append(bytes.data(), bytes.size());
    auto pdf = is_pdf(content_type_, result_.final_url,
                      std::string_view{result_.body}.substr(0, 1024));
    if (static_cast<int64_t>(result_.body.size())
        > (pdf ? options_.max_pdf_bytes : options_.max_html_bytes)) {
      fail(sdk::errc::too_large, too_large_reason(pdf));
      return false;
    }
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    if (!result_.failure && failure) {
      result_.reason = reason_for(*failure);
      result_.failure = std::move(failure);
    }
    if (result_.failure)
      result_.body.clear();
    auto done = std::move(done_);
    if (done)
      done(std::move(result_));
  }

  void set_final_url(std::string url) {
    result_.final_url = std::move(url);
  }

private:
  std::string too_large_reason(bool pdf) const {
    return pdf ? "PDF response exceeded the configured maximum size ("
                   + format_mib(options_.max_pdf_bytes) + ")"
               : "HTML response exceeded the configured maximum size ("
                   + format_mib(options_.max_html_bytes) + ")";
  }

  std::string reason_for(const sdk::error& err) const {
    switch (err.code) {
      case sdk::errc::refused:
        if (sdk::starts_with(err.message, "blocked by SSRF"))
          return err.message;
        return "refused: " + err.message;
      case sdk::errc::timeout:
        return "timed out while fetching the URL";
      case sdk::errc::stall:
        return "no data received for " + seconds_text(options_.stall_timeout)
               + " while fetching the URL";
      case sdk::errc::too_many_redirects:
        return "too many redirects (more than " + std::to_string(options_.max_redirects) + ")";
      case sdk::errc::too_large:
        return too_large_reason(is_pdf(content_type_, result_.final_url, {}));
      case sdk::errc::cancelled:
        return "the fetch was cancelled";
      default:
        return "network error while fetching the URL";
    }
  }

  void fail(sdk::errc code, std::string reason) {
    result_.failure = sdk::make_error(code, result_.url + ": " + reason, result_.status);
    result_.reason = std::move(reason);
  }

  fetched result_;
  fetch_options options_;
  std::string content_type_;
  fetch_callback done_;
};

} // namespace

const std::vector<std::string>& fetch_option_keys() {
  static const std::vector<std::string> keys{"allow",        "connect_timeout", "stall_timeout",
                                             "call_timeout", "max_redirects",   "max_html_size",
                                             "max_pdf_size", "user_agent"};
  return keys;
}

std::variant<fetch_options, std::string> parse_fetch_options(const nlohmann::json& config) {
  fetch_options out;
  // clang-format off
  out.user_agent = "Mozilla/5.0 (compatible; Quarry/"
                   QUARRY_SDK_STRINGIFY(QUARRY_SDK_VERSION_MAJOR) "."
                   QUARRY_SDK_STRINGIFY(QUARRY_SDK_VERSION_MINOR)
                   "; research agent reading a page a user asked about)";
  // clang-format on
  if (config.is_null())
    return out;
  if (!config.is_object())
    return std::string{"the configuration must be a mapping"};
  if (auto i = config.find("allow"); i != config.end()) {
    if (!i->is_array())
      return std::string{"'allow' must be a list of addresses, CIDR ranges "
                         "or host names"};
    for (const auto& x : *i) {
      if (!x.is_string())
        return std::string{"'allow' entries must be strings"};
      out.allow.push_back(x.get<std::string>());
    }
    auto policy = address_policy::make(out.allow);
    if (auto* err = std::get_if<std::string>(&policy))
      return "'allow': " + *err;
  }
  struct duration_key {
    const char* key;
    std::chrono::milliseconds* dst;
  };
  for (auto [key, dst] : {duration_key{"connect_timeout", &out.connect_timeout},
                          duration_key{"stall_timeout", &out.stall_timeout},
                          duration_key{"call_timeout", &out.call_timeout}}) {
    if (auto i = config.find(key); i != config.end()) {
      auto value = duration_value(*i);
      if (!value)
        return std::string{"'"} + key + "' must be a positive duration (seconds, or e.g. \"5s\")";
      *dst = *value;
    }
  }
  if (auto i = config.find("max_redirects"); i != config.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 0 || i->get<int64_t>() > 20)
      return std::string{"'max_redirects' must be an integer from 0 to 20"};
    out.max_redirects = i->get<int>();
  }
  for (auto [key, dst] : {std::pair{"max_html_size", &out.max_html_bytes},
                          std::pair{"max_pdf_size", &out.max_pdf_bytes}}) {
    if (auto i = config.find(key); i != config.end()) {
      auto value = size_value(*i);
      if (!value)
        return std::string{"'"} + key + "' must be a positive size (bytes, or e.g. \"20MiB\")";
      *dst = *value;
    }
  }
  if (auto i = config.find("user_agent"); i != config.end()) {
    if (!i->is_string() || i->get<std::string>().empty())
      return std::string{"'user_agent' must be a non-empty string"};
    out.user_agent = i->get<std::string>();
  }
  return out;
}

bool is_pdf(std::string_view content_type, std::string_view url, std::string_view first_bytes) {
  if (trimmed_starts_with(first_bytes, "%PDF-"))
    return true;
  if (!first_bytes.empty() && extract::sniff("", first_bytes) == extract::content_kind::html)
    return false;
  auto type = media_type(content_type);
  for (auto x : pdf_types)
    if (type == x)
      return true;
  auto path = sdk::to_lower(url_path(url));
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".pdf") == 0;
}

std::shared_ptr<sdk::http_call>
start_fetch(sdk::http_client& http, std::string url, std::shared_ptr<const address_policy> policy,
            const fetch_options& options, std::chrono::steady_clock::time_point deadline,
            fetch_callback done) {
  fetched init;
  init.url = url;
  init.final_url = url;
  if (auto err = policy->check_url(url)) {
    init.reason = sdk::starts_with(err->message, "blocked by SSRF") ? err->message
                                                                    : "refused: " + err->message;
    init.failure = std::move(err);
    done(std::move(init));
    return nullptr;
  }
  auto now = std::chrono::steady_clock::now();
  if (now >= deadline) {
    init.failure = sdk::make_error(sdk::errc::timeout, url + ": no time left");
    init.reason = "timed out while fetching the URL";
    done(std::move(init));
    return nullptr;
  }
  auto sink = std::make_shared<fetch_sink>(std::move(init), options, std::move(done));
  sink->current_host = host_of(url);
  sdk::http_request req;
  req.method = "GET";
  req.url = url;
  req.headers = {{"User-Agent", options.user_agent},
                 {"Accept", "text/html,application/xhtml+xml,application/xml;"
                            "q=0.9,application/pdf,text/plain;q=0.8,*/*;q=0.5"},
                 {"Accept-Language", "en;q=0.9, *;q=0.5"}};
  req.connect_timeout = options.connect_timeout;
  req.stall_timeout = options.stall_timeout;
  req.total_timeout = std::max(
    std::chrono::milliseconds{1},
    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
  req.max_response_bytes = std::max(options.max_html_bytes, options.max_pdf_bytes) + 1;
  req.follow_redirects = true;
  req.max_redirects = options.max_redirects;
  // Both hooks run on the I/O thread, one transfer at a time: the sink's
  // current host needs no lock.
  std::weak_ptr<fetch_sink> weak = sink;
  req.on_redirect = [policy, weak](const sdk::redirect_hop& hop) -> std::optional<sdk::error> {
    if (auto err = policy->check_url(hop.to))
      return err;
    if (auto s = weak.lock()) {
      s->current_host = host_of(hop.to);
      s->set_final_url(hop.to);
    }
    return std::nullopt;
  };
  req.on_connect = [policy, weak](std::string_view ip, uint16_t) -> std::optional<sdk::error> {
    std::string host;
    if (auto s = weak.lock())
      host = s->current_host;
    return policy->check(host, ip);
  };
  return http.start(std::move(req), sink);
}

std::string last_path_segment(std::string_view url) {
  auto path = url_path(url);
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  auto slash = path.rfind('/');
  auto seg = slash == std::string::npos ? path : path.substr(slash + 1);
  return sdk::percent_decode(seg);
}

double replacement_share(std::string_view text) noexcept {
  size_t chars = 0;
  size_t replaced = 0;
  for (size_t i = 0; i < text.size();) {
    auto c = sdk::decode_utf8(text, i);
    i += c.length > 0 ? c.length : 1;
    if (c.code_point < 0x80 && sdk::is_ascii_space(static_cast<char>(c.code_point)))
      continue;
    ++chars;
    if (c.code_point == 0xFFFD)
      ++replaced;
  }
  return chars == 0 ? 0.0 : static_cast<double>(replaced) / static_cast<double>(chars);
}

namespace {

// Fails `out` by the replacement rule when `share` of its text is U+FFFD;
// returns whether it did.
bool fail_if_unreadable(page& out, double share) {
  if (!(share > max_replacement_share))
    return false;
  // Rounded up, so that the number shown is above the limit too.
  auto percent = std::to_string(static_cast<int>(std::ceil(share * 100)));
  auto how = "read as " + (out.charset.empty() ? std::string{"UTF-8"} : out.charset)
             + (out.charset_note.empty() ? std::string{} : " (" + out.charset_note + ")");
  out.reason = "the page decodes to unreadable text: " + percent
               + "% of its characters are replacement characters (U+FFFD), " + how
               + "; its encoding is wrong or it is not text";
  out.failure = sdk::make_error(sdk::errc::invalid_response, out.reason);
  out.text.clear();
  out.title.clear();
  out.excerpt.clear();
  return true;
}

} // namespace

page read_document(std::string_view bytes, std::string_view content_type, std::string_view url,
                   std::chrono::milliseconds pdf_time, const extract::charset_detector& detect) {
  page out;
  out.url = std::string{url};
  out.final_url = out.url;
  auto head = bytes.substr(0, 1024);
  if (is_pdf(content_type, url, head)) {
    out.kind = extract::content_kind::pdf;
    auto pdf = extract::extract_pdf(bytes, pdf_time);
    if (pdf.failure) {
      out.failure = pdf.failure;
      out.reason = "could not read the PDF (" + pdf.failure->message + ")";
      return out;
    }
    out.title = !pdf.title.empty() ? pdf.title : last_path_segment(url);
    out.byline = pdf.author;
    out.published = pdf.published;
    out.pages = pdf.pages;
    out.pages_read = pdf.pages_read;
    out.text = std::move(pdf.text);
    if (pdf.pages_read < pdf.pages)
      out.text += "\n\n[...the PDF has " + std::to_string(pdf.pages)
                  + " pages; the time limit allowed reading " + std::to_string(pdf.pages_read)
                  + "]";
  } else {
    auto kind = extract::sniff(content_type, head);
    out.kind = kind;
    switch (kind) {
      case extract::content_kind::html: {
        auto decoded = extract::decode_document(bytes, content_type, detect);
        out.charset = std::move(decoded.charset);
        out.charset_note = std::move(decoded.note);
        auto& text = decoded.text;
        // Bytes that are no text in any encoding tried: no extraction.
        if (fail_if_unreadable(out, replacement_share(text)))
          return out;
        // The same time limit as for PDFs: the caller's deadline holds.
        extract::extract_options limits;
        if (pdf_time.count() > 0)
          limits.deadline = std::chrono::steady_clock::now() + pdf_time;
        auto read = extract::try_extract_html(text, url, limits);
        if (auto* err = std::get_if<sdk::error>(&read)) {
          out.failure = *err;
          out.reason = err->message;
          return out;
        }
        auto& ex = std::get<extract::extraction>(read);
        out.title = std::move(ex.title);
        out.byline = std::move(ex.byline);
        out.published = std::move(ex.published);
        out.modified = std::move(ex.modified);
        out.comments = std::move(ex.comments);
        out.site_name = std::move(ex.site_name);
        out.lang = std::move(ex.lang);
        out.canonical_url = std::move(ex.canonical_url);
        out.excerpt = std::move(ex.excerpt);
        out.text = std::move(ex.text);
        break;
      }
      case extract::content_kind::text:
      case extract::content_kind::json: {
        // Labelled as text (a header or a file name) is not proof: random
        // bytes must not reach the model or a terminal. UTF-16 is decoded
        // first, so its NUL bytes do not count.
        auto decoded = extract::decode_document(bytes, content_type, detect);
        out.charset = std::move(decoded.charset);
        out.charset_note = std::move(decoded.note);
        const auto& text = decoded.text;
        if (extract::looks_binary(text)) {
          out.failure = sdk::make_error(sdk::errc::invalid_response, "binary data, not text");
          out.reason = "the document is binary data, not text";
          return out;
        }
        out.text = extract::clean_text(text);
        out.title = last_path_segment(url);
        break;
      }
      default: {
        auto type = media_type(content_type);
        out.failure = sdk::make_error(sdk::errc::invalid_response,
                                      "unsupported content type "
                                        + (type.empty() ? "(binary data)" : type));
        out.reason = "the response is not a web page, PDF or text ("
                     + (type.empty() ? std::string{"binary data"} : type) + ")";
        return out;
      }
    }
  }
  // The replacement rule (see max_replacement_share), on what the reader
  // would read.
  if (out.kind != extract::content_kind::pdf
      && fail_if_unreadable(out, replacement_share(out.title + "\n" + out.text)))
    return out;
  // The insufficient-content rule.
  auto trimmed = sdk::trim(out.text);
  if ((out.title.empty() && trimmed.empty()) || trimmed.size() < 50
      || sdk::to_lower(trimmed) == "loading...") {
    out.failure = sdk::make_error(sdk::errc::invalid_response, "too little readable text");
    out.reason = "response could not be parsed into readable text";
  }
  return out;
}

page read_fetched(const fetched& response, std::chrono::milliseconds pdf_time,
                  const extract::charset_detector& detect) {
  if (response.failure) {
    page out;
    out.url = response.url;
    out.final_url = response.final_url;
    out.failure = response.failure;
    out.reason = response.reason;
    return out;
  }
  auto type = sdk::find_header(response.headers, "content-type").value_or("");
  auto out = read_document(response.body, type, response.final_url, pdf_time, detect);
  out.url = response.url;
  out.final_url = response.final_url;
  return out;
}

} // namespace quarry::fetch
