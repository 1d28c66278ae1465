// Helpers shared by the routes of `quarry serve`.

#include "serve_service.hpp"

#include "quarry/store/store.hpp"

#include <tuple>

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

namespace quarry::app {

using nlohmann::json;

// A body that is not declared as JSON is answered 415 (false).
bool json_declared(const http::request& req, http::responder& res) {
  auto type = req.header("Content-Type");
  std::string t{type.value_or("")};
  for (auto& c : t)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.rfind("application/json", 0) == 0)
    return true;
  res.respond(http::json_error(415, "unsupported_media_type",
                               "the body must be JSON (Content-Type: application/json)"));
  return false;
}

// A manager's reply as an HTTP response.
http::response from_reply(const std::string& reply, int ok_status) {
  auto j = json::parse(reply, nullptr, false);
  if (!j.is_object())
    return http::json_error(500, "internal", "the session manager answered nonsense");
  if (auto e = j.find("error"); e != j.end() && e->is_object()) {
    auto res = http::json_error(e->value("status", 500), e->value("code", "internal"),
                                e->value("message", ""));
    if (res.status == 429)
      res.headers.emplace_back("Retry-After", "5");
    return res;
  }
  auto res = http::json_response(ok_status, j);
  if (ok_status == 202 && j.contains("id") && j["id"].is_string())
    res.headers.emplace_back("Location", "/v1/research/" + j["id"].get<std::string>());
  return res;
}

namespace {

// Status, code and message of a store failure; logs it.
std::tuple<int, const char*, std::string> describe_store_failure(const sdk::error& err) {
  spdlog::error("{}", err.message);
  if (err.code == sdk::errc::busy)
    return {503, "unavailable", err.message};
  return {500, "store_error", err.message};
}

} // namespace

http::response store_failure(const sdk::error& err) {
  auto [status, code, message] = describe_store_failure(err);
  auto res = http::json_error(status, code, message);
  if (status == 503)
    res.headers.emplace_back("Retry-After", "1");
  return res;
}

std::string store_failure_reply(const sdk::error& err) {
  auto [status, code, message] = describe_store_failure(err);
  return json{{"error", {{"status", status}, {"code", code}, {"message", message}}}}.dump(
    -1, ' ', false, json::error_handler_t::replace);
}

void service::read(std::shared_ptr<http::responder> res,
                   std::function<http::response(store::store&)> job) {
  auto queued = with_reader(
    pool, store_file, [res, job](store::store* db, const std::string& error) {
      if (db == nullptr) {
        spdlog::error("the research store cannot be read: {}", error);
        res->respond(
          http::json_error(503, "unavailable", "the research store cannot be read: " + error));
        return;
      }
      res->respond(job(*db));
    });
  if (!queued) {
    auto r = http::json_error(429, "busy", "the server is busy");
    r.headers.emplace_back("Retry-After", "1");
    res->respond(std::move(r));
  }
}

} // namespace quarry::app
