// Entry point of the `quarry` executable. Written by hand (not CAF_MAIN) so
// that the configuration, the host services and the plugin registry are
// created before the actor system and outlive it.

#include "cli.hpp"
#include "terminal_output.hpp"

#include "quarry/actors/runtime.hpp"

int main(int argc, char** argv) {
  // Before any thread exists: only the runtime's signal thread sees
  // SIGINT/SIGTERM.
  quarry::actors::block_stop_signals();
  quarry::app::guard_terminal_output();
  auto status = quarry::app::run(argc, argv);
  quarry::app::finish_terminal_output();
  return status;
}
