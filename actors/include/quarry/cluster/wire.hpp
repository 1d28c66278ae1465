// How Quarry's values cross a node: inspect() helpers that check what they
// load (enums in range, bounded text, non-negative durations) and the
// inspect() of the SDK's document. Part of the installed `quarry-cluster`
// header set: it needs CAF 0.17 and the Quarry SDK headers, nothing else of
// Quarry.

#pragma once

#include "quarry/sdk/types.hpp"

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace quarry::cluster::wire {

/// A function told why a loaded value was refused.
using refusal_hook = void (*)(const char* what);

/// Called with a short reason whenever a loaded value is refused (a peer
/// sent a value no Quarry node writes: an enum out of range, text past its
/// bound, a negative duration). CAF then drops the message. Quarry sets it to
/// log a warning; a foreign program may set its own.
inline std::atomic<refusal_hook> on_refused{nullptr};

/// Returns the error of a loaded value that no sender can have written, and
/// reports `what` to @ref on_refused.
inline caf::error invalid_value(const char* what = "a value out of range") {
  if (auto hook = on_refused.load(); hook != nullptr)
    hook(what);
  return caf::make_error(caf::sec::invalid_argument);
}

/// An enum field, carried as its underlying integer; loading a number past
/// `Last` fails.
template <class E, E Last>
struct checked_enum {
  E& ref;
};

/// Inspects a checked enum field.
template <class Inspector, class E, E Last>
typename Inspector::result_type inspect(Inspector& f, checked_enum<E, Last>& x) {
  using raw_type = std::underlying_type_t<E>;
  auto raw = static_cast<raw_type>(x.ref);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (raw > static_cast<raw_type>(Last))
      return invalid_value("an enum value out of range");
    x.ref = static_cast<E>(raw);
    return caf::none;
  });
  return f(raw, load);
}

/// Makes a checked enum field for `x`, whose last enumerator is `Last`.
template <auto Last>
checked_enum<decltype(Last), Last> enum_field(decltype(Last)& x) {
  return {x};
}

/// An optional field, carried as a flag and a value.
template <class T>
struct optional_field {
  std::optional<T>& ref;
};

/// Inspects an optional field.
template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, optional_field<T>& x) {
  bool has = x.ref.has_value();
  T value = has ? *x.ref : T{};
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (has)
      x.ref = std::move(value);
    else
      x.ref.reset();
    return caf::none;
  });
  return f(has, value, load);
}

/// Makes an optional field for `x`.
template <class T>
optional_field<T> opt(std::optional<T>& x) {
  return {x};
}

/// A duration in milliseconds, carried as an integer; loading a negative
/// one fails.
struct millis_field {
  std::chrono::milliseconds& ref;
};

/// Inspects a duration field.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, millis_field& x) {
  int64_t ms = static_cast<int64_t>(x.ref.count());
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (ms < 0)
      return invalid_value("a negative duration");
    x.ref = std::chrono::milliseconds{ms};
    return caf::none;
  });
  return f(ms, load);
}

/// Returns a check, for the end of an inspect() call, that fails the load
/// when `text` is longer than `max_bytes`.
inline auto bounded(const std::string& text, size_t max_bytes, const char* what) {
  return caf::meta::load_callback([&text, max_bytes, what]() -> caf::error {
    if (text.size() > max_bytes)
      return invalid_value(what);
    return caf::none;
  });
}

/// Returns a check that fails the load when `xs` has more than `max_items`
/// elements.
template <class T>
auto bounded_list(const std::vector<T>& xs, size_t max_items, const char* what) {
  return caf::meta::load_callback([&xs, max_items, what]() -> caf::error {
    if (xs.size() > max_items)
      return invalid_value(what);
    return caf::none;
  });
}

} // namespace quarry::cluster::wire

namespace quarry::sdk {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, document& x) {
  auto published = quarry::cluster::wire::opt(x.published);
  auto kind = quarry::cluster::wire::enum_field<source_kind::other>(x.kind);
  return f(caf::meta::type_name("quarry.document"), x.id, x.url, x.title, x.snippet, x.content,
           published, kind);
}

} // namespace quarry::sdk
