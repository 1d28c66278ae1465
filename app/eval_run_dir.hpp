// The folder of an evaluation run (`quarry eval run QUESTIONS --out DIR`):
//
//   DIR/run.json             the question set and the options of the run
//   DIR/results/<stem>.json  one result per question that ended
//                            (eval_result.hpp; <stem> is file_stem(id))
//   DIR/articles.jsonl       DeepResearch Bench's {"id", "prompt", "article"}
//                            per completed question, in the set's order
//   DIR/run.lock             held while a process runs it
//
// Every file is replaced atomically (a temporary file, fsync, rename), and
// articles.jsonl is rebuilt from the results after each question, so a
// process killed at any moment (kill -9 included) leaves only whole files:
// a result is there or not, and `--resume` runs exactly the questions
// without a completed one.

#pragma once

#include "eval_questions.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace quarry::app::eval {

/// The value of run.json's `format`.
inline constexpr const char* run_format = "quarry-eval/1";

/// The options a run's results depend on, kept in run.json: a resumed run
/// goes on with them.
struct run_options {
  /// `--strategy`, `--mode`, `--depth`; empty: the configured ones.
  std::string strategy;
  std::string mode;
  std::string depth;
  /// Research time per question (ms); 0: research.deadline.
  int64_t deadline_ms = 0;
  /// Research agents at once per question; 0: the configured number.
  int max_agents = 0;
  /// `on` or `off`: whether each report is checked claim by claim.
  std::string verify = "on";
  /// The corpus folder (absolute), or empty.
  std::string corpus;
};

nlohmann::json to_json(const run_options& x);

/// Reads run options; missing or mistyped fields keep their defaults.
run_options run_options_from(const nlohmann::json& j);

/// The options a resumed run goes on with: the stored ones, where `given`
/// (what the command line says; an empty string or 0 where it says nothing)
/// names none. An option given with another value than the stored one is an
/// error that names both: the results of one run are made one way.
/// `verify_given` tells whether `given.verify` was given.
std::variant<run_options, std::string> resumed_options(const run_options& stored,
                                                       const run_options& given, bool verify_given);

/// A run's folder, opened.
struct run_folder {
  std::string dir;
  /// The question set, in order (from run.json when it was read).
  std::vector<question> questions;
  run_options options;
  /// run.json as written.
  nlohmann::json manifest;
  /// The results that could be read, by question key.
  std::map<std::string, nlohmann::json> results;
  /// Results that could not be read (`results/<stem>.json: why`).
  std::vector<std::string> unreadable;

  /// The held lock (`run.lock`), when opened for a run.
  struct lock;
  std::shared_ptr<lock> held;
};

/// Opens `dir` for `quarry eval run`: creates it (and its parents) when
/// missing, takes `run.lock` (another process running it is an error), and:
/// - a new run (no run.json): `dir` must hold nothing else; run.json is
///   written with `questions`, `options` and `extra` (merged into it:
///   version, questions file, start time);
/// - with run.json and without `resume`: an error (the results there are
///   kept; `--resume` goes on with them);
/// - with run.json and `resume`: the stored set must be `questions` (same
///   ids with the same prompts, in any order; the first difference is named)
///   and `options` must agree with the stored ones (resumed_options()); the
///   results are read, and run.json is written again (so an unwritable folder
///   fails now, not after the first research).
/// Every error is one message naming `dir`; nothing already there is
/// removed or changed.
std::variant<run_folder, std::string> open_for_run(const std::string& dir,
                                                   const std::vector<question>& questions,
                                                   const run_options& options, bool verify_given,
                                                   bool resume, const nlohmann::json& extra);

/// Opens `dir` for reading (`quarry eval report`): run.json and every result
/// that can be read. An error when `dir` holds no run.json or it cannot be
/// read.
std::variant<run_folder, std::string> open_for_report(const std::string& dir);

/// Writes `result` as the result of `q` (atomically) and keeps it in
/// `folder.results`; the reason on failure.
std::optional<std::string> write_result(run_folder& folder, const question& q,
                                        const nlohmann::json& result);

/// The text of articles.jsonl: one article_line() per completed result, in
/// the set's order, each ended by a newline.
std::string articles_text(const run_folder& folder);

/// Rewrites DIR/articles.jsonl (atomically) from `folder.results`; the reason
/// on failure.
std::optional<std::string> write_articles(const run_folder& folder);

} // namespace quarry::app::eval
