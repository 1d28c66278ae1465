// Pure parts of the open_url tool (argument normalisation, snippet matching,
// windows, budget, messages).

#include "open_url_text.hpp"

#include "quarry/fetch/url.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

namespace quarry::plugins::open_url {

namespace {

std::string dump(const nlohmann::ordered_json& x, int indent = -1) {
  return x.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool is_zero_width(uint32_t cp) noexcept {
  return cp == 0x200b || cp == 0x200c || cp == 0x200d || cp == 0x2060 || cp == 0xfeff;
}

// Whether a code point counts as a word character for the matcher.
bool is_word(uint32_t cp) noexcept {
  if (cp < 0x80)
    return std::isalnum(static_cast<int>(cp)) != 0 || cp == '_';
  if (cp >= 0x80 && cp <= 0xbf)
    return cp == 0xaa || cp == 0xb5 || cp == 0xba;
  if (cp >= 0x2000 && cp <= 0x206f) // general punctuation
    return false;
  if (cp >= 0x3000 && cp <= 0x303f) // CJK punctuation
    return false;
  return cp != 0xfffd && cp != 0xd7 && cp != 0xf7;
}

// The normalised text and, per output byte, the original code point's range.
struct normalized {
  std::string text;
  std::vector<size_t> first;
  std::vector<size_t> last;
};

normalized normalize(std::string_view s, bool with_map) {
  normalized out;
  out.text.reserve(s.size());
  auto emit = [&](char c, size_t a, size_t b) {
    out.text += c;
    if (with_map) {
      out.first.push_back(a);
      out.last.push_back(b);
    }
  };
  for (size_t i = 0; i < s.size();) {
    auto [cp, len] = sdk::decode_utf8(s, i);
    auto a = i;
    i += len;
    if (is_zero_width(cp))
      continue;
    if (cp == 0x2018 || cp == 0x2019 || cp == '\'') {
      emit('\'', a, i);
      continue;
    }
    if (!is_word(cp)) {
      if (!out.text.empty() && out.text.back() != ' ')
        emit(' ', a, i);
      continue;
    }
    if (cp < 0x80) {
      emit(static_cast<char>(std::tolower(static_cast<int>(cp))), a, i);
      continue;
    }
    for (size_t k = a; k < i; ++k)
      emit(s[k], a, i);
  }
  if (!out.text.empty() && out.text.back() == ' ') {
    out.text.pop_back();
    if (with_map) {
      out.first.pop_back();
      out.last.pop_back();
    }
  }
  return out;
}

std::string decode_snippet_entities(std::string_view s) {
  static const std::pair<const char*, const char*> table[] = {{"&nbsp;", " "},
                                                              {"&#160;", " "},
                                                              {"&amp;", "&"},
                                                              {"&lt;", "<"},
                                                              {"&gt;", ">"},
                                                              {"&quot;", "\""},
                                                              {"&apos;", "'"},
                                                              {"&#39;", "'"},
                                                              {"&#x27;", "'"},
                                                              {"&ndash;", "\xE2\x80\x93"},
                                                              {"&mdash;", "\xE2\x80\x94"},
                                                              {"&hellip;", "\xE2\x80\xA6"},
                                                              {"&#xB0;", "\xC2\xB0"},
                                                              {"&#xBA;", "\xC2\xBA"},
                                                              {"&zwj;", ""}};
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    bool hit = false;
    if (s[i] == '&') {
      for (const auto& [from, to] : table) {
        std::string_view f{from};
        if (s.substr(i, f.size()) == f) {
          out += to;
          i += f.size();
          hit = true;
          break;
        }
      }
    }
    if (!hit)
      out += s[i++];
  }
  return out;
}

// Byte offset of code point number `n` (or the end).
size_t byte_offset(std::string_view s, size_t n) noexcept {
  size_t i = 0;
  while (n > 0 && i < s.size()) {
    i += sdk::decode_utf8(s, i).length;
    --n;
  }
  return i;
}

} // namespace

std::string url_key(std::string_view url) {
  auto parsed = fetch::parse_url(url);
  auto* u = std::get_if<fetch::url>(&parsed);
  if (u == nullptr)
    return std::string{url.substr(0, url.find('#'))};
  auto host = u->host.find(':') != std::string::npos ? "[" + u->host + "]" : u->host;
  // libcurl writes an empty path as `/`; the key keeps it empty, as search
  // results write it, so that a page keeps its document id across tools.
  auto path = u->path_and_query();
  if (u->path == "/" && !sdk::ends_with(url.substr(0, url.find_first_of("?#")), "/"))
    path.erase(0, 1);
  return u->scheme + "://" + host + (u->port.empty() ? "" : ":" + u->port) + path;
}

std::optional<url_list> normalize_urls(const nlohmann::json& arguments, size_t max_urls) {
  if (!arguments.is_object())
    return std::nullopt;
  auto i = arguments.find("urls");
  if (i == arguments.end())
    return std::nullopt;
  nlohmann::json items;
  if (i->is_string()) {
    auto text = std::string{sdk::trim(i->get<std::string>())};
    // A stringified array, as some models send it.
    if (!text.empty() && text.front() == '[') {
      auto parsed = sdk::parse_json(text);
      if (parsed.is_array())
        items = std::move(parsed);
    }
    if (items.is_null())
      items = nlohmann::json::array({text});
  } else if (i->is_array()) {
    items = *i;
  } else {
    return std::nullopt;
  }
  url_list out;
  std::set<std::string> seen_exact;
  std::set<std::string> seen_key;
  for (const auto& item : items) {
    auto text = std::string{sdk::trim(item.is_string() ? item.get<std::string>() : dump(item))};
    if (text.empty() || item.is_null())
      continue;
    if (!seen_exact.insert(text).second || !seen_key.insert(url_key(text)).second)
      continue;
    if (out.urls.size() == max_urls) {
      ++out.dropped;
      continue;
    }
    out.urls.push_back(std::move(text));
  }
  return out;
}

std::string missing_urls_message() {
  return "The open_url tool requires a 'urls' parameter containing an array "
         "of URLs to open. Example: {\"urls\": [\"https://example.com\"]}";
}

size_t count_chars(std::string_view text) noexcept {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); i += sdk::decode_utf8(text, i).length)
    ++n;
  return n;
}

std::string_view cut_chars(std::string_view text, size_t max_chars) noexcept {
  return text.substr(0, byte_offset(text, max_chars));
}

std::optional<std::pair<size_t, size_t>> find_snippet(std::string_view content,
                                                      std::string_view snippet) {
  auto needle = normalize(decode_snippet_entities(snippet), false).text;
  if (needle.empty() || content.empty())
    return std::nullopt;
  auto hay = normalize(content, true);
  if (hay.text.empty())
    return std::nullopt;
  if (auto pos = hay.text.find(needle); pos != std::string::npos)
    return std::pair{hay.first[pos], hay.last[pos + needle.size() - 1]};
  // Approximate: the window of content words with the most snippet words.
  auto split = [](std::string_view s) {
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      auto end = s.find(' ', i);
      if (end == std::string_view::npos)
        end = s.size();
      if (end > i)
        words.emplace_back(i, end);
      i = end + 1;
    }
    return words;
  };
  auto want_words = split(needle);
  auto have_words = split(hay.text);
  auto m = want_words.size();
  if (m == 0 || have_words.empty())
    return std::nullopt;
  std::string_view hv{hay.text};
  std::string_view nv{needle};
  std::unordered_map<std::string_view, int> need;
  for (auto [a, b] : want_words)
    ++need[nv.substr(a, b - a)];
  std::unordered_map<std::string_view, int> have;
  size_t matched = 0;
  size_t best = 0;
  size_t best_end = 0;
  for (size_t k = 0; k < have_words.size(); ++k) {
    auto w = hv.substr(have_words[k].first, have_words[k].second - have_words[k].first);
    if (auto it = need.find(w); it != need.end() && have[w]++ < it->second)
      ++matched;
    if (k >= m) {
      auto old = hv.substr(have_words[k - m].first,
                           have_words[k - m].second - have_words[k - m].first);
      if (auto it = need.find(old); it != need.end() && --have[old] < it->second)
        --matched;
    }
    if (matched > best) {
      best = matched;
      best_end = k;
    }
  }
  if (best * 5 < m * 4)
    return std::nullopt;
  auto first_word = best_end + 1 >= m ? best_end + 1 - m : 0;
  auto a = have_words[first_word].first;
  auto b = have_words[best_end].second;
  return std::pair{hay.first[a], hay.last[b - 1]};
}

std::string window_text(std::string_view content, std::string_view snippet, size_t window_chars) {
  // Character counts of pieces of invalid UTF-8 do not add up (a bad lead
  // byte may claim bytes across a cut): work on repaired text.
  if (!sdk::is_valid_utf8(content) || !sdk::is_valid_utf8(snippet))
    return window_text(sdk::repair_utf8(content), sdk::repair_utf8(snippet), window_chars);
  auto n = count_chars(content);
  if (n <= window_chars)
    return std::string{content};
  std::optional<std::pair<size_t, size_t>> span;
  if (!snippet.empty())
    span = find_snippet(content, snippet);
  if (!span)
    return std::string{cut_chars(content, window_chars)} + " [...truncated]";
  auto s = count_chars(content.substr(0, span->first));
  auto e = s + count_chars(content.substr(span->first, span->second - span->first));
  size_t ws = s;
  size_t we = e;
  if (e - s < window_chars) {
    auto pad = window_chars - (e - s);
    auto before = pad / 2;
    auto after = pad - before;
    if (before > s) {
      after += before - s;
      before = s;
    }
    ws = s - before;
    we = e + after;
    if (we > n) {
      auto over = we - n;
      we = n;
      ws = ws > over ? ws - over : 0;
    }
  }
  auto a = byte_offset(content, ws);
  auto b = a + byte_offset(content.substr(a), we - ws);
  std::string out;
  if (ws > 0)
    out += "[...truncated] ";
  out.append(content.substr(a, b - a));
  if (we < n)
    out += " [...truncated]";
  return out;
}

std::pair<std::string, size_t>
format_sections(const std::vector<section>& sections,
                const std::vector<std::pair<std::string, std::string>>& failures,
                const std::string& note, size_t budget_chars, int first_document) {
  auto results = nlohmann::ordered_json::array();
  size_t total = 0;
  size_t included = 0;
  int n = first_document;
  for (const auto& sec : sections) {
    auto number = std::to_string(n);
    auto meta = number.size() + count_chars(sec.title) + count_chars(sec.updated_at)
                + count_chars(sec.url) + count_chars(sec.note);
    if (total + meta + 200 > budget_chars)
      break;
    auto remaining = budget_chars - total - meta;
    auto content = cut_chars(sec.content, remaining);
    nlohmann::ordered_json obj;
    obj["document"] = n++;
    obj["title"] = sec.title;
    if (!sec.updated_at.empty())
      obj["updated_at"] = sec.updated_at;
    if (!sec.url.empty())
      obj["url"] = sec.url;
    if (!sec.note.empty())
      obj["note"] = sec.note;
    obj["content"] = std::string{content};
    results.push_back(std::move(obj));
    total += meta + count_chars(content);
    ++included;
  }
  nlohmann::ordered_json root;
  root["results"] = std::move(results);
  if (!failures.empty()) {
    auto arr = nlohmann::ordered_json::array();
    for (const auto& [url, reason] : failures)
      arr.push_back({{"url", url}, {"reason", reason}});
    root["failed"] = std::move(arr);
  }
  if (!note.empty())
    root["note"] = note;
  return {dump(root, 2), included};
}

std::string dropped_note(size_t opened, size_t dropped) {
  auto total = opened + dropped;
  return "Only the first " + std::to_string(opened) + " of " + std::to_string(total)
         + " URLs were opened (open_url opens at most " + std::to_string(opened)
         + " per call); the other " + std::to_string(dropped) + (dropped == 1 ? " was" : " were")
         + " not tried: call open_url again with " + (dropped == 1 ? "it." : "them.");
}

std::string failure_message(std::vector<std::string> missing_documents,
                            std::vector<std::pair<std::string, std::string>> failed_urls) {
  std::sort(missing_documents.begin(), missing_documents.end());
  missing_documents.erase(std::unique(missing_documents.begin(), missing_documents.end()),
                          missing_documents.end());
  // Sorted by URL, the first reason of each URL kept.
  std::map<std::string, std::string> urls;
  for (auto& [url, reason] : failed_urls)
    if (!url.empty())
      urls.emplace(url, reason);
  std::string docs_part;
  for (const auto& id : missing_documents)
    if (!id.empty())
      docs_part += (docs_part.empty() ? "documents " : ", ") + id;
  std::string urls_part;
  for (const auto& [url, reason] : urls) {
    urls_part += urls_part.empty() ? "URLs " : ", ";
    urls_part += reason.empty() ? url : url + " (" + reason + ")";
  }
  if (docs_part.empty() && urls_part.empty())
    return "Failed to fetch content from the requested resources.";
  std::string out = "Failed to fetch content from ";
  out += docs_part;
  if (!docs_part.empty() && !urls_part.empty())
    out += " and ";
  out += urls_part;
  return out;
}

} // namespace quarry::plugins::open_url
