// PDF with headless Chromium, DOCX with pandoc (see report_export.hpp).

#include "report_export.hpp"

#include "quarry/sdk/strings.hpp"

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace quarry::app {

namespace fs = std::filesystem;

namespace {

struct tool_info {
  std::vector<std::string> names;
  const char* shown;
  const char* package;
  const char* what;
};

tool_info info_of(export_format f) {
  if (f == export_format::pdf)
    return {{"chromium", "chromium-browser"}, "Chromium", "chromium", "PDF"};
  return {{"pandoc"}, "pandoc", "pandoc", "DOCX"};
}

// An executable regular file `name` in a folder of PATH (Debian's default
// PATH when it is unset), or empty.
std::string on_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string path = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream dirs{path};
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty())
      continue;
    auto candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return {};
}

export_error missing(export_format f) {
  auto t = info_of(f);
  return {export_error::kind::missing_tool,
          std::string{t.what} + " export needs " + t.shown
            + ", which is not installed (not found on PATH): install the Debian package "
            + t.package + " (apt-get install " + t.package + ", or scripts/setup --exports)",
          {}};
}

// A private folder for one export, removed with its contents.
class work_dir {
public:
  work_dir() {
    std::error_code ec;
    auto base = fs::temp_directory_path(ec);
    if (ec)
      base = "/tmp";
    auto pattern = (base / "quarry-export-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr)
      path_ = pattern;
    else
      error_ = std::strerror(errno);
  }
  ~work_dir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  work_dir(const work_dir&) = delete;
  work_dir& operator=(const work_dir&) = delete;

  const std::string& path() const {
    return path_;
  }
  const std::string& error() const {
    return error_;
  }

private:
  std::string path_;
  std::string error_;
};

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << text;
  out.close();
  return static_cast<bool>(out);
}

// The end of a file, at most `most` bytes.
std::string tail_of(const std::string& path, size_t most) {
  std::ifstream in{path, std::ios::binary | std::ios::ate};
  if (!in)
    return {};
  auto size = static_cast<size_t>(in.tellg());
  auto from = size > most ? size - most : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string out(size - from, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// The last lines of a tool's output, for a message: cleaned of controls.
std::string last_lines(const std::string& output, size_t lines) {
  auto text = sdk::strip_terminal_controls(output);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  size_t pos = text.size();
  for (size_t n = 0; n < lines && pos != std::string::npos && pos > 0; ++n)
    pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

// A percent-encoded file:// URL of an absolute path.
std::string file_url(const std::string& path) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) != 0 || c == '/' || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> read_whole(const std::string& path, size_t most, bool& too_big) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec)
    return std::nullopt;
  if (size > most) {
    too_big = true;
    return std::nullopt;
  }
  std::ifstream in{path, std::ios::binary};
  std::string out(static_cast<size_t>(size), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (static_cast<size_t>(in.gcount()) != out.size())
    return std::nullopt;
  return out;
}

// A document that looks whole: a PDF's header and its end marker near the
// end; a DOCX (a zip file) with its local header and end of central
// directory.
bool looks_whole(const std::string& doc, export_format f) {
  if (f == export_format::pdf) {
    if (doc.compare(0, 5, "%PDF-") != 0)
      return false;
    auto end = doc.size() > 1024 ? doc.size() - 1024 : 0;
    return doc.find("%%EOF", end) != std::string::npos;
  }
  if (doc.size() < 22 || doc.compare(0, 4, std::string{"PK\x03\x04", 4}) != 0)
    return false;
  auto end = doc.size() > 65557 ? doc.size() - 65557 : 0;
  return doc.find(std::string{"PK\x05\x06", 4}, end) != std::string::npos;
}

} // namespace

std::optional<export_format> export_format_from(std::string_view name) {
  if (name == "pdf")
    return export_format::pdf;
  if (name == "docx")
    return export_format::docx;
  return std::nullopt;
}

std::string_view export_extension(export_format f) {
  return f == export_format::pdf ? "pdf" : "docx";
}

std::string_view export_content_type(export_format f) {
  return f == export_format::pdf
           ? "application/pdf"
           : "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
}

std::variant<std::string, export_error> find_export_tool(export_format f) {
  for (const auto& name : info_of(f).names)
    if (auto found = on_path(name); !found.empty())
      return found;
  return missing(f);
}

tool_outcome run_tool(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      const std::string& log_file, std::chrono::milliseconds timeout) {
  tool_outcome out;
  if (argv.empty()) {
    out.spawn_error = "no program";
    return out;
  }
  // The environment: ours, with `env` set.
  std::vector<std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view v{*e};
    auto eq = v.find('=');
    bool replaced = false;
    for (const auto& [k, _] : env)
      if (eq != std::string_view::npos && v.substr(0, eq) == k)
        replaced = true;
    if (!replaced)
      vars.emplace_back(v);
  }
  for (const auto& [k, v] : env)
    vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& v : vars)
    envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args)
    argp.push_back(a.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // Its own process group (killed whole), no blocked signals (Quarry blocks
  // SIGINT and SIGTERM in every thread), default dispositions.
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  pid_t pid = 0;
  auto rc = posix_spawn(&pid, args[0].c_str(), &fa, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    out.spawn_error = std::strerror(rc);
    return out;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds{5};
  for (;;) {
    siginfo_t info{};
    // Not reaped yet (WNOWAIT): while it is a zombie its id cannot name
    // another process group.
    auto w = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && info.si_pid == pid)
      break;
    if (w != 0 && errno != EINTR)
      break;
    if (std::chrono::steady_clock::now() >= deadline) {
      out.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{50});
  }
  // What it left behind (a browser's helpers) goes with it.
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    out.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    out.exit_code = 128 + WTERMSIG(status);
  out.output = tail_of(log_file, 4096);
  return out;
}

std::variant<std::string, export_error> export_report(const report_parts& r, export_format f,
                                                      const export_options& opts) {
  auto tool = info_of(f);
  std::string program = opts.program;
  if (program.empty()) {
    auto found = find_export_tool(f);
    if (auto* err = std::get_if<export_error>(&found))
      return *err;
    program = std::get<std::string>(found);
  }
  work_dir dir;
  if (dir.path().empty())
    return export_error{export_error::kind::system,
                        "cannot make a temporary folder for the " + std::string{tool.what}
                          + " export: " + dir.error(),
                        {}};
  auto html = dir.path() + "/report.html";
  auto doc = dir.path() + "/report." + std::string{export_extension(f)};
  auto log = dir.path() + "/tool.log";
  if (!write_file(html, sendable_html_report(r)))
    return export_error{export_error::kind::system,
                        "cannot write the report for the " + std::string{tool.what} + " export in "
                          + dir.path() + ": " + std::strerror(errno),
                        {}};
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  if (f == export_format::pdf) {
    // No network and nothing but this page: the page's CSP forbids every
    // load; the profile, its caches and the crash reports stay in the
    // temporary folder. --no-sandbox: Chromium's sandbox cannot start as
    // root or without user namespaces (a container), and the page runs no
    // script (the report's HTML has none, and the CSP forbids any).
    argv = {program,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--mute-audio",
            "--hide-scrollbars",
            "--no-pdf-header-footer",
            "--user-data-dir=" + dir.path() + "/profile",
            "--print-to-pdf=" + doc,
            file_url(html)};
    env = {{"XDG_CONFIG_HOME", dir.path() + "/config"}, {"XDG_CACHE_HOME", dir.path() + "/cache"}};
  } else {
    argv = {program, "--from=html", "--to=docx", "--output=" + doc, html};
  }
  auto ran = run_tool(argv, env, log, opts.timeout);
  auto name = fs::path{program}.filename().string();
  if (!ran.spawn_error.empty()) {
    if (ran.spawn_error == std::strerror(ENOENT))
      return missing(f);
    return export_error{export_error::kind::failed,
                        name + " (" + program + ") could not be started: " + ran.spawn_error,
                        {}};
  }
  if (ran.timed_out) {
    auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(opts.timeout).count();
    return export_error{export_error::kind::timed_out,
                        name + " did not finish the " + tool.what + " within "
                          + (secs % 1000 == 0 ? std::to_string(secs / 1000) + " s"
                                              : std::to_string(secs) + " ms")
                          + " and was stopped; no file was written",
                        ran.output};
  }
  if (ran.exit_code != 0) {
    auto said = last_lines(ran.output, 2);
    return export_error{export_error::kind::failed,
                        name + " failed to make the " + tool.what + " (exit status "
                          + std::to_string(ran.exit_code) + ")"
                          + (said.empty() ? std::string{} : ": " + said),
                        ran.output};
  }
  bool too_big = false;
  auto bytes = read_whole(doc, opts.max_bytes, too_big);
  if (too_big)
    return export_error{export_error::kind::bad_output,
                        name + " made a " + tool.what + " larger than "
                          + std::to_string(opts.max_bytes >> 20) + " MiB; it was not kept",
                        {}};
  if (!bytes || bytes->empty())
    return export_error{export_error::kind::bad_output,
                        name + " exited without writing the " + std::string{tool.what}, ran.output};
  if (!looks_whole(*bytes, f))
    return export_error{export_error::kind::bad_output,
                        name + " wrote a broken " + std::string{tool.what} + " (no "
                          + (f == export_format::pdf ? "PDF header or end marker"
                                                     : "zip header or directory")
                          + "); it was not kept",
                        ran.output};
  return std::move(*bytes);
}

std::string session_corpus(const nlohmann::json& options, const std::string& fallback) {
  if (options.is_object())
    if (auto it = options.find("corpus");
        it != options.end() && it->is_string() && !it->get<std::string>().empty())
      return it->get<std::string>();
  return fallback;
}

std::optional<export_slots::slot> export_slots::take() {
  auto n = taken_.fetch_add(1);
  if (n >= most_) {
    taken_.fetch_sub(1);
    return std::nullopt;
  }
  return slot{&taken_};
}

} // namespace quarry::app
