// MCP over Streamable HTTP at /mcp in `quarry serve` (docs/mcp.md): the same
// tools and resources as `quarry mcp` (cmd_mcp_tools.cpp), one
// core::mcp::server per MCP session. A POST carries one JSON-RPC message: a
// notification or response is answered 202; a tools/call request with a
// Server-Sent Events stream (its progress notifications, then its response,
// then the stream ends); any other request with its JSON response. The
// session is named by the MCP-Session-Id header the initialize response
// gives; DELETE ends it. The server's own rules apply first (loopback or
// the bearer token, Host and Origin: docs/api.md).

#include "cmd_mcp.hpp"
#include "serve_service.hpp"
#include "session_store.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace quarry::app {

namespace {

using nlohmann::json;
namespace mcp = core::mcp;

/// MCP sessions open at once; an initialize beyond them is refused (503)
/// unless an idle one can go.
constexpr size_t max_mcp_sessions = 100;

/// A session without a request and without a running call for this long is
/// ended when room is needed.
constexpr auto mcp_session_idle = std::chrono::hours{1};

/// Where the answer to one request goes: its JSON response or its stream.
struct route {
  std::shared_ptr<http::responder> res;
  std::shared_ptr<http::event_stream> stream;
  /// Extra header fields of a JSON response (the session id of initialize).
  http::header_list headers;
  /// The progress token of a tools/call, as JSON text, or empty.
  std::string token;
};

class mcp_http_session : public std::enable_shared_from_this<mcp_http_session> {
public:
  explicit mcp_http_session(std::string id) : id_(std::move(id)), used_(now()) {
  }

  void start(const std::shared_ptr<mcp_service>& svc) {
    auto setup = mcp_server_setup(svc);
    std::weak_ptr<mcp_http_session> self = shared_from_this();
    setup.write = [self](const std::string& line) {
      if (auto s = self.lock())
        s->deliver(line);
    };
    server_ = std::make_unique<mcp::server>(std::move(setup));
  }

  ~mcp_http_session() {
    // A call that never ended still points to the server: it is left alive.
    if (server_ && server_->running() > 0)
      server_.release();
  }

  const std::string& id() const {
    return id_;
  }

  mcp::server& server() {
    return *server_;
  }

  /// Registers where the answer to request `key` (its id as JSON text) goes;
  /// false when a request with that id is still waiting.
  bool expect(const std::string& key, route r) {
    std::lock_guard<std::mutex> guard{mtx_};
    used_ = now();
    if (routes_.count(key) > 0)
      return false;
    if (!r.token.empty())
      tokens_[r.token] = key;
    routes_.emplace(key, std::move(r));
    return true;
  }

  /// Whether request `key` still waits for its answer.
  bool waiting(const std::string& key) {
    std::lock_guard<std::mutex> guard{mtx_};
    return routes_.count(key) > 0;
  }

  void touch() {
    std::lock_guard<std::mutex> guard{mtx_};
    used_ = now();
  }

  /// Answers a waiting request with `line` (a response of the server's).
  void answer(const std::string& line) {
    deliver(line);
  }

  bool idle() {
    std::lock_guard<std::mutex> guard{mtx_};
    return routes_.empty() && server_->running() == 0 && now() - used_ > mcp_session_idle;
  }

private:
  static std::chrono::steady_clock::time_point now() {
    return std::chrono::steady_clock::now();
  }

  // A line the server wrote: a response goes to its request's route, a
  // progress notification to the stream of the call with that token.
  void deliver(const std::string& line) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object())
      return;
    route r;
    bool last = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (j.contains("method")) {
        const auto& p = j["params"];
        if (!p.is_object() || !p.contains("progressToken"))
          return;
        auto t = tokens_.find(sdk::dump_json(p["progressToken"]));
        if (t == tokens_.end())
          return;
        auto f = routes_.find(t->second);
        if (f == routes_.end() || !f->second.stream)
          return;
        r = f->second;
      } else {
        auto f = routes_.find(sdk::dump_json(j.value("id", json())));
        if (f == routes_.end())
          return;
        r = std::move(f->second);
        if (!r.token.empty())
          tokens_.erase(r.token);
        routes_.erase(f);
        last = true;
      }
    }
    if (r.stream) {
      if (last)
        r.stream->end("message", line);
      else
        r.stream->send("", "message", line);
    } else if (r.res) {
      r.res->respond(http::response{200, "application/json", r.headers, line});
    }
  }

  std::string id_;
  std::unique_ptr<mcp::server> server_;
  std::mutex mtx_;
  std::map<std::string, route> routes_;
  std::map<std::string, std::string> tokens_;
  std::chrono::steady_clock::time_point used_;
};

/// Every MCP session of the server.
struct mcp_http_state {
  std::shared_ptr<mcp_service> svc;
  std::mutex mtx;
  std::map<std::string, std::shared_ptr<mcp_http_session>> sessions;
  // Ended sessions whose calls still run (they point to the server).
  std::vector<std::shared_ptr<mcp_http_session>> ending;

  std::shared_ptr<mcp_http_session> find(const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx};
    auto f = sessions.find(id);
    return f == sessions.end() ? nullptr : f->second;
  }

  // A new session, or null when there are too many.
  std::shared_ptr<mcp_http_session> open() {
    unsigned char bytes[16];
    if (RAND_bytes(bytes, sizeof(bytes)) != 1)
      return nullptr;
    static const char* hex = "0123456789abcdef";
    std::string id;
    for (auto b : bytes) {
      id += hex[b >> 4];
      id += hex[b & 15];
    }
    auto s = std::make_shared<mcp_http_session>(id);
    s->start(svc);
    std::lock_guard<std::mutex> guard{mtx};
    prune();
    if (sessions.size() >= max_mcp_sessions) {
      for (auto it = sessions.begin(); it != sessions.end(); ++it)
        if (it->second->idle()) {
          sessions.erase(it);
          break;
        }
    }
    if (sessions.size() >= max_mcp_sessions)
      return nullptr;
    sessions.emplace(id, s);
    return s;
  }

  bool close(const std::string& id) {
    std::shared_ptr<mcp_http_session> s;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto f = sessions.find(id);
      if (f == sessions.end())
        return false;
      s = f->second;
      sessions.erase(f);
      ending.push_back(s);
      prune();
    }
    s->server().cancel_all();
    return true;
  }

  // Under mtx: ended sessions whose calls are over go.
  void prune() {
    ending.erase(std::remove_if(ending.begin(), ending.end(),
                                [](const auto& s) { return s->server().running() == 0; }),
                 ending.end());
  }
};

http::response rpc_error(int status, int code, const std::string& message) {
  return http::response{status, "application/json", {}, mcp::error_line(nullptr, code, message)};
}

const char* session_header = "MCP-Session-Id";

} // namespace

void add_mcp_routes(http::router& r, std::shared_ptr<service> svc) {
  std::shared_ptr<store::store> reader;
  auto opened = open_store(svc->ctx.config.values, true);
  if (auto* why = std::get_if<std::string>(&opened))
    spdlog::warn("MCP at /mcp: the store cannot be read: {}", *why);
  else
    reader = std::get<std::shared_ptr<store::store>>(std::move(opened));
  auto state = std::make_shared<mcp_http_state>();
  state->svc = std::shared_ptr<mcp_service>(new mcp_service{
    svc->ctx, svc->engine, svc->manager, svc->store_file, svc->pool, reader, {}, {}});
  r.add("POST", "/mcp", [state, svc](http::request& req, std::shared_ptr<http::responder> res) {
    if (!state->svc->reader) {
      res->respond(rpc_error(503, mcp::error_code::internal_error, "The store cannot be read"));
      return;
    }
    if (!json_declared(req, *res))
      return;
    if (auto v = req.header("MCP-Protocol-Version")) {
      auto asked = std::string{sdk::trim(*v)};
      const auto& known = mcp::supported_protocol_versions();
      if (std::find(known.begin(), known.end(), asked) == known.end()) {
        res->respond(rpc_error(400, mcp::error_code::invalid_request,
                               "Bad Request: unsupported MCP-Protocol-Version '"
                                 + sdk::repair_utf8(asked.substr(0, 40)) + "'"));
        return;
      }
    }
    auto m = mcp::read_message(req.body);
    if (m.kind == mcp::message::invalid) {
      res->respond(http::response{400, "application/json", {}, m.error});
      return;
    }
    std::shared_ptr<mcp_http_session> session;
    route to;
    to.res = res;
    if (m.kind == mcp::message::request && m.method == "initialize"
        && !req.header(session_header)) {
      session = state->open();
      if (!session) {
        res->respond(rpc_error(503, mcp::error_code::internal_error,
                               "Too many MCP sessions are open; try again later"));
        return;
      }
      to.headers.emplace_back(session_header, session->id());
    } else {
      auto id = req.header(session_header);
      if (!id) {
        res->respond(rpc_error(400, mcp::error_code::invalid_request,
                               "Bad Request: MCP-Session-Id header missing (send initialize "
                               "first)"));
        return;
      }
      session = state->find(std::string{sdk::trim(*id)});
      if (!session) {
        res->respond(rpc_error(404, mcp::error_code::invalid_request,
                               "Session not found: initialize a new one"));
        return;
      }
    }
    session->touch();
    if (m.kind != mcp::message::request) {
      // Notifications (cancellation among them) and responses: handled at
      // once (nothing they do blocks), answered 202.
      session->server().handle(req.body);
      res->respond(http::response{202, "", {}, ""});
      return;
    }
    auto key = sdk::dump_json(m.id);
    if (m.method == "tools/call") {
      if (auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object())
        if (auto tk = meta->find("progressToken");
            tk != meta->end() && (tk->is_string() || tk->is_number_integer()))
          to.token = sdk::dump_json(*tk);
      auto stream = res->start_events();
      if (!stream)
        return; // answered 429 or 503
      to.res = nullptr;
      to.stream = stream;
      if (!session->expect(key, to)) {
        stream->end("message", mcp::error_line(m.id, mcp::error_code::invalid_request,
                                               "Invalid Request: a request with this id is "
                                               "still running"));
        return;
      }
      // A client that goes away before the answer cancels the call.
      std::weak_ptr<mcp_http_session> weak = session;
      auto request_id = m.id;
      stream->on_close([weak, key, request_id] {
        auto s = weak.lock();
        if (!s || !s->waiting(key))
          return;
        s->server().handle(mcp::notification_line("notifications/cancelled",
                                                  {{"requestId", request_id},
                                                   {"reason", "the client closed its stream"}}));
      });
    } else if (!session->expect(key, to)) {
      res->respond(http::response{200,
                                  "application/json",
                                  {},
                                  mcp::error_line(m.id, mcp::error_code::invalid_request,
                                                  "Invalid Request: a request with this id is "
                                                  "still running")});
      return;
    }
    // Off the I/O thread: resources read the store.
    auto body = std::make_shared<std::string>(std::move(req.body));
    if (!svc->pool.submit([session, body] { session->server().handle(*body); }))
      session->answer(
        mcp::error_line(m.id, mcp::error_code::internal_error, "The server is busy; try again"));
  });
  r.add("DELETE", "/mcp", [state](http::request& req, std::shared_ptr<http::responder> res) {
    auto id = req.header(session_header);
    if (!id) {
      res->respond(rpc_error(400, mcp::error_code::invalid_request,
                             "Bad Request: MCP-Session-Id header missing"));
      return;
    }
    if (!state->close(std::string{sdk::trim(*id)})) {
      res->respond(rpc_error(404, mcp::error_code::invalid_request, "Session not found"));
      return;
    }
    res->respond(http::response{204, "", {}, ""});
  });
}

} // namespace quarry::app
