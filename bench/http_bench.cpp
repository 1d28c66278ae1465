// Benchmark of quarry_http (the server of `quarry serve`) on loopback:
//
// 1. Requests/s of a trivial JSON GET over keep-alive connections, one
//    blocking raw-socket client per thread, at several thread counts.
// 2. N concurrent Server-Sent Events clients on one stream: the time until
//    every client received E events (one epoll thread reads all clients).
//
// Usage: quarry_bench_http_server [--threads 1,4,16] [--seconds 3]
//        [--io-threads 2] [--sse-clients 1000] [--events 100] [--repeat 1]

#include "process_usage.hpp"

#include "quarry/http/server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace http = quarry::http;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
  std::vector<int> threads = {1, 4, 16};
  double seconds = 3;
  size_t io_threads = 2;
  int sse_clients = 1000;
  int events = 100;
  int repeat = 1;
};

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::unique_ptr<http::server> start_server(const settings& s, http::handler fn) {
  http::server_options opts;
  opts.port = 0;
  opts.io_threads = s.io_threads;
  opts.max_connections = 100000;
  opts.max_event_streams = 100000;
  opts.heartbeat = std::chrono::hours{1};
  auto started = http::server::start(opts, std::move(fn));
  if (auto* err = std::get_if<quarry::sdk::error>(&started)) {
    std::fprintf(stderr, "cannot start the server: %s\n", err->message.c_str());
    std::exit(1);
  }
  return std::move(std::get<std::unique_ptr<http::server>>(started));
}

// One keep-alive client: GET, read the response (Content-Length), repeat.
void request_loop(uint16_t port, clock_type::time_point until, std::vector<double>& latencies_us,
                  std::atomic<long>& failures) {
  int fd = connect_to(port);
  if (fd < 0) {
    ++failures;
    return;
  }
  static const std::string req = "GET /ping HTTP/1.1\r\nHost: bench\r\n\r\n";
  std::string buf;
  char chunk[4096];
  while (clock_type::now() < until) {
    auto t0 = clock_type::now();
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      ++failures;
      break;
    }
    buf.clear();
    size_t need = std::string::npos;
    while (true) {
      auto n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) {
        ++failures;
        ::close(fd);
        return;
      }
      buf.append(chunk, static_cast<size_t>(n));
      if (need == std::string::npos) {
        auto end = buf.find("\r\n\r\n");
        if (end == std::string::npos)
          continue;
        auto cl = buf.find("Content-Length: ");
        if (cl == std::string::npos || buf.compare(9, 3, "200") != 0) {
          ++failures;
          ::close(fd);
          return;
        }
        need = end + 4 + std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
      }
      if (buf.size() >= need)
        break;
    }
    latencies_us.push_back(
      std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  ::close(fd);
}

void bench_requests(const settings& s) {
  auto srv = start_server(s, [](http::request, std::shared_ptr<http::responder> res) {
    res->respond(http::json_response(200, {{"ok", true}}));
  });
  std::printf("\n## Keep-alive GET (server io_threads=%zu)\n\n", s.io_threads);
  std::printf("| client threads | req/s | p50 | p99 | CPU/req (process) | failures |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (int round = 0; round < s.repeat; ++round) {
    for (int n : s.threads) {
      std::vector<std::vector<double>> lat(static_cast<size_t>(n));
      std::atomic<long> failures{0};
      auto cpu0 = quarry::bench::process_cpu_seconds();
      auto t0 = clock_type::now();
      auto until = t0
                   + std::chrono::duration_cast<clock_type::duration>(
                     std::chrono::duration<double>(s.seconds));
      std::vector<std::thread> pool;
      for (int i = 0; i < n; ++i)
        pool.emplace_back(
          [&, i] { request_loop(srv->port(), until, lat[static_cast<size_t>(i)], failures); });
      for (auto& t : pool)
        t.join();
      double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
      double cpu = quarry::bench::process_cpu_seconds() - cpu0;
      std::vector<double> all;
      for (auto& v : lat)
        all.insert(all.end(), v.begin(), v.end());
      std::sort(all.begin(), all.end());
      auto pct = [&](double p) {
        if (all.empty())
          return 0.0;
        return all[std::min(all.size() - 1,
                            static_cast<size_t>(p * static_cast<double>(all.size())))];
      };
      double rps = static_cast<double>(all.size()) / elapsed;
      std::printf("| %d | %.0f | %.0f us | %.0f us | %.1f us | %ld |\n", n, rps, pct(0.5),
                  pct(0.99), all.empty() ? 0.0 : cpu / static_cast<double>(all.size()) * 1e6,
                  failures.load());
      std::fflush(stdout);
    }
  }
}

void bench_events(const settings& s) {
  std::mutex mtx;
  std::vector<std::shared_ptr<http::event_stream>> streams;
  auto srv = start_server(s, [&](http::request, std::shared_ptr<http::responder> res) {
    auto stream = res->start_events();
    if (stream) {
      std::lock_guard<std::mutex> guard{mtx};
      streams.push_back(std::move(stream));
    }
  });
  std::printf("\n## %d SSE clients on one stream, %d events each (server io_threads=%zu)\n\n",
              s.sse_clients, s.events, s.io_threads);
  std::printf("| clients | events | seconds to deliver all | events delivered/s | "
              "CPU (process) | RSS |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (int round = 0; round < s.repeat; ++round) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      streams.clear();
    }
    int ep = epoll_create1(0);
    struct client {
      int fd = -1;
      int events = 0;
      char last = 0;
    };
    std::vector<client> clients(static_cast<size_t>(s.sse_clients));
    static const std::string req = "GET /events HTTP/1.1\r\nHost: bench\r\n\r\n";
    for (size_t i = 0; i < clients.size(); ++i) {
      clients[i].fd = connect_to(srv->port());
      if (clients[i].fd < 0) {
        std::fprintf(stderr, "cannot connect client %zu (file descriptor limit?)\n", i);
        std::exit(1);
      }
      (void)::send(clients[i].fd, req.data(), req.size(), MSG_NOSIGNAL);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      epoll_ctl(ep, EPOLL_CTL_ADD, clients[i].fd, &ev);
    }
    while (true) {
      std::lock_guard<std::mutex> guard{mtx};
      if (streams.size() == clients.size())
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    std::vector<std::shared_ptr<http::event_stream>> all;
    {
      std::lock_guard<std::mutex> guard{mtx};
      all = streams;
    }
    const std::string payload
      = R"({"seq":0,"session":"q0123456789abcdef","placement":{"turn_index":2,"tab_index":0},"obj":{"type":"search_tool_delta","queries":["crdt vs ot"]}})";
    auto cpu0 = quarry::bench::process_cpu_seconds();
    auto t0 = clock_type::now();
    std::thread sender{[&] {
      for (int e = 1; e <= s.events; ++e) {
        auto id = std::to_string(e);
        for (auto& st : all)
          st->send(id, "packet", payload);
      }
    }};
    int done = 0;
    const int want = s.events;
    std::vector<epoll_event> ready(256);
    char buf[65536];
    while (done < static_cast<int>(clients.size())) {
      int n = epoll_wait(ep, ready.data(), static_cast<int>(ready.size()), 10000);
      if (n <= 0) {
        std::fprintf(stderr, "timed out: %d of %zu clients complete\n", done, clients.size());
        break;
      }
      for (int k = 0; k < n; ++k) {
        auto& c = clients[ready[static_cast<size_t>(k)].data.u64];
        auto got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got <= 0) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
          continue;
        }
        bool was_done = c.events >= want;
        for (ssize_t i = 0; i < got; ++i) {
          if (buf[i] == '\n' && c.last == '\n')
            ++c.events;
          c.last = buf[i];
        }
        if (!was_done && c.events >= want)
          ++done;
      }
    }
    double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    sender.join();
    double cpu = quarry::bench::process_cpu_seconds() - cpu0;
    std::printf("| %zu | %d | %.3f | %.0f | %.2f s | %.1f MiB |\n", clients.size(), want, elapsed,
                static_cast<double>(want) * static_cast<double>(done) / elapsed, cpu,
                quarry::bench::rss_mib());
    std::fflush(stdout);
    for (auto& st : all)
      st->close();
    all.clear();
    for (auto& c : clients)
      ::close(c.fd);
    ::close(ep);
  }
  srv->stop();
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  std::string s{text};
  size_t pos = 0;
  while (pos < s.size()) {
    auto comma = s.find(',', pos);
    if (comma == std::string::npos)
      comma = s.size();
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--threads")
      s.threads = parse_list(value);
    else if (key == "--seconds")
      s.seconds = std::atof(value);
    else if (key == "--io-threads")
      s.io_threads = static_cast<size_t>(std::atoi(value));
    else if (key == "--sse-clients")
      s.sse_clients = std::atoi(value);
    else if (key == "--events")
      s.events = std::atoi(value);
    else if (key == "--repeat")
      s.repeat = std::atoi(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  bench_requests(s);
  if (s.sse_clients > 0)
    bench_events(s);
  return 0;
}
