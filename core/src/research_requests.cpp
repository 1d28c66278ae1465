// The research strategy's requests to its models and its answers to tool
// calls.

#include "quarry/core/research_requests.hpp"

#include "quarry/core/citations.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/history.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/core/think_stream.hpp"
#include "quarry/core/tool_args.hpp"
#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>

namespace quarry::core {

namespace {

sdk::chat_message message(sdk::role author, std::string text) {
  sdk::chat_message m;
  m.author = author;
  m.content = std::move(text);
  return m;
}

// The request around a history build_history accepted, or its message.
request_or_error with_history(history_input in, std::vector<sdk::tool_definition> tools,
                              sdk::tool_choice choice, int64_t max_tokens, const char* role_tag) {
  auto built = build_history(std::move(in));
  if (auto* why = std::get_if<std::string>(&built))
    return std::move(*why);
  sdk::chat_request req;
  req.messages = std::get<std::vector<sdk::chat_message>>(std::move(built));
  req.tools = std::move(tools);
  req.choice = choice;
  req.max_tokens = max_tokens;
  req.role_tag = role_tag;
  return req;
}

bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

} // namespace

size_t openai_tool_text_size(const sdk::tool_definition& tool) {
  // The text of `dump_json(tool.to_openai())`, keys in nlohmann's order,
  // written without copying the schema into a new tree; one buffer per
  // thread.
  thread_local std::string text;
  text.assign(R"({"function":{"description":)");
  sdk::append_json_string(text, tool.description);
  text.append(R"(,"name":)");
  sdk::append_json_string(text, tool.name);
  text.append(R"(,"parameters":)");
  sdk::append_json(text, tool.parameters);
  text.append(R"(},"type":"function"})");
  return text.size();
}

sdk::research_context research_context_of(const std::string& question) {
  sdk::research_context out;
  auto asked = lexical::asked_question(question);
  out.question = std::string{asked};
  out.follow_up = asked.size() != question.size();
  return out;
}

std::vector<sdk::chat_message>
conversation_window(const std::vector<sdk::chat_message>& conversation) {
  auto counts = [](const sdk::chat_message& m) {
    return (m.author == sdk::role::user || m.author == sdk::role::assistant) && !blank(m.content);
  };
  // From the (max_user_messages_for_context - 1)-th last user message on.
  size_t first = 0;
  size_t users = 0;
  for (size_t i = conversation.size(); i > 0; --i) {
    const auto& m = conversation[i - 1];
    if (counts(m) && m.author == sdk::role::user && ++users == max_user_messages_for_context - 1) {
      first = i - 1;
      break;
    }
  }
  std::vector<sdk::chat_message> out;
  for (size_t i = first; i < conversation.size(); ++i)
    if (counts(conversation[i])) {
      sdk::chat_message m;
      m.author = conversation[i].author;
      m.content = conversation[i].content;
      out.push_back(std::move(m));
    }
  return out;
}

std::vector<sdk::chat_message> thread_messages(const std::string& question,
                                               const std::vector<sdk::chat_message>& conversation) {
  auto out = conversation_window(conversation);
  out.push_back(message(sdk::role::user,
                        out.empty() ? question : std::string{lexical::asked_question(question)}));
  return out;
}

sdk::research_context research_context_of(const std::string& question,
                                          const std::vector<sdk::chat_message>& conversation) {
  auto out = research_context_of(question);
  if (!conversation_window(conversation).empty())
    out.follow_up = true;
  return out;
}

std::vector<std::string> plan_steps(std::string_view plan) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < plan.size()) {
    auto end = plan.find('\n', pos);
    if (end == std::string_view::npos)
      end = plan.size();
    auto line = sdk::trim(plan.substr(pos, end - pos));
    pos = end + 1;
    size_t d = 0;
    while (d < line.size() && d < 3 && line[d] >= '0' && line[d] <= '9')
      ++d;
    if (d == 0 || d + 1 >= line.size() || (line[d] != '.' && line[d] != ')') || line[d + 1] != ' ')
      continue;
    // The item with its runs of white space made one space.
    std::string item;
    for (auto c : sdk::trim(line.substr(d + 2))) {
      if (sdk::is_ascii_space(c)) {
        if (!item.empty() && item.back() != ' ')
          item += ' ';
      } else {
        item += c;
      }
    }
    if (!item.empty())
      out.push_back(std::move(item));
  }
  return out;
}

sdk::chat_message user_message(std::string text) {
  return message(sdk::role::user, std::move(text));
}

sdk::chat_message system_message(std::string text) {
  return message(sdk::role::system, std::move(text));
}

sdk::chat_request clarification_request(std::string system, const std::string& question,
                                        const std::vector<sdk::chat_message>& conversation) {
  sdk::chat_request req;
  req.messages = {system_message(std::move(system))};
  for (auto& m : thread_messages(question, conversation))
    req.messages.push_back(std::move(m));
  req.tools = {generate_plan_tool()};
  req.choice = sdk::tool_choice::automatic;
  req.role_tag = "clarify";
  req.max_tokens = clarification_max_tokens;
  req.research = research_context_of(question, conversation);
  return req;
}

sdk::chat_request plan_request(std::string system, const std::string& question,
                               std::string reminder,
                               const std::vector<sdk::chat_message>& conversation) {
  sdk::chat_request req;
  req.messages = {system_message(std::move(system))};
  for (auto& m : thread_messages(question, conversation))
    req.messages.push_back(std::move(m));
  req.messages.push_back(user_message(std::move(reminder)));
  req.choice = sdk::tool_choice::none;
  req.role_tag = "plan";
  req.max_tokens = plan_max_tokens;
  req.research = research_context_of(question, conversation);
  return req;
}

request_or_error orchestrator_request(const orchestrator_input& in) {
  history_input h;
  h.system = system_message(in.system);
  h.history = thread_messages(in.question, in.conversation);
  h.history.insert(h.history.end(), in.history.begin(), in.history.end());
  // The history is the thread's from its fifth last user message (the
  // question is the last; the orchestrator's rounds follow it).
  h.last_n_user_messages = max_user_messages_for_context;
  if (!in.reminder.empty())
    h.reminder = make_reminder(in.reminder);
  std::vector<sdk::tool_definition> defs{research_agent_tool(), generate_report_tool(false)};
  if (!in.reasoning_model)
    defs.push_back(think_tool(false));
  h.available_tokens = in.context_tokens - in.max_tokens - orchestrator_reserve_tokens;
  auto out = with_history(std::move(h), std::move(defs), sdk::tool_choice::required, in.max_tokens,
                          "orchestrate");
  if (auto* req = std::get_if<sdk::chat_request>(&out)) {
    req->research = research_context_of(in.question, in.conversation);
    req->research.plan = plan_steps(in.plan);
    req->research.max_parallel_agents = in.max_parallel_agents;
  }
  return out;
}

std::string orchestrator_reminder(int cycle, bool retried_empty,
                                  const std::string& first_cycle_reminder) {
  if (retried_empty && cycle == 0)
    return orchestrator_retry_reminder;
  if (cycle == 1)
    return first_cycle_reminder;
  return {};
}

request_or_error
final_report_request(std::string system, const std::string& question, const std::string& plan,
                     const std::vector<sdk::chat_message>& history, const std::string& reminder,
                     int64_t context_tokens, int64_t max_tokens) {
  history_input h;
  h.system = system_message(std::move(system));
  h.history.push_back(user_message(question));
  h.history.insert(h.history.end(), history.begin(), history.end());
  h.reminder = make_reminder(reminder);
  h.available_tokens = context_tokens - max_tokens;
  auto out = with_history(std::move(h), {}, sdk::tool_choice::none, max_tokens, "final");
  if (auto* req = std::get_if<sdk::chat_request>(&out)) {
    req->research = research_context_of(question);
    req->research.plan = plan_steps(plan);
  }
  return out;
}

request_or_error research_step_request(research_step_input in) {
  auto defs = std::move(in.tools);
  defs.push_back(generate_report_tool(true));
  if (!in.reasoning_model)
    defs.push_back(think_tool(true));
  history_input h;
  h.system = system_message(std::move(in.system));
  h.history = std::move(in.history);
  if (in.reminder)
    h.reminder = user_message(std::move(*in.reminder));
  int64_t def_tokens = 0;
  for (const auto& d : defs)
    def_tokens += static_cast<int64_t>(openai_tool_text_size(d) / 4);
  h.available_tokens = std::max<int64_t>(0, in.context_tokens - def_tokens - in.max_tokens);
  auto out = with_history(std::move(h), std::move(defs), sdk::tool_choice::required, in.max_tokens,
                          "research");
  if (auto* req = std::get_if<sdk::chat_request>(&out))
    req->research.task = std::move(in.task);
  return out;
}

request_or_error agent_report_request(std::string system, const std::string& task,
                                      const std::vector<sdk::chat_message>& history,
                                      std::string reminder, int64_t context_tokens,
                                      int64_t max_tokens) {
  history_input h;
  h.system = system_message(std::move(system));
  h.history = history;
  h.reminder = user_message(std::move(reminder));
  h.available_tokens = std::max<int64_t>(0, context_tokens - max_tokens);
  auto out = with_history(std::move(h), {}, sdk::tool_choice::none, max_tokens, "report");
  if (auto* req = std::get_if<sdk::chat_request>(&out))
    req->research.task = task;
  return out;
}

std::string render_prompt(const prompt_library& lib, std::string_view name,
                          const prompt_vars& vars) {
  auto r = lib.render(name, vars);
  if (std::holds_alternative<prompt_error>(r))
    return {};
  return std::get<std::string>(std::move(r));
}

std::string guidance_text(const prompt_library& lib, std::string_view name, bool on) {
  if (!on)
    return {};
  const auto* text = lib.find(name);
  return text ? *text : std::string{};
}

std::string clarification_system(const prompt_library& lib, const std::string& current_datetime,
                                 bool internal_search) {
  return render_prompt(
    lib, "clarification",
    {{"current_datetime", current_datetime},
     {"internal_search_clarification_guidance",
      guidance_text(lib, "internal_search_clarification_guidance", internal_search)}});
}

std::string orchestrator_system(const prompt_library& lib, const orchestrator_prompt& p) {
  return render_prompt(
    lib, p.reasoning_model ? "orchestrator_reasoning" : "orchestrator",
    {{"current_datetime", p.current_datetime},
     {"current_cycle_count", std::to_string(p.cycle)},
     {"max_cycles", std::to_string(p.max_cycles)},
     {"internal_search_research_task_guidance",
      guidance_text(lib, "internal_search_research_task_guidance", p.internal_search)},
     {"max_parallel_agents", std::to_string(p.max_parallel_agents)},
     {"research_plan", p.plan}});
}

namespace {

// The variables naming the agent's tools in its guidance and reminder.
prompt_vars tool_name_vars(const agent_prompt& p) {
  return {{"web_search_tool", p.web_search_tool},
          {"internal_search_tool", p.internal_search_tool},
          {"open_url_tool", p.open_url_tool}};
}

} // namespace

std::string research_agent_system(const prompt_library& lib, const agent_prompt& p) {
  auto names = tool_name_vars(p);
  auto guidance = [&](std::string_view name, bool on) {
    return on ? render_prompt(lib, name, names) : std::string{};
  };
  prompt_vars vars{
    {"available_tools", join_tool_names(p.tools)},
    {"current_datetime", p.current_datetime},
    {"current_cycle_count", std::to_string(p.cycle)},
    {"max_cycles", std::to_string(p.max_cycles)},
    {"internal_search_tool_guidance", guidance("internal_search_tool_guidance", p.internal_search)},
    {"web_search_tool_guidance", guidance("web_search_tool_guidance", p.web_search)},
    {"open_url_tool_guidance",
     guidance(p.reasoning_model ? "open_url_tool_guidance_reasoning" : "open_url_tool_guidance",
              p.open_url)},
  };
  auto system = render_prompt(
    lib, p.reasoning_model ? "research_agent_reasoning" : "research_agent", vars);
  if (system.empty())
    return system;
  if (!p.context.empty())
    system += "\n\n" + p.context;
  return system;
}

std::string open_url_reminder(const prompt_library& lib, const agent_prompt& p) {
  return render_prompt(lib, "open_url_reminder", tool_name_vars(p));
}

agent_step_calls split_agent_calls(std::vector<sdk::tool_call> calls) {
  agent_step_calls out;
  for (auto& c : calls) {
    if (c.name == "generate_report")
      out.report = true;
    else if (c.name == think_stream::tool_name)
      out.thinks.push_back(std::move(c));
    else
      out.work.push_back(std::move(c));
  }
  return out;
}

std::string research_task(const sdk::tool_call& call) {
  auto parsed = parse_tool_arguments(call.arguments);
  std::string task;
  if (auto* obj = std::get_if<nlohmann::json>(&parsed))
    if (auto t = obj->find("task"); t != obj->end() && t->is_string())
      task = t->get<std::string>();
  return blank(task) ? std::string{} : task;
}

std::string orchestrator_tool_answer(const sdk::tool_call& call, bool alone) {
  if (call.name == think_stream::tool_name)
    return think_acknowledgement;
  if (alone)
    return "There is no tool named '" + call.name
           + "'. Use research_agent, think_tool or generate_report.";
  return "There is no tool named '" + call.name + "'.";
}

std::string agent_failed_text(const std::string& why) {
  return "The research agent failed (" + why
         + "). Try another approach or carry on without this task.";
}

std::string unknown_tool_text(const std::string& name, const std::vector<std::string>& available) {
  return "There is no tool named '" + name + "'. Available tools: " + join_tool_names(available)
         + ", think_tool and generate_report.";
}

sdk::tool_result tool_timeout_result(const std::string& tool, std::chrono::milliseconds limit) {
  sdk::tool_result r;
  r.llm_text = "The " + tool + " tool did not finish within " + format_duration(limit)
               + "; continue without its result.";
  r.failure = sdk::make_error(sdk::errc::timeout, r.llm_text);
  return r;
}

std::string tool_call_failed_text(const std::string& tool, const std::string& why) {
  return "The " + tool + " call failed: " + why + ". Try another approach.";
}

std::string findings_report(const std::vector<std::pair<std::string, std::string>>& findings,
                            const std::string& why) {
  if (findings.empty())
    return "No findings could be gathered before the research ended (" + why + ").";
  // Said where the reader looks: this is not a written report.
  std::string body = "> **Note:** the model did not write this report (" + why
                     + "). Below are the research agents' own reports, as they wrote "
                       "them.\n\n";
  for (const auto& [task, report] : findings)
    body += "## " + task + "\n\n" + report + "\n\n";
  return body;
}

std::string time_cut_report(const std::string& written,
                            const std::map<int, sdk::document>& documents,
                            std::chrono::milliseconds limit) {
  constexpr size_t excerpt_bytes = 300;
  auto note = std::string{time_cut_marker} + "research.agent_timeout, " + format_duration(limit)
              + ") before it finished its report";
  if (written.find_first_not_of(" \t\r\n") != std::string::npos) {
    // Whole, as it was streamed: the note follows it.
    return written + "\n\n" + note + "; it is incomplete.\n";
  }
  // One line per document: what the agent read, as it found it.
  auto one_line = [](std::string_view text) {
    std::string out;
    bool space = false;
    for (auto c : sdk::utf8_prefix(text, excerpt_bytes)) {
      if (c == '[')
        c = '(';
      else if (c == ']')
        c = ')';
      if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
        space = !out.empty();
        continue;
      }
      if (space)
        out += ' ';
      space = false;
      out += c;
    }
    return out;
  };
  std::string body;
  for (const auto& [n, d] : documents) {
    auto title = one_line(d.title.empty() ? d.url : d.title);
    auto excerpt = one_line(d.snippet.empty() ? d.content : d.snippet);
    body += "- " + (title.empty() ? std::string{"Source"} : title);
    if (!excerpt.empty())
      body += ": " + excerpt;
    body += " [" + std::to_string(n) + "]\n";
  }
  if (body.empty())
    return {};
  return "The sources the research agent had read:\n\n" + body + "\n" + note
         + "; these are its sources, not a written report.\n";
}

std::vector<std::pair<int, sdk::document>>
cited_documents(const std::string& report, const std::map<int, sdk::document>& documents) {
  citation_processor seen{citation_mode::keep_markers};
  citation_mapping local;
  for (const auto& [n, d] : documents)
    local.insert(n, make_document_ref(d));
  seen.update_mapping(local);
  seen.process(report);
  seen.finish();
  std::vector<std::pair<int, sdk::document>> out;
  for (const auto& [n, ref] : seen.seen_citations())
    if (auto d = documents.find(n); d != documents.end())
      out.emplace_back(n, d->second);
  return out;
}

bool is_cut_report(const std::string& report) {
  return report.find(report_cut_marker) != std::string::npos;
}

sdk::chat_request continuation_request(sdk::chat_request req, const std::string& written) {
  sdk::chat_message said;
  said.author = sdk::role::assistant;
  said.content = written;
  req.messages.push_back(std::move(said));
  sdk::chat_message ask;
  ask.author = sdk::role::user;
  ask.content = continuation_prompt;
  req.messages.push_back(std::move(ask));
  return req;
}

std::string report_cut_notice(int64_t max_tokens, int continuations) {
  auto text = "the report was cut by the model's output limit (" + std::to_string(max_tokens)
              + " tokens per call";
  if (continuations > 0)
    text += ", after " + std::to_string(continuations)
            + (continuations == 1 ? " continuation" : " continuations");
  return text + "): it is incomplete";
}

std::string report_cut_note(int64_t max_tokens, const std::string& key) {
  return std::string{"\n\n"} + report_cut_marker + std::to_string(max_tokens)
         + " tokens) cut it before the end; raise " + key
         + " or research.report_continuations, or use a model with a larger output "
           "limit.\n";
}

} // namespace quarry::core
