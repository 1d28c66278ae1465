// The router: methods and path patterns with `{name}` segments.

#include "quarry/http/router.hpp"

#include <algorithm>
#include <exception>

namespace quarry::http {

namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/')
    path.remove_prefix(1);
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(path.substr(start));
      break;
    }
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

bool is_param(std::string_view seg) {
  return seg.size() >= 3 && seg.front() == '{' && seg.back() == '}';
}

bool is_rest_param(std::string_view seg) {
  return is_param(seg) && seg[seg.size() - 2] == '*';
}

} // namespace

void router::add(std::string method, std::string_view pattern, route_handler fn) {
  route r;
  r.method = std::move(method);
  for (auto seg : split_path(pattern)) {
    if (!is_param(seg))
      ++r.literals;
    r.segments.emplace_back(seg);
  }
  r.fn = std::move(fn);
  routes_.push_back(std::move(r));
}

bool router::match(const route& r, const std::vector<std::string_view>& path,
                   std::map<std::string, std::string>* params) {
  const auto& segs = r.segments;
  for (size_t i = 0; i < segs.size(); ++i) {
    std::string_view seg = segs[i];
    if (i + 1 == segs.size() && is_rest_param(seg)) {
      // The rest of the path, with its slashes.
      std::string rest;
      for (size_t k = i; k < path.size(); ++k) {
        if (k > i)
          rest.push_back('/');
        rest.append(path[k]);
      }
      if (params)
        (*params)[std::string{seg.substr(1, seg.size() - 3)}] = std::move(rest);
      return true;
    }
    if (i >= path.size())
      return false;
    if (is_param(seg)) {
      if (path[i].empty())
        return false;
      if (params)
        (*params)[std::string{seg.substr(1, seg.size() - 2)}] = std::string{path[i]};
    } else if (seg != path[i]) {
      return false;
    }
  }
  return segs.size() == path.size();
}

void router::handle(request req, std::shared_ptr<responder> res) const {
  auto path = split_path(req.path);
  const route* best = nullptr;
  std::vector<std::string> allowed;
  const std::string method = req.method == "HEAD" ? std::string{"GET"} : req.method;
  for (const auto& r : routes_) {
    if (!match(r, path, nullptr))
      continue;
    if (r.method == method) {
      if (!best || r.literals > best->literals)
        best = &r;
    } else if (std::find(allowed.begin(), allowed.end(), r.method) == allowed.end()) {
      allowed.push_back(r.method);
    }
  }
  if (!best) {
    if (allowed.empty()) {
      res->respond(json_error(404, "not_found", "no such path: " + req.path));
      return;
    }
    if (std::find(allowed.begin(), allowed.end(), "GET") != allowed.end())
      allowed.emplace_back("HEAD");
    std::string allow;
    for (const auto& m : allowed) {
      if (!allow.empty())
        allow += ", ";
      allow += m;
    }
    auto err = json_error(405, "method_not_allowed",
                          "method " + req.method + " is not allowed on " + req.path
                            + " (allowed: " + allow + ")");
    err.headers.emplace_back("Allow", allow);
    res->respond(std::move(err));
    return;
  }
  req.params.clear();
  match(*best, path, &req.params);
  try {
    best->fn(req, res);
  } catch (const std::exception& e) {
    res->respond(json_error(500, "internal", std::string{"the handler failed: "} + e.what()));
  } catch (...) {
    res->respond(json_error(500, "internal", "the handler failed"));
  }
}

handler router::as_handler() const {
  return
    [this](request req, std::shared_ptr<responder> res) { handle(std::move(req), std::move(res)); };
}

} // namespace quarry::http
