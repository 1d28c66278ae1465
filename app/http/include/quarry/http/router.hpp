// A small router over quarry_http's handler: methods and path patterns
// with `{name}` segments, 404 and 405 (with Allow) as JSON errors.

#pragma once

#include "quarry/http/server.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::http {

/// A route's function: the request (with `params` filled) and its
/// responder.
using route_handler = std::function<void(request&, std::shared_ptr<responder>)>;

/// Routes requests by method and path.
///
/// Patterns are paths whose segments are literal, `{name}` (any one
/// non-empty segment, in request::params under `name`) or, as the last
/// segment only, `{name*}` (the rest of the path, possibly empty, with its
/// slashes). Literal segments win over parameters: the first route (in the
/// order added) whose pattern matches with the most literal segments first
/// is taken. A GET route also answers HEAD (the server sends no body).
///
/// add() must happen before the router handles requests; handle() may then
/// run on several threads at once.
class router {
public:
  /// Adds a route. `method` is matched exactly (e.g. `GET`, `POST`).
  void add(std::string method, std::string_view pattern, route_handler fn);

  /// Routes one request: calls the route's function, or answers 404
  /// `not_found` (no pattern matches the path) or 405
  /// `method_not_allowed` with Allow (patterns match, methods do not).
  /// A route function that throws is answered 500.
  void handle(request req, std::shared_ptr<responder> res) const;

  /// The router as a server handler; the router must outlive the server.
  handler as_handler() const;

private:
  struct route {
    std::string method;
    std::vector<std::string> segments;
    route_handler fn;
    size_t literals = 0;
  };
  static bool match(const route& r, const std::vector<std::string_view>& path,
                    std::map<std::string, std::string>* params);
  std::vector<route> routes_;
};

} // namespace quarry::http
