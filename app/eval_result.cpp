// The result of one question of `quarry eval run` (eval_result.hpp).

#include "eval_result.hpp"

#include <cctype>

namespace quarry::app::eval {

namespace {

using nlohmann::json;

int64_t int_field(const json& o, const char* name) {
  auto i = o.find(name);
  if (i == o.end() || !i->is_number())
    return 0;
  if (i->is_number_float())
    return static_cast<int64_t>(i->get<double>());
  return i->get<int64_t>();
}

void add_documents(packet_tally& t, const json& o, bool opened) {
  auto docs = o.find("documents");
  if (docs == o.end() || !docs->is_array())
    return;
  for (const auto& d : *docs) {
    if (!d.is_object())
      continue;
    auto id = d.find("document_id");
    if (id == d.end() || !id->is_string())
      continue;
    auto key = id->get<std::string>();
    t.found.insert(key);
    auto internet = d.find("is_internet");
    auto local = internet != d.end() && internet->is_boolean() && !internet->get<bool>();
    if (opened || local)
      t.read.insert(key);
  }
}

// The claims of a verification_summary packet's object, or null.
json claims_of(const json& v) {
  if (!v.is_object())
    return nullptr;
  auto claims = int_field(v, "claims");
  auto unverified = int_field(v, "unverified");
  auto rate = v.find("rate");
  return {{"claims", claims},
          {"verified", claims - unverified},
          {"supported", int_field(v, "supported")},
          {"partly_supported", int_field(v, "partly_supported")},
          {"unsupported", int_field(v, "unsupported")},
          {"no_evidence", int_field(v, "no_evidence")},
          {"unverified", unverified},
          {"rate", rate != v.end() && rate->is_number() ? rate->get<double>() : 0.0}};
}

} // namespace

void packet_tally::add(const core::packet& p) {
  const auto& o = p.obj;
  if (!o.is_object())
    return;
  auto type = p.type();
  if (type == "search_tool_documents_delta") {
    add_documents(*this, o, false);
  } else if (type == "open_url_documents") {
    add_documents(*this, o, true);
  } else if (type == "usage") {
    ++model_calls;
    input_tokens += int_field(o, "input_tokens");
    output_tokens += int_field(o, "output_tokens");
    if (auto i = o.find("cost_usd"); i != o.end() && i->is_number())
      cost_usd += i->get<double>();
  } else if (type == "verification_summary") {
    verification = o;
  } else if (type == "error") {
    auto i = o.find("message");
    errors.push_back(i != o.end() && i->is_string() ? i->get<std::string>() : o.dump());
  }
}

citation_count count_citations(std::string_view body) {
  citation_count out;
  std::set<int64_t> numbers;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '[')
      continue;
    // `[n]`, `[n, m]`: digits separated by commas and blanks, then `]`.
    std::vector<int64_t> found;
    auto j = i + 1;
    bool ok = false;
    while (j < body.size()) {
      auto start = j;
      int64_t n = 0;
      while (j < body.size() && std::isdigit(static_cast<unsigned char>(body[j])) && j - start < 9)
        n = n * 10 + (body[j++] - '0');
      if (j == start)
        break;
      found.push_back(n);
      while (j < body.size() && body[j] == ' ')
        ++j;
      if (j < body.size() && body[j] == ']') {
        ok = true;
        break;
      }
      if (j >= body.size() || body[j] != ',')
        break;
      ++j;
      while (j < body.size() && body[j] == ' ')
        ++j;
    }
    if (!ok)
      continue;
    for (auto n : found) {
      ++out.markers;
      numbers.insert(n);
    }
    i = j;
  }
  out.distinct = numbers.size();
  return out;
}

json result_json(const question& q, const finished_research& r, const packet_tally& t) {
  auto cites = count_citations(r.body);
  json cited = json::array();
  for (const auto& s : r.cited)
    cited.push_back({{"number", s.number}, {"title", s.title}, {"url", s.url}});
  json out = {{"id", q.id},
              {"prompt", q.prompt},
              {"fields", q.fields},
              {"status", r.status},
              {"session", r.session.empty() ? json(nullptr) : json(r.session)},
              {"article", r.article}};
  if (!r.failure.empty())
    out["failure"] = r.failure;
  out["sources_found"] = t.found.size();
  out["sources_read"] = t.read.size();
  out["citations"] = cites.markers;
  out["unique_cited_sources"] = cites.distinct;
  out["cited"] = std::move(cited);
  out["claims"] = claims_of(t.verification);
  out["tokens"] = {{"input", t.input_tokens},
                   {"output", t.output_tokens},
                   {"total", t.input_tokens + t.output_tokens}};
  out["model_calls"] = t.model_calls;
  out["cost_usd"] = t.cost_usd;
  out["seconds"] = r.seconds;
  out["errors"] = t.errors;
  out["notices"] = r.notices;
  auto expected = must_cite(q);
  if (!expected.empty()) {
    json hit = json::array();
    json missing = json::array();
    for (const auto& e : expected) {
      bool found = false;
      for (const auto& s : r.cited)
        if (cites_expected(s.url, s.title, e))
          found = true;
      (found ? hit : missing).push_back(e);
    }
    out["must_cite"] = {{"expected", expected},
                        {"cited", hit},
                        {"missing", missing},
                        {"recall",
                         static_cast<double>(hit.size()) / static_cast<double>(expected.size())}};
  }
  out["finished_at"] = r.finished_at;
  return out;
}

bool is_finished(const json& result, const question& q) {
  if (!result.is_object())
    return false;
  auto status = result.find("status");
  auto id = result.find("id");
  auto prompt = result.find("prompt");
  return status != result.end() && *status == "completed" && id != result.end() && *id == q.id
         && prompt != result.end() && *prompt == q.prompt;
}

std::string article_line(const json& result) {
  json line = json::object();
  line["id"] = result.value("id", json(nullptr));
  line["prompt"] = result.value("prompt", std::string{});
  line["article"] = result.value("article", std::string{});
  if (auto f = result.find("fields"); f != result.end() && f->is_object())
    for (const auto& [key, value] : f->items())
      if (key != "id" && key != "prompt" && key != "article")
        line[key] = value;
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace quarry::app::eval
