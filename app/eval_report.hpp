// `quarry eval report DIR [DIR2] [--html FILE]`: the numbers of one
// evaluation run as a table, the difference between two runs per question
// and overall, and a self-contained HTML page with their distributions as
// inline SVG charts. Pure functions over the run folders (no CAF).

#pragma once

#include "eval_run_dir.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace quarry::app::eval {

/// A number of the report, read from each question's result.
struct metric {
  /// Short name: `read`, `cited`, `claims`, `supported`, `verified_pct`,
  /// `must_cite_pct`, `tokens`, `cost_usd`, `seconds`, ...
  const char* key;
  /// Column header of the table.
  const char* header;
  /// What it is, for the HTML page.
  const char* title;
  /// Digits after the decimal point when shown.
  int decimals;
  /// Whether more is better (the sign of a good difference).
  bool higher_is_better;
};

/// The metrics, in the order of the table's columns.
const std::vector<metric>& metrics();

/// One question of a run.
struct question_row {
  /// The id as the table shows it (a string without its quotes).
  std::string id;
  std::string key;
  /// `completed`, `failed`, `clarification`, `not run` or `unreadable`.
  std::string status;
  /// Metric values by metric key; a metric that does not apply (no
  /// verification, no must_cite, not completed) is absent.
  std::map<std::string, double> values;
};

/// A run's rows and counts.
struct run_summary {
  std::string dir;
  std::vector<question_row> rows;
  size_t completed = 0;
  size_t failed = 0;
  size_t not_run = 0;
  /// The run's options (run.json's `options`).
  nlohmann::json options;
};

/// The rows of `folder`, one per question of its set, in order.
run_summary summarize(const run_folder& folder);

/// The values of `metric_key` over the completed questions of `run` that
/// have one.
std::vector<double> values_of(const run_summary& run, const std::string& metric_key);

/// The mean of `values` (0 when empty) and their median.
double mean_of(const std::vector<double>& values);
double median_of(std::vector<double> values);

/// The run as a plain-text table: a line with the counts, one row per
/// question, then the mean and the median of each column over the completed
/// questions and the sums of tokens, cost and time.
std::string table_text(const run_summary& run);

/// The difference between run `a` and run `b` (`b - a`), as text: per
/// question (matched by id; a question in only one run is listed as such)
/// the change of status and of the main metrics, then overall for every
/// metric the means of both runs over the questions completed in both, the
/// change and how many questions went up and down.
std::string diff_text(const run_summary& a, const run_summary& b);

/// A self-contained HTML page (no script, no external resource: inline CSS
/// and SVG) with, for each metric, the distribution over the questions of
/// each run (a box of the quartiles with the median, every question as a
/// dot, the mean as a diamond), the tables and, with two runs, the change per
/// question. Every text from the runs is escaped.
std::string html_page(const std::vector<run_summary>& runs);

/// Escapes `&`, `<`, `>`, `"` and `'` for HTML.
std::string html_escape(const std::string& text);

} // namespace quarry::app::eval
