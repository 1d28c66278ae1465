// The folder of an evaluation run (eval_run_dir.hpp).

#include "eval_run_dir.hpp"

#include "eval_result.hpp"
#include "output_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace quarry::app::eval {

namespace fs = std::filesystem;
using nlohmann::json;

struct run_folder::lock {
  int fd = -1;
  ~lock() {
    if (fd >= 0)
      ::close(fd);
  }
};

namespace {

constexpr size_t max_json_file_bytes = size_t{64} << 20;

// The whole of a small file, or why it cannot be read.
std::variant<std::string, std::string> read_text(const std::string& path) {
  using result = std::variant<std::string, std::string>;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return result{std::in_place_index<1>, std::strerror(errno)};
  if (!S_ISREG(st.st_mode))
    return result{std::in_place_index<1>, "not a regular file"};
  if (static_cast<uint64_t>(st.st_size) > max_json_file_bytes)
    return result{std::in_place_index<1>, "larger than 64 MiB"};
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return result{std::in_place_index<1>, std::strerror(errno)};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return result{std::in_place_index<0>, std::move(text)};
}

std::variant<json, std::string> read_json(const std::string& path) {
  auto text = read_text(path);
  if (text.index() == 1)
    return std::get<1>(text);
  try {
    return json::parse(std::get<0>(text));
  } catch (const json::exception& e) {
    return std::string{"not JSON: "} + e.what();
  }
}

std::string shown_id(const json& id) {
  return id.is_string() ? id.dump(-1, ' ', false, json::error_handler_t::replace) : id.dump();
}

// The questions of run.json's `questions` (each a question's line), checked
// again as a questions file would be.
std::variant<std::vector<question>, std::string> stored_questions(const json& manifest) {
  auto qs = manifest.find("questions");
  if (qs == manifest.end() || !qs->is_array())
    return std::string{"run.json has no list of questions"};
  std::string text;
  for (const auto& q : *qs)
    text += q.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  auto parsed = parse_questions(text);
  if (auto* errors = std::get_if<std::vector<std::string>>(&parsed))
    return "run.json's questions are malformed (" + errors->front() + ")";
  return std::get<std::vector<question>>(std::move(parsed));
}

// The first difference between two question sets (order aside), or empty.
std::string set_difference(const std::vector<question>& stored,
                           const std::vector<question>& given) {
  std::map<std::string, const question*> by_key;
  for (const auto& q : stored)
    by_key.emplace(q.key, &q);
  std::set<std::string> given_keys;
  for (const auto& q : given) {
    given_keys.insert(q.key);
    auto it = by_key.find(q.key);
    if (it == by_key.end())
      return "id " + shown_id(q.id) + " (line " + std::to_string(q.line)
             + " of the questions file) is not in it";
    if (it->second->prompt != q.prompt)
      return "the prompt of id " + shown_id(q.id) + " differs";
  }
  for (const auto& q : stored)
    if (given_keys.count(q.key) == 0)
      return "its id " + shown_id(q.id) + " is not in the questions file";
  return {};
}

std::string results_dir(const std::string& dir) {
  return dir + "/results";
}

std::string result_path(const std::string& dir, const question& q) {
  return results_dir(dir) + "/" + file_stem(q.key) + ".json";
}

// Reads every result of `folder.questions` there is.
void read_results(run_folder& folder) {
  for (const auto& q : folder.questions) {
    auto path = result_path(folder.dir, q);
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec)))
      continue;
    auto j = read_json(path);
    auto where = "results/" + file_stem(q.key) + ".json";
    if (auto* why = std::get_if<std::string>(&j)) {
      folder.unreadable.push_back(where + ": " + *why);
      continue;
    }
    auto& value = std::get<json>(j);
    if (!value.is_object() || !value.contains("id") || value["id"] != q.id) {
      folder.unreadable.push_back(where + ": not the result of id " + shown_id(q.id));
      continue;
    }
    folder.results[q.key] = std::move(value);
  }
}

// Takes DIR/run.lock; an error when another process holds it.
std::variant<std::shared_ptr<run_folder::lock>, std::string> take_lock(const std::string& dir) {
  auto l = std::make_shared<run_folder::lock>();
  auto path = dir + "/run.lock";
  l->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (l->fd < 0)
    return dir + " cannot be written: " + std::strerror(errno);
  if (::flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return "another process runs the evaluation in " + dir + " now";
    return dir + "/run.lock cannot be locked: " + std::strerror(errno);
  }
  return l;
}

} // namespace

json to_json(const run_options& x) {
  return {{"strategy", x.strategy},     {"mode", x.mode},
          {"depth", x.depth},           {"deadline_ms", x.deadline_ms},
          {"max_agents", x.max_agents}, {"verify", x.verify},
          {"corpus", x.corpus}};
}

run_options run_options_from(const json& j) {
  run_options x;
  if (!j.is_object())
    return x;
  auto str = [&](const char* key, std::string& out) {
    if (auto i = j.find(key); i != j.end() && i->is_string())
      out = i->get<std::string>();
  };
  str("strategy", x.strategy);
  str("mode", x.mode);
  str("depth", x.depth);
  str("verify", x.verify);
  str("corpus", x.corpus);
  if (auto i = j.find("deadline_ms"); i != j.end() && i->is_number_integer())
    x.deadline_ms = i->get<int64_t>();
  if (auto i = j.find("max_agents"); i != j.end() && i->is_number_integer())
    x.max_agents = i->get<int>();
  return x;
}

std::variant<run_options, std::string>
resumed_options(const run_options& stored, const run_options& given, bool verify_given) {
  auto out = stored;
  std::string problems;
  auto text = [&](const char* flag, const std::string& s, const std::string& g, std::string& o) {
    if (g.empty() || g == s)
      return;
    problems += std::string{problems.empty() ? "" : "; "} + flag + " " + g + " (the run has "
                + (s.empty() ? std::string{"the configured one"} : s) + ")";
    o = g;
  };
  text("--strategy", stored.strategy, given.strategy, out.strategy);
  text("--mode", stored.mode, given.mode, out.mode);
  text("--depth", stored.depth, given.depth, out.depth);
  text("--corpus", stored.corpus, given.corpus, out.corpus);
  if (verify_given && given.verify != stored.verify)
    problems += std::string{problems.empty() ? "" : "; "}
                + (given.verify == "on" ? "--verify" : "--no-verify") + " (the run has verify "
                + stored.verify + ")";
  auto number = [&](const char* flag, int64_t s, int64_t g) {
    if (g == 0 || g == s)
      return;
    problems += std::string{problems.empty() ? "" : "; "} + flag + " " + std::to_string(g)
                + " (the run has "
                + (s == 0 ? std::string{"the configured one"} : std::to_string(s)) + ")";
  };
  number("--deadline (ms)", stored.deadline_ms, given.deadline_ms);
  number("--max-agents", stored.max_agents, given.max_agents);
  if (!problems.empty())
    return "the run was started with other options: " + problems
           + "; resume without them, or name another folder for a run with them";
  return out;
}

std::variant<run_folder, std::string>
open_for_run(const std::string& dir, const std::vector<question>& questions,
             const run_options& options, bool verify_given, bool resume, const json& extra) {
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    return dir + " is not a folder";
  if (!fs::exists(st)) {
    fs::create_directories(dir, ec);
    if (ec)
      return dir + " cannot be created: " + ec.message();
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return dir + " cannot be written: " + std::strerror(errno);
  auto manifest_path = dir + "/run.json";
  auto has_manifest = fs::exists(fs::symlink_status(manifest_path, ec));
  if (!has_manifest) {
    // A new run: only in a folder that holds nothing else (a lock file left
    // by a run that died before writing run.json aside).
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      auto name = entry.path().filename().string();
      if (name != "run.lock")
        return dir + " holds other files (" + name
               + ") and no evaluation run: name a new or empty folder";
    }
    if (ec)
      return dir + " cannot be read: " + ec.message();
  }
  auto taken = take_lock(dir);
  if (auto* why = std::get_if<std::string>(&taken))
    return *why;
  run_folder folder;
  folder.dir = dir;
  folder.held = std::get<std::shared_ptr<run_folder::lock>>(std::move(taken));
  if (has_manifest) {
    auto read = read_json(manifest_path);
    if (auto* why = std::get_if<std::string>(&read))
      return dir + "/run.json cannot be read: " + *why;
    auto& manifest = std::get<json>(read);
    if (!manifest.is_object() || manifest.value("format", "") != run_format)
      return dir + "/run.json is not the record of a Quarry evaluation run";
    auto stored = stored_questions(manifest);
    if (auto* why = std::get_if<std::string>(&stored))
      return dir + ": " + *why;
    auto& stored_set = std::get<std::vector<question>>(stored);
    folder.questions = stored_set;
    read_results(folder);
    size_t done = 0;
    for (const auto& q : folder.questions)
      if (auto it = folder.results.find(q.key);
          it != folder.results.end() && is_finished(it->second, q))
        ++done;
    if (!resume)
      return dir + " holds an evaluation run already (" + std::to_string(done) + " of "
             + std::to_string(folder.questions.size())
             + " questions done): pass --resume to go on with it, or name another folder";
    if (auto diff = set_difference(stored_set, questions); !diff.empty())
      return dir + " holds a run of another question set (" + diff
             + "): resume it with the questions it was started with, or name another folder";
    auto merged = resumed_options(run_options_from(manifest.value("options", json::object())),
                                  options, verify_given);
    if (auto* why = std::get_if<std::string>(&merged))
      return dir + ": " + *why;
    folder.options = std::get<run_options>(merged);
    manifest["resumed_at"] = extra.value("started_at", json(nullptr));
    folder.manifest = std::move(manifest);
  } else {
    folder.questions = questions;
    folder.options = options;
    json list = json::array();
    for (const auto& q : questions)
      list.push_back(q.fields);
    json manifest = {{"format", run_format}};
    for (const auto& [key, value] : extra.items())
      manifest[key] = value;
    manifest["options"] = to_json(options);
    manifest["questions"] = std::move(list);
    folder.manifest = std::move(manifest);
  }
  // Written again on resume: a folder that cannot be written fails now.
  if (auto why = write_output_file(
        manifest_path, folder.manifest.dump(2, ' ', false, json::error_handler_t::replace) + "\n"))
    return *why;
  fs::create_directories(results_dir(dir), ec);
  if (ec)
    return results_dir(dir) + " cannot be created: " + ec.message();
  return folder;
}

std::variant<run_folder, std::string> open_for_report(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return dir + " is not a folder";
  auto manifest_path = dir + "/run.json";
  if (!fs::exists(fs::symlink_status(manifest_path, ec)))
    return dir + " holds no evaluation run (no run.json)";
  auto read = read_json(manifest_path);
  if (auto* why = std::get_if<std::string>(&read))
    return dir + "/run.json cannot be read: " + *why;
  auto& manifest = std::get<json>(read);
  if (!manifest.is_object() || manifest.value("format", "") != run_format)
    return dir + "/run.json is not the record of a Quarry evaluation run";
  auto stored = stored_questions(manifest);
  if (auto* why = std::get_if<std::string>(&stored))
    return dir + ": " + *why;
  run_folder folder;
  folder.dir = dir;
  folder.questions = std::get<std::vector<question>>(std::move(stored));
  folder.options = run_options_from(manifest.value("options", json::object()));
  folder.manifest = std::move(manifest);
  read_results(folder);
  return folder;
}

std::optional<std::string> write_result(run_folder& folder, const question& q, const json& result) {
  auto text = result.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (auto why = write_output_file(result_path(folder.dir, q), text))
    return why;
  folder.results[q.key] = result;
  return std::nullopt;
}

std::string articles_text(const run_folder& folder) {
  std::string out;
  for (const auto& q : folder.questions) {
    auto it = folder.results.find(q.key);
    if (it == folder.results.end() || !is_finished(it->second, q))
      continue;
    out += article_line(it->second);
    out += '\n';
  }
  return out;
}

std::optional<std::string> write_articles(const run_folder& folder) {
  return write_output_file(folder.dir + "/articles.jsonl", articles_text(folder));
}

} // namespace quarry::app::eval
