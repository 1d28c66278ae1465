// CAF's unit-test engine, compiled once, without its main (doctest has it).

#define CAF_TEST_NO_MAIN
#include <caf/test/unit_test_impl.hpp>

#include "caf_dsl.hpp"

namespace quarry::test {

bool run_caf_test(const std::string& suite, const std::string& name) {
  if (caf::test::engine::available_tests(suite).empty())
    return false;
  auto found = false;
  for (const auto& t : caf::test::engine::available_tests(suite))
    found = found || t == name;
  if (!found)
    return false;
  auto run = [&](int verbosity) {
    return caf::test::engine::run(false, "", verbosity, 0, "^" + suite + "$", "", "^" + name + "$",
                                  "");
  };
  // No colours, errors only on the console, no log file. CAF's engine
  // prints a failed check only at its most verbose level, next to every
  // passed one: a failed test runs again that way (the coordinator makes
  // it fail the same way) so that the log shows which check failed.
  if (run(1))
    return true;
  run(4);
  return false;
}

} // namespace quarry::test
