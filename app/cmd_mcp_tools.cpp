// The tools and resources of `quarry mcp` (cmd_mcp.hpp): deep_research runs
// a session through the session manager of `quarry serve` (research_run.hpp
// underneath) and follows its packets as MCP progress; quick_search and
// read_url run the configured tools through their tool provider actors, as
// a research agent does; get_report, list_sessions and the resources read
// the store.

#include "cmd_mcp.hpp"

#include "report_render.hpp"
#include "research_engine.hpp"
#include "session_store.hpp"

#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

namespace quarry::app {

namespace {

using nlohmann::json;
namespace mcp = core::mcp;

/// The longest cited passage given with a source (bytes).
constexpr size_t max_passage_bytes = 600;

/// The most text read_url returns (bytes); the rest is cut and marked so.
constexpr size_t max_page_bytes = 200'000;

/// quick_search: queries at most, and characters per query.
constexpr size_t max_queries = 5;
constexpr size_t max_query_chars = 400;

/// How long quick_search and read_url wait for a tool at most; the tool's
/// own limits (tools.NAME.limits) usually end it sooner.
constexpr auto tool_wait = std::chrono::seconds{180};

/// Resources listed per page (the store's page).
constexpr int resources_per_page = 50;

const std::string uri_prefix = "quarry://sessions/";

std::string cut(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes)
    return std::string{text};
  return std::string{sdk::utf8_prefix(text, max_bytes)} + "…";
}

json string_schema(std::string description) {
  return json{{"type", "string"}, {"description", std::move(description)}};
}

json source_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"number", {{"type", "integer"}}},
                {"title", {{"type", "string"}}},
                {"url", string_schema("The page's URL, or the document's file:// URL or path")},
                {"passage", string_schema("The cited passage: the evidence of a claim that "
                                          "cites the source, else the start of its text")},
                {"snippet_only", {{"type", "boolean"}}}}},
              {"required", {"number", "title", "url", "passage"}}};
}

json report_schema() {
  return json{
    {"type", "object"},
    {"properties",
     {{"session_id", string_schema("The stored session (get_report, quarry sessions show)")},
      {"state", string_schema("completed, cancelled, interrupted, failed, ...")},
      {"question", {{"type", "string"}}},
      {"report", string_schema("The report in Markdown; citations [n] number the sources")},
      {"sources", {{"type", "array"}, {"items", source_schema()}}},
      {"partial", {{"type", "boolean"}}},
      {"truncated", {{"type", "boolean"}}}}},
    {"required", {"session_id", "state", "question", "report", "sources"}}};
}

std::vector<mcp::tool> tools() {
  std::vector<mcp::tool> out;
  out.push_back(
    {"deep_research", "Deep research",
     "Researches a question in depth: plans, sends research agents out in parallel over the "
     "configured web search and internal documents, reads the pages, and writes a long report "
     "in which every claim cites a numbered source. Takes minutes; sends progress notifications "
     "while it runs. The session is stored: get_report fetches it again by its session_id.",
     json{{"type", "object"},
          {"properties",
           {{"question",
             {{"type", "string"},
              {"minLength", 1},
              {"maxLength", max_question_chars},
              {"description", "The research question"}}},
            {"strategy",
             {{"type", "string"},
              {"enum", {"orchestrator", "reflective"}},
              {"description", "Default: research.strategy"}}},
            {"mode",
             {{"type", "string"},
              {"enum", {"simple", "web_search", "deep_research"}},
              {"description", "Reflective strategy's mode (default: research.mode)"}}},
            {"depth",
             {{"type", "string"},
              {"enum", {"auto", "light", "medium", "extended"}},
              {"description", "Reflective strategy's depth (default: research.depth)"}}},
            {"deadline",
             string_schema("Research time before the final report, e.g. \"10m\" or \"90s\" "
                           "(at most research.deadline)")},
            {"verify",
             {{"type", "boolean"},
              {"description", "Check the report claim by claim against its sources"}}}}},
          {"required", {"question"}},
          {"additionalProperties", false}},
     report_schema(), json{{"readOnlyHint", true}, {"openWorldHint", true}}});
  out.push_back(
    {"quick_search", "Quick search",
     "Searches with the configured web and internal search tools and returns the results "
     "(title, URL, snippet) without reading pages or writing a report.",
     json{{"type", "object"},
          {"properties",
           {{"queries",
             {{"type", "array"},
              {"items", {{"type", "string"}, {"maxLength", max_query_chars}}},
              {"minItems", 1},
              {"maxItems", max_queries},
              {"description", "Search queries, 1 to 5"}}}}},
          {"required", {"queries"}},
          {"additionalProperties", false}},
     json{{"type", "object"},
          {"properties",
           {{"results",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties",
                 {{"tool", {{"type", "string"}}},
                  {"title", {{"type", "string"}}},
                  {"url", {{"type", "string"}}},
                  {"snippet", {{"type", "string"}}}}},
                {"required", {"tool", "title", "url", "snippet"}}}}}},
            {"errors", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
          {"required", {"results", "errors"}}},
     json{{"readOnlyHint", true}, {"openWorldHint", true}}});
  out.push_back(
    {"read_url", "Read a page",
     "Reads a web page, PDF or document of the corpus and returns its main text, as the "
     "research agents' open_url reads it (the same rules: public http(s) addresses only, size "
     "and time caps).",
     json{{"type", "object"},
          {"properties", {{"url", string_schema("An http(s) URL")}}},
          {"required", {"url"}},
          {"additionalProperties", false}},
     json{{"type", "object"},
          {"properties",
           {{"url", {{"type", "string"}}},
            {"title", {{"type", "string"}}},
            {"text", {{"type", "string"}}},
            {"truncated", {{"type", "boolean"}}}}},
          {"required", {"url", "title", "text", "truncated"}}},
     json{{"readOnlyHint", true}, {"openWorldHint", true}}});
  out.push_back(
    {"get_report", "Get a stored report",
     "Returns the report of a stored research session with its numbered sources.",
     json{{"type", "object"},
          {"properties", {{"session_id", string_schema("A session id, e.g. q0123456789abcdef")}}},
          {"required", {"session_id"}},
          {"additionalProperties", false}},
     report_schema(), json{{"readOnlyHint", true}, {"openWorldHint", false}}});
  out.push_back({"list_sessions", "List research sessions",
                 "Lists stored research sessions, newest first.",
                 json{{"type", "object"},
                      {"properties",
                       {{"search", string_schema("Only sessions whose question has these words")},
                        {"state",
                         {{"type", "string"},
                          {"enum",
                           {"pending", "running", "clarification", "completed", "failed",
                            "cancelled", "interrupted"}}}},
                        {"limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100}}}}},
                      {"additionalProperties", false}},
                 json{{"type", "object"},
                      {"properties",
                       {{"sessions",
                         {{"type", "array"},
                          {"items",
                           {{"type", "object"},
                            {"properties",
                             {{"id", {{"type", "string"}}},
                              {"question", {{"type", "string"}}},
                              {"state", {{"type", "string"}}},
                              {"created_at", {{"type", "string"}}},
                              {"finished_at", {{"type", "string"}}}}},
                            {"required", {"id", "question", "state", "created_at"}}}}}}}},
                      {"required", {"sessions"}}},
                 json{{"readOnlyHint", true}, {"openWorldHint", false}}});
  return out;
}

// Arguments beyond the schema's properties are refused by name (a client
// that does not validate sends them anyway).
std::optional<std::string> unknown_argument(const json& args,
                                            std::initializer_list<const char*> known) {
  for (auto it = args.begin(); it != args.end(); ++it) {
    bool ok = false;
    for (const auto* k : known)
      ok = ok || it.key() == k;
    if (!ok)
      return "unknown argument '" + sdk::repair_utf8(cut(it.key(), 64)) + "'";
  }
  return std::nullopt;
}

size_t utf8_chars(std::string_view x) {
  size_t n = 0;
  for (unsigned char c : x)
    if ((c & 0xC0) != 0x80)
      ++n;
  return n;
}

// -- deep_research ------------------------------------------------------------

// The options of a deep_research call, checked as POST /v1/research checks
// its body; or the message of the tool error.
std::variant<stored_options, std::string> research_options_of(const json& args,
                                                              const core::settings& cfg) {
  if (auto why = unknown_argument(args,
                                  {"question", "strategy", "mode", "depth", "deadline", "verify"}))
    return *why;
  stored_options so;
  // A client cannot answer clarifying questions in the middle of a tool
  // call: the question is researched as it is asked.
  so.clarify = false;
  auto q = args.find("question");
  if (q == args.end() || !q->is_string())
    return std::string{"question: must be a string"};
  so.question = sdk::repair_utf8(sdk::trim(q->get<std::string>()));
  if (so.question.empty())
    return std::string{"question: must not be empty"};
  if (utf8_chars(so.question) > max_question_chars)
    return "question: at most " + std::to_string(max_question_chars) + " characters";
  for (const auto* key : {"strategy", "mode", "depth"}) {
    auto i = args.find(key);
    if (i == args.end())
      continue;
    if (!i->is_string())
      return std::string{key} + ": must be a string";
    auto x = i->get<std::string>();
    std::string k{key};
    auto why = strategy_option_problem(k == "strategy" ? x : std::string{},
                                       k == "mode" ? x : std::string{},
                                       k == "depth" ? x : std::string{});
    if (!why.empty())
      return sdk::repair_utf8(why);
    (k == "strategy" ? so.strategy : k == "mode" ? so.mode : so.depth) = x;
  }
  if (auto d = args.find("deadline"); d != args.end()) {
    std::optional<std::chrono::milliseconds> parsed;
    if (d->is_string())
      parsed = core::parse_duration(d->get<std::string>());
    if (!parsed || parsed->count() <= 0)
      return std::string{"deadline: must be a duration such as \"10m\" or \"90s\""};
    if (*parsed > cfg.research.deadline)
      return "deadline: at most " + core::format_duration(cfg.research.deadline)
             + " (research.deadline)";
    so.deadline_ms = parsed->count();
  }
  if (auto v = args.find("verify"); v != args.end()) {
    if (!v->is_boolean())
      return std::string{"verify: must be true or false"};
    so.verify = v->get<bool>() ? "on" : "off";
  }
  if (std::string problem;
      imply_reflective(so.strategy, so.mode, so.depth, problem), !problem.empty())
    return problem;
  return so;
}

// What a deep_research call shares between its threads: the session once
// started, and whether the client cancelled it before.
struct research_call {
  std::mutex mtx;
  std::string session;
  bool cancelled = false;
};

// Follows a session for a tool call: progress while it runs, the report
// at its end.
class call_follower : public session_follower {
public:
  call_follower(std::shared_ptr<mcp::call> c, std::string id, std::shared_ptr<mcp_service> svc)
    : call_(std::move(c)), id_(std::move(id)), svc_(std::move(svc)) {
  }

  bool packet(uint64_t, const std::string& line) override {
    if (!call_->wants_progress())
      return true;
    auto text = progress_.on_packet(line);
    if (!text.empty())
      call_->progress(text);
    return true;
  }

  void end(const std::string& state) override {
    auto c = call_;
    auto id = id_;
    auto queued = with_reader(
      svc_->pool, svc_->store_file, [c, id, state](store::store* db, const std::string& why) {
        if (db == nullptr) {
          c->finish(mcp::tool_error("The research store cannot be read (" + why + "); session " + id
                                    + " ended " + state));
          return;
        }
        auto r = stored_report_result(*db, id);
        if (auto* err = std::get_if<std::string>(&r)) {
          c->finish(mcp::tool_error(*err));
          return;
        }
        auto& [structured, text] = std::get<std::pair<json, std::string>>(r);
        c->finish(mcp::tool_result(std::move(structured), std::move(text)));
      });
    if (!queued)
      c->finish(mcp::tool_error("The server is busy; the research is stored as session " + id
                                + ": fetch it with get_report"));
  }

  void on_gone(std::function<void()>) override {
    // Cancellation comes through the call (mcp::call::on_cancel).
  }

private:
  std::shared_ptr<mcp::call> call_;
  std::string id_;
  std::shared_ptr<mcp_service> svc_;
  research_progress progress_;
};

void deep_research(const std::shared_ptr<mcp_service>& svc, std::shared_ptr<mcp::call> c) {
  if (!svc->refusal.empty()) {
    c->finish(mcp::tool_error("Cannot research: " + svc->refusal));
    return;
  }
  auto parsed = research_options_of(c->arguments(), svc->ctx.config.values);
  if (auto* why = std::get_if<std::string>(&parsed)) {
    c->finish(mcp::tool_error("Invalid arguments for deep_research: " + *why));
    return;
  }
  auto options = sdk::dump_json(to_json(std::get<stored_options>(parsed)));
  auto state = std::make_shared<research_call>();
  auto mgr = svc->manager;
  c->on_cancel([state, mgr] {
    std::lock_guard<std::mutex> guard{state->mtx};
    state->cancelled = true;
    if (!state->session.empty())
      caf::anon_send(mgr, actors::cancel_atom::value, state->session);
  });
  auto& sys = svc->engine.runtime().system();
  sys.spawn([svc, c, state, mgr, options](caf::event_based_actor* self) {
    self->request(mgr, std::chrono::seconds{60}, start_atom::value, std::string{}, options)
      .then(
        [svc, c, state, mgr](std::string& reply) {
          auto j = json::parse(reply, nullptr, false);
          if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) {
            std::string why = "the session manager answered nonsense";
            if (j.is_object() && j.contains("error") && j["error"].is_object())
              why = j["error"].value("message", why);
            c->finish(mcp::tool_error("The research could not start: " + why));
            return;
          }
          auto id = j["id"].get<std::string>();
          spdlog::info("mcp: deep_research runs as session {}", id);
          {
            std::lock_guard<std::mutex> guard{state->mtx};
            state->session = id;
            if (state->cancelled)
              caf::anon_send(mgr, actors::cancel_atom::value, id);
          }
          c->progress("Session " + id + " started");
          follow_session(svc->engine.runtime().system(), svc->pool, mgr, svc->store_file, id, 1,
                         std::make_shared<call_follower>(c, id, svc));
        },
        [c](caf::error& err) {
          c->finish(mcp::tool_error("The session manager did not answer: " + caf::to_string(err)));
        });
  });
}

// -- quick_search and read_url ---------------------------------------------------

// The tools of the engine of one of `kinds`, by name.
std::vector<std::pair<std::string, actors::tool_set::entry>>
tools_of(const mcp_service& svc, std::initializer_list<sdk::tool_kind> kinds) {
  std::vector<std::pair<std::string, actors::tool_set::entry>> out;
  for (const auto& [name, e] : svc.engine.tools().tools)
    for (auto k : kinds)
      if (e.kind == k)
        out.emplace_back(name, e);
  return out;
}

void quick_search(const std::shared_ptr<mcp_service>& svc, std::shared_ptr<mcp::call> c) {
  const auto& args = c->arguments();
  auto fail = [&](const std::string& why) {
    c->finish(mcp::tool_error("Invalid arguments for quick_search: " + why));
  };
  if (auto why = unknown_argument(args, {"queries"}))
    return fail(*why);
  auto q = args.find("queries");
  if (q == args.end() || !q->is_array() || q->empty() || q->size() > max_queries)
    return fail("queries: must be a list of 1 to " + std::to_string(max_queries) + " strings");
  json queries = json::array();
  for (const auto& x : *q) {
    if (!x.is_string() || sdk::trim(x.get<std::string>()).empty())
      return fail("queries: must be non-empty strings");
    if (utf8_chars(x.get<std::string>()) > max_query_chars)
      return fail("queries: at most " + std::to_string(max_query_chars) + " characters each");
    queries.push_back(sdk::repair_utf8(sdk::trim(x.get<std::string>())));
  }
  auto searchers = tools_of(*svc, {sdk::tool_kind::web_search, sdk::tool_kind::internal_search});
  if (searchers.empty()) {
    c->finish(mcp::tool_error("No search tool is configured (web_search or internal_search "
                              "under tools, or BRAVE_API_KEY, TAVILY_API_KEY, EXA_API_KEY, "
                              "SERPER_API_KEY or SEARXNG_URL)"));
    return;
  }
  auto arguments = sdk::dump_json(json{{"queries", queries}});
  auto& sys = svc->engine.runtime().system();
  sys.spawn([c, searchers, arguments](caf::event_based_actor* self) {
    struct gathered {
      size_t pending = 0;
      json results = json::array();
      json errors = json::array();
      std::string text;
    };
    auto g = std::make_shared<gathered>();
    g->pending = searchers.size();
    auto one_done = [c, g] {
      if (--g->pending > 0)
        return;
      auto n = g->results.size();
      auto text = std::to_string(n) + (n == 1 ? " result" : " results") + "\n" + g->text;
      c->finish(mcp::tool_result(json{{"results", g->results}, {"errors", g->errors}}, text));
    };
    uint64_t n = 0;
    for (const auto& [name, entry] : searchers) {
      auto tool_name = name;
      self
        ->request(entry.actor, tool_wait, actors::run_atom::value,
                  actors::tool_call_msg{++n, arguments})
        .then(
          [g, tool_name, one_done](actors::tool_reply& r) {
            if (r.result.failure)
              g->errors.push_back(tool_name + ": " + sdk::to_string(*r.result.failure));
            for (const auto& d : r.result.documents) {
              if (g->results.size() >= 50)
                break;
              auto snippet = cut(d.snippet.empty() ? d.content : d.snippet, 500);
              auto url = d.url.empty() ? d.id : d.url;
              g->results.push_back(
                {{"tool", tool_name}, {"title", d.title}, {"url", url}, {"snippet", snippet}});
              g->text += "\n" + std::to_string(g->results.size()) + ". " + d.title + " <" + url
                         + ">\n" + snippet + "\n";
            }
            one_done();
          },
          [g, tool_name, one_done](caf::error& err) {
            g->errors.push_back(tool_name + ": " + caf::to_string(err));
            one_done();
          });
    }
  });
}

void read_url(const std::shared_ptr<mcp_service>& svc, std::shared_ptr<mcp::call> c) {
  const auto& args = c->arguments();
  if (auto why = unknown_argument(args, {"url"})) {
    c->finish(mcp::tool_error("Invalid arguments for read_url: " + *why));
    return;
  }
  auto u = args.find("url");
  if (u == args.end() || !u->is_string() || sdk::trim(u->get<std::string>()).empty()
      || u->get<std::string>().size() > 8192) {
    c->finish(mcp::tool_error("Invalid arguments for read_url: url: must be a URL"));
    return;
  }
  auto url = std::string{sdk::trim(u->get<std::string>())};
  auto readers = tools_of(*svc, {sdk::tool_kind::page_reader});
  if (readers.empty()) {
    c->finish(mcp::tool_error("No page reader (open_url) is configured"));
    return;
  }
  auto reader = readers.front().second.actor;
  auto arguments = sdk::dump_json(json{{"urls", json::array({url})}});
  auto& sys = svc->engine.runtime().system();
  sys.spawn([c, reader, arguments, url](caf::event_based_actor* self) {
    self->request(reader, tool_wait, actors::run_atom::value, actors::tool_call_msg{1, arguments})
      .then(
        [c, url](actors::tool_reply& r) {
          const sdk::document* page = nullptr;
          for (const auto& d : r.result.documents)
            if (!d.content.empty()) {
              page = &d;
              break;
            }
          if (page == nullptr) {
            auto why = r.result.llm_text;
            if (r.result.failure)
              why += (why.empty() ? "" : " (") + sdk::to_string(*r.result.failure)
                     + (why.empty() ? "" : ")");
            c->finish(mcp::tool_error("The page could not be read: "
                                      + cut(why.empty() ? std::string{"no text"} : why, 2000)));
            return;
          }
          bool truncated = page->content.size() > max_page_bytes;
          auto text = truncated ? std::string{sdk::utf8_prefix(page->content, max_page_bytes)}
                                : page->content;
          json structured{{"url", page->url.empty() ? url : page->url},
                          {"title", page->title},
                          {"text", text},
                          {"truncated", truncated}};
          auto shown = (page->title.empty() ? std::string{} : "# " + page->title + "\n\n") + text
                       + (truncated ? "\n\n[cut at " + std::to_string(max_page_bytes) + " bytes]"
                                    : std::string{});
          c->finish(mcp::tool_result(std::move(structured), std::move(shown)));
        },
        [c](caf::error& err) {
          c->finish(mcp::tool_error("The page could not be read: " + caf::to_string(err)));
        });
  });
}

// -- the store ---------------------------------------------------------------------

void get_report(const std::shared_ptr<mcp_service>& svc, std::shared_ptr<mcp::call> c) {
  const auto& args = c->arguments();
  if (auto why = unknown_argument(args, {"session_id"})) {
    c->finish(mcp::tool_error("Invalid arguments for get_report: " + *why));
    return;
  }
  auto i = args.find("session_id");
  if (i == args.end() || !i->is_string()) {
    c->finish(mcp::tool_error("Invalid arguments for get_report: session_id: must be a string"));
    return;
  }
  auto id = i->get<std::string>();
  if (!store::is_session_id(id)) {
    c->finish(mcp::tool_error("No session '" + sdk::repair_utf8(cut(id, 40))
                              + "' (a session id looks like q0123456789abcdef)"));
    return;
  }
  auto queued = with_reader(
    svc->pool, svc->store_file, [c, id](store::store* db, const std::string& why) {
      if (db == nullptr) {
        c->finish(mcp::tool_error("The research store cannot be read: " + why));
        return;
      }
      auto r = stored_report_result(*db, id);
      if (auto* err = std::get_if<std::string>(&r)) {
        c->finish(mcp::tool_error(*err));
        return;
      }
      auto& [structured, text] = std::get<std::pair<json, std::string>>(r);
      c->finish(mcp::tool_result(std::move(structured), std::move(text)));
    });
  if (!queued)
    c->finish(mcp::tool_error("The server is busy; try again"));
}

void list_sessions(const std::shared_ptr<mcp_service>& svc, std::shared_ptr<mcp::call> c) {
  const auto& args = c->arguments();
  auto fail = [&](const std::string& why) {
    c->finish(mcp::tool_error("Invalid arguments for list_sessions: " + why));
  };
  if (auto why = unknown_argument(args, {"search", "state", "limit"}))
    return fail(*why);
  store::session_filter f;
  f.limit = 20;
  std::optional<store::session_state> wanted;
  if (auto i = args.find("search"); i != args.end()) {
    if (!i->is_string())
      return fail("search: must be a string");
    f.search = cut(i->get<std::string>(), 1000);
  }
  if (auto i = args.find("state"); i != args.end()) {
    if (!i->is_string() || !(wanted = store::session_state_from(i->get<std::string>())))
      return fail("state: not a session state");
    // Interrupted sessions are stored as running; their lock tells.
    if (*wanted != store::session_state::interrupted)
      f.state = wanted;
  }
  if (auto i = args.find("limit"); i != args.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 1 || i->get<int64_t>() > 100)
      return fail("limit: must be an integer from 1 to 100");
    f.limit = i->get<int>();
  }
  auto queued = with_reader(
    svc->pool, svc->store_file, [c, f, wanted](store::store* db, const std::string& why) {
      if (db == nullptr) {
        c->finish(mcp::tool_error("The research store cannot be read: " + why));
        return;
      }
      auto listed = db->list_sessions(f);
      if (!listed) {
        c->finish(mcp::tool_error("The research store cannot be read: " + listed.error().message));
        return;
      }
      json list = json::array();
      std::string text;
      for (const auto& row : listed->sessions) {
        auto state = store::to_string(effective_state(*db, row));
        if (wanted && state != std::string{store::to_string(*wanted)})
          continue;
        json j{{"id", row.id},
               {"question", row.question},
               {"state", state},
               {"created_at", rfc3339(row.created_at)}};
        if (row.finished_at > 0)
          j["finished_at"] = rfc3339(row.finished_at);
        text += row.id + "  " + state + "  " + rfc3339(row.created_at) + "  "
                + cut(row.question, 200) + "\n";
        list.push_back(std::move(j));
      }
      if (list.empty())
        text = "No sessions.\n";
      c->finish(mcp::tool_result(json{{"sessions", std::move(list)}}, std::move(text)));
    });
  if (!queued)
    c->finish(mcp::tool_error("The server is busy; try again"));
}

// -- resources -----------------------------------------------------------------------

std::variant<mcp::resource_page, mcp::rpc_error> list_resources(mcp_service& svc,
                                                                const std::string& cursor) {
  if (!cursor.empty() && !store::is_cursor(cursor))
    return mcp::rpc_error{mcp::error_code::invalid_params, "Invalid params: unknown cursor"};
  store::session_filter f;
  f.state = store::session_state::completed;
  f.limit = resources_per_page;
  f.before = cursor;
  std::lock_guard<std::mutex> guard{svc.reader_mtx};
  auto listed = svc.reader->list_sessions(f);
  if (!listed)
    return mcp::rpc_error{mcp::error_code::internal_error,
                          "The research store cannot be read: " + listed.error().message};
  mcp::resource_page page;
  for (const auto& row : listed->sessions)
    page.resources.push_back(
      {uri_prefix + row.id + "/report", row.id, cut(row.question, 200),
       "The report of research session " + row.id + " (" + rfc3339(row.created_at) + ")",
       "text/markdown"});
  page.next_cursor = listed->next_cursor;
  return page;
}

std::variant<std::vector<mcp::resource_text>, mcp::rpc_error>
read_resource(mcp_service& svc, const std::string& uri) {
  mcp::rpc_error not_found{mcp::error_code::resource_not_found, "Resource not found"};
  if (uri.compare(0, uri_prefix.size(), uri_prefix) != 0)
    return not_found;
  auto rest = uri.substr(uri_prefix.size());
  auto slash = rest.find('/');
  if (slash == std::string::npos)
    return not_found;
  auto id = rest.substr(0, slash);
  auto what = rest.substr(slash + 1);
  if (!store::is_session_id(id) || (what != "report" && what != "sources"))
    return not_found;
  std::lock_guard<std::mutex> guard{svc.reader_mtx};
  auto r = stored_report_result(*svc.reader, id);
  if (auto* why = std::get_if<std::string>(&r)) {
    // Unknown, or no report yet: not found, with the reason.
    return mcp::rpc_error{mcp::error_code::resource_not_found, "Resource not found: " + *why};
  }
  auto& [structured, text] = std::get<std::pair<json, std::string>>(r);
  if (what == "report")
    return std::vector<mcp::resource_text>{{uri, "text/markdown", text}};
  return std::vector<mcp::resource_text>{
    {uri, "application/json", sdk::dump_json(json{{"sources", structured["sources"]}}, 2)}};
}

} // namespace

std::variant<std::pair<json, std::string>, std::string>
stored_report_result(store::store& db, const std::string& id) {
  auto failed = [&](const sdk::error& err) {
    return std::string{"The research store cannot be read: "} + err.message;
  };
  auto row = db.session(id);
  if (!row)
    return failed(row.error());
  if (!*row)
    return "No session '" + id + "'";
  auto state = effective_state(db, **row);
  auto report = stored_report(db, **row, state);
  if (!report)
    return failed(report.error());
  if (!*report) {
    std::string m = "Session " + id + " has no report (" + store::to_string(state) + ")";
    if (!(*row)->error.empty())
      m += ": " + (*row)->error;
    return m;
  }
  const auto& parts = **report;
  // The cited passage of each source: the evidence the verification found
  // for a claim that cites it, else the start of the text that was read.
  auto cites = db.citations(id);
  if (!cites)
    return failed(cites.error());
  auto docs = db.documents(id);
  if (!docs)
    return failed(docs.error());
  auto claims = db.claims(id);
  if (!claims)
    return failed(claims.error());
  std::map<int, std::string> document_of;
  for (const auto& c : *cites)
    document_of[c.number] = c.document_id;
  std::map<std::string, const store::document_row*> text_of;
  for (const auto& d : *docs)
    text_of[d.document_id] = &d;
  std::map<int, std::string> evidence_of;
  for (const auto& c : *claims)
    if (c.source && !c.evidence.empty() && evidence_of.count(*c.source) == 0)
      evidence_of[*c.source] = c.evidence;
  json sources = json::array();
  for (const auto& s : parts.sources) {
    std::string passage;
    if (auto e = evidence_of.find(s.number); e != evidence_of.end()) {
      passage = cut(e->second, max_passage_bytes);
    } else if (auto d = document_of.find(s.number); d != document_of.end()) {
      if (auto t = text_of.find(d->second); t != text_of.end())
        passage = cut(sdk::trim(t->second->text), max_passage_bytes);
    }
    sources.push_back({{"number", s.number},
                       {"title", s.title},
                       {"url", s.url},
                       {"passage", sdk::repair_utf8(passage)},
                       {"snippet_only", s.snippet_only}});
  }
  json structured{{"session_id", id},
                  {"state", store::to_string(state)},
                  {"question", parts.question},
                  {"report", parts.body},
                  {"sources", std::move(sources)},
                  {"partial", parts.partial},
                  {"truncated", core::is_cut_report(parts.body)}};
  auto text = markdown_report(parts) + "\n(Quarry session " + id + ")\n";
  return std::make_pair(std::move(structured), std::move(text));
}

std::string research_progress::on_packet(const std::string& line) {
  auto p = json::parse(line, nullptr, false);
  if (!p.is_object() || !p.contains("obj") || !p["obj"].is_object())
    return {};
  const auto& o = p["obj"];
  auto type = o.value("type", "");
  auto str = [&](const char* key) {
    auto i = o.find(key);
    return i != o.end() && i->is_string() ? i->get<std::string>() : std::string{};
  };
  auto list = [&](const char* key) {
    std::string out;
    if (auto i = o.find(key); i != o.end() && i->is_array())
      for (const auto& x : *i)
        if (x.is_string())
          out += (out.empty() ? "" : ", ") + x.get<std::string>();
    return out;
  };
  int tab = 0;
  if (auto pl = p.find("placement"); pl != p.end() && pl->is_object())
    if (auto t = pl->find("tab_index"); t != pl->end() && t->is_number_integer())
      tab = t->get<int>();
  auto agent = "Agent " + std::to_string(tab + 1);
  auto plan_message = [&]() -> std::string {
    if (plan_sent_ || sdk::trim(plan_).empty())
      return {};
    plan_sent_ = true;
    return "Plan:\n" + cut(sdk::trim(plan_), 2000);
  };
  std::string out;
  if (type == "deep_research_plan_delta") {
    if (plan_.size() < 64'000)
      plan_ += str("content");
  } else if (type == "section_end") {
    out = plan_message();
  } else if (type == "reflective_plan") {
    const auto& pl = o.contains("plan") && o["plan"].is_object() ? o["plan"] : o;
    std::string steps;
    if (auto i = pl.find("steps"); i != pl.end() && i->is_array())
      for (const auto& s : *i) {
        std::string t;
        if (s.is_string())
          t = s.get<std::string>();
        else if (s.is_object())
          for (const auto* k : {"title", "task", "text", "description"})
            if (s.contains(k) && s[k].is_string()) {
              t = s[k].get<std::string>();
              break;
            }
        if (!t.empty())
          steps += "- " + t + "\n";
      }
    if (!steps.empty())
      out = "Plan:\n" + cut(steps, 2000);
  } else if (type == "research_agent_start") {
    out = plan_message();
    out += (out.empty() ? "" : "\n") + agent + ": " + cut(str("research_task"), 500);
  } else if (type == "search_tool_queries_delta") {
    auto qs = list("queries");
    if (!qs.empty())
      out = agent + " searches: " + cut(qs, 500);
  } else if (type == "open_url_urls") {
    auto us = list("urls");
    if (!us.empty())
      out = agent + " reads: " + cut(us, 500);
  } else if (type == "search_tool_documents_delta" || type == "open_url_documents") {
    auto before = sources_.size();
    if (auto i = o.find("documents"); i != o.end() && i->is_array())
      for (const auto& d : *i)
        if (d.is_object() && d.contains("document_id") && d["document_id"].is_string()
            && sources_.size() < 100'000)
          sources_.insert(d["document_id"].get<std::string>());
    if (sources_.size() > before)
      out = "Sources found: " + std::to_string(sources_.size());
  } else if (type == "intermediate_report_start") {
    out = agent + " writes its report";
  } else if (type == "message_start") {
    out = plan_message();
    out += (out.empty() ? "" : "\n") + std::string{"Writing the final report"};
  } else if (type == "notice") {
    out = "Note: " + cut(str("text"), 500);
  } else if (type == "error") {
    out = "Error: " + cut(str("message"), 500);
  }
  return sdk::repair_utf8(out);
}

core::mcp::server_setup mcp_server_setup(std::shared_ptr<mcp_service> svc) {
  mcp::server_setup s;
  s.name = "quarry";
  s.title = "Quarry";
  s.version = QUARRY_VERSION_STRING;
  s.instructions = "Quarry is a deep research engine. deep_research answers hard questions with "
                   "a long report in which every claim cites a numbered source (it takes "
                   "minutes); quick_search and read_url are for quick look-ups; get_report and "
                   "list_sessions read researches done before.";
  s.tools = tools();
  s.resource_templates.push_back({uri_prefix + "{id}/report", "report", "Research report",
                                  "The report of a stored research session, with its sources",
                                  "text/markdown"});
  s.resource_templates.push_back({uri_prefix + "{id}/sources", "sources", "Research sources",
                                  "The numbered sources of a stored report with their cited "
                                  "passages",
                                  "application/json"});
  s.call_tool = [svc](std::shared_ptr<mcp::call> c) {
    const auto& name = c->tool();
    if (name == "deep_research")
      deep_research(svc, std::move(c));
    else if (name == "quick_search")
      quick_search(svc, std::move(c));
    else if (name == "read_url")
      read_url(svc, std::move(c));
    else if (name == "get_report")
      get_report(svc, std::move(c));
    else if (name == "list_sessions")
      list_sessions(svc, std::move(c));
    else
      c->finish(mcp::tool_error("Unknown tool " + name));
  };
  s.list_resources = [svc](const std::string& cursor) { return list_resources(*svc, cursor); };
  s.read_resource = [svc](const std::string& uri) { return read_resource(*svc, uri); };
  return s;
}

} // namespace quarry::app
