// What an MCP tool's answer becomes (mcp_results.hpp).

#include "mcp_results.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/search.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <set>
#include <utility>
#include <vector>

namespace quarry::plugins::mcp {

namespace {

using nlohmann::json;

// The first string member of `obj` among `keys`, else empty.
std::string first_string(const json& obj, std::initializer_list<const char*> keys) {
  if (!obj.is_object())
    return {};
  for (const auto* key : keys)
    if (auto i = obj.find(key); i != obj.end() && i->is_string() && !i->get<std::string>().empty())
      return sdk::repair_utf8(i->get<std::string>());
  return {};
}

bool is_web(const std::string& url) {
  return sdk::starts_with(url, "http://") || sdk::starts_with(url, "https://");
}

sdk::source_kind kind_of(const std::string& url) {
  if (is_web(url))
    return sdk::source_kind::web;
  if (sdk::starts_with(url, "file://") || sdk::starts_with(url, "/"))
    return sdk::source_kind::file;
  return sdk::source_kind::internal;
}

// The last part of a path or URL, for a document without a title.
std::string last_part(const std::string& url) {
  auto end = url.find_last_not_of('/');
  if (end == std::string::npos)
    return url;
  auto start = url.rfind('/', end);
  return url.substr(start == std::string::npos ? 0 : start + 1,
                    end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// A `# heading` on the first non-blank line of `text`, else empty.
std::string heading_of(std::string_view text) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = sdk::trim(text.substr(0, nl));
    if (!line.empty()) {
      if (line.size() > 2 && line[0] == '#') {
        auto h = line.find_first_not_of('#');
        if (h != std::string_view::npos && line[h] == ' ')
          return std::string{sdk::trim(line.substr(h))};
      }
      return {};
    }
    if (nl == std::string_view::npos)
      break;
    text.remove_prefix(nl + 1);
  }
  return {};
}

// The search results in a JSON value: an array of result objects, or an
// object holding one under a usual key.
const json* result_array(const json& x) {
  if (x.is_array())
    return &x;
  if (!x.is_object())
    return nullptr;
  for (const auto* key : {"results", "documents", "items", "hits"})
    if (auto i = x.find(key); i != x.end() && i->is_array())
      return &*i;
  return nullptr;
}

std::vector<sdk::search_result> read_results(const json& items) {
  std::vector<sdk::search_result> out;
  for (const auto& item : items) {
    auto url = first_string(item, {"url", "link", "uri", "href", "path"});
    if (url.empty())
      continue;
    sdk::search_result r;
    r.url = std::move(url);
    r.title = first_string(item, {"title", "name"});
    if (r.title.empty())
      r.title = last_part(r.url);
    r.snippet = first_string(item, {"snippet", "content", "text", "description", "summary"});
    auto published = first_string(item, {"published", "publishedDate", "published_date", "date"});
    if (!published.empty())
      r.published = std::move(published);
    out.push_back(std::move(r));
  }
  return out;
}

// What the content blocks hold.
struct blocks {
  // The model's text: text blocks, and notes on what was left out.
  std::string text;
  // Text blocks alone.
  std::vector<std::string> texts;
  // Resource links and embedded text resources, as results.
  std::vector<sdk::search_result> links;
  // Embedded text resources (uri, title, text).
  std::vector<sdk::search_result> embedded;
};

void append(std::string& text, std::string_view part) {
  if (!text.empty())
    text += "\n\n";
  text += part;
}

blocks read_blocks(const json& content) {
  blocks out;
  if (!content.is_array())
    return out;
  for (const auto& block : content) {
    auto type = first_string(block, {"type"});
    if (type == "text") {
      auto t = first_string(block, {"text"});
      append(out.text, t);
      out.texts.push_back(std::move(t));
    } else if (type == "image" || type == "audio") {
      auto mime = first_string(block, {"mimeType"});
      append(out.text, "[" + std::string{type == "image" ? "an image" : "audio"}
                         + (mime.empty() ? "" : " (" + mime + ")") + " was left out]");
    } else if (type == "resource_link") {
      sdk::search_result r;
      r.url = first_string(block, {"uri"});
      if (r.url.empty())
        continue;
      r.title = first_string(block, {"title", "name"});
      if (r.title.empty())
        r.title = last_part(r.url);
      r.snippet = first_string(block, {"description"});
      append(out.text,
             "Link: " + r.title + " <" + r.url + ">" + (r.snippet.empty() ? "" : "\n" + r.snippet));
      out.links.push_back(std::move(r));
    } else if (type == "resource") {
      const auto& res = block.contains("resource") ? block["resource"] : json{};
      sdk::search_result r;
      r.url = first_string(res, {"uri"});
      auto text = first_string(res, {"text"});
      if (text.empty()) {
        append(out.text,
               "[a binary resource" + (r.url.empty() ? "" : " <" + r.url + ">") + " was left out]");
        continue;
      }
      if (r.url.empty()) {
        append(out.text, text);
        out.texts.push_back(std::move(text));
        continue;
      }
      r.title = first_string(res, {"title", "name"});
      if (r.title.empty())
        r.title = heading_of(text);
      if (r.title.empty())
        r.title = last_part(r.url);
      r.snippet = std::move(text);
      append(out.text, r.snippet);
      out.links.push_back(r);
      out.embedded.push_back(std::move(r));
    }
  }
  return out;
}

// Numbered documents as the model reads a search's or a page reader's.
std::string documents_json(const std::vector<sdk::document>& docs, bool read, size_t max_bytes) {
  // Each document's text gets an equal share of the budget.
  auto share = docs.empty() ? max_bytes : std::max<size_t>(512, max_bytes / docs.size());
  auto arr = nlohmann::ordered_json::array();
  int n = 1;
  for (const auto& d : docs) {
    nlohmann::ordered_json obj;
    obj["document"] = n++;
    obj["title"] = d.title;
    if (d.published)
      obj["updated_at"] = *d.published;
    obj["url"] = d.url;
    const auto& text = read ? d.content : d.snippet;
    obj["content"] = text.size() > share ? cut_output(text, share) : text;
    arr.push_back(std::move(obj));
  }
  nlohmann::ordered_json root;
  root["results"] = std::move(arr);
  return root.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string argument_address(const json& arguments) {
  auto one = first_string(arguments, {"url", "uri", "path", "file"});
  if (!one.empty())
    return one;
  if (!arguments.is_object())
    return {};
  for (const auto* key : {"urls", "uris", "paths"})
    if (auto i = arguments.find(key);
        i != arguments.end() && i->is_array() && !i->empty() && i->front().is_string())
      return sdk::repair_utf8(i->front().get<std::string>());
  return {};
}

} // namespace

std::string cut_output(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes)
    return text;
  auto total = text.size();
  auto kept = sdk::utf8_prefix(text, max_bytes).size();
  text.resize(kept);
  text += "\n[... cut: the answer had " + std::to_string(total) + " bytes; the first "
          + std::to_string(kept) + " are shown]";
  return text;
}

sdk::tool_result convert_result(const json& result, const json& arguments,
                                const result_options& options) {
  sdk::tool_result out;
  if (!result.is_object()) {
    out.llm_text = "The tool " + options.tool + " gave an answer that is not a tool result.";
    out.failure = sdk::make_error(sdk::errc::invalid_response, out.llm_text);
    return out;
  }
  auto content = read_blocks(result.contains("content") ? result["content"] : json{});
  const json* structured = nullptr;
  if (auto i = result.find("structuredContent"); i != result.end() && !i->is_null())
    structured = &*i;
  if (content.text.empty() && structured != nullptr)
    content.text = sdk::dump_json(*structured, 2);
  if (auto e = result.find("isError"); e != result.end() && e->is_boolean() && e->get<bool>()) {
    auto why = content.text.empty() ? std::string{"no reason given"} : content.text;
    out.llm_text = cut_output("The tool " + options.tool + " reported an error: " + why,
                              options.max_output_bytes);
    out.failure = sdk::make_error(sdk::errc::bad_request,
                                  std::string{sdk::utf8_prefix(out.llm_text, 2000)});
    return out;
  }
  if (sdk::is_search(options.kind)) {
    std::vector<sdk::search_result> found;
    if (const auto* arr = structured != nullptr ? result_array(*structured) : nullptr)
      found = read_results(*arr);
    for (size_t i = 0; found.empty() && i < content.texts.size(); ++i) {
      auto parsed = sdk::parse_json(content.texts[i]);
      if (const auto* arr = parsed.is_discarded() ? nullptr : result_array(parsed))
        found = read_results(*arr);
    }
    if (found.empty())
      found = content.links;
    // De-duplicated as the built-in searches are, then capped.
    std::vector<sdk::search_result> kept;
    std::set<std::pair<std::string, std::string>> seen;
    for (auto& r : found)
      if (kept.size() < options.max_results && seen.emplace(r.title, r.url).second)
        kept.push_back(std::move(r));
    if (!kept.empty()) {
      out.documents = sdk::search_documents(kept);
      for (auto& d : out.documents)
        d.kind = kind_of(d.url);
      out.llm_text = documents_json(out.documents, false, options.max_output_bytes);
      return out;
    }
  } else if (options.kind == sdk::tool_kind::page_reader) {
    for (const auto& r : content.embedded) {
      sdk::document d;
      d.id = r.url;
      d.url = r.url;
      d.title = r.title;
      d.content = r.snippet;
      d.kind = kind_of(r.url);
      out.documents.push_back(std::move(d));
    }
    auto address = argument_address(arguments);
    if (out.documents.empty() && !address.empty() && !content.texts.empty()) {
      sdk::document d;
      d.id = address;
      d.url = address;
      for (const auto& t : content.texts)
        append(d.content, t);
      d.title = heading_of(d.content);
      if (d.title.empty())
        d.title = last_part(address);
      d.kind = kind_of(address);
      out.documents.push_back(std::move(d));
    }
    if (!out.documents.empty()) {
      out.llm_text = documents_json(out.documents, true, options.max_output_bytes);
      return out;
    }
  }
  out.llm_text = content.text.empty()
                   ? "The tool " + options.tool + " returned nothing."
                   : cut_output(std::move(content.text), options.max_output_bytes);
  return out;
}

} // namespace quarry::plugins::mcp
