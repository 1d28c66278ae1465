// Reads of the research store in tests: the value of a read that must
// succeed. Header-only; include it from doctest test files only.

#pragma once

#include "quarry/store/store.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>

namespace quarry::test {

/// The value of a store read that must succeed (the test fails with the
/// store's error otherwise).
template <class T>
T read_ok(store::result<T> r) {
  REQUIRE_MESSAGE(static_cast<bool>(r), (r ? std::string{} : r.error().message));
  return std::move(*r);
}

} // namespace quarry::test
