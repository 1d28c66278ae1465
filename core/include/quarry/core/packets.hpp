// Packets: everything a user sees of a research session, in Onyx's streaming
// vocabulary (plus Quarry's additions), with placements and sequence numbers.
#pragma once

#include "quarry/core/model_prices.hpp"
#include "quarry/sdk/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core {

/// Where a packet belongs in the timeline: a block (`turn_index`), the
/// parallel branch (`tab_index`: which research agent or tool call) and the
/// step inside a nested agent (`sub_turn_index`, none at top level).
struct placement {
  int turn_index = 0;
  int tab_index = 0;
  std::optional<int> sub_turn_index;

  friend bool operator==(const placement& x, const placement& y) {
    return x.turn_index == y.turn_index && x.tab_index == y.tab_index
           && x.sub_turn_index == y.sub_turn_index;
  }
};

/// One packet. `obj` holds `type` and the type's fields (see the
/// constructors in namespace `packets`).
struct packet {
  /// Position in the session's stream, from 1; 0 until the emitter stamps it.
  uint64_t seq = 0;
  /// The session's id; empty until the emitter stamps it.
  std::string session;
  placement where;
  nlohmann::json obj;

  /// The packet's `obj.type`.
  std::string type() const;
};

/// Encodes `{"seq", "session", "placement": {"turn_index", "tab_index",
/// "sub_turn_index"}, "obj"}` as one line of JSON (no newline).
std::string encode(const packet& x);

/// Encodes a packet whose `obj` is already JSON text, `obj_json` (an
/// object, as `nlohmann::json::dump` writes it): byte for byte what
/// encode() gives for the parsed object, built by joining the text with the
/// envelope, so a packet's object is serialised once. Returns nothing when
/// `obj_json` is not a JSON object (its grammar and UTF-8 are checked without
/// building it, by core::is_json, at any depth).
std::optional<std::string> encode(uint64_t seq, std::string_view session, const placement& where,
                                  std::string_view obj_json);

/// `x` as JSON text, byte for byte what `x.dump(-1, ' ', false,
/// nlohmann::json::error_handler_t::replace)` writes (keys in the object's
/// order, the same escapes, invalid UTF-8 replaced by nlohmann), written
/// without its serializer's byte-by-byte UTF-8 decoding: a string of valid
/// UTF-8 is copied in runs between the bytes that need escapes.
std::string dump_json(const nlohmann::json& x);

/// `session` as a JSON string (as encode() writes it), for encode_dumped.
std::string session_json(std::string_view session);

/// encode() of text that dump_json (or nlohmann's dump) wrote from an
/// object: the text is not checked again. `session` is session_json's.
std::string encode_dumped(uint64_t seq, std::string_view session, const placement& where,
                          std::string_view obj_json);

/// Decodes one line written by encode(); a message on malformed input.
std::variant<packet, std::string> decode(std::string_view line);

/// Returns whether `type` is a packet type this version knows.
bool is_known_packet_type(std::string_view type);

/// Onyx's SearchDoc fields for a document (document_id, semantic_identifier,
/// link, blurb, source_type, updated_at, is_internet, ...), and Quarry's
/// `snippet_only` (nothing of it was read but the search snippet).
nlohmann::json search_doc(const sdk::document& doc);

/// The text of a packet object of `type` whose one other member `key`
/// holds `docs` as search_doc gives them (`search_tool_documents_delta`,
/// `open_url_documents`: `documents`; `intermediate_report_cited_docs`:
/// `cited_docs`), written directly: byte for byte what `dump_json` gives
/// for the object the constructor of that type returns, without building
/// it. The largest packets of a research (one entry per search result).
std::string documents_packet_text(std::string_view type, std::string_view key,
                                  const std::vector<sdk::document>& docs);

/// Constructors of `obj` for each packet type.
namespace packets {

// -- control ---------------------------------------------------------------
nlohmann::json section_end();
/// `stop_reason`: none for a normal end, `user_cancelled`, `deadline`, ...
nlohmann::json stop(std::optional<std::string> stop_reason = std::nullopt);
nlohmann::json top_level_branching(int num_parallel_branches);
/// Onyx sends no details; Quarry adds a message and an error class.
nlohmann::json error(const std::string& message, const std::string& code = {});
nlohmann::json heartbeat();

// -- reasoning and answer ---------------------------------------------------
nlohmann::json reasoning_start();
nlohmann::json reasoning_delta(const std::string& text);
nlohmann::json reasoning_done();
nlohmann::json message_start(const std::vector<sdk::document>* final_documents,
                             std::optional<double> pre_answer_seconds);
nlohmann::json message_delta(const std::string& text);
nlohmann::json citation_info(int citation_number, const std::string& document_id);

// -- tools ------------------------------------------------------------------
nlohmann::json search_tool_start(bool is_internet_search);
nlohmann::json search_tool_queries_delta(const std::vector<std::string>& queries);
nlohmann::json search_tool_documents_delta(const std::vector<sdk::document>& docs);
nlohmann::json open_url_start();
nlohmann::json open_url_urls(const std::vector<std::string>& urls);
nlohmann::json open_url_documents(const std::vector<sdk::document>& docs);

// -- deep research ------------------------------------------------------------
nlohmann::json deep_research_plan_start();
nlohmann::json deep_research_plan_delta(const std::string& text);
nlohmann::json research_agent_start(const std::string& research_task);
nlohmann::json intermediate_report_start();
nlohmann::json intermediate_report_delta(const std::string& text);
nlohmann::json intermediate_report_cited_docs(const std::vector<sdk::document>& docs);

// -- Quarry's additions -------------------------------------------------------
/// Clarifying questions; the session ends waiting for the user's answer.
nlohmann::json clarification(const std::string& questions);
/// Who answered an LLM call and how its cost is known.
struct call_origin {
  /// The provider instance, e.g. `main`; empty when not known.
  std::string provider;
  /// The model that answered, as its server named it.
  std::string model;
  cost_basis basis = cost_basis::priced;
};

/// Tokens and cost of one LLM call (`role`: orchestrator, research_agent,
/// ...): `{role, provider, model, input_tokens, output_tokens,
/// reasoning_tokens, cached_input_tokens, cost_usd, cost_known, offline}`.
/// `provider` and `model` are left out when not known; `model` is null and
/// `offline` true for the offline extractive provider (no model ran; its
/// token counts are estimates); `cost_known` is false when no price applied
/// to the model (`cost_usd` is then 0, not a cost of 0).
nlohmann::json usage(const std::string& role, const sdk::usage& tokens, double cost_usd,
                     const call_origin& origin = {});
/// A note for the user that is not part of the answer (degradations,
/// deadlines, skipped calls).
nlohmann::json notice(const std::string& text);

/// Quarry's `model_profile`: whether the research treats its models as
/// reasoning models (no think_tool, fewer orchestrator cycles), why
/// (`reason`: e.g. `research.reasoning_model: on`, `the model's name
/// (deepseek-reasoner)`, `its first answer carried reasoning`), and the
/// orchestrator cycles that follow. Sent at the start, and again when the
/// first answer changes the decision.
nlohmann::json model_profile(bool reasoning_model, const std::string& reason,
                             int orchestrator_cycles);
/// The session goes on after its process stopped: from checkpoint
/// `checkpoint` (0: from the start), and the packets after seq
/// `superseded_after` up to this one belong to the attempt that was
/// interrupted (a view drops what they showed).
nlohmann::json resumed(int64_t checkpoint, uint64_t superseded_after);
/// A research agent's attempt `attempt` (counted from 1) on `worker` (empty:
/// this node) was given up (`reason`): every packet at this placement
/// (turn, tab) before this one belongs to it, and a view drops what they
/// showed; the agent starts again after it, on another node.
nlohmann::json agent_superseded(int attempt, const std::string& worker, const std::string& reason);

} // namespace packets

} // namespace quarry::core
