// The extractive provider's answer to each role of the orchestrator
// strategy (clarification, plan, orchestrator cycles, agents' reports, the
// final report) and to a plain chat.

#include "internal.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <set>

namespace quarry::plugins::llm_extractive {

namespace {

answer respond_clarify(const sdk::chat_request& req) {
  answer result;
  if (req.choice != sdk::tool_choice::none) {
    const sdk::tool_definition* skip = find_tool(req, "generate_plan");
    for (const auto& tool : req.tools) {
      if (skip != nullptr)
        break;
      auto name = sdk::to_lower(tool.name);
      if (contains(name, "plan") || contains(name, "skip"))
        skip = &tool;
    }
    if (skip != nullptr) {
      result.tool_calls.push_back(
        make_call(count_calls(req.messages) + 1, skip->name, nlohmann::json::object()));
      return result;
    }
  }
  result.text = "No clarification needed.";
  return result;
}

// An orchestrator cycle: one research_agent call per step of the plan (the
// research context's, else the question split) without a result, at most
// the parallel limit (the configured one, lowered by the context's), then
// generate_report.
answer respond_orchestrate(const sdk::chat_request& req, const compose_options& opts) {
  answer result;
  auto plan = req.research.plan;
  if (plan.empty())
    plan = split_question(question_of(req));
  std::vector<int> attempts(plan.size(), 0);
  std::vector<bool> done(plan.size(), false);
  for (const auto& rec : collect_calls(req.messages)) {
    if (rec.call.name != "research_agent" || rec.result == nullptr)
      continue;
    auto args = parse_arguments(rec.call.arguments);
    auto task = args.contains("task") && args["task"].is_string() ? args["task"].get<std::string>()
                                                                  : std::string{};
    auto step = match_step(plan, task);
    if (step < 0)
      continue;
    auto& n = attempts[static_cast<size_t>(step)];
    ++n;
    if (!looks_failed(rec.result->content) || n >= 2)
      done[static_cast<size_t>(step)] = true;
  }
  auto limit = std::max(1, opts.max_parallel);
  if (req.research.max_parallel_agents > 0)
    limit = std::min(limit, req.research.max_parallel_agents);
  auto tools_ok = req.choice != sdk::tool_choice::none;
  auto next_id = count_calls(req.messages) + 1;
  if (tools_ok && find_tool(req, "research_agent") != nullptr) {
    for (size_t i = 0; i < plan.size(); ++i) {
      if (done[i] || result.tool_calls.size() >= static_cast<size_t>(limit))
        continue;
      result.tool_calls.push_back(
        make_call(next_id++, "research_agent", nlohmann::json{{"task", plan[i]}}));
    }
    if (!result.tool_calls.empty())
      return result;
  }
  if (tools_ok && find_tool(req, "generate_report") != nullptr) {
    result.tool_calls.push_back(make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "All plan steps have been researched.";
  return result;
}

// The final report from the research_agent results of the history, one
// section per step of the plan (the research context's, else the tasks).
answer respond_final(const sdk::chat_request& req) {
  std::vector<finding> findings;
  for (const auto& rec : collect_calls(req.messages)) {
    if (rec.call.name != "research_agent" || rec.result == nullptr
        || looks_failed(rec.result->content))
      continue;
    auto args = parse_arguments(rec.call.arguments);
    finding item;
    if (args.contains("task") && args["task"].is_string())
      item.task = args["task"].get<std::string>();
    item.report = rec.result->content;
    findings.push_back(std::move(item));
  }
  auto plan = req.research.plan;
  if (plan.empty())
    for (const auto& item : findings)
      if (!item.task.empty() && std::find(plan.begin(), plan.end(), item.task) == plan.end())
        plan.push_back(item.task);
  answer result;
  result.text = compose_final(question_of(req), plan, findings);
  return result;
}

answer respond_chat(const sdk::chat_request& req, const compose_options& opts) {
  answer result;
  size_t last_user = req.messages.size();
  for (size_t i = req.messages.size(); i > 0; --i)
    if (req.messages[i - 1].author == sdk::role::user) {
      last_user = i - 1;
      break;
    }
  std::string query = last_user < req.messages.size() ? req.messages[last_user].content
                                                      : std::string{};
  std::vector<std::string> sentences;
  std::set<std::string> seen;
  auto add = [&](std::string_view text) {
    for (auto& sentence : split_sentences(text))
      if (seen.insert(sentence_key(sentence)).second)
        sentences.push_back(std::move(sentence));
  };
  for (size_t i = 0; i < req.messages.size(); ++i) {
    if (i == last_user)
      continue;
    const auto& msg = req.messages[i];
    if (msg.author == sdk::role::tool) {
      auto docs = parse_tool_result(msg.content);
      if (!docs.empty()) {
        for (const auto& doc : docs)
          for (const auto& text : doc.texts)
            add(text);
        continue;
      }
    }
    add(msg.content);
  }
  std::vector<std::vector<std::string>> docs;
  for (const auto& sentence : sentences)
    docs.push_back(tokenize(sentence));
  auto best = top_k(bm25_scores(docs, tokenize(query)),
                    static_cast<size_t>(std::max(1, opts.max_sentences)));
  std::sort(best.begin(), best.end());
  for (auto i : best) {
    if (!result.text.empty())
      result.text += ' ';
    result.text += sentences[i];
  }
  if (result.text.empty())
    result.text = "No matching text was found in the conversation (extractive "
                  "provider: no language model is used).";
  return result;
}

} // namespace

answer respond(const sdk::chat_request& request, const compose_options& opts) {
  if (auto structured = respond_structured(request))
    return *structured;
  auto tag = sdk::to_lower(sdk::trim(request.role_tag));
  if (tag == "clarify")
    return respond_clarify(request);
  if (tag == "plan") {
    answer result;
    // A follow-up is planned from its own question (the research
    // context's); the conversation before it is context, not steps.
    result.text = format_plan(split_question(question_of(request)));
    return result;
  }
  if (tag == "orchestrate")
    return respond_orchestrate(request, opts);
  if (tag == "research")
    return respond_research(request);
  if (tag == "report") {
    answer result;
    auto docs = collect_documents(request.messages);
    // The documents a page reader returned: a call given `urls`.
    std::set<int> read;
    for (const auto& rec : collect_calls(request.messages)) {
      if (rec.result == nullptr)
        continue;
      auto args = parse_arguments(rec.call.arguments);
      if (args.contains("urls"))
        for (const auto& doc : parse_tool_result(rec.result->content))
          read.insert(doc.number);
    }
    for (auto& doc : docs)
      doc.read = read.count(doc.number) > 0;
    result.text = compose_report(task_of(request), docs, opts.max_sentences);
    return result;
  }
  if (tag == "final")
    return respond_final(request);
  if (tag == "synthesize")
    return respond_synthesize(request);
  return respond_chat(request, opts);
}

} // namespace quarry::plugins::llm_extractive
