// A session's usage summed: models, tokens, cost and how the cost is known.

#include "session_usage.hpp"

#include <cstdio>

namespace quarry::app {

session_usage summarize_usage(const std::vector<store::usage_group>& groups) {
  session_usage out;
  for (const auto& g : groups) {
    auto offline = g.cost_basis == "offline";
    auto unpriced = g.cost_basis == "unpriced";
    out.calls += g.calls;
    if (offline) {
      out.offline_calls += g.calls;
    } else {
      out.input_tokens += g.input_tokens;
      out.output_tokens += g.output_tokens;
      if (unpriced)
        out.unpriced_calls += g.calls;
      else
        out.cost += g.cost;
    }
    if (g.provider.empty() && g.model.empty() && !offline)
      continue; // a row of before schema 4: no name to show
    session_model* m = nullptr;
    for (auto& x : out.models)
      if (x.role == g.role && x.provider == g.provider && x.model == g.model
          && x.offline == offline)
        m = &x;
    if (m == nullptr) {
      m = &out.models.emplace_back();
      m->role = g.role;
      m->provider = g.provider;
      m->model = offline ? std::string{} : g.model;
      m->offline = offline;
    }
    m->calls += g.calls;
    if (offline)
      continue;
    m->input_tokens += g.input_tokens;
    m->output_tokens += g.output_tokens;
    if (unpriced)
      m->priced = false;
    else
      m->cost += g.cost;
  }
  return out;
}

nlohmann::json session_models_json(const session_usage& u) {
  auto out = nlohmann::json::array();
  for (const auto& m : u.models) {
    nlohmann::json j{{"role", m.role},
                     {"provider", m.provider},
                     {"model", m.offline ? nlohmann::json(nullptr) : nlohmann::json(m.model)},
                     {"offline", m.offline},
                     {"calls", m.calls}};
    if (!m.offline) {
      j["input_tokens"] = m.input_tokens;
      j["output_tokens"] = m.output_tokens;
      j["cost"] = m.cost;
      j["cost_known"] = m.priced;
    }
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json session_usage_json(const session_usage& u) {
  return {{"calls", u.calls},
          {"model_calls", u.model_calls()},
          {"offline_calls", u.offline_calls},
          {"unpriced_calls", u.unpriced_calls},
          {"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens},
          {"cost", u.cost},
          {"cost_known", u.cost_known()}};
}

int64_t session_duration_ms(const store::session_row& row, store::session_state state,
                            int64_t now_ms) {
  int64_t end = row.updated_at;
  if (row.finished_at > 0)
    end = row.finished_at;
  else if (state == store::session_state::pending || state == store::session_state::running)
    end = now_ms;
  return end > row.created_at ? end - row.created_at : 0;
}

std::string cost_text(const session_usage& u) {
  auto model_calls = u.model_calls();
  if (model_calls == 0)
    return {};
  char cost[48];
  std::snprintf(cost, sizeof(cost), "$%.4f", u.cost);
  if (u.unpriced_calls == 0)
    return cost;
  if (u.unpriced_calls == model_calls)
    return "cost unknown";
  return std::string{"at least "} + cost + " (" + std::to_string(u.unpriced_calls)
         + (u.unpriced_calls == 1 ? " call unpriced)" : " calls unpriced)");
}

} // namespace quarry::app
