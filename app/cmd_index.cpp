// `quarry index` (being written).

#include "cli.hpp"
#include "context.hpp"

#include <iostream>

namespace quarry::app {

int cmd_index(context&, const index_options&) {
  std::cerr << "quarry: index is not available yet\n";
  return exit_failure;
}

} // namespace quarry::app
