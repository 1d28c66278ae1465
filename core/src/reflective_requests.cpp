// Requests of the reflective strategy (see reflective_requests.hpp).

#include "quarry/core/reflective_requests.hpp"

#include "quarry/core/research_requests.hpp"
#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <utility>

namespace quarry::core::reflective {

namespace {

std::string clipped(std::string_view text, size_t limit) {
  if (text.size() <= limit)
    return std::string{text};
  return std::string{sdk::utf8_prefix(text, limit)} + " [...]";
}

std::string status_mark(step_status s) {
  switch (s) {
    case step_status::completed:
      return "[x]";
    case step_status::in_progress:
      return "[~]";
    case step_status::skipped:
      return "[-]";
    case step_status::pending:
      return "[ ]";
  }
  return "[ ]";
}

// A completed step's observation as the planner sees it.
constexpr size_t planner_observation_bytes = 3000;

// The completed steps of `p` and their observations, each cut to its share
// of `budget_bytes` when they do not all fit (synthesizer_input).
std::vector<std::pair<const plan_step*, std::string>> synthesized_steps(const plan& p,
                                                                        size_t budget_bytes) {
  std::vector<const plan_step*> done;
  size_t total = 0;
  for (const auto& s : p.steps)
    if (s.status == step_status::completed) {
      done.push_back(&s);
      total += s.observation.size();
    }
  auto share = done.empty() ? budget_bytes : budget_bytes / done.size();
  std::vector<std::pair<const plan_step*, std::string>> out;
  for (const auto* s : done)
    out.emplace_back(s, total <= budget_bytes ? s->observation : clipped(s->observation, share));
  return out;
}

void append_plan(std::string& out, const plan& p) {
  out += "Plan (iteration " + std::to_string(p.iteration) + "): " + p.title + "\n";
  for (const auto& s : p.steps) {
    out += status_mark(s.status) + " " + s.id + " " + s.title;
    if (s.type == step_type::analysis)
      out += " (analysis)";
    out += "\n";
  }
}

} // namespace

sdk::chat_request structured_request(std::string system, std::string user,
                                     sdk::tool_definition tool, std::string role_tag,
                                     sdk::research_context research) {
  sdk::chat_request r;
  sdk::chat_message sys;
  sys.author = sdk::role::system;
  sys.content = std::move(system);
  sdk::chat_message u;
  u.author = sdk::role::user;
  u.content = std::move(user);
  r.messages = {std::move(sys), std::move(u)};
  r.tools = {std::move(tool)};
  r.choice = sdk::tool_choice::required;
  r.max_tokens = structured_max_tokens;
  r.role_tag = std::move(role_tag);
  r.research = std::move(research);
  return r;
}

sdk::chat_request repair_request(sdk::chat_request first, const sdk::chat_result& answer,
                                 std::string_view tool, std::string_view problem) {
  sdk::chat_message said;
  said.author = sdk::role::assistant;
  said.content = clipped(answer.text, 8000);
  said.tool_calls = answer.tool_calls;
  first.messages.push_back(said);
  for (const auto& c : answer.tool_calls) {
    sdk::chat_message result;
    result.author = sdk::role::tool;
    result.tool_call_id = c.id;
    result.tool_name = c.name;
    result.content = "Not usable: " + std::string{problem};
    first.messages.push_back(std::move(result));
  }
  sdk::chat_message ask;
  ask.author = sdk::role::user;
  ask.content = repair_message(tool, problem);
  first.messages.push_back(std::move(ask));
  return first;
}

std::string coordinator_input(const std::string& question,
                              const std::vector<sdk::chat_message>& conversation) {
  auto recent = conversation_window(conversation);
  std::string out;
  if (!recent.empty()) {
    out += "The conversation so far (most recent last):\n\n";
    for (const auto& m : recent) {
      out += m.author == sdk::role::user ? "User: " : "Assistant: ";
      out += clipped(m.content, 3000);
      out += "\n\n";
    }
  }
  out += "The question to classify:\n\n";
  out += recent.empty() ? question : std::string{lexical::asked_question(question)};
  return out;
}

std::string step_range(const depth_profile& p) {
  if (p.min_steps == p.max_steps)
    return std::to_string(p.max_steps);
  return std::to_string(p.min_steps) + " to " + std::to_string(p.max_steps);
}

std::string planner_input(const std::string& question, const std::string& background,
                          const plan* current, const reflection* feedback, plan_room room,
                          depth d) {
  std::string out = "The question:\n\n" + question + "\n\nDepth: " + to_string(d) + "\n";
  if (!sdk::trim(background).empty())
    out += "\nBackground search results (snippets only):\n\n" + clipped(background, 24000) + "\n";
  if (current != nullptr) {
    out += "\nCompleted steps (kept as they are):\n";
    bool any = false;
    for (const auto& s : current->steps) {
      if (s.status != step_status::completed)
        continue;
      any = true;
      out += "\n- " + s.title
             + "\n  Observation: " + clipped(s.observation, planner_observation_bytes) + "\n";
    }
    if (!any)
      out += "(none)\n";
    if (feedback != nullptr) {
      out += "\nThe reflector asked to adjust the plan: " + feedback->reasoning + "\n";
      for (const auto& c : feedback->suggested_changes)
        out += "- " + c + "\n";
    }
  }
  out += "\nWrite ";
  out += room.at_least == room.room
           ? std::to_string(room.room)
           : std::to_string(room.at_least) + " to " + std::to_string(room.room);
  out += current != nullptr ? " new steps." : " steps.";
  return out;
}

std::string step_text(const plan& p, size_t index) {
  if (index >= p.steps.size())
    return {};
  const auto& s = p.steps[index];
  std::string out = s.title;
  if (!s.description.empty() && s.description != s.title)
    out += ": " + s.description;
  return out;
}

std::string step_task(const std::string& question, const plan& p, size_t index) {
  if (index >= p.steps.size())
    return question;
  return step_text(p, index) + "\n\n(This is one step of research on: " + question + ")";
}

std::string reflector_input(const std::string& question, const plan& p, size_t just_done,
                            size_t sources_total, size_t new_sources) {
  std::string out = "The question:\n\n" + question + "\n\n";
  append_plan(out, p);
  out += "\nObservations so far:\n";
  for (const auto& s : p.steps)
    if (s.status == step_status::completed)
      out += "\n" + s.id + " " + s.title + ":\n"
             + clipped(s.observation, reflector_observation_bytes) + "\n";
  if (just_done < p.steps.size())
    out += "\nThe step just completed: " + p.steps[just_done].id + " " + p.steps[just_done].title
           + "\n";
  out += "Sources found so far: " + std::to_string(sources_total) + "\n";
  out += "New sources found by this step: " + std::to_string(new_sources) + "\n";
  out += "Completed steps: " + std::to_string(completed_steps(p)) + "\n";
  return out;
}

std::string synthesizer_input(const std::string& question, const plan& p, size_t budget_bytes) {
  auto done = synthesized_steps(p, budget_bytes);
  std::string out = "The question:\n\n" + question + "\n\nResearch plan: " + p.title + "\n";
  for (const auto& [s, observation] : done) {
    out += "\n## " + s->title + "\n\n";
    out += observation;
    out += "\n";
  }
  if (done.empty())
    out += "\nNo step produced an observation.\n";
  return out;
}

sdk::research_context coordinator_context(const std::string& question,
                                          const std::vector<sdk::chat_message>& conversation) {
  // As coordinator_input shows it.
  return research_context_of(question, conversation);
}

sdk::research_context planner_context(const std::string& question, const plan* current,
                                      plan_room room) {
  auto out = research_context_of(question);
  out.min_steps = room.at_least;
  out.max_steps = room.room;
  if (current == nullptr)
    return out;
  for (const auto& s : current->steps) {
    out.plan.push_back(s.title);
    if (s.status == step_status::completed)
      out.findings.push_back({s.title, clipped(s.observation, planner_observation_bytes)});
  }
  return out;
}

sdk::research_context reflector_context(const std::string& question, size_t new_sources) {
  auto out = research_context_of(question);
  out.new_sources = static_cast<int>(std::min<size_t>(new_sources, 1000000));
  return out;
}

sdk::research_context synthesizer_context(const std::string& question, const plan& p,
                                          size_t budget_bytes) {
  auto out = research_context_of(question);
  for (auto& [s, observation] : synthesized_steps(p, budget_bytes))
    out.findings.push_back({s->title, std::move(observation)});
  return out;
}

} // namespace quarry::core::reflective
