// inspect() overloads for the SDK's and core's plain types that travel in
// actor messages, field by field. They live here, in the types' own
// namespaces (found by argument-dependent lookup), so that the SDK and core
// stay free of CAF. A loaded value is checked: an enum outside its range or
// a tool schema that is not bounded JSON fails the load with
// `sec::invalid_argument` instead of reaching an actor.

#pragma once

#include "quarry/cluster/wire.hpp"
#include "quarry/core/citations.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/tool.hpp"
#include "quarry/sdk/types.hpp"

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace quarry::actors::detail {

// The checked fields of the node interfaces (quarry/cluster/wire.hpp).
using cluster::wire::checked_enum;
using cluster::wire::enum_field;
using cluster::wire::invalid_value;
using cluster::wire::opt;
using cluster::wire::optional_field;

/// A JSON value, carried as its text; loading parses it with the bounds of
/// a tool schema (core::max_schema_depth).
struct json_field {
  nlohmann::json& ref;
};

/// Inspects a JSON field.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, json_field& x) {
  std::string text;
  if constexpr (Inspector::reads_state)
    text = sdk::dump_json(x.ref);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    sdk::json_limits limits;
    limits.max_depth = core::max_schema_depth;
    auto j = sdk::parse_json(text, nullptr, limits);
    if (j.is_discarded())
      return invalid_value();
    x.ref = std::move(j);
    return caf::none;
  });
  return f(text, load);
}

} // namespace quarry::actors::detail

namespace quarry::sdk {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, error& x) {
  using quarry::actors::detail::enum_field;
  using quarry::actors::detail::opt;
  auto code = enum_field<errc_last>(x.code);
  auto retry_after = opt(x.retry_after_ms);
  auto hint = opt(x.retry_hint);
  auto check = caf::meta::load_callback([&]() -> caf::error {
    if (static_cast<uint8_t>(x.code) < static_cast<uint8_t>(errc_first))
      return quarry::actors::detail::invalid_value();
    return caf::none;
  });
  return f(caf::meta::type_name("quarry.error"), code, x.message, x.http_status, retry_after, hint,
           check);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("quarry.tool_call"), x.id, x.name, x.arguments);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_message& x) {
  auto author = quarry::actors::detail::enum_field<role::tool>(x.author);
  return f(caf::meta::type_name("quarry.chat_message"), author, x.content, x.reasoning,
           x.reasoning_state, x.tool_calls, x.tool_call_id, x.tool_name);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_definition& x) {
  quarry::actors::detail::json_field parameters{x.parameters};
  return f(caf::meta::type_name("quarry.tool_definition"), x.name, x.description, parameters);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, usage& x) {
  return f(caf::meta::type_name("quarry.usage"), x.input_tokens, x.output_tokens,
           x.reasoning_tokens, x.cached_input_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, research_finding& x) {
  return f(caf::meta::type_name("quarry.research_finding"), x.task, x.report);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_evidence& x) {
  return f(caf::meta::type_name("quarry.claim_evidence"), x.claim, x.evidence);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, research_context& x) {
  return f(caf::meta::type_name("quarry.research_context"), x.question, x.follow_up, x.task, x.plan,
           x.max_parallel_agents, x.min_steps, x.max_steps, x.new_sources, x.findings, x.claims);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_request& x) {
  auto choice = quarry::actors::detail::enum_field<tool_choice::none>(x.choice);
  auto temperature = quarry::actors::detail::opt(x.temperature);
  return f(caf::meta::type_name("quarry.chat_request"), x.messages, x.tools, choice, x.max_tokens,
           temperature, x.reasoning_effort, x.role_tag, x.model, x.research);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call_delta& x) {
  return f(caf::meta::type_name("quarry.tool_call_delta"), x.index, x.id, x.name, x.arguments);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_result& x) {
  auto finish = quarry::actors::detail::enum_field<finish_reason::unknown>(x.finish);
  return f(caf::meta::type_name("quarry.chat_result"), x.text, x.reasoning, x.reasoning_state,
           x.tool_calls, finish, x.usage, x.model);
}

// document: quarry/cluster/wire.hpp

/// A loaded window must not be negative.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_info& x) {
  auto check = caf::meta::load_callback([&]() -> caf::error {
    if (x.context_window < 0)
      return quarry::actors::detail::invalid_value();
    return caf::none;
  });
  return f(caf::meta::type_name("quarry.model_info"), x.model, x.context_window, x.supports_tools,
           x.supports_reasoning, x.context_window_source, check);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_result& x) {
  auto failure = quarry::actors::detail::opt(x.failure);
  return f(caf::meta::type_name("quarry.tool_result"), x.llm_text, x.documents, failure);
}

} // namespace quarry::sdk

namespace quarry::core {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, document_ref& x) {
  return f(caf::meta::type_name("quarry.document_ref"), x.document_id, x.link, x.title);
}

/// A mapping travels as its entries in order; loading rebuilds it (a number
/// that appears twice keeps its first document, as `insert` does).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, citation_mapping& x) {
  std::vector<std::pair<int, document_ref>> entries;
  if constexpr (Inspector::reads_state)
    entries.assign(x.begin(), x.end());
  auto load = caf::meta::load_callback([&]() -> caf::error {
    citation_mapping out;
    for (auto& [number, doc] : entries)
      out.insert(number, std::move(doc));
    x = std::move(out);
    return caf::none;
  });
  return f(caf::meta::type_name("quarry.citation_mapping"), entries, load);
}

} // namespace quarry::core
