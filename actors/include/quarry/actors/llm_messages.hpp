// Messages between a requester and an LLM provider actor. The payload types
// cross nodes, so each one has an inspect() overload; SDK types travel in
// their JSON form (core/llm_json.hpp), which keeps the SDK free of CAF.

#pragma once

#include "quarry/sdk/types.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace quarry::actors {

/// Starts a chat call: `(chat_atom, llm_call)` -> `llm_reply` or an error.
using chat_atom = caf::atom_constant<caf::atom("chat")>;

/// A streamed piece of a call, sent by the provider actor to the requester.
using delta_atom = caf::atom_constant<caf::atom("delta")>;

/// Cancels a call: `(cancel_atom, call id)`.
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;

/// Asks a provider actor for its counters as JSON text.
using stats_atom = caf::atom_constant<caf::atom("stats")>;

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

/// The successful end of a call.
struct llm_reply {
  uint64_t call_id = 0;
  sdk::chat_result result;
  /// Name of the provider instance that answered.
  std::string provider;
  /// Number of attempts it took (1 without retries).
  int32_t attempts = 1;
  /// Cost of this call in US dollars, per the configured prices (0 if none).
  double cost_usd = 0;
};

/// The interface of an LLM provider actor.
using llm_provider_actor = caf::typed_actor<
  caf::replies_to<chat_atom, llm_call>::with<llm_reply>,
  caf::reacts_to<cancel_atom, uint64_t>,
  caf::replies_to<stats_atom>::with<std::string>>;

// -- errors -------------------------------------------------------------------

/// The error category of LLM failures carried in caf::error.
constexpr caf::atom_value llm_error_category = caf::atom("llm");

/// Wraps an SDK error for an actor response.
caf::error to_caf_error(const sdk::error& x);

/// Recovers the SDK error from an actor response error (also for CAF's own
/// errors, e.g. a request timeout becomes errc::timeout).
sdk::error from_caf_error(const caf::error& x);

// -- inspection ---------------------------------------------------------------

namespace detail {

std::string encode(const sdk::chat_request& x);
bool decode(const std::string& text, sdk::chat_request& x);
std::string encode(const sdk::chat_result& x);
bool decode(const std::string& text, sdk::chat_result& x);
std::string encode(const llm_delta& x);
bool decode(const std::string& text, llm_delta& x);

/// Inspects `x` through its JSON text.
template <class Inspector, class T>
typename Inspector::result_type inspect_as_json(Inspector& f, T& x,
                                                const char* name) {
  std::string text;
  if constexpr (Inspector::reads_state)
    text = encode(x);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!decode(text, x))
      return caf::make_error(caf::sec::invalid_argument);
    return caf::none;
  });
  return f(caf::meta::type_name(name), text, load);
}

} // namespace detail

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_call& x) {
  std::string text;
  if constexpr (Inspector::reads_state)
    text = detail::encode(x.request);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!detail::decode(text, x.request))
      return caf::make_error(caf::sec::invalid_argument);
    return caf::none;
  });
  return f(caf::meta::type_name("quarry.llm_call"), x.id, text, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_delta& x) {
  return detail::inspect_as_json(f, x, "quarry.llm_delta");
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_reply& x) {
  std::string text;
  if constexpr (Inspector::reads_state)
    text = detail::encode(x.result);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!detail::decode(text, x.result))
      return caf::make_error(caf::sec::invalid_argument);
    return caf::none;
  });
  return f(caf::meta::type_name("quarry.llm_reply"), x.call_id, text,
           x.provider, x.attempts, x.cost_usd, load);
}

} // namespace quarry::actors
