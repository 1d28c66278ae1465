// The SDK's buffered response sink and search-backend helper, over a scripted
// in-process HTTP client (every request is answered from a table, or held
// until the test releases or cancels it).

#include "quarry/sdk/http_buffer.hpp"
#include "quarry/sdk/search.hpp"

#include <doctest/doctest.h>

#include <cctype>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sdk_search_test {

using namespace quarry;

namespace {

/// One scripted answer.
struct scripted {
  int status = 200;
  sdk::http_headers headers;
  std::vector<std::string> pieces;
  /// The transport fails after the pieces.
  std::optional<sdk::error> failure;
  /// Held until cancelled.
  bool hold = false;
};

/// Answers requests by URL from a table, synchronously, on the caller's
/// thread; records every request.
class scripted_client final : public sdk::http_client {
public:
  std::map<std::string, scripted> answers;
  std::vector<sdk::http_request> requests;

  struct held_call final : sdk::http_call {
    std::shared_ptr<sdk::http_response_sink> sink;
    void cancel() override {
      if (auto s = std::exchange(sink, nullptr))
        s->on_complete(sdk::make_error(sdk::errc::cancelled, "cancelled"));
    }
  };

  std::shared_ptr<sdk::http_call> start(sdk::http_request request,
                                        std::shared_ptr<sdk::http_response_sink> sink) override {
    requests.push_back(request);
    auto call = std::make_shared<held_call>();
    auto it = answers.find(request.url);
    if (it == answers.end()) {
      sink->on_complete(sdk::make_error(sdk::errc::network, "no route"));
      return call;
    }
    const auto& a = it->second;
    if (a.hold) {
      call->sink = sink;
      return call;
    }
    if (!sink->on_response(a.status, a.headers)) {
      sink->on_complete(sdk::make_error(sdk::errc::cancelled, "aborted"));
      return call;
    }
    for (const auto& piece : a.pieces)
      if (!sink->on_data(piece)) {
        sink->on_complete(sdk::make_error(sdk::errc::cancelled, "aborted"));
        return call;
      }
    sink->on_complete(a.failure);
    return call;
  }
};

struct outcome {
  sdk::http_response response;
  std::optional<sdk::error> failure;
  int calls = 0;
};

outcome fetch(scripted_client& client, std::string url, int64_t max_bytes) {
  outcome out;
  sdk::http_request req;
  req.url = std::move(url);
  sdk::fetch_buffered(client, std::move(req), max_bytes,
                      [&out](sdk::http_response r, std::optional<sdk::error> e) {
                        out.response = std::move(r);
                        out.failure = std::move(e);
                        ++out.calls;
                      });
  return out;
}

/// A backend over `https://s.test/?q=<query>` answering `{"hits": [...]}`.
class test_backend final : public sdk::search_backend {
public:
  sdk::http_request make_request(const std::string& query) const override {
    sdk::http_request req;
    req.url = "https://s.test/?q=" + query;
    return req;
  }

  sdk::search_page parse(std::string_view body) const override {
    sdk::search_page page;
    auto j = sdk::parse_json(body);
    if (!j.is_object() || !j.contains("hits")) {
      page.failure = sdk::make_error(sdk::errc::invalid_response, "no hits");
      return page;
    }
    for (const auto& h : j["hits"])
      page.results.push_back({h.value("t", ""), h.value("u", ""), "s", {}});
    return page;
  }
};

std::string hits(std::vector<std::pair<std::string, std::string>> xs) {
  auto arr = nlohmann::json::array();
  for (auto& [t, u] : xs)
    arr.push_back({{"t", t}, {"u", u}});
  return nlohmann::json{{"hits", arr}}.dump();
}

/// The host context of a search tool: only HTTP is used.
class http_only_host final : public sdk::host_context {
public:
  explicit http_only_host(scripted_client& client) : client_(client) {
    // nop
  }
  sdk::http_client& http() override {
    return client_;
  }
  sdk::logger& log() override {
    throw std::logic_error("unused");
  }
  sdk::blocking_pool& pool() override {
    throw std::logic_error("unused");
  }
  const sdk::secret_store& secrets() const override {
    throw std::logic_error("unused");
  }
  std::chrono::system_clock::time_point now() const override {
    return {};
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return {};
  }
  std::string data_dir() const override {
    return {};
  }

private:
  scripted_client& client_;
};

} // namespace

TEST_CASE("sdk buffered_response_sink collects a response in pieces") {
  scripted_client client;
  client.answers["https://a.test/"] = {
    200, {{"Content-Type", "text/plain"}}, {"hel", "lo"}, {}, false};
  auto out = fetch(client, "https://a.test/", 100);
  CHECK(out.calls == 1);
  CHECK_FALSE(out.failure.has_value());
  CHECK(out.response.status == 200);
  CHECK(out.response.body == "hello");
  CHECK(sdk::find_header(out.response.headers, "content-type") == "text/plain");
  // The host's own size limit is set from the buffer's.
  CHECK(client.requests.at(0).max_response_bytes == 100);
}

TEST_CASE("sdk buffered_response_sink stops a body larger than its buffer") {
  scripted_client client;
  client.answers["https://a.test/"] = {200, {}, {"12345", "67890", "x"}, {}, false};
  auto out = fetch(client, "https://a.test/", 8);
  CHECK(out.calls == 1);
  REQUIRE(out.failure.has_value());
  CHECK(out.failure->code == sdk::errc::too_large);
  CHECK(out.failure->message == "the response is larger than 8 bytes");
  CHECK(out.response.body == "12345");
}

TEST_CASE("sdk buffered_response_sink maps error statuses and keeps the body") {
  scripted_client client;
  client.answers["https://a.test/"] = {429,
                                       {{"Retry-After", "3"}, {"x-should-retry", "true"}},
                                       {R"({"error": {"message": "Slow\ndown  now"}})"},
                                       {},
                                       false};
  client.answers["https://b.test/"] = {401, {}, {"<html>no</html>"}, {}, false};
  auto out = fetch(client, "https://a.test/", 1000);
  REQUIRE(out.failure.has_value());
  CHECK(out.failure->code == sdk::errc::rate_limited);
  CHECK(out.failure->http_status == 429);
  // A line break is a space: "Slow\ndown" is two words.
  CHECK(out.failure->message == "Slow down now");
  CHECK(out.failure->retry_after_ms == 3000);
  CHECK(out.failure->retry_hint == true);
  CHECK(out.response.body.find("Slow") != std::string::npos);
  auto auth = fetch(client, "https://b.test/", 1000);
  REQUIRE(auth.failure.has_value());
  CHECK(auth.failure->code == sdk::errc::auth);
  CHECK(auth.failure->message == "<html>no</html>");
}

TEST_CASE("sdk buffered_response_sink passes transport failures on") {
  scripted_client client;
  client.answers["https://a.test/"] = {
    200, {}, {"par"}, sdk::make_error(sdk::errc::network, "reset"), false};
  auto out = fetch(client, "https://a.test/", 1000);
  REQUIRE(out.failure.has_value());
  CHECK(out.failure->code == sdk::errc::network);
  CHECK(out.failure->message == "reset");
}

TEST_CASE("sdk http_error_message reads common error shapes, bounded") {
  CHECK(sdk::http_error_message(R"({"detail": {"error": "bad key"}})") == "bad key");
  CHECK(sdk::http_error_message(R"({"error": "No query"})") == "No query");
  CHECK(sdk::http_error_message(R"({"message": "x"})") == "x");
  CHECK(sdk::http_error_message(std::string(1000, 'x')).size() == 200);
  CHECK(sdk::http_error_message(R"({"message": ")" + std::string(1000, 'y') + "\"}").size() == 300);
  // Invalid UTF-8 is repaired, never passed on.
  CHECK(sdk::is_valid_utf8(sdk::http_error_message("\xff\xfe oops")));
  // Escape sequences go whole (the message may reach a terminal); line
  // breaks and tabs are spaces.
  CHECK(sdk::http_error_message("{\"error\": {\"message\": \"bad\\u001b]0;pwned\\u0007 "
                                "key\\u001b[2J\\n\\tnow\xC2\x9B"
                                "31m!\"}}")
        == "bad key now!");
}

TEST_CASE("sdk search_queries reads strings and arrays, trims, drops repeats") {
  using v = std::vector<std::string>;
  CHECK(sdk::search_queries({{"queries", " one "}}) == v{"one"});
  CHECK(sdk::search_queries({{"queries", {"a", 1, " a", "", "b"}}}) == v{"a", "b"});
  CHECK(sdk::search_queries({{"query", "x"}}).empty());
  CHECK(sdk::search_queries(nlohmann::json::array()).empty());
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 30; ++i)
    many.push_back("q" + std::to_string(i));
  CHECK(sdk::search_queries({{"queries", many}}, 10).size() == 10);
}

TEST_CASE("sdk query_strings and distinct_queries: the strings, normalised, first of each") {
  using v = std::vector<std::string>;
  CHECK(sdk::query_strings("one") == v{"one"});
  CHECK(sdk::query_strings({"a", 1, nullptr, "b"}) == v{"a", "b"});
  CHECK(sdk::query_strings(nlohmann::json::object()).empty());
  CHECK(sdk::query_strings(7).empty());
  auto upper = [](const std::string& x) {
    std::string out;
    for (char c : x)
      if (c != ' ')
        out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  };
  CHECK(sdk::distinct_queries({"a b", "ab", " ", "c", "AB", "d"}, upper) == v{"AB", "C", "D"});
  CHECK(sdk::distinct_queries({"a", "a", "b", "c"}, upper, 2) == v{"A", "B"});
  CHECK(sdk::distinct_queries({}, upper).empty());
}

TEST_CASE("sdk run_search runs every query, keeps failures apart and classifies statuses") {
  scripted_client client;
  client.answers["https://s.test/?q=a"] = {
    200, {}, {hits({{"A1", "u1"}, {"A2", "u2"}, {"A3", "u3"}})}, {}, false};
  client.answers["https://s.test/?q=b"] = {503, {}, {R"({"message":"busy"})"}, {}, false};
  client.answers["https://s.test/?q=c"] = {200, {}, {"not json"}, {}, false};
  sdk::search_options options;
  options.max_results = 2;
  options.timeout = std::chrono::seconds{7};
  std::optional<sdk::search_batch> got;
  sdk::run_search(client, std::make_shared<test_backend>(), {"a", "b", "c"}, options,
                  [&](sdk::search_batch b) { got = std::move(b); });
  REQUIRE(got.has_value());
  CHECK_FALSE(got->cancelled);
  REQUIRE(got->outcomes.size() == 3);
  CHECK(got->outcomes[0].query == "a");
  CHECK(got->outcomes[0].results.size() == 2); // cut to max_results
  CHECK_FALSE(got->outcomes[0].failure.has_value());
  REQUIRE(got->outcomes[1].failure.has_value());
  CHECK(got->outcomes[1].failure->code == sdk::errc::overloaded);
  CHECK(got->outcomes[1].failure->message == "busy");
  REQUIRE(got->outcomes[2].failure.has_value());
  CHECK(got->outcomes[2].failure->code == sdk::errc::invalid_response);
  CHECK(client.requests.at(0).total_timeout == std::chrono::seconds{7});
  CHECK(client.requests.at(0).max_response_bytes == options.max_body_bytes);
}

TEST_CASE("sdk run_search cancels the requests still running and says so") {
  scripted_client client;
  client.answers["https://s.test/?q=a"] = {200, {}, {hits({{"A", "u"}})}, {}, false};
  client.answers["https://s.test/?q=b"].hold = true;
  std::optional<sdk::search_batch> got;
  auto run = sdk::run_search(client, std::make_shared<test_backend>(), {"a", "b"}, {},
                             [&](sdk::search_batch b) { got = std::move(b); });
  CHECK_FALSE(got.has_value());
  run->cancel();
  REQUIRE(got.has_value());
  CHECK(got->cancelled);
  CHECK_FALSE(got->outcomes[0].failure.has_value());
  REQUIRE(got->outcomes[1].failure.has_value());
  CHECK(got->outcomes[1].failure->code == sdk::errc::cancelled);
  run->cancel(); // again: nothing happens
  auto empty = sdk::run_search(client, std::make_shared<test_backend>(), {}, {},
                               [&](sdk::search_batch b) { got = std::move(b); });
  CHECK(got->outcomes.empty());
  CHECK_FALSE(got->cancelled);
}

TEST_CASE("sdk search_tool interleaves, de-duplicates and numbers the results") {
  scripted_client client;
  client.answers["https://s.test/?q=a"] = {
    200, {}, {hits({{"A1", "u1"}, {"S", "shared"}})}, {}, false};
  client.answers["https://s.test/?q=b"] = {
    200, {}, {hits({{"B1", "v1"}, {"S", "shared"}})}, {}, false};
  http_only_host host{client};
  sdk::search_tool_info info;
  info.name = "my_search";
  info.description = "Searches.";
  sdk::search_tool tool{host, std::make_shared<test_backend>(), info};
  CHECK(tool.name() == "my_search");
  CHECK(tool.parameters()["required"] == nlohmann::json::array({"queries"}));
  std::optional<sdk::tool_result> got;
  tool.run({{"queries", {"a", "b"}}}, [&](sdk::tool_result r) { got = std::move(r); });
  REQUIRE(got.has_value());
  CHECK_FALSE(got->failure.has_value());
  REQUIRE(got->documents.size() == 3);
  CHECK(got->documents[0].url == "u1");
  CHECK(got->documents[1].url == "v1");
  CHECK(got->documents[2].url == "shared");
  auto text = nlohmann::json::parse(got->llm_text);
  CHECK(text["results"][2]["document"] == 3);
  CHECK(text["results"][2]["url"] == "shared");
}

TEST_CASE("sdk search_tool explains missing queries and total failure") {
  scripted_client client;
  http_only_host host{client};
  sdk::search_tool_info info;
  info.name = "my_search";
  sdk::search_tool tool{host, std::make_shared<test_backend>(), info};
  std::optional<sdk::tool_result> got;
  auto handle = tool.run({{"queries", {" "}}}, [&](sdk::tool_result r) { got = std::move(r); });
  // Every run gives a handle the caller may cancel, a finished one too.
  REQUIRE(handle != nullptr);
  handle->cancel();
  REQUIRE(got.has_value());
  CHECK(got->llm_text
        == "No queries were given. Call my_search with "
           "{\"queries\": [\"...\"]}.");
  CHECK(got->failure->code == sdk::errc::bad_request);
  got.reset();
  tool.run({{"queries", {"nowhere"}}}, [&](sdk::tool_result r) { got = std::move(r); });
  REQUIRE(got.has_value());
  CHECK(got->llm_text == "Every query failed:\n- nowhere: network: no route");
  CHECK(got->failure->code == sdk::errc::network);
}

} // namespace sdk_search_test
