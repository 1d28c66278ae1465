// The final report's pieces that both strategies' sessions share: its
// documents, its streamed text with citation packets, its cited sources, and
// what the verifier gets. Internal to quarry_actors.

#pragma once

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/verifier.hpp"
#include "quarry/core/citations.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace quarry::actors::detail {

/// The documents of the global numbering that are known, in numbering
/// order (the report's `message_start`).
std::vector<sdk::document> final_documents(const core::citation_mapping& global,
                                           const std::map<std::string, sdk::document>& docs);

/// Streams a processed chunk of the report at `at`: its text as message
/// deltas (also appended to `text`), a `citation_info` packet at each new
/// citation.
void emit_chunk(const packet_sink_actor& em, const core::placement& at, std::string& text,
                const core::citation_chunk& chunk);

/// The sources the processed report cites, by global number, ascending.
std::vector<report_source> cited_sources(const core::citation_processor& processor,
                                         const core::citation_mapping& global);

/// What the verifier checks `report` against: the text of every numbered
/// document (its snippet when no text was read), within `timeout` but never
/// more than a second past the research deadline (`left`: the time to it).
verifier_spec verification_spec(std::string report, const core::citation_mapping& global,
                                const std::map<std::string, sdk::document>& docs,
                                core::verification::action what, std::chrono::milliseconds timeout,
                                std::chrono::milliseconds left, std::string judge_system);

/// The verification section of a verified report (from its
/// "## Verification" heading, with the blank line before it), or empty.
std::string verification_section(const std::string& report);

/// A notice for a report whose documents hold too little of `question`
/// (lexical::question_coverage over each document's text, its snippet
/// when no text was read), or nothing when they can answer it.
std::optional<std::string> unanswered_notice(const std::string& question,
                                             const std::map<std::string, sdk::document>& docs);

/// Why a research that read no source failed: "no source was read" and
/// what went wrong on the way (the run's `notices`, at most five).
std::string no_sources_reason(const std::vector<std::string>& notices);

} // namespace quarry::actors::detail
