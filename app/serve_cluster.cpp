// The research service of `quarry serve` for other CAF programs (see
// serve_cluster.hpp). Every research it starts is an ordinary stored
// session: the HTTP API and the web page see it too.

#include "serve_cluster.hpp"

#include "serve_service.hpp"
#include "serve_sessions.hpp"
#include "session_store.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <map>

namespace quarry::app {

namespace {

using nlohmann::json;

/// A finished session's result: `(done_atom, id, result)`.
using done_atom = caf::atom_constant<caf::atom("rdone")>;

using service_actor = research_service_full_actor::extend<
  caf::reacts_to<done_atom, std::string, cluster::session_result>>;

struct service_state {
  std::shared_ptr<service> svc;
  /// Result requests waiting for their session's end, by session.
  std::multimap<std::string, caf::typed_response_promise<cluster::session_result>> waiting;
  static inline const char* name = "quarry.research_service";
};

using service_ptr = service_actor::stateful_pointer<service_state>;

caf::error refusal(const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, why);
}

/// The session's result as stored.
cluster::session_result result_from_store(store::store* db, const std::string& id) {
  cluster::session_result out;
  out.status = cluster::session_status::failed;
  if (db == nullptr) {
    out.failure = "the store cannot be read";
    return out;
  }
  auto found = db->session(id);
  if (!found) {
    out.failure = "the store cannot be read: " + found.error().message;
    return out;
  }
  if (!*found) {
    out.failure = "no session " + id;
    return out;
  }
  const auto& row = **found;
  auto state = effective_state(*db, row);
  out.interrupted = state == store::session_state::interrupted;
  if (state == store::session_state::clarification) {
    out.status = cluster::session_status::clarification;
    out.failure = "the research needs clarification";
    return out;
  }
  auto read = stored_report(*db, row, state);
  if (!read) {
    out.failure = "the store cannot be read: " + read.error().message;
    return out;
  }
  auto& report = *read;
  if (!report) {
    out.failure = row.error.empty() ? "the research ended without a report ("
                                        + std::string{store::to_string(state)} + ")"
                                    : row.error;
    return out;
  }
  out.status = cluster::session_status::report;
  out.report = report->body;
  for (const auto& s : report->sources)
    out.sources.push_back({s.number, {}, s.title, s.url, s.snippet_only});
  // The verified claims go along as the session gave them.
  if (auto claims = db->claims(row.id); claims && !claims->empty()) {
    auto all = nlohmann::json::array();
    for (const auto& c : *claims)
      all.push_back(store::to_json(c));
    out.claims = all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return out;
}

/// Forwards a session's packets to a subscriber of another program.
class packet_follower : public session_follower {
public:
  explicit packet_follower(cluster::line_sink_actor sink) : sink_(std::move(sink)) {
  }

  bool packet(uint64_t seq, const std::string& line) override {
    last_ = seq;
    caf::anon_send(sink_, cluster::packet_atom::value, line, seq);
    return true;
  }

  void end(const std::string&) override {
    caf::anon_send(sink_, cluster::stop_atom::value, last_);
  }

  void on_gone(std::function<void()>) override {
    // A subscriber on another node that goes away only loses its packets.
  }

private:
  cluster::line_sink_actor sink_;
  uint64_t last_ = 0;
};

/// Waits for a session's end, then reads its result and hands it to the
/// service.
class result_follower : public session_follower {
public:
  result_follower(service_actor svc_actor, std::shared_ptr<service> svc, std::string id)
    : actor_(std::move(svc_actor)), svc_(std::move(svc)), id_(std::move(id)) {
  }

  bool packet(uint64_t, const std::string&) override {
    return true;
  }

  void end(const std::string&) override {
    auto actor = actor_;
    auto file = svc_->store_file;
    auto id = id_;
    auto queued = with_reader(svc_->pool, file, [=](store::store* db, const std::string&) {
      caf::anon_send(actor, done_atom::value, id, result_from_store(db, id));
    });
    if (!queued) {
      cluster::session_result busy;
      busy.failure = "the server is busy; ask again";
      caf::anon_send(actor, done_atom::value, id, std::move(busy));
    }
  }

  void on_gone(std::function<void()>) override {
  }

private:
  service_actor actor_;
  std::shared_ptr<service> svc_;
  std::string id_;
};

service_actor::behavior_type service_impl(service_ptr self, std::shared_ptr<service> svc) {
  self->state.svc = std::move(svc);
  self->set_default_handler([](caf::scheduled_actor* me, caf::message_view& x) {
    spdlog::warn("research service: dropped a message outside its interface: {}",
                 to_string(x.content()).substr(0, 200));
    return caf::drop(me, x);
  });
  return {
    [=](cluster::research_atom, cluster::research_request& req,
        cluster::line_sink_actor& sink) -> caf::result<std::string> {
      auto q = std::string{sdk::trim(req.question)};
      if (q.empty())
        return refusal("the question is empty");
      if (!sdk::is_valid_utf8(q))
        return refusal("the question is not valid UTF-8");
      if (req.max_agents < 0 || req.max_agents > 16)
        return refusal("max_agents must be 0 (the configured number) to 16");
      if (req.deadline_ms != 0 && (req.deadline_ms < 10'000 || req.deadline_ms > 86'400'000))
        return refusal("deadline_ms must be 0 (the configured deadline) or 10 s to 24 h");
      if (!sink)
        return refusal("no subscriber");
      stored_options o;
      o.question = q;
      o.clarify = false;
      o.max_agents = req.max_agents;
      o.deadline_ms = req.deadline_ms;
      auto options = to_json(o).dump(-1, ' ', false, json::error_handler_t::replace);
      auto rp = self->make_response_promise<std::string>();
      auto& st = self->state;
      auto s = st.svc;
      self->request(s->manager, std::chrono::seconds{60}, start_atom::value, std::string{}, options)
        .then(
          [=](std::string& reply) mutable {
            auto j = json::parse(reply, nullptr, false);
            if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) {
              std::string why = "the session could not start";
              if (j.is_object() && j.contains("error") && j["error"].is_object())
                why = j["error"].value("message", why);
              rp.deliver(refusal(why));
              return;
            }
            auto id = j["id"].get<std::string>();
            spdlog::info("research service: session {} started for node {}", id,
                         to_string(sink.node()));
            follow_session(s->sys(), s->pool, s->manager, s->store_file, id, 1,
                           std::make_shared<packet_follower>(sink));
            rp.deliver(id);
          },
          [=](caf::error& err) mutable {
            rp.deliver(
              refusal("the session manager did not answer: " + self->system().render(err)));
          });
      return rp;
    },
    [=](cluster::result_atom, const std::string& id) -> caf::result<cluster::session_result> {
      if (!store::is_session_id(id))
        return refusal("not a session id: " + id.substr(0, 40));
      auto& st = self->state;
      auto first = st.waiting.count(id) == 0;
      auto rp = self->make_response_promise<cluster::session_result>();
      st.waiting.emplace(id, rp);
      if (first)
        follow_session(st.svc->sys(), st.svc->pool, st.svc->manager, st.svc->store_file, id, 1,
                       std::make_shared<result_follower>(service_actor{self}, st.svc, id));
      return rp;
    },
    [=](done_atom, const std::string& id, cluster::session_result& r) {
      auto& st = self->state;
      auto [first, last] = st.waiting.equal_range(id);
      for (auto i = first; i != last; ++i)
        i->second.deliver(r);
      st.waiting.erase(first, last);
    },
    [=](cluster::cancel_research_atom, const std::string& id) {
      if (store::is_session_id(id))
        caf::anon_send(self->state.svc->manager, actors::cancel_atom::value, id);
    },
    [=](cluster::stop_atom) {
      auto& st = self->state;
      for (auto& [id, rp] : st.waiting) {
        cluster::session_result r;
        r.failure = "the server stopped";
        rp.deliver(std::move(r));
      }
      st.waiting.clear();
      st.svc.reset();
      self->quit();
    },
  };
}

} // namespace

research_service_full_actor spawn_research_service(caf::actor_system& sys,
                                                   std::shared_ptr<service> svc) {
  return sys.spawn(service_impl, std::move(svc));
}

} // namespace quarry::app
