// The checkpoint of a research session: what the orchestrator strategy needs
// to go on after the process died (kill -9, power loss, SIGTERM). Taken at
// the start of every orchestrator cycle and before the final report, stored
// as JSON in the same transaction as the citations it numbers, and read back
// strictly: a checkpoint that does not parse or breaks an invariant is
// refused with a message, never half-used.

#pragma once

#include "quarry/core/citations.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace quarry::core {

/// The checkpoint format this build writes and reads.
inline constexpr int checkpoint_version = 1;

/// Where the strategy stood when the checkpoint was taken.
enum class checkpoint_phase : uint8_t {
  /// About to run orchestrator cycle `cycle`.
  orchestrate,
  /// About to write the final report.
  final_report,
};

/// The orchestrator strategy's state between two cycles.
struct research_checkpoint {
  checkpoint_phase phase = checkpoint_phase::orchestrate;
  /// The plan the research follows.
  std::string plan;
  int plan_turn = 0;
  int start_turn = 1;
  /// The next orchestrator cycle (0-based) and the cycles that reasoned.
  int cycle = 0;
  int reasoning_cycles = 0;
  bool retried_empty = false;
  /// The orchestrator's conversation so far (tool calls and their answers).
  std::vector<sdk::chat_message> orchestration;
  /// Global citation number -> document, in numbering order.
  citation_mapping global;
  /// Every cited document by id, with the text that was read.
  std::map<std::string, sdk::document> documents;
  /// Every finding so far: the agent's task and its collapsed report.
  std::vector<std::pair<std::string, std::string>> findings;
  /// Remarks for the user so far.
  std::vector<std::string> notices;
  /// Research time used before the checkpoint, in milliseconds.
  int64_t elapsed_ms = 0;
  /// Not a point to resume from: the store keeps only its documents and
  /// citations (the numbers of a report written after the last checkpoint,
  /// such as a cancelled research's findings). Not part of to_json().
  bool sources_only = false;
};

/// The checkpoint as JSON (`{"version": 1, "phase": ..., ...}`).
nlohmann::json to_json(const research_checkpoint& x);

/// Reads a checkpoint written by to_json(). Refuses another version, missing
/// or mistyped fields, negative counters, a citation number below 1 or used
/// twice, a document cited twice, and a mapping that names a document the
/// checkpoint does not hold.
std::variant<research_checkpoint, std::string> checkpoint_from_json(const nlohmann::json& j);

/// The time a resumed session gets: what was left of `deadline` at the
/// checkpoint, but at least a tenth of it (and at least a minute, if the
/// deadline is longer), so a resume can still do some research and write
/// its report.
int64_t resume_deadline_ms(int64_t deadline_ms, int64_t elapsed_ms);

} // namespace quarry::core
