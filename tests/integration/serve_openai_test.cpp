// The OpenAI-compatible endpoints of `quarry serve` (docs/api.md) through a
// real server and real HTTP: the models, completions answered at once and
// streamed as chat.completion.chunk events, the conversation before the
// question, OpenAI-shaped errors, a client that goes away, and the limit.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <regex>
#include <thread>

namespace serve_openai_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace quarry::test::serve;
using nlohmann::json;

namespace {

json completion_body(const std::string& question, bool stream,
                     const char* model = "quarry-research-fast") {
  json body{{"model", model},
            {"messages", json::array({{{"role", "user"}, {"content", question}}})},
            // Fields Quarry does not use are accepted and ignored.
            {"temperature", 0.2},
            {"n", 1},
            {"user", "tests"}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

std::string session_of(const std::string& completion_id) {
  std::smatch m;
  REQUIRE(std::regex_match(completion_id, m, std::regex{"chatcmpl-(q[0-9a-f]{16})"}));
  return m[1];
}

// The report body of a stored session (GET /v1/research/{id}/report).
json stored_report(const server_process& srv, const std::string& id) {
  auto r = call("GET", srv.url("/v1/research/" + id + "/report?format=json"));
  REQUIRE(r.status == 200);
  return r.as_json();
}

// `x` with its citation numbers taken out (`[[n]]` as `[[]]`): a stream
// carries the session's stored numbers, the research API the numbers its
// report shows (1, 2, ... in the order first cited).
std::string unnumbered(const std::string& x) {
  return std::regex_replace(x, std::regex{R"(\[\[\d+\]\])"}, "[[]]");
}

// The data of a streamed completion's events: JSON chunks, then [DONE].
struct streamed {
  std::vector<json> chunks;
  std::string last_data;
  std::string content;
  std::string reasoning;
  std::string finish_reason;
  std::string id;
  json usage;
};

streamed read_stream(const reply& r) {
  streamed out;
  auto evs = parse_sse(r.body);
  REQUIRE_FALSE(evs.empty());
  out.last_data = evs.back().data;
  for (size_t i = 0; i + 1 < evs.size(); ++i) {
    CHECK(evs[i].event.empty());
    CHECK(evs[i].id.empty());
    auto c = json::parse(evs[i].data, nullptr, false);
    REQUIRE(c.is_object());
    CHECK(c["object"] == "chat.completion.chunk");
    if (out.id.empty())
      out.id = c["id"];
    CHECK(c["id"] == out.id);
    if (c.contains("usage") && c["usage"].is_object())
      out.usage = c["usage"];
    if (!c["choices"].empty()) {
      const auto& choice = c["choices"][0];
      const auto& d = choice["delta"];
      if (d.contains("content") && d["content"].is_string())
        out.content += d["content"].get<std::string>();
      if (d.contains("reasoning_content"))
        out.reasoning += d["reasoning_content"].get<std::string>();
      if (choice["finish_reason"].is_string())
        out.finish_reason = choice["finish_reason"];
    }
    out.chunks.push_back(std::move(c));
  }
  return out;
}

// An OpenAI error: the status, and `{"error": {"message", "type", "param",
// "code"}}`.
void expect_error(const reply& r, long status, const char* type, const char* code,
                  const char* words, const char* param = nullptr) {
  CAPTURE(r.body);
  CHECK(r.status == status);
  auto j = json::parse(r.body, nullptr, false);
  REQUIRE(j.is_object());
  REQUIRE(j["error"].is_object());
  CHECK(j["error"]["type"] == type);
  CHECK(j["error"]["code"] == code);
  CHECK(j["error"]["message"].get<std::string>().find(words) != std::string::npos);
  CHECK(j["error"].contains("param"));
  if (param != nullptr)
    CHECK(j["error"]["param"] == param);
}

json scripted_research() {
  auto rules = json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Efficiency"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Why efficiency falls in the cold."}}}}),
                       1));
  rules.push_back(rule(orchestrator_marker, calls({{"generate_report", json::object()}})));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Cold air lowers efficiency [1]."}}));
  return rules;
}

size_t open_sessions(const server_process& srv) {
  return call("GET", srv.url("/v1/research")).as_json()["sessions"].size();
}

} // namespace

TEST_CASE("serve openai: the models are listed and a completion answers with the "
          "report, its citations and its Sources") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto models = call("GET", srv.url("/v1/models"));
  REQUIRE(models.status == 200);
  auto list = models.as_json();
  CHECK(list["object"] == "list");
  REQUIRE(list["data"].size() == 2);
  CHECK(list["data"][0]
        == json{
          {"id", "quarry-research"}, {"object", "model"}, {"created", 0}, {"owned_by", "quarry"}});
  CHECK(list["data"][1]["id"] == "quarry-research-fast");
  CHECK(call("GET", srv.url("/v1/models/quarry-research")).as_json()["id"] == "quarry-research");
  expect_error(call("GET", srv.url("/v1/models/gpt-4")), 404, "invalid_request_error",
               "model_not_found", "no such model");

  auto r = call("POST", srv.url("/v1/chat/completions"),
                completion_body("How loud is a heat pump?", false).dump(), {},
                std::chrono::seconds{120});
  CAPTURE(r.body.substr(0, 600));
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").find("application/json") == 0);
  auto c = r.as_json();
  CHECK(c["object"] == "chat.completion");
  CHECK(c["model"] == "quarry-research-fast");
  CHECK(c["created"].get<int64_t>() > 1'700'000'000);
  auto id = session_of(c["id"]);
  REQUIRE(c["choices"].size() == 1);
  CHECK(c["choices"][0]["index"] == 0);
  CHECK(c["choices"][0]["finish_reason"] == "stop");
  CHECK(c["choices"][0]["message"]["role"] == "assistant");
  // OpenAI's message shape: a refusal field, null when the model answered.
  CHECK(c["choices"][0]["message"].contains("refusal"));
  CHECK(c["choices"][0]["message"]["refusal"].is_null());
  auto content = c["choices"][0]["message"]["content"].get<std::string>();
  CHECK(std::regex_search(content, std::regex{R"(\[\[\d+\]\])"}));
  CHECK(content.find("\n## Sources\n\n1. ") != std::string::npos);
  auto u = c["usage"];
  CHECK(u["prompt_tokens"].get<int64_t>() > 0);
  CHECK(u["completion_tokens"].get<int64_t>() > 0);
  CHECK(u["total_tokens"]
        == u["prompt_tokens"].get<int64_t>() + u["completion_tokens"].get<int64_t>());

  // The completion is the stored session's report with its sources.
  auto report = stored_report(srv, id);
  auto body = report["report"].get<std::string>();
  REQUIRE_FALSE(body.empty());
  CHECK(unnumbered(content).rfind(unnumbered(body), 0) == 0);
  for (const auto& s : report["sources"])
    CHECK(content.find(". " + s["title"].get<std::string>()) != std::string::npos);

  // The session is stored like any other, with the fast model's options.
  auto sessions = call("GET", srv.url("/v1/research")).as_json()["sessions"];
  REQUIRE(sessions.size() == 1);
  CHECK(sessions[0]["id"] == id);
  CHECK(sessions[0]["state"] == "completed");
  CHECK(sessions[0]["question"] == "How loud is a heat pump?");
  auto got = call("GET", srv.url("/v1/research/" + id)).as_json();
  CHECK(got["options"]["clarify"] == false);
  CHECK(got["options"]["max_agents"] == 1);
  CHECK(got["options"]["max_cycles"] == 2);
  // The offline provider ran no model: the session has no tokens, while the
  // completion's usage counts its estimates (clients expect numbers there).
  CHECK(got["usage"]["calls"].get<int>() > 0);
  CHECK(got["usage"]["offline_calls"] == got["usage"]["calls"]);
  CHECK(got["usage"]["input_tokens"] == 0);

  // The configured model: the configured options.
  auto full = call("POST", srv.url("/v1/chat/completions"),
                   completion_body("What does a buffer tank do?", false, "quarry-research").dump(),
                   {}, std::chrono::seconds{120});
  REQUIRE(full.status == 200);
  auto full_id = session_of(full.as_json()["id"]);
  auto options = call("GET", srv.url("/v1/research/" + full_id)).as_json()["options"];
  CHECK_FALSE(options.contains("max_agents"));
  CHECK_FALSE(options.contains("max_cycles"));
}

TEST_CASE("serve openai: a streamed completion sends progress as reasoning, the "
          "report as content, the Sources, the stop, the usage and [DONE]") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto r = call("POST", srv.url("/v1/chat/completions"),
                completion_body("How loud is a heat pump?", true).dump(), {},
                std::chrono::seconds{120});
  CAPTURE(r.body.substr(0, 600));
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").find("text/event-stream") == 0);
  auto s = read_stream(r);
  CHECK(s.last_data == "[DONE]");
  REQUIRE(s.chunks.size() > 5);
  auto id = session_of(s.id);
  // The first chunk names the role; every chunk but the usage one has a choice.
  CHECK(s.chunks.front()["choices"][0]["delta"]["role"] == "assistant");
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
    CHECK(s.chunks[i]["choices"].size() == 1);
    CHECK(s.chunks[i]["model"] == "quarry-research-fast");
    CHECK(s.chunks[i]["usage"].is_null());
  }
  // The stop, then the usage chunk without choices.
  CHECK(s.finish_reason == "stop");
  CHECK(s.chunks[s.chunks.size() - 2]["choices"][0]["finish_reason"] == "stop");
  CHECK(s.chunks.back()["choices"].empty());
  CHECK(s.usage["total_tokens"].get<int64_t>() > 0);
  // Progress: the plan, the agent's task, its searches.
  CHECK(s.reasoning.find("Plan:") != std::string::npos);
  CHECK(s.reasoning.find("Research agent: ") != std::string::npos);
  CHECK(s.reasoning.find("- Searching: ") != std::string::npos);
  // The content is the report, then its sources.
  auto report = stored_report(srv, id);
  auto body = report["report"].get<std::string>();
  REQUIRE_FALSE(body.empty());
  CHECK(unnumbered(s.content).rfind(unnumbered(body), 0) == 0);
  auto tail = unnumbered(s.content).substr(unnumbered(body).size());
  CHECK(tail.rfind("\n", 0) == 0);
  CHECK(tail.find("## Sources\n\n1. ") != std::string::npos);
  CHECK(std::regex_search(s.content, std::regex{R"(\[\[\d+\]\])"}));
  // Answered at once, the same research gives the same content.
  auto again = call("POST", srv.url("/v1/chat/completions"),
                    completion_body("How loud is a heat pump?", false).dump(), {},
                    std::chrono::seconds{120});
  REQUIRE(again.status == 200);
  CHECK(again.as_json()["choices"][0]["message"]["content"] == s.content);
  // Both sessions are stored.
  CHECK(open_sessions(srv) == 2);
}

TEST_CASE("serve openai: earlier messages are the conversation the question "
          "follows, and the fast model runs one agent at a time for at most two cycles") {
  test::temp_dir home;
  test::fake_llm_server llm;
  // The orchestrator would send two agents every cycle and never report.
  auto rules = json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. Efficiency"}}));
  rules.push_back(
    rule(orchestrator_marker, calls({{"research_agent", {{"task", "Why efficiency falls."}}},
                                     {"research_agent", {{"task", "How defrost works."}}}})));
  for (auto& r : agent_rules())
    rules.push_back(r);
  rules.push_back(rule(final_marker, {{"text", "Cold air lowers efficiency [1]."}}));
  REQUIRE_FALSE(llm.script(rules));
  server_process srv{home, {}, llm_env(llm)};
  json body{{"model", "quarry-research-fast"},
            {"messages",
             {{{"role", "system"}, {"content", "You are a helpful assistant."}},
              {{"role", "user"}, {"content", "Tell me about heat pumps."}},
              {{"role", "assistant"}, {"content", "Heat pumps move heat (an earlier answer)."}},
              {{"role", "user"},
               {"content", json::array({{{"type", "text"}, {"text", "And in the cold?"}}})}}}}};
  auto r = call("POST", srv.url("/v1/chat/completions"), body.dump(), {},
                std::chrono::seconds{120});
  CAPTURE(r.body.substr(0, 600));
  REQUIRE(r.status == 200);
  auto c = r.as_json();
  auto content = c["choices"][0]["message"]["content"].get<std::string>();
  CHECK(content.find("Cold air lowers efficiency") != std::string::npos);
  CHECK(content.find("## Sources") != std::string::npos);
  auto id = session_of(c["id"]);
  CHECK(call("GET", srv.url("/v1/research/" + id)).as_json()["question"] == "And in the cold?");
  // The models saw the earlier messages before the question.
  auto plan = requests_of(llm, plan_marker);
  REQUIRE_FALSE(plan.empty());
  auto seen = plan.front().dump();
  CHECK(seen.find("an earlier answer") != std::string::npos);
  CHECK(seen.find("Tell me about heat pumps.") != std::string::npos);
  CHECK(seen.find("And in the cold?") != std::string::npos);
  // At most two orchestrator cycles, one agent each.
  auto cycles = requests_with(llm, orchestrator_marker);
  CHECK(cycles >= 1);
  CHECK(cycles <= 2);
  auto orchestrator = requests_of(llm, orchestrator_marker);
  REQUIRE_FALSE(orchestrator.empty());
  CHECK(orchestrator.front()["messages"][0]["content"].get<std::string>().find(
          "never start more than 1 agents at once")
        != std::string::npos);
  CHECK(c["usage"]["total_tokens"].get<int64_t>() > 0);
}

TEST_CASE("serve openai: bad bodies get OpenAI errors with a 4xx status and "
          "start no session") {
  test::temp_dir home;
  server_process srv{home, {}};
  auto post = [&](const std::string& body) {
    return call("POST", srv.url("/v1/chat/completions"), body);
  };
  auto user = json::array({{{"role", "user"}, {"content", "q"}}});
  auto with = [&](json fields) {
    json b{{"model", "quarry-research"}, {"messages", user}};
    for (auto it = fields.begin(); it != fields.end(); ++it)
      b[it.key()] = it.value();
    return post(b.dump());
  };
  expect_error(post("{not json"), 400, "invalid_request_error", "invalid_json", "not JSON");
  expect_error(post("[1]"), 400, "invalid_request_error", "invalid_type", "object");
  expect_error(post(R"({"model": "quarry-research"})"), 400, "invalid_request_error",
               "missing_required_parameter", "messages", "messages");
  expect_error(post(json{{"messages", user}}.dump()), 400, "invalid_request_error",
               "missing_required_parameter", "model", "model");
  expect_error(with({{"model", "gpt-4o"}}), 404, "invalid_request_error", "model_not_found",
               "gpt-4o", "model");
  expect_error(with({{"model", 4}}), 400, "invalid_request_error", "invalid_type", "model",
               "model");
  expect_error(with({{"messages", "hello"}}), 400, "invalid_request_error", "invalid_type",
               "messages", "messages");
  expect_error(with({{"messages", json::array()}}), 400, "invalid_request_error", "invalid_type",
               "non-empty", "messages");
  expect_error(with({{"messages", json::array({{{"role", "system"}, {"content", "x"}}})}}), 400,
               "invalid_request_error", "invalid_value", "no user message", "messages");
  expect_error(with({{"messages", json::array({{{"role", "user"}, {"content", "   "}}})}}), 400,
               "invalid_request_error", "invalid_value", "empty", "messages");
  expect_error(with({{"messages", json::array({{{"role", "user"}, {"content", 7}}})}}), 400,
               "invalid_request_error", "invalid_type", "messages[0].content",
               "messages[0].content");
  expect_error(with({{"messages", json::array({{{"role", "user"}, {"content", nullptr}}})}}), 400,
               "invalid_request_error", "invalid_type", "messages[0].content");
  expect_error(with({{"messages", json::array({{{"role", "user"}}})}}), 400,
               "invalid_request_error", "missing_required_parameter", "messages[0].content");
  expect_error(with({{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}), 400,
               "invalid_request_error", "invalid_value", "unknown role", "messages[0].role");
  expect_error(with({{"messages", json::array({"just text"})}}), 400, "invalid_request_error",
               "invalid_type", "messages[0]");
  expect_error(
    with(
      {{"messages",
        json::array({{{"role", "user"},
                      {"content", json::array({{{"type", "image_url"}, {"image_url", "x"}}})}}})}}),
    400, "invalid_request_error", "invalid_value", "only text parts", "messages[0].content[0]");
  expect_error(
    with({{"messages", json::array({{{"role", "user"}, {"content", std::string(20'001, 'x')}}})}}),
    400, "invalid_request_error", "invalid_value", "20000");
  expect_error(with({{"stream", "yes"}}), 400, "invalid_request_error", "invalid_type", "stream",
               "stream");
  expect_error(with({{"stream_options", {{"include_usage", 1}}}}), 400, "invalid_request_error",
               "invalid_type", "include_usage");
  expect_error(call("POST", srv.url("/v1/chat/completions"), "model=x",
                    {"Content-Type: application/x-www-form-urlencoded"}),
               415, "invalid_request_error", "unsupported_media_type", "JSON");
  CHECK(call("GET", srv.url("/v1/chat/completions")).status == 405);
  // Nothing was started.
  CHECK(open_sessions(srv) == 0);
  CHECK(call("GET", srv.url("/healthz")).status == 200);
}

TEST_CASE("serve openai: a streaming client that goes away cancels its session, "
          "and a busy server answers 429") {
  test::temp_dir home;
  test::fake_llm_server llm;
  json hang{{"match", {{"system_contains", agent_marker}}},
            {"respond", {{"text", "never"}}},
            {"stall_after_bytes", 0}};
  auto rules = json::array({hang});
  for (auto& r : scripted_research())
    rules.push_back(r);
  REQUIRE_FALSE(llm.script(rules));
  server_process srv{home, {"--set", "server.max_running_sessions=1"}, llm_env(llm)};

  // A client that reads the stream until told to go away.
  std::atomic<bool> leave{false};
  std::atomic<size_t> received{0};
  std::thread client{[&] {
    struct io {
      std::atomic<bool>* leave;
      std::atomic<size_t>* received;
    } state{&leave, &received};
    auto* h = curl_easy_init();
    auto body = completion_body("How do heat pumps cope with cold weather?", true).dump();
    struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, srv.url("/v1/chat/completions").c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 120'000L);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(
      h, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void* p) -> size_t {
        static_cast<io*>(p)->received->fetch_add(size * n);
        return size * n;
      });
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &state);
    curl_easy_setopt(
      h, CURLOPT_XFERINFOFUNCTION,
      +[](void* p, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
        return static_cast<io*>(p)->leave->load() ? 1 : 0;
      });
    curl_easy_perform(h);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
  }};
  wait_until([&] { return requests_with(llm, agent_marker) > 0 && received.load() > 0; },
             "an agent's request and the first chunks");
  auto sessions = call("GET", srv.url("/v1/research")).as_json()["sessions"];
  REQUIRE(sessions.size() == 1);
  auto id = sessions[0]["id"].get<std::string>();
  CHECK(sessions[0]["state"] == "running");

  // The limit: one session at a time.
  auto busy = call("POST", srv.url("/v1/chat/completions"),
                   completion_body("another question", false).dump());
  expect_error(busy, 429, "rate_limit_error", "busy", "too many sessions");
  CHECK(busy.header("retry-after") == "5");

  leave = true;
  client.join();
  wait_until([&] { return state_of(srv, id) == "cancelled"; }, "the session to be cancelled");
  CHECK(call("GET", srv.url("/healthz")).as_json()["sessions_running"] == 0);
}

TEST_CASE("serve openai: a report the output limit cut ends with finish_reason length, "
          "and the API says truncated") {
  test::temp_dir home;
  test::fake_llm_server llm;
  auto rules = scripted_research();
  rules.erase(rules.end() - 1);
  rules.push_back(
    rule(final_marker, {{"text", "Cold air lowers efficiency [1] and the unit must defr"},
                        {"finish_reason", "length"}}));
  REQUIRE_FALSE(llm.script(rules));
  server_process srv{home, {"--set", "research.report_continuations=0"}, llm_env(llm)};
  auto r = call(
    "POST", srv.url("/v1/chat/completions"),
    completion_body("How does cold air change efficiency?", false, "quarry-research").dump(), {},
    std::chrono::seconds{120});
  CAPTURE(r.body.substr(0, 600));
  REQUIRE(r.status == 200);
  auto c = r.as_json();
  CHECK(c["choices"][0]["finish_reason"] == "length");
  auto content = c["choices"][0]["message"]["content"].get<std::string>();
  CHECK(content.find("this report is incomplete") != std::string::npos);
  auto id = session_of(c["id"]);
  CHECK(call("GET", srv.url("/v1/research/" + id)).as_json()["truncated"] == true);
  CHECK(stored_report(srv, id)["truncated"] == true);
  // A whole report is not truncated.
  REQUIRE_FALSE(llm.script(scripted_research()));
  auto whole = call(
    "POST", srv.url("/v1/chat/completions"),
    completion_body("How does cold air change efficiency?", false, "quarry-research").dump(), {},
    std::chrono::seconds{120});
  REQUIRE(whole.status == 200);
  auto w = whole.as_json();
  CHECK(w["choices"][0]["finish_reason"] == "stop");
  CHECK(call("GET", srv.url("/v1/research/" + session_of(w["id"]))).as_json()["truncated"]
        == false);
}

} // namespace serve_openai_test
