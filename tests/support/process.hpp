// Runs a child process with arguments and environment, capturing its output
// and exit status: how integration tests drive the real `quarry` binary.

#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quarry::test {

/// The outcome of a child process.
struct process_result {
  /// Exit status, or 128 + signal number if a signal ended it.
  int exit_code = -1;
  std::string out;
  std::string err;
  /// True if the process was killed because it exceeded its time limit.
  bool timed_out = false;
};

/// Options of @ref run_process.
struct process_options {
  /// Variables added to (or, with an empty optional, removed from) the
  /// inherited environment.
  std::map<std::string, std::optional<std::string>> env;
  /// Working directory; empty means the current one.
  std::string cwd;
  /// Written to the child's standard input, which is then closed.
  std::string input;
  /// Killed with SIGKILL after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds{120}};
};

/// The environment changes that run `quarry` as a new user would, whatever
/// the caller's environment holds: HOME is `home`; the user's configuration,
/// data folder and every provider and search key variable are unset.
std::map<std::string, std::optional<std::string>> isolated_quarry_env(const std::string& home);

/// Options of a `quarry` run: the environment of isolated_quarry_env(home)
/// with `extra_env` applied in order (nothing unsets a variable).
process_options isolated_quarry_options(
  const std::string& home,
  const std::vector<std::pair<std::string, std::optional<std::string>>>& extra_env = {});

/// Runs `argv[0]` with `argv` and waits for it.
process_result run_process(const std::vector<std::string>& argv, const process_options& opts = {});

/// A temporary directory, removed with its contents on destruction.
class temp_dir {
public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// The directory's path.
  const std::string& path() const noexcept {
    return path_;
  }

  /// Returns `path() + "/" + name`.
  std::string file(const std::string& name) const {
    return path_ + "/" + name;
  }

  /// Writes `content` to `name` (creating parent folders) and returns the path.
  std::string write(const std::string& name, const std::string& content) const;

private:
  std::string path_;
};

/// A child process running in the background, for tests that signal it or
/// watch it while it runs. Standard output and error go to files, standard
/// input reads `opts.input`. A child still running at destruction is killed.
class child_process {
public:
  child_process(const std::vector<std::string>& argv, const process_options& opts = {});
  ~child_process();

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// The child's process id.
  int pid() const noexcept {
    return pid_;
  }

  /// Sends `sig` to the child (nothing if it has ended).
  void signal(int sig);

  /// Waits until the child ends or `timeout` passes (then kills it and sets
  /// `timed_out`), and returns what it printed and its exit status.
  process_result wait(std::chrono::milliseconds timeout);

  /// Waits until standard error contains `needle`; false if the child ended
  /// or `timeout` passed first.
  bool wait_for_err(const std::string& needle, std::chrono::milliseconds timeout);

  /// Waits until standard error holds a whole line (ended by a newline) that
  /// contains `needle`, and returns that line without its newline; nothing if
  /// the child ended or `timeout` passed first. A child may write one line in
  /// several pieces, so a caller that parses the line must wait for its end.
  std::optional<std::string> wait_for_err_line(const std::string& needle,
                                               std::chrono::milliseconds timeout);

  /// Standard error so far.
  std::string err() const;

  /// Waits until the child blocks `sig` (read from /proc), which is how
  /// `quarry` takes its stop signals onto its signal thread: a signal sent
  /// earlier would still find the default action and kill it silently.
  /// False if the child ended or `timeout` passed first.
  bool wait_until_blocked(int sig, std::chrono::milliseconds timeout);

private:
  temp_dir dir_;
  int pid_ = -1;
  bool reaped_ = false;
  process_result result_;
};

/// `x` quoted for a POSIX shell: in single quotes, each `'` written `'\''`.
inline std::string shell_quote(const std::string& x) {
  std::string out = "'";
  for (auto c : x) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

/// Reads a whole file; empty if it cannot be read.
std::string read_file(const std::string& path);

} // namespace quarry::test
