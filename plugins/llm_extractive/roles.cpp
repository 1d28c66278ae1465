// The extractive provider in the reflective strategy's structured roles:
// lexical classification, search queries, fixed plans per depth, a reflector
// that completes when a step found no new source, and a lexical judge. Each
// answers with one call to the tool the request offers, from the request's
// research context.

#include "internal.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace quarry::plugins::llm_extractive {

namespace {

using nlohmann::json;

sdk::tool_call one_call(std::string name, const json& args) {
  sdk::tool_call c;
  c.id = "call_1";
  c.name = std::move(name);
  c.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  return c;
}

bool mentions_any(const std::string& lower, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](const char* w) { return lower.find(w) != std::string::npos; });
}

answer classify(const sdk::chat_request& req) {
  auto question = question_of(req);
  auto lower = sdk::to_lower(question);
  auto words = lexical::count_words(question);
  // Clauses: question marks and semicolons beyond the first.
  auto parts = std::max<size_t>(
    1, static_cast<size_t>(std::count_if(question.begin(), question.end(),
                                         [](char c) { return c == '?' || c == ';'; })));
  std::string complexity = "moderate";
  if (mentions_any(lower, {"compare", "comparison", " versus ", " vs", "trade-off", "tradeoff",
                           "pros and cons", "advantages and disadvantages"})
      || words > 30)
    complexity = "complex";
  else if (words <= 8 && parts == 1 && lower.find(" and ") == std::string::npos
           && lower.find(',') == std::string::npos)
    complexity = "simple";
  std::string follow = req.research.follow_up ? "complex_follow_up" : "new_topic";
  std::string depth = complexity == "simple"    ? "light"
                      : complexity == "complex" ? "extended"
                                                : "medium";
  answer out;
  out.tool_calls.push_back(one_call(
    "classify_question", {{"complexity", complexity},
                          {"follow_up_type", follow},
                          {"is_ambiguous", false},
                          {"clarifying_questions", json::array()},
                          {"recommended_depth", depth},
                          {"reasoning", "Lexical estimate: " + std::to_string(words) + " words, "
                                          + std::to_string(parts) + " parts."}}));
  return out;
}

// The fewest queries the request's tool asks for (`minItems` of its
// `queries`; 1 without one), at most 3.
size_t least_queries(const sdk::chat_request& req) {
  const auto& p = req.tools.front().parameters;
  if (!p.is_object() || !p.contains("properties") || !p["properties"].is_object())
    return 1;
  auto q = p["properties"].find("queries");
  if (q == p["properties"].end() || !q->is_object())
    return 1;
  auto m = q->find("minItems");
  if (m == q->end() || !m->is_number_integer())
    return 1;
  return static_cast<size_t>(std::clamp<int64_t>(m->get<int64_t>(), 1, 3));
}

answer queries(const sdk::chat_request& req) {
  // The plan step searched for; the background search is for the question.
  auto task = req.research.task.empty() ? question_of(req) : req.research.task;
  json qs = json::array();
  std::set<std::string> lower;
  auto add = [&](std::string q) {
    if (!q.empty() && lower.insert(sdk::to_lower(q)).second)
      qs.push_back(std::move(q));
  };
  add(std::string{sdk::utf8_prefix(task, 300)});
  // The first six words of the task that are not stop words, each once (a
  // word counts once whatever its inflections), as written.
  std::vector<std::string> keywords;
  std::set<std::string> seen;
  for (const auto& w : lexical::words(task))
    if (seen.insert(lexical::stem(w)).second)
      keywords.push_back(w);
  auto joined = [&](size_t from, size_t count) {
    std::string out;
    for (size_t i = from; i < keywords.size() && i < from + count; ++i)
      out += (out.empty() ? "" : " ") + keywords[i];
    return out;
  };
  add(joined(0, 6));
  // A tool that asks for more (the background investigator's 2-3): the next
  // six keywords, then the first three, then the task as an overview.
  auto least = least_queries(req);
  if (qs.size() < least)
    add(joined(6, 6));
  if (qs.size() < least)
    add(joined(0, 3));
  if (qs.size() < least)
    add(std::string{sdk::utf8_prefix(task, 280)} + " overview");
  answer out;
  out.tool_calls.push_back(one_call("search_queries", {{"queries", qs}}));
  return out;
}

/// Generic aspects that fill a plan past the question's own parts.
const char* const fill_steps[] = {
  "Background and key facts",  "Evidence and figures", "Practical consequences",
  "Limits and open questions", "Recent developments",  "Costs and trade-offs",
  "Views of experts",          "Examples and cases",   "Alternatives",
  "Summary of the evidence"};

answer plan(const sdk::chat_request& req) {
  const auto& context = req.research;
  auto question = question_of(req);
  // How many steps to write (1 to 3 when the request does not say).
  long at_least = context.min_steps > 0 ? context.min_steps : 1;
  long room = context.max_steps > 0 ? context.max_steps : std::max(at_least, 3L);
  at_least = std::clamp(at_least, 1L, 10L);
  room = std::clamp(room, at_least, 10L);
  // A plan written again keeps its completed steps: new steps repeat none.
  bool replan = !context.plan.empty();
  std::set<std::string> taken;
  for (const auto& done : context.findings)
    taken.insert(sdk::to_lower(sdk::trim(done.task)));
  std::vector<std::string> titles;
  auto add = [&](const std::string& t) {
    auto key = sdk::to_lower(sdk::trim(t));
    if (!key.empty() && taken.insert(key).second)
      titles.push_back(std::string{sdk::trim(t)});
  };
  // A fixed plan: the question's parts, then generic aspects, up to the
  // minimum (a light plan stays short; deeper plans reach their minimum).
  if (!replan)
    for (const auto& part : split_question(question, static_cast<size_t>(room)))
      add(part);
  for (auto* f : fill_steps) {
    if (static_cast<long>(titles.size()) >= at_least)
      break;
    add(f);
  }
  if (titles.size() > static_cast<size_t>(room))
    titles.resize(static_cast<size_t>(room));
  json steps = json::array();
  for (const auto& t : titles)
    steps.push_back(
      {{"title", t},
       {"description", t + (question.empty() ? "" : " (regarding: " + question + ")")},
       {"step_type", "research"},
       {"needs_search", true}});
  answer out;
  out.tool_calls.push_back(
    one_call("write_plan", {{"title", question.empty() ? std::string{"Research plan"} : question},
                            {"thought", "A fixed plan from the question's parts."},
                            {"has_enough_context", false},
                            {"steps", steps}}));
  return out;
}

answer reflect(const sdk::chat_request& req) {
  auto fresh = req.research.new_sources;
  // Not said (-1): the plan goes on.
  auto reasoning = fresh < 0 ? std::string{"The request does not say what the last step found."}
                             : "The last step found " + std::to_string(fresh) + " new sources.";
  answer out;
  out.tool_calls.push_back(
    one_call("reflect", fresh == 0 ? json{{"decision", "COMPLETE"},
                                          {"reasoning", "The last step found no new source."}}
                                   : json{{"decision", "CONTINUE"}, {"reasoning", reasoning}}));
  return out;
}

answer judge(const sdk::chat_request& req) {
  json verdicts = json::array();
  const auto& claims = req.research.claims;
  for (size_t id = 0; id < claims.size(); ++id) {
    const auto& [claim, evidence] = claims[id];
    if (evidence.empty()) {
      verdicts.push_back({{"id", id}, {"verdict", "no_evidence"}, {"quote", ""}});
      continue;
    }
    auto o = lexical::overlap_of(claim, evidence);
    verdicts.push_back({{"id", id}, {"verdict", lexical::lexical_verdict(o)}, {"quote", evidence}});
  }
  answer out;
  out.tool_calls.push_back(one_call("judge_claims", {{"verdicts", verdicts}}));
  return out;
}

} // namespace

answer respond_synthesize(const sdk::chat_request& request) {
  std::vector<std::string> plan;
  std::vector<finding> findings;
  for (const auto& step : request.research.findings) {
    plan.push_back(step.task);
    findings.push_back({step.task, step.report});
  }
  answer result;
  result.text = compose_final(question_of(request), plan, findings);
  return result;
}

std::optional<answer> respond_structured(const sdk::chat_request& request) {
  if (request.tools.size() != 1 || request.choice == sdk::tool_choice::none)
    return std::nullopt;
  const auto& name = request.tools.front().name;
  if (name == "classify_question")
    return classify(request);
  if (name == "search_queries")
    return queries(request);
  if (name == "write_plan")
    return plan(request);
  if (name == "reflect")
    return reflect(request);
  if (name == "judge_claims")
    return judge(request);
  return std::nullopt;
}

} // namespace quarry::plugins::llm_extractive
