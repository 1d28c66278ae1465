// `quarry serve`: research sessions over HTTP (docs/api.md), with
// Server-Sent Events, and the web page.

#include "cli.hpp"
#include "cluster_publish.hpp"
#include "context.hpp"
#include "report_export.hpp"
#include "report_render.hpp"
#include "research_engine.hpp"
#include "serve_cluster.hpp"
#include "serve_service.hpp"
#include "serve_sessions.hpp"
#include "serve_sources.hpp"
#include "session_store.hpp"
#include "upload_files.hpp"
#include "session_usage.hpp"

#include "quarry/actors/runtime.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/http/router.hpp"
#include "quarry/http/server.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"
#include "quarry/web/assets.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <iostream>

namespace quarry::app {

namespace {

using nlohmann::json;

// `HOST:PORT` or `[V6]:PORT`.
std::optional<std::pair<std::string, uint16_t>> parse_listen(const std::string& x) {
  auto colon = x.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= x.size())
    return std::nullopt;
  auto host = x.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']')
      return std::nullopt;
    host = host.substr(1, host.size() - 2);
  }
  auto port_text = x.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto port = std::stoul(port_text);
  if (port > 65535 || host.empty())
    return std::nullopt;
  return std::make_pair(host, static_cast<uint16_t>(port));
}

// The options of POST /v1/research (and follow-up): every field checked,
// unknown ones refused; no field can name a file or folder (`uploads` names
// uploads by their ids; the session manager takes them).
std::variant<stored_options, std::string> research_body(const std::string& body,
                                                        const core::settings& cfg) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    return std::string{"the body is not JSON"};
  if (!j.is_object())
    return std::string{"the body must be a JSON object"};
  stored_options so;
  so.clarify = cfg.research.clarify;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    const auto& v = it.value();
    if (key == "question") {
      if (!v.is_string())
        return std::string{"question: must be a string"};
      so.question = std::string{sdk::trim(v.get<std::string>())};
      if (so.question.empty())
        return std::string{"question: must be a non-empty string"};
      if (!sdk::is_valid_utf8(so.question))
        return std::string{"question: must be UTF-8"};
      size_t chars = 0;
      for (unsigned char c : so.question)
        if ((c & 0xC0) != 0x80)
          ++chars;
      if (chars > max_question_chars)
        return std::string{"question: at most 20000 characters"};
    } else if (key == "clarify") {
      if (!v.is_boolean())
        return std::string{"clarify: must be true or false"};
      so.clarify = v.get<bool>();
    } else if (key == "answers") {
      if (!v.is_array() || v.size() > 50)
        return std::string{"answers: must be a list of at most 50 strings"};
      for (const auto& a : v) {
        if (!a.is_string() || a.get<std::string>().size() > 20'000)
          return std::string{"answers: must be a list of strings (each at most 20000 bytes)"};
        auto t = std::string{sdk::trim(a.get<std::string>())};
        if (!t.empty())
          so.answers += sdk::repair_utf8(t) + "\n";
      }
    } else if (key == "deadline") {
      if (!v.is_string())
        return std::string{"deadline: must be a duration such as \"10m\""};
      auto d = core::parse_duration(v.get<std::string>());
      if (!d || d->count() <= 0)
        return std::string{"deadline: must be a duration such as \"10m\""};
      if (*d > cfg.research.deadline)
        return "deadline: at most " + core::format_duration(cfg.research.deadline)
               + " (research.deadline)";
      so.deadline_ms = d->count();
    } else if (key == "max_agents") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 16)
        return std::string{"max_agents: must be an integer from 1 to 16"};
      so.max_agents = v.get<int>();
    } else if (key == "strategy" || key == "mode" || key == "depth") {
      if (!v.is_string())
        return key + ": must be a string";
      auto x = v.get<std::string>();
      auto why = strategy_option_problem(key == "strategy" ? x : std::string{},
                                         key == "mode" ? x : std::string{},
                                         key == "depth" ? x : std::string{});
      if (!why.empty())
        return sdk::repair_utf8(why);
      (key == "strategy" ? so.strategy : key == "mode" ? so.mode : so.depth) = x;
    } else if (key == "verify") {
      if (!v.is_boolean())
        return std::string{"verify: must be true or false"};
      so.verify = v.get<bool>() ? "on" : "off";
    } else if (key == "uploads") {
      if (!v.is_array() || v.size() > 20)
        return std::string{"uploads: must be a list of at most 20 upload ids"};
      for (const auto& u : v) {
        if (!u.is_string())
          return std::string{"uploads: must be a list of upload ids (strings)"};
        const auto& x = u.get_ref<const std::string&>();
        if (!is_upload_id(x))
          return "uploads: no upload '" + sdk::repair_utf8(x.substr(0, 40)) + "'";
        so.uploads.push_back({x, {}, 0, {}});
      }
    } else {
      return "unknown field '" + sdk::repair_utf8(key.substr(0, 64)) + "'";
    }
  }
  if (so.question.empty())
    return std::string{"question: missing"};
  if (!so.answers.empty())
    so.clarify = false;
  if (std::string problem;
      imply_reflective(so.strategy, so.mode, so.depth, problem), !problem.empty())
    return problem;
  return so;
}

// A session as the list and GET /v1/research/{id} give it, with its
// models, duration and usage (docs/api.md); the error of a failed read.
store::result<json> row_json(store::store& db, const store::session_row& row) {
  auto state = effective_state(db, row);
  auto groups = db.usage_groups(row.id);
  if (!groups)
    return groups.error();
  auto used = summarize_usage(*groups);
  return json{{"id", row.id},
              {"question", row.question},
              {"state", store::to_string(state)},
              {"parent_id", row.parent_id.empty() ? json(nullptr) : json(row.parent_id)},
              {"created_at", rfc3339(row.created_at)},
              {"updated_at", rfc3339(row.updated_at)},
              {"finished_at", row.finished_at > 0 ? json(rfc3339(row.finished_at)) : json(nullptr)},
              {"duration_ms", session_duration_ms(row, state, unix_ms())},
              {"models", session_models_json(used)},
              {"usage", session_usage_json(used)}};
}

http::response not_found(const std::string& id) {
  return http::json_error(404, "not_found",
                          "no session '" + sdk::repair_utf8(id.substr(0, 40)) + "'");
}

// The questions of a session that waits for answers: its last
// `clarification` packet.
store::result<std::string> questions_of(store::store& db, const store::session_row& row) {
  auto from = row.last_seq > 4 ? row.last_seq - 4 : 1;
  std::string out;
  auto packets = db.packets(row.id, from);
  if (!packets)
    return packets.error();
  for (const auto& p : *packets) {
    auto j = json::parse(p.line, nullptr, false);
    if (j.is_object() && j.contains("obj") && j["obj"].value("type", "") == "clarification")
      out = j["obj"].value("questions", "");
  }
  return out;
}

void add_routes(http::router& r, std::shared_ptr<service> svc) {
  const auto& cfg = svc->ctx.config.values;
  r.add("GET", "/healthz", [svc](http::request&, std::shared_ptr<http::responder> res) {
    auto mgr = svc->manager;
    svc->sys().spawn([=](caf::event_based_actor* self) {
      self->request(mgr, std::chrono::seconds{10}, running_atom::value)
        .then(
          [=](int64_t n) {
            res->respond(http::json_response(200, {{"status", "ok"}, {"sessions_running", n}}));
          },
          [=](caf::error&) {
            res->respond(http::json_response(503, {{"status", "stopping"}}));
          });
    });
  });
  // What this server researches with (docs/api.md): no secrets, no paths.
  r.add("GET", "/v1/info", [svc, &cfg](http::request&, std::shared_ptr<http::responder> res) {
    json providers = json::object();
    for (const auto& [name, entry] : cfg.llm.providers) {
      auto model = entry.config.is_object() ? entry.config.value("model", json{}) : json{};
      providers[name] = {{"plugin", entry.plugin},
                         {"model", model.is_string() ? model : json(nullptr)}};
    }
    json tools = json::array();
    for (const auto& [name, e] : svc->engine.tools().tools)
      tools.push_back({{"name", name}, {"kind", sdk::to_string(e.kind)}});
    const auto& research = cfg.research;
    res->respond(
      http::json_response(200, {{"version", QUARRY_VERSION_STRING},
                                {"providers", providers},
                                {"roles", svc->engine.role_providers()},
                                {"tools", tools},
                                {"corpus", !svc->engine.corpus().empty()},
                                {"research",
                                 {{"strategy", research.strategy},
                                  {"mode", research.mode},
                                  {"depth", research.depth},
                                  {"verify", research.verify},
                                  {"deadline", core::format_duration(research.deadline)},
                                  {"max_parallel_agents", research.max_parallel_agents}}}}));
  });
  r.add("POST", "/v1/research",
        [svc, &cfg](http::request& req, std::shared_ptr<http::responder> res) {
          if (!json_declared(req, *res))
            return;
          auto parsed = research_body(req.body, cfg);
          if (auto* why = std::get_if<std::string>(&parsed)) {
            res->respond(http::json_error(400, "bad_request", *why));
            return;
          }
          svc->ask(res, 202, start_atom::value, std::string{},
                   to_json(std::get<stored_options>(parsed))
                     .dump(-1, ' ', false, json::error_handler_t::replace));
        });
  r.add("GET", "/v1/research", [svc](http::request& req, std::shared_ptr<http::responder> res) {
    store::session_filter f;
    if (auto l = req.query_param("limit")) {
      auto text = std::string{*l};
      if (text.empty() || text.size() > 3
          || text.find_first_not_of("0123456789") != std::string::npos || std::stoi(text) < 1
          || std::stoi(text) > 500) {
        res->respond(http::json_error(400, "bad_request", "limit: must be 1 to 500"));
        return;
      }
      f.limit = std::stoi(text);
    }
    if (auto q = req.query_param("q"))
      f.search = std::string{*q};
    if (auto b = req.query_param("before")) {
      if (!store::is_cursor(*b)) {
        res->respond(http::json_error(400, "bad_request",
                                      "before: not a cursor of this list (use the \"next\" "
                                      "of the page before)"));
        return;
      }
      f.before = std::string{*b};
    }
    std::optional<store::session_state> wanted;
    if (auto s = req.query_param("state")) {
      wanted = store::session_state_from(*s);
      if (!wanted) {
        res->respond(http::json_error(400, "bad_request", "state: unknown state"));
        return;
      }
      if (*wanted != store::session_state::interrupted)
        f.state = wanted;
    }
    svc->read(res, [f, wanted](store::store& db) mutable {
      json list = json::array();
      std::string next;
      for (int pages = 0; pages < 20; ++pages) {
        auto listed = db.list_sessions(f);
        if (!listed)
          return store_failure(listed.error());
        auto& page = *listed;
        for (const auto& row : page.sessions) {
          auto read = row_json(db, row);
          if (!read)
            return store_failure(read.error());
          auto& j = *read;
          if (!wanted || j["state"] == store::to_string(*wanted))
            list.push_back(std::move(j));
        }
        next = page.next_cursor;
        if (next.empty() || static_cast<int>(list.size()) >= f.limit)
          break;
        f.before = next;
      }
      return http::json_response(200, {{"sessions", std::move(list)},
                                       {"next", next.empty() ? json(nullptr) : json(next)}});
    });
  });
  r.add("GET", "/v1/research/{id}",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          if (!store::is_session_id(id)) {
            res->respond(not_found(id));
            return;
          }
          svc->read(res, [id](store::store& db) {
            auto found = db.session(id);
            if (!found)
              return store_failure(found.error());
            if (!*found)
              return not_found(id);
            const auto& row = **found;
            auto report = db.final_report(id);
            if (!report)
              return store_failure(report.error());
            auto children = db.children(id);
            if (!children)
              return store_failure(children.error());
            auto read = row_json(db, row);
            if (!read)
              return store_failure(read.error());
            auto& j = *read;
            j["options"] = row.options;
            // The files uploaded to it (POST /v1/uploads).
            if (auto ups = row.options.find("uploads");
                ups != row.options.end() && ups->is_array() && !ups->empty()) {
              json files = json::array();
              for (const auto& u : *ups)
                if (u.is_object() && u.contains("name"))
                  files.push_back({{"name", u.value("name", "")},
                                   {"bytes", u.value("bytes", int64_t{0})},
                                   {"type", u.value("type", "")}});
              j["uploads"] = std::move(files);
            }
            if (!row.error.empty())
              j["error"] = row.error;
            j["last_seq"] = row.last_seq;
            json sources = json::array();
            if (*report) {
              auto cites = db.citations(id);
              if (!cites)
                return store_failure(cites.error());
              auto cited = report_sources(db, id, (*report)->text);
              if (!cited)
                return store_failure(cited.error());
              std::map<int, std::string> document_of;
              for (const auto& c : *cites)
                document_of[c.number] = c.document_id;
              for (const auto& src : *cited)
                sources.push_back({{"number", src.number},
                                   {"document_id", document_of[src.stored()]},
                                   {"title", src.title},
                                   {"url", src.url},
                                   {"snippet_only", src.snippet_only}});
            }
            j["sources"] = std::move(sources);
            // A report the output limit cut (after its continuations) is marked
            // so in its text; the API says it too.
            j["truncated"] = *report && core::is_cut_report((*report)->text);
            json follow_ups = json::array();
            for (const auto& c : *children)
              follow_ups.push_back(c.id);
            j["follow_ups"] = std::move(follow_ups);
            if (row.state == store::session_state::clarification) {
              auto questions = questions_of(db, row);
              if (!questions)
                return store_failure(questions.error());
              j["questions"] = std::move(*questions);
            }
            return http::json_response(200, j);
          });
        });
  r.add("GET", "/v1/research/{id}/events",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          if (!store::is_session_id(id)) {
            res->respond(not_found(id));
            return;
          }
          uint64_t from = 1;
          auto number = [](std::string_view x) -> std::optional<uint64_t> {
            if (x.empty() || x.size() > 19
                || x.find_first_not_of("0123456789") != std::string_view::npos)
              return std::nullopt;
            return std::stoull(std::string{x});
          };
          if (auto last = req.header("Last-Event-ID")) {
            auto n = number(sdk::trim(*last));
            if (!n) {
              res->respond(http::json_error(400, "bad_request", "Last-Event-ID: not a number"));
              return;
            }
            from = *n + 1;
          } else if (auto f = req.query_param("from")) {
            auto n = number(*f);
            if (!n) {
              res->respond(http::json_error(400, "bad_request", "from: not a number"));
              return;
            }
            from = std::max<uint64_t>(*n, 1);
          }
          // The session must exist before the stream starts.
          auto s = svc;
          svc->read(res, [s, id, from, res](store::store& db) -> http::response {
            auto found = db.session(id);
            if (!found)
              return store_failure(found.error());
            if (!*found)
              return not_found(id);
            auto stream = res->start_events();
            if (stream)
              stream_session(s->sys(), s->pool, s->manager, s->store_file, id, from,
                             std::move(stream));
            // Answered by start_events (or its refusal); this is dropped.
            return http::json_error(500, "internal", "unreachable");
          });
        });
  auto command = [svc](auto atom, int ok_status) {
    return [svc, ok_status](http::request& req, std::shared_ptr<http::responder> res) {
      svc->ask(res, ok_status, decltype(atom)::value, std::string{req.param("id")});
    };
  };
  r.add("POST", "/v1/research/{id}/cancel", command(actors::cancel_atom{}, 202));
  r.add("POST", "/v1/research/{id}/resume", command(resume_atom{}, 202));
  r.add("DELETE", "/v1/research/{id}",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          auto mgr = svc->manager;
          svc->sys().spawn([=](caf::event_based_actor* self) {
            self->request(mgr, std::chrono::seconds{60}, remove_atom::value, id)
              .then(
                [=](std::string& reply) {
                  auto out = from_reply(reply, 204);
                  if (out.status == 204)
                    out = http::response{204, "", {}, ""};
                  res->respond(std::move(out));
                },
                [=](caf::error& err) {
                  res->respond(http::json_error(503, "unavailable", caf::to_string(err)));
                });
          });
        });
  r.add("POST", "/v1/research/{id}/reply",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          if (!json_declared(req, *res))
            return;
          auto j = json::parse(req.body, nullptr, false);
          std::string answers;
          bool okay = j.is_object() && (j.contains("answers") || j.contains("answer"));
          if (okay && j.contains("answers")) {
            okay = j["answers"].is_array() && j["answers"].size() <= 50;
            for (const auto& a : okay ? j["answers"] : json::array())
              if (!a.is_string())
                okay = false;
              else if (auto t = std::string{sdk::trim(a.get<std::string>())}; !t.empty())
                answers += sdk::repair_utf8(t) + "\n";
          }
          if (okay && j.contains("answer")) {
            okay = j["answer"].is_string();
            if (okay)
              answers += sdk::repair_utf8(std::string{sdk::trim(j["answer"].get<std::string>())})
                         + "\n";
          }
          if (okay)
            for (auto it = j.begin(); it != j.end(); ++it)
              if (it.key() != "answers" && it.key() != "answer")
                okay = false;
          if (!okay || sdk::trim(answers).empty()) {
            res->respond(http::json_error(
              400, "bad_request",
              R"(the body must be {"answers": ["..."]} or {"answer": "..."}, not empty)"));
            return;
          }
          svc->ask(res, 202, answer_atom::value, std::string{req.param("id")}, answers);
        });
  r.add("POST", "/v1/research/{id}/follow-up",
        [svc, &cfg](http::request& req, std::shared_ptr<http::responder> res) {
          if (!json_declared(req, *res))
            return;
          auto parsed = research_body(req.body, cfg);
          if (auto* why = std::get_if<std::string>(&parsed)) {
            res->respond(http::json_error(400, "bad_request", *why));
            return;
          }
          auto parent = std::string{req.param("id")};
          if (!store::is_session_id(parent)) {
            res->respond(not_found(parent));
            return;
          }
          svc->ask(res, 202, start_atom::value, parent,
                   to_json(std::get<stored_options>(parsed))
                     .dump(-1, ' ', false, json::error_handler_t::replace));
        });
  // PDF and DOCX are made by a browser or pandoc (report_export.hpp): two
  // at a time, on the blocking pool.
  auto exports = std::make_shared<export_slots>(2);
  r.add(
    "GET", "/v1/research/{id}/report",
    [svc, exports](http::request& req, std::shared_ptr<http::responder> res) {
      auto id = std::string{req.param("id")};
      auto format = std::string{req.query_param("format").value_or("md")};
      auto sent = export_format_from(format);
      if (format != "md" && format != "html" && format != "json" && !sent) {
        res->respond(http::json_error(400, "bad_request", "format: md, html, json, pdf or docx"));
        return;
      }
      if (!store::is_session_id(id)) {
        res->respond(not_found(id));
        return;
      }
      std::shared_ptr<export_slots::slot> slot;
      if (sent) {
        auto taken = exports->take();
        if (!taken) {
          auto busy = http::json_error(429, "busy", "other exports are being made; try again");
          busy.headers.emplace_back("Retry-After", "2");
          res->respond(std::move(busy));
          return;
        }
        slot = std::make_shared<export_slots::slot>(std::move(*taken));
      }
      svc->read(res, [id, format, sent, slot, corpus = svc->engine.corpus()](store::store& db) {
        auto found = db.session(id);
        if (!found)
          return store_failure(found.error());
        if (!*found)
          return not_found(id);
        const auto& row = **found;
        auto state = effective_state(db, row);
        auto read = stored_report(db, row, state);
        if (!read)
          return store_failure(read.error());
        auto& report = *read;
        if (!report)
          return http::json_error(409, "conflict",
                                  "session " + id + " has no report yet (" + store::to_string(state)
                                    + ")");
        if (format == "md")
          return http::response{200, "text/markdown; charset=utf-8", {}, markdown_report(*report)};
        // Every source links its page here (serve_sources.cpp): no file://.
        auto source_pages = "/v1/research/" + id + "/sources";
        report->corpus_root = session_corpus(row.options, corpus);
        if (format == "html")
          return http::response{200,
                                "text/html; charset=utf-8",
                                {{"Content-Security-Policy", std::string{source_page_policy}}},
                                html_report(*report, source_pages)};
        if (sent) {
          auto made = export_report(*report, *sent);
          if (auto* err = std::get_if<export_error>(&made)) {
            spdlog::error("the {} export of session {} failed: {}{}{}", format, id, err->message,
                          err->detail.empty() ? "" : "; its output ended with: ",
                          sdk::strip_terminal_controls(err->detail));
            using k = export_error::kind;
            auto status = err->what == k::missing_tool ? 501
                          : err->what == k::timed_out  ? 504
                                                       : 500;
            auto code = err->what == k::missing_tool ? "not_implemented"
                        : err->what == k::timed_out  ? "timeout"
                                                     : "export_failed";
            return http::json_error(status, code, err->message);
          }
          return http::response{
            200,
            std::string{export_content_type(*sent)},
            {{"Content-Disposition", "attachment; filename=\"quarry-" + id + "." + format + "\""}},
            std::get<std::string>(std::move(made))};
        }
        json sources = json::array();
        for (const auto& s : report->sources)
          sources.push_back({{"number", s.number},
                             {"title", s.title},
                             {"url", s.url},
                             {"snippet_only", s.snippet_only}});
        return http::json_response(
          200, {{"id", id},
                {"question", report->question},
                {"report", report->body},
                {"html", report_html_fragment(report->body, report->sources, source_pages)},
                {"sources", std::move(sources)},
                {"partial", report->partial},
                {"truncated", core::is_cut_report(report->body)}});
      });
    });
  // The claims of the final report, each with its verdict and evidence.
  r.add("GET", "/v1/research/{id}/claims",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          if (!store::is_session_id(id)) {
            res->respond(not_found(id));
            return;
          }
          svc->read(res, [id](store::store& db) {
            auto found = db.session(id);
            if (!found)
              return store_failure(found.error());
            if (!*found)
              return not_found(id);
            // Numbered as the report shows its sources.
            auto claims = shown_claims(db, id);
            if (!claims)
              return store_failure(claims.error());
            return http::json_response(200, claims_json(id, *claims));
          });
        });
  add_source_routes(r, svc);
  add_openai_routes(r, svc);
  add_mcp_routes(r, svc);
  add_upload_routes(r, svc);
  // The web page.
  auto page = [](http::request& req, std::shared_ptr<http::responder> res) {
    const auto* a = web::find_asset(req.path);
    if (a == nullptr) {
      res->respond(http::json_error(404, "not_found", "no such page"));
      return;
    }
    if (auto inm = req.header("If-None-Match"); inm && *inm == a->etag) {
      res->respond(http::response{304, "", {{"ETag", std::string{a->etag}}}, ""});
      return;
    }
    res->respond(
      http::response{200,
                     std::string{a->content_type},
                     {{"ETag", std::string{a->etag}},
                      {"Cache-Control", "no-cache"},
                      {"X-Content-Type-Options", "nosniff"},
                      {"Content-Security-Policy", "default-src 'self'; img-src 'self' data:; "
                                                  "style-src 'self'; script-src 'self'; "
                                                  "connect-src 'self'; frame-ancestors 'none'"}},
                     std::string{a->data}});
  };
  size_t count = 0;
  const auto* assets = web::all_assets(count);
  for (size_t i = 0; i < count; ++i)
    r.add("GET", assets[i].path, page);
  r.add("GET", "/", page);
}

} // namespace

int cmd_serve(context& ctx, const serve_options& opts) {
  auto& cfg = ctx.config.values;
  auto listen = opts.listen.empty() ? cfg.server.listen : opts.listen;
  auto where = parse_listen(listen);
  if (!where) {
    std::cerr << "quarry: --listen: not HOST:PORT: '" << listen << "' (e.g. 127.0.0.1:8700)\n";
    return exit_usage;
  }
  if (!cfg.store.enabled) {
    std::cerr << "quarry: serve keeps every session in the store, but store.enabled "
                 "is false\n";
    return exit_usage;
  }
  auto opened = open_store(cfg);
  if (auto* why = std::get_if<std::string>(&opened)) {
    std::cerr << "quarry: the research store cannot be used: " << *why << "\n";
    // The API could only answer 503 to everything that writes (every
    // research), so the server does not start (docs/api.md).
    if (why->find("': read-only (") != std::string::npos)
      std::cerr << "quarry: quarry serve writes every session to the store: give it a "
                   "writable store.path\n";
    return exit_failure;
  }
  auto db = std::get<std::shared_ptr<store::store>>(std::move(opened));
  // Sessions left running by a process that died are interrupted now.
  {
    store::session_filter f;
    f.state = store::session_state::running;
    f.limit = 500;
    store::batch b;
    std::vector<std::unique_ptr<session_lock>> sweep_locks;
    for (int pages = 0; pages < 1000; ++pages) {
      auto listed = db->list_sessions(f);
      if (!listed) {
        std::cerr << "quarry: the research store cannot be read: "
                  << with_store_path(db->path(), listed.error()) << "\n";
        return exit_failure;
      }
      auto& page = *listed;
      for (const auto& row : page.sessions) {
        // Held while the batch is written, so that a process that resumes
        // the session meanwhile (it takes the lock first) is not marked.
        // Read again under the lock: it may have been resumed and have
        // ended since it was listed.
        auto taken = session_lock::take(db->path(), row.id);
        auto* lock = std::get_if<std::unique_ptr<session_lock>>(&taken);
        if (lock == nullptr)
          continue;
        auto now = db->session(row.id);
        if (now && *now && (*now)->state == store::session_state::running) {
          sweep_locks.push_back(std::move(*lock));
          b.states.push_back(
            {row.id, store::session_state::interrupted, "the process running it stopped"});
        }
      }
      if (page.next_cursor.empty())
        break;
      f.before = page.next_cursor;
    }
    if (!b.states.empty()) {
      if (auto err = db->write(b)) {
        std::cerr << "quarry: the research store cannot be written: "
                  << with_store_path(db->path(), *err) << "\n";
        return exit_failure;
      }
      std::cerr << "quarry: " << b.states.size()
                << " session(s) were interrupted when their process stopped; "
                   "resume them with POST /v1/research/ID/resume\n";
    }
  }
  std::optional<core::node_address> node_at;
  if (!cfg.cluster.listen.empty()) {
    node_at = core::parse_node_address(cfg.cluster.listen);
    if (!node_at) {
      std::cerr << "quarry: cluster.listen: not HOST:PORT: '" << cfg.cluster.listen << "'\n";
      return exit_usage;
    }
    if (auto why = plaintext_refusal(cfg, *node_at); !why.empty()) {
      std::cerr << "quarry: cluster.listen: " << why << "\n";
      return exit_usage;
    }
  }
  auto store_file = db->path();
  auto prepared = research_engine::prepare(ctx, engine_setup{});
  if (auto* rc = std::get_if<int>(&prepared))
    return *rc;
  auto engine = std::get<std::unique_ptr<research_engine>>(std::move(prepared));
  engine->start(std::move(db));
  // The models' context windows, once: a window too small refuses every
  // research start with the reason (serve_sessions.cpp).
  {
    const auto& windows = engine->check_context();
    for (const auto& note : windows.notes)
      std::cerr << "quarry: " << sdk::strip_terminal_controls(note) << "\n";
    if (!windows.refusal.empty())
      std::cerr << "quarry: every research will be refused: "
                << sdk::strip_terminal_controls(windows.refusal) << "\n";
  }
  manager_settings ms;
  ms.max_running = cfg.server.max_running_sessions;
  auto manager = spawn_session_manager(engine->runtime().system(), *engine, store_file, ms);
  auto svc = std::make_shared<service>(
    service{ctx, *engine, manager, store_file, ctx.services->pool()});
  http::router router;
  add_routes(router, svc);
  auto server_for_metrics = std::make_shared<server_ref>();
  add_metrics_routes(router, svc, server_for_metrics);
  http::server_options so;
  so.host = where->first;
  so.port = where->second;
  so.io_threads = static_cast<size_t>(cfg.server.io_threads);
  so.max_body_bytes = static_cast<size_t>(cfg.server.max_body_bytes);
  so.body_limits = {{"/v1/uploads", static_cast<size_t>(cfg.server.max_upload_bytes)}};
  so.max_connections = static_cast<size_t>(cfg.server.max_connections);
  so.max_event_streams = static_cast<size_t>(cfg.server.max_event_streams);
  so.heartbeat = cfg.server.heartbeat;
  so.auth_token = cfg.server.auth_token;
  so.cors_origins = cfg.server.cors_origins;
  so.allowed_hosts = cfg.server.allowed_hosts;
  so.allowed_origins = cfg.server.allowed_origins;
  so.public_paths = {"/healthz", "/"};
  size_t count = 0;
  const auto* assets = web::all_assets(count);
  for (size_t i = 0; i < count; ++i)
    so.public_paths.emplace_back(assets[i].path);
  auto started = http::server::start(so, router.as_handler());
  if (auto* err = std::get_if<sdk::error>(&started)) {
    std::cerr << "quarry: " << err->message << "\n";
    caf::anon_send(manager, actors::stop_atom::value);
    // A setting that is not valid (server.allowed_hosts, ...) is a usage
    // error, as a bad --listen is.
    return err->code == sdk::errc::bad_request ? exit_usage : exit_failure;
  }
  auto server = std::get<std::unique_ptr<http::server>>(std::move(started));
  server_for_metrics->server = server.get();
  // One write, so a reader never sees half the line.
  std::cerr << ("quarry: listening on http://" + server->address() + "/\n") << std::flush;
  // Other CAF programs start, follow and cancel research here
  // (cluster.listen; docs/cluster.md).
  research_service_full_actor research_service;
  if (node_at) {
    research_service = spawn_research_service(engine->runtime().system(), svc);
    auto at = publish_node(engine->runtime().system(),
                           cluster::research_service_actor{research_service}, cfg, *node_at);
    if (auto* why = std::get_if<std::string>(&at)) {
      std::cerr << "quarry: cluster.listen: " << *why << "\n";
      caf::anon_send(research_service, cluster::stop_atom::value);
      caf::anon_send(manager, actors::stop_atom::value);
      server->stop();
      return exit_failure;
    }
    core::node_address actual{node_at->host, std::get<uint16_t>(at)};
    std::cerr << "quarry: research service for CAF programs on " << actual.text() << " ("
              << (cfg.cluster.tls.configured() ? "mutual TLS" : "plaintext") << ")\n"
              << std::flush;
  }

  // Runs until SIGINT or SIGTERM.
  auto signal_number = actors::wait_for_stop_signal();
  std::cerr << "quarry: stopping: running sessions are stopped and kept as interrupted\n";
  if (research_service) {
    caf::anon_send(research_service, cluster::stop_atom::value);
    research_service = research_service_full_actor{};
  }
  // Sessions stop first (their streams end with their state), then the
  // server closes what is left.
  {
    caf::scoped_actor self{engine->runtime().system()};
    self->monitor(manager);
    self->send(manager, actors::stop_atom::value);
    bool down = false;
    self->receive_while(
      [&] { return !down; })([&](const caf::down_msg&) { down = true; },
                             caf::after(cfg.runtime.shutdown_grace + std::chrono::seconds{5}) >>
                               [&] {
                                 spdlog::warn("the sessions did not stop in time");
                                 down = true;
                               });
  }
  server->stop();
  server_for_metrics->server = nullptr;
  server.reset();
  // Every actor handle goes before the actor system (it waits for them).
  svc.reset();
  router = http::router{};
  manager = session_manager_actor{};
  // The actors, the host's threads, then the actor system (see
  // ~research_engine).
  engine.reset();
  return actors::exit_code_for_signal(signal_number);
}

} // namespace quarry::app
