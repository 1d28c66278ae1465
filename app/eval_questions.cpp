// Question sets of `quarry eval run` (eval_questions.hpp).

#include "eval_questions.hpp"

#include "report_render.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sys/stat.h>

namespace quarry::app::eval {

namespace {

using nlohmann::json;

constexpr size_t max_id_bytes = 200;

// The id of `j` as text, or a message when it cannot be one.
std::variant<std::string, std::string> id_key(const json& j) {
  using result = std::variant<std::string, std::string>;
  if (j.is_number_integer() || j.is_number_unsigned())
    return result{std::in_place_index<0>, j.dump()};
  if (j.is_string()) {
    auto s = j.get<std::string>();
    if (sdk::trim(s).empty())
      return result{std::in_place_index<1>, "id is an empty string"};
    if (s.size() > max_id_bytes)
      return result{std::in_place_index<1>,
                    "id is longer than " + std::to_string(max_id_bytes) + " bytes"};
    for (auto c : s)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        return result{std::in_place_index<1>, "id holds a control character"};
    return result{std::in_place_index<0>, s};
  }
  if (j.is_null())
    return result{std::in_place_index<1>, "id is null"};
  if (j.is_number())
    return result{std::in_place_index<1>, "id is not a whole number (" + j.dump() + ")"};
  return result{std::in_place_index<1>,
                std::string{"id is "} + j.type_name() + " (an integer or a string is needed)"};
}

// The id as a message shows it: an integer as it is, a string quoted.
std::string quoted_id(const json& id) {
  return id.is_string() ? id.dump(-1, ' ', false, json::error_handler_t::replace) : id.dump();
}

// Why a line is no question, or empty.
std::string check_line(const json& j, question& q) {
  if (!j.is_object())
    return std::string{"not a JSON object but "} + j.type_name();
  auto id = j.find("id");
  if (id == j.end())
    return "no \"id\"";
  auto key = id_key(*id);
  if (key.index() == 1)
    return std::get<1>(key);
  q.key = std::get<0>(key);
  q.id = *id;
  auto prompt = j.find("prompt");
  if (prompt == j.end())
    return "id " + quoted_id(q.id) + ": no \"prompt\"";
  if (!prompt->is_string())
    return "id " + quoted_id(q.id) + ": \"prompt\" is " + prompt->type_name() + ", not a string";
  auto text = std::string{sdk::trim(prompt->get<std::string>())};
  if (text.empty())
    return "id " + quoted_id(q.id) + ": \"prompt\" is empty";
  if (text.size() > max_prompt_bytes)
    return "id " + quoted_id(q.id) + ": \"prompt\" is longer than "
           + std::to_string(max_prompt_bytes / 1024) + " KiB";
  q.prompt = std::move(text);
  if (auto mc = j.find("must_cite"); mc != j.end()) {
    if (!mc->is_array())
      return "id " + quoted_id(q.id) + ": \"must_cite\" is not an array of strings";
    for (const auto& x : *mc)
      if (!x.is_string() || sdk::trim(x.get<std::string>()).empty())
        return "id " + quoted_id(q.id) + ": \"must_cite\" holds " + x.dump()
               + ", not a non-empty string";
  }
  q.fields = j;
  return {};
}

} // namespace

std::variant<std::vector<question>, std::vector<std::string>>
parse_questions(std::string_view text) {
  std::vector<question> out;
  std::vector<std::string> errors;
  size_t unreported = 0;
  auto fail = [&](size_t line, const std::string& why) {
    if (errors.size() < max_reported_errors)
      errors.push_back(std::to_string(line) + ": " + why);
    else
      ++unreported;
  };
  if (sdk::starts_with(text, "\xEF\xBB\xBF"))
    text.remove_prefix(3);
  // Where each id key was first seen, and each file name.
  std::map<std::string, size_t> seen;
  std::map<std::string, std::string> stems;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    auto line = text.substr(pos,
                            end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (sdk::trim(line).empty())
      continue;
    if (auto bad = sdk::first_invalid_utf8(line); bad < line.size()) {
      fail(line_no, "not UTF-8 (byte " + std::to_string(bad + 1) + ")");
      continue;
    }
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      std::string why = e.what();
      // "[json.exception.parse_error.101] parse error at line 1, column 5:
      // ...": the part after the last ": " says what was wrong.
      if (auto at = why.find("column "); at != std::string::npos) {
        auto colon = why.find(": ", at);
        auto column = why.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
        auto what = colon == std::string::npos ? std::string{} : why.substr(colon + 2);
        why = column + (what.empty() ? "" : ": " + what);
      }
      fail(line_no, "not JSON (" + why + ")");
      continue;
    }
    question q;
    q.line = line_no;
    if (auto why = check_line(j, q); !why.empty()) {
      fail(line_no, why);
      continue;
    }
    if (auto [it, fresh] = seen.emplace(q.key, line_no); !fresh) {
      fail(line_no,
           "id " + quoted_id(q.id) + " is used on line " + std::to_string(it->second) + " already");
      continue;
    }
    auto stem = file_stem(q.key);
    if (auto [it, fresh] = stems.emplace(stem, q.key); !fresh) {
      fail(line_no, "id " + quoted_id(q.id) + " and id \"" + it->second
                      + "\" would be kept in the same file (" + stem + ".json)");
      continue;
    }
    out.push_back(std::move(q));
  }
  if (unreported > 0)
    errors.push_back("and " + std::to_string(unreported) + " more bad "
                     + (unreported == 1 ? "line" : "lines"));
  if (!errors.empty())
    return errors;
  if (out.empty())
    return std::vector<std::string>{"holds no question (one {\"id\", \"prompt\"} object per line)"};
  return out;
}

std::variant<std::vector<question>, std::vector<std::string>>
read_questions_file(const std::string& path) {
  using result = std::variant<std::vector<question>, std::vector<std::string>>;
  auto one = [&](const std::string& why) {
    return result{std::vector<std::string>{path + ": " + why}};
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return one(std::string{"cannot be read: "} + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return one("is a folder, not a questions file");
  if (!S_ISREG(st.st_mode))
    return one("is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_questions_bytes)
    return one("is larger than " + std::to_string(max_questions_bytes >> 20) + " MiB");
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return one(std::string{"cannot be read: "} + std::strerror(errno));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto parsed = parse_questions(text);
  if (auto* errors = std::get_if<std::vector<std::string>>(&parsed)) {
    for (auto& e : *errors)
      e = path + ":" + e;
  }
  return parsed;
}

std::string file_stem(std::string_view key) {
  auto plain = !key.empty() && key.size() <= 64 && key.front() != '.' && key.front() != '-';
  for (auto c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      plain = false;
  if (plain)
    return std::string{key};
  uint64_t h = 14695981039346656037ull;
  for (auto c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "id-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::vector<std::string> must_cite(const question& q) {
  std::vector<std::string> out;
  if (auto mc = q.fields.find("must_cite"); mc != q.fields.end() && mc->is_array())
    for (const auto& x : *mc)
      if (x.is_string())
        out.emplace_back(sdk::trim(x.get<std::string>()));
  return out;
}

bool cites_expected(const std::string& url, const std::string& title, const std::string& expected) {
  if (expected.empty())
    return false;
  if (url == expected || title == expected)
    return true;
  auto path = local_path_of(url);
  if (path.empty()) {
    // A web URL: its path, without query and fragment.
    path = url.substr(0, url.find_first_of("?#"));
  }
  return sdk::ends_with(path, "/" + expected);
}

std::string id_text(const nlohmann::json& id) {
  return id.is_string() ? id.get<std::string>() : id.dump();
}

} // namespace quarry::app::eval
