// Shared pieces of the `web_search` tool plugins: normalisation, cleaning,
// interleaving and the LLM-facing texts.

#include "web_search_common.hpp"

#include "quarry/sdk/tool.hpp"

#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>
#include <stdexcept>

namespace quarry::plugins::web_search_common {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Folds whitespace runs to one space and trims.
std::string fold_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending = false;
  for (char c : text) {
    if (is_space(c)) {
      pending = !out.empty();
      continue;
    }
    if (pending)
      out += ' ';
    pending = false;
    out += c;
  }
  return out;
}

// A NUL, surrogate or out-of-range character reference becomes U+FFFD.
void append_utf8(std::string& out, uint32_t cp) {
  sdk::append_utf8(out, cp == 0 ? 0xFFFD : cp);
}

// The named references search snippets actually use.
const std::pair<std::string_view, uint32_t> named_entities[] = {
  {"amp", '&'},      {"lt", '<'},       {"gt", '>'},       {"quot", '"'},      {"apos", '\''},
  {"nbsp", 0xA0},    {"ndash", 0x2013}, {"mdash", 0x2014}, {"hellip", 0x2026}, {"lsquo", 0x2018},
  {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D}, {"laquo", 0xAB},    {"raquo", 0xBB},
  {"copy", 0xA9},    {"reg", 0xAE},     {"trade", 0x2122}, {"middot", 0xB7},   {"bull", 0x2022},
  {"deg", 0xB0},     {"euro", 0x20AC},  {"pound", 0xA3},   {"eacute", 0xE9},   {"egrave", 0xE8},
  {"aacute", 0xE1},  {"agrave", 0xE0},  {"ouml", 0xF6},    {"uuml", 0xFC},     {"auml", 0xE4},
  {"szlig", 0xDF},   {"times", 0xD7},
};

bool is_inline_tag(const std::string& name) {
  static const std::set<std::string> names{
    "a", "abbr", "b",    "bdi",   "bdo",  "cite",   "code", "em",  "font", "i", "kbd", "mark",
    "q", "s",    "samp", "small", "span", "strong", "sub",  "sup", "time", "u", "var", "wbr"};
  return names.count(name) > 0;
}

std::string json_to_text(const nlohmann::json& x) {
  if (x.is_string())
    return x.get<std::string>();
  if (x.is_boolean())
    return x.get<bool>() ? "True" : "False";
  return sdk::dump_json(x);
}

} // namespace

std::string normalize_query(std::string_view text) {
  std::string kept;
  kept.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 32 || u == 127)
      continue;
    kept += c;
  }
  auto q = fold_spaces(kept);
  if (q.size() <= max_query_size)
    return q;
  auto cut = max_query_size;
  // Not inside a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(q[cut]) & 0xC0) == 0x80)
    --cut;
  // At a word boundary when one is in the second half.
  if (auto space = q.rfind(' ', cut); space != std::string::npos && space >= max_query_size / 2)
    cut = space;
  q.resize(cut);
  while (!q.empty() && q.back() == ' ')
    q.pop_back();
  return q;
}

std::vector<std::string> normalize_queries(const nlohmann::json& value) {
  std::vector<std::string> raw;
  if (value.is_string()) {
    raw.push_back(value.get<std::string>());
  } else if (value.is_array()) {
    for (const auto& item : value)
      if (!item.is_null())
        raw.push_back(json_to_text(item));
  }
  return sdk::distinct_queries(
    raw, [](const std::string& x) { return normalize_query(x); }, sdk::max_search_queries);
}

bool is_tracking_parameter(std::string_view name) {
  auto x = sdk::to_lower(name);
  if (x.rfind("utm_", 0) == 0)
    return true;
  static const std::set<std::string> names{
    "fbclid",      "gclid",      "dclid",     "gbraid",     "wbraid", "msclkid",
    "yclid",       "mc_cid",     "mc_eid",    "igshid",     "_ga",    "_gl",
    "twclid",      "ttclid",     "li_fat_id", "mkt_tok",    "_hsenc", "_hsmi",
    "oly_anon_id", "oly_enc_id", "vero_id",   "rb_clickid", "s_cid"};
  return names.count(x) > 0;
}

std::string clean_url(std::string_view url) {
  auto hash = url.find('#');
  if (hash != std::string_view::npos)
    url = url.substr(0, hash);
  auto qm = url.find('?');
  if (qm == std::string_view::npos)
    return std::string{url};
  std::string out{url.substr(0, qm)};
  auto query = url.substr(qm + 1);
  std::string kept;
  size_t pos = 0;
  while (pos <= query.size()) {
    auto amp = query.find('&', pos);
    if (amp == std::string_view::npos)
      amp = query.size();
    auto part = query.substr(pos, amp - pos);
    auto name = part.substr(0, part.find('='));
    if (!part.empty() && !is_tracking_parameter(name)) {
      if (!kept.empty())
        kept += '&';
      kept += part;
    }
    pos = amp + 1;
  }
  if (!kept.empty()) {
    out += '?';
    out += kept;
  }
  return out;
}

std::string decode_entities(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '&') {
      out += c;
      ++i;
      continue;
    }
    auto semi = text.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += c;
      ++i;
      continue;
    }
    auto ref = text.substr(i + 1, semi - i - 1);
    bool done = false;
    if (ref.size() >= 2 && ref[0] == '#') {
      bool hex = ref[1] == 'x' || ref[1] == 'X';
      auto digits = ref.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      bool ok = !digits.empty();
      for (char d : digits) {
        uint32_t v;
        if (d >= '0' && d <= '9')
          v = static_cast<uint32_t>(d - '0');
        else if (hex && d >= 'a' && d <= 'f')
          v = static_cast<uint32_t>(d - 'a' + 10);
        else if (hex && d >= 'A' && d <= 'F')
          v = static_cast<uint32_t>(d - 'A' + 10);
        else {
          ok = false;
          break;
        }
        cp = cp * (hex ? 16 : 10) + v;
        if (cp > 0x10FFFF)
          cp = 0x110000; // stays out of range
      }
      if (ok) {
        append_utf8(out, cp);
        done = true;
      }
    } else {
      for (const auto& [name, cp] : named_entities) {
        if (name == ref) {
          append_utf8(out, cp);
          done = true;
          break;
        }
      }
    }
    if (done) {
      i = semi + 1;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string clean_text(std::string_view html) {
  std::string stripped;
  stripped.reserve(html.size());
  size_t i = 0;
  while (i < html.size()) {
    char c = html[i];
    if (c == '<' && i + 1 < html.size()) {
      char n = html[i + 1];
      bool tag = (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || n == '/' || n == '!';
      auto close = html.find('>', i + 1);
      if (tag && close != std::string_view::npos) {
        // Inline tags (highlights such as <strong>) vanish; others separate
        // words.
        size_t k = i + 1 + (n == '/' ? 1 : 0);
        size_t end = k;
        while (end < close && std::isalnum(static_cast<unsigned char>(html[end])))
          ++end;
        if (!is_inline_tag(sdk::to_lower(html.substr(k, end - k))))
          stripped += ' ';
        i = close + 1;
        continue;
      }
    }
    stripped += c;
    ++i;
  }
  auto decoded = decode_entities(stripped);
  // Non-breaking spaces (U+00A0) become plain spaces.
  std::string plain;
  plain.reserve(decoded.size());
  for (size_t j = 0; j < decoded.size(); ++j) {
    if (static_cast<unsigned char>(decoded[j]) == 0xC2 && j + 1 < decoded.size()
        && static_cast<unsigned char>(decoded[j + 1]) == 0xA0) {
      plain += ' ';
      ++j;
    } else {
      plain += decoded[j];
    }
  }
  return fold_spaces(plain);
}

std::optional<search_result> make_result(std::string_view title, std::string_view url,
                                         std::string_view snippet,
                                         std::optional<std::string> published) {
  search_result r;
  r.title = clean_text(title);
  r.url = clean_url(fold_spaces(url));
  r.snippet = clean_text(snippet);
  if (r.url.empty() || (r.title.empty() && r.snippet.empty()))
    return std::nullopt;
  if (published && !published->empty())
    r.published = std::move(published);
  return r;
}

std::string string_field(const nlohmann::json& obj, const char* key) {
  auto i = obj.find(key);
  if (i != obj.end() && i->is_string())
    return i->get<std::string>();
  return {};
}

nlohmann::json parse_object(std::string_view body, std::string_view service, parse_result& out,
                            std::string_view hint) {
  auto j = sdk::parse_json(body);
  if (j.is_object())
    return j;
  out.failure = sdk::make_error(sdk::errc::invalid_response,
                                std::string{service}
                                  + " returned a body that is not a JSON "
                                    "object"
                                  + std::string{hint});
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

const nlohmann::json* array_member(const nlohmann::json& obj, const char* key,
                                   std::string_view service, parse_result& out, bool required) {
  if (obj.is_object())
    if (auto i = obj.find(key); i != obj.end() && i->is_array())
      return &*i;
  if (required && !out.failure)
    out.failure = sdk::make_error(sdk::errc::invalid_response,
                                  std::string{service} + " returned no '" + key + "' array");
  return nullptr;
}

void append_results(const nlohmann::json& items, const result_fields& fields,
                    std::vector<search_result>& out, size_t limit) {
  for (const auto& item : items) {
    if (out.size() >= limit)
      break;
    if (!item.is_object())
      continue;
    std::optional<std::string> published;
    if (auto date = string_field(item, fields.published); !date.empty())
      published = date;
    if (auto r = make_result(string_field(item, fields.title), string_field(item, fields.url),
                             string_field(item, fields.snippet), published))
      out.push_back(std::move(*r));
  }
}

std::string missing_queries_message() {
  return "The web_search tool requires a 'queries' parameter containing an "
         "array of search queries. Example: "
         "{\"queries\": [\"your search query here\"]}";
}

std::string empty_queries_message() {
  return "No valid search queries were provided: all queries were empty or "
         "contained only whitespace. Please provide at least one query with "
         "actual search terms.";
}

namespace {

// Whether `x` starts with `prefix`, ASCII case-insensitively.
bool starts_with_nocase(std::string_view x, std::string_view prefix) {
  if (x.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (sdk::ascii_lower(x[i]) != prefix[i])
      return false;
  return true;
}

// Where the end tag `</name` (ASCII case-insensitive) starts at or after
// `from`, or npos.
size_t find_end_tag(std::string_view html, size_t from, std::string_view name) {
  for (auto pos = html.find("</", from); pos != std::string_view::npos;
       pos = html.find("</", pos + 2))
    if (starts_with_nocase(html.substr(pos + 2), name))
      return pos;
  return std::string_view::npos;
}

// Elements whose content is no text a reader sees.
bool is_hidden_element(const std::string& name) {
  return name == "script" || name == "style" || name == "template" || name == "svg"
         || name == "noscript" || name == "iframe" || name == "object" || name == "math";
}

// Text for one line: control characters gone, blanks folded, trimmed.
std::string one_line(std::string_view text) {
  std::string cleaned = sdk::strip_terminal_controls(text);
  for (auto& c : cleaned)
    if (c == '\n' || c == '\t')
      c = ' ';
  return fold_spaces(cleaned);
}

// `text` cut to at most `max_size` bytes at a character, with "..." where
// it was cut.
std::string bounded(std::string text, size_t max_size) {
  if (text.size() <= max_size)
    return text;
  if (max_size < 3)
    return std::string{sdk::utf8_prefix(text, max_size)};
  std::string out{sdk::utf8_prefix(text, max_size - 3)};
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out + "...";
}

} // namespace

bool is_html_body(const sdk::http_headers& headers, std::string_view body) {
  auto type = sdk::to_lower(sdk::trim(sdk::find_header(headers, "content-type").value_or("")));
  if (sdk::starts_with(type, "text/html") || sdk::starts_with(type, "application/xhtml+xml"))
    return true;
  auto head = body.substr(0, 1024);
  if (sdk::starts_with(head, "\xEF\xBB\xBF"))
    head.remove_prefix(3);
  head = sdk::trim(head);
  for (auto opener : {"<!doctype html", "<html", "<head", "<body", "<title"})
    if (starts_with_nocase(head, opener))
      return true;
  return false;
}

std::string html_error_text(std::string_view html, size_t max_size) {
  html = html.substr(0, max_error_scan);
  std::string title;
  bool title_seen = false;
  std::vector<std::string> blocks;
  std::string block;
  // Enough text for the answer: the rest of the page is not read.
  size_t collected = 0;
  // Entities decoded, no-break spaces (U+00A0) made plain, blanks folded.
  auto plain_text = [](std::string_view raw) {
    auto decoded = decode_entities(raw);
    std::string out;
    out.reserve(decoded.size());
    for (size_t j = 0; j < decoded.size(); ++j) {
      if (decoded[j] == '\xC2' && j + 1 < decoded.size() && decoded[j + 1] == '\xA0') {
        out += ' ';
        ++j;
      } else {
        out += decoded[j];
      }
    }
    return fold_spaces(out);
  };
  auto end_block = [&] {
    auto text = plain_text(block);
    block.clear();
    if (!text.empty()) {
      collected += text.size();
      blocks.push_back(std::move(text));
    }
  };
  size_t i = 0;
  while (i < html.size() && collected < 2 * max_size) {
    char c = html[i];
    if (c != '<') {
      block += c;
      ++i;
      continue;
    }
    auto rest = html.substr(i);
    if (sdk::starts_with(rest, "<!--")) {
      auto end = html.find("-->", i + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    size_t k = i + 1;
    bool closing = k < html.size() && html[k] == '/';
    if (closing)
      ++k;
    size_t name_end = k;
    while (name_end < html.size() && std::isalnum(static_cast<unsigned char>(html[name_end])))
      ++name_end;
    bool is_tag = name_end > k || (k < html.size() && (html[k] == '!' || html[k] == '?'));
    auto close = html.find('>', i + 1);
    if (!is_tag) {
      block += c; // a lone `<` is text
      ++i;
      continue;
    }
    if (close == std::string_view::npos)
      break; // a tag cut by the end: no more text
    auto name = sdk::to_lower(html.substr(k, name_end - k));
    i = close + 1;
    if (closing) {
      if (!is_inline_tag(name))
        end_block();
      continue;
    }
    if (name == "title" || is_hidden_element(name)) {
      auto end = find_end_tag(html, i, name);
      auto content = html.substr(i,
                                 end == std::string_view::npos ? std::string_view::npos : end - i);
      if (name == "title" && !title_seen) {
        title_seen = true;
        title = plain_text(content);
      }
      if (end == std::string_view::npos)
        break;
      auto after = html.find('>', end);
      i = after == std::string_view::npos ? html.size() : after + 1;
      continue;
    }
    if (!is_inline_tag(name))
      end_block();
  }
  end_block();
  auto lower_title = sdk::to_lower(title);
  std::string out = title;
  for (auto& text : blocks) {
    auto lower = sdk::to_lower(text);
    // What the title already says (an <h1> repeating it).
    if (!lower_title.empty() && lower_title.find(lower) != std::string::npos)
      continue;
    if (out.empty())
      out = text;
    else if (out.size() == title.size() && !title.empty())
      out += ": " + text;
    else if (std::string_view{".!?:;"}.find(out.back()) != std::string_view::npos)
      out += " " + text;
    else
      out += ". " + text;
    if (out.size() > 2 * max_size)
      break;
  }
  return bounded(one_line(out), max_size);
}

std::string error_text(const sdk::http_headers& headers, std::string_view body, size_t max_size) {
  auto trimmed = sdk::trim(body.substr(0, 16));
  bool json_like = !trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[');
  if (!json_like && is_html_body(headers, body))
    return html_error_text(body, max_size);
  return bounded(sdk::http_error_message(body.substr(0, max_error_scan), max_size), max_size);
}

void explain(sdk::error& err, const error_advice& advice) {
  std::string service = advice.service != nullptr ? advice.service : "the search service";
  auto text = std::move(err.message);
  auto status = std::to_string(err.http_status);
  const char* what = nullptr;
  const char* remedy = nullptr;
  switch (err.code) {
    case sdk::errc::auth:
      what = "the request is not authorised";
      remedy = advice.auth;
      break;
    case sdk::errc::quota:
      what = "the plan's quota or credits are used up";
      remedy = advice.quota;
      break;
    case sdk::errc::rate_limited:
      what = "too many requests";
      remedy = advice.rate_limited;
      break;
    default:
      break;
  }
  if (what == nullptr) {
    err.message = service + " answered HTTP " + status;
    if (!text.empty())
      err.message += ": " + text;
    return;
  }
  err.message = service + " refused the request: " + what + " (HTTP " + status
                + (text.empty() ? std::string{} : ": " + text) + ").";
  if (remedy != nullptr) {
    err.message += ' ';
    err.message += remedy;
  }
}

std::string all_failed_message(const std::vector<std::pair<std::string, std::string>>& failures) {
  nlohmann::ordered_json obj = nlohmann::ordered_json::object();
  // The first query that failed with each error.
  std::vector<std::pair<const std::string*, const std::string*>> said;
  for (const auto& [query, err] : failures) {
    auto same = std::find_if(said.begin(), said.end(),
                             [&err = err](const auto& x) { return *x.second == err; });
    if (same != said.end()) {
      obj[query] = "the same error as for \"" + *same->first + "\"";
      continue;
    }
    said.emplace_back(&query, &err);
    obj[query] = err;
  }
  return "All web search queries failed. Query failures:\n" + sdk::dump_json(obj, 2);
}

std::string no_results_message() {
  return "The web search returned no results. Try rephrasing the query or "
         "using different search terms.";
}

std::string tool_description() {
  return "Search the web for information. Returns a list of search results "
         "with titles, metadata, and snippets.";
}

nlohmann::json tool_parameters() {
  return {
    {"type", "object"},
    {"properties",
     {{"queries",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"description", "One or more queries to look up on the web. Must "
                        "contain only printable characters"}}}}},
    {"required", {"queries"}},
  };
}

std::string string_option(const nlohmann::json& config, std::string_view key, std::string fallback,
                          std::string_view plugin) {
  auto i = config.find(std::string{key});
  if (i == config.end() || i->is_null())
    return fallback;
  if (!i->is_string())
    throw std::invalid_argument(std::string{plugin} + ": '" + std::string{key}
                                + "' must be a string");
  return i->get<std::string>();
}

common_config parse_common_config(const nlohmann::json& config, std::string_view plugin,
                                  std::string default_base_url, bool api_key_required,
                                  const std::vector<std::string>& extra_keys) {
  std::string p{plugin};
  if (!config.is_object() && !config.is_null())
    throw std::invalid_argument(p + ": the configuration must be a mapping");
  common_config cfg;
  if (config.is_null())
    return parse_common_config(nlohmann::json::object(), plugin, std::move(default_base_url),
                               api_key_required, extra_keys);
  for (const auto& [key, value] : config.items()) {
    static const std::set<std::string> known{"api_key", "base_url", "max_results", "timeout"};
    if (known.count(key) == 0
        && std::find(extra_keys.begin(), extra_keys.end(), key) == extra_keys.end())
      throw std::invalid_argument(p + ": unknown configuration key '" + key + "'");
  }
  cfg.api_key = string_option(config, "api_key", "", plugin);
  if (api_key_required && cfg.api_key.empty())
    throw std::invalid_argument(p + ": 'api_key' is required");
  cfg.base_url = string_option(config, "base_url", default_base_url, plugin);
  while (!cfg.base_url.empty() && cfg.base_url.back() == '/')
    cfg.base_url.pop_back();
  if (cfg.base_url.rfind("http://", 0) != 0 && cfg.base_url.rfind("https://", 0) != 0)
    throw std::invalid_argument(p + ": 'base_url' must be an http or https URL");
  if (auto i = config.find("max_results"); i != config.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 1
        || i->get<int64_t>() > static_cast<int64_t>(max_results_cap))
      throw std::invalid_argument(p
                                  + ": 'max_results' must be an integer "
                                    "from 1 to 20");
    cfg.max_results = static_cast<size_t>(i->get<int64_t>());
  }
  // A number of seconds: bounds each search request. (The tool actor's
  // limit on a whole run is Quarry's `limits.timeout`, never seen here.)
  if (auto i = config.find("timeout"); i != config.end()) {
    if (!i->is_number() || !(i->get<double>() > 0) || i->get<double>() > 3600)
      throw std::invalid_argument(p
                                  + ": 'timeout' must be a number of "
                                    "seconds greater than 0 (the limit on "
                                    "a whole run is `limits.timeout`)");
    cfg.timeout = std::chrono::milliseconds{
      static_cast<int64_t>(std::llround(i->get<double>() * 1000))};
  }
  return cfg;
}

common_config parse_backend_config(const nlohmann::json& config, std::string_view plugin,
                                   std::string default_base_url, bool api_key_required,
                                   std::initializer_list<string_setting> settings) {
  std::vector<std::string> keys;
  for (const auto& s : settings)
    keys.emplace_back(s.key);
  auto common = parse_common_config(config, plugin, std::move(default_base_url), api_key_required,
                                    keys);
  for (const auto& s : settings)
    *s.target = config.is_object() ? string_option(config, s.key, s.fallback, plugin)
                                   : std::string{s.fallback};
  return common;
}

void require_one_of(const std::string& value, std::initializer_list<std::string_view> allowed,
                    bool empty_ok, const char* message) {
  if (empty_ok && value.empty())
    return;
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    throw std::invalid_argument(message);
}

void append_query(std::string& url,
                  std::initializer_list<std::pair<const char*, std::string_view>> params) {
  for (const auto& [key, value] : params)
    if (!value.empty())
      url += std::string{"&"} + key + "=" + url_encode(value);
}

sdk::http_request json_post(std::string url, std::pair<std::string, std::string> auth,
                            const nlohmann::ordered_json& body) {
  sdk::http_request req;
  req.method = "POST";
  req.url = std::move(url);
  req.headers = {
    std::move(auth), {"Content-Type", "application/json"}, {"Accept", "application/json"}};
  req.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return req;
}

void set_unless_empty(nlohmann::ordered_json& body, const char* key, const std::string& value) {
  if (!value.empty())
    body[key] = value;
}

} // namespace quarry::plugins::web_search_common
