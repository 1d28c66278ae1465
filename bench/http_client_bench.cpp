// Benchmark of the host's HTTP client against the in-process test server on
// loopback: small keep-alive requests at several concurrency levels, and one
// large chunked stream. Prints Markdown tables.

#include "quarry/host/http_client.hpp"

#include "support/http_server.hpp"

#include "process_usage.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using quarry::host::curl_http_client;
using quarry::test::http_server;
using quarry::test::request;
using quarry::test::response_plan;
namespace sdk = quarry::sdk;
using quarry::bench::peak_rss_kib;
using quarry::bench::process_cpu_seconds;
using quarry::bench::rss_kib;

// Size of the body of a small response.
constexpr size_t small_body_size = 64;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// -- small requests -----------------------------------------------------------

// State shared by all request slots of one phase.
struct load_state {
  curl_http_client* client = nullptr;
  std::string url;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<int> in_flight{0};
  // Written on the I/O thread only, read after the phase.
  std::vector<double> latencies_us;
  std::mutex mtx;
  std::condition_variable idle;
};

void launch(load_state& st);

// One request; on completion, starts the next one of its slot.
class slot_sink : public sdk::http_response_sink {
public:
  explicit slot_sink(load_state& st) : st_(st), started_(clock_type::now()) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers&) override {
    status_ = status;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    bytes_ += bytes.size();
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    auto us = std::chrono::duration<double, std::micro>(clock_type::now() - started_).count();
    st_.latencies_us.push_back(us);
    if (failure || status_ != 200 || bytes_ != small_body_size) {
      if (st_.failures++ == 0 && failure)
        std::fprintf(stderr, "first failure: %s\n", sdk::to_string(*failure).c_str());
    }
    ++st_.completed;
    if (!st_.stop) {
      launch(st_);
      return;
    }
    if (--st_.in_flight == 0) {
      std::lock_guard<std::mutex> guard{st_.mtx};
      st_.idle.notify_all();
    }
  }

private:
  load_state& st_;
  clock_type::time_point started_;
  int status_ = 0;
  size_t bytes_ = 0;
};

void launch(load_state& st) {
  sdk::http_request req;
  req.url = st.url;
  st.client->start(std::move(req), std::make_shared<slot_sink>(st));
}

struct load_result {
  int concurrency = 0;
  uint64_t requests = 0;
  uint64_t failures = 0;
  double seconds = 0;
  double process_cpu = 0;
  double client_cpu = 0;
  double server_cpu = 0;
  double p50_us = 0;
  double p99_us = 0;
  long rss_before = 0;
  long rss_peak = 0;
  long rss_after = 0;
  uint64_t connections = 0;
};

load_result run_load(curl_http_client& client, http_server& server, int concurrency,
                     std::chrono::milliseconds duration) {
  load_state st;
  st.client = &client;
  st.url = server.url("/small");
  st.latencies_us.reserve(1 << 20);
  load_result result;
  result.concurrency = concurrency;
  result.rss_before = rss_kib();
  result.rss_peak = result.rss_before;
  auto conns_before = server.connections_accepted();
  auto client_cpu = client.stats().io_thread_cpu;
  auto server_cpu = server.loop_cpu_time();
  auto cpu = process_cpu_seconds();
  auto start = clock_type::now();
  st.in_flight = concurrency;
  for (int i = 0; i < concurrency; ++i)
    launch(st);
  while (clock_type::now() - start < duration) {
    std::this_thread::sleep_for(20ms);
    result.rss_peak = std::max(result.rss_peak, rss_kib());
  }
  st.stop = true;
  {
    std::unique_lock<std::mutex> guard{st.mtx};
    st.idle.wait(guard, [&st] { return st.in_flight == 0; });
  }
  result.seconds = seconds_since(start);
  result.process_cpu = process_cpu_seconds() - cpu;
  result.client_cpu = std::chrono::duration<double>(client.stats().io_thread_cpu - client_cpu)
                        .count();
  result.server_cpu = std::chrono::duration<double>(server.loop_cpu_time() - server_cpu).count();
  result.requests = st.completed;
  result.failures = st.failures;
  result.connections = server.connections_accepted() - conns_before;
  result.rss_after = rss_kib();
  auto& lat = st.latencies_us;
  if (!lat.empty()) {
    std::sort(lat.begin(), lat.end());
    result.p50_us = lat[lat.size() / 2];
    result.p99_us = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  }
  return result;
}

// -- streaming ----------------------------------------------------------------

class counting_sink : public sdk::http_response_sink {
public:
  bool on_response(int status, const sdk::http_headers&) override {
    status_ = status;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    bytes_ += bytes.size();
    if (!bytes.empty() && (bytes.front() != 'x' || bytes.back() != 'x'))
      corrupt_ = true;
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    std::lock_guard<std::mutex> guard{mtx_};
    failure_ = std::move(failure);
    done_ = true;
    cv_.notify_all();
  }

  void wait() {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] { return done_; });
  }

  int status_ = 0;
  uint64_t bytes_ = 0;
  bool corrupt_ = false;
  std::optional<sdk::error> failure_;

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct stream_result {
  uint64_t bytes = 0;
  double seconds = 0;
  double process_cpu = 0;
  double client_cpu = 0;
  double server_cpu = 0;
  bool ok = false;
  long rss_peak = 0;
};

stream_result run_stream(curl_http_client& client, http_server& server, uint64_t size,
                         size_t chunk) {
  stream_result result;
  auto sink = std::make_shared<counting_sink>();
  sdk::http_request req;
  req.url = server.url("/big?n=" + std::to_string(size) + "&chunk=" + std::to_string(chunk));
  req.max_response_bytes = static_cast<int64_t>(size) + 1;
  auto client_cpu = client.stats().io_thread_cpu;
  auto server_cpu = server.loop_cpu_time();
  auto cpu = process_cpu_seconds();
  auto start = clock_type::now();
  client.start(std::move(req), sink);
  sink->wait();
  result.seconds = seconds_since(start);
  result.process_cpu = process_cpu_seconds() - cpu;
  result.client_cpu = std::chrono::duration<double>(client.stats().io_thread_cpu - client_cpu)
                        .count();
  result.server_cpu = std::chrono::duration<double>(server.loop_cpu_time() - server_cpu).count();
  result.bytes = sink->bytes_;
  result.ok = !sink->failure_ && sink->status_ == 200 && sink->bytes_ == size && !sink->corrupt_;
  if (sink->failure_)
    std::fprintf(stderr, "stream failed: %s\n", sdk::to_string(*sink->failure_).c_str());
  result.rss_peak = peak_rss_kib();
  return result;
}

// -- main ---------------------------------------------------------------------

std::vector<int> parse_list(const char* text) {
  std::vector<int> result;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!item.empty())
        result.push_back(std::atoi(item.c_str()));
      item.clear();
      if (*p == '\0')
        break;
    } else {
      item += *p;
    }
  }
  return result;
}

void usage() {
  std::puts("usage: quarry_bench_http [--seconds S] [--concurrency 1,64,512]\n"
            "                         [--repeat N] [--stream-mib N] "
            "[--chunk-kib K]");
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  std::vector<int> levels{1, 64, 512};
  uint64_t stream_mib = 2048;
  size_t chunk_kib = 64;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--seconds") {
      seconds = std::atof(next());
    } else if (arg == "--concurrency") {
      levels = parse_list(next());
    } else if (arg == "--repeat") {
      repeat = std::max(1, std::atoi(next()));
    } else if (arg == "--stream-mib") {
      stream_mib = static_cast<uint64_t>(std::atoll(next()));
    } else if (arg == "--chunk-kib") {
      chunk_kib = static_cast<size_t>(std::atoll(next()));
    } else {
      usage();
      return arg == "--help" ? 0 : 2;
    }
  }
  const std::string small_body(small_body_size, 's');
  http_server server;
  server.route("GET", "/small",
               [&small_body](const request&) { return response_plan::text(200, small_body); });
  server.route("GET", "/big", [](const request& req) {
    auto n = static_cast<uint64_t>(req.param_int("n", 0));
    auto chunk = static_cast<size_t>(req.param_int("chunk", 65536));
    return response_plan{200}.chunked().generate(n, chunk, 'x');
  });
  quarry::core::http_settings settings;
  // Keep every connection of the largest level in the cache.
  settings.max_connections = 1024;
  curl_http_client client{settings};
  auto rss_start = rss_kib();
  std::printf("## Small requests (%zu-byte bodies, keep-alive, %.1f s per "
              "level)\n\n",
              small_body_size, seconds);
  std::printf("| concurrency | requests | failures | req/s | p50 latency | "
              "p99 latency | CPU/req (process) | CPU/req (client I/O thread) "
              "| CPU/req (server) | new connections | RSS before | RSS peak | "
              "RSS after |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
              "---:|\n");
  auto ms = std::chrono::milliseconds{static_cast<int64_t>(seconds * 1000)};
  uint64_t total_failures = 0;
  for (auto level : levels) {
    // Warm up: open the connections this level needs.
    run_load(client, server, level, 300ms);
    for (int round = 0; round < repeat; ++round) {
      auto r = run_load(client, server, level, ms);
      total_failures += r.failures;
      auto per_req = [&r](double cpu) {
        return r.requests == 0 ? 0.0 : cpu * 1e6 / static_cast<double>(r.requests);
      };
      std::printf("| %d | %llu | %llu | %.0f | %.0f us | %.0f us | %.1f us | "
                  "%.1f us | %.1f us | %llu | %.1f MiB | %.1f MiB | %.1f MiB |\n",
                  r.concurrency, static_cast<unsigned long long>(r.requests),
                  static_cast<unsigned long long>(r.failures),
                  static_cast<double>(r.requests) / r.seconds, r.p50_us, r.p99_us,
                  per_req(r.process_cpu), per_req(r.client_cpu), per_req(r.server_cpu),
                  static_cast<unsigned long long>(r.connections), r.rss_before / 1024.0,
                  r.rss_peak / 1024.0, r.rss_after / 1024.0);
      std::fflush(stdout);
    }
  }
  auto st = client.stats();
  std::printf("\nRSS at start: %.1f MiB; after all levels: %.1f MiB; "
              "client: %llu requests, %llu connections opened, %llu easy "
              "handles created; server: %llu connections accepted\n",
              rss_start / 1024.0, rss_kib() / 1024.0, static_cast<unsigned long long>(st.completed),
              static_cast<unsigned long long>(st.connections_opened),
              static_cast<unsigned long long>(st.easy_handles_created),
              static_cast<unsigned long long>(server.connections_accepted()));
  if (stream_mib > 0) {
    std::printf("\n## Streaming (one chunked response, %zu KiB chunks)\n\n", chunk_kib);
    std::printf("| bytes | ok | seconds | MB/s | MiB/s | CPU (process) | "
                "CPU (client I/O thread) | CPU (server) | peak RSS |\n");
    std::printf("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (int round = 0; stream_mib > 0 && round < repeat; ++round) {
    auto size = stream_mib * 1024 * 1024;
    auto r = run_stream(client, server, size, chunk_kib * 1024);
    std::printf("| %llu | %s | %.2f | %.0f | %.0f | %.2f s | %.2f s | %.2f s "
                "| %.1f MiB |\n",
                static_cast<unsigned long long>(r.bytes), r.ok ? "yes" : "NO", r.seconds,
                static_cast<double>(r.bytes) / 1e6 / r.seconds,
                static_cast<double>(r.bytes) / 1048576.0 / r.seconds, r.process_cpu, r.client_cpu,
                r.server_cpu, r.rss_peak / 1024.0);
    std::fflush(stdout);
    if (!r.ok)
      ++total_failures;
  }
  client.shutdown();
  server.stop();
  return total_failures == 0 ? 0 : 1;
}
