// Policy of the reflective strategy (see reflective.hpp).

#include "quarry/core/reflective.hpp"

#include "quarry/core/tool_args.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <set>

namespace quarry::core::reflective {

using nlohmann::json;

namespace {

/// The longest text kept of one field a model wrote.
constexpr size_t max_field_bytes = 16 * 1024;

/// The longest search query kept.
constexpr size_t max_query_bytes = 400;

/// Steps a plan may ever hold (the deepest depth's maximum, with margin).
constexpr size_t max_draft_steps = 64;

std::string clip(std::string_view x, size_t limit) {
  return std::string{sdk::utf8_prefix(sdk::trim(x), limit)};
}

/// The string at `key`, trimmed and clipped; empty when absent or not a
/// string.
std::string text_at(const json& args, const char* key, size_t limit = max_field_bytes) {
  auto i = args.find(key);
  if (i == args.end() || !i->is_string())
    return {};
  return clip(i->get_ref<const std::string&>(), limit);
}

/// The bool at `key`; `fallback` when absent. Accepts "true"/"false" strings.
bool bool_at(const json& args, const char* key, bool fallback) {
  auto i = args.find(key);
  if (i == args.end())
    return fallback;
  if (i->is_boolean())
    return i->get<bool>();
  if (i->is_string()) {
    auto s = sdk::to_lower(sdk::trim(i->get_ref<const std::string&>()));
    if (s == "true" || s == "yes")
      return true;
    if (s == "false" || s == "no")
      return false;
  }
  return fallback;
}

/// The strings of the array at `key` (non-strings skipped), trimmed, empty
/// ones dropped, at most `max`.
std::vector<std::string> strings_at(const json& args, const char* key, size_t max,
                                    size_t limit = max_field_bytes) {
  std::vector<std::string> out;
  auto i = args.find(key);
  if (i == args.end())
    return out;
  auto take = [&](const json& x) {
    if (!x.is_string() || out.size() >= max)
      return;
    auto s = clip(x.get_ref<const std::string&>(), limit);
    if (!s.empty())
      out.push_back(std::move(s));
  };
  if (i->is_array())
    for (const auto& x : *i)
      take(x);
  else
    take(*i);
  return out;
}

template <class Enum, size_t N>
std::optional<Enum> parse_name(std::string_view x, const char* const (&names)[N]) {
  auto lower = sdk::to_lower(sdk::trim(x));
  for (size_t i = 0; i < N; ++i)
    if (lower == names[i])
      return static_cast<Enum>(i);
  return std::nullopt;
}

const char* const complexity_names[] = {"simple", "moderate", "complex"};
const char* const follow_up_names[] = {"new_topic", "clarification", "complex_follow_up"};
const char* const depth_names[] = {"auto", "light", "medium", "extended"};
const char* const mode_names[] = {"simple", "web_search", "deep_research"};
const char* const step_type_names[] = {"research", "analysis"};
const char* const step_status_names[] = {"pending", "in_progress", "completed", "skipped"};
const char* const decision_names[] = {"continue", "adjust", "complete"};

json enum_schema(const char* description, std::initializer_list<const char*> values) {
  json e = json::array();
  for (auto* v : values)
    e.push_back(v);
  return {{"type", "string"}, {"description", description}, {"enum", e}};
}

} // namespace

// -- vocabulary ---------------------------------------------------------------

const char* to_string(complexity x) noexcept {
  return complexity_names[static_cast<size_t>(x)];
}

const char* to_string(follow_up x) noexcept {
  return follow_up_names[static_cast<size_t>(x)];
}

const char* to_string(depth x) noexcept {
  return depth_names[static_cast<size_t>(x)];
}

const char* to_string(query_mode x) noexcept {
  return mode_names[static_cast<size_t>(x)];
}

const char* to_string(step_type x) noexcept {
  return step_type_names[static_cast<size_t>(x)];
}

const char* to_string(step_status x) noexcept {
  return step_status_names[static_cast<size_t>(x)];
}

const char* to_string(decision x) noexcept {
  switch (x) {
    case decision::continue_plan:
      return "CONTINUE";
    case decision::adjust:
      return "ADJUST";
    case decision::complete:
      return "COMPLETE";
  }
  return "CONTINUE";
}

std::optional<complexity> parse_complexity(std::string_view x) {
  return parse_name<complexity>(x, complexity_names);
}

std::optional<follow_up> parse_follow_up(std::string_view x) {
  return parse_name<follow_up>(x, follow_up_names);
}

std::optional<depth> parse_depth(std::string_view x) {
  return parse_name<depth>(x, depth_names);
}

std::optional<query_mode> parse_query_mode(std::string_view x) {
  return parse_name<query_mode>(x, mode_names);
}

std::optional<decision> parse_decision(std::string_view x) {
  return parse_name<decision>(x, decision_names);
}

// -- depths -------------------------------------------------------------------

depth_profile profile_for(depth d, int max_search_queries, int max_urls_to_crawl) {
  depth_profile p;
  p.max_search_queries = std::max(1, max_search_queries);
  p.max_urls_to_crawl = std::max(0, max_urls_to_crawl);
  switch (d) {
    case depth::light:
      p.min_steps = 1;
      p.max_steps = 3;
      p.react = false;
      break;
    case depth::automatic:
    case depth::medium:
      p.min_steps = 3;
      p.max_steps = 6;
      p.react = true;
      break;
    case depth::extended:
      p.min_steps = 5;
      p.max_steps = 10;
      p.react = true;
      break;
  }
  return p;
}

depth resolve_depth(depth requested, complexity c) {
  if (requested != depth::automatic)
    return requested;
  switch (c) {
    case complexity::simple:
      return depth::light;
    case complexity::moderate:
      return depth::medium;
    case complexity::complex:
      return depth::extended;
  }
  return depth::medium;
}

// -- structured outputs --------------------------------------------------------

std::string repair_message(std::string_view tool, std::string_view problem) {
  std::string out = "Your call to ";
  out += tool;
  out += " could not be used: ";
  out += problem;
  out += "\nCall ";
  out += tool;
  out += " once more with corrected arguments, and nothing else.";
  return out;
}

std::variant<json, invalid_output> structured_arguments(const std::vector<sdk::tool_call>& calls,
                                                        std::string_view tool) {
  const sdk::tool_call* found = nullptr;
  for (const auto& c : calls)
    if (c.name == tool) {
      found = &c;
      break;
    }
  if (found == nullptr) {
    if (calls.empty())
      return invalid_output{"there was no call to " + std::string{tool}
                            + "; the answer must be that one tool call."};
    return invalid_output{"the call was to " + clip(calls.front().name, 80) + ", not to "
                          + std::string{tool} + "."};
  }
  auto parsed = parse_tool_arguments(found->arguments);
  if (auto* why = std::get_if<std::string>(&parsed))
    return invalid_output{*why};
  return std::get<json>(std::move(parsed));
}

sdk::tool_definition classify_tool(int max_clarifying_questions) {
  sdk::tool_definition t;
  t.name = "classify_question";
  t.description = "Classify the user's question before any research: how complex it is, how "
                  "it relates to the conversation so far, whether it is ambiguous, and how "
                  "deep the research should go.";
  json props = {
    {"complexity", enum_schema("simple: one fact or a direct answer; moderate: several "
                               "aspects; complex: many aspects, comparisons or analysis.",
                               {"simple", "moderate", "complex"})},
    {"follow_up_type",
     enum_schema("new_topic, a clarification of the previous answer, or a follow-up that "
                 "needs new research.",
                 {"new_topic", "clarification", "complex_follow_up"})},
    {"is_ambiguous",
     {{"type", "boolean"},
      {"description", "The question cannot be researched "
                      "well without asking the user."}}},
    {"clarifying_questions",
     {{"type", "array"},
      {"items", {{"type", "string"}}},
      {"description", "At most " + std::to_string(std::max(0, max_clarifying_questions))
                        + " short questions for the user, only when ambiguous."}}},
    {"recommended_depth",
     enum_schema("How much research the question deserves.", {"light", "medium", "extended"})},
    {"reasoning", {{"type", "string"}, {"description", "One or two sentences on why."}}},
  };
  t.parameters = {{"type", "object"},
                  {"properties", props},
                  {"required", json::array({"complexity", "is_ambiguous", "reasoning"})}};
  return t;
}

std::variant<classification, invalid_output> read_classification(const json& args,
                                                                 int max_clarifying_questions) {
  if (!args.is_object())
    return invalid_output{"the arguments must be a JSON object."};
  classification out;
  auto c = args.find("complexity");
  if (c == args.end() || !c->is_string())
    return invalid_output{"complexity is required: simple, moderate or complex."};
  auto cx = parse_complexity(c->get_ref<const std::string&>());
  if (!cx)
    return invalid_output{"complexity must be simple, moderate or complex, not \""
                          + clip(c->get_ref<const std::string&>(), 40) + "\"."};
  out.complexity = *cx;
  if (auto f = parse_follow_up(text_at(args, "follow_up_type", 64)))
    out.follow_up_type = *f;
  if (auto d = parse_depth(text_at(args, "recommended_depth", 64)))
    out.recommended_depth = *d;
  out.reasoning = text_at(args, "reasoning");
  auto limit = static_cast<size_t>(std::max(0, max_clarifying_questions));
  out.clarifying_questions = strings_at(args, "clarifying_questions", limit, 1000);
  out.is_ambiguous = bool_at(args, "is_ambiguous", false) && !out.clarifying_questions.empty();
  if (!out.is_ambiguous)
    out.clarifying_questions.clear();
  return out;
}

sdk::tool_definition queries_tool(int max, int at_least) {
  max = std::max(1, max);
  at_least = std::clamp(at_least, 1, max);
  sdk::tool_definition t;
  t.name = "search_queries";
  t.description = "Give the web search queries to run, most useful first.";
  t.parameters = {{"type", "object"},
                  {"properties",
                   {{"queries",
                     {{"type", "array"},
                      {"items", {{"type", "string"}}},
                      {"minItems", at_least},
                      {"maxItems", max},
                      {"description", std::to_string(at_least) + " to " + std::to_string(max)
                                        + " focused search queries, each different."}}}}},
                  {"required", json::array({"queries"})}};
  return t;
}

std::string query_count_text(int max, int at_least) {
  max = std::max(1, max);
  at_least = std::clamp(at_least, 1, max);
  if (at_least == max)
    return std::to_string(max);
  if (at_least == 1)
    return "at most " + std::to_string(max);
  return std::to_string(at_least) + " to " + std::to_string(max);
}

std::variant<std::vector<std::string>, invalid_output> read_queries(const json& args, int max,
                                                                    int at_least) {
  if (!args.is_object())
    return invalid_output{"the arguments must be a JSON object."};
  max = std::max(1, max);
  at_least = std::clamp(at_least, 1, max);
  auto all = strings_at(args, "queries", max_draft_steps, max_query_bytes);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& q : all) {
    if (out.size() >= static_cast<size_t>(max))
      break;
    if (seen.insert(sdk::to_lower(q)).second)
      out.push_back(std::move(q));
  }
  if (out.empty())
    return invalid_output{"queries must hold at least one search query (a list of strings)."};
  if (out.size() < static_cast<size_t>(at_least))
    return invalid_output{"queries must hold " + query_count_text(max, at_least)
                          + " different search queries; the answer had "
                          + std::to_string(out.size()) + "."};
  return out;
}

sdk::tool_definition plan_tool(int at_least, int room) {
  at_least = std::max(0, at_least);
  room = std::max(at_least, room);
  sdk::tool_definition t;
  t.name = "write_plan";
  t.description = "Write the research plan: the steps still to do, in order. Steps already "
                  "completed are kept as they are; do not repeat them.";
  json step = {
    {"type", "object"},
    {"properties",
     {{"title", {{"type", "string"}, {"description", "Short, in plain words."}}},
      {"description",
       {{"type", "string"}, {"description", "What to find out, for the researcher."}}},
      {"step_type", enum_schema("research gathers sources; analysis reasons over what was found.",
                                {"research", "analysis"})},
      {"needs_search", {{"type", "boolean"}}}}},
    {"required", json::array({"title", "description"})}};
  std::string count = at_least == room
                        ? std::to_string(room) + " steps"
                        : std::to_string(at_least) + " to " + std::to_string(room) + " steps";
  t.parameters = {
    {"type", "object"},
    {"properties",
     {{"title", {{"type", "string"}, {"description", "The plan in one line."}}},
      {"thought", {{"type", "string"}, {"description", "Why these steps."}}},
      {"has_enough_context",
       {{"type", "boolean"}, {"description", "What is known already answers the question fully."}}},
      {"steps", {{"type", "array"}, {"items", step}, {"description", count + "."}}}}},
    {"required", json::array({"title", "steps"})}};
  return t;
}

std::variant<plan_draft, invalid_output> read_plan(const json& args, int at_least, int room) {
  if (!args.is_object())
    return invalid_output{"the arguments must be a JSON object."};
  plan_draft out;
  out.title = text_at(args, "title", 1000);
  out.thought = text_at(args, "thought");
  out.has_enough_context = bool_at(args, "has_enough_context", false);
  auto s = args.find("steps");
  if (s != args.end() && s->is_array()) {
    size_t n = 0;
    for (const auto& x : *s) {
      if (++n > max_draft_steps)
        break;
      if (!x.is_object())
        return invalid_output{"every step must be an object with a title and a description."};
      plan_step step;
      step.title = text_at(x, "title", 1000);
      step.description = text_at(x, "description");
      if (step.title.empty())
        return invalid_output{"step " + std::to_string(n) + " has no title."};
      if (step.description.empty())
        step.description = step.title;
      auto type = text_at(x, "step_type", 64);
      if (type.empty())
        type = text_at(x, "type", 64);
      step.type = sdk::to_lower(type) == "analysis" ? step_type::analysis : step_type::research;
      step.needs_search = bool_at(x, "needs_search", step.type == step_type::research);
      out.steps.push_back(std::move(step));
    }
  }
  if (out.steps.empty() && !(out.has_enough_context && at_least == 0))
    return invalid_output{"steps must hold at least " + std::to_string(std::max(1, at_least))
                          + " step" + (std::max(1, at_least) == 1 ? "" : "s")
                          + ", each with a title and a description."};
  if (static_cast<int>(out.steps.size()) < at_least)
    return invalid_output{"the plan has " + std::to_string(out.steps.size()) + " step"
                          + (out.steps.size() == 1 ? "" : "s") + "; it needs at least "
                          + std::to_string(at_least) + " (and at most "
                          + std::to_string(std::max(at_least, room)) + ")."};
  if (out.title.empty())
    out.title = out.steps.empty() ? std::string{"Research plan"} : out.steps.front().title;
  return out;
}

plan_update merge_plan(const plan* previous, plan_draft draft, const depth_profile& profile) {
  plan_update out;
  auto& next = out.next;
  next.iteration = previous != nullptr ? previous->iteration + 1 : 1;
  next.id = "plan-" + std::to_string(next.iteration);
  next.title = draft.title;
  next.thought = draft.thought;
  next.has_enough_context = draft.has_enough_context;
  if (previous != nullptr)
    for (const auto& s : previous->steps)
      if (s.status == step_status::completed)
        next.steps.push_back(s);
  auto kept = next.steps.size();
  auto room = static_cast<size_t>(std::max(0, profile.max_steps)) > kept
                ? static_cast<size_t>(profile.max_steps) - kept
                : 0;
  if (draft.steps.size() > room)
    out.notices.push_back("the plan had " + std::to_string(draft.steps.size()) + " new step"
                          + (draft.steps.size() == 1 ? "" : "s") + "; " + std::to_string(room)
                          + " fit within this depth's " + std::to_string(profile.max_steps)
                          + ", the rest were dropped");
  size_t n = 0;
  for (auto& s : draft.steps) {
    if (n >= room)
      break;
    ++n;
    s.id = "s" + std::to_string(next.iteration) + "." + std::to_string(n);
    s.status = step_status::pending;
    s.observation.clear();
    next.steps.push_back(std::move(s));
  }
  return out;
}

plan_room room_for(const plan* current, const depth_profile& profile) {
  auto done = current != nullptr ? completed_steps(*current) : 0;
  plan_room r;
  r.room = std::max(0, profile.max_steps - done);
  // A replan adds at least one step; the first plan has the depth's minimum.
  r.at_least = current != nullptr ? std::max(1, profile.min_steps - done)
                                  : std::max(1, profile.min_steps);
  r.at_least = std::min(r.at_least, r.room);
  return r;
}

std::optional<size_t> next_step(const plan& p) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].status == step_status::pending)
      return i;
  return std::nullopt;
}

int completed_steps(const plan& p) {
  return static_cast<int>(std::count_if(p.steps.begin(), p.steps.end(), [](const plan_step& s) {
    return s.status == step_status::completed;
  }));
}

void skip_pending(plan& p) {
  for (auto& s : p.steps)
    if (s.status == step_status::pending || s.status == step_status::in_progress)
      s.status = step_status::skipped;
}

json to_json(const plan& p) {
  json steps = json::array();
  for (const auto& s : p.steps)
    steps.push_back({{"id", s.id},
                     {"title", s.title},
                     {"description", s.description},
                     {"type", to_string(s.type)},
                     {"needs_search", s.needs_search},
                     {"status", to_string(s.status)},
                     {"observation", s.observation}});
  return {{"id", p.id},
          {"title", p.title},
          {"thought", p.thought},
          {"iteration", p.iteration},
          {"has_enough_context", p.has_enough_context},
          {"steps", steps}};
}

std::optional<plan> plan_from_json(const json& j) {
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array())
    return std::nullopt;
  plan p;
  p.id = text_at(j, "id", 200);
  p.title = text_at(j, "title", 1000);
  p.thought = text_at(j, "thought");
  p.has_enough_context = bool_at(j, "has_enough_context", false);
  auto it = j.find("iteration");
  if (it == j.end() || !it->is_number_integer())
    return std::nullopt;
  p.iteration = std::clamp(it->get<int>(), 1, 1000);
  for (const auto& x : j["steps"]) {
    if (!x.is_object() || p.steps.size() >= max_draft_steps)
      return std::nullopt;
    plan_step s;
    s.id = text_at(x, "id", 200);
    s.title = text_at(x, "title", 1000);
    s.description = text_at(x, "description");
    s.type = sdk::to_lower(text_at(x, "type", 64)) == "analysis" ? step_type::analysis
                                                                 : step_type::research;
    s.needs_search = bool_at(x, "needs_search", true);
    auto status = parse_name<step_status>(text_at(x, "status", 64), step_status_names);
    if (!status || s.id.empty())
      return std::nullopt;
    s.status = *status;
    auto obs = x.find("observation");
    if (obs != x.end() && obs->is_string())
      s.observation = obs->get<std::string>();
    p.steps.push_back(std::move(s));
  }
  return p;
}

sdk::tool_definition reflect_tool() {
  sdk::tool_definition t;
  t.name = "reflect";
  t.description = "Decide how the research goes on after the step just completed: CONTINUE "
                  "with the next step, ADJUST the plan (say what to change), or COMPLETE "
                  "and write the report now.";
  t.parameters = {
    {"type", "object"},
    {"properties",
     {{"decision",
       enum_schema("CONTINUE, ADJUST or COMPLETE.", {"CONTINUE", "ADJUST", "COMPLETE"})},
      {"reasoning", {{"type", "string"}, {"description", "Why, in one to three sentences."}}},
      {"suggested_changes",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"description", "With ADJUST: what the new steps should cover."}}}}},
    {"required", json::array({"decision", "reasoning"})}};
  return t;
}

std::variant<reflection, invalid_output> read_reflection(const json& args) {
  if (!args.is_object())
    return invalid_output{"the arguments must be a JSON object."};
  auto d = args.find("decision");
  if (d == args.end() || !d->is_string())
    return invalid_output{"decision is required: CONTINUE, ADJUST or COMPLETE."};
  auto parsed = parse_decision(d->get_ref<const std::string&>());
  if (!parsed)
    return invalid_output{"decision must be CONTINUE, ADJUST or COMPLETE, not \""
                          + clip(d->get_ref<const std::string&>(), 40) + "\"."};
  reflection out;
  out.decision = *parsed;
  out.reasoning = text_at(args, "reasoning");
  out.suggested_changes = strings_at(args, "suggested_changes", 20, 2000);
  return out;
}

reflection_outcome enforce(const reflection& r, const plan& p, const depth_profile& profile,
                           int max_plan_iterations) {
  reflection_outcome out;
  out.taken = r.decision;
  auto done = completed_steps(p);
  auto pending = next_step(p).has_value();
  auto iterations_left = p.iteration < max_plan_iterations;
  auto room = done < profile.max_steps;
  auto below_min = done < profile.min_steps;
  switch (r.decision) {
    case decision::complete:
      if (below_min && (pending || (iterations_left && room))) {
        out.refused = true;
        out.taken = pending ? decision::continue_plan : decision::adjust;
        out.why = "COMPLETE refused: " + std::to_string(done) + " of the "
                  + std::to_string(profile.min_steps) + " steps this depth needs are completed";
      }
      break;
    case decision::adjust:
      if (!iterations_left || !room) {
        out.refused = true;
        out.taken = pending ? decision::continue_plan : decision::complete;
        out.why = !iterations_left
                    ? "ADJUST refused: this is plan " + std::to_string(p.iteration) + " of at most "
                        + std::to_string(max_plan_iterations)
                    : "ADJUST refused: the plan holds the " + std::to_string(profile.max_steps)
                        + " steps this depth allows";
      }
      break;
    case decision::continue_plan:
      if (!pending)
        out.taken = below_min && iterations_left && room ? decision::adjust : decision::complete;
      break;
  }
  return out;
}

// -- packets -----------------------------------------------------------------------

json plan_packet(const plan& p) {
  auto j = to_json(p);
  for (auto& s : j["steps"]) {
    auto obs = s["observation"].get<std::string>();
    if (obs.size() > 600)
      s["observation"] = std::string{sdk::utf8_prefix(obs, 600)} + "...";
  }
  return {{"type", "reflective_plan"}, {"plan", std::move(j)}};
}

json classification_packet(const classification& c, depth resolved, query_mode mode) {
  return {{"type", "question_classified"},
          {"complexity", to_string(c.complexity)},
          {"follow_up_type", to_string(c.follow_up_type)},
          {"is_ambiguous", c.is_ambiguous},
          {"clarifying_questions", c.clarifying_questions},
          {"recommended_depth", to_string(c.recommended_depth)},
          {"depth", to_string(resolved)},
          {"mode", to_string(mode)},
          {"reasoning", c.reasoning}};
}

json step_start_packet(const plan_step& s) {
  return {{"type", "plan_step_start"},
          {"step_id", s.id},
          {"title", s.title},
          {"step_type", to_string(s.type)},
          {"needs_search", s.needs_search}};
}

json step_end_packet(const plan_step& s, size_t new_sources, const std::string& failure) {
  json j{{"type", "plan_step_end"},
         {"step_id", s.id},
         {"status", to_string(s.status)},
         {"new_sources", new_sources},
         {"observation", s.observation}};
  if (!failure.empty())
    j["failure"] = failure;
  return j;
}

json reflection_packet(const reflection& r, const reflection_outcome& o,
                       const std::string& step_id) {
  return {{"type", "reflection"},
          {"step_id", step_id},
          {"decision", to_string(r.decision)},
          {"taken", to_string(o.taken)},
          {"refused", o.refused},
          {"why", o.why},
          {"reasoning", r.reasoning},
          {"suggested_changes", r.suggested_changes}};
}

} // namespace quarry::core::reflective
