// CAF's deterministic test DSL (caf/test/dsl.hpp, shipped with Debian's CAF
// 0.17) inside the doctest executable. The DSL's checks (`expect`, `allow`,
// CAF_CHECK) report to CAF's own test engine, so each DSL test is a CAF test
// that a doctest case of the same name runs through that engine
// (caf_dsl_engine.cpp): ctest, the doctest filters and the sanitizers see
// it like any other case. A failed CAF_CHECK fails the doctest case; a
// failed CAF_REQUIRE or `expect` aborts the process (CAF's engine does so),
// which ctest reports as a failure too.
//
// Use:
//   #define CAF_SUITE emitter
//   #include "caf_dsl.hpp"
//   CAF_TEST_FIXTURE_SCOPE(emitter_tests, my_fixture)
//   QUARRY_CAF_TEST(packets keep their order) { ... CAF_CHECK(...); }
//   CAF_TEST_FIXTURE_SCOPE_END()
//
// Test names are plain words (they are matched as a regular expression).

#pragma once

#define CAF_TEST_NO_MAIN

// Before doctest: the DSL's templates use the name FAIL, which doctest
// defines as a macro.
#include <caf/test/dsl.hpp>

#include <doctest/doctest.h>

#include <string>

namespace quarry::test {

/// Runs the CAF test `name` of `suite` with CAF's engine. Returns whether it
/// ran and all of its checks passed.
bool run_caf_test(const std::string& suite, const std::string& name);

} // namespace quarry::test

/// Defines a CAF test of the current CAF_SUITE and the doctest case
/// "<suite>: <name>" that runs it.
#define QUARRY_CAF_TEST(name)                                                                      \
  TEST_CASE(CAF_XSTR(CAF_SUITE) ": " #name) {                                                      \
    CHECK(::quarry::test::run_caf_test(CAF_XSTR(CAF_SUITE), #name));                               \
  }                                                                                                \
  CAF_TEST(name)
