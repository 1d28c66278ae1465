// Runs a child process with arguments and environment, capturing its output
// and exit status: how integration tests drive the real `quarry` binary.

#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
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

/// Runs `argv[0]` with `argv` and waits for it.
process_result run_process(const std::vector<std::string>& argv,
                           const process_options& opts = {});

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

/// Reads a whole file; empty if it cannot be read.
std::string read_file(const std::string& path);

} // namespace quarry::test
