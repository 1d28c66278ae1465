// What the routes of `quarry serve` share: the engine, the session
// manager, the store and the blocking pool, and helpers to answer from them.
// Each group of routes (research API, OpenAI-compatible endpoints, metrics)
// adds itself to the router from its own file.

#pragma once

#include "context.hpp"
#include "research_engine.hpp"
#include "serve_sessions.hpp"

#include "quarry/actors/runtime.hpp"
#include "quarry/http/router.hpp"
#include "quarry/http/server.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace quarry::sdk {
struct error;
} // namespace quarry::sdk

namespace quarry::store {
class store;
} // namespace quarry::store

namespace quarry::app {

/// A body that is not declared as JSON is answered 415; returns false then.
bool json_declared(const http::request& req, http::responder& res);

/// A session manager's reply (see session_manager_actor) as an HTTP
/// response: its error with its status, or `ok_status` with the JSON (and a
/// Location for 202).
http::response from_reply(const std::string& reply, int ok_status);

/// A store that could not be read or written, as an HTTP response: 503 with
/// `Retry-After` when another connection held a lock past the busy wait,
/// else 500 (a corrupt page, an I/O error); the JSON error says what
/// happened (never "not found", never the store's path). Logs one line.
http::response store_failure(const sdk::error& err);

/// The same, for a reply of the session manager (a JSON error text).
std::string store_failure_reply(const sdk::error& err);

/// Everything the routes share.
struct service {
  context& ctx;
  research_engine& engine;
  session_manager_actor manager;
  std::string store_file;
  sdk::blocking_pool& pool;

  caf::actor_system& sys() {
    return engine.runtime().system();
  }

  /// Sends a command to the manager from an I/O thread (through a one-shot
  /// actor) and answers with its reply.
  template <class... Ts>
  void ask(std::shared_ptr<http::responder> res, int ok_status, Ts... xs) {
    auto mgr = manager;
    sys().spawn([=](caf::event_based_actor* self) {
      self->request(mgr, std::chrono::seconds{60}, xs...)
        .then([=](std::string& reply) { res->respond(from_reply(reply, ok_status)); },
              [=](caf::error& err) {
                res->respond(
                  http::json_error(503, "unavailable",
                                   "the session manager did not answer: " + caf::to_string(err)));
              });
    });
  }

  /// Runs `job` with a store reader on the blocking pool and answers with
  /// its response; 503 when the store cannot be read, 429 when the pool is
  /// full.
  void read(std::shared_ptr<http::responder> res, std::function<http::response(store::store&)> job);
};

/// The HTTP server as GET /metrics sees it: set once it started, cleared
/// once it stopped (its counters are read on its own I/O threads).
struct server_ref {
  std::atomic<const http::server*> server{nullptr};
};

/// Adds GET /metrics (Prometheus text format 0.0.4, docs/api.md): the
/// sessions, the LLM provider and tool actors' counters, the HTTP server's.
void add_metrics_routes(http::router& r, std::shared_ptr<service> svc,
                        std::shared_ptr<const server_ref> server);

/// Adds the OpenAI-compatible endpoints (GET /v1/models, POST
/// /v1/chat/completions; app/serve_openai.cpp).
void add_openai_routes(http::router& r, std::shared_ptr<service> svc);

/// Adds POST /v1/uploads (a file for a research to search, app/serve_uploads.cpp,
/// docs/api.md "Uploads"); removes the uploads that expired meanwhile.
void add_upload_routes(http::router& r, std::shared_ptr<service> svc);

/// Adds MCP over Streamable HTTP at /mcp (POST and DELETE; the tools and
/// resources of `quarry mcp`, app/serve_mcp.cpp, docs/mcp.md).
void add_mcp_routes(http::router& r, std::shared_ptr<service> svc);

} // namespace quarry::app
