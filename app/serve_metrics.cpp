// GET /metrics of `quarry serve`: one one-shot actor asks every provider and
// tool actor and the session manager at once (a short timeout; who does not
// answer is left out), then the store's session counts are read on the
// blocking pool and everything is rendered (serve_metrics_text.hpp).

#include "serve_metrics_text.hpp"
#include "serve_service.hpp"

#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/metrics.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

namespace quarry::app {

namespace {

using nlohmann::json;

/// How long a scrape waits for an actor's counters.
constexpr auto stats_timeout = std::chrono::seconds{2};

/// What one scrape collects from the actors (used by its actor only).
struct scrape {
  metrics_snapshot snap;
  size_t pending = 0;
};

/// A stats reply as JSON, or nothing (a reply that is not a JSON object).
std::optional<json> stats_json(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object())
    return std::nullopt;
  return j;
}

} // namespace

void add_metrics_routes(http::router& r, std::shared_ptr<service> svc,
                        std::shared_ptr<const server_ref> server) {
  r.add("GET", "/metrics", [svc, server](http::request&, std::shared_ptr<http::responder> res) {
    auto st = std::make_shared<scrape>();
    // Read here, on an I/O thread: the server is alive while its handlers
    // run. The counters do not include this request.
    if (const auto* srv = server->server.load())
      st->snap.http = srv->stats();
    auto llms = svc->engine.llm_providers();
    auto tools = svc->engine.tool_providers();
    auto mgr = svc->manager;
    auto file = svc->store_file;
    auto* pool = &svc->pool;
    svc->sys().spawn([=](caf::event_based_actor* self) {
      // Renders once the last answer (or timeout) is in: the store's
      // counts are read on the pool, never on an actor's thread.
      auto done = [=] {
        if (--st->pending > 0)
          return;
        auto snap = std::make_shared<metrics_snapshot>(std::move(st->snap));
        auto queued = with_reader(*pool, file, [res, snap](store::store* db, const std::string&) {
          // A store that cannot be read leaves the session counts out (and
          // says so in the log).
          if (db != nullptr) {
            if (auto counts = db->count_by_state())
              for (const auto& [state, n] : *counts)
                snap->sessions.emplace_back(store::to_string(state), n);
            else
              spdlog::error("metrics: {}", counts.error().message);
          }
          res->respond(http::response{
            200, std::string{core::metrics_content_type}, {}, render_metrics(*snap)});
        });
        if (!queued) {
          auto busy = http::json_error(429, "busy", "the server is busy");
          busy.headers.emplace_back("Retry-After", "1");
          res->respond(std::move(busy));
        }
      };
      st->pending = 1; // the manager
      for (const auto& [name, hdl] : llms)
        if (hdl)
          ++st->pending;
      for (const auto& [name, hdl] : tools)
        if (hdl)
          ++st->pending;
      self->request(mgr, stats_timeout, running_atom::value)
        .then(
          [=](int64_t n) {
            st->snap.sessions_running = n;
            done();
          },
          [=](caf::error&) { done(); });
      // Every provider's stats, into the snapshot's list for its kind.
      auto ask_stats = [=](const auto& handles,
                           std::vector<nlohmann::json> metrics_snapshot::*into) {
        for (const auto& [name, hdl] : handles) {
          if (!hdl)
            continue;
          self->request(hdl, stats_timeout, actors::stats_atom::value)
            .then(
              [=](std::string& text) {
                if (auto j = stats_json(text))
                  ((st->snap).*into).push_back(std::move(*j));
                done();
              },
              [=](caf::error&) { done(); });
        }
      };
      ask_stats(llms, &metrics_snapshot::llm_stats);
      ask_stats(tools, &metrics_snapshot::tool_stats);
    });
  });
}

} // namespace quarry::app
