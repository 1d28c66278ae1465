// The tool calls of a research step (tool_round.hpp).

#include "tool_round.hpp"

#include "quarry/core/findings.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/tool_args.hpp"

#include <caf/error.hpp>
#include <caf/send.hpp>

namespace quarry::actors::detail {

namespace {

void send_packet(const packet_sink_actor& em, const core::placement& at,
                 const nlohmann::json& obj) {
  caf::anon_send(em, packet_atom::value, make_packet(at, obj));
}

std::vector<std::string> strings_of(const nlohmann::json& args, const char* key,
                                    bool one_string_too) {
  std::vector<std::string> out;
  auto x = args.find(key);
  if (x == args.end())
    return out;
  if (x->is_array()) {
    for (const auto& s : *x)
      if (s.is_string())
        out.push_back(s.get<std::string>());
  } else if (one_string_too && x->is_string()) {
    out.push_back(x->get<std::string>());
  }
  return out;
}

} // namespace

tool_round::started tool_round::start(const tool_set& tools, const sdk::tool_call& call,
                                      const packet_sink_actor& emitter, const core::placement& at) {
  started out;
  auto found = tools.tools.find(call.name);
  if (found == tools.tools.end()) {
    std::vector<std::string> names;
    for (const auto& [n, _] : tools.tools)
      names.push_back(n);
    out.result.llm_text = core::unknown_tool_text(call.name, names);
    out.result.failure = sdk::make_error(sdk::errc::bad_request, out.result.llm_text);
    return out;
  }
  out.tool = &found->second;
  auto parsed = core::parse_tool_arguments(call.arguments);
  auto* json = std::get_if<nlohmann::json>(&parsed);
  nlohmann::json args = json != nullptr ? std::move(*json) : nlohmann::json::object();
  auto kind = found->second.kind;
  if (sdk::is_search(kind)) {
    send_packet(emitter, at, core::packets::search_tool_start(kind == sdk::tool_kind::web_search));
    send_packet(emitter, at,
                core::packets::search_tool_queries_delta(strings_of(args, "queries", true)));
  } else if (kind == sdk::tool_kind::page_reader) {
    auto urls = strings_of(args, "urls", false);
    send_packet(emitter, at, core::packets::open_url_start());
    send_packet(emitter, at, core::packets::open_url_urls(urls));
    // The search engines' snippets centre the page reader's window.
    nlohmann::json hints = nlohmann::json::object();
    for (const auto& url : urls)
      if (auto s = snippets_.find(url); s != snippets_.end())
        hints[url] = s->second;
    if (!hints.empty())
      args["_quarry"] = {{"snippets", hints}};
  }
  // Model-written `_quarry` hints are not trusted.
  if (kind != sdk::tool_kind::page_reader)
    args.erase("_quarry");
  if (json == nullptr) {
    out.arguments = call.arguments;
    return out;
  }
  out.arguments = args.dump();
  out.parsed = std::make_shared<const nlohmann::json>(std::move(args));
  return out;
}

void tool_round::answered(sdk::tool_kind kind, sdk::tool_result& r,
                          const packet_sink_actor& emitter, const core::placement& at) {
  // This researcher's numbers for every document, reused per document id.
  r.llm_text = core::renumber_documents(r.llm_text, r.documents, [this](const sdk::document& d) {
    return numbers.number_for(d);
  });
  if (sdk::is_search(kind)) {
    for (const auto& d : r.documents)
      if (!d.snippet.empty() && !d.url.empty())
        snippets_.emplace(d.url, d.snippet);
    caf::anon_send(emitter, packet_atom::value,
                   make_packet(at, "search_tool_documents_delta",
                               core::documents_packet_text("search_tool_documents_delta",
                                                           "documents", r.documents)));
  } else if (kind == sdk::tool_kind::page_reader && !r.documents.empty()) {
    caf::anon_send(
      emitter, packet_atom::value,
      make_packet(at, "open_url_documents",
                  core::documents_packet_text("open_url_documents", "documents", r.documents)));
  }
  if (r.failure && r.documents.empty())
    send_packet(emitter, at, core::packets::error(r.failure->message, "tool_failed"));
  send_packet(emitter, at, core::packets::section_end());
}

sdk::tool_result tool_round::failed(const std::string& name, const caf::error& err,
                                    const packet_sink_actor& emitter, const core::placement& at) {
  sdk::tool_result r;
  r.llm_text = core::tool_call_failed_text(name, caf::to_string(err));
  send_packet(emitter, at, core::packets::error(r.llm_text, "tool_failed"));
  send_packet(emitter, at, core::packets::section_end());
  return r;
}

} // namespace quarry::actors::detail
