// The command-line interface of `quarry`.

#pragma once

namespace quarry::app {

/// Exit codes shared by every command.
enum exit_code : int {
  exit_ok = 0,
  /// The command failed (a plugin named in the configuration is missing, a
  /// request failed, ...).
  exit_failure = 1,
  /// The configuration or the command line is invalid.
  exit_usage = 2,
  /// The research question needs clarification (questions printed).
  exit_clarify = 3,
};

/// Parses the command line and runs the command. Returns the exit code.
int run(int argc, char** argv);

} // namespace quarry::app
