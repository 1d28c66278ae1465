// The `openai` plugin against the models people run: reasoning written
// inside the answer (<think> tags, split anywhere), reasoning that must go
// back to the server (DeepSeek's reasoning_content), empty answers, absent
// and `error` finish reasons, and error causes inside gateway wrappers. The
// real provider class, the host's curl client and a real HTTP server on
// 127.0.0.1; the field cases of ../shared/field-cases are served as they are.

#include "openai_provider.hpp"
#include "openai_stream.hpp"

#include "quarry/sdk/reasoning_tags.hpp"
#include "support/chat_recorder.hpp"
#include "support/http_server.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace openai_reasoning_test {

namespace {

namespace sdk = quarry::sdk;
namespace openai = quarry::plugins::llm_openai;
using nlohmann::json;
using quarry::test::chat_recorder;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;
using quarry::test::test_host;
using sdk::errc;

std::string field_case(const std::string& rel) {
  auto path = std::string{QUARRY_FIXTURES_DIR} + "/../field-cases/" + rel;
  std::ifstream in{path, std::ios::binary};
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

sdk::chat_request ask(const std::string& text = "What is a heat pump's SCOP?") {
  sdk::chat_request req;
  sdk::chat_message m;
  m.author = sdk::role::user;
  m.content = text;
  req.messages.push_back(std::move(m));
  return req;
}

/// A stream of `pieces` as content deltas, then `finish` (none if empty),
/// usage and [DONE].
std::string content_stream(const std::vector<std::string>& pieces,
                           const std::string& finish = "stop",
                           const std::string& model = "qwen3:8b") {
  std::string out;
  for (const auto& p : pieces)
    out += "data: "
           + json{{"model", model}, {"choices", {{{"index", 0}, {"delta", {{"content", p}}}}}}}
               .dump()
           + "\n\n";
  if (!finish.empty())
    out += "data: "
           + json{{"model", model},
                  {"choices",
                   {{{"index", 0}, {"delta", json::object()}, {"finish_reason", finish}}}}}
               .dump()
           + "\n\n";
  out += "data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 5, "
         "\"completion_tokens\": 7}}\n\ndata: [DONE]\n\n";
  return out;
}

/// Serves `body` as an event stream in pieces of `size` bytes.
response_plan sse(const std::string& body, size_t size = 0) {
  response_plan plan{200};
  plan.header("Content-Type", "text/event-stream");
  plan.chunked();
  if (size == 0)
    size = body.size();
  for (size_t i = 0; i < body.size(); i += size)
    plan.send(body.substr(i, size));
  return plan;
}

struct env {
  http_server server;
  test_host host;

  std::unique_ptr<openai::provider> make(const std::string& model = "gpt-4o",
                                         json extra = json::object()) {
    json cfg{{"model", model}, {"api_key", "sk-test"}, {"base_url", server.url("/v1")}};
    for (auto& [k, v] : extra.items())
      cfg[k] = v;
    return std::make_unique<openai::provider>(host, openai::parse_config(cfg));
  }

  std::shared_ptr<chat_recorder> run(openai::provider& llm, sdk::chat_request req = ask()) {
    auto rec = std::make_shared<chat_recorder>();
    llm.chat(std::move(req), rec);
    REQUIRE(rec->wait());
    return rec;
  }

  void serve(std::function<response_plan()> plan) {
    server.route("POST", "/v1/chat/completions", [plan](const request&) { return plan(); });
  }
};

/// Splits text through a fresh splitter in the given pieces.
struct split_result {
  std::string text;
  std::string reasoning;
  bool found = false;
};

split_result split(const std::vector<std::string>& pieces, bool opener_in_prompt = false,
                   std::vector<sdk::reasoning_tag> tags = sdk::default_reasoning_tags()) {
  sdk::reasoning_tag_splitter s{std::move(tags), opener_in_prompt};
  split_result out;
  for (const auto& p : pieces) {
    auto o = s.feed(p);
    out.text += o.text;
    out.reasoning += o.reasoning;
  }
  auto o = s.finish();
  if (o.moved_to_text) {
    out.reasoning.clear();
    out.text.clear();
  }
  out.text += o.text;
  out.reasoning += o.reasoning;
  if (o.split_late) {
    out.text = s.text_total();
    out.reasoning = s.reasoning_total();
  }
  out.found = s.found();
  CHECK(out.text == s.text_total());
  CHECK(out.reasoning == s.reasoning_total());
  return out;
}

} // namespace

// -- the splitter ---------------------------------------------------------------

TEST_CASE("reasoning tags: a thought split at every byte position (two and three "
          "pieces) never reaches the answer") {
  for (std::string open : {"<think>", "<thinking>", "<THINK>"}) {
    auto close = "</" + open.substr(1);
    auto whole = "\n" + open + "\nSCOP is the yearly average.\n" + close
                 + "\n\nA seasonal COP of about 3.2.";
    for (size_t i = 0; i <= whole.size(); ++i) {
      auto r = split({whole.substr(0, i), whole.substr(i)});
      CAPTURE(i);
      CHECK(r.text == "A seasonal COP of about 3.2.");
      CHECK(r.reasoning == "\nSCOP is the yearly average.\n");
      CHECK(r.found);
      for (size_t j = i; j <= whole.size(); j += 7) {
        auto r3 = split({whole.substr(0, i), whole.substr(i, j - i), whole.substr(j)});
        CHECK(r3.text == "A seasonal COP of about 3.2.");
      }
    }
    // One byte at a time.
    std::vector<std::string> bytes;
    for (auto c : whole)
      bytes.emplace_back(1, c);
    auto r = split(bytes);
    CHECK(r.text == "A seasonal COP of about 3.2.");
    CHECK(r.reasoning == "\nSCOP is the yearly average.\n");
  }
}

TEST_CASE("reasoning tags: text without a leading block, tags later in the answer, "
          "other tags, no tags") {
  auto plain = split({"A heat pump ", "moves heat."});
  CHECK(plain.text == "A heat pump moves heat.");
  CHECK(plain.reasoning.empty());
  CHECK_FALSE(plain.found);
  // A tag inside the answer is the answer's (a model may write about tags).
  auto later = split({"Models write <think>", " blocks</think> first."});
  CHECK(later.text == "Models write <think> blocks</think> first.");
  CHECK(later.reasoning.empty());
  // A text that only starts like a tag.
  auto lt = split({"<", "b>bold</b>"});
  CHECK(lt.text == "<b>bold</b>");
  auto lone = split({"<th"});
  CHECK(lone.text == "<th");
  // Named tags.
  auto named = split({"<rea", "son>why</reason>Because."}, false, {{"<reason>", "</reason>"}});
  CHECK(named.text == "Because.");
  CHECK(named.reasoning == "why");
  auto off = split({"<think>x</think>y"}, false, {});
  CHECK(off.text == "<think>x</think>y");
  // An opener that never closes (the output limit cut the thought): all of
  // it is reasoning, and there is no answer.
  auto open = split({"<think>still thinking"});
  CHECK(open.text.empty());
  CHECK(open.reasoning == "still thinking");
}

TEST_CASE("reasoning tags: the opener in the prompt — a leading orphan closing tag") {
  // Told: the text before the closer streams as reasoning.
  auto told = split({"The user asks", " about SCOP.\n</th", "ink>\n\nAbout 3.2."}, true);
  CHECK(told.text == "About 3.2.");
  CHECK(told.reasoning == "The user asks about SCOP.\n");
  // Told, but no closer came: all of it was the answer.
  auto never = split({"About ", "3.2."}, true);
  CHECK(never.text == "About 3.2.");
  CHECK(never.reasoning.empty());
  // Not told: found at the end, the result is split all the same.
  auto late = split({"The user asks about SCOP.", "</think>\n\nAbout 3.2."});
  CHECK(late.text == "About 3.2.");
  CHECK(late.reasoning == "The user asks about SCOP.");
  // An empty thought: the answer starts with the closer.
  auto empty = split({"</think>\n\nAbout 3.2."});
  CHECK(empty.text == "About 3.2.");
  CHECK(empty.found);
}

// -- through the plugin ---------------------------------------------------------

TEST_CASE_FIXTURE(env, "field case think-split: the thought goes to the reasoning "
                       "channel, the answer is the sentence after </think>, whole and "
                       "split at every size") {
  auto body = field_case("think-split/stream.sse");
  auto answer = std::string{"A typical air-source heat pump reaches a seasonal COP of about "
                            "3.2 in a mild climate."};
  for (std::string model : {"deepseek-r1:14b", "gpt-4o"}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}}) {
      CAPTURE(model);
      CAPTURE(size);
      serve([&] { return sse(body, size); });
      auto llm = make(model);
      auto rec = run(*llm);
      REQUIRE_FALSE(rec->failure);
      REQUIRE(rec->result);
      CHECK(rec->result->text == answer);
      CHECK(rec->text == answer);
      CHECK(rec->result->reasoning.find("SCOP is the yearly average") != std::string::npos);
      CHECK(rec->reasoning.find("SCOP is the yearly average") != std::string::npos);
      for (const auto* s : {&rec->text, &rec->result->text})
        for (auto bad : {"<th", "think>", "SCOP is the yearly"})
          CHECK(s->find(bad) == std::string::npos);
      CHECK(rec->result->finish == sdk::finish_reason::stop);
    }
  }
}

TEST_CASE_FIXTURE(env, "reasoning tags: named tags, turned off, and a template that "
                       "puts the opener in the prompt (learned from the first answer)") {
  serve([] { return sse(content_stream({"<reason>", "why</reason>", "Because."})); });
  auto named = make("gpt-4o", {{"reasoning_tags", json::array({{"<reason>", "</reason>"}})}});
  auto r1 = run(*named);
  REQUIRE(r1->result);
  CHECK(r1->result->text == "Because.");
  CHECK(r1->result->reasoning == "why");

  serve([] { return sse(content_stream({"<think>x</think>", "y"})); });
  auto off = make("gpt-4o", {{"reasoning_tags", false}});
  auto r2 = run(*off);
  REQUIRE(r2->result);
  CHECK(r2->result->text == "<think>x</think>y");

  // The opener was in the prompt: the first answer is split at its end, the
  // next ones stream their thought as reasoning from the start.
  serve([] { return sse(content_stream({"The user wants SCOP.", "</think>\n\nAbout 3.2."})); });
  auto llm = make("mystery-model");
  auto first = run(*llm);
  REQUIRE(first->result);
  CHECK(first->result->text == "About 3.2.");
  CHECK(first->result->reasoning == "The user wants SCOP.");
  auto second = run(*llm);
  REQUIRE(second->result);
  CHECK(second->result->text == "About 3.2.");
  CHECK(second->text == "About 3.2.");
  CHECK(second->reasoning == "The user wants SCOP.");

  CHECK_THROWS_WITH_AS(openai::parse_config(json{{"model", "m"}, {"reasoning_tags", "yes"}}),
                       doctest::Contains("reasoning_tags"), std::invalid_argument);
  CHECK_THROWS_AS(
    openai::parse_config(json{{"model", "m"}, {"reasoning_tags", json::array({{"<a b>", "x"}})}}),
    std::invalid_argument);
}

TEST_CASE_FIXTURE(env, "field case empty-choices-stream: one empty_response error, "
                       "the same for a streamed and a JSON answer; retryable") {
  serve([] { return sse(field_case("empty-choices-stream/stream.sse")); });
  auto llm = make("gemini-2.5-flash");
  auto streamed = run(*llm);
  REQUIRE(streamed->failure);
  CHECK(streamed->failure->code == errc::empty_response);
  CHECK(streamed->failure->retryable());
  CHECK(streamed->failure->message.find("empty answer") != std::string::npos);
  CHECK(streamed->failure->message.find("no choice") != std::string::npos);
  CHECK_FALSE(streamed->result);

  serve([] {
    return response_plan::json(200, R"({"id":"x","object":"chat.completion","choices":[],)"
                                    R"("usage":{"prompt_tokens":354,"completion_tokens":0}})");
  });
  auto whole = run(*llm);
  REQUIRE(whole->failure);
  CHECK(whole->failure->code == errc::empty_response);
  CHECK(whole->failure->message == streamed->failure->message);

  // A choice with empty content and a stop, a thought and nothing after it,
  // and white space only: empty all the same.
  for (auto pieces :
       std::vector<std::vector<std::string>>{{""}, {"<think>only a thought</think>"}, {"  \n "}}) {
    serve([pieces] { return sse(content_stream(pieces)); });
    auto rec = run(*llm);
    REQUIRE(rec->failure);
    CHECK(rec->failure->code == errc::empty_response);
  }
  // A JSON answer with a message whose content is null.
  serve([] {
    return response_plan::json(200, R"({"choices":[{"index":0,"message":{"role":"assistant",)"
                                    R"("content":null},"finish_reason":"stop"}]})");
  });
  auto null_content = run(*llm);
  REQUIRE(null_content->failure);
  CHECK(null_content->failure->code == errc::empty_response);
}

TEST_CASE_FIXTURE(env, "finish reasons: absent is unknown (never stop), length and "
                       "content_filter are kept, error fails the call") {
  serve([] { return sse(content_stream({"Half an ans"}, "")); });
  auto llm = make();
  auto none = run(*llm);
  REQUIRE(none->result);
  CHECK(none->result->finish == sdk::finish_reason::unknown);
  CHECK(none->result->text == "Half an ans");

  serve([] { return sse(content_stream({"Half an ans"}, "length")); });
  auto cut = run(*llm);
  REQUIRE(cut->result);
  CHECK(cut->result->finish == sdk::finish_reason::length);

  // A thought cut by the limit: no answer, but the limit explains it.
  serve([] { return sse(content_stream({"<think>a long thou"}, "length")); });
  auto cut_thought = run(*llm);
  REQUIRE(cut_thought->result);
  CHECK(cut_thought->result->finish == sdk::finish_reason::length);
  CHECK(cut_thought->result->text.empty());

  serve([] { return sse(content_stream({"Part"}, "error")); });
  auto failed = run(*llm);
  REQUIRE(failed->failure);
  CHECK(failed->failure->code == errc::server_error);
  CHECK(failed->failure->message.find("finish reason \"error\"") != std::string::npos);

  serve([] {
    return response_plan::json(200, R"({"choices":[{"index":0,"message":{"role":"assistant",)"
                                    R"("content":"Whole."}}]})");
  });
  auto json_none = run(*llm);
  REQUIRE(json_none->result);
  CHECK(json_none->result->finish == sdk::finish_reason::unknown);
}

TEST_CASE_FIXTURE(env, "field case gateway-context-overflow: the cause in the message "
                       "wins over the relayed 502, streamed or not; other gateway shapes") {
  auto body = field_case("gateway-context-overflow/body.json");
  auto llm = make("openrouter/auto");
  serve([body] { return response_plan::json(200, body); });
  auto whole = run(*llm);
  REQUIRE(whole->failure);
  CHECK(whole->failure->code == errc::context_too_long);
  CHECK_FALSE(whole->failure->retryable());
  CHECK(whole->failure->message.find("maximum context length is 32768 tokens")
        != std::string::npos);
  // The same body as an event of a stream.
  serve([body] { return sse("data: " + json::parse(body).dump() + "\n\n"); });
  auto streamed = run(*llm);
  REQUIRE(streamed->failure);
  CHECK(streamed->failure->code == errc::context_too_long);

  struct shape {
    int status;
    std::string body;
    errc expected;
  };
  std::vector<shape> shapes{
    // LiteLLM's proxy: a 500 around the upstream's context error.
    {500,
     R"({"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: )"
     R"(This model's maximum context length is 8192 tokens.","type":null,"param":null,)"
     R"("code":"500"}})",
     errc::context_too_long},
    // OpenRouter: credits, inside a 200 with a relayed 402.
    {200,
     R"({"error":{"message":"Insufficient credits. Add more using https://openrouter.ai",)"
     R"("code":402}})",
     errc::quota},
    // A gateway's 502 around a model that does not exist.
    {502, R"({"error":{"message":"Upstream: The model `qwen9` does not exist","code":502}})",
     errc::not_found},
    // Azure's shape: 400 with code context_length_exceeded.
    {400, R"({"error":{"code":"context_length_exceeded","message":"too long"}})",
     errc::context_too_long},
    // An auth error relayed as 503 by a proxy.
    {503, R"({"error":{"message":"Incorrect API key provided: sk-***","type":"upstream"}})",
     errc::auth},
    // A 502 without a stated cause stays a retryable server error.
    {502, R"({"error":{"message":"Bad gateway","code":502}})", errc::server_error},
  };
  for (const auto& s : shapes) {
    CAPTURE(s.body);
    serve([s] { return response_plan::json(s.status, s.body); });
    auto rec = run(*llm);
    REQUIRE(rec->failure);
    CHECK(rec->failure->code == s.expected);
    CHECK(rec->failure->retryable() == sdk::is_retryable(s.expected));
  }
}

// A DeepSeek-style policy server: every answer streams reasoning_content
// first; a history with an assistant tool-call turn that lacks its
// reasoning_content is refused with HTTP 400.
struct deepseek_policy {
  std::mutex mtx;
  std::vector<json> bodies;
  int refused = 0;

  response_plan answer(const request& req) {
    auto body = json::parse(req.body);
    std::lock_guard<std::mutex> guard{mtx};
    bodies.push_back(body);
    for (const auto& m : body["messages"])
      if (m["role"] == "assistant" && m.contains("tool_calls")
          && !m.contains("reasoning_content")) {
        ++refused;
        return response_plan::json(
          400, R"({"error":{"message":"The reasoning_content of earlier assistant turns )"
               R"(with tool calls has to be sent back","type":"invalid_request_error"}})");
      }
    bool after_tool = body["messages"].back()["role"] == "tool";
    std::string out;
    auto chunk = [&](const json& delta, const json& finish = nullptr) {
      out += "data: "
             + json{{"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}}
                 .dump()
             + "\n\n";
    };
    chunk({{"reasoning_content", after_tool ? "The search found it." : "I should search."}});
    if (after_tool) {
      chunk({{"content", "SCOP is about 3.2."}}, "stop");
    } else {
      chunk({{"tool_calls",
              {{{"index", 0},
                {"id", "call_1"},
                {"type", "function"},
                {"function", {{"name", "web_search"}, {"arguments", "{\"q\":\"scop\"}"}}}}}}},
            "tool_calls");
    }
    out += "data: [DONE]\n\n";
    return sse(out);
  }
};

sdk::chat_request after_tool_round(const sdk::chat_result& first) {
  auto req = ask();
  sdk::chat_message said;
  said.author = sdk::role::assistant;
  said.tool_calls = first.tool_calls;
  said.reasoning = first.reasoning;
  req.messages.push_back(said);
  sdk::chat_message result;
  result.author = sdk::role::tool;
  result.tool_call_id = first.tool_calls.at(0).id;
  result.tool_name = "web_search";
  result.content = "SCOP 3.2 [1]";
  req.messages.push_back(result);
  return req;
}

TEST_CASE_FIXTURE(env, "reasoning round trip: DeepSeek's reasoning_content goes back with "
                       "tool-call turns (known by name, or learned from the server's 400)") {
  deepseek_policy policy;
  server.route("POST", "/v1/chat/completions",
               [&policy](const request& r) { return policy.answer(r); });
  SUBCASE("known by name") {
    auto llm = make("deepseek-reasoner");
    auto first = run(*llm);
    REQUIRE(first->result);
    REQUIRE(first->result->tool_calls.size() == 1);
    CHECK(first->result->reasoning == "I should search.");
    auto second = run(*llm, after_tool_round(*first->result));
    REQUIRE(second->result);
    CHECK(second->result->text == "SCOP is about 3.2.");
    CHECK(policy.refused == 0);
    CHECK(policy.bodies.back()["messages"][1]["reasoning_content"] == "I should search.");
  }
  SUBCASE("learned from the server") {
    auto llm = make("house-reasoner");
    auto first = run(*llm);
    REQUIRE(first->result);
    auto refused = run(*llm, after_tool_round(*first->result));
    REQUIRE(refused->failure);
    CHECK(refused->failure->code == errc::bad_request);
    CHECK(refused->failure->retryable()); // one more try, with the reasoning
    auto again = run(*llm, after_tool_round(*first->result));
    REQUIRE(again->result);
    CHECK(again->result->text == "SCOP is about 3.2.");
    CHECK(policy.refused == 1);
  }
  SUBCASE("turned off") {
    auto llm = make("deepseek-reasoner", {{"reasoning_round_trip", false}});
    auto first = run(*llm);
    REQUIRE(first->result);
    auto refused = run(*llm, after_tool_round(*first->result));
    REQUIRE(refused->failure);
    CHECK_FALSE(refused->failure->retryable());
  }
  // Never sent on other turns, nor by default to other servers.
  sdk::chat_result said;
  said.reasoning = "r";
  said.tool_calls.push_back(sdk::tool_call{"c1", "web_search", "{}"});
  auto plain = openai::request_body(openai::parse_config(json{{"model", "gpt-4o"}}),
                                    after_tool_round(said));
  CHECK_FALSE(plain["messages"][1].contains("reasoning_content"));
  CHECK(openai::round_trip_by_default("https://api.deepseek.com/v1", "x"));
  CHECK(openai::round_trip_by_default("http://localhost:1234/v1", "deepseek-chat"));
  CHECK_FALSE(openai::round_trip_by_default("https://api.openai.com/v1", "gpt-4o"));
}

} // namespace openai_reasoning_test
