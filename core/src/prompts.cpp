// Prompt templates: rendering, the embedded set and run-time overrides.

#include "quarry/core/prompts.hpp"

#include "quarry/core/regular_file.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

namespace quarry::core {

// Generated at configure time from prompts/*.md (embedded_prompts.cpp).
struct embedded_prompt {
  const char* name;
  const unsigned char* data;
  size_t size;
};
extern const embedded_prompt embedded_prompts[];
extern const size_t embedded_prompt_count;

namespace {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || c == '_';
}

bool ident_char(char c) {
  return ident_start(c) || (c >= '0' && c <= '9');
}

// If a placeholder starts at `i` (text[i] == '{'), returns its name length.
size_t placeholder_at(std::string_view text, size_t i) {
  if (i + 2 >= text.size() + 0 || text[i] != '{' || !ident_start(text[i + 1]))
    return 0;
  size_t j = i + 1;
  while (j < text.size() && ident_char(text[j]))
    ++j;
  if (j < text.size() && text[j] == '}' && j - i - 1 <= 64)
    return j - i - 1;
  return 0;
}

// Template files end with a newline that is not part of the template.
std::string strip_final_newline(std::string text) {
  if (!text.empty() && text.back() == '\n')
    text.pop_back();
  if (!text.empty() && text.back() == '\r')
    text.pop_back();
  return text;
}

} // namespace

std::variant<std::string, prompt_error>
render_template(std::string_view text, const prompt_vars& vars, std::string_view template_name) {
  std::string out;
  out.reserve(text.size() + 256);
  for (size_t i = 0; i < text.size();) {
    // The text up to the next brace, in one piece.
    auto brace = text.find('{', i);
    if (brace == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, brace - i));
    i = brace;
    if (auto len = placeholder_at(text, i); len > 0) {
      auto name = text.substr(i + 1, len);
      auto value = vars.find(name);
      if (value == vars.end())
        return prompt_error{"template '" + std::string{template_name} + "' needs the variable '"
                            + std::string{name} + "', which was not given"};
      out += value->second;
      i += len + 2;
      continue;
    }
    out += text[i++];
  }
  return out;
}

std::vector<std::string> template_variables(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i)
    if (auto len = placeholder_at(text, i); len > 0) {
      std::string name{text.substr(i + 1, len)};
      if (std::find(out.begin(), out.end(), name) == out.end())
        out.push_back(std::move(name));
      i += len + 1;
    }
  return out;
}

prompt_library prompt_library::embedded() {
  prompt_library out;
  for (size_t i = 0; i < embedded_prompt_count; ++i) {
    const auto& p = embedded_prompts[i];
    out.templates_.emplace(
      p.name, strip_final_newline(std::string{reinterpret_cast<const char*>(p.data), p.size}));
  }
  return out;
}

std::variant<size_t, prompt_error> prompt_library::load_overrides(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return prompt_error{"prompt folder '" + dir + "' does not exist"};
  std::map<std::string, std::string> found;
  for (const auto& entry : fs::directory_iterator{dir, ec}) {
    auto path = entry.path();
    auto ext = path.extension().string();
    if (ext != ".md" && ext != ".txt")
      continue;
    auto name = path.stem().string();
    auto base = templates_.find(name);
    if (base == templates_.end())
      return prompt_error{path.string() + ": no built-in prompt is named '" + name + "'"};
    // The rule of the configuration file: a regular file (or a link to
    // one), opened without blocking, at most max_prompt_file_size bytes.
    auto read = read_regular_file(path.string(), max_prompt_file_size);
    if (auto* err = std::get_if<file_error>(&read))
      return prompt_error{path.string() + ": "
                          + (err->what == file_error::kind::unreadable
                               ? "cannot be read: " + err->message
                               : err->message)};
    auto text = strip_final_newline(std::get<regular_file_text>(read).text);
    auto known = template_variables(base->second);
    for (const auto& var : template_variables(text))
      if (std::find(known.begin(), known.end(), var) == known.end())
        return prompt_error{path.string() + ": unknown variable {" + var
                            + "} (this prompt knows: " +
                            [&] {
                              std::string list;
                              for (const auto& k : known)
                                list += (list.empty() ? "" : ", ") + k;
                              return list.empty() ? std::string{"none"} : list;
                            }()
                            + ")"};
    if (found.count(name) > 0)
      return prompt_error{path.string() + ": '" + name + "' is given twice (.md and .txt)"};
    found.emplace(name, std::move(text));
  }
  if (ec)
    return prompt_error{"prompt folder '" + dir + "': " + ec.message()};
  for (auto& [name, text] : found)
    templates_[name] = std::move(text);
  return found.size();
}

const std::string* prompt_library::find(std::string_view name) const {
  auto i = templates_.find(name);
  return i == templates_.end() ? nullptr : &i->second;
}

std::variant<std::string, prompt_error> prompt_library::render(std::string_view name,
                                                               const prompt_vars& vars) const {
  const auto* text = find(name);
  if (text == nullptr)
    return prompt_error{"no prompt is named '" + std::string{name} + "'"};
  return render_template(*text, vars, name);
}

std::vector<std::string> prompt_library::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : templates_)
    out.push_back(name);
  return out;
}

void prompt_library::set(std::string name, std::string text) {
  templates_[std::move(name)] = std::move(text);
}

std::string prompt_date(std::chrono::system_clock::time_point when) {
  static const char* days[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                               "Thursday", "Friday", "Saturday"};
  static const char* months[] = {"January",   "February", "March",    "April",
                                 "May",       "June",     "July",     "August",
                                 "September", "October",  "November", "December"};
  auto t = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  localtime_r(&t, &tm);
  char day[8];
  std::snprintf(day, sizeof(day), "%02d", tm.tm_mday);
  return std::string{days[tm.tm_wday]} + " " + months[tm.tm_mon] + " " + day + ", "
         + std::to_string(tm.tm_year + 1900);
}

} // namespace quarry::core
