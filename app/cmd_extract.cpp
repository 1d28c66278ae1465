// `quarry extract` (being written).

#include "cli.hpp"
#include "context.hpp"

#include <iostream>

namespace quarry::app {

int cmd_extract(context&, const extract_options&) {
  std::cerr << "quarry: extract is not available yet\n";
  return exit_failure;
}

} // namespace quarry::app
