// Standalone HTTP test server: prints its port on stdout, then serves a few
// demo routes on 127.0.0.1 until it is killed.

#include "support/http_server.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <signal.h>
#include <unistd.h>

using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;

int main() {
  // Block the termination signals so that sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  http_server server;
  // GET /: a greeting.
  server.route("GET", "/",
               [](const request&) { return response_plan::text(200, "quarry test server\n"); });
  // Any method on /echo: the request body, with its content type.
  server.route("*", "/echo", [](const request& req) {
    return response_plan::text(200, req.body,
                               req.header("Content-Type").value_or("application/octet-stream"));
  });
  // GET /bytes?n=N&chunk=K: N bytes generated lazily (chunked).
  server.route("GET", "/bytes", [](const request& req) {
    auto n = req.param_int("n", 1024);
    auto chunk = req.param_int("chunk", 64 * 1024);
    return response_plan{200}
      .header("Content-Type", "application/octet-stream")
      .chunked()
      .generate(static_cast<uint64_t>(std::max<int64_t>(n, 0)),
                static_cast<size_t>(std::max<int64_t>(chunk, 1)));
  });
  // GET /stream?count=N&delay_ms=D: N server-sent events, D ms apart.
  server.route("GET", "/stream", [](const request& req) {
    auto count = req.param_int("count", 5);
    auto delay = std::chrono::milliseconds{req.param_int("delay_ms", 100)};
    response_plan plan{200};
    plan.header("Content-Type", "text/event-stream").chunked();
    for (int64_t i = 0; i < count; ++i) {
      if (i > 0)
        plan.delay(delay);
      plan.send("data: " + std::to_string(i) + "\n\n");
    }
    return plan;
  });
  // GET /status?code=C: an empty answer with status C.
  server.route("GET", "/status", [](const request& req) {
    return response_plan{static_cast<int>(req.param_int("code", 200))};
  });
  // GET /redirect?to=URL: a 302 to URL.
  server.route("GET", "/redirect", [](const request& req) {
    return response_plan::redirect(302, req.param("to").value_or("/"));
  });
  // GET /stall: headers and one chunk, then silence.
  server.route("GET", "/stall", [](const request&) {
    return response_plan{200}.chunked().send("waiting...\n").stall();
  });
  std::printf("%u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  server.stop();
  return 0;
}
