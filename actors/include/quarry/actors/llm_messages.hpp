// Messages between a requester and an LLM provider actor, and the provider's
// interfaces. The payload types cross nodes: each one has an inspect()
// overload that carries it field by field (the SDK types through
// quarry/actors/inspect.hpp, which keeps the SDK free of CAF).

#pragma once

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/inspect.hpp"
#include "quarry/core/model_prices.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/sdk/types.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace quarry::actors {

/// Starts a chat call: `(chat_atom, llm_call)` -> `llm_reply` or an error.
using chat_atom = caf::atom_constant<caf::atom("chat")>;

/// Streamed pieces of a call, sent by the provider actor to the requester:
/// `(delta_atom, llm_deltas)`.
using delta_atom = caf::atom_constant<caf::atom("delta")>;

/// Cancels a call: `(cancel_atom, call id)`.
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;

/// Asks for the model's facts: `(describe_atom)` -> `sdk::model_info`, with
/// the context window the server serves when the plugin can learn it (see
/// sdk::llm_provider::describe).
using describe_atom = caf::atom_constant<caf::atom("describe")>;

/// A chat call: an id chosen by the requester (unique per requester) and the
/// request.
struct llm_call {
  uint64_t id = 0;
  sdk::chat_request request;
};

/// What kind of piece an @ref llm_delta carries.
enum class delta_kind : uint8_t {
  text,
  reasoning,
  tool_call,
  usage,
};

/// One streamed piece of a call.
struct llm_delta {
  uint64_t call_id = 0;
  delta_kind kind = delta_kind::text;
  /// Text or reasoning piece.
  std::string text;
  /// Tool-call piece.
  sdk::tool_call_delta tool;
  /// Usage so far.
  sdk::usage counts;
};

/// Consecutive pieces of one call, in the order the model sent them: what
/// the plugin reported between two looks of the provider actor (one or
/// more; never empty).
using llm_deltas = std::vector<llm_delta>;

/// The successful end of a call.
struct llm_reply {
  uint64_t call_id = 0;
  sdk::chat_result result;
  /// Name of the provider instance that answered.
  std::string provider;
  /// Number of attempts it took (1 without retries).
  int32_t attempts = 1;
  /// Cost of this call in US dollars, per the configured prices or the
  /// shipped price table (core::price_for); 0 unless `basis` is `priced`.
  double cost_usd = 0;
  /// Whether `cost_usd` is a known cost, unknown (no price for the model)
  /// or no model ran (the offline extractive provider).
  core::cost_basis basis = core::cost_basis::unpriced;
};

/// Who answered `reply` and how its cost is known, for its usage packet.
inline core::packets::call_origin origin_of(const llm_reply& reply) {
  return {reply.provider, reply.result.model, reply.basis};
}

/// What a requester of a chat call receives while the call runs: the
/// provider sends `(delta_atom, llm_deltas)` to the actor that sent the
/// `chat_atom` request, so every requester implements this interface. The
/// pieces come before the call's reply (or error), in order.
using llm_listener_actor = caf::typed_actor<caf::reacts_to<delta_atom, llm_deltas>>;

/// The interface of an LLM provider actor.
/// - `(chat_atom, llm_call)` -> `llm_reply`: a call; deltas go to the sender.
/// - `(cancel_atom, id)`: cancels the sender's call `id`.
/// - `(stats_atom)` -> JSON text: the counters.
/// - `(describe_atom)` -> `sdk::model_info`: the plugin's describe(), asked
///   once per actor and cached; answered within llm_describe_timeout (a
///   plugin that says nothing by then: the configured facts with the window
///   unknown).
/// - `(stop_atom)`: fails every call (cancelled) and quits.
using llm_provider_actor = caf::typed_actor<
  caf::replies_to<chat_atom, llm_call>::with<llm_reply>, caf::reacts_to<cancel_atom, uint64_t>,
  caf::replies_to<stats_atom>::with<std::string>,
  caf::replies_to<describe_atom>::with<sdk::model_info>, caf::reacts_to<stop_atom>>;

// -- errors -------------------------------------------------------------------

/// The error category of LLM failures carried in caf::error.
constexpr caf::atom_value llm_error_category = caf::atom("llm");

/// Wraps an SDK error for an actor response; the context holds the SDK error
/// itself (message type `quarry.error`).
caf::error to_caf_error(const sdk::error& x);

/// Recovers the SDK error from an actor response error (also for CAF's own
/// errors, e.g. a request timeout becomes errc::timeout).
sdk::error from_caf_error(const caf::error& x);

// -- inspection ---------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_call& x) {
  return f(caf::meta::type_name("quarry.llm_call"), x.id, x.request);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_delta& x) {
  auto kind = detail::enum_field<delta_kind::usage>(x.kind);
  return f(caf::meta::type_name("quarry.llm_delta"), x.call_id, kind, x.text, x.tool, x.counts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_reply& x) {
  auto basis = detail::enum_field<core::cost_basis::offline>(x.basis);
  return f(caf::meta::type_name("quarry.llm_reply"), x.call_id, x.result, x.provider, x.attempts,
           x.cost_usd, basis);
}

} // namespace quarry::actors
