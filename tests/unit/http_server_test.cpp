// Tests of quarry_http (app/http): a real server on 127.0.0.1 port 0,
// real clients (libcurl, and raw sockets for malformed, slow and partial
// input).

#include "quarry/http/router.hpp"
#include "quarry/http/server.hpp"

#include <doctest/doctest.h>

#include <curl/curl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace http_server_test {

using namespace std::chrono_literals;
namespace http = quarry::http;
namespace sdk = quarry::sdk;

namespace {

// Generous limit for waits that only guard against a hanging test.
constexpr auto hang_guard = 20s;

std::unique_ptr<http::server> start(http::server_options opts, http::handler fn) {
  opts.host = opts.host.empty() ? "127.0.0.1" : opts.host;
  auto started = http::server::start(std::move(opts), std::move(fn));
  if (auto* err = std::get_if<sdk::error>(&started))
    FAIL("server did not start: " << err->message);
  return std::move(std::get<std::unique_ptr<http::server>>(started));
}

http::server_options test_options() {
  http::server_options opts;
  opts.port = 0;
  // Most raw requests here send `Host: x`; the Host and Origin checks have
  // their own tests ("http server: host check: ...").
  opts.check_host = false;
  return opts;
}

// An answer read by a client.
struct reply {
  long status = 0;
  std::string head; // status line and fields
  std::string body;
  bool ok = false; // a complete response was read

  // The value of the first field `name` (case-insensitive), or "".
  std::string field(std::string_view name) const {
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos + 2 < head.size()) {
      size_t end = head.find("\r\n", pos + 2);
      if (end == std::string::npos)
        end = head.size();
      auto line = head.substr(pos + 2, end - pos - 2);
      auto colon = line.find(':');
      if (colon != std::string::npos && colon == name.size()
          && strncasecmp(line.data(), name.data(), name.size()) == 0) {
        auto value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ')
          value.erase(0, 1);
        return value;
      }
      pos = end;
    }
    return {};
  }
  bool has_field(std::string_view name) const {
    return head.find(std::string{"\r\n"} + std::string{name} + ":") != std::string::npos;
  }
};

// -- libcurl client -----------------------------------------------------------

size_t append_to_string(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct curl_request {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;
  std::optional<std::string> body;
};

reply curl_fetch(const curl_request& r) {
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  REQUIRE(curl_ready);
  reply out;
  CURL* curl = curl_easy_init();
  REQUIRE(curl != nullptr);
  curl_slist* list = nullptr;
  for (const auto& h : r.headers)
    list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  if (r.method == "HEAD")
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (r.body) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, r.body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body->size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_to_string);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append_to_string);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &out.head);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROXY, "");
  auto rc = curl_easy_perform(curl);
  out.ok = rc == CURLE_OK;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  // Keep only the final response's head (curl also reports 100 Continue).
  auto last = out.head.rfind("HTTP/1.");
  if (last != std::string::npos)
    out.head = out.head.substr(last);
  return out;
}

reply curl_get(uint16_t port, const std::string& path, std::vector<std::string> headers = {}) {
  curl_request r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + path;
  r.headers = std::move(headers);
  return curl_fetch(r);
}

// -- raw socket client --------------------------------------------------------

class raw_client {
public:
  explicit raw_client(uint16_t port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    if (receive_buffer > 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~raw_client() {
    close();
  }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads what arrives within `wait`; false when the peer closed (or
  // reset) the connection.
  bool read_some(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0)
      return true;
    char buf[16384];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    data_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // Reads until `needle` was received after `from`; false on close or
  // the hang guard.
  bool read_until(std::string_view needle, size_t from = 0) {
    auto deadline = std::chrono::steady_clock::now() + hang_guard;
    while (data_.find(needle, from) == std::string::npos) {
      if (eof_ || std::chrono::steady_clock::now() > deadline)
        return false;
      read_some(100ms);
    }
    return true;
  }

  // Reads until the peer closes; false on the hang guard.
  bool read_until_closed() {
    auto deadline = std::chrono::steady_clock::now() + hang_guard;
    while (!eof_) {
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      read_some(100ms);
    }
    return true;
  }

  // Reads one response with a Content-Length body from the data.
  std::optional<reply> read_response() {
    if (!read_until("\r\n\r\n"))
      return std::nullopt;
    auto end = data_.find("\r\n\r\n");
    reply r;
    r.head = data_.substr(0, end + 2);
    r.status = std::atol(r.head.c_str() + 9);
    auto length_text = r.field("Content-Length");
    size_t length = length_text.empty() ? 0 : std::stoul(length_text);
    while (data_.size() < end + 4 + length)
      if (!read_some(100ms) || eof_)
        break;
    if (data_.size() < end + 4 + length)
      return std::nullopt;
    r.body = data_.substr(end + 4, length);
    r.ok = true;
    data_.erase(0, end + 4 + length);
    return r;
  }

  std::string& data() {
    return data_;
  }
  bool eof() const {
    return eof_;
  }

private:
  int fd_ = -1;
  std::string data_;
  bool eof_ = false;
};

// Waits until `pred` holds (polling); false on the hang guard.
template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + hang_guard;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A handler that answers 200 with what it saw.
void echo(http::request req, std::shared_ptr<http::responder> res) {
  nlohmann::json j = {{"method", req.method},  {"path", req.path},
                      {"target", req.target},  {"body_size", req.body.size()},
                      {"query", req.query},    {"remote", req.remote_address},
                      {"version", req.version}};
  if (auto id = req.header("last-event-id"))
    j["last_event_id"] = std::string{*id};
  res->respond(http::json_response(200, j));
}

// The server answered the request on `c` with 400 bad_request, said it
// closes, and closed.
void check_bad_request_closed(raw_client& c) {
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->field("Connection") == "close");
  CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "bad_request");
  CHECK(c.read_until_closed());
}

} // namespace

TEST_CASE("http server: JSON error helpers build the documented body") {
  auto err = http::json_error(404, "not_found", "no such session: \"q1\"");
  CHECK(err.status == 404);
  CHECK(err.content_type == "application/json");
  CHECK(err.body == R"({"error":{"code":"not_found","message":"no such session: \"q1\""}})");
  auto ok = http::json_response(202, {{"id", "q0123456789abcdef"}});
  CHECK(ok.status == 202);
  CHECK(ok.body == R"({"id":"q0123456789abcdef"})");
  // Invalid UTF-8 is replaced, not thrown.
  auto bad = http::json_error(400, "bad_request", std::string{"\xff\xfe"});
  CHECK(bad.body.find("bad_request") != std::string::npos);
}

TEST_CASE("http server: constant-time comparison") {
  CHECK(http::constant_time_equals("secret-token", "secret-token"));
  CHECK_FALSE(http::constant_time_equals("secret-token", "secret-tokem"));
  CHECK_FALSE(http::constant_time_equals("secret-token", "secret-token2"));
  CHECK_FALSE(http::constant_time_equals("secret-token", "secret"));
  CHECK_FALSE(http::constant_time_equals("", "x"));
  CHECK(http::constant_time_equals("", ""));
  CHECK_FALSE(http::constant_time_equals(std::string_view{"a\0b", 3}, std::string_view{"a\0c", 3}));
}

TEST_CASE("http server: the router answers 404 and 405 with Allow, and fills params") {
  http::router r;
  r.add("GET", "/v1/research/{id}", [](http::request& req, auto res) {
    res->respond(http::json_response(200, {{"id", req.param("id")}}));
  });
  r.add("GET", "/v1/research/{id}/events", [](http::request& req, auto res) {
    res->respond(http::json_response(200, {{"events", req.param("id")}}));
  });
  r.add("POST", "/v1/research", [](http::request&, auto res) {
    res->respond(http::json_response(202, {{"created", true}}));
  });
  r.add("GET", "/v1/research/list", [](http::request&, auto res) {
    res->respond(http::json_response(200, {{"literal", true}}));
  });
  r.add("GET", "/assets/{file*}", [](http::request& req, auto res) {
    res->respond(http::json_response(200, {{"file", req.param("file")}}));
  });
  r.add("GET", "/boom", [](http::request&, auto) -> void { throw std::runtime_error("kaput"); });
  auto srv = start(test_options(), r.as_handler());
  auto port = srv->port();

  auto one = curl_get(port, "/v1/research/q0123456789abcdef");
  CHECK(one.status == 200);
  CHECK(one.body == R"({"id":"q0123456789abcdef"})");
  CHECK(curl_get(port, "/v1/research/q1/events").body == R"({"events":"q1"})");
  CHECK(curl_get(port, "/v1/research/list").body == R"({"literal":true})");
  CHECK(curl_get(port, "/assets/js/app.js").body == R"({"file":"js/app.js"})");

  auto missing = curl_get(port, "/nope");
  CHECK(missing.status == 404);
  CHECK(missing.field("Content-Type") == "application/json");
  auto j = nlohmann::json::parse(missing.body);
  CHECK(j["error"]["code"] == "not_found");
  CHECK(curl_get(port, "/v1/research/").status == 404); // empty {id}
  CHECK(curl_get(port, "/v1/research/a/b").status == 404);

  curl_request del;
  del.method = "DELETE";
  del.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/research";
  auto wrong = curl_fetch(del);
  CHECK(wrong.status == 405);
  CHECK(wrong.field("Allow") == "POST");
  CHECK(nlohmann::json::parse(wrong.body)["error"]["code"] == "method_not_allowed");

  curl_request post_one;
  post_one.method = "POST";
  post_one.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/research/q1";
  post_one.body = "{}";
  auto not_allowed = curl_fetch(post_one);
  CHECK(not_allowed.status == 405);
  CHECK(not_allowed.field("Allow") == "GET, HEAD");

  curl_request head;
  head.method = "HEAD";
  head.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/research/q1";
  auto head_reply = curl_fetch(head);
  CHECK(head_reply.ok);
  CHECK(head_reply.status == 200);
  CHECK(head_reply.body.empty());
  CHECK(head_reply.field("Content-Length") == "11");

  auto boom = curl_get(port, "/boom");
  CHECK(boom.status == 500);
  CHECK(nlohmann::json::parse(boom.body)["error"]["code"] == "internal");
}

TEST_CASE("http server: requests carry decoded paths, queries and headers") {
  auto srv = start(test_options(), echo);
  auto r = curl_get(srv->port(), "/a%20b/c?x=1&y=hello+world&x=2&z=%C3%A9&flag",
                    {"Last-Event-ID: 17"});
  REQUIRE(r.status == 200);
  auto j = nlohmann::json::parse(r.body);
  CHECK(j["path"] == "/a b/c");
  CHECK(j["target"] == "/a%20b/c?x=1&y=hello+world&x=2&z=%C3%A9&flag");
  CHECK(j["query"]["x"] == "1"); // the first of duplicates wins
  CHECK(j["query"]["y"] == "hello world");
  CHECK(j["query"]["z"] == "\xc3\xa9");
  CHECK(j["query"]["flag"] == "");
  CHECK(j["last_event_id"] == "17");
  CHECK(j["remote"] == "127.0.0.1");
}

TEST_CASE("http server: bad paths are answered 400") {
  auto srv = start(test_options(), echo);
  for (const char* target :
       {"/a/../etc/passwd", "/a/%2e%2e/b", "/..", "/./x", "/a%00b", "/%C3%28", "/%zz", "/a%",
        "http://example.com/", "/x?q=%ff", "/x?q=%00", "/a\\..\\b"}) {
    CAPTURE(target);
    raw_client c{srv->port()};
    REQUIRE(c.send(std::string{"GET "} + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "bad_request");
  }
}

TEST_CASE("http server: a malformed request is answered 400 and closed") {
  auto srv = start(test_options(), echo);
  for (const char* bytes :
       {"GARBAGE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"}) {
    CAPTURE(bytes);
    raw_client c{srv->port()};
    REQUIRE(c.send(bytes));
    check_bad_request_closed(c);
  }
  // Random bytes never crash it.
  uint32_t seed = 12345;
  for (int i = 0; i < 50; ++i) {
    std::string junk;
    for (int k = 0; k < 300; ++k) {
      seed = seed * 1103515245u + 12345u;
      junk.push_back(static_cast<char>(seed >> 16));
    }
    raw_client c{srv->port()};
    c.send(junk);
    c.send("\r\n\r\n");
    CHECK(c.read_until_closed());
  }
  CHECK(curl_get(srv->port(), "/still-alive").status == 200);
}

TEST_CASE("http server: a body over max_body_bytes is answered 413") {
  auto opts = test_options();
  opts.max_body_bytes = 4096;
  auto srv = start(opts, echo);
  auto port = srv->port();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/upload";

  SUBCASE("Content-Length over the limit is refused before the body is read") {
    raw_client c{port};
    REQUIRE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "too_large");
    CHECK(r->field("Connection") == "close");
  }
  SUBCASE("curl with a large body") {
    curl_request big;
    big.method = "POST";
    big.url = url;
    big.body = std::string(100'000, 'x');
    big.headers = {"Content-Type: application/json"};
    auto r = curl_fetch(big);
    CHECK(r.status == 413);
  }
  SUBCASE("chunked without Content-Length") {
    raw_client c{port};
    REQUIRE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    std::string chunk = "800\r\n" + std::string(0x800, 'y') + "\r\n";
    for (int i = 0; i < 4; ++i)
      if (!c.send(chunk))
        break;
    c.send("0\r\n\r\n");
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 413);
  }
  SUBCASE("a chunked body under the limit is read") {
    raw_client c{port};
    REQUIRE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(nlohmann::json::parse(r->body)["body_size"] == 11);
  }
  SUBCASE("Expect: 100-continue, as curl sends for larger bodies") {
    curl_request post;
    post.method = "POST";
    post.url = url;
    post.body = std::string(3000, 'z');
    post.headers = {"Expect: 100-continue"};
    auto r = curl_fetch(post);
    CHECK(r.status == 200);
    CHECK(nlohmann::json::parse(r.body)["body_size"] == 3000);
    post.headers.clear(); // curl's own choice
    auto plain = curl_fetch(post);
    CHECK(plain.status == 200);
    CHECK(nlohmann::json::parse(plain.body)["body_size"] == 3000);

    raw_client c{port};
    REQUIRE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                   "Expect: 100-continue\r\n\r\n"));
    REQUIRE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n"));
    c.data().clear();
    REQUIRE(c.send("hello"));
    auto ok = c.read_response();
    REQUIRE(ok);
    CHECK(ok->status == 200);
    CHECK(nlohmann::json::parse(ok->body)["body_size"] == 5);
  }
}

TEST_CASE(
  "http server: a route of body_limits takes larger bodies, the others keep max_body_bytes") {
  auto opts = test_options();
  opts.max_body_bytes = 4096;
  opts.body_limits = {{"/files", 20'000}};
  auto srv = start(opts, echo);
  auto port = srv->port();
  auto post = [&](const std::string& path, size_t bytes) {
    curl_request r;
    r.method = "POST";
    r.url = "http://127.0.0.1:" + std::to_string(port) + path;
    r.body = std::string(bytes, 'x');
    r.headers = {"Content-Type: application/octet-stream"};
    return curl_fetch(r);
  };
  auto big = post("/files", 15'000);
  CHECK(big.status == 200);
  CHECK(nlohmann::json::parse(big.body)["body_size"] == 15'000);
  auto too_big = post("/files", 20'001);
  CHECK(too_big.status == 413);
  CHECK(too_big.body.find("20000 bytes") != std::string::npos);
  auto elsewhere = post("/other", 15'000);
  CHECK(elsewhere.status == 413);
  CHECK(elsewhere.body.find("4096 bytes") != std::string::npos);
  // Over every limit: refused with the head, with the route's own limit.
  raw_client c{port};
  REQUIRE(c.send("POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 413);
  CHECK(r->body.find("4096 bytes") != std::string::npos);
  // A chunked body is counted against its route's limit.
  raw_client chunked{port};
  REQUIRE(chunked.send("POST /other HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string chunk = "800\r\n" + std::string(0x800, 'y') + "\r\n";
  for (int i = 0; i < 4; ++i)
    if (!chunked.send(chunk))
      break;
  chunked.send("0\r\n\r\n");
  auto cr = chunked.read_response();
  REQUIRE(cr);
  CHECK(cr->status == 413);
}

TEST_CASE("http server: a head over max_header_bytes is answered 431") {
  auto opts = test_options();
  opts.max_header_bytes = 2048;
  auto srv = start(opts, echo);
  raw_client c{srv->port()};
  REQUIRE(c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 431);
  CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "too_large");
  CHECK(c.read_until_closed());
  CHECK(curl_get(srv->port(), "/", {"X-Small: " + std::string(1000, 'b')}).status == 200);
}

TEST_CASE("http server: a bearer token is needed on every path but the public ones") {
  auto opts = test_options();
  opts.auth_token = "s3cret-token";
  opts.public_paths = {"/healthz", "/", "/assets/*"};
  auto srv = start(opts, echo);
  auto port = srv->port();
  auto none = curl_get(port, "/v1/research");
  CHECK(none.status == 401);
  CHECK(none.field("WWW-Authenticate") == "Bearer");
  CHECK(nlohmann::json::parse(none.body)["error"]["code"] == "unauthorized");
  auto wrong = curl_get(port, "/v1/research", {"Authorization: Bearer s3cret-tokem"});
  CHECK(wrong.status == 401);
  CHECK(curl_get(port, "/v1/research", {"Authorization: Bearer s3cret"}).status == 401);
  CHECK(curl_get(port, "/v1/research", {"Authorization: Basic s3cret-token"}).status == 401);
  CHECK(curl_get(port, "/v1/research", {"Authorization: Bearer s3cret-token"}).status == 200);
  CHECK(curl_get(port, "/v1/research", {"Authorization: bearer s3cret-token"}).status == 200);
  CHECK(curl_get(port, "/healthz").status == 200);
  CHECK(curl_get(port, "/").status == 200);
  CHECK(curl_get(port, "/assets/app.js").status == 200);
  CHECK(curl_get(port, "/healthz/x").status == 401);
  CHECK(curl_get(port, "/assetsx").status == 401);

  // A refused request with a body closes; one without keeps the connection.
  raw_client c{port};
  REQUIRE(c.send("GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = c.read_response();
  REQUIRE(first);
  CHECK(first->status == 401);
  REQUIRE(c.send("GET /v1/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n\r\n"));
  auto second = c.read_response();
  REQUIRE(second);
  CHECK(second->status == 200);
}

TEST_CASE("http server: a non-loopback address without a token is refused") {
  auto opts = test_options();
  opts.host = "0.0.0.0";
  opts.port = 8700;
  auto refused = http::server::start(opts, echo);
  REQUIRE(std::holds_alternative<sdk::error>(refused));
  CHECK(std::get<sdk::error>(refused).message.find(
          "refusing to listen on 0.0.0.0:8700 without server.auth_token")
        == 0);

  opts.port = 0;
  opts.auth_token = "token";
  auto started = http::server::start(opts, echo);
  REQUIRE(std::holds_alternative<std::unique_ptr<http::server>>(started));
  auto& srv = std::get<std::unique_ptr<http::server>>(started);
  CHECK(curl_get(srv->port(), "/x", {"Authorization: Bearer token"}).status == 200);

  // Other start errors name the address and the reason.
  auto local = start(test_options(), echo);
  auto taken = test_options();
  taken.port = local->port();
  auto in_use = http::server::start(taken, echo);
  REQUIRE(std::holds_alternative<sdk::error>(in_use));
  const auto& in_use_msg = std::get<sdk::error>(in_use).message;
  CHECK(in_use_msg.find("127.0.0.1:" + std::to_string(local->port())) != std::string::npos);
  CHECK(in_use_msg.find("in use") != std::string::npos);

  auto unknown = test_options();
  unknown.host = "no-such-host.invalid";
  auto unresolved = http::server::start(unknown, echo);
  REQUIRE(std::holds_alternative<sdk::error>(unresolved));
  CHECK(std::get<sdk::error>(unresolved).message.find("cannot resolve host 'no-such-host.invalid'")
        != std::string::npos);

  auto zero = test_options();
  zero.io_threads = 0;
  CHECK(std::holds_alternative<sdk::error>(http::server::start(zero, echo)));
}

TEST_CASE("http server: CORS headers only for listed origins, preflight answered 204") {
  SUBCASE("off by default") {
    auto srv = start(test_options(), echo);
    auto r = curl_get(srv->port(), "/x", {"Origin: http://localhost:3000"});
    CHECK(r.status == 200);
    CHECK_FALSE(r.has_field("Access-Control-Allow-Origin"));
    curl_request pre;
    pre.method = "OPTIONS";
    pre.url = "http://127.0.0.1:" + std::to_string(srv->port()) + "/x";
    pre.headers = {"Origin: http://localhost:3000", "Access-Control-Request-Method: POST"};
    auto p = curl_fetch(pre);
    CHECK(p.status == 200); // the handler got it (echo), no CORS
    CHECK_FALSE(p.has_field("Access-Control-Allow-Origin"));
  }
  SUBCASE("on for a listed origin") {
    auto opts = test_options();
    opts.cors_origins = {"http://localhost:3000"};
    opts.auth_token = "t";
    auto srv = start(opts, echo);
    auto r = curl_get(srv->port(), "/x",
                      {"Origin: http://localhost:3000", "Authorization: Bearer t"});
    CHECK(r.status == 200);
    CHECK(r.field("Access-Control-Allow-Origin") == "http://localhost:3000");
    CHECK(r.field("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
    CHECK(r.field("Access-Control-Allow-Methods").find("POST") != std::string::npos);
    auto other = curl_get(srv->port(), "/x",
                          {"Origin: http://evil.example", "Authorization: Bearer t"});
    CHECK_FALSE(other.has_field("Access-Control-Allow-Origin"));
    // A 401 carries the CORS fields too, so that the page can read it.
    auto denied = curl_get(srv->port(), "/x", {"Origin: http://localhost:3000"});
    CHECK(denied.status == 401);
    CHECK(denied.field("Access-Control-Allow-Origin") == "http://localhost:3000");

    curl_request pre;
    pre.method = "OPTIONS";
    pre.url = "http://127.0.0.1:" + std::to_string(srv->port()) + "/v1/research";
    pre.headers = {"Origin: http://localhost:3000", "Access-Control-Request-Method: POST",
                   "Access-Control-Request-Headers: authorization, content-type"};
    auto p = curl_fetch(pre); // no token: preflights carry none
    CHECK(p.status == 204);
    CHECK(p.field("Access-Control-Allow-Origin") == "http://localhost:3000");
    CHECK(p.field("Access-Control-Allow-Methods").find("POST") != std::string::npos);
    CHECK(p.body.empty());
  }
}

namespace {

// Sends `head` (a request without a body) on a new connection and reads
// the answer.
reply raw_request(uint16_t port, const std::string& head) {
  raw_client c{port};
  REQUIRE(c.send(head));
  auto r = c.read_response();
  REQUIRE(r);
  return *r;
}

// The answer to `METHOD /path` with the fields `fields` (each ending in
// CR LF).
reply ask(uint16_t port, std::string_view method, const std::string& fields,
          std::string_view path = "/x") {
  return raw_request(port, std::string{method} + " " + std::string{path} + " HTTP/1.1\r\n" + fields
                             + "Content-Length: 0\r\n\r\n");
}

std::string error_code_of(const reply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].value("code", "") : "";
}

http::server_options host_check_options() {
  auto opts = test_options();
  opts.check_host = true;
  return opts;
}

} // namespace

TEST_CASE("http server: host check: without a token only Hosts naming the server are answered") {
  auto srv = start(host_check_options(), echo);
  const auto port = srv->port();
  const auto p = std::to_string(port);
  for (const auto& host : {"127.0.0.1:" + p, "localhost:" + p, "LocalHost:" + p, "[::1]:" + p}) {
    CAPTURE(host);
    for (auto path : {"/x", "/healthz", "/", "/v1/research"})
      CHECK(ask(port, "GET", "Host: " + host + "\r\n", path).status == 200);
  }
  CHECK(curl_get(port, "/v1/research").status == 200); // Host: 127.0.0.1:port

  auto wrong = ask(port, "GET", "Host: attacker.example:" + p + "\r\n");
  CHECK(wrong.status == 403);
  CHECK(error_code_of(wrong) == "forbidden");
  auto message = nlohmann::json::parse(wrong.body)["error"]["message"].get<std::string>();
  CHECK(message.find("'attacker.example:" + p + "'") != std::string::npos);
  CHECK(message.find("server.allowed_hosts") != std::string::npos);
  CHECK(wrong.field("Content-Type") == "application/json");
  // Every path and method, the page and the probes included.
  for (auto path : {"/", "/healthz", "/metrics", "/v1/research", "/v1/chat/completions"})
    CHECK(ask(port, "GET", "Host: attacker.example:" + p + "\r\n", path).status == 403);
  CHECK(ask(port, "DELETE", "Host: attacker.example:" + p + "\r\n", "/v1/research/q1").status
        == 403);
  CHECK(ask(port, "GET", "Host: attacker.example\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: 127.0.0.1:" + std::to_string(port == 65535 ? 1 : port + 1) + "\r\n")
          .status
        == 403);
  // Without a port a Host means port 80 (not this server's).
  CHECK(ask(port, "GET", "Host: localhost\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: 127.0.0.1\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: \r\n").status == 403);
  CHECK(ask(port, "GET", "Host: localhost.:" + p + "\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: 127.0.0.1.attacker.example:" + p + "\r\n").status == 403);
  // HTTP/1.0 may leave Host out; without a token that is refused too.
  auto old = raw_request(port, "GET /x HTTP/1.0\r\n\r\n");
  CHECK(old.status == 403);
  CHECK(error_code_of(old) == "forbidden");
  CHECK(raw_request(port, "GET /x HTTP/1.0\r\nHost: localhost:" + p + "\r\n\r\n").status == 200);
  // HTTP/1.1 without Host stays a framing error.
  CHECK(raw_request(port, "GET /x HTTP/1.1\r\n\r\n").status == 400);

  // A refusal keeps a connection without a body open; one with a body to
  // skip is closed.
  raw_client c{port};
  REQUIRE(c.send("GET /x HTTP/1.1\r\nHost: evil.example:" + p + "\r\n\r\n"));
  auto first = c.read_response();
  REQUIRE(first);
  CHECK(first->status == 403);
  REQUIRE(c.send("GET /x HTTP/1.1\r\nHost: localhost:" + p + "\r\n\r\n"));
  auto second = c.read_response();
  REQUIRE(second);
  CHECK(second->status == 200);
  raw_client b{port};
  REQUIRE(
    b.send("POST /x HTTP/1.1\r\nHost: evil.example:" + p + "\r\nContent-Length: 5\r\n\r\nhello"));
  auto refused = b.read_response();
  REQUIRE(refused);
  CHECK(refused->status == 403);
  CHECK(refused->field("Connection") == "close");
  CHECK(b.read_until_closed());
}

TEST_CASE("http server: host check: further Hosts come from allowed_hosts") {
  auto opts = host_check_options();
  opts.allowed_hosts = {"Quarry.LAN", "devbox:9000", "[fe80::1]", "plain:80"};
  auto srv = start(opts, echo);
  const auto port = srv->port();
  const auto p = std::to_string(port);
  CHECK(ask(port, "GET", "Host: quarry.lan:" + p + "\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: QUARRY.lan:" + p + "\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: quarry.lan:9000\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: devbox:9000\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: devbox:" + p + "\r\n").status == 403);
  CHECK(ask(port, "GET", "Host: [fe80::1]:" + p + "\r\n").status == 200);
  // `plain:80` is also `plain` without a port (the default port of http).
  CHECK(ask(port, "GET", "Host: plain\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: plain:80\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: localhost:" + p + "\r\n").status == 200);
  CHECK(ask(port, "GET", "Host: other.lan:" + p + "\r\n").status == 403);
  // ... and their pages may post.
  CHECK(
    ask(port, "POST", "Host: localhost:" + p + "\r\nOrigin: http://quarry.lan:" + p + "\r\n").status
    == 200);
  CHECK(ask(port, "POST", "Host: localhost:" + p + "\r\nOrigin: http://plain\r\n").status == 200);

  for (std::string bad :
       {"", "a b", "http://quarry.lan", "quarry.lan/x", "quarry.lan:99999", "::1", "user@host"}) {
    CAPTURE(bad);
    auto o = host_check_options();
    o.allowed_hosts = {bad};
    auto refused = http::server::start(o, echo);
    REQUIRE(std::holds_alternative<sdk::error>(refused));
    CHECK(std::get<sdk::error>(refused).message.find("server.allowed_hosts: '" + bad + "'") == 0);
  }
  for (std::string bad :
       {"localhost:3000", "http://x/path", "null", "ftp://x", "http://", "http://u@x"}) {
    CAPTURE(bad);
    auto o = host_check_options();
    o.allowed_origins = {bad};
    auto refused = http::server::start(o, echo);
    REQUIRE(std::holds_alternative<sdk::error>(refused));
    CHECK(std::get<sdk::error>(refused).message.find("server.allowed_origins: '" + bad + "'") == 0);
  }
}

TEST_CASE("http server: host check: requests that change state need an allowed Origin") {
  auto opts = host_check_options();
  opts.allowed_origins = {"http://localhost:3000", "https://Quarry.example/"};
  opts.cors_origins = {"http://127.0.0.1:5173"};
  auto srv = start(opts, echo);
  const auto port = srv->port();
  const auto p = std::to_string(port);
  const auto host = "Host: 127.0.0.1:" + p + "\r\n";
  for (auto method : {"POST", "DELETE", "PUT", "PATCH"}) {
    CAPTURE(method);
    // No Origin: a client that is not a browser.
    CHECK(ask(port, method, host).status == 200);
    for (const auto& ok :
         {"http://127.0.0.1:" + p, "http://localhost:" + p, "http://[::1]:" + p,
          std::string{"http://localhost:3000"}, std::string{"https://quarry.example"},
          std::string{"https://quarry.example:443"}, std::string{"http://127.0.0.1:5173"}}) {
      CAPTURE(ok);
      CHECK(ask(port, method, host + "Origin: " + ok + "\r\n").status == 200);
    }
    for (const auto& bad :
         {std::string{"http://evil.example"}, std::string{"null"}, "https://127.0.0.1:" + p,
          "http://127.0.0.1:" + p + "0", std::string{"http://localhost"},
          std::string{"http://quarry.example"}, std::string{"http://localhost:3001"},
          std::string{""}, std::string{"garbage"}}) {
      CAPTURE(bad);
      auto r = ask(port, method, host + "Origin: " + bad + "\r\n");
      CHECK(r.status == 403);
      CHECK(error_code_of(r) == "forbidden");
    }
  }
  auto refused = ask(port, "POST", host + "Origin: null\r\n", "/v1/research");
  CHECK(nlohmann::json::parse(refused.body)["error"]["message"].get<std::string>().find(
          "server.allowed_origins")
        != std::string::npos);
  // Reads from a foreign page with the right Host are answered: the
  // browser keeps their answers from the page (no CORS fields).
  auto read = ask(port, "GET", host + "Origin: http://evil.example\r\n", "/v1/research");
  CHECK(read.status == 200);
  CHECK_FALSE(read.has_field("Access-Control-Allow-Origin"));
  curl_request head;
  head.method = "HEAD";
  head.url = "http://127.0.0.1:" + p + "/x";
  head.headers = {"Origin: null"};
  CHECK(curl_fetch(head).status == 200);
  CHECK(ask(port, "OPTIONS", host + "Origin: http://evil.example\r\n").status == 200);
  // A right Origin does not make up for a wrong Host.
  CHECK(ask(port, "POST", "Host: evil.example:" + p + "\r\nOrigin: http://127.0.0.1:" + p + "\r\n")
          .status
        == 403);
}

TEST_CASE("http server: host check: with a token neither Host nor Origin is checked") {
  auto opts = host_check_options();
  opts.auth_token = "s3cret-token";
  opts.public_paths = {"/healthz", "/"};
  auto srv = start(opts, echo);
  const auto port = srv->port();
  const auto p = std::to_string(port);
  const std::string bearer = "Authorization: Bearer s3cret-token\r\n";
  // A rebound page cannot send the token: the API answers it 401.
  CHECK(ask(port, "GET", "Host: attacker.example\r\n", "/v1/research").status == 401);
  CHECK(ask(port, "DELETE", "Host: attacker.example\r\nOrigin: http://attacker.example\r\n",
            "/v1/research/q1")
          .status
        == 401);
  CHECK(ask(port, "GET", "Host: attacker.example\r\n", "/healthz").status == 200);
  CHECK(ask(port, "GET", "Host: quarry.example.com\r\n" + bearer, "/v1/research").status == 200);
  CHECK(ask(port, "POST",
            "Host: quarry.example.com\r\nOrigin: https://quarry.example.com\r\n" + bearer,
            "/v1/research")
          .status
        == 200);
  CHECK(ask(port, "POST", "Host: 127.0.0.1:" + p + "\r\nOrigin: null\r\n" + bearer).status == 200);
}

TEST_CASE("http server: keep-alive serves several requests on one connection") {
  auto srv = start(test_options(), echo);
  raw_client c{srv->port()};
  REQUIRE(c.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = c.read_response();
  REQUIRE(first);
  CHECK(nlohmann::json::parse(first->body)["path"] == "/one");
  CHECK_FALSE(first->has_field("Connection"));
  REQUIRE(c.send("POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                 "GET /three HTTP/1.1\r\nHost: x\r\n\r\n")); // pipelined
  auto second = c.read_response();
  REQUIRE(second);
  CHECK(nlohmann::json::parse(second->body)["body_size"] == 3);
  auto third = c.read_response();
  REQUIRE(third);
  CHECK(nlohmann::json::parse(third->body)["path"] == "/three");
  CHECK(srv->stats().open_connections == 1);

  // HTTP/1.0 closes unless asked to keep alive.
  raw_client old{srv->port()};
  REQUIRE(old.send("GET /old HTTP/1.0\r\n\r\n"));
  auto r = old.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(nlohmann::json::parse(r->body)["version"] == 10);
  CHECK(old.read_until_closed());
  raw_client kept{srv->port()};
  REQUIRE(kept.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  auto a = kept.read_response();
  REQUIRE(a);
  CHECK(a->field("Connection") == "keep-alive");
  REQUIRE(kept.send("GET /b HTTP/1.0\r\n\r\n"));
  CHECK(kept.read_response());
}

TEST_CASE("http server: a responder answers later from another thread") {
  std::mutex mtx;
  std::vector<std::shared_ptr<http::responder>> waiting;
  auto srv = start(test_options(), [&](http::request, std::shared_ptr<http::responder> res) {
    std::lock_guard<std::mutex> guard{mtx};
    waiting.push_back(std::move(res));
  });
  std::thread answerer{[&] {
    REQUIRE(eventually([&] {
      std::lock_guard<std::mutex> guard{mtx};
      return waiting.size() == 1;
    }));
    std::lock_guard<std::mutex> guard{mtx};
    CHECK(waiting[0]->respond(http::json_response(201, {{"late", true}})));
    CHECK_FALSE(waiting[0]->respond(http::json_response(200, {})));
    CHECK(waiting[0]->answered());
  }};
  auto r = curl_get(srv->port(), "/later");
  answerer.join();
  CHECK(r.status == 201);
  CHECK(r.body == R"({"late":true})");
}

TEST_CASE("http server: a dropped responder answers 500") {
  auto srv = start(test_options(), [](http::request, std::shared_ptr<http::responder>) {});
  auto r = curl_get(srv->port(), "/dropped");
  CHECK(r.status == 500);
  CHECK(nlohmann::json::parse(r.body)["error"]["code"] == "internal");
  auto stats = srv->stats();
  CHECK(stats.responses_by_status[500] == 1);
}

namespace {

// A server whose handler turns every request into an event stream and
// keeps the streams.
struct stream_fixture {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::shared_ptr<http::event_stream>> streams;
  std::vector<http::request> requests;
  std::atomic<int> closes{0};

  http::handler handler() {
    return [this](http::request req, std::shared_ptr<http::responder> res) {
      auto stream = res->start_events({{"X-Session", "q1"}});
      std::lock_guard<std::mutex> guard{mtx};
      requests.push_back(std::move(req));
      if (stream) {
        stream->on_close([this] {
          ++closes;
          cv.notify_all();
        });
        streams.push_back(std::move(stream));
      }
      cv.notify_all();
    };
  }

  std::shared_ptr<http::event_stream> wait_stream(size_t n = 1) {
    std::unique_lock<std::mutex> guard{mtx};
    if (!cv.wait_for(guard, hang_guard, [&] { return streams.size() >= n; }))
      return nullptr;
    return streams[n - 1];
  }

  bool wait_closes(int n) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, hang_guard, [&] { return closes.load() >= n; });
  }
};

} // namespace

TEST_CASE("http server: event streams frame events and see Last-Event-ID") {
  stream_fixture fx;
  auto srv = start(test_options(), fx.handler());
  raw_client c{srv->port()};
  REQUIRE(c.send("GET /v1/research/q1/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 16\r\n\r\n"));
  auto stream = fx.wait_stream();
  REQUIRE(stream);
  {
    std::lock_guard<std::mutex> guard{fx.mtx};
    CHECK(fx.requests[0].header("Last-Event-ID") == std::optional<std::string_view>{"16"});
  }
  CHECK(stream->send("17", "packet", R"({"seq":17})"));
  CHECK(stream->send("18", "", "line one\nline two\r\nline three\rfour"));
  CHECK(stream->send("", "", ""));
  CHECK_FALSE(stream->send("1\n2", "packet", "x"));
  CHECK_FALSE(stream->send("3", "bad\revent", "x"));
  CHECK(stream->comment("note\nsecond"));
  CHECK(stream->end("end", R"({"state":"completed"})"));
  CHECK(stream->closed());
  CHECK_FALSE(stream->send("19", "packet", "late"));
  REQUIRE(c.read_until_closed());
  const auto& data = c.data();
  auto body_at = data.find("\r\n\r\n");
  REQUIRE(body_at != std::string::npos);
  auto head = data.substr(0, body_at + 2);
  CHECK(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(head.find("Content-Type: text/event-stream\r\n") != std::string::npos);
  CHECK(head.find("Cache-Control: no-cache\r\n") != std::string::npos);
  CHECK(head.find("X-Accel-Buffering: no\r\n") != std::string::npos);
  CHECK(head.find("X-Session: q1\r\n") != std::string::npos);
  CHECK(data.substr(body_at + 4)
        == "id: 17\nevent: packet\ndata: {\"seq\":17}\n\n"
           "id: 18\ndata: line one\ndata: line two\ndata: line three\ndata: four\n\n"
           "data: \n\n"
           ": note\n: second\n\n"
           "event: end\ndata: {\"state\":\"completed\"}\n\n");
  CHECK(fx.wait_closes(1));
  CHECK(eventually([&] { return srv->stats().open_event_streams == 0; }));
  CHECK(srv->stats().responses_by_status[200] == 1);
}

TEST_CASE("http server: heartbeat comments arrive on a quiet stream") {
  stream_fixture fx;
  auto opts = test_options();
  opts.heartbeat = 20ms;
  auto srv = start(opts, fx.handler());
  raw_client c{srv->port()};
  REQUIRE(c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(fx.wait_stream());
  REQUIRE(c.read_until(": heartbeat\n\n"));
  auto first = c.data().find(": heartbeat\n\n");
  CHECK(c.read_until(": heartbeat\n\n", first + 1));
}

TEST_CASE("http server: a client that goes away fires on_close") {
  stream_fixture fx;
  auto srv = start(test_options(), fx.handler());
  {
    raw_client c{srv->port()};
    REQUIRE(c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto stream = fx.wait_stream();
    REQUIRE(stream);
    REQUIRE(c.read_until("\r\n\r\n"));
    CHECK(srv->stats().open_event_streams == 1);
    CHECK_FALSE(stream->closed());
  } // the client closes while the stream is idle
  CHECK(fx.wait_closes(1));
  CHECK(fx.streams[0]->closed());
  CHECK_FALSE(fx.streams[0]->send("1", "packet", "x"));
  CHECK(eventually([&] { return srv->stats().open_event_streams == 0; }));
  CHECK(eventually([&] { return srv->stats().open_connections == 0; }));
  // A callback set after the close runs at once.
  bool called = false;
  fx.streams[0]->on_close([&] { called = true; });
  CHECK(called);
}

TEST_CASE("http server: on_close may be replaced and may hold the stream") {
  std::mutex mtx;
  std::shared_ptr<http::event_stream> kept;
  std::atomic<int> first{0};
  std::atomic<int> second{0};
  auto srv = start(test_options(), [&](http::request, std::shared_ptr<http::responder> res) {
    auto stream = res->start_events();
    // The first callback holds the stream; replacing it drops that hold.
    stream->on_close([stream, &first] { ++first; });
    stream->on_close([&second] { ++second; });
    std::lock_guard<std::mutex> guard{mtx};
    kept = stream;
  });
  {
    raw_client c{srv->port()};
    REQUIRE(c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
    REQUIRE(c.read_until("\r\n\r\n"));
  }
  CHECK(eventually([&] { return second.load() == 1; }));
  CHECK(first.load() == 0);
  std::lock_guard<std::mutex> guard{mtx};
  CHECK(kept.use_count() == 1);
  kept.reset();
}

TEST_CASE("http server: a client that does not read is cut off at the queue limit") {
  stream_fixture fx;
  auto opts = test_options();
  opts.max_event_queue_bytes = 64 * 1024;
  auto srv = start(opts, fx.handler());
  raw_client c{srv->port(), 4096};
  REQUIRE(c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto stream = fx.wait_stream();
  REQUIRE(stream);
  const std::string payload(16 * 1024, 'p');
  bool refused = false;
  // At most 256 MiB: far more than the socket buffers hold.
  for (int i = 0; i < 16 * 1024 && !refused; ++i)
    refused = !stream->send(std::to_string(i), "packet", payload);
  CHECK(refused);
  CHECK(fx.wait_closes(1));
  CHECK(stream->closed());
  CHECK(eventually([&] { return srv->stats().open_event_streams == 0; }));
}

TEST_CASE("http server: stop ends open streams and answers waiting requests") {
  std::mutex mtx;
  std::vector<std::shared_ptr<http::event_stream>> streams;
  std::shared_ptr<http::responder> waiting;
  std::atomic<int> closes{0};
  auto opts = test_options();
  opts.stop_timeout = 2s;
  auto srv = start(opts, [&](http::request req, std::shared_ptr<http::responder> res) {
    std::lock_guard<std::mutex> guard{mtx};
    if (req.path == "/events") {
      auto s = res->start_events();
      s->on_close([&] { ++closes; });
      streams.push_back(std::move(s));
    } else {
      waiting = std::move(res);
    }
  });
  raw_client a{srv->port()};
  raw_client b{srv->port()};
  raw_client w{srv->port()};
  raw_client idle{srv->port()};
  REQUIRE(a.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(b.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(w.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> guard{mtx};
    return streams.size() == 2 && waiting;
  }));
  REQUIRE(a.read_until("\r\n\r\n"));
  REQUIRE(b.read_until("\r\n\r\n"));
  srv->stop(R"({"state":"interrupted"})");
  CHECK(srv->stopping());
  for (auto* c : {&a, &b}) {
    CHECK(c->read_until_closed());
    CHECK(c->data().find("event: end\ndata: {\"state\":\"interrupted\"}\n\n") != std::string::npos);
  }
  auto r = w.read_response();
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "unavailable");
  CHECK(idle.read_until_closed());
  CHECK(closes.load() == 2);
  CHECK(srv->stats().open_connections == 0);
  // Answers and streams that outlive the stop do nothing.
  {
    std::lock_guard<std::mutex> guard{mtx};
    (void)waiting->respond(http::json_response(200, {})); // dropped
    CHECK_FALSE(streams[0]->send("1", "packet", "x"));
    CHECK(streams[0]->closed());
  }
  srv->stop(); // idempotent
  srv.reset();
  std::lock_guard<std::mutex> guard{mtx};
  waiting.reset();
  streams.clear();
}

TEST_CASE("http server: a responder kept past the server's end does nothing") {
  std::shared_ptr<http::responder> kept;
  std::mutex mtx;
  {
    auto opts = test_options();
    opts.stop_timeout = 300ms;
    auto srv = start(opts, [&](http::request, std::shared_ptr<http::responder> res) {
      std::lock_guard<std::mutex> guard{mtx};
      kept = std::move(res);
    });
    raw_client c{srv->port()};
    REQUIRE(c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n"));
    REQUIRE(eventually([&] {
      std::lock_guard<std::mutex> guard{mtx};
      return kept != nullptr;
    }));
  } // the server stops and goes
  std::lock_guard<std::mutex> guard{mtx};
  CHECK(kept->respond(http::json_response(200, {})));
  CHECK(kept->start_events() == nullptr);
  kept.reset();
}

TEST_CASE("http server: connections over the limit are answered 429 with Retry-After") {
  auto opts = test_options();
  opts.max_connections = 2;
  opts.retry_after_seconds = 7;
  auto srv = start(opts, echo);
  raw_client a{srv->port()};
  raw_client b{srv->port()};
  REQUIRE(eventually([&] { return srv->stats().open_connections == 2; }));
  raw_client c{srv->port()};
  REQUIRE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 429);
  CHECK(r->field("Retry-After") == "7");
  CHECK(nlohmann::json::parse(r->body)["error"]["code"] == "busy");
  CHECK(c.read_until_closed());
  // The first two are served.
  REQUIRE(a.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto ok = a.read_response();
  REQUIRE(ok);
  CHECK(ok->status == 200);
  a.close();
  REQUIRE(eventually([&] { return srv->stats().open_connections == 1; }));
  CHECK(curl_get(srv->port(), "/again").status == 200);
}

TEST_CASE("http server: event streams over the limit are answered 429") {
  stream_fixture fx;
  auto opts = test_options();
  opts.max_event_streams = 1;
  auto srv = start(opts, fx.handler());
  raw_client a{srv->port()};
  REQUIRE(a.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(fx.wait_stream());
  auto r = curl_get(srv->port(), "/events");
  CHECK(r.status == 429);
  CHECK_FALSE(r.field("Retry-After").empty());
}

TEST_CASE("http server: a slow head is cut off after header_timeout") {
  auto opts = test_options();
  opts.header_timeout = 300ms;
  auto srv = start(opts, echo);
  raw_client c{srv->port()};
  REQUIRE(c.send("GET / HTTP/1.1\r\nHost: x\r\n"));
  // Trickling bytes does not extend the time allowed for the head.
  auto deadline = std::chrono::steady_clock::now() + hang_guard;
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    if (!c.send("X"))
      break;
    closed = !c.read_some(50ms);
  }
  CHECK((closed || c.eof() || !c.send("X")));
  CHECK(eventually([&] { return srv->stats().open_connections == 0; }));
}

TEST_CASE("http server: an idle keep-alive connection is closed after idle_timeout") {
  auto opts = test_options();
  opts.idle_timeout = 200ms;
  auto srv = start(opts, echo);
  raw_client c{srv->port()};
  REQUIRE(c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(c.read_until_closed());
  CHECK(eventually([&] { return srv->stats().open_connections == 0; }));
}

TEST_CASE("http server: 200 parallel clients are all answered") {
  std::atomic<int> handled{0};
  auto srv = start(test_options(), [&](http::request req, std::shared_ptr<http::responder> res) {
    ++handled;
    // Half are answered from other threads.
    if (req.path == "/async") {
      std::thread{[res] { res->respond(http::json_response(200, {{"ok", true}})); }}.detach();
      return;
    }
    res->respond(http::json_response(200, {{"ok", true}}));
  });
  constexpr int clients = 200;
  std::atomic<int> answered{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < clients; ++i) {
    pool.emplace_back([&, i] {
      auto r = curl_get(srv->port(), i % 2 == 0 ? "/async" : "/sync");
      if (r.status == 200 && r.body == R"({"ok":true})")
        ++answered;
    });
  }
  for (auto& t : pool)
    t.join();
  CHECK(answered.load() == clients);
  CHECK(handled.load() == clients);
  CHECK(srv->stats().responses_by_status[200] == static_cast<uint64_t>(clients));
}

// -- request framing (RFC 9112 sections 3.2, 5 and 6) -------------------------
//
// Each refused head is sent with a second request right behind it, as a
// request smuggler would: `GET /smuggled` (with Connection: close, so that a
// server that wrongly runs it ends the connection at once). The server must
// answer the first with 400 and close, and never run the second.

namespace {

// The second request of every smuggling attempt.
constexpr std::string_view smuggled_request
  = "GET /smuggled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

// A server that counts the requests for /smuggled and otherwise answers with
// what it saw: method, path, body, and the names of the header fields.
struct framing_server {
  std::atomic<int> smuggled{0};
  std::unique_ptr<http::server> srv;

  framing_server() {
    srv = start(test_options(), [this](http::request req, std::shared_ptr<http::responder> res) {
      if (req.path == "/smuggled")
        ++smuggled;
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [name, value] : req.headers)
        names.push_back(name);
      res->respond(http::json_response(
        200, {{"method", req.method}, {"path", req.path}, {"body", req.body}, {"headers", names}}));
    });
  }

  // Sends `bytes` and the smuggled request on a new connection, and checks
  // that the server answered 400 bad_request, then closed the connection
  // with nothing more sent, and never ran /smuggled.
  void check_refused(const std::string& bytes) {
    CAPTURE(bytes);
    const int smuggled_before = smuggled.load();
    raw_client c{srv->port()};
    REQUIRE(c.send(bytes + std::string{smuggled_request}));
    check_bad_request_closed(c);
    CHECK(c.data().empty()); // no answer to the smuggled request
    CHECK(smuggled.load() == smuggled_before);
  }
};

} // namespace

TEST_CASE("http server: framing: a Transfer-Encoding not ending in chunked is 400 and closed") {
  // RFC 9112 section 6.3: the body length cannot be known. Beast read such a
  // head as one without a body and ran the bytes after it as a request.
  framing_server s;
  for (const char* coding :
       {"gzip", "identity", "chunked, identity", "chunked, gzip", "xchunked", "chunked-x", ""})
    s.check_refused(std::string{"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "} + coding
                    + "\r\n\r\n");
  // The codings of all Transfer-Encoding fields form one list.
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Transfer-Encoding: gzip\r\n\r\n");
}

TEST_CASE("http server: framing: unknown transfer codings are 400 and closed") {
  // The server decodes no coding but chunked (RFC 9112 section 6.1). Beast
  // read the chunked body and passed it on still encoded.
  framing_server s;
  const std::string body = "5\r\nhello\r\n0\r\n\r\n";
  for (const char* coding : {"gzip, chunked", "foo, chunked", "chunked;ext=1"})
    s.check_refused(std::string{"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "} + coding
                    + "\r\n\r\n" + body);
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n"
                  + body);
}

TEST_CASE("http server: framing: chunked applied more than once is 400 and closed") {
  // RFC 9112 section 6.1. Beast read `chunked, chunked` as no body at all.
  framing_server s;
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked"
                  "\r\n\r\n");
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
}

TEST_CASE("http server: framing: Content-Length with Transfer-Encoding is 400 and closed") {
  // RFC 9112 section 6.1: treated as an error, then the connection closes.
  // Beast framed `Transfer-Encoding: gzip` + Content-Length by the length.
  framing_server s;
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
                  "Content-Length: 0\r\n\r\n");
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n"
                  "Content-Length: 5\r\n\r\nhello");
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  s.check_refused("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Length: 5\r\n\r\n0\r\n\r\n");
}

TEST_CASE("http server: framing: differing or invalid Content-Length values are 400 and closed") {
  // RFC 9112 section 6.3, RFC 9110 section 8.6.
  framing_server s;
  for (const char* fields :
       {"Content-Length: 5\r\nContent-Length: 6", "Content-Length: 5, 6",
        "Content-Length: 0\r\nContent-Length: 0, 1", "Content-Length: +5", "Content-Length: -1",
        "Content-Length: 1 0", "Content-Length: 0x5", "Content-Length: 5a",
        "Content-Length: ", "Content-Length: 5,", "Content-Length: 18446744073709551616",
        "Content-Length: 99999999999999999999999"})
    s.check_refused(std::string{"POST /upload HTTP/1.1\r\nHost: x\r\n"} + fields + "\r\n\r\nhello");
}

TEST_CASE("http server: framing: obsolete line folding is 400 and closed") {
  // RFC 9112 section 5.2. Beast joined a folded line to the field before it,
  // so `Transfer-Encoding:` + a folded `chunked` framed a chunked body that a
  // front end reading the lines one by one does not see.
  framing_server s;
  s.check_refused("GET /a HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n");
  s.check_refused("GET /a HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n\tb\r\n\r\n");
  s.check_refused("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"
                  "0\r\n\r\n");
  // Whitespace before the first field line (RFC 9112 section 2.2).
  s.check_refused("GET /a HTTP/1.1\r\n Host: x\r\n\r\n");
}

TEST_CASE("http server: framing: a missing, repeated or invalid Host is 400 and closed") {
  // RFC 9112 section 3.2.
  framing_server s;
  s.check_refused("GET /a HTTP/1.1\r\n\r\n");
  s.check_refused("GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n");
  s.check_refused("GET /a HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n");
  s.check_refused("GET /a HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n");
  for (const char* host : {"a b", "x/y", "user@x", "x:80a", "[::1", "x?", "%zz"})
    s.check_refused(std::string{"GET /a HTTP/1.1\r\nHost: "} + host + "\r\n\r\n");
}

TEST_CASE("http server: framing: whitespace before a header colon is 400 and closed") {
  // RFC 9112 section 5.1.
  framing_server s;
  s.check_refused("GET /a HTTP/1.1\r\nHost : x\r\n\r\n");
  s.check_refused("GET /a HTTP/1.1\r\nHost: x\r\nX-A\t: b\r\n\r\n");
  s.check_refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello");
  s.check_refused("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n"
                  "0\r\n\r\n");
}

TEST_CASE("http server: framing: Transfer-Encoding in an HTTP/1.0 request is 400 and closed") {
  // RFC 9112 section 6.1: faulty framing. Beast read a chunked body.
  framing_server s;
  s.check_refused("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  s.check_refused("POST /a HTTP/1.0\r\nConnection: keep-alive\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
}

TEST_CASE("http server: framing: chunked and Content-Length bodies work on a kept-alive link") {
  framing_server s;
  raw_client c{s.srv->port()};
  auto next = [&c](std::string_view expect_body) {
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK_FALSE(r->has_field("Connection"));
    auto j = nlohmann::json::parse(r->body);
    CHECK(j["body"] == expect_body);
    return j;
  };
  // A chunked body with a chunk extension and a trailer field: the trailer
  // is not merged into the header fields (RFC 9110 section 6.5.1).
  REQUIRE(c.send("POST /one HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"));
  auto first = next("hello world");
  CHECK(first["headers"] == nlohmann::json::array({"Host", "Transfer-Encoding"}));
  // Codings are case-insensitive, empty list elements are allowed.
  REQUIRE(c.send("POST /two HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: , Chunked \r\n\r\n"
                 "3\r\nabc\r\n0\r\n\r\n"));
  next("abc");
  // Content-Length, also repeated with the same value; pipelined.
  REQUIRE(c.send("POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                 "POST /four HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                 "Content-Length: 3\r\n\r\nabc"
                 "POST /five HTTP/1.1\r\nHost: x\r\nContent-Length: 003, 3\r\n\r\nxyz"
                 "GET /six HTTP/1.1\r\nHost: [::1]:8700\r\n\r\n"
                 "GET /seven HTTP/1.1\r\nHost: \r\n\r\n"));
  next("hello");
  next("abc");
  next("xyz");
  CHECK(next("")["path"] == "/six");
  CHECK(next("")["path"] == "/seven");
  c.read_some(50ms);
  CHECK_FALSE(c.eof());
  CHECK(s.srv->stats().open_connections == 1);
  CHECK(s.smuggled.load() == 0);
}

} // namespace http_server_test
