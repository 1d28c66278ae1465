// Packet construction and JSON encoding.

#include "quarry/core/packets.hpp"
#include "quarry/core/json_check.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <limits>

namespace quarry::core {

namespace {

using nlohmann::json;

const char* known_types[] = {"section_end",
                             "stop",
                             "top_level_branching",
                             "error",
                             "chat_heartbeat",
                             "reasoning_start",
                             "reasoning_delta",
                             "reasoning_done",
                             "message_start",
                             "message_delta",
                             "citation_info",
                             "search_tool_start",
                             "search_tool_queries_delta",
                             "search_tool_documents_delta",
                             "open_url_start",
                             "open_url_urls",
                             "open_url_documents",
                             "deep_research_plan_start",
                             "deep_research_plan_delta",
                             "research_agent_start",
                             "intermediate_report_start",
                             "intermediate_report_delta",
                             "intermediate_report_cited_docs",
                             "clarification",
                             "usage",
                             "notice",
                             "resumed",
                             "agent_superseded",
                             "model_profile"};

json typed(const char* type) {
  return json{{"type", type}};
}

json docs_array(const std::vector<sdk::document>& docs) {
  auto out = json::array();
  for (const auto& d : docs)
    out.push_back(search_doc(d));
  return out;
}

} // namespace

std::string packet::type() const {
  if (auto i = obj.find("type"); i != obj.end() && i->is_string())
    return i->get<std::string>();
  return {};
}

bool is_known_packet_type(std::string_view type) {
  return std::any_of(std::begin(known_types), std::end(known_types),
                     [type](const char* x) { return type == x; });
}

std::string encode(const packet& x) {
  json where{{"turn_index", x.where.turn_index}, {"tab_index", x.where.tab_index}};
  where["sub_turn_index"] = x.where.sub_turn_index ? json(*x.where.sub_turn_index) : json(nullptr);
  json out{{"seq", x.seq}, {"session", x.session}, {"placement", std::move(where)}, {"obj", x.obj}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

std::string joined(uint64_t seq, std::string_view session_json, const placement& where,
                   std::string_view obj_json) {
  // The keys in encode()'s order (nlohmann's objects are sorted by key).
  std::string out;
  out.reserve(obj_json.size() + session_json.size() + 96);
  out += "{\"obj\":";
  out += obj_json;
  out += ",\"placement\":{\"sub_turn_index\":";
  out += where.sub_turn_index ? std::to_string(*where.sub_turn_index) : std::string{"null"};
  out += ",\"tab_index\":";
  out += std::to_string(where.tab_index);
  out += ",\"turn_index\":";
  out += std::to_string(where.turn_index);
  out += "},\"seq\":";
  out += std::to_string(seq);
  out += ",\"session\":";
  out += session_json;
  out += '}';
  return out;
}

} // namespace

std::string dump_json(const json& x) {
  return sdk::dump_json(x);
}

std::string session_json(std::string_view session) {
  return dump_json(json(std::string{session}));
}

std::string encode_dumped(uint64_t seq, std::string_view session, const placement& where,
                          std::string_view obj_json) {
  return joined(seq, session, where, obj_json);
}

std::optional<std::string> encode(uint64_t seq, std::string_view session, const placement& where,
                                  std::string_view obj_json) {
  auto first = obj_json.find_first_not_of(" \t\r\n");
  // Checked, not parsed: one pass that agrees with nlohmann's parser (which
  // sets no depth limit either).
  if (first == std::string_view::npos || obj_json[first] != '{'
      || !is_json(obj_json, std::numeric_limits<size_t>::max()))
    return std::nullopt;
  return joined(seq, session_json(session), where, obj_json);
}

std::variant<packet, std::string> decode(std::string_view line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return std::string{"not a JSON object"};
  packet out;
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_unsigned())
    return std::string{"'seq' must be a non-negative integer"};
  out.seq = seq->get<uint64_t>();
  if (auto s = j.find("session"); s != j.end()) {
    if (!s->is_string())
      return std::string{"'session' must be a string"};
    out.session = s->get<std::string>();
  }
  auto p = j.find("placement");
  if (p == j.end() || !p->is_object())
    return std::string{"'placement' must be an object"};
  auto turn = p->find("turn_index");
  if (turn == p->end() || !turn->is_number_integer())
    return std::string{"'placement.turn_index' must be an integer"};
  out.where.turn_index = turn->get<int>();
  if (auto tab = p->find("tab_index"); tab != p->end()) {
    if (!tab->is_number_integer())
      return std::string{"'placement.tab_index' must be an integer"};
    out.where.tab_index = tab->get<int>();
  }
  if (auto sub = p->find("sub_turn_index"); sub != p->end() && !sub->is_null()) {
    if (!sub->is_number_integer())
      return std::string{"'placement.sub_turn_index' must be an integer or null"};
    out.where.sub_turn_index = sub->get<int>();
  }
  auto obj = j.find("obj");
  if (obj == j.end() || !obj->is_object() || !obj->contains("type") || !(*obj)["type"].is_string())
    return std::string{"'obj' must be an object with a string 'type'"};
  out.obj = std::move(*obj);
  return out;
}

std::string documents_packet_text(std::string_view type, std::string_view key,
                                  const std::vector<sdk::document>& docs) {
  // The members in the order of nlohmann's objects (std::map: by key), as
  // search_doc's object holds them.
  auto string = [](std::string& out, std::string_view name, std::string_view value) {
    out += name;
    sdk::append_json_string(out, value);
  };
  std::string docs_text = "[";
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto& d = docs[i];
    if (i > 0)
      docs_text += ',';
    string(docs_text, "{\"blurb\":", d.snippet);
    string(docs_text, ",\"document_id\":", d.id);
    docs_text += d.kind == sdk::source_kind::web ? ",\"is_internet\":true"
                                                 : ",\"is_internet\":false";
    if (d.url.empty())
      docs_text += ",\"link\":null";
    else
      string(docs_text, ",\"link\":", d.url);
    string(docs_text, ",\"semantic_identifier\":", d.title.empty() ? d.url : d.title);
    docs_text += d.content.empty() ? ",\"snippet_only\":true" : ",\"snippet_only\":false";
    string(docs_text, ",\"source_type\":", sdk::to_string(d.kind));
    if (d.published)
      string(docs_text, ",\"updated_at\":", *d.published);
    else
      docs_text += ",\"updated_at\":null";
    docs_text += '}';
  }
  docs_text += ']';
  std::string out = "{";
  auto member = [&](std::string_view name, std::string_view json_value, bool first) {
    if (!first)
      out += ',';
    sdk::append_json_string(out, name);
    out += ':';
    out += json_value;
  };
  std::string type_text;
  sdk::append_json_string(type_text, type);
  if (key < std::string_view{"type"}) {
    member(key, docs_text, true);
    member("type", type_text, false);
  } else {
    member("type", type_text, true);
    member(key, docs_text, false);
  }
  out += '}';
  return out;
}

json search_doc(const sdk::document& d) {
  json out{{"document_id", d.id},
           {"semantic_identifier", d.title.empty() ? d.url : d.title},
           {"link", d.url.empty() ? json(nullptr) : json(d.url)},
           {"blurb", d.snippet},
           {"source_type", sdk::to_string(d.kind)},
           {"is_internet", d.kind == sdk::source_kind::web},
           // Quarry's: only the search snippet is known (the page was never
           // opened).
           {"snippet_only", d.content.empty()}};
  out["updated_at"] = d.published ? json(*d.published) : json(nullptr);
  return out;
}

namespace packets {

json section_end() {
  return typed("section_end");
}

json stop(std::optional<std::string> stop_reason) {
  auto out = typed("stop");
  out["stop_reason"] = stop_reason ? json(*stop_reason) : json(nullptr);
  return out;
}

json top_level_branching(int n) {
  auto out = typed("top_level_branching");
  out["num_parallel_branches"] = n;
  return out;
}

json error(const std::string& message, const std::string& code) {
  auto out = typed("error");
  out["message"] = message;
  if (!code.empty())
    out["code"] = code;
  return out;
}

json heartbeat() {
  return typed("chat_heartbeat");
}

json reasoning_start() {
  return typed("reasoning_start");
}

json reasoning_delta(const std::string& text) {
  auto out = typed("reasoning_delta");
  out["reasoning"] = text;
  return out;
}

json reasoning_done() {
  return typed("reasoning_done");
}

json message_start(const std::vector<sdk::document>* final_documents,
                   std::optional<double> pre_answer_seconds) {
  auto out = typed("message_start");
  out["final_documents"] = final_documents ? docs_array(*final_documents) : json(nullptr);
  out["pre_answer_processing_seconds"] = pre_answer_seconds ? json(*pre_answer_seconds)
                                                            : json(nullptr);
  return out;
}

json message_delta(const std::string& text) {
  auto out = typed("message_delta");
  out["content"] = text;
  return out;
}

json citation_info(int citation_number, const std::string& document_id) {
  auto out = typed("citation_info");
  out["citation_number"] = citation_number;
  out["document_id"] = document_id;
  return out;
}

json search_tool_start(bool is_internet_search) {
  auto out = typed("search_tool_start");
  out["is_internet_search"] = is_internet_search;
  return out;
}

json search_tool_queries_delta(const std::vector<std::string>& queries) {
  auto out = typed("search_tool_queries_delta");
  out["queries"] = queries;
  return out;
}

json search_tool_documents_delta(const std::vector<sdk::document>& docs) {
  auto out = typed("search_tool_documents_delta");
  out["documents"] = docs_array(docs);
  return out;
}

json open_url_start() {
  return typed("open_url_start");
}

json open_url_urls(const std::vector<std::string>& urls) {
  auto out = typed("open_url_urls");
  out["urls"] = urls;
  return out;
}

json open_url_documents(const std::vector<sdk::document>& docs) {
  auto out = typed("open_url_documents");
  out["documents"] = docs_array(docs);
  return out;
}

json deep_research_plan_start() {
  return typed("deep_research_plan_start");
}

json deep_research_plan_delta(const std::string& text) {
  auto out = typed("deep_research_plan_delta");
  out["content"] = text;
  return out;
}

json research_agent_start(const std::string& research_task) {
  auto out = typed("research_agent_start");
  out["research_task"] = research_task;
  return out;
}

json intermediate_report_start() {
  return typed("intermediate_report_start");
}

json intermediate_report_delta(const std::string& text) {
  auto out = typed("intermediate_report_delta");
  out["content"] = text;
  return out;
}

json intermediate_report_cited_docs(const std::vector<sdk::document>& docs) {
  auto out = typed("intermediate_report_cited_docs");
  out["cited_docs"] = docs_array(docs);
  return out;
}

json clarification(const std::string& questions) {
  auto out = typed("clarification");
  out["questions"] = questions;
  return out;
}

json usage(const std::string& role, const sdk::usage& tokens, double cost_usd,
           const call_origin& origin) {
  auto out = typed("usage");
  auto offline = origin.basis == cost_basis::offline;
  out["role"] = role;
  if (!origin.provider.empty())
    out["provider"] = origin.provider;
  if (offline)
    out["model"] = nullptr;
  else if (!origin.model.empty())
    out["model"] = origin.model;
  out["input_tokens"] = tokens.input_tokens;
  out["output_tokens"] = tokens.output_tokens;
  out["reasoning_tokens"] = tokens.reasoning_tokens;
  out["cached_input_tokens"] = tokens.cached_input_tokens;
  out["cost_usd"] = cost_usd;
  out["cost_known"] = origin.basis != cost_basis::unpriced;
  out["offline"] = offline;
  return out;
}

json model_profile(bool reasoning_model, const std::string& reason, int orchestrator_cycles) {
  auto out = typed("model_profile");
  out["reasoning_model"] = reasoning_model;
  out["reason"] = reason;
  out["orchestrator_cycles"] = orchestrator_cycles;
  return out;
}

json notice(const std::string& text) {
  auto out = typed("notice");
  out["text"] = text;
  return out;
}

json resumed(int64_t checkpoint, uint64_t superseded_after) {
  auto out = typed("resumed");
  out["checkpoint"] = checkpoint;
  out["superseded_after"] = superseded_after;
  return out;
}

json agent_superseded(int attempt, const std::string& worker, const std::string& reason) {
  auto out = typed("agent_superseded");
  out["attempt"] = attempt;
  out["worker"] = worker;
  out["reason"] = reason;
  return out;
}

} // namespace packets

} // namespace quarry::core
