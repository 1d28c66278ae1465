// Pure logic of the extractive provider: deterministic text processing and
// the answer of each deep research role.

#include "extractive.hpp"

#include "quarry/sdk/lexical.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <utility>

namespace quarry::plugins::llm_extractive {

namespace {

// -- small string helpers -----------------------------------------------------

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}

char to_lower(char c) {
  return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c;
}

bool contains(std::string_view x, std::string_view needle) {
  return x.find(needle) != std::string_view::npos;
}

// Collapses runs of white space into one space and trims.
std::string collapse_spaces(std::string_view x) {
  std::string result;
  result.reserve(x.size());
  bool pending = false;
  for (auto c : x) {
    if (sdk::is_ascii_space(c)) {
      pending = !result.empty();
    } else {
      if (pending)
        result += ' ';
      pending = false;
      result += c;
    }
  }
  return result;
}

std::vector<std::string_view> split_lines(std::string_view x) {
  std::vector<std::string_view> result;
  size_t pos = 0;
  while (pos <= x.size()) {
    auto end = x.find('\n', pos);
    if (end == std::string_view::npos)
      end = x.size();
    result.push_back(x.substr(pos, end - pos));
    pos = end + 1;
  }
  return result;
}

// Returns the length of a citation-like marker (`[12]`, `[1, 2]`) at the
// start of `x`, or 0.
size_t marker_length(std::string_view x) {
  if (x.size() < 3 || x[0] != '[')
    return 0;
  size_t i = 1;
  bool digits = false;
  while (i < x.size()) {
    if (is_digit(x[i])) {
      digits = true;
    } else if (x[i] == ']') {
      return digits ? i + 1 : 0;
    } else if (x[i] != ',' && x[i] != ' ') {
      return 0;
    }
    ++i;
  }
  return 0;
}

// Removes `[...truncated]` notes and, optionally, citation markers.
std::string clean_once(std::string_view x, bool strip_markers) {
  static constexpr std::string_view truncated = "[...truncated]";
  std::string result;
  result.reserve(x.size());
  size_t i = 0;
  while (i < x.size()) {
    if (x.substr(i, truncated.size()) == truncated) {
      i += truncated.size();
      result += ' ';
      continue;
    }
    if (strip_markers) {
      if (auto n = marker_length(x.substr(i)); n > 0) {
        i += n;
        // "text [3]." becomes "text.", not "text .".
        if (!result.empty() && result.back() == ' ' && i < x.size()
            && (x[i] == '.' || x[i] == ',' || x[i] == ';' || x[i] == ':' || x[i] == '!'
                || x[i] == '?'))
          result.pop_back();
        continue;
      }
    }
    result += x[i++];
  }
  return result;
}

// Like clean_once, until nothing changes: "[[2]5]" loses both markers.
std::string clean_text(std::string_view x, bool strip_markers) {
  auto result = clean_once(x, strip_markers);
  while (strip_markers) {
    auto again = clean_once(result, true);
    if (again == result)
      break;
    result = std::move(again);
  }
  return result;
}

// Removes Markdown heading, quote and list markers at the start of a line.
// Sets `is_item` if the line was a heading or a list item.
std::string_view strip_line_marker(std::string_view line, bool& is_item) {
  is_item = false;
  line = sdk::trim(line);
  size_t i = 0;
  while (i < line.size() && (line[i] == '#' || line[i] == '>'))
    ++i;
  if (i > 0) {
    is_item = true;
    return sdk::trim(line.substr(i));
  }
  if (line.size() >= 2 && (line[0] == '-' || line[0] == '*' || line[0] == '+')
      && line[1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(2));
  }
  while (i < line.size() && i < 3 && is_digit(line[i]))
    ++i;
  if (i > 0 && i + 1 < line.size() && (line[i] == '.' || line[i] == ')')
      && line[i + 1] == ' ') {
    is_item = true;
    return sdk::trim(line.substr(i + 2));
  }
  return line;
}

bool is_abbreviation(std::string_view word) {
  auto w = sdk::to_lower(word);
  for (auto x : {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st",
                 "no", "fig", "approx", "inc", "ltd", "jr", "sr", "u.s", "cf"})
    if (w == x)
      return true;
  // Initials such as "J." and dotted abbreviations such as "U.S.".
  return word.size() == 1 || (word.size() >= 3 && word[word.size() - 2] == '.');
}

// Splits one paragraph (no line breaks) into sentences.
void split_paragraph(std::string_view text, std::vector<std::string>& out) {
  auto para = collapse_spaces(text);
  size_t start = 0;
  for (size_t i = 0; i < para.size(); ++i) {
    auto c = para[i];
    if (c != '.' && c != '!' && c != '?')
      continue;
    // Take closing quotes, brackets and repeated terminators along.
    size_t end = i + 1;
    while (end < para.size()
           && (para[end] == '"' || para[end] == '\'' || para[end] == ')'
               || para[end] == '.' || para[end] == '!' || para[end] == '?'))
      ++end;
    if (end < para.size() && para[end] != ' ')
      continue; // e.g. "3.5" or "example.org"
    if (c == '.') {
      // The word before the period.
      size_t w = i;
      while (w > start && para[w - 1] != ' ')
        --w;
      if (is_abbreviation(std::string_view{para}.substr(w, i - w)))
        continue;
      // A sentence starts with an upper-case letter, a digit or a quote.
      if (end + 1 < para.size()) {
        auto next = para[end + 1];
        if (!is_upper(next) && !is_digit(next) && next != '"' && next != '\''
            && next != '(' && next != '[' && static_cast<unsigned char>(next) < 0x80)
          continue;
      }
    }
    auto sentence = sdk::trim(std::string_view{para}.substr(start, end - start));
    if (!sentence.empty())
      out.emplace_back(sentence);
    start = end;
    i = end == 0 ? 0 : end - 1;
  }
  auto rest = sdk::trim(std::string_view{para}.substr(std::min(start, para.size())));
  if (!rest.empty())
    out.emplace_back(rest);
}

// Splits text into sentences; a heading or list item ends a sentence.
std::vector<std::string> split_impl(std::string_view text, bool strip_markers) {
  auto cleaned = clean_text(text, strip_markers);
  std::vector<std::string> result;
  std::string buffer;
  auto flush = [&] {
    split_paragraph(buffer, result);
    buffer.clear();
  };
  for (auto line : split_lines(cleaned)) {
    bool is_item = false;
    auto body = strip_line_marker(line, is_item);
    if (sdk::trim(line).empty() || sdk::starts_with(sdk::trim(line), "```")) {
      flush();
      continue;
    }
    if (is_item) {
      flush();
      buffer = std::string{body};
      flush();
      continue;
    }
    if (!buffer.empty())
      buffer += ' ';
    buffer.append(body.data(), body.size());
  }
  flush();
  return result;
}

// Splits text into paragraphs at blank lines.
std::vector<std::string> paragraphs(std::string_view text) {
  std::vector<std::string> result;
  std::string current;
  for (auto line : split_lines(text)) {
    if (sdk::trim(line).empty()) {
      if (!current.empty())
        result.push_back(std::move(current));
      current.clear();
    } else {
      current.append(line.data(), line.size());
      current += '\n';
    }
  }
  if (!current.empty())
    result.push_back(std::move(current));
  return result;
}

// Normalized form of a sentence for duplicate detection.
std::string sentence_key(std::string_view sentence) {
  auto tokens = tokenize(clean_text(sentence, true));
  std::string result;
  for (const auto& token : tokens) {
    result += token;
    result += ' ';
  }
  return result.empty() ? sdk::to_lower(sentence) : result;
}

// Returns the first (or last) user message that is not a reminder, or any
// user message if all are reminders.
std::string find_user_text(const std::vector<sdk::chat_message>& messages, bool last) {
  const sdk::chat_message* fallback = nullptr;
  auto visit = [&](const sdk::chat_message& msg) -> bool {
    if (msg.author != sdk::role::user || sdk::trim(msg.content).empty())
      return false;
    if (fallback == nullptr)
      fallback = &msg;
    return !is_reminder(msg.content);
  };
  if (last) {
    for (auto i = messages.rbegin(); i != messages.rend(); ++i)
      if (visit(*i))
        return std::string{sdk::trim(i->content)};
  } else {
    for (const auto& msg : messages)
      if (visit(msg))
        return std::string{sdk::trim(msg.content)};
  }
  return fallback != nullptr ? std::string{sdk::trim(fallback->content)} : std::string{};
}

std::string system_text(const std::vector<sdk::chat_message>& messages) {
  std::string result;
  for (const auto& msg : messages)
    if (msg.author == sdk::role::system) {
      result += msg.content;
      result += '\n';
    }
  return result;
}

// Parses tool-call arguments; tolerates double-encoded JSON.
nlohmann::json parse_arguments(std::string_view text) {
  auto value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  return value.is_object() ? value : nlohmann::json::object();
}

// Tool calls of the history, and the results that answer them.
struct call_record {
  sdk::tool_call call;
  const sdk::chat_message* result = nullptr;
};

std::vector<call_record> collect_calls(const std::vector<sdk::chat_message>& messages) {
  std::vector<call_record> result;
  std::map<std::string, size_t> by_id;
  for (const auto& msg : messages) {
    if (msg.author == sdk::role::assistant) {
      for (const auto& call : msg.tool_calls) {
        by_id[call.id] = result.size();
        result.push_back({call, nullptr});
      }
    } else if (msg.author == sdk::role::tool) {
      auto i = by_id.find(msg.tool_call_id);
      if (i != by_id.end() && result[i->second].result == nullptr) {
        result[i->second].result = &msg;
      } else if (!msg.tool_name.empty()) {
        // A result whose call is not in the history still counts.
        sdk::tool_call call;
        call.id = msg.tool_call_id;
        call.name = msg.tool_name;
        result.push_back({std::move(call), &msg});
      }
    }
  }
  return result;
}

size_t count_calls(const std::vector<sdk::chat_message>& messages) {
  size_t result = 0;
  for (const auto& msg : messages)
    result += msg.tool_calls.size();
  return result;
}

bool looks_failed(std::string_view text) {
  auto x = sdk::to_lower(text.substr(0, 400));
  return sdk::trim(x).empty() || contains(x, "not run") || contains(x, "failed")
         || contains(x, "timed out");
}

const sdk::tool_definition* find_tool(const sdk::chat_request& req, std::string_view name) {
  for (const auto& tool : req.tools)
    if (tool.name == name)
      return &tool;
  return nullptr;
}

sdk::tool_call make_call(size_t number, std::string name, const nlohmann::json& args) {
  sdk::tool_call result;
  result.id = "call_" + std::to_string(number);
  result.name = std::move(name);
  result.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return result;
}

// Index of the step that best matches `text` (exact match first), or -1.
int match_step(const std::vector<std::string>& steps, std::string_view text) {
  auto needle = sdk::trim(text);
  for (size_t i = 0; i < steps.size(); ++i)
    if (sdk::trim(steps[i]) == needle)
      return static_cast<int>(i);
  std::vector<std::vector<std::string>> docs;
  for (const auto& step : steps)
    docs.push_back(tokenize(step));
  auto best = top_k(bm25_scores(docs, tokenize(needle)), 1);
  return best.empty() ? -1 : static_cast<int>(best.front());
}

// Removes leading words such as "and", "or", "also" from a clause.
std::string clean_clause(std::string_view clause) {
  auto x = sdk::trim(clause);
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto prefix : {"and ", "or ", "but ", "also ", "then ", "as well as ",
                        "plus "}) {
      if (sdk::starts_with(sdk::to_lower(x.substr(0, 12)), prefix)) {
        x = sdk::trim(x.substr(std::string_view{prefix}.size()));
        changed = true;
      }
    }
  }
  while (!x.empty() && (x.back() == ',' || x.back() == '.' || x.back() == ';'
                        || x.back() == ':'))
    x = sdk::trim(x.substr(0, x.size() - 1));
  std::string result{x};
  if (!result.empty() && result[0] >= 'a' && result[0] <= 'z')
    result[0] = static_cast<char>(result[0] - 'a' + 'A');
  return result;
}

// Splits `text` at `sep` if every part keeps at least two content words.
std::vector<std::string> split_if_meaningful(const std::string& text, std::string_view sep) {
  std::vector<std::string> parts;
  size_t pos = 0;
  auto low = sdk::to_lower(text);
  while (true) {
    auto at = low.find(sep, pos);
    if (at == std::string::npos) {
      parts.push_back(text.substr(pos));
      break;
    }
    parts.push_back(text.substr(pos, at - pos));
    pos = at + sep.size();
  }
  if (parts.size() < 2)
    return {text};
  for (const auto& part : parts)
    if (tokenize(part).size() < 2)
      return {text};
  return parts;
}

// The question's key phrase: its words without leading question words.
std::string key_phrase(std::string_view question) {
  auto words = collapse_spaces(question);
  while (!words.empty() && (words.back() == '?' || words.back() == '.'
                            || words.back() == '!'))
    words.pop_back();
  static const std::set<std::string> lead{
    "what", "how", "why", "when", "where", "who", "which", "is", "are", "do",
    "does", "did", "can", "could", "should", "would", "will", "the", "a", "an",
    "tell", "me", "about", "explain", "describe", "please", "was", "were"};
  std::string_view rest{words};
  while (!rest.empty()) {
    auto space = rest.find(' ');
    auto word = sdk::to_lower(rest.substr(0, space));
    if (lead.count(word) == 0 || space == std::string_view::npos)
      break;
    rest = rest.substr(space + 1);
  }
  return std::string{rest};
}

bool has_pronoun(std::string_view text) {
  static const std::set<std::string> pronouns{"they", "it", "them", "its", "their",
                                              "these", "this", "those", "he", "she",
                                              "his", "her"};
  std::string word;
  std::string padded{text};
  padded += ' ';
  for (auto c : padded) {
    if ((c >= 'a' && c <= 'z') || is_upper(c)) {
      word += to_lower(c);
    } else {
      if (pronouns.count(word) > 0)
        return true;
      word.clear();
    }
  }
  return false;
}

std::string with_marker(std::string_view sentence, int number) {
  auto body = sdk::trim(sentence);
  std::string marker = " [" + std::to_string(number) + "]";
  if (!body.empty() && (body.back() == '.' || body.back() == '!' || body.back() == '?')) {
    auto punct = body.back();
    body.remove_suffix(1);
    return std::string{sdk::trim(body)} + marker + punct;
  }
  return std::string{body} + marker + ".";
}

std::string truncate_words(std::string_view sentence, size_t max_words) {
  if (count_words(sentence) <= max_words)
    return std::string{sentence};
  std::string result;
  size_t words = 0;
  bool in_word = false;
  for (auto c : sentence) {
    if (sdk::is_ascii_space(c)) {
      if (in_word && ++words == max_words)
        break;
      in_word = false;
    } else {
      in_word = true;
    }
    result += c;
  }
  // An ellipsis glued to the last word: the quoted prefix stays verbatim.
  return std::string{sdk::trim(result)} + "\u2026";
}

// -- the roles ----------------------------------------------------------------

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
      result.tool_calls.push_back(make_call(count_calls(req.messages) + 1, skip->name,
                                            nlohmann::json::object()));
      return result;
    }
  }
  result.text = "No clarification needed.";
  return result;
}

// The plan: from the system prompt, else from a reminder in the history.
std::vector<std::string> find_plan(const sdk::chat_request& req) {
  auto plan = parse_plan(system_text(req.messages));
  for (auto i = req.messages.rbegin(); plan.empty() && i != req.messages.rend(); ++i)
    if (i->author == sdk::role::user && is_reminder(i->content))
      plan = parse_plan(i->content);
  return plan;
}

answer respond_orchestrate(const sdk::chat_request& req, const compose_options& opts) {
  answer result;
  auto question = find_user_text(req.messages, true);
  auto plan = find_plan(req);
  if (plan.empty())
    plan = split_question(question);
  std::vector<int> attempts(plan.size(), 0);
  std::vector<bool> done(plan.size(), false);
  for (const auto& rec : collect_calls(req.messages)) {
    if (rec.call.name != "research_agent" || rec.result == nullptr)
      continue;
    auto args = parse_arguments(rec.call.arguments);
    auto task = args.contains("task") && args["task"].is_string()
                  ? args["task"].get<std::string>()
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
  if (auto from_prompt = find_parallel_limit(system_text(req.messages)); from_prompt > 0)
    limit = std::min(limit, from_prompt);
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
    result.tool_calls.push_back(
      make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "All plan steps have been researched.";
  return result;
}

// Whether `tool` takes an array parameter `key` (how a model tells tools
// apart: by their definitions, not by their names, which users choose).
bool takes_array(const sdk::tool_definition& tool, const char* key) {
  const auto& params = tool.parameters;
  if (!params.is_object() || !params.contains("properties")
      || !params["properties"].is_object())
    return false;
  const auto& props = params["properties"];
  if (!props.contains(key) || !props[key].is_object())
    return false;
  // A plugin's schema may say anything: `type` may be a list or missing.
  const auto& param = props[key];
  return param.contains("type") && param["type"].is_string()
         && param["type"].get_ref<const std::string&>() == "array";
}

// The search tools of a request (any tool taking `queries`): one named
// `internal_search` first, as before, then the others in the request's order.
std::vector<std::string> search_tools(const sdk::chat_request& req) {
  std::vector<std::string> internal;
  std::vector<std::string> other;
  for (const auto& tool : req.tools) {
    if (!takes_array(tool, "queries"))
      continue;
    if (tool.name == "internal_search")
      internal.push_back(tool.name);
    else
      other.push_back(tool.name);
  }
  internal.insert(internal.end(), other.begin(), other.end());
  return internal;
}

// The first page reader of a request (a tool taking `urls`), or null.
const sdk::tool_definition* page_reader(const sdk::chat_request& req) {
  for (const auto& tool : req.tools)
    if (takes_array(tool, "urls"))
      return &tool;
  return nullptr;
}

answer respond_research(const sdk::chat_request& req) {
  answer result;
  auto task = find_user_text(req.messages, false);
  auto calls = collect_calls(req.messages);
  auto searches = search_tools(req);
  const auto* reader = page_reader(req);
  std::set<std::string> searched;
  bool opened = false;
  std::vector<sdk::chat_message> search_results;
  for (const auto& rec : calls) {
    if (std::find(searches.begin(), searches.end(), rec.call.name) != searches.end()) {
      searched.insert(rec.call.name);
      if (rec.result != nullptr)
        search_results.push_back(*rec.result);
    } else if (reader != nullptr && rec.call.name == reader->name) {
      opened = true;
    }
  }
  auto next_id = count_calls(req.messages) + 1;
  auto tools_ok = req.choice != sdk::tool_choice::none;
  auto found = collect_documents(search_results);
  if (tools_ok && (searched.empty() || found.empty())) {
    // Internal search first; web search if that found nothing.
    for (const auto& name : searches) {
      if (searched.count(name) > 0)
        continue;
      auto query = collapse_spaces(task);
      result.tool_calls.push_back(
        make_call(next_id, name, nlohmann::json{{"queries", {query}}}));
      return result;
    }
  }
  if (tools_ok && !opened && reader != nullptr) {
    std::vector<const source_doc*> candidates;
    std::vector<std::vector<std::string>> docs;
    for (const auto& doc : found) {
      if (doc.url.empty())
        continue;
      candidates.push_back(&doc);
      std::string text = doc.title;
      for (const auto& x : doc.texts)
        text += " " + x;
      docs.push_back(tokenize(text));
    }
    auto best = top_k(bm25_scores(docs, tokenize(task)), 3);
    if (best.empty())
      for (size_t i = 0; i < candidates.size() && i < 3; ++i)
        best.push_back(i);
    if (!best.empty()) {
      nlohmann::json urls = nlohmann::json::array();
      for (auto i : best)
        urls.push_back(candidates[i]->url);
      result.tool_calls.push_back(
        make_call(next_id, reader->name, nlohmann::json{{"urls", urls}}));
      return result;
    }
  }
  if (tools_ok && find_tool(req, "generate_report") != nullptr) {
    result.tool_calls.push_back(
      make_call(next_id, "generate_report", nlohmann::json::object()));
    return result;
  }
  result.text = "Research finished; ready to report.";
  return result;
}

answer respond_final(const sdk::chat_request& req) {
  auto question = find_user_text(req.messages, true);
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
  auto plan = find_plan(req);
  if (plan.empty())
    for (const auto& item : findings)
      if (!item.task.empty()
          && std::find(plan.begin(), plan.end(), item.task) == plan.end())
        plan.push_back(item.task);
  answer result;
  result.text = compose_final(question, plan, findings);
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

// -- text ---------------------------------------------------------------------

std::vector<std::string> split_sentences(std::string_view text) {
  return split_impl(text, true);
}

std::vector<std::string> tokenize(std::string_view text) {
  return sdk::lexical::tokenize(text);
}

size_t count_words(std::string_view text) {
  return sdk::lexical::count_words(text);
}

int64_t estimate_tokens(std::string_view text) {
  auto words = static_cast<int64_t>(count_words(text));
  return (words * 4 + 2) / 3;
}

std::vector<double> bm25_scores(const std::vector<std::vector<std::string>>& docs,
                                const std::vector<std::string>& query) {
  return sdk::lexical::bm25_scores(docs, query);
}

std::vector<size_t> top_k(const std::vector<double>& scores, size_t k) {
  return sdk::lexical::top_k(scores, k);
}

// -- plans --------------------------------------------------------------------

std::vector<std::string> split_question(std::string_view question, size_t max_steps) {
  max_steps = std::max<size_t>(2, max_steps);
  // Clauses at question marks, semicolons and line breaks.
  std::vector<std::string> clauses;
  std::string current;
  for (auto c : question) {
    if (c == '?' || c == ';' || c == '\n') {
      if (c == '?')
        current += '?';
      clauses.push_back(collapse_spaces(current));
      current.clear();
    } else {
      current += c;
    }
  }
  clauses.push_back(collapse_spaces(current));
  std::vector<std::string> parts;
  std::set<std::vector<std::string>> seen;
  for (const auto& clause : clauses) {
    auto ends_with_q = !clause.empty() && clause.back() == '?';
    for (const auto& by_comma : split_if_meaningful(clause, ","))
      // "A, B and C" is one list: no split at " and " after a comma.
      for (const auto& by_and : by_comma.find(',') == std::string::npos
                                  ? split_if_meaningful(by_comma, " and ")
                                  : std::vector<std::string>{by_comma}) {
        auto part = clean_clause(by_and);
        auto tokens = tokenize(part);
        if (tokens.empty())
          continue;
        std::sort(tokens.begin(), tokens.end());
        if (!seen.insert(tokens).second)
          continue;
        if (ends_with_q && part.back() != '?')
          part += '?';
        parts.push_back(std::move(part));
      }
  }
  if (parts.size() >= 2) {
    if (parts.size() > max_steps)
      parts.resize(max_steps);
    // A later part that refers back with a pronoun ("what do they cost?") and
    // shares no word with the first part gets the first part's key phrase,
    // since each step must stand alone.
    auto first = tokenize(parts.front());
    auto subject = key_phrase(parts.front());
    for (size_t i = 1; i < parts.size(); ++i) {
      auto tokens = tokenize(parts[i]);
      auto shared = std::any_of(tokens.begin(), tokens.end(), [&](const std::string& t) {
        return std::find(first.begin(), first.end(), t) != first.end();
      });
      if (!shared && has_pronoun(parts[i]) && !subject.empty())
        parts[i] += " (regarding: " + subject + ")";
    }
    return parts;
  }
  auto key = key_phrase(question);
  if (key.empty())
    key = collapse_spaces(question);
  if (key.empty())
    key = "the topic";
  std::vector<std::string> result;
  auto whole = collapse_spaces(question);
  if (!whole.empty() && !tokenize(whole).empty())
    result.push_back(clean_clause(whole));
  result.push_back("Background and key facts about " + key);
  result.push_back("Current state and recent developments of " + key);
  result.push_back("Evidence, data and examples on " + key);
  if (result.size() > max_steps)
    result.resize(max_steps);
  return result;
}

std::string format_plan(const std::vector<std::string>& steps) {
  std::string result;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i > 0)
      result += '\n';
    result += std::to_string(i + 1) + ". " + steps[i];
  }
  return result;
}

std::vector<std::string> parse_plan(std::string_view text) {
  auto lines = split_lines(text);
  size_t begin = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (contains(sdk::to_lower(lines[i]), "research plan"))
      begin = i + 1;
  std::vector<std::string> last;
  std::vector<std::string> current;
  for (size_t i = begin; i < lines.size(); ++i) {
    auto line = sdk::trim(lines[i]);
    if (line.empty())
      continue;
    size_t d = 0;
    while (d < line.size() && d < 3 && is_digit(line[d]))
      ++d;
    if (d > 0 && d + 1 < line.size() && (line[d] == '.' || line[d] == ')')
        && line[d + 1] == ' ') {
      auto item = collapse_spaces(line.substr(d + 2));
      if (!item.empty())
        current.push_back(std::move(item));
      continue;
    }
    if (!current.empty()) {
      last = std::move(current);
      current.clear();
    }
  }
  if (!current.empty())
    last = std::move(current);
  return last;
}

bool is_reminder(std::string_view text) {
  auto x = sdk::to_lower(sdk::trim(text));
  auto plan_format = contains(x, "numbered") || contains(x, "output only")
                     || contains(x, "nothing else") || contains(x, "no prefix");
  auto report_request = (contains(x, "comprehensive") || contains(x, "thorough"))
                        && contains(x, "cite");
  return sdk::starts_with(x, "<system-reminder>") || (contains(x, "plan") && plan_format)
         || report_request || contains(x, "open_url");
}

int find_parallel_limit(std::string_view prompt) {
  auto x = sdk::to_lower(prompt);
  static const std::vector<std::pair<std::string, int>> numbers{
    {"one", 1}, {"two", 2}, {"three", 3}, {"four", 4}, {"five", 5},
    {"six", 6}, {"seven", 7}, {"eight", 8}, {"nine", 9}, {"ten", 10}};
  static const std::vector<std::string_view> qualifiers{
    "more than ", "at most ", "up to ", "maximum of ", "maximum ", "max "};
  // The number right after a qualifier, or 0.
  auto number_at = [&](std::string_view rest) {
    int value = 0;
    size_t d = 0;
    while (d < rest.size() && d < 3 && is_digit(rest[d]))
      value = value * 10 + (rest[d++] - '0');
    if (d == 0) {
      for (const auto& [word, n] : numbers)
        if (sdk::starts_with(rest, word)
            && (rest.size() == word.size() || !(rest[word.size()] >= 'a'
                                                && rest[word.size()] <= 'z')))
          value = n;
    }
    return value >= 1 && value <= 64 ? value : 0;
  };
  size_t pos = 0;
  while ((pos = x.find("parallel", pos)) != std::string::npos) {
    // "at most 3 in parallel" (the last qualifier before) or "in parallel,
    // but never more than 3 at once" (the first one after).
    auto from = pos > 60 ? pos - 60 : 0;
    auto before = std::string_view{x}.substr(from, pos - from);
    pos += 8;
    auto after = std::string_view{x}.substr(pos, 60);
    size_t qual = std::string_view::npos;
    for (auto q : qualifiers) {
      auto at = before.rfind(q);
      if (at != std::string_view::npos && (qual == std::string_view::npos || at > qual))
        qual = at + q.size();
    }
    if (qual != std::string_view::npos)
      if (auto n = number_at(before.substr(qual)); n > 0)
        return n;
    qual = std::string_view::npos;
    for (auto q : qualifiers) {
      auto at = after.find(q);
      if (at != std::string_view::npos && (qual == std::string_view::npos || at + q.size() < qual))
        qual = at + q.size();
    }
    if (qual != std::string_view::npos)
      if (auto n = number_at(after.substr(qual)); n > 0)
        return n;
  }
  return 0;
}

// -- tool results -------------------------------------------------------------

std::vector<source_doc> parse_tool_result(std::string_view content) {
  std::vector<source_doc> result;
  auto value = nlohmann::json::parse(content, nullptr, false);
  if (value.is_string())
    value = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  if (!value.is_object() || !value.contains("results") || !value["results"].is_array())
    return result;
  for (const auto& item : value["results"]) {
    if (!item.is_object() || !item.contains("document"))
      continue;
    const auto& num = item["document"];
    int number = 0;
    if (num.is_number_integer()) {
      auto n = num.get<int64_t>();
      number = n > 0 && n < 1000000 ? static_cast<int>(n) : 0;
    } else if (num.is_string()) {
      auto s = num.get<std::string>();
      if (!s.empty() && s.size() < 7
          && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c); }))
        number = std::stoi(s);
    }
    if (number <= 0)
      continue;
    source_doc doc;
    doc.number = number;
    auto text_of = [&](const char* key) {
      return item.contains(key) && item[key].is_string() ? item[key].get<std::string>()
                                                         : std::string{};
    };
    doc.title = text_of("title");
    doc.url = text_of("url");
    for (auto key : {"content", "snippet"}) {
      auto text = text_of(key);
      if (!sdk::trim(text).empty()) {
        doc.texts.push_back(std::move(text));
        break;
      }
    }
    result.push_back(std::move(doc));
  }
  return result;
}

std::vector<source_doc> collect_documents(const std::vector<sdk::chat_message>& messages) {
  std::vector<source_doc> result;
  std::map<int, size_t> by_number;
  for (const auto& msg : messages) {
    if (msg.author != sdk::role::tool)
      continue;
    for (auto& doc : parse_tool_result(msg.content)) {
      auto i = by_number.find(doc.number);
      if (i == by_number.end()) {
        by_number.emplace(doc.number, result.size());
        result.push_back(std::move(doc));
        continue;
      }
      auto& known = result[i->second];
      if (known.title.empty())
        known.title = doc.title;
      if (known.url.empty())
        known.url = doc.url;
      for (auto& text : doc.texts)
        if (std::find(known.texts.begin(), known.texts.end(), text) == known.texts.end())
          known.texts.push_back(std::move(text));
    }
  }
  return result;
}

// -- answers ------------------------------------------------------------------

std::string compose_report(std::string_view task, const std::vector<source_doc>& docs,
                           int max_sentences) {
  if (docs.empty())
    return "No sources were found for this task.";
  struct candidate {
    size_t doc;
    std::string text;
  };
  std::vector<candidate> candidates;
  std::set<std::string> seen;
  for (size_t d = 0; d < docs.size(); ++d)
    for (const auto& text : docs[d].texts)
      for (auto& sentence : split_sentences(text)) {
        if (count_words(sentence) < 4)
          continue;
        sentence = truncate_words(sentence, 60);
        if (seen.insert(sentence_key(sentence)).second)
          candidates.push_back({d, std::move(sentence)});
      }
  std::vector<std::vector<std::string>> tokens;
  for (const auto& x : candidates)
    tokens.push_back(tokenize(x.text));
  auto best = top_k(bm25_scores(tokens, tokenize(task)),
                    static_cast<size_t>(std::max(1, max_sentences)));
  if (best.empty())
    return "No information relevant to the task was found in the sources.";
  // Paragraphs: one per document, best document first; sentences in the
  // order they appear in their document.
  std::vector<size_t> doc_order;
  std::map<size_t, std::vector<size_t>> by_doc;
  for (auto i : best) {
    auto d = candidates[i].doc;
    if (by_doc.count(d) == 0)
      doc_order.push_back(d);
    by_doc[d].push_back(i);
  }
  std::string result;
  for (auto d : doc_order) {
    auto& picked = by_doc[d];
    std::sort(picked.begin(), picked.end());
    if (!result.empty())
      result += "\n\n";
    for (size_t j = 0; j < picked.size(); ++j) {
      if (j > 0)
        result += ' ';
      result += with_marker(candidates[picked[j]].text, docs[d].number);
    }
  }
  return result;
}

std::string compose_final(std::string_view question, const std::vector<std::string>& plan,
                          const std::vector<finding>& findings) {
  std::string result;
  auto q = collapse_spaces(question);
  if (!q.empty())
    result += "This report answers the question \"" + q + "\". ";
  result += "It collects the findings of " + std::to_string(findings.size())
            + " research task" + (findings.size() == 1 ? "" : "s") + ", grouped by the "
            + std::to_string(plan.size()) + " step" + (plan.size() == 1 ? "" : "s")
            + " of the research plan.\n\n";
  result += "> **Extractive report:** no language model was used. Every sentence "
            "below is quoted from the sources, selected by keyword matching "
            "(BM25) and grouped mechanically; the numbers in brackets cite the "
            "sources.\n";
  // Assign each finding to the plan step its task matches best.
  std::vector<std::vector<size_t>> sections(plan.size() + 1);
  for (size_t i = 0; i < findings.size(); ++i) {
    auto step = match_step(plan, findings[i].task);
    sections[step < 0 ? plan.size() : static_cast<size_t>(step)].push_back(i);
  }
  // The sentences of every report, in section order. A sentence found in
  // several sections goes to the one whose step it matches best.
  struct item {
    size_t section;
    size_t para;
    std::string text;
    std::string key;
  };
  std::vector<item> items;
  size_t para_id = 0;
  for (size_t s = 0; s < sections.size(); ++s)
    for (auto i : sections[s])
      for (const auto& para : paragraphs(findings[i].report)) {
        ++para_id;
        for (auto& sentence : split_impl(para, false)) {
          if (sdk::starts_with(sentence, "No information relevant")
              || sdk::starts_with(sentence, "No sources were found"))
            continue;
          auto key = sentence_key(sentence);
          items.push_back({s, para_id, std::move(sentence), std::move(key)});
        }
      }
  std::vector<std::vector<std::string>> step_tokens;
  for (const auto& step : plan)
    step_tokens.push_back(tokenize(step));
  step_tokens.emplace_back(); // further findings
  std::map<std::string, size_t> home;
  for (const auto& x : items) {
    auto i = home.find(x.key);
    if (i == home.end()) {
      home.emplace(x.key, x.section);
      continue;
    }
    if (i->second == x.section)
      continue;
    auto scores = bm25_scores(step_tokens, tokenize(x.text));
    if (scores[x.section] > scores[i->second])
      i->second = x.section;
  }
  std::set<std::string> seen;
  for (size_t s = 0; s <= plan.size(); ++s) {
    if (s == plan.size() && sections[s].empty())
      break;
    std::string body;
    std::string line;
    size_t current_para = 0;
    for (const auto& x : items) {
      if (x.section != s || home[x.key] != s || !seen.insert(x.key).second)
        continue;
      if (x.para != current_para && !line.empty()) {
        body += "\n" + line + "\n";
        line.clear();
      }
      current_para = x.para;
      if (!line.empty())
        line += ' ';
      line += x.text;
    }
    if (!line.empty())
      body += "\n" + line + "\n";
    auto heading = s < plan.size() ? plan[s] : std::string{"Further findings"};
    // The context added for the agents is noise in a heading.
    if (auto at = heading.find(" (regarding: "); at != std::string::npos && at > 0)
      heading.erase(at);
    result += "\n## " + heading + "\n";
    result += body.empty() ? "\n_No findings were gathered for this step._\n" : body;
  }
  return result;
}

answer respond(const sdk::chat_request& request, const compose_options& opts) {
  if (auto structured = respond_structured(request))
    return *structured;
  auto tag = sdk::to_lower(sdk::trim(request.role_tag));
  if (tag == "clarify")
    return respond_clarify(request);
  if (tag == "plan") {
    answer result;
    result.text = format_plan(split_question(find_user_text(request.messages, true)));
    return result;
  }
  if (tag == "orchestrate")
    return respond_orchestrate(request, opts);
  if (tag == "research")
    return respond_research(request);
  if (tag == "report") {
    answer result;
    result.text = compose_report(find_user_text(request.messages, false),
                                 collect_documents(request.messages), opts.max_sentences);
    return result;
  }
  if (tag == "final")
    return respond_final(request);
  if (tag == "synthesize")
    return respond_synthesize(request);
  return respond_chat(request, opts);
}

} // namespace quarry::plugins::llm_extractive
