// What an actor does when a handler throws: say so on stderr, fail every
// request it still owes an answer, and end. Private to the actors library.

#pragma once

#include <caf/error.hpp>
#include <caf/exit_reason.hpp>

#include <spdlog/spdlog.h>

#include <exception>
#include <string>

namespace quarry::actors::detail {

/// Returns the message of the exception in `ep`.
inline std::string exception_message(const std::exception_ptr& ep) {
  try {
    if (ep)
      std::rethrow_exception(ep);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    // fall through
  }
  return "unknown exception";
}

/// Installs an exception handler on `self` that logs through spdlog (never on
/// stdout, which belongs to the command's output; CAF's default handler
/// prints there), calls `fail_pending(message)` so that every pending request
/// gets an error instead of waiting forever, and ends the actor with
/// `exit_reason::unhandled_exception` (monitors and links are told).
template <class Self, class F>
void on_exception_fail_pending(Self* self, const char* actor_name, F fail_pending) {
  self->set_exception_handler([actor_name, fail_pending](std::exception_ptr& ep) -> caf::error {
    auto what = exception_message(ep);
    spdlog::error("{} failed: {}", actor_name, what);
    try {
      fail_pending(what);
    } catch (...) {
      spdlog::error("{}: failing its pending requests failed too", actor_name);
    }
    return caf::exit_reason::unhandled_exception;
  });
}

} // namespace quarry::actors::detail
