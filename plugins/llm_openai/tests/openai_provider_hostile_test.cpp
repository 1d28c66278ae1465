// The `openai` provider against misbehaving servers (the real provider, the
// host's curl client and the test HTTP server): an HTML page served with
// status 200, streams that finish without [DONE] and keep the connection
// open, and bytes that are not UTF-8.

#include "openai_provider.hpp"

#include "quarry/host/http_client.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/text.hpp"
#include "support/chat_recorder.hpp"
#include "support/http_server.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

namespace openai_provider_hostile_test {

using namespace std::chrono_literals;

namespace {

namespace sdk = quarry::sdk;
namespace openai = quarry::plugins::llm_openai;
using nlohmann::json;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;

// HTTP settings whose client gives up on a silent connection after `stall`
// (the provider's own requests set no stall timeout).
quarry::core::http_settings stall_after(std::chrono::milliseconds stall) {
  quarry::core::http_settings s;
  s.stall_timeout = stall;
  return s;
}

using quarry::test::chat_recorder;

sdk::chat_request simple_request() {
  sdk::chat_request req;
  req.messages.push_back({sdk::role::user, "Hello?", {}, {}, {}, {}, {}});
  return req;
}

std::shared_ptr<chat_recorder> run(sdk::host_context& host, http_server& server) {
  auto llm = openai::provider{
    host, openai::parse_config({{"model", "gpt-4o"}, {"base_url", server.url("/v1")}})};
  auto rec = std::make_shared<chat_recorder>();
  llm.chat(simple_request(), rec);
  REQUIRE(rec->wait());
  return rec;
}

const std::string text_chunk
  = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi there\"}}]}\n\n";
const std::string finish_chunk
  = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
const std::string usage_chunk
  = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n";

} // namespace

TEST_CASE("openai: an HTML page with status 200 is not an event stream and "
          "not retryable") {
  http_server server;
  server.route("POST", "/v1/chat/completions", [](const request&) {
    return response_plan::text(200,
                               "<!DOCTYPE html>\n<html><head><title>Proxy login"
                               "</title></head>\n<body><h1>Please log in</h1>"
                               "</body></html>\n",
                               "text/html; charset=utf-8");
  });
  quarry::test::test_host host;
  auto rec = run(host, server);
  REQUIRE(rec->failure.has_value());
  CHECK(rec->finals == 1);
  CHECK(rec->failure->code == sdk::errc::invalid_response);
  CHECK_FALSE(rec->failure->retryable());
  CHECK(rec->failure->message.find("not an event stream") != std::string::npos);
  CHECK(rec->failure->message.find("Proxy login") != std::string::npos);
  host.shutdown();
}

TEST_CASE("openai: a stream with finish reason and usage but no [DONE] is "
          "accepted while the connection stays open") {
  http_server server;
  server.route("POST", "/v1/chat/completions", [](const request&) {
    response_plan plan{200};
    plan.header("Content-Type", "text/event-stream");
    plan.chunked();
    plan.send(text_chunk).send(finish_chunk).send(usage_chunk).stall();
    return plan;
  });
  // The HTTP client would give up only after an hour: the answer must come
  // from the stream itself.
  quarry::test::test_host host{stall_after(std::chrono::hours{1})};
  auto rec = run(host, server);
  REQUIRE_MESSAGE(rec->result.has_value(), (rec->failure ? rec->failure->message : std::string{}));
  CHECK(rec->result->text == "Hi there");
  CHECK(rec->result->finish == sdk::finish_reason::stop);
  CHECK(rec->result->usage.output_tokens == 2);
}

TEST_CASE("openai: a stream with a finish reason that then stalls is accepted "
          "when the connection gives up") {
  http_server server;
  server.route("POST", "/v1/chat/completions", [](const request&) {
    response_plan plan{200};
    plan.header("Content-Type", "text/event-stream");
    plan.chunked();
    plan.send(text_chunk).send(finish_chunk).stall();
    return plan;
  });
  quarry::test::test_host host{stall_after(300ms)};
  auto rec = run(host, server);
  REQUIRE_MESSAGE(rec->result.has_value(), (rec->failure ? rec->failure->message : std::string{}));
  CHECK(rec->result->text == "Hi there");
  CHECK(rec->result->finish == sdk::finish_reason::stop);
  SUBCASE("without a finish reason the stall is still an error") {
    http_server other;
    other.route("POST", "/v1/chat/completions", [](const request&) {
      response_plan plan{200};
      plan.header("Content-Type", "text/event-stream");
      plan.chunked();
      plan.send(text_chunk).stall();
      return plan;
    });
    auto failed = run(host, other);
    REQUIRE(failed->failure.has_value());
    CHECK(failed->failure->retryable());
  }
}

TEST_CASE("openai: bytes that are not UTF-8 in a streamed delta arrive as U+FFFD") {
  http_server server;
  server.route("POST", "/v1/chat/completions", [](const request&) {
    return response_plan::text(
      200,
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\xFF\"}}]}\n\n" + finish_chunk
        + usage_chunk + "data: [DONE]\n\n",
      "text/event-stream");
  });
  quarry::test::test_host host;
  auto rec = run(host, server);
  REQUIRE(rec->result.has_value());
  CHECK(rec->result->text == "caf" + std::string{sdk::utf8_replacement});
  CHECK(rec->text == rec->result->text);
  host.shutdown();
}

} // namespace openai_provider_hostile_test
