// `quarry serve` through real processes and real HTTP: every endpoint of
// docs/api.md, event streams with replay, clarification answered over the
// API, cancel, follow-up, removal, limits, authentication, and a stop by
// SIGTERM whose sessions resume after a restart.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <csignal>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace serve_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace quarry::test::serve;
using nlohmann::json;

namespace {

std::string start(const server_process& srv, const json& body) {
  auto r = call("POST", srv.url("/v1/research"), body.dump());
  CAPTURE(r.body);
  REQUIRE(r.status == 202);
  auto id = r.as_json()["id"].get<std::string>();
  CHECK(r.header("location") == "/v1/research/" + id);
  CHECK(r.as_json()["state"] == "running");
  return id;
}

// Reads the session's events until the server ends the stream.
std::vector<sse_event> events(const server_process& srv, const std::string& id,
                              std::vector<std::string> headers = {},
                              const std::string& query = {}) {
  auto r = call("GET", srv.url("/v1/research/" + id + "/events" + query), {}, headers,
                std::chrono::seconds{90});
  CAPTURE(r.body.substr(0, 400));
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").find("text/event-stream") == 0);
  return parse_sse(r.body);
}

} // namespace

TEST_CASE("serve: a research over the API streams every packet, then its state, "
          "and its report in three formats") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto health = call("GET", srv.url("/healthz"));
  CHECK(health.status == 200);
  CHECK(health.as_json()["status"] == "ok");
  auto id = start(srv, {{"question", "How loud is a heat pump?"}, {"clarify", false}});
  auto evs = events(srv, id);
  REQUIRE(evs.size() > 10);
  for (size_t i = 0; i + 1 < evs.size(); ++i) {
    CHECK(evs[i].event == "packet");
    CHECK(evs[i].id == std::to_string(i + 1));
    auto p = json::parse(evs[i].data);
    CHECK(p["seq"] == i + 1);
    CHECK(p["session"] == id);
  }
  CHECK(json::parse(evs[evs.size() - 2].data)["obj"]["type"] == "stop");
  CHECK(evs.back().event == "end");
  CHECK(json::parse(evs.back().data)["state"] == "completed");

  auto got = call("GET", srv.url("/v1/research/" + id)).as_json();
  CHECK(got["state"] == "completed");
  CHECK(got["question"] == "How loud is a heat pump?");
  CHECK(got["last_seq"] == evs.size() - 1);
  CHECK(got["usage"]["calls"].get<int>() > 0);
  // The offline extractive provider: no model, no tokens, nothing to price.
  CHECK(got["usage"]["offline_calls"] == got["usage"]["calls"]);
  CHECK(got["usage"]["model_calls"] == 0);
  CHECK(got["usage"]["input_tokens"] == 0);
  CHECK(got["usage"]["cost_known"] == true);
  REQUIRE_FALSE(got["models"].empty());
  for (const auto& m : got["models"]) {
    CAPTURE(m.dump());
    CHECK(m["provider"] == "default");
    CHECK(m["model"].is_null());
    CHECK(m["offline"] == true);
    CHECK_FALSE(m.contains("input_tokens"));
  }
  CHECK(got["duration_ms"].get<int64_t>() > 0);
  REQUIRE_FALSE(got["sources"].empty());
  CHECK(got["sources"][0]["url"].get<std::string>().rfind("file://", 0) == 0);

  auto md = call("GET", srv.url("/v1/research/" + id + "/report"));
  CHECK(md.status == 200);
  CHECK(md.header("content-type").find("text/markdown") == 0);
  CHECK(md.body.rfind("# How loud is a heat pump?", 0) == 0);
  CHECK(md.body.find("## Sources") != std::string::npos);
  auto html = call("GET", srv.url("/v1/research/" + id + "/report?format=html"));
  CHECK(html.body.find("<!DOCTYPE html>") == 0);
  auto js = call("GET", srv.url("/v1/research/" + id + "/report?format=json")).as_json();
  CHECK(js["partial"] == false);
  CHECK_FALSE(js["sources"].empty());
  CHECK(call("GET", srv.url("/v1/research/" + id + "/report?format=rtf")).status == 400);

  // A reconnecting client gets what follows its last event.
  auto rest = events(srv, id, {"Last-Event-ID: 10"});
  REQUIRE_FALSE(rest.empty());
  CHECK(rest.front().id == "11");
  CHECK(rest.size() == evs.size() - 10);
  auto from = events(srv, id, {}, "?from=5");
  CHECK(from.front().id == "5");
  CHECK(call("GET", srv.url("/v1/research/" + id + "/events"), {}, {"Last-Event-ID: x"}).status
        == 400);

  // The list: search, state filter, paging.
  auto second = start(srv, {{"question", "What does a buffer tank do?"}, {"clarify", false}});
  events(srv, second);
  auto all = call("GET", srv.url("/v1/research")).as_json();
  REQUIRE(all["sessions"].size() == 2);
  CHECK(all["sessions"][0]["id"] == second);
  // A row of the list says what it used, for how long.
  CHECK(all["sessions"][0]["models"][0]["offline"] == true);
  CHECK(all["sessions"][0]["usage"]["offline_calls"].get<int>() > 0);
  CHECK(all["sessions"][0]["duration_ms"].is_number_integer());
  CHECK(all["next"].is_null());
  auto found = call("GET", srv.url("/v1/research?q=buffer")).as_json();
  REQUIRE(found["sessions"].size() == 1);
  CHECK(found["sessions"][0]["id"] == second);
  auto page = call("GET", srv.url("/v1/research?limit=1")).as_json();
  REQUIRE(page["sessions"].size() == 1);
  REQUIRE(page["next"].is_string());
  auto page2 = call("GET",
                    srv.url("/v1/research?limit=1&before=" + page["next"].get<std::string>()))
                 .as_json();
  REQUIRE(page2["sessions"].size() == 1);
  CHECK(page2["sessions"][0]["id"] == id);
  CHECK(call("GET", srv.url("/v1/research?state=completed")).as_json()["sessions"].size() == 2);
  CHECK(call("GET", srv.url("/v1/research?state=failed")).as_json()["sessions"].empty());

  // The page is served from the binary.
  auto index = call("GET", srv.url("/"));
  CHECK(index.status == 200);
  CHECK(index.header("content-type").find("text/html") == 0);
  CHECK_FALSE(index.header("etag").empty());
  auto again = call("GET", srv.url("/"), {}, {"If-None-Match: " + index.header("etag")});
  CHECK(again.status == 304);
  CHECK(call("GET", srv.url("/app.js")).status == 200);
  CHECK(call("GET", srv.url("/../CMakeLists.txt")).status >= 400);
  CHECK(call("GET", srv.url("/%2e%2e/CMakeLists.txt")).status >= 400);

  // Removal.
  CHECK(call("DELETE", srv.url("/v1/research/" + second)).status == 204);
  CHECK(call("GET", srv.url("/v1/research/" + second)).status == 404);
  CHECK(call("DELETE", srv.url("/v1/research/" + second)).status == 404);
}

TEST_CASE("serve: /v1/info says what the server researches with, without secrets or paths") {
  test::temp_dir home;
  server_process srv{home, {"--set", "research.max_parallel_agents=2"}};
  auto info = call("GET", srv.url("/v1/info"));
  CAPTURE(info.body);
  REQUIRE(info.status == 200);
  auto j = info.as_json();
  CHECK(j["version"].is_string());
  CHECK(j["providers"]["default"]["plugin"] == "extractive");
  CHECK(j["providers"]["default"]["model"].is_null());
  for (const auto* role : {"clarify", "plan", "orchestrator", "research", "report", "judge"})
    CHECK(j["roles"][role] == "default");
  // The example corpus: internal search and the page reader.
  std::map<std::string, std::string> kinds;
  for (const auto& t : j["tools"])
    kinds[t["name"].get<std::string>()] = t["kind"].get<std::string>();
  CHECK(kinds["internal_search"] == "internal_search");
  CHECK(kinds["open_url"] == "page_reader");
  CHECK(j["corpus"] == true);
  CHECK(j["research"]["strategy"] == "orchestrator");
  CHECK(j["research"]["max_parallel_agents"] == 2);
  CHECK(j["research"]["deadline"].is_string());
  // No folder of the server's and no key.
  CHECK(info.body.find(home.path()) == std::string::npos);
  CHECK(info.body.find("/examples/") == std::string::npos);
  CHECK(info.body.find("api_key") == std::string::npos);
}

TEST_CASE("serve: every bad request gets a JSON error with a 4xx status") {
  test::temp_dir home;
  server_process srv{home, {"--set", "server.max_body_bytes=2048"}};
  auto expect = [&](const reply& r, long status, const char* code, const char* words) {
    CAPTURE(r.body);
    CHECK(r.status == status);
    auto j = json::parse(r.body, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j["error"]["code"] == code);
    CHECK(j["error"]["message"].get<std::string>().find(words) != std::string::npos);
  };
  auto post = [&](const std::string& body) { return call("POST", srv.url("/v1/research"), body); };
  expect(post("{not json"), 400, "bad_request", "not JSON");
  expect(post("[1,2]"), 400, "bad_request", "object");
  expect(post(R"({"question": 7})"), 400, "bad_request", "question");
  expect(post(R"({"question": "   "})"), 400, "bad_request", "non-empty");
  expect(post(R"({})"), 400, "bad_request", "question: missing");
  expect(post(R"({"question": "q", "colour": "red"})"), 400, "bad_request",
         "unknown field 'colour'");
  expect(post(R"({"question": "q", "max_agents": 0})"), 400, "bad_request", "max_agents");
  expect(post(R"({"question": "q", "max_agents": "3"})"), 400, "bad_request", "max_agents");
  expect(post(R"({"question": "q", "deadline": "soon"})"), 400, "bad_request", "deadline");
  expect(post(R"({"question": "q", "deadline": "48h"})"), 400, "bad_request", "at most");
  expect(post(R"({"question": "q", "strategy": "magic"})"), 400, "bad_request", "strategy");
  expect(post(R"({"question": "q", "strategy": 1})"), 400, "bad_request",
         "strategy: must be a string");
  expect(post(R"({"question": "q", "mode": "quick"})"), 400, "bad_request", "mode: not simple");
  expect(post(R"({"question": "q", "depth": "deep"})"), 400, "bad_request", "depth: not auto");
  expect(post(R"({"question": "q", "strategy": "orchestrator", "depth": "light"})"), 400,
         "bad_request", "depth: an option of the reflective strategy");
  expect(post(R"({"question": "q", "verify": "yes"})"), 400, "bad_request", "verify");
  expect(post(R"({"question": "q", "corpus": "/etc"})"), 400, "bad_request",
         "unknown field 'corpus'");
  expect(post(R"({"question": "q", "answers": "yes"})"), 400, "bad_request", "answers");
  expect(post("{\"question\": \"" + std::string(3000, 'x') + "\"}"), 413, "too_large", "");
  auto form = call("POST", srv.url("/v1/research"), "question=q",
                   {"Content-Type: application/x-www-form-urlencoded"});
  CHECK(form.status == 415);
  expect(call("GET", srv.url("/v1/research/q0123456789abcdef")), 404, "not_found",
         "q0123456789abcdef");
  expect(call("GET", srv.url("/v1/research/not-an-id")), 404, "not_found", "");
  expect(call("GET", srv.url("/v1/research/q0123456789abcdef/events")), 404, "not_found", "");
  expect(call("GET", srv.url("/v1/research/q0123456789abcdef/report")), 404, "not_found", "");
  expect(call("POST", srv.url("/v1/research/q0123456789abcdef/cancel")), 404, "not_found", "");
  expect(call("POST", srv.url("/v1/research/q0123456789abcdef/resume")), 404, "not_found", "");
  expect(call("POST", srv.url("/v1/research/q0123456789abcdef/reply"), R"({"answers": ["a"]})"),
         404, "not_found", "");
  expect(call("POST", srv.url("/v1/research/q0123456789abcdef/reply"), R"({"answers": 3})"), 400,
         "bad_request", "answers");
  expect(call("POST", srv.url("/v1/research/q0123456789abcdef/follow-up"), R"({"question": "q"})"),
         404, "not_found", "");
  expect(call("PUT", srv.url("/v1/research")), 405, "method_not_allowed", "");
  expect(call("GET", srv.url("/v1/nothing")), 404, "not_found", "");
  expect(call("GET", srv.url("/v1/research?limit=0")), 400, "bad_request", "limit");
  expect(call("GET", srv.url("/v1/research?state=dancing")), 400, "bad_request", "state");
  // A cursor this list never gave out is a bad request, not an empty page.
  for (const char* cursor : {"garbage", "c1795590000000.qnothex", "c.q0123456789abcdef",
                             "c99999999999999999999.q0123456789abcdef"})
    expect(call("GET", srv.url(std::string{"/v1/research?before="} + cursor)), 400, "bad_request",
           "before");
  // A finished session refuses what only a running or waiting one allows.
  auto id = start(srv, {{"question", "How loud is a heat pump?"}, {"clarify", false}});
  events(srv, id);
  expect(call("POST", srv.url("/v1/research/" + id + "/cancel")), 409, "conflict", "not running");
  expect(call("POST", srv.url("/v1/research/" + id + "/reply"), R"({"answer": "x"})"), 409,
         "conflict", "asks nothing");
  expect(call("POST", srv.url("/v1/research/" + id + "/resume")), 409, "conflict",
         "only an interrupted session");
  // The server still works.
  CHECK(call("GET", srv.url("/healthz")).status == 200);
}

TEST_CASE("serve: clarifying questions are answered over the API and the same "
          "session goes on") {
  test::temp_dir home;
  test::fake_llm_server llm;
  auto rules = two_agent_script();
  rules.insert(rules.begin(), rule(clarify_marker, {{"text", "1. Which climate zone?"}}, 1));
  REQUIRE_FALSE(llm.script(rules));
  server_process srv{home, {}, llm_env(llm)};
  auto id = start(srv, {{"question", "heat pumps?"}});
  auto first = events(srv, id);
  REQUIRE(first.size() >= 3);
  CHECK(json::parse(first.back().data)["state"] == "clarification");
  auto got = call("GET", srv.url("/v1/research/" + id)).as_json();
  CHECK(got["state"] == "clarification");
  CHECK(got["questions"].get<std::string>().find("Which climate zone?") != std::string::npos);
  CHECK(call("GET", srv.url("/v1/research/" + id + "/report")).status == 409);
  auto answered = call("POST", srv.url("/v1/research/" + id + "/reply"),
                       R"({"answers": ["A cold Nordic climate"]})");
  CAPTURE(answered.body);
  REQUIRE(answered.status == 202);
  auto last_id = first[first.size() - 2].id;
  auto rest = events(srv, id, {"Last-Event-ID: " + last_id});
  REQUIRE(rest.size() > 5);
  CHECK(rest.front().id == std::to_string(std::stoi(last_id) + 1));
  CHECK(json::parse(rest.back().data)["state"] == "completed");
  // The plan request carried the answer.
  bool answer_seen = false;
  for (const auto& r : llm.requests())
    if (r.raw_body.find("A cold Nordic climate") != std::string::npos)
      answer_seen = true;
  CHECK(answer_seen);
  // Follow-up: a new session that sees the report.
  auto follow = call("POST", srv.url("/v1/research/" + id + "/follow-up"),
                     R"({"question": "And in a mild climate?", "clarify": false})");
  REQUIRE(follow.status == 202);
  auto child = follow.as_json()["id"].get<std::string>();
  CHECK(child != id);
  events(srv, child);
  auto c = call("GET", srv.url("/v1/research/" + child)).as_json();
  CHECK(c["parent_id"] == id);
  // A hosted model's calls are priced by the table Quarry ships
  // (gpt-4.1-mini, the model the server named), per role.
  CAPTURE(c.dump());
  CHECK(c["usage"]["model_calls"].get<int>() > 0);
  CHECK(c["usage"]["offline_calls"] == 0);
  CHECK(c["usage"]["cost_known"] == true);
  CHECK(c["usage"]["input_tokens"].get<int64_t>() > 0);
  CHECK(c["usage"]["cost"].get<double>() > 0);
  REQUIRE_FALSE(c["models"].empty());
  std::set<std::string> roles;
  for (const auto& m : c["models"]) {
    CHECK(m["provider"] == "default");
    CHECK(m["model"] == "gpt-4.1-mini");
    CHECK(m["offline"] == false);
    CHECK(m["cost_known"] == true);
    roles.insert(m["role"].get<std::string>());
  }
  CHECK(roles.size() == c["models"].size());
  CHECK(c["duration_ms"].get<int64_t>() > 0);
  CHECK(call("GET", srv.url("/v1/research/" + id)).as_json()["follow_ups"] == json::array({child}));
}

// A stream opened while its run ends (the emitter stopping, the manager not
// yet told) once subscribed to a stopped emitter and waited for packets that
// never came. Many short runs, each followed at once by its stream, open
// streams all through that window.
TEST_CASE("serve: an event stream opened at any moment of a short run ends with the "
          "run's state") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(
    llm.script(json::array({rule(clarify_marker, {{"text", "1. Which climate zone?"}})})));
  server_process srv{home, {}, llm_env(llm)};
  constexpr int threads = 6;
  constexpr int per_thread = 8;
  std::vector<std::string> problems;
  std::mutex mtx;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        auto r = call("POST", srv.url("/v1/research"), R"({"question": "heat pumps?"})");
        std::string problem;
        if (r.status != 202) {
          problem = "start: " + std::to_string(r.status) + " " + r.body;
        } else {
          auto id = json::parse(r.body)["id"].get<std::string>();
          auto ev = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                         std::chrono::seconds{30});
          auto evs = parse_sse(ev.body);
          if (ev.status != 200 || evs.empty() || evs.back().event != "end")
            problem = id + ": " + std::to_string(ev.status) + ", " + std::to_string(evs.size())
                      + " events, no end event";
          else if (json::parse(evs.back().data)["state"] != "clarification")
            problem = id + ": ended as " + evs.back().data;
          else if (evs.size() < 3)
            problem = id + ": " + std::to_string(evs.size()) + " events before the end";
        }
        if (!problem.empty()) {
          std::lock_guard<std::mutex> guard{mtx};
          problems.push_back(problem);
        }
      }
    });
  for (auto& t : pool)
    t.join();
  CAPTURE(problems.size());
  for (const auto& p : problems)
    MESSAGE(p);
  CHECK(problems.empty());
}

// The blocking pool reads the store for event streams; with its queue full
// a replay once went out empty (the stored packets skipped) and an end as
// "unknown". Now the read is tried again until the pool takes it.
TEST_CASE("serve: event streams replayed while the blocking pool is full get every packet and "
          "the state") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(two_agent_script()));
  server_process srv{home,
                     {"--set", "runtime.blocking_threads=1", "--set", "runtime.blocking_queue=1"},
                     llm_env(llm)};
  auto id = start(srv,
                  {{"question", "How do heat pumps cope with cold weather?"}, {"clarify", false}});
  auto first = events(srv, id);
  REQUIRE(first.size() > 5);
  REQUIRE(json::parse(first.back().data)["state"] == "completed");
  constexpr int readers = 12;
  std::vector<std::vector<sse_event>> got(readers);
  std::vector<int> status(readers, 0);
  std::vector<std::thread> pool;
  for (int i = 0; i < readers; ++i)
    pool.emplace_back([&, i] {
      // A request the server is too busy to begin is answered 429 with
      // Retry-After (and tried again, as clients do); a stream it begins is
      // whole.
      for (int attempt = 0; attempt < 100; ++attempt) {
        auto r = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                      std::chrono::seconds{60});
        status[i] = r.status;
        got[i] = parse_sse(r.body);
        if (r.status != 429 || r.header("retry-after").empty())
          break;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
      }
    });
  for (auto& t : pool)
    t.join();
  for (int i = 0; i < readers; ++i) {
    CAPTURE(i);
    CHECK(status[i] == 200);
    REQUIRE(got[i].size() == first.size());
    for (size_t k = 0; k < first.size(); ++k)
      CHECK(got[i][k].data == first[k].data);
  }
}

TEST_CASE("serve: cancel stops a running research, limits answer 429, and a "
          "running session cannot be removed") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(hanging_at(two_agent_script(), agent_marker)));
  server_process srv{home,
                     {"--set", "server.max_running_sessions=1", "--set", "server.heartbeat=100ms"},
                     llm_env(llm)};
  auto id = start(srv,
                  {{"question", "How do heat pumps cope with cold weather?"}, {"clarify", false}});
  wait_until([&] { return requests_with(llm, agent_marker) > 0; }, "an agent's request");
  auto busy = call("POST", srv.url("/v1/research"), R"({"question": "another"})");
  CHECK(busy.status == 429);
  CHECK(busy.header("retry-after") == "5");
  CHECK(busy.as_json()["error"]["code"] == "busy");
  CHECK(call("DELETE", srv.url("/v1/research/" + id)).status == 409);
  CHECK(state_of(srv, id) == "running");
  CHECK(call("GET", srv.url("/healthz")).as_json()["sessions_running"] == 1);
  std::vector<sse_event> live;
  size_t heartbeats = 0;
  std::thread reader{[&] {
    auto r = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                  std::chrono::seconds{90});
    live = parse_sse(r.body, &heartbeats);
  }};
  // A quiet stream gets heartbeats (server.heartbeat) while the agent waits.
  std::this_thread::sleep_for(std::chrono::milliseconds{500});
  // Two cancels at once: one stops it, the other sees it cancelled.
  reply cancelled;
  reply again;
  {
    std::thread other{[&] { again = call("POST", srv.url("/v1/research/" + id + "/cancel")); }};
    cancelled = call("POST", srv.url("/v1/research/" + id + "/cancel"));
    other.join();
  }
  if (cancelled.status != 202)
    std::swap(cancelled, again);
  CHECK(cancelled.status == 202);
  CHECK(cancelled.as_json()["state"] == "cancelled");
  CHECK(again.status == 409);
  CHECK(again.body.find("cancelled") != std::string::npos);
  reader.join();
  REQUIRE_FALSE(live.empty());
  CHECK(live.back().event == "end");
  CHECK(json::parse(live.back().data)["state"] == "cancelled");
  // The last packet says why the run stopped.
  REQUIRE(live.size() >= 2);
  auto last = json::parse(live[live.size() - 2].data);
  CHECK(last["obj"]["type"] == "stop");
  CHECK(last["obj"]["stop_reason"] == "user_cancelled");
  CHECK(heartbeats >= 1);
  CHECK(state_of(srv, id) == "cancelled");
  CHECK(call("GET", srv.url("/healthz")).as_json()["sessions_running"] == 0);
}

TEST_CASE("serve: a research cancelled after one agent reported keeps its findings as a "
          "partial report whose citations are stored sources") {
  test::temp_dir home;
  test::fake_llm_server llm;
  // The first agent searches and reports; the second agent's model never
  // answers, so the research is still running when it is cancelled.
  auto rules = json::array();
  rules.push_back({{"match", {{"system_contains", agent_marker}, {"message_contains", "(held)"}}},
                   {"respond", {{"text", "never"}}},
                   {"stall_after_bytes", 0}});
  for (auto& r : two_agent_script())
    rules.push_back(r);
  rules[2] = rule(orchestrator_marker,
                  calls({{"research_agent", {{"task", "Why efficiency falls in the cold."}}},
                         {"research_agent", {{"task", "Night-time noise limits (held)."}}}}),
                  1);
  REQUIRE_FALSE(llm.script(rules));
  server_process srv{home, {}, llm_env(llm)};
  auto id = start(srv,
                  {{"question", "How do heat pumps cope with cold weather?"}, {"clarify", false}});
  wait_until(
    [&] {
      auto so_far = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                         std::chrono::milliseconds{300});
      return so_far.body.find("intermediate_report_cited_docs") != std::string::npos;
    },
    "the first agent's report");
  auto cancelled = call("POST", srv.url("/v1/research/" + id + "/cancel"));
  CAPTURE(cancelled.body);
  REQUIRE(cancelled.status == 202);
  auto evs = parse_sse(
    call("GET", srv.url("/v1/research/" + id + "/events"), {}, {}, std::chrono::seconds{60}).body);
  REQUIRE_FALSE(evs.empty());
  CHECK(json::parse(evs.back().data)["state"] == "cancelled");
  auto report = call("GET", srv.url("/v1/research/" + id + "/report?format=json"));
  CAPTURE(report.body);
  REQUIRE(report.status == 200);
  auto r = report.as_json();
  CHECK(r["partial"] == true);
  // Every number the report cites is a source the API lists, and opens.
  std::set<int> cited;
  std::regex marker{R"(\[\[(\d+)\]\])"};
  auto text = r["report"].get<std::string>();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), marker);
       it != std::sregex_iterator(); ++it)
    cited.insert(std::stoi((*it)[1].str()));
  REQUIRE_FALSE(cited.empty());
  auto list = call("GET", srv.url("/v1/research/" + id + "/sources"));
  CAPTURE(list.body);
  REQUIRE(list.status == 200);
  std::set<int> listed;
  auto sources = list.as_json();
  for (const auto& x : sources["sources"])
    listed.insert(x["number"].get<int>());
  CHECK(cited == listed);
  for (int n : cited)
    CHECK(call("GET", srv.url("/v1/research/" + id + "/sources/" + std::to_string(n))).status
          == 200);
}

TEST_CASE("serve: SIGTERM ends the streams, keeps running sessions as "
          "interrupted, and they resume after a restart") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(hanging_at(two_agent_script(), agent_marker)));
  std::string id;
  {
    server_process srv{home, {}, llm_env(llm)};
    id = start(srv,
               {{"question", "How do heat pumps cope with cold weather?"}, {"clarify", false}});
    wait_until([&] { return requests_with(llm, agent_marker) > 0; }, "an agent's request");
    std::vector<sse_event> live;
    std::thread reader{[&] { live = events(srv, id); }};
    // The stream is open before the signal.
    std::this_thread::sleep_for(std::chrono::milliseconds{300});
    srv.proc->signal(SIGTERM);
    auto ended = srv.proc->wait(std::chrono::seconds{60});
    reader.join();
    CAPTURE(ended.err);
    CHECK(ended.exit_code == 143);
    CHECK(ended.err.find("stopping") != std::string::npos);
    REQUIRE_FALSE(live.empty());
    CHECK(live.back().event == "end");
    CHECK(json::parse(live.back().data)["state"] == "interrupted");
  }
  REQUIRE_FALSE(llm.script(two_agent_script()));
  server_process again{home, {}, llm_env(llm)};
  CHECK(state_of(again, id) == "interrupted");
  auto listed = call("GET", again.url("/v1/research?state=interrupted")).as_json();
  REQUIRE(listed["sessions"].size() == 1);
  auto resumed = call("POST", again.url("/v1/research/" + id + "/resume"));
  CAPTURE(resumed.body);
  REQUIRE(resumed.status == 202);
  auto evs = events(again, id);
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  bool resumed_packet = false;
  for (size_t i = 0; i + 1 < evs.size(); ++i) {
    CHECK(evs[i].id == std::to_string(i + 1));
    if (json::parse(evs[i].data)["obj"]["type"] == "resumed")
      resumed_packet = true;
  }
  CHECK(resumed_packet);
  CHECK(call("GET", again.url("/v1/research/" + id + "/report")).body.find("Cold air lowers")
        != std::string::npos);
}

TEST_CASE("serve: another address than loopback needs a token, which every API "
          "request must then carry") {
  test::temp_dir home;
  {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR,
                                  "serve",    "--listen",     "0.0.0.0:0"};
    auto r = test::run_process(argv, test::isolated_quarry_options(home.path()));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("auth_token") != std::string::npos);
  }
  CHECK(test::run_process({QUARRY_EXE, "serve", "--listen", "nonsense"},
                          test::isolated_quarry_options(home.path()))
          .exit_code
        == 2);
  auto no_store = test::run_process({QUARRY_EXE, "--set", "store.enabled=false", "serve",
                                     "--listen", "127.0.0.1:0"},
                                    test::isolated_quarry_options(home.path()));
  CHECK(no_store.exit_code == 2);
  CHECK(no_store.err.find("store.enabled") != std::string::npos);
  {
    // A store file that is not a Quarry store: refused, left as it was.
    test::temp_dir other;
    auto file = other.path() + "/notes.db";
    {
      std::ofstream out{file};
      out << "my notes";
    }
    auto bad = test::run_process({QUARRY_EXE, "--set", "store.path=" + file, "serve", "--listen",
                                  "127.0.0.1:0"},
                                 test::isolated_quarry_options(home.path()));
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find(file) != std::string::npos);
    CHECK(test::read_file(file) == "my notes");
  }
  server_process srv{home,
                     {"--set", "server.auth_token=${QUARRY_TEST_TOKEN}"},
                     {{"QUARRY_TEST_TOKEN", "s3cret-token-for-tests"}}};
  auto none = call("GET", srv.url("/v1/research"));
  CHECK(none.status == 401);
  CHECK(none.header("www-authenticate").find("Bearer") == 0);
  CHECK(call("GET", srv.url("/v1/research"), {}, {"Authorization: Bearer wrong"}).status == 401);
  CHECK(call("GET", srv.url("/v1/research"), {}, {"Authorization: Bearer s3cret-token-for-tests"})
          .status
        == 200);
  CHECK(call("GET", srv.url("/healthz")).status == 200);
  CHECK(call("GET", srv.url("/")).status == 200);
  CHECK(call("GET", srv.url("/app.js")).status == 200);
  // No CORS header unless configured.
  CHECK(call("GET", srv.url("/healthz"), {}, {"Origin: http://evil.example"})
          .header("access-control-allow-origin")
          .empty());
}

TEST_CASE("serve: a session that quarry research runs on the same store is "
          "followed live until it ends") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(hanging_at(two_agent_script(), agent_marker)));
  auto env = llm_env(llm);
  server_process srv{home, {}, env};
  std::vector<std::string> argv{QUARRY_EXE,
                                "--plugin-dir",
                                QUARRY_PLUGIN_DIR,
                                "research",
                                "--no-clarify",
                                "--json",
                                "How do heat pumps cope with cold weather?"};
  test::child_process cli{argv, test::isolated_quarry_options(home.path(), env)};
  // The whole line: a child may write it in pieces.
  auto line = cli.wait_for_err_line("quarry: session q", std::chrono::seconds{60});
  REQUIRE(line);
  auto id = line->substr(line->find("quarry: session q") + 16, 17);
  wait_until([&] { return requests_with(llm, agent_marker) > 0; }, "an agent's request");
  CHECK(state_of(srv, id) == "running");
  std::vector<sse_event> seen;
  std::thread reader{[&] { seen = events(srv, id); }};
  // The stream follows the other process; it ends when that process does.
  std::this_thread::sleep_for(std::chrono::milliseconds{700});
  cli.signal(SIGTERM);
  auto ended = cli.wait(std::chrono::seconds{60});
  CHECK(ended.exit_code == 143);
  reader.join();
  REQUIRE(seen.size() > 3);
  for (size_t i = 0; i + 1 < seen.size(); ++i)
    CHECK(seen[i].id == std::to_string(i + 1));
  CHECK(seen.back().event == "end");
  CHECK(json::parse(seen.back().data)["state"] == "interrupted");
  // Everything the process stored reached the stream.
  auto got = call("GET", srv.url("/v1/research/" + id)).as_json();
  CHECK(got["last_seq"] == seen.size() - 1);
}

TEST_CASE("serve: a follow-up of a session whose stored question is not UTF-8 "
          "works and the server goes on") {
  test::temp_dir home;
  // The command line takes the bytes as given; they are repaired for the store.
  auto cli = test::run_process({QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "research",
                                "--no-clarify", "How loud is a heat pump \xff\xfe?"},
                               test::isolated_quarry_options(home.path()));
  CAPTURE(cli.err);
  REQUIRE(cli.exit_code == 0);
  auto id = cli.err.substr(cli.err.find("quarry: session q") + 16, 17);
  server_process srv{home, {}};
  auto got = call("GET", srv.url("/v1/research/" + id));
  REQUIRE(got.status == 200);
  CHECK(got.as_json()["question"].get<std::string>().find("\xef\xbf\xbd") != std::string::npos);
  auto follow = call("POST", srv.url("/v1/research/" + id + "/follow-up"),
                     R"({"question": "And at night?", "clarify": false})");
  CAPTURE(follow.body);
  REQUIRE(follow.status == 202);
  auto child = follow.as_json()["id"].get<std::string>();
  auto evs = events(srv, child);
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  // The manager is still there.
  CHECK(call("GET", srv.url("/healthz")).status == 200);
  CHECK(call("POST", srv.url("/v1/research"), R"({"question": "q", "clarify": false})").status
        == 202);
}

TEST_CASE("serve: a reflective research over the API streams its plan as a checklist and "
          "delivers a cited report") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto id = start(srv, {{"question", "Why does a heat pump's efficiency drop in cold weather?"},
                        {"clarify", false},
                        {"strategy", "reflective"},
                        {"depth", "light"}});
  auto evs = events(srv, id);
  REQUIRE(evs.size() > 5);
  std::vector<json> plans;
  size_t step_ends = 0;
  for (const auto& e : evs) {
    if (e.event != "packet")
      continue;
    auto p = json::parse(e.data)["obj"];
    if (p["type"] == "reflective_plan")
      plans.push_back(p["plan"]);
    if (p["type"] == "plan_step_end")
      ++step_ends;
  }
  REQUIRE_FALSE(plans.empty());
  CHECK(step_ends >= 1);
  for (const auto& s : plans.back()["steps"])
    CHECK((s["status"] == "completed" || s["status"] == "skipped"));
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  auto md = call("GET", srv.url("/v1/research/" + id + "/report"));
  CAPTURE(md.body);
  CHECK(md.status == 200);
  CHECK(md.body.find("## Sources") != std::string::npos);
  CHECK(md.body.find("[[1]](") != std::string::npos);
}

TEST_CASE("serve: the claims of a verified report, with their ranges and evidence") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto id = start(srv, {{"question", "How does a heat pump defrost its outdoor coil?"},
                        {"clarify", false},
                        {"verify", true}});
  auto evs = events(srv, id);
  REQUIRE_FALSE(evs.empty());
  REQUIRE(json::parse(evs.back().data)["state"] == "completed");
  size_t packets = 0;
  for (const auto& e : evs)
    if (e.event == "packet" && json::parse(e.data)["obj"]["type"] == "claim_verified")
      ++packets;
  auto r = call("GET", srv.url("/v1/research/" + id + "/claims"));
  CAPTURE(r.body.substr(0, 600));
  REQUIRE(r.status == 200);
  auto j = r.as_json();
  CHECK(j["id"] == id);
  REQUIRE(j["claims"].is_array());
  // One stored claim per claim packet.
  REQUIRE(j["claims"].size() == packets);
  REQUIRE(packets > 0);
  CHECK(j["summary"]["claims"] == packets);
  auto report = call("GET", srv.url("/v1/research/" + id + "/report?format=json")).as_json();
  auto body = report["report"].get<std::string>();
  for (const auto& c : j["claims"]) {
    CAPTURE(c.dump());
    // The judge role (offline: the extractive provider) judged them.
    CHECK(c["judge"] == "model");
    CHECK(c["snippet_only"] == false); // corpus passages are read text
    if (c["report_begin"].is_null())
      continue;
    auto b = c["report_begin"].get<size_t>();
    auto e = c["report_end"].get<size_t>();
    REQUIRE(e <= body.size());
    // The range holds the claim's words (its markers and emphasis aside).
    auto words = c["claim"].get<std::string>().substr(0, 12);
    auto span = body.substr(b, e - b);
    span.erase(std::remove(span.begin(), span.end(), '*'), span.end());
    CHECK(span.find(words) != std::string::npos);
  }
  // Unknown and malformed ids are not found.
  CHECK(call("GET", srv.url("/v1/research/q0123456789abcdef/claims")).status == 404);
  CHECK(call("GET", srv.url("/v1/research/nope/claims")).status == 404);
  // A research without verification has no claims, and says so with an
  // empty list.
  auto plain = start(srv, {{"question", "How loud is a heat pump?"}, {"clarify", false}});
  events(srv, plain);
  auto none = call("GET", srv.url("/v1/research/" + plain + "/claims")).as_json();
  CHECK(none["claims"].empty());
  CHECK(none["summary"]["claims"] == 0);
}

} // namespace serve_test
