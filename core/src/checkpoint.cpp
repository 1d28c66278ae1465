// Checkpoints of the orchestrator strategy as JSON.

#include "quarry/core/checkpoint.hpp"

#include "quarry/core/llm_json.hpp"

#include <algorithm>
#include <set>

namespace quarry::core {

using nlohmann::json;

namespace {

const char* phase_name(checkpoint_phase p) {
  return p == checkpoint_phase::final_report ? "final_report" : "orchestrate";
}

// A reader that records the first problem and never throws.
struct reader {
  const json& j;
  std::string problem;

  const json* field(const char* key, json::value_t type) {
    auto i = j.find(key);
    if (i == j.end()) {
      fail(std::string{key} + ": missing");
      return nullptr;
    }
    bool ok = i->type() == type
              || (type == json::value_t::number_integer && i->is_number_unsigned());
    if (!ok) {
      fail(std::string{key} + ": wrong type");
      return nullptr;
    }
    return &*i;
  }

  void fail(std::string why) {
    if (problem.empty())
      problem = std::move(why);
  }

  std::string text(const char* key) {
    auto* v = field(key, json::value_t::string);
    return v ? v->get<std::string>() : std::string{};
  }

  int64_t count(const char* key, int64_t max = INT32_MAX) {
    auto* v = field(key, json::value_t::number_integer);
    if (v == nullptr)
      return 0;
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail(std::string{key} + ": out of range");
      return 0;
    }
    auto n = v->get<int64_t>();
    if (n < 0 || n > max) {
      fail(std::string{key} + ": out of range");
      return 0;
    }
    return n;
  }

  bool flag(const char* key) {
    auto* v = field(key, json::value_t::boolean);
    return v && v->get<bool>();
  }

  const json& list(const char* key) {
    static const json empty = json::array();
    auto* v = field(key, json::value_t::array);
    return v ? *v : empty;
  }
};

} // namespace

json to_json(const research_checkpoint& x) {
  json messages = json::array();
  for (const auto& m : x.orchestration)
    messages.push_back(m);
  json citations = json::array();
  for (const auto& [n, ref] : x.global)
    citations.push_back(
      {{"number", n}, {"document_id", ref.document_id}, {"link", ref.link}, {"title", ref.title}});
  json documents = json::array();
  for (const auto& [id, doc] : x.documents) {
    json d = doc;
    d["key"] = id;
    documents.push_back(std::move(d));
  }
  json findings = json::array();
  for (const auto& [task, report] : x.findings)
    findings.push_back({{"task", task}, {"report", report}});
  return json{{"version", checkpoint_version},
              {"phase", phase_name(x.phase)},
              {"plan", x.plan},
              {"plan_turn", x.plan_turn},
              {"start_turn", x.start_turn},
              {"cycle", x.cycle},
              {"reasoning_cycles", x.reasoning_cycles},
              {"retried_empty", x.retried_empty},
              {"orchestration", std::move(messages)},
              {"citations", std::move(citations)},
              {"documents", std::move(documents)},
              {"findings", std::move(findings)},
              {"notices", x.notices},
              {"elapsed_ms", x.elapsed_ms}};
}

std::variant<research_checkpoint, std::string> checkpoint_from_json(const json& j) {
  if (!j.is_object())
    return std::string{"a checkpoint must be a JSON object"};
  reader r{j, {}};
  research_checkpoint out;
  if (auto v = r.count("version"); r.problem.empty() && v != checkpoint_version)
    return "checkpoint version " + std::to_string(v) + " (this build reads version "
           + std::to_string(checkpoint_version) + ")";
  auto phase = r.text("phase");
  if (r.problem.empty()) {
    if (phase == "orchestrate")
      out.phase = checkpoint_phase::orchestrate;
    else if (phase == "final_report")
      out.phase = checkpoint_phase::final_report;
    else
      r.fail("phase: unknown '" + phase + "'");
  }
  out.plan = r.text("plan");
  out.plan_turn = static_cast<int>(r.count("plan_turn"));
  out.start_turn = static_cast<int>(r.count("start_turn"));
  out.cycle = static_cast<int>(r.count("cycle"));
  out.reasoning_cycles = static_cast<int>(r.count("reasoning_cycles"));
  out.retried_empty = r.flag("retried_empty");
  out.elapsed_ms = r.count("elapsed_ms", INT64_MAX);
  for (const auto& m : r.list("orchestration")) {
    if (!m.is_object()) {
      r.fail("orchestration: a message is not an object");
      break;
    }
    sdk::chat_message msg;
    from_json(m, msg);
    out.orchestration.push_back(std::move(msg));
  }
  for (const auto& d : r.list("documents")) {
    if (!d.is_object() || !d.contains("key") || !d["key"].is_string()) {
      r.fail("documents: an entry without a key");
      break;
    }
    sdk::document doc;
    from_json(d, doc);
    auto key = d["key"].get<std::string>();
    if (!out.documents.emplace(key, std::move(doc)).second) {
      r.fail("documents: '" + key + "' twice");
      break;
    }
  }
  std::set<std::string> cited;
  for (const auto& c : r.list("citations")) {
    reader cr{c, {}};
    if (!c.is_object()) {
      r.fail("citations: an entry is not an object");
      break;
    }
    auto n = cr.count("number");
    document_ref ref{cr.text("document_id"), cr.text("link"), cr.text("title")};
    if (!cr.problem.empty()) {
      r.fail("citations: " + cr.problem);
      break;
    }
    if (n < 1) {
      r.fail("citations: number " + std::to_string(n) + " is below 1");
      break;
    }
    if (!cited.insert(ref.document_id).second) {
      r.fail("citations: document '" + ref.document_id + "' has two numbers");
      break;
    }
    if (out.documents.count(ref.document_id) == 0 && out.documents.count(ref.link) == 0) {
      r.fail("citations: document '" + ref.document_id + "' is not in documents");
      break;
    }
    if (!out.global.insert(static_cast<int>(n), std::move(ref))) {
      r.fail("citations: number " + std::to_string(n) + " is used twice");
      break;
    }
  }
  for (const auto& f : r.list("findings")) {
    if (!f.is_object() || !f.contains("task") || !f["task"].is_string() || !f.contains("report")
        || !f["report"].is_string()) {
      r.fail("findings: an entry without task and report");
      break;
    }
    out.findings.emplace_back(f["task"].get<std::string>(), f["report"].get<std::string>());
  }
  for (const auto& n : r.list("notices")) {
    if (!n.is_string()) {
      r.fail("notices: an entry is not text");
      break;
    }
    out.notices.push_back(n.get<std::string>());
  }
  if (r.problem.empty() && out.start_turn < out.plan_turn)
    r.fail("start_turn: before the plan's turn");
  if (!r.problem.empty())
    return "checkpoint: " + r.problem;
  return out;
}

int64_t resume_deadline_ms(int64_t deadline_ms, int64_t elapsed_ms) {
  if (deadline_ms <= 0)
    return 0;
  auto floor = deadline_ms / 10;
  floor = std::max(floor, std::min<int64_t>(deadline_ms, 60'000));
  auto left = elapsed_ms >= deadline_ms ? 0 : deadline_ms - elapsed_ms;
  return std::max(left, floor);
}

} // namespace quarry::core
