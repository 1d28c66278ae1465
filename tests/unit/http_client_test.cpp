// Tests of the host's HTTP client (curl_http_client) and of the HTTP test
// server, against real sockets on 127.0.0.1.

#include "quarry/host/http_client.hpp"

#include "support/http_server.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace http_client_test {

using namespace std::chrono_literals;

namespace {

using quarry::core::http_settings;
using quarry::host::curl_http_client;
using quarry::host::fetch;
using quarry::sdk::errc;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;
namespace sdk = quarry::sdk;

// Generous limit for waits that only guard against a hanging test.
constexpr auto hang_guard = 30s;

// A sink that records everything it receives.
class recording_sink : public sdk::http_response_sink {
public:
  bool on_response(int status, const sdk::http_headers& headers) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++responses;
    if (!chunks.empty())
      response_after_data = true;
    this->status = status;
    this->headers = headers;
    cv_.notify_all();
    return accept_response;
  }

  bool on_data(std::string_view bytes) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (responses == 0)
      data_before_response = true;
    chunks.emplace_back(bytes);
    body.append(bytes.data(), bytes.size());
    cv_.notify_all();
    return accept_chunks < 0 || static_cast<int>(chunks.size()) < accept_chunks;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++completes;
    this->failure = std::move(failure);
    complete_thread = std::this_thread::get_id();
    cv_.notify_all();
  }

  bool wait_complete() {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard, [this] { return completes > 0; });
  }

  bool wait_data() {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard, [this] { return !chunks.empty() || completes > 0; });
  }

  int complete_count() {
    std::lock_guard<std::mutex> guard{mtx_};
    return completes;
  }

  std::optional<errc> error_code() {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!failure)
      return std::nullopt;
    return failure->code;
  }

  // Configuration (set before start).
  bool accept_response = true;
  int accept_chunks = -1;

  // Observations (read after wait_complete).
  int responses = 0;
  int status = 0;
  sdk::http_headers headers;
  std::vector<std::string> chunks;
  std::string body;
  int completes = 0;
  bool data_before_response = false;
  bool response_after_data = false;
  std::optional<sdk::error> failure;
  std::thread::id complete_thread;

private:
  std::mutex mtx_;
  std::condition_variable cv_;
};

sdk::http_request get(std::string url) {
  sdk::http_request result;
  result.url = std::move(url);
  return result;
}

// Runs `req` and waits for its completion.
std::shared_ptr<recording_sink> run(curl_http_client& client, sdk::http_request req) {
  auto sink = std::make_shared<recording_sink>();
  client.start(std::move(req), sink);
  REQUIRE(sink->wait_complete());
  return sink;
}

// Returns a port on 127.0.0.1 nobody listens on.
uint16_t closed_port() {
  auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A socket listening on 127.0.0.1 at a port the system chose, with
// `backlog`; `addr` is its address, the port included. -1 if it failed.
int listen_on_loopback(int backlog, sockaddr_in& addr) {
  auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
  addr = sockaddr_in{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::listen(fd, backlog) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0)
      ::close(fd);
    return -1;
  }
  return fd;
}

size_t thread_count() {
  size_t result = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator{"/proc/self/task"})
    ++result;
  return result;
}

// Waits until `pred` holds (polling); returns false after the hang guard.
bool eventually(const std::function<bool()>& pred) {
  auto until = std::chrono::steady_clock::now() + hang_guard;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Sends `bytes` over a fresh connection and returns everything the server
// sends until it closes the connection.
std::string raw_exchange(uint16_t port, const std::string& bytes) {
  auto fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {};
  }
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string result;
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    result.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return result;
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t result = 0;
  for (auto pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1))
    ++result;
  return result;
}

} // namespace

// -- basic exchanges ----------------------------------------------------------

TEST_CASE("http_client GET delivers status, headers and body") {
  http_server server;
  std::mutex mtx;
  request seen;
  server.route("GET", "/hello", [&](const request& req) {
    std::lock_guard<std::mutex> guard{mtx};
    seen = req;
    return response_plan::text(200, "hello world").header("X-Answer", "42");
  });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/hello?q=a+b&x=%2F"));
  req.headers.emplace_back("X-Request", "abc");
  auto sink = run(client, req);
  CHECK_FALSE(sink->failure);
  CHECK(sink->status == 200);
  CHECK(sink->responses == 1);
  CHECK(sink->completes == 1);
  CHECK(sink->body == "hello world");
  CHECK(sdk::find_header(sink->headers, "x-answer") == "42");
  CHECK(sdk::find_header(sink->headers, "Content-Length") == "11");
  CHECK_FALSE(sink->data_before_response);
  CHECK(sink->complete_thread != std::this_thread::get_id());
  std::lock_guard<std::mutex> guard{mtx};
  CHECK(seen.method == "GET");
  CHECK(seen.path == "/hello");
  CHECK(seen.param("q") == "a b");
  CHECK(seen.param("x") == "/");
  CHECK(seen.header("X-Request") == "abc");
  CHECK(seen.header("User-Agent") == "Quarry");
  CHECK(seen.header("Accept-Encoding").has_value());
  CHECK_FALSE(seen.header("Expect").has_value());
}

TEST_CASE("http_client POST sends the body") {
  http_server server;
  server.route("POST", "/echo", [](const request& req) {
    return response_plan::text(201, req.method + ":" + req.body)
      .header("X-Content-Type", req.header("Content-Type").value_or(""));
  });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/echo"));
  req.method = "POST";
  req.body = std::string(100000, 'b') + "end";
  req.headers.emplace_back("Content-Type", "application/json");
  auto result = fetch(client, req);
  CHECK_FALSE(result.failure);
  CHECK(result.status == 201);
  CHECK(result.body == "POST:" + req.body);
  CHECK(sdk::find_header(result.headers, "X-Content-Type") == "application/json");
}

TEST_CASE("http_client delivers 204 and HEAD responses without a body") {
  http_server server;
  server.route("GET", "/nothing", [](const request&) { return response_plan{204}; });
  server.route("*", "/page", [](const request&) { return response_plan::text(200, "0123456789"); });
  curl_http_client client{http_settings{}};
  auto sink = run(client, get(server.url("/nothing")));
  CHECK_FALSE(sink->failure);
  CHECK(sink->status == 204);
  CHECK(sink->responses == 1);
  CHECK(sink->chunks.empty());
  auto req = get(server.url("/page"));
  req.method = "HEAD";
  sink = run(client, req);
  CHECK_FALSE(sink->failure);
  CHECK(sink->status == 200);
  CHECK(sink->responses == 1);
  CHECK(sink->chunks.empty());
  CHECK(sdk::find_header(sink->headers, "Content-Length") == "10");
  // The connection is still usable after the HEAD.
  auto again = fetch(client, get(server.url("/page")));
  CHECK(again.body == "0123456789");
}

TEST_CASE("http_client streams chunks as separate on_data calls") {
  http_server server;
  server.route("GET", "/stream", [](const request&) {
    return response_plan{200}.chunked().send("alpha").delay(30ms).send("beta").delay(30ms).send(
      "gamma");
  });
  curl_http_client client{http_settings{}};
  auto sink = run(client, get(server.url("/stream")));
  CHECK_FALSE(sink->failure);
  CHECK(sink->responses == 1);
  CHECK_FALSE(sink->data_before_response);
  REQUIRE(sink->chunks.size() == 3);
  CHECK(sink->chunks[0] == "alpha");
  CHECK(sink->chunks[1] == "beta");
  CHECK(sink->chunks[2] == "gamma");
}

TEST_CASE("http_client reads an event stream in small pieces and other bodies in large ones") {
  // An event stream (a model's answer) holds a small receive buffer while it
  // runs: one burst of 40 KB arrives whole, in reads of at most 4 KiB. Any
  // other body is read in pieces of up to 16 KiB.
  std::string body;
  for (int i = 0; body.size() < 40000; ++i)
    body += "data: {\"n\":" + std::to_string(i) + ",\"text\":\"" + std::string(200, 'w')
            + "\"}\n\n";
  http_server server;
  server.route("GET", "/burst", [&](const request&) {
    return response_plan::text(200, body).header("Content-Type", "text/event-stream");
  });
  curl_http_client client{http_settings{}};
  for (std::string accept : {"text/event-stream", "Text/Event-Stream; q=1", "application/json"}) {
    auto req = get(server.url("/burst"));
    req.headers.emplace_back("Accept", accept);
    auto sink = run(client, req);
    CAPTURE(accept);
    REQUIRE_FALSE(sink->failure);
    std::string joined;
    size_t largest = 0;
    for (const auto& chunk : sink->chunks) {
      joined += chunk;
      largest = std::max(largest, chunk.size());
    }
    CHECK(joined == body);
    if (accept == "application/json") {
      CHECK(largest > 4096);
      CHECK(largest <= 16384);
    } else {
      CHECK(largest <= 4096);
      CHECK(sink->chunks.size() >= body.size() / 4096);
    }
  }
}

TEST_CASE("http_client lets go of a request body once it was sent and its answer streams") {
  // A model call: the request text goes out, then the answer streams for a
  // while. The body is held until the answer begins, not while it streams;
  // a 307 redirect still sends it again. Small bodies go out with the head,
  // large ones through libcurl's upload buffer: both are let go.
  http_server server;
  std::atomic<size_t> received{0};
  server.route("POST", "/stream", [&](const request& req) {
    received = req.body.size();
    return response_plan{200}
      .header("Content-Type", "text/event-stream")
      .chunked()
      .send("data: first\n\n")
      .delay(400ms)
      .send("data: last\n\n");
  });
  server.route("POST", "/moved",
               [](const request&) { return response_plan::redirect(307, "/stream"); });
  curl_http_client client{http_settings{}};
  CHECK(client.stats().request_body_bytes == 0);
  for (size_t size : {size_t{2000}, size_t{3000000}}) {
    for (const char* path : {"/stream", "/moved"}) {
      CAPTURE(size);
      CAPTURE(path);
      auto req = get(server.url(path));
      req.method = "POST";
      req.body = std::string(size, 'b');
      auto sink = std::make_shared<recording_sink>();
      client.start(std::move(req), sink);
      REQUIRE(sink->wait_data());
      auto s = client.stats();
      CHECK(s.active == 1);
      CHECK(s.request_body_bytes == 0);
      REQUIRE(sink->wait_complete());
      CHECK_FALSE(sink->failure);
      CHECK(sink->body == "data: first\n\ndata: last\n\n");
      CHECK(received == size);
    }
  }
  CHECK(client.stats().request_body_bytes == 0);
  // A body whose answer has not begun is held.
  server.route("POST", "/slow",
               [](const request&) { return response_plan{200}.delay(400ms).send("ok"); });
  auto req = get(server.url("/slow"));
  req.method = "POST";
  req.body = "held";
  auto sink = std::make_shared<recording_sink>();
  client.start(std::move(req), sink);
  CHECK(eventually([&] { return client.stats().request_body_bytes == 4; }));
  REQUIRE(sink->wait_complete());
  CHECK(client.stats().request_body_bytes == 0);
}

TEST_CASE("http_client keeps a request body its server answered before it was sent whole") {
  // The server sends its answer's head as soon as it read the request's
  // head, then reads the 32 MB body slowly and only then sends the answer's
  // bytes: libcurl is still sending from the body when the answer begins,
  // so the body is held until the transfer ends (ASan finds a read of a
  // body let go too early).
  sockaddr_in addr{};
  auto listener = listen_on_loopback(4, addr);
  REQUIRE(listener >= 0);
  const size_t size = 32u << 20;
  std::atomic<size_t> body_bytes{0};
  std::atomic<bool> body_intact{false};
  std::thread peer{[&] {
    auto fd = ::accept(listener, nullptr, nullptr);
    std::string in;
    char buf[65536];
    size_t head_end = std::string::npos;
    while (head_end == std::string::npos) {
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      in.append(buf, static_cast<size_t>(n));
      head_end = in.find("\r\n\r\n");
    }
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n";
    ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    size_t got = head_end == std::string::npos ? 0 : in.size() - head_end - 4;
    bool intact = in.find_first_not_of('q', head_end + 4) == std::string::npos;
    while (got < size) {
      std::this_thread::sleep_for(1ms);
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      intact = intact && std::all_of(buf, buf + n, [](char c) { return c == 'q'; });
      got += static_cast<size_t>(n);
    }
    body_bytes = got;
    body_intact = intact;
    ::send(fd, "done", 4, MSG_NOSIGNAL);
    ::close(fd);
  }};
  curl_http_client client{http_settings{}};
  auto req = get("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/upload");
  req.method = "POST";
  req.body = std::string(size, 'q');
  req.stall_timeout = 20s;
  req.total_timeout = 60s;
  auto sink = run(client, req);
  peer.join();
  ::close(listener);
  CHECK_FALSE(sink->failure);
  CHECK(sink->body == "done");
  CHECK(body_bytes == size);
  CHECK(body_intact);
  CHECK(client.stats().request_body_bytes == 0);
}

// -- timeouts and failures ----------------------------------------------------

TEST_CASE("http_client fails a stalled stream with errc::stall") {
  http_server server;
  server.route("GET", "/stall",
               [](const request&) { return response_plan{200}.chunked().send("first").stall(); });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/stall"));
  req.stall_timeout = 200ms;
  req.total_timeout = 20s;
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::stall);
  CHECK(sink->body == "first");
  CHECK(sink->failure->message.find(server.url("/stall")) != std::string::npos);
}

TEST_CASE("http_client applies the stall timeout of the settings") {
  http_server server;
  server.route("GET", "/silent", [](const request&) { return response_plan{200}.stall(); });
  http_settings settings;
  settings.stall_timeout = 150ms;
  curl_http_client client{settings};
  auto sink = run(client, get(server.url("/silent")));
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::stall);
  CHECK(sink->responses == 0);
}

TEST_CASE("http_client fails a slow but steady stream with errc::timeout") {
  http_server server;
  server.route("GET", "/slow", [](const request&) {
    response_plan plan{200};
    plan.chunked();
    for (int i = 0; i < 500; ++i)
      plan.send("tick").delay(20ms);
    return plan;
  });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/slow"));
  req.total_timeout = 300ms;
  req.stall_timeout = 5s;
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::timeout);
  CHECK(sink->responses == 1);
  CHECK_FALSE(sink->body.empty());
}

TEST_CASE("http_client's total timeout covers all redirect hops") {
  http_server server;
  for (int i = 0; i < 5; ++i) {
    server.route("GET", "/hop" + std::to_string(i), [i](const request&) {
      return response_plan::redirect(302, "/hop" + std::to_string(i + 1)).delay(120ms);
    });
  }
  server.route("GET", "/hop5", [](const request&) { return response_plan::text(200, "end"); });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/hop0"));
  req.total_timeout = 400ms;
  req.stall_timeout = 5s;
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::timeout);
  CHECK(sink->responses == 0);
  // Each hop alone is well within the limit: the client saw several.
  CHECK(server.requests_served() >= 2);
  CHECK(server.requests_served() < 6);
}

TEST_CASE("http_client reports a refused connection as errc::network") {
  auto port = closed_port();
  curl_http_client client{http_settings{}};
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/x?key=SECRET";
  auto req = get(url);
  req.headers.emplace_back("Authorization", "Bearer TOPSECRET");
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::network);
  CHECK(sink->failure->retryable());
  auto& msg = sink->failure->message;
  CHECK(msg.find("127.0.0.1:" + std::to_string(port) + "/x") != std::string::npos);
  CHECK(msg.find("SECRET") == std::string::npos);
  CHECK(sink->responses == 0);
}

TEST_CASE("http_client reports a connect timeout as errc::timeout") {
  // A listener whose accept queue is full drops further SYNs, so connecting
  // to it hangs until the connect timeout.
  sockaddr_in addr{};
  auto listener = listen_on_loopback(0, addr);
  REQUIRE(listener >= 0);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    auto fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(50ms);
  curl_http_client client{http_settings{}};
  auto req = get("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/slow");
  req.connect_timeout = 200ms;
  req.total_timeout = 20s;
  req.stall_timeout = 20s;
  auto sink = run(client, req);
  for (auto fd : fillers)
    ::close(fd);
  ::close(listener);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::timeout);
  CHECK(sink->failure->message.find("no connection within 200 ms") != std::string::npos);
}

TEST_CASE("http_client maps resets and truncated bodies to errc::network") {
  http_server server;
  server.route("GET", "/reset", [](const request&) {
    return response_plan{200}.chunked().send("part").delay(20ms).reset();
  });
  server.route("GET", "/short", [](const request&) {
    return response_plan{200}.header("Content-Length", "100").send("only a few bytes").close();
  });
  server.route("GET", "/nothing", [](const request&) { return response_plan{200}.close(); });
  curl_http_client client{http_settings{}};
  for (auto path : {"/reset", "/short", "/nothing"}) {
    CAPTURE(path);
    auto sink = run(client, get(server.url(path)));
    REQUIRE(sink->failure);
    CHECK(sink->failure->code == errc::network);
  }
}

TEST_CASE("http_client rejects malformed responses") {
  http_server server;
  server.route("GET", "/garbage", [](const request&) {
    return response_plan{}.without_head().raw("SPAM SPAM SPAM\r\n\r\n").close();
  });
  curl_http_client client{http_settings{}};
  auto sink = run(client, get(server.url("/garbage")));
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::invalid_response);
  CHECK(sink->responses == 0);
}

TEST_CASE("http_client refuses non-HTTP URLs") {
  curl_http_client client{http_settings{}};
  auto sink = run(client, get("file:///etc/passwd"));
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::refused);
}

TEST_CASE("http_client says what is wrong with a malformed URL, without its secrets") {
  curl_http_client client{http_settings{}};
  auto sink = run(client, get("http://user:hunter22@exa mple.com/?key=hunter22"));
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::bad_request);
  CHECK(sink->failure->message == "GET (an invalid URL): the URL contains a space (at byte 24)");
  auto port = run(client, get("https://example.com:123456/"));
  REQUIRE(port->failure);
  CHECK(port->failure->code == errc::bad_request);
  CHECK(port->failure->message.find("not a valid URL (port number") != std::string::npos);
  auto none = run(client, get("example.com/path"));
  REQUIRE(none->failure);
  CHECK(none->failure->code == errc::refused);
}

TEST_CASE("http_client checks each URL it has not checked lately, and an endpoint's "
          "requests go on working") {
  http_server server;
  server.route("GET", "/a", [](const request&) { return response_plan::text(200, "a"); });
  curl_http_client client{http_settings{}};
  // Twelve endpoints (more than the client remembers), each asked three
  // times in turns, with refused URLs between them: every good request is
  // answered, every bad one refused, however often it comes.
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 12; ++i) {
      CAPTURE(round);
      CAPTURE(i);
      auto good = run(client, get(server.url("/a?n=" + std::to_string(i))));
      CHECK_FALSE(good->failure);
      CHECK(good->body == "a");
      auto bad = run(client, get("http://exa mple.com/" + std::to_string(i)));
      REQUIRE(bad->failure);
      CHECK(bad->failure->code == errc::bad_request);
      auto other = run(client, get("file:///tmp/" + std::to_string(i % 2)));
      REQUIRE(other->failure);
      CHECK(other->failure->code == errc::refused);
      auto empty = run(client, get(""));
      REQUIRE(empty->failure);
      CHECK(empty->failure->code == errc::refused);
    }
}

TEST_CASE("http_client caps the response size") {
  http_server server;
  server.route("GET", "/declared",
               [](const request&) { return response_plan::text(200, std::string(10000, 'd')); });
  server.route("GET", "/undeclared", [](const request&) {
    return response_plan{200}.chunked().generate(10000, 100, 'u');
  });
  curl_http_client client{http_settings{}};
  for (auto path : {"/declared", "/undeclared"}) {
    CAPTURE(path);
    auto req = get(server.url(path));
    req.max_response_bytes = 1000;
    auto sink = run(client, req);
    REQUIRE(sink->failure);
    CHECK(sink->failure->code == errc::too_large);
    CHECK(sink->body.size() <= 1000);
  }
  // The same body fits a larger cap.
  auto req = get(server.url("/undeclared"));
  req.max_response_bytes = 10000;
  auto result = fetch(client, req);
  CHECK_FALSE(result.failure);
  CHECK(result.body == std::string(10000, 'u'));
}

// -- redirects ----------------------------------------------------------------

TEST_CASE("http_client follows redirects through the hook") {
  http_server server;
  server.route("GET", "/a/start", [&server](const request&) {
    return response_plan::redirect(302, server.url("/a/second")).send("moved");
  });
  server.route("GET", "/a/second",
               [](const request&) { return response_plan::redirect(301, "/b/third?x=1"); });
  server.route("GET", "/b/third",
               [](const request&) { return response_plan::redirect(307, "fourth"); });
  server.route("GET", "/b/fourth", [](const request& req) {
    return response_plan::text(200, "arrived " + req.target);
  });
  curl_http_client client{http_settings{}};
  std::vector<sdk::redirect_hop> hops;
  auto req = get(server.url("/a/start"));
  req.on_redirect = [&hops](const sdk::redirect_hop& hop) {
    hops.push_back(hop);
    return std::optional<sdk::error>{};
  };
  auto sink = run(client, req);
  CHECK_FALSE(sink->failure);
  CHECK(sink->status == 200);
  CHECK(sink->responses == 1);
  CHECK(sink->body == "arrived /b/fourth");
  REQUIRE(hops.size() == 3);
  CHECK(hops[0].from == server.url("/a/start"));
  CHECK(hops[0].to == server.url("/a/second"));
  CHECK(hops[0].status == 302);
  CHECK(hops[0].hop == 1);
  CHECK(hops[1].from == server.url("/a/second"));
  CHECK(hops[1].to == server.url("/b/third?x=1"));
  CHECK(hops[1].status == 301);
  CHECK(hops[1].hop == 2);
  CHECK(hops[2].from == server.url("/b/third?x=1"));
  CHECK(hops[2].to == server.url("/b/fourth"));
  CHECK(hops[2].status == 307);
  CHECK(hops[2].hop == 3);
  CHECK(client.stats().redirects_followed == 3);
}

TEST_CASE("http_client fails a redirect the hook refuses with its error") {
  http_server server;
  std::atomic<int> target_hits{0};
  server.route("GET", "/from",
               [](const request&) { return response_plan::redirect(302, "/forbidden"); });
  server.route("GET", "/forbidden", [&target_hits](const request&) {
    ++target_hits;
    return response_plan::text(200, "secret");
  });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/from"));
  req.on_redirect = [](const sdk::redirect_hop& hop) {
    sdk::error err;
    err.code = errc::refused;
    err.message = "policy forbids " + hop.to;
    return std::optional<sdk::error>{err};
  };
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::refused);
  CHECK(sink->failure->message == "policy forbids " + server.url("/forbidden"));
  CHECK(sink->responses == 0);
  CHECK(target_hits == 0);
}

TEST_CASE("http_client enforces the redirect limit") {
  http_server server;
  server.route("GET", "/loop",
               [](const request&) { return response_plan::redirect(302, "/loop"); });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/loop"));
  req.max_redirects = 3;
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::too_many_redirects);
  CHECK(server.requests_served() == 4);
  // Redirects not followed are delivered as they are.
  req.follow_redirects = false;
  auto result = fetch(client, req);
  CHECK_FALSE(result.failure);
  CHECK(result.status == 302);
  CHECK(sdk::find_header(result.headers, "Location") == "/loop");
}

TEST_CASE("http_client refuses redirects to other schemes") {
  http_server server;
  server.route("GET", "/ftp",
               [](const request&) { return response_plan::redirect(302, "ftp://127.0.0.1/file"); });
  server.route("GET", "/file",
               [](const request&) { return response_plan::redirect(301, "file:///etc/passwd"); });
  curl_http_client client{http_settings{}};
  for (auto path : {"/ftp", "/file"}) {
    CAPTURE(path);
    auto sink = run(client, get(server.url(path)));
    REQUIRE(sink->failure);
    CHECK(sink->failure->code == errc::refused);
  }
}

TEST_CASE("http_client switches POST to GET on 303 and keeps it on 307") {
  http_server server;
  server.route("POST", "/submit303",
               [](const request&) { return response_plan::redirect(303, "/result"); });
  server.route("POST", "/submit307",
               [](const request&) { return response_plan::redirect(307, "/result"); });
  server.route("*", "/result", [](const request& req) {
    return response_plan::text(200, req.method + " " + req.body);
  });
  curl_http_client client{http_settings{}};
  auto req = get(server.url("/submit303"));
  req.method = "POST";
  req.body = "payload";
  CHECK(fetch(client, req).body == "GET ");
  req.url = server.url("/submit307");
  CHECK(fetch(client, req).body == "POST payload");
}

TEST_CASE("http_client drops credentials on cross-origin redirects") {
  http_server first;
  http_server second;
  auto auth_of = [](const request& req) {
    return response_plan::text(200, req.header("Authorization").value_or("none"));
  };
  second.route("GET", "/land", auth_of);
  first.route("GET", "/land", auth_of);
  first.route("GET", "/away", [&second](const request&) {
    return response_plan::redirect(302, second.url("/land"));
  });
  first.route("GET", "/stay", [](const request&) { return response_plan::redirect(302, "/land"); });
  curl_http_client client{http_settings{}};
  auto req = get(first.url("/away"));
  req.headers.emplace_back("Authorization", "Bearer k");
  CHECK(fetch(client, req).body == "none");
  req.url = first.url("/stay");
  CHECK(fetch(client, req).body == "Bearer k");
}

// -- hooks, cancellation, sinks -----------------------------------------------

TEST_CASE("http_client's connect hook sees the address and can refuse it") {
  http_server server;
  server.route("GET", "/x", [](const request&) { return response_plan::text(200, "x"); });
  curl_http_client client{http_settings{}};
  std::vector<std::pair<std::string, uint16_t>> seen;
  auto req = get(server.url("/x"));
  req.on_connect = [&seen](std::string_view ip, uint16_t port) {
    seen.emplace_back(std::string{ip}, port);
    sdk::error err;
    err.code = errc::refused;
    err.message = "private address";
    return std::optional<sdk::error>{err};
  };
  auto sink = run(client, req);
  REQUIRE(sink->failure);
  CHECK(sink->failure->code == errc::refused);
  CHECK(sink->failure->message == "private address");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == "127.0.0.1");
  CHECK(seen[0].second == server.port());
  // Nothing reached the server: a later request is the first it sees.
  curl_http_client other{http_settings{}};
  CHECK(fetch(other, get(server.url("/x"))).body == "x");
  CHECK(server.connections_accepted() == 1);
  CHECK(server.requests_served() == 1);
  // An accepting hook lets the request through.
  req.on_connect = [](std::string_view, uint16_t) { return std::optional<sdk::error>{}; };
  CHECK(fetch(client, req).body == "x");
}

TEST_CASE("http_client cancels a request mid-stream exactly once") {
  http_server server;
  server.route("GET", "/endless",
               [](const request&) { return response_plan{200}.chunked().send("head").stall(); });
  server.route("GET", "/ping", [](const request&) { return response_plan::text(200, "pong"); });
  curl_http_client client{http_settings{}};
  auto sink = std::make_shared<recording_sink>();
  auto call = client.start(get(server.url("/endless")), sink);
  REQUIRE(sink->wait_data());
  call->cancel();
  REQUIRE(sink->wait_complete());
  CHECK(sink->error_code() == errc::cancelled);
  call->cancel();
  call->cancel();
  // Commands run in order: once this completes, the cancels were handled.
  CHECK(fetch(client, get(server.url("/ping"))).body == "pong");
  CHECK(sink->complete_count() == 1);
  CHECK(client.stats().active == 0);
}

TEST_CASE("http_client ignores cancel after completion") {
  http_server server;
  server.route("GET", "/ping", [](const request&) { return response_plan::text(200, "pong"); });
  curl_http_client client{http_settings{}};
  auto sink = std::make_shared<recording_sink>();
  auto call = client.start(get(server.url("/ping")), sink);
  REQUIRE(sink->wait_complete());
  call->cancel();
  std::thread other{[call] { call->cancel(); }};
  other.join();
  CHECK(fetch(client, get(server.url("/ping"))).body == "pong");
  CHECK(sink->complete_count() == 1);
  CHECK_FALSE(sink->error_code());
  CHECK(sink->body == "pong");
}

TEST_CASE("http_client aborts when the sink returns false") {
  http_server server;
  server.route("GET", "/chunks", [](const request&) {
    return response_plan{200}.chunked().send("one").delay(10ms).send("two");
  });
  curl_http_client client{http_settings{}};
  SUBCASE("from on_data") {
    auto sink = std::make_shared<recording_sink>();
    sink->accept_chunks = 1;
    client.start(get(server.url("/chunks")), sink);
    REQUIRE(sink->wait_complete());
    CHECK(sink->error_code() == errc::cancelled);
    CHECK(sink->chunks.size() == 1);
  }
  SUBCASE("from on_response") {
    auto sink = std::make_shared<recording_sink>();
    sink->accept_response = false;
    client.start(get(server.url("/chunks")), sink);
    REQUIRE(sink->wait_complete());
    CHECK(sink->error_code() == errc::cancelled);
    CHECK(sink->chunks.empty());
  }
}

// -- scale and lifecycle ------------------------------------------------------

TEST_CASE("http_client runs 500 concurrent requests on few threads") {
  constexpr int n = 500;
  http_server server;
  server.route("GET", "/item", [](const request& req) {
    auto i = req.param_int("i", -1);
    return response_plan{200}.delay(100ms).send("item-" + std::to_string(i) + "-"
                                                + std::string(200, 'p'));
  });
  http_settings settings;
  settings.max_connections = 600;
  curl_http_client client{settings};
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (int i = 0; i < n; ++i) {
    auto sink = std::make_shared<recording_sink>();
    client.start(get(server.url("/item?i=" + std::to_string(i))), sink);
    sinks.push_back(std::move(sink));
  }
  size_t max_threads = thread_count();
  uint64_t max_open = 0;
  REQUIRE(eventually([&] {
    max_threads = std::max(max_threads, thread_count());
    max_open = std::max(max_open, server.open_connections());
    return client.stats().completed == n;
  }));
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    REQUIRE(sinks[i]->wait_complete());
    CHECK_FALSE(sinks[i]->failure);
    CHECK(sinks[i]->complete_count() == 1);
    CHECK(sinks[i]->body == "item-" + std::to_string(i) + "-" + std::string(200, 'p'));
  }
  CHECK(max_threads < 20);
  // The requests really ran side by side.
  CHECK(max_open > 100);
  CHECK(server.requests_served() == n);
}

TEST_CASE("http_client reuses keep-alive connections") {
  http_server server;
  std::mutex mtx;
  std::vector<uint64_t> connections;
  server.route("GET", "/ping", [&](const request& req) {
    std::lock_guard<std::mutex> guard{mtx};
    connections.push_back(req.connection_id);
    return response_plan::text(200, "pong");
  });
  curl_http_client client{http_settings{}};
  for (int i = 0; i < 10; ++i)
    REQUIRE(fetch(client, get(server.url("/ping"))).body == "pong");
  CHECK(server.requests_served() == 10);
  CHECK(server.connections_accepted() == 1);
  CHECK(client.stats().connections_opened == 1);
  CHECK(client.stats().easy_handles_created == 1);
  std::lock_guard<std::mutex> guard{mtx};
  REQUIRE(connections.size() == 10);
  CHECK(std::count(connections.begin(), connections.end(), connections[0]) == 10);
}

TEST_CASE("http_client shutdown cancels requests in flight") {
  http_server server;
  server.route("GET", "/hang",
               [](const request&) { return response_plan{200}.chunked().send("x").stall(); });
  curl_http_client client{http_settings{}};
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (int i = 0; i < 20; ++i) {
    auto sink = std::make_shared<recording_sink>();
    client.start(get(server.url("/hang")), sink);
    sinks.push_back(std::move(sink));
  }
  REQUIRE(eventually([&] { return server.requests_served() == 20; }));
  client.shutdown();
  for (auto& sink : sinks) {
    CHECK(sink->complete_count() == 1);
    CHECK(sink->error_code() == errc::cancelled);
  }
  CHECK(client.stats().active == 0);
  // After shutdown, start() completes at once on the calling thread.
  auto late = std::make_shared<recording_sink>();
  client.start(get(server.url("/hang")), late);
  CHECK(late->complete_count() == 1);
  CHECK(late->error_code() == errc::cancelled);
  CHECK(late->complete_thread == std::this_thread::get_id());
  client.shutdown();
}

// -- the test server itself ---------------------------------------------------

TEST_CASE("http_server answers unknown paths with 404") {
  http_server server;
  curl_http_client client{http_settings{}};
  auto result = fetch(client, get(server.url("/nowhere")));
  CHECK_FALSE(result.failure);
  CHECK(result.status == 404);
  server.fallback([](const request& req) { return response_plan::text(410, "gone " + req.path); });
  result = fetch(client, get(server.url("/nowhere")));
  CHECK(result.status == 410);
  CHECK(result.body == "gone /nowhere");
}

TEST_CASE("http_server serves pipelined requests and honours close") {
  http_server server;
  server.route("GET", "/n", [](const request& req) {
    return response_plan::text(200, "n=" + req.param("v").value_or("?"));
  });
  auto reply = raw_exchange(server.port(), "GET /n?v=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                                           "GET /n?v=2 HTTP/1.1\r\nHost: x\r\n"
                                           "Connection: close\r\n\r\n");
  CHECK(count_of(reply, "HTTP/1.1 200 OK\r\n") == 2);
  CHECK(reply.find("n=1") < reply.find("n=2"));
  CHECK(reply.find("n=2") != std::string::npos);
  CHECK(count_of(reply, "Connection: close\r\n") == 1);
  CHECK(server.requests_served() == 2);
  CHECK(eventually([&] { return server.open_connections() == 0; }));
}

TEST_CASE("http_server rejects malformed requests") {
  http_server server;
  auto reply = raw_exchange(server.port(), "NONSENSE\r\n\r\n");
  CHECK(reply.rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(server.requests_served() == 0);
}

TEST_CASE("http_server generates large chunked bodies lazily") {
  http_server server;
  server.route("GET", "/big", [](const request& req) {
    auto n = static_cast<uint64_t>(req.param_int("n", 0));
    return response_plan{200}.chunked().generate(n, 7777, 'z');
  });
  curl_http_client client{http_settings{}};
  auto result = fetch(client, get(server.url("/big?n=5000000")));
  CHECK_FALSE(result.failure);
  CHECK(result.body.size() == 5000000);
  CHECK(result.body.find_first_not_of('z') == std::string::npos);
}

TEST_CASE("http_server keeps streaming to several slow readers") {
  // Exercises backpressure: the server's buffers fill up and drain many
  // times while the client reads four streams at once.
  constexpr int streams = 4;
  constexpr uint64_t size = 16 * 1024 * 1024;
  http_server server;
  server.route("GET", "/big", [](const request& req) {
    auto fill = static_cast<char>('a' + req.param_int("i", 0));
    return response_plan{200}.chunked().generate(size, 3000, fill);
  });
  curl_http_client client{http_settings{}};
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (int i = 0; i < streams; ++i) {
    auto req = get(server.url("/big?i=" + std::to_string(i)));
    req.max_response_bytes = static_cast<int64_t>(size);
    req.stall_timeout = 10s;
    auto sink = std::make_shared<recording_sink>();
    client.start(req, sink);
    sinks.push_back(std::move(sink));
  }
  for (int i = 0; i < streams; ++i) {
    CAPTURE(i);
    REQUIRE(sinks[i]->wait_complete());
    CHECK_FALSE(sinks[i]->failure);
    CHECK(sinks[i]->body.size() == size);
    CHECK(sinks[i]->body.find_first_not_of(static_cast<char>('a' + i)) == std::string::npos);
  }
}

} // namespace http_client_test
