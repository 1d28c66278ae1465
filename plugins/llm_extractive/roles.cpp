// The extractive provider in the reflective strategy's structured roles:
// lexical classification, search queries, fixed plans per depth, a reflector
// that completes when a step found no new source, and a lexical judge. Each
// answers with one call to the tool the request offers.

#include "extractive.hpp"

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

/// The text after the line `label` up to the next blank line (or the end).
std::string block_after(std::string_view text, std::string_view label) {
  auto at = text.find(label);
  if (at == std::string_view::npos)
    return {};
  auto start = text.find('\n', at);
  if (start == std::string_view::npos)
    return {};
  start = text.find_first_not_of('\n', start);
  if (start == std::string_view::npos)
    return {};
  auto end = text.find("\n\n", start);
  return std::string{sdk::trim(text.substr(start, end == std::string_view::npos
                                                    ? std::string_view::npos
                                                    : end - start))};
}

/// The number after `label` on its line, or `fallback`.
long number_after(std::string_view text, std::string_view label, long fallback) {
  auto at = text.find(label);
  if (at == std::string_view::npos)
    return fallback;
  at += label.size();
  while (at < text.size() && (text[at] == ' ' || text[at] == ':'))
    ++at;
  long value = 0;
  size_t digits = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 9) {
    value = value * 10 + (text[at++] - '0');
    ++digits;
  }
  return digits == 0 ? fallback : value;
}

/// The first user message (the role's input; a repair request adds more).
std::string first_user_text(const sdk::chat_request& req) {
  for (const auto& m : req.messages)
    if (m.author == sdk::role::user)
      return m.content;
  return {};
}

bool mentions_any(const std::string& lower, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](const char* w) { return lower.find(w) != std::string::npos; });
}

answer classify(const sdk::chat_request& req) {
  auto input = first_user_text(req);
  auto question = block_after(input, "The question to classify:");
  if (question.empty())
    question = input;
  auto lower = sdk::to_lower(question);
  auto words = lexical::count_words(question);
  // Clauses: question marks and semicolons beyond the first.
  auto parts = std::max<size_t>(1, static_cast<size_t>(std::count_if(
                                     question.begin(), question.end(),
                                     [](char c) { return c == '?' || c == ';'; })));
  std::string complexity = "moderate";
  if (mentions_any(lower, {"compare", "comparison", " versus ", " vs", "trade-off",
                           "tradeoff", "pros and cons", "advantages and disadvantages"})
      || words > 30)
    complexity = "complex";
  else if (words <= 8 && parts == 1 && lower.find(" and ") == std::string::npos
           && lower.find(',') == std::string::npos)
    complexity = "simple";
  std::string follow = input.find("The conversation so far") != std::string::npos
                         ? "complex_follow_up"
                         : "new_topic";
  std::string depth = complexity == "simple"    ? "light"
                      : complexity == "complex" ? "extended"
                                                : "medium";
  answer out;
  out.tool_calls.push_back(one_call(
    "classify_question",
    {{"complexity", complexity},
     {"follow_up_type", follow},
     {"is_ambiguous", false},
     {"clarifying_questions", json::array()},
     {"recommended_depth", depth},
     {"reasoning", "Lexical estimate: " + std::to_string(words) + " words, "
                     + std::to_string(parts) + " parts."}}));
  return out;
}

answer queries(const sdk::chat_request& req) {
  auto input = first_user_text(req);
  // The task is the first paragraph; the question it serves may follow.
  auto end = input.find("\n\n");
  auto task = std::string{sdk::trim(input.substr(0, end))};
  if (task.empty())
    task = std::string{sdk::trim(input)};
  json qs = json::array();
  qs.push_back(std::string{sdk::utf8_prefix(task, 300)});
  // The first six words of the task that are not stop words, each once (a
  // word counts once whatever its inflections), as written.
  std::string keywords;
  std::set<std::string> seen;
  for (const auto& w : lexical::words(task))
    if (seen.insert(lexical::stem(w)).second && seen.size() <= 6)
      keywords += (keywords.empty() ? "" : " ") + w;
  if (!keywords.empty() && sdk::to_lower(keywords) != sdk::to_lower(task))
    qs.push_back(keywords);
  answer out;
  out.tool_calls.push_back(one_call("search_queries", {{"queries", qs}}));
  return out;
}

/// Generic aspects that fill a plan past the question's own parts.
const char* const fill_steps[] = {"Background and key facts", "Evidence and figures",
                                  "Practical consequences", "Limits and open questions",
                                  "Recent developments",       "Costs and trade-offs",
                                  "Views of experts",          "Examples and cases",
                                  "Alternatives",              "Summary of the evidence"};

answer plan(const sdk::chat_request& req) {
  auto input = first_user_text(req);
  auto question = block_after(input, "The question:");
  // "Write 3 to 6 steps." or "Write 2 new steps.": the last line.
  long at_least = 1;
  long room = 3;
  auto write = input.rfind("Write ");
  if (write != std::string::npos) {
    auto line = std::string_view{input}.substr(write);
    line = line.substr(0, line.find('\n'));
    at_least = number_after(line, "Write", 1);
    room = line.find(" to ") != std::string_view::npos ? number_after(line, " to ", at_least)
                                                        : at_least;
  }
  at_least = std::clamp(at_least, 1L, 10L);
  room = std::clamp(room, at_least, 10L);
  bool replan = input.find("Completed steps (kept as they are)") != std::string::npos;
  std::set<std::string> taken;
  if (replan) {
    // Titles of completed steps: "- Title" lines.
    auto block = input.substr(input.find("Completed steps (kept as they are)"));
    size_t pos = 0;
    while ((pos = block.find("\n- ", pos)) != std::string::npos) {
      auto e = block.find('\n', pos + 3);
      taken.insert(sdk::to_lower(sdk::trim(block.substr(pos + 3, e - pos - 3))));
      pos += 3;
    }
  }
  std::vector<std::string> titles;
  auto add = [&](const std::string& t) {
    auto key = sdk::to_lower(sdk::trim(t));
    if (!key.empty() && taken.insert(key).second)
      titles.push_back(std::string{sdk::trim(t)});
  };
  // A fixed plan: the question's parts, then generic aspects, up to the
  // minimum (a light plan stays short; deeper plans reach their minimum).
  if (!replan)
    for (const auto& part :
         split_question(lexical::asked_question(question), static_cast<size_t>(room)))
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
    steps.push_back({{"title", t},
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
  auto input = first_user_text(req);
  auto fresh = number_after(input, "New sources found by this step:", 1);
  answer out;
  out.tool_calls.push_back(one_call(
    "reflect", fresh == 0 ? json{{"decision", "COMPLETE"},
                                 {"reasoning", "The last step found no new source."}}
                          : json{{"decision", "CONTINUE"},
                                 {"reasoning", "The last step found "
                                                 + std::to_string(fresh) + " new sources."}}));
  return out;
}

answer judge(const sdk::chat_request& req) {
  auto input = first_user_text(req);
  json verdicts = json::array();
  size_t pos = 0;
  while ((pos = input.find("\nClaim ", pos)) != std::string::npos) {
    auto line_end = input.find('\n', pos + 1);
    auto line = std::string_view{input}.substr(pos + 1, line_end - pos - 1);
    auto colon = line.find(": ");
    pos = line_end == std::string::npos ? input.size() : line_end;
    if (colon == std::string_view::npos)
      continue;
    auto id = number_after(line, "Claim ", -1);
    auto claim = line.substr(colon + 2);
    std::string evidence;
    if (line_end != std::string::npos) {
      auto next_end = input.find('\n', line_end + 1);
      auto next = std::string_view{input}.substr(line_end + 1, next_end == std::string::npos
                                                                 ? std::string_view::npos
                                                                 : next_end - line_end - 1);
      auto q = next.find(": \"");
      if (sdk::starts_with(next, "Evidence from source") && q != std::string_view::npos
          && next.size() > q + 4 && next.back() == '"')
        evidence = std::string{next.substr(q + 3, next.size() - q - 4)};
    }
    if (id < 0)
      continue;
    if (evidence.empty()) {
      verdicts.push_back({{"id", id}, {"verdict", "no_evidence"}, {"quote", ""}});
      continue;
    }
    auto o = lexical::overlap_of(claim, evidence);
    verdicts.push_back(
      {{"id", id}, {"verdict", lexical::lexical_verdict(o)}, {"quote", evidence}});
  }
  answer out;
  out.tool_calls.push_back(one_call("judge_claims", {{"verdicts", verdicts}}));
  return out;
}

} // namespace

answer respond_synthesize(const sdk::chat_request& request) {
  std::string text;
  for (const auto& m : request.messages)
    if (m.author == sdk::role::user)
      text = m.content;
  std::string_view in = text;
  // "The question:\n\n<question>\n\nResearch plan: ...", then the steps.
  std::string question;
  if (auto q = in.find("The question:\n\n"); q != std::string_view::npos) {
    auto from = q + 15;
    auto to = in.find("\n\nResearch plan:", from);
    question = std::string{in.substr(from, to == std::string_view::npos ? 0 : to - from)};
  }
  std::vector<std::string> plan;
  std::vector<finding> findings;
  size_t at = 0;
  while ((at = in.find("\n## ", at)) != std::string_view::npos) {
    auto title_end = in.find('\n', at + 4);
    if (title_end == std::string_view::npos)
      break;
    auto next = in.find("\n## ", title_end);
    finding f;
    f.task = std::string{sdk::trim(in.substr(at + 4, title_end - at - 4))};
    f.report = std::string{sdk::trim(
      in.substr(title_end, (next == std::string_view::npos ? in.size() : next) - title_end))};
    plan.push_back(f.task);
    findings.push_back(std::move(f));
    at = title_end;
  }
  answer result;
  result.text = compose_final(question, plan, findings);
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
