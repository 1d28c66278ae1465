// `quarry eval run QUESTIONS.jsonl --out DIR` and `quarry eval report DIR
// [DIR2]`: whole researches over a set of questions, measured and compared
// (docs/eval.md).

#pragma once

#include <limits>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace quarry::app {

struct context;

/// Options of `quarry eval run`.
struct eval_run_options {
  /// The value of numeric options that were not given.
  static constexpr int unset = std::numeric_limits<int>::min();
  /// The questions file (DeepResearch Bench's JSONL).
  std::string questions;
  /// The run's folder.
  std::string out;
  /// Researches at once (1-16).
  int concurrency = 1;
  /// Go on with the run in `out`.
  bool resume = false;
  std::string strategy;
  std::string mode;
  std::string depth;
  /// Research time per question, e.g. `10m`; empty: research.deadline.
  std::string deadline;
  int max_agents = unset;
  /// `--verify` (the default) / `--no-verify`.
  bool verify = false;
  bool no_verify = false;
  std::string corpus;
  /// Keep no session in the store.
  bool no_store = false;
};

/// Options of `quarry eval report`.
struct eval_report_options {
  /// One or two run folders.
  std::vector<std::string> dirs;
  /// Also write the HTML page here.
  std::string html;
};

/// The `eval` command and its subcommands, as added to the command line.
struct eval_commands {
  CLI::App* eval = nullptr;
  CLI::App* run = nullptr;
  CLI::App* report = nullptr;
  eval_run_options run_options;
  eval_report_options report_options;
};

/// Adds `eval run` and `eval report` to `cli`; their options are parsed
/// into `out`, which must outlive the parse.
void add_eval_commands(CLI::App& cli, eval_commands& out);

/// `quarry eval run`: exit 0 when every question has a report, 1 when a
/// research failed (its result records why; `--resume` asks it again) or the
/// run's files cannot be written, 2 for a bad command line, questions file
/// or folder, 130/143 when interrupted (finished questions are kept).
int cmd_eval_run(context& ctx, const eval_run_options& opts);

/// `quarry eval report DIR [DIR2] [--html FILE]`: exit 0; 2 when a folder
/// holds no run or the page's path cannot take a file; 1 when writing the
/// page fails.
int cmd_eval_report(context& ctx, const eval_report_options& opts);

} // namespace quarry::app
