// Benchmark of `quarry serve` through its HTTP API: a real `quarry serve`
// child process, the fake LLM server in this process (answering every model
// call after a fixed latency), and a libcurl multi client on one thread that
// starts researches with `POST /v1/research` and follows each one's event
// stream (`GET /v1/research/{id}/events`) until `event: end`.
//
//   quarry_bench_serve researches [--count N] [--latency-ms L] [--in-flight C]
//   quarry_bench_serve fanout [--clients C] [--latency-ms L]
//   quarry_bench_serve resume [--plan-words 10,1000,10000,50000]
//   common options: [--quarry EXE] [--plugin-dir DIR] [--timeout-s S]
//                   [--verify on|off] (research.verify; default on, Quarry's
//                   default when a model writes the report: one more model
//                   call, the verification judge, after the final report)
//                   [--http-connections N] [--model-calls N] (the server's
//                   http.max_connections and the provider's
//                   limits.max_concurrency; both 10,000+ by default)
//                   [--chunk-delay-ms D] (a pause of D between the pieces of
//                   every answer, as a model streams its tokens: the head
//                   and first piece come after the latency, the rest D
//                   apart; the critical path printed counts the latency only)
//
// The research is the 2-agent script: plan, orchestrator (two research
// agents), each agent one corpus search then its report (3 model calls),
// the orchestrator's generate_report, the final report: 10 model calls and 2
// tool calls, 7 of the model calls in sequence (the critical path).
//
// `researches`: N researches, at most C in flight (0: all at once). Per
// research: wall time from the POST to `event: end` over the critical path
// (7 x L), time to the first event (`id:` line) after the POST. For the
// server process: peak RSS minus idle RSS per research, CPU time per
// external call (model + tool calls), researches completed per second.
//
// `fanout`: one research with 1 event-stream client, then one with C clients
// (opened right after the POST: all get every packet live), then C clients
// replaying the finished session from the store. Reported: time to deliver,
// spread of the clients' end times, packets per client, RSS and CPU.
//
// `resume`: sessions with N plan packets interrupted by SIGTERM after their
// checkpoint (`quarry research`), then `quarry sessions resume ID --json`:
// the time until its first new packet on stdout, and until it exits.

#include "quarry/host/curl_epoll.hpp"
#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <sys/epoll.h>
#include <unistd.h>
#include <vector>
#include <sys/resource.h>
#include <sys/wait.h>

using namespace quarry;
using clock_type = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// Without verification; with it, the judge's call follows the final report
// (one more call, on the critical path too).
constexpr int critical_calls_unverified = 7;
constexpr int model_calls_unverified = 10;
constexpr int tool_calls_per_research = 2;

// -- the fake LLM script ----------------------------------------------------------

json rule(const char* marker, json respond, int latency_ms, const char* message = nullptr) {
  json r{{"match", {{"system_contains", marker}}},
         {"respond", std::move(respond)},
         {"latency_ms", latency_ms}};
  if (message != nullptr)
    r["match"]["message_contains"] = message;
  return r;
}

json calls(std::vector<std::pair<std::string, json>> xs) {
  auto arr = json::array();
  for (auto& [name, args] : xs)
    arr.push_back({{"name", name}, {"arguments", args}});
  return {{"tool_calls", arr}};
}

// Every rule answers any number of sessions: the orchestrator's second call
// is told from its first by the agents' reports in its messages. Each answer
// comes after `latency_ms`, its pieces `chunk_delay_ms` apart.
json two_agent_script(int latency_ms, int chunk_delay_ms = 0) {
  const char* report = "Heat pump efficiency falls as the outdoor air gets colder [1]. "
                       "Defrost cycles remove frost from the outdoor coil [2].";
  auto rules = json::array();
  rules.push_back(rule("You are the planner", {{"text", "1. Efficiency\n2. Defrost"}}, latency_ms));
  rules.push_back(rule("You are the orchestrator", calls({{"generate_report", json::object()}}),
                       latency_ms, "Heat pump efficiency falls"));
  rules.push_back(rule("You are the orchestrator",
                       calls({{"research_agent", {{"task", "Why efficiency falls in the cold."}}},
                              {"research_agent", {{"task", "How defrost cycles work."}}}}),
                       latency_ms));
  rules.push_back(rule("careful, precise research agent",
                       calls({{"generate_report", json::object()}}), latency_ms, "\"document\""));
  rules.push_back(rule("careful, precise research agent",
                       calls({{"internal_search", {{"queries", {"heat pump defrost cold"}}}}}),
                       latency_ms));
  rules.push_back(rule("finished its research", {{"text", report}}, latency_ms));
  rules.push_back(rule(
    "You write the final answer",
    {{"text", "Cold air lowers efficiency [1]. Defrosting clears the coil [2]."}}, latency_ms));
  // The verification judge (research.verify): both claims supported.
  auto verdicts = R"({"verdicts": [
    {"id": 0, "verdict": "supported", "quote": ""},
    {"id": 1, "verdict": "supported", "quote": ""}]})";
  rules.push_back(rule("You check a research report against its sources",
                       {{"tool_calls", {{{"name", "judge_claims"}, {"arguments", verdicts}}}}},
                       latency_ms));
  if (chunk_delay_ms > 0)
    for (auto& r : rules)
      r["respond"]["chunk_delay_ms"] = chunk_delay_ms;
  return rules;
}

// -- the server process -----------------------------------------------------------

long proc_rss_kib(int pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atol(line.c_str() + 6);
  return 0;
}

double proc_cpu_seconds(int pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest{text.substr(close + 2)};
  std::string field;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  // Fields 3.. after the name: state is field 3; utime 14, stime 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15)
      stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of each thread of a process, summed by thread name.
std::map<std::string, double> thread_cpu_seconds(int pid) {
  std::map<std::string, double> out;
  auto dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator{dir, ec}) {
    std::ifstream comm{e.path() / "comm"};
    std::string name;
    std::getline(comm, name);
    std::ifstream in{e.path() / "stat"};
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest{text.substr(close + 2)};
    std::string field;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i)
      if (i == 14 || i == 15)
        ticks += std::strtoull(field.c_str(), nullptr, 10);
    out[name] += static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return out;
}

struct server_process {
  test::temp_dir home;
  std::unique_ptr<test::child_process> proc;
  std::string base;

  server_process(const std::string& exe, const std::string& plugin_dir,
                 const test::fake_llm_server& llm, int http_connections = 20000, bool verify = true,
                 int model_calls = 10000) {
    // clang-format off
    auto cfg = home.write("quarry.yaml",
                          "llm:\n"
                          "  providers:\n"
                          "    main:\n"
                          "      plugin: openai\n"
                          "      api_key: k\n"
                          "      model: m\n"
                          "      base_url: " + llm.base_url_openai() + "\n"
                          "      limits: {max_concurrency: " + std::to_string(model_calls) + "}\n"
                          "http:\n"
                          "  max_connections: " + std::to_string(http_connections) + "\n"
                          "research:\n"
                          "  clarify: false\n"
                          "  verify: " + std::string{verify ? "on" : "off"} + "\n"
                          "  corpus: " QUARRY_SOURCE_DIR "/examples/corpus\n"
                          "runtime:\n"
                          "  data_dir: " + home.path() + "/data\n"
                          "log:\n"
                          "  level: warn\n"
                          "server:\n"
                          "  max_running_sessions: 100000\n"
                          "  max_connections: 100000\n"
                          "  max_event_streams: 100000\n");
    // clang-format on
    std::vector<std::string> argv{exe, "--plugin-dir", plugin_dir, "--config",
                                  cfg, "serve",        "--listen", "127.0.0.1:0"};
    auto opts = test::isolated_quarry_options(home.path());
    opts.timeout = std::chrono::minutes{15};
    proc = std::make_unique<test::child_process>(argv, opts);
    if (!proc->wait_for_err("quarry: listening on http://", std::chrono::seconds{120})) {
      std::fprintf(stderr, "quarry serve did not start:\n%s\n", proc->err().c_str());
      std::exit(1);
    }
    std::smatch m;
    auto err = proc->err();
    if (!std::regex_search(err, m, std::regex{R"(listening on (http://127\.0\.0\.1:\d+)/)"})) {
      std::fprintf(stderr, "no address in:\n%s\n", err.c_str());
      std::exit(1);
    }
    base = m[1];
  }

  ~server_process() {
    proc->signal(SIGTERM);
    proc->wait(std::chrono::seconds{60});
  }

  int pid() const {
    return proc->pid();
  }
};

// Samples the RSS of a process every 20 ms and keeps the peak.
class rss_sampler {
public:
  explicit rss_sampler(int pid) : pid_(pid) {
    thread_ = std::thread([this] {
      while (!stop_) {
        auto x = proc_rss_kib(pid_);
        long cur = peak_;
        while (x > cur && !peak_.compare_exchange_weak(cur, x)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
      }
    });
  }
  ~rss_sampler() {
    stop_ = true;
    thread_.join();
  }
  long peak() const {
    return peak_;
  }
  void reset() {
    peak_ = proc_rss_kib(pid_);
  }

private:
  int pid_;
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_{0};
  std::thread thread_;
};

// -- the client ---------------------------------------------------------------------

struct research {
  std::string id;
  clock_type::time_point posted;
  clock_type::time_point accepted; // the POST's answer arrived
  clock_type::time_point first_event;
  clock_type::time_point ended;
  bool got_first = false;
  bool done = false;
  bool failed = false;
  std::string why;
};

// One event-stream client (several may follow the same research).
struct stream_client {
  size_t research = 0;
  clock_type::time_point opened;
  clock_type::time_point first_event;
  clock_type::time_point ended;
  bool got_first = false;
  bool saw_end = false;
  bool want_state = false;
  std::string end_state;
  size_t packets = 0;
  size_t searches = 0;
  uint64_t last_id = 0;
  bool out_of_order = false;
  std::string partial;
  bool done = false;
};

struct transfer {
  enum kind_t { post, events } kind = post;
  size_t index = 0; // research (post) or stream client (events)
  std::string body;
  curl_slist* headers = nullptr;
  CURL* easy = nullptr;
};

size_t on_post_data(char* data, size_t size, size_t n, void* user) {
  static_cast<transfer*>(user)->body.append(data, size * n);
  return size * n;
}

class client {
public:
  client(std::string base, std::vector<research>& rs, std::vector<stream_client>& ss)
    : base_(std::move(base)), researches_(rs), streams_(ss) {
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, 100000L);
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    // libcurl's socket API with epoll: a wake-up costs the transfers that
    // have work, not all of them (curl_multi_perform visits every transfer,
    // which with thousands of streams made this client take a third of
    // the CPU the server had at the start of a run).
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) {
      std::perror("epoll_create1");
      std::exit(2);
    }
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &client::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &client::on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  }
  ~client() {
    curl_multi_cleanup(multi_);
    ::close(epoll_);
  }

  /// Starts research `i` (a POST); `on_started(i)` runs when its id is known.
  void post(size_t i, const std::string& question) {
    auto* t = new transfer;
    t->kind = transfer::post;
    t->index = i;
    t->easy = curl_easy_init();
    json body{{"question", question}, {"clarify", false}};
    auto text = body.dump();
    curl_easy_setopt(t->easy, CURLOPT_URL, (base_ + "/v1/research").c_str());
    curl_easy_setopt(t->easy, CURLOPT_COPYPOSTFIELDS, text.c_str());
    t->headers = curl_slist_append(nullptr, "Content-Type: application/json");
    common(t);
    researches_[i].posted = clock_type::now();
    curl_multi_add_handle(multi_, t->easy);
    ++active_;
  }

  /// Opens event-stream client `s` on its research.
  void follow(size_t s) {
    auto* t = new transfer;
    t->kind = transfer::events;
    t->index = s;
    t->easy = curl_easy_init();
    auto& r = researches_[streams_[s].research];
    curl_easy_setopt(t->easy, CURLOPT_URL, (base_ + "/v1/research/" + r.id + "/events").c_str());
    common(t);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_event_data);
    streams_[s].opened = clock_type::now();
    curl_multi_add_handle(multi_, t->easy);
    ++active_;
  }

  std::function<void(size_t)> on_started;
  std::function<void(size_t)> on_stream_done;
  std::function<void(size_t)> on_post_failed;

  /// Runs transfers until none is active or `deadline`; false on timeout.
  bool run(clock_type::time_point deadline, const std::function<void()>& tick = {}) {
    epoll_event events[256];
    int running = 0;
    while (active_ > 0) {
      auto now = clock_type::now();
      if (now > deadline)
        return false;
      if (timer_set_ && now >= due_) {
        timer_set_ = false;
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
        collect(tick);
        continue;
      }
      auto wait_ms = 50;
      if (timer_set_)
        wait_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(due_ - now).count(), 0, 50));
      auto n = epoll_wait(epoll_, events, 256, wait_ms);
      for (int i = 0; i < n; ++i) {
        curl_multi_socket_action(multi_, events[i].data.fd,
                                 quarry::host::curl_select_flags(events[i].events), &running);
      }
      collect(tick);
    }
    return true;
  }

private:
  // Finished transfers, then the caller's tick (which may start more).
  void collect(const std::function<void()>& tick) {
    int left = 0;
    std::vector<std::pair<CURL*, CURLcode>> finished;
    while (auto* msg = curl_multi_info_read(multi_, &left))
      if (msg->msg == CURLMSG_DONE)
        finished.emplace_back(msg->easy_handle, msg->data.result);
    for (auto [easy, rc] : finished)
      complete(easy, rc);
    if (tick)
      tick();
  }

  static int on_socket(CURL*, curl_socket_t fd, int what, void* user, void* known) {
    auto& self = *static_cast<client*>(user);
    quarry::host::watch_curl_socket(self.multi_, self.epoll_, fd, what, known, &self);
    return 0;
  }

  static int on_timer(CURLM*, long timeout_ms, void* user) {
    auto& self = *static_cast<client*>(user);
    self.timer_set_ = timeout_ms >= 0;
    if (self.timer_set_)
      self.due_ = clock_type::now() + std::chrono::milliseconds{timeout_ms};
    return 0;
  }

  void common(transfer* t) {
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_post_data);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    if (t->headers != nullptr)
      curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, 600000L);
    if (t->kind == transfer::events)
      curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, &streams_[t->index]);
  }

  static size_t on_event_data(char* data, size_t size, size_t n, void* user) {
    auto& s = *static_cast<stream_client*>(user);
    s.partial.append(data, size * n);
    size_t start = 0;
    for (;;) {
      auto nl = s.partial.find('\n', start);
      if (nl == std::string::npos)
        break;
      std::string_view line{s.partial.data() + start, nl - start};
      start = nl + 1;
      if (line.rfind("id:", 0) == 0) {
        auto id = std::strtoull(std::string{line.substr(3)}.c_str(), nullptr, 10);
        if (id != s.last_id + 1 && s.last_id != 0)
          s.out_of_order = true;
        s.last_id = id;
        ++s.packets;
        if (!s.got_first) {
          s.got_first = true;
          s.first_event = clock_type::now();
        }
      } else if (line == "event: end") {
        s.saw_end = true;
        s.want_state = true;
      } else if (line.rfind("data:", 0) == 0) {
        if (s.want_state) {
          auto j = json::parse(line.substr(5), nullptr, false);
          if (j.is_object() && j["state"].is_string())
            s.end_state = j["state"].get<std::string>();
          s.want_state = false;
        } else if (line.find("\"search_tool_start\"") != std::string_view::npos) {
          ++s.searches;
        }
      }
    }
    s.partial.erase(0, start);
    return size * n;
  }

  void complete(CURL* easy, CURLcode rc) {
    transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(multi_, easy);
    curl_easy_cleanup(easy);
    curl_slist_free_all(t->headers);
    --active_;
    if (t->kind == transfer::post) {
      auto& r = researches_[t->index];
      auto j = json::parse(t->body, nullptr, false);
      if (rc != CURLE_OK || status != 202 || !j.is_object() || !j["id"].is_string()) {
        r.failed = true;
        r.done = true;
        r.why = "POST: " + std::to_string(status) + " " + curl_easy_strerror(rc) + " "
                + t->body.substr(0, 200);
        if (on_post_failed)
          on_post_failed(t->index);
      } else {
        r.accepted = clock_type::now();
        r.id = j["id"].get<std::string>();
        if (on_started)
          on_started(t->index);
      }
    } else {
      auto& s = streams_[t->index];
      s.ended = clock_type::now();
      s.done = true;
      if (rc != CURLE_OK || status != 200 || !s.saw_end) {
        auto& r = researches_[s.research];
        r.failed = true;
        r.why = "events: " + std::to_string(status) + " " + curl_easy_strerror(rc)
                + (s.saw_end ? "" : " (no end event)");
      }
      if (on_stream_done)
        on_stream_done(t->index);
    }
    delete t;
  }

  std::string base_;
  std::vector<research>& researches_;
  std::vector<stream_client>& streams_;
  CURLM* multi_ = nullptr;
  int epoll_ = -1;
  bool timer_set_ = false;
  clock_type::time_point due_;
  size_t active_ = 0;
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

double secs(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

double load_average() {
  double x = 0;
  std::ifstream in{"/proc/loadavg"};
  in >> x;
  return x;
}

struct common_options {
  std::string exe = QUARRY_EXE;
  std::string plugin_dir = QUARRY_PLUGIN_DIR;
  int latency_ms = 500;
  int timeout_s = 300;
  /// `http.max_connections` of the server (libcurl's connection cache).
  int http_connections = 20000;
  /// The provider's `limits.max_concurrency`: model calls at once. With
  /// 10,000 researches in flight the default would need more descriptors
  /// than a process may open here (20,000); a lower value queues calls.
  int max_model_calls = 10000;
  /// research.verify: the judge's call after the final report.
  bool verify = true;
  /// --chunk-delay-ms: the pause between the pieces of every answer.
  int chunk_delay_ms = 0;

  int critical_calls() const {
    return critical_calls_unverified + (verify ? 1 : 0);
  }
  int model_calls() const {
    return model_calls_unverified + (verify ? 1 : 0);
  }
};

// -- researches ---------------------------------------------------------------------

int run_researches(const common_options& o, int count, int in_flight) {
  test::fake_llm_server llm;
  // Small runs keep the requests, to report their sizes.
  llm.record_requests(count <= 100);
  if (auto err = llm.script(two_agent_script(o.latency_ms, o.chunk_delay_ms))) {
    std::fprintf(stderr, "script: %s\n", err->message.c_str());
    return 1;
  }
  server_process srv{o.exe, o.plugin_dir, llm, o.http_connections, o.verify, o.max_model_calls};
  // One research first, so that one-time allocations and the corpus are warm.
  {
    std::vector<research> rs(1);
    std::vector<stream_client> ss(1);
    client c{srv.base, rs, ss};
    c.on_started = [&](size_t) { c.follow(0); };
    c.post(0, "How do heat pumps cope with cold weather? (warm-up)");
    if (!c.run(clock_type::now() + std::chrono::seconds{60}) || rs[0].failed) {
      std::fprintf(stderr, "warm-up research failed: %s\n", rs[0].why.c_str());
      return 1;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds{500});
  auto idle_kib = proc_rss_kib(srv.pid());
  rss_sampler sampler{srv.pid()};
  sampler.reset();
  auto calls0 = llm.request_count();
  auto cpu0 = proc_cpu_seconds(srv.pid());
  auto own0 = proc_cpu_seconds(static_cast<int>(getpid()));
  auto threads0 = thread_cpu_seconds(srv.pid());
  auto load0 = load_average();

  std::vector<research> rs(static_cast<size_t>(count));
  std::vector<stream_client> ss(static_cast<size_t>(count));
  client c{srv.base, rs, ss};
  size_t next = 0;
  size_t running = 0;
  size_t finished = 0;
  auto limit = in_flight <= 0 ? static_cast<size_t>(count) : static_cast<size_t>(in_flight);
  auto start_more = [&] {
    while (running < limit && next < rs.size()) {
      c.post(next, "How do heat pumps cope with cold weather? #" + std::to_string(next));
      ++next;
      ++running;
    }
  };
  c.on_started = [&](size_t i) {
    ss[i].research = i;
    c.follow(i);
  };
  c.on_stream_done = [&](size_t) {
    --running;
    ++finished;
  };
  auto t0 = clock_type::now();
  start_more();
  c.on_post_failed = [&](size_t) { --running; };
  bool ok = c.run(t0 + std::chrono::seconds{o.timeout_s}, start_more);
  auto wall = secs(clock_type::now() - t0);
  auto cpu = proc_cpu_seconds(srv.pid()) - cpu0;
  auto own = proc_cpu_seconds(static_cast<int>(getpid())) - own0;
  auto threads1 = thread_cpu_seconds(srv.pid());
  auto peak_kib = sampler.peak();
  auto calls = llm.request_count() - calls0;
  auto load1 = load_average();

  size_t failed = 0;
  size_t completed = 0;
  // The end states of the researches that did not complete, with counts.
  std::map<std::string, size_t> other_states;
  size_t searches = 0;
  std::vector<double> ratio;
  std::vector<double> ttfe_ms;
  std::vector<double> accept_ms; // POST to its answer
  std::vector<double> open_ms;   // the answer to the stream's first event
  double bound = o.critical_calls() * o.latency_ms / 1000.0;
  for (size_t i = 0; i < rs.size(); ++i) {
    auto& r = rs[i];
    auto& s = ss[i];
    if (r.failed || !s.done) {
      if (failed < 5)
        std::fprintf(stderr, "research %zu failed: %s\n", i, r.why.c_str());
      ++failed;
      continue;
    }
    if (s.end_state == "completed")
      ++completed;
    else
      ++other_states[s.end_state.empty() ? "(none)" : s.end_state];
    if (s.out_of_order)
      ++failed;
    searches += s.searches;
    if (o.latency_ms > 0)
      ratio.push_back(secs(s.ended - r.posted) / bound);
    if (s.got_first) {
      ttfe_ms.push_back(secs(s.first_event - r.posted) * 1000.0);
      accept_ms.push_back(secs(r.accepted - r.posted) * 1000.0);
      open_ms.push_back(secs(s.first_event - r.accepted) * 1000.0);
    }
  }
  auto external = static_cast<double>(calls + searches);
  std::printf("researches: %d (%s in flight), %d ms per model call, critical path %d calls "
              "= %.2f s\n",
              count, in_flight <= 0 ? "all" : std::to_string(in_flight).c_str(), o.latency_ms,
              o.critical_calls(), bound);
  if (o.chunk_delay_ms > 0)
    std::printf("  answers streamed with %d ms between their pieces (not in the critical path)\n",
                o.chunk_delay_ms);
  std::printf("  completed %zu, failed %zu%s\n", completed, failed, ok ? "" : " (TIMED OUT)");
  for (const auto& [state, n] : other_states)
    std::printf("  ended %s: %zu\n", state.c_str(), n);
  if (!other_states.empty()) {
    // What the server said meanwhile (warnings and errors), its last 4 KiB.
    auto said = srv.proc->err();
    if (said.size() > 4096)
      said.erase(0, said.size() - 4096);
    std::fprintf(stderr, "quarry serve said:\n%s\n", said.c_str());
  }
  std::printf("  wall time of the whole run: %.2f s; %.1f researches/s\n", wall,
              static_cast<double>(completed) / wall);
  if (!ratio.empty())
    std::printf("  wall / critical path per research: p50 %.3f, p99 %.3f, max %.3f; "
                "whole run %.3f\n",
                percentile(ratio, 0.5), percentile(ratio, 0.99), percentile(ratio, 1.0),
                wall / bound);
  std::printf("  time to first event: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              percentile(ttfe_ms, 0.5), percentile(ttfe_ms, 0.99), percentile(ttfe_ms, 1.0));
  std::printf("    of which the POST's answer: p50 %.1f ms, p99 %.1f ms; from it to the first "
              "event: p50 %.1f ms, p99 %.1f ms\n",
              percentile(accept_ms, 0.5), percentile(accept_ms, 0.99), percentile(open_ms, 0.5),
              percentile(open_ms, 0.99));
  std::printf("  model calls %zu (expected %d), tool calls %zu (expected %d)\n",
              static_cast<size_t>(calls), count * o.model_calls(), searches,
              count * tool_calls_per_research);
  std::printf("  quarry serve CPU: %.2f s = %.3f ms per research, %.3f ms per external call\n", cpu,
              cpu * 1000.0 / static_cast<double>(count), cpu * 1000.0 / external);
  std::printf("  by thread name (ms per research):");
  for (auto& [name, x] : threads1)
    std::printf(" %s %.2f;", name.c_str(),
                (x - threads0[name]) * 1000.0 / static_cast<double>(count));
  std::printf("\n");
  std::printf("  this process (fake LLM server and client) CPU: %.2f s\n", own);
  std::printf("  quarry serve RSS: idle %.1f MiB, peak %.1f MiB, %.1f KiB per research\n",
              idle_kib / 1024.0, peak_kib / 1024.0,
              static_cast<double>(peak_kib - idle_kib) / static_cast<double>(count));
  if (count <= 100) {
    size_t total = 0;
    size_t largest = 0;
    auto reqs = llm.requests();
    for (const auto& r : reqs) {
      total += r.raw_body.size();
      largest = std::max(largest, r.raw_body.size());
    }
    if (!reqs.empty())
      std::printf("  model request bodies: %zu, mean %.1f KiB, largest %.1f KiB\n", reqs.size(),
                  static_cast<double>(total) / 1024.0 / static_cast<double>(reqs.size()),
                  static_cast<double>(largest) / 1024.0);
  }
  std::printf("  load average: %.2f before, %.2f after\n", load0, load1);
  return (ok && failed == 0 && completed == rs.size()) ? 0 : 1;
}

// -- fan-out ------------------------------------------------------------------------

struct fanout_result {
  double deliver_s = 0; // POST (or first open) to the last client's end
  double spread_ms = 0; // last client's end minus the first client's end
  size_t min_packets = 0;
  size_t max_packets = 0;
  size_t failed = 0;
  double cpu_s = 0;
  long peak_kib = 0;
};

fanout_result follow_with(server_process& srv, rss_sampler& sampler, int clients,
                          const std::string& existing_id, int timeout_s) {
  std::vector<research> rs(1);
  std::vector<stream_client> ss(static_cast<size_t>(clients));
  client c{srv.base, rs, ss};
  auto open_all = [&] {
    for (size_t s = 0; s < ss.size(); ++s) {
      ss[s].research = 0;
      c.follow(s);
    }
  };
  sampler.reset();
  auto cpu0 = proc_cpu_seconds(srv.pid());
  auto t0 = clock_type::now();
  if (existing_id.empty()) {
    c.on_started = [&](size_t) { open_all(); };
    c.post(0, "How do heat pumps cope with cold weather? (fan-out)");
  } else {
    rs[0].id = existing_id;
    open_all();
  }
  bool ok = c.run(t0 + std::chrono::seconds{timeout_s});
  fanout_result out;
  out.cpu_s = proc_cpu_seconds(srv.pid()) - cpu0;
  out.peak_kib = sampler.peak();
  auto first_end = clock_type::time_point::max();
  auto last_end = clock_type::time_point::min();
  out.min_packets = SIZE_MAX;
  for (auto& s : ss) {
    if (!s.done || !s.saw_end || s.out_of_order) {
      ++out.failed;
      continue;
    }
    first_end = std::min(first_end, s.ended);
    last_end = std::max(last_end, s.ended);
    out.min_packets = std::min(out.min_packets, s.packets);
    out.max_packets = std::max(out.max_packets, s.packets);
  }
  if (!ok || rs[0].failed)
    out.failed = ss.size();
  if (out.failed < ss.size()) {
    out.deliver_s = secs(last_end - t0);
    out.spread_ms = secs(last_end - first_end) * 1000.0;
  }
  return out;
}

int run_fanout(const common_options& o, int clients) {
  test::fake_llm_server llm;
  llm.record_requests(false);
  if (auto err = llm.script(two_agent_script(o.latency_ms, o.chunk_delay_ms))) {
    std::fprintf(stderr, "script: %s\n", err->message.c_str());
    return 1;
  }
  server_process srv{o.exe, o.plugin_dir, llm, 20000, o.verify};
  rss_sampler sampler{srv.pid()};
  std::printf("fan-out: %d event-stream clients on one research, %d ms per model call "
              "(critical path %.2f s); load average %.2f\n",
              clients, o.latency_ms, o.critical_calls() * o.latency_ms / 1000.0, load_average());
  std::printf("%-28s %8s %12s %10s %9s %8s %9s %9s\n", "round", "clients", "deliver s", "spread ms",
              "packets", "failed", "CPU s", "RSS MiB");
  auto show = [&](const char* name, int n, const fanout_result& r, long idle_kib) {
    std::printf("%-28s %8d %12.3f %10.1f %4zu-%-4zu %8zu %9.2f %4.1f+%.1f\n", name, n, r.deliver_s,
                r.spread_ms, r.min_packets, r.max_packets, r.failed, r.cpu_s, idle_kib / 1024.0,
                (r.peak_kib - idle_kib) / 1024.0);
  };
  int rc = 0;
  // Warm-up: one research, one client.
  auto warm = follow_with(srv, sampler, 1, "", o.timeout_s);
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  auto idle = proc_rss_kib(srv.pid());
  auto one = follow_with(srv, sampler, 1, "", o.timeout_s);
  show("live, 1 client", 1, one, idle);
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  idle = proc_rss_kib(srv.pid());
  // The live round: remember its id through a listing afterwards (newest first).
  auto many = follow_with(srv, sampler, clients, "", o.timeout_s);
  show("live, all clients", clients, many, idle);
  if (warm.failed + one.failed + many.failed > 0 || many.min_packets != many.max_packets
      || many.min_packets != one.min_packets)
    rc = 1;
  // Replay of the finished session from the store.
  std::string id;
  {
    auto* h = curl_easy_init();
    std::string body;
    curl_easy_setopt(h, CURLOPT_URL, (srv.base + "/v1/research?limit=1").c_str());
    curl_easy_setopt(
      h, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(d, s * n);
        return s * n;
      });
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    auto j = json::parse(body, nullptr, false);
    if (j.is_object() && j["sessions"].is_array() && !j["sessions"].empty())
      id = j["sessions"][0]["id"].get<std::string>();
  }
  if (id.empty()) {
    std::fprintf(stderr, "no session to replay\n");
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  idle = proc_rss_kib(srv.pid());
  auto replay = follow_with(srv, sampler, clients, id, o.timeout_s);
  show("replay from the store", clients, replay, idle);
  if (replay.failed > 0 || replay.min_packets != many.min_packets)
    rc = 1;
  std::printf("load average after: %.2f\n", load_average());
  return rc;
}

// -- resume -------------------------------------------------------------------------

std::string config_text(const test::fake_llm_server& llm, const std::string& home) {
  // clang-format off
  return "llm:\n"
         "  providers:\n"
         "    main:\n"
         "      plugin: openai\n"
         "      api_key: k\n"
         "      model: m\n"
         "      base_url: " + llm.base_url_openai() + "\n"
         "research:\n"
         "  clarify: false\n"
         "  corpus: " QUARRY_SOURCE_DIR "/examples/corpus\n"
         "runtime:\n"
         "  data_dir: " + home + "/data\n"
         "log:\n"
         "  level: warn\n";
  // clang-format on
}

// A session with about `words` plan packets, interrupted (SIGTERM) while its
// first orchestrator call hangs, so that its last checkpoint (phase
// orchestrate) follows all of them. Returns its id, or empty.
std::string interrupted_session(const common_options& o, test::fake_llm_server& llm,
                                const std::string& home, const std::string& cfg, size_t words) {
  std::string plan = "1. ";
  for (size_t i = 0; i < words; ++i)
    plan += "word" + std::to_string(i % 1000) + " ";
  auto rules = json::array();
  rules.push_back(rule("You are the planner", {{"text", plan}}, 0));
  rules.push_back({{"match", {{"system_contains", "You are the orchestrator"}}},
                   {"respond", {{"text", "never"}}},
                   {"stall_after_bytes", 0}});
  llm.clear_requests();
  if (auto err = llm.script(rules)) {
    std::fprintf(stderr, "script: %s\n", err->message.c_str());
    return {};
  }
  std::vector<std::string> argv{
    o.exe, "--plugin-dir", o.plugin_dir, "--config",
    cfg,   "research",     "--json",     "How do heat pumps cope with cold weather?"};
  auto opts = test::isolated_quarry_options(home);
  opts.timeout = std::chrono::minutes{5};
  test::child_process proc{argv, opts};
  if (!llm.wait_for_requests(2, std::chrono::seconds{120})) {
    std::fprintf(stderr, "the research did not reach its orchestrator call:\n%s\n",
                 proc.err().c_str());
    return {};
  }
  proc.signal(SIGTERM);
  proc.wait(std::chrono::seconds{60});
  std::smatch m;
  auto err = proc.err();
  if (!std::regex_search(err, m, std::regex{R"(quarry sessions resume (q[0-9a-f]{16}))"})) {
    std::fprintf(stderr, "no session id in:\n%s\n", err.c_str());
    return {};
  }
  return m[1];
}

int run_resume(const common_options& o, const std::vector<int>& sizes) {
  test::fake_llm_server llm;
  test::temp_dir home;
  auto cfg = home.write("quarry.yaml", config_text(llm, home.path()));
  std::printf("resume: `quarry sessions resume ID --json` of a session with N packets and "
              "a checkpoint after them; load average %.2f\n",
              load_average());
  std::printf("| plan words | last seq | first new packet | first new packet after | "
              "whole resumed run | exit |\n|---:|---:|---|---:|---:|---:|\n");
  int rc = 0;
  // The first size is run twice: the first time indexes the corpus.
  std::vector<int> runs{sizes.empty() ? 10 : sizes.front()};
  runs.insert(runs.end(), sizes.begin(), sizes.end());
  for (size_t k = 0; k < runs.size(); ++k) {
    auto id = interrupted_session(o, llm, home.path(), cfg, static_cast<size_t>(runs[k]));
    if (id.empty())
      return 1;
    llm.script(two_agent_script(0));
    auto cmd = "HOME='" + home.path() + "' '" + o.exe + "' --plugin-dir '" + o.plugin_dir
               + "' --config '" + cfg + "' sessions resume " + id + " --json 2>/dev/null";
    auto t0 = clock_type::now();
    FILE* out = ::popen(cmd.c_str(), "r");
    if (out == nullptr)
      return 1;
    std::string first;
    double first_s = 0;
    uint64_t last_seq = 0;
    char buf[1 << 16];
    std::string pending;
    ssize_t n = 0;
    // read(), not fread(): fread waits for a full buffer.
    while ((n = ::read(fileno(out), buf, sizeof buf)) > 0) {
      pending.append(buf, static_cast<size_t>(n));
      size_t nl = 0;
      while ((nl = pending.find('\n')) != std::string::npos) {
        auto line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        auto j = json::parse(line, nullptr, false);
        if (!j.is_object())
          continue;
        if (first.empty()) {
          first_s = secs(clock_type::now() - t0);
          first = j["obj"]["type"].is_string() ? j["obj"]["type"].get<std::string>() : "?";
          first += " (seq " + std::to_string(j.value("seq", uint64_t{0})) + ")";
        }
        last_seq = j.value("seq", last_seq);
      }
    }
    auto status = ::pclose(out);
    auto whole = secs(clock_type::now() - t0);
    auto code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 0)
      rc = 1;
    if (k == 0)
      continue; // the warm-up run
    std::printf("| %d | %llu | %s | %.3f s | %.3f s | %d |\n", runs[k],
                static_cast<unsigned long long>(last_seq), first.c_str(), first_s, whole, code);
  }
  return rc;
}

void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s researches|fanout [options] (see the source)\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  common_options o;
  int count = 1000;
  int in_flight = 0;
  int clients = 1000;
  std::vector<int> sizes{10, 1000, 10000, 50000};
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--count")
      count = std::atoi(v);
    else if (k == "--latency-ms")
      o.latency_ms = std::atoi(v);
    else if (k == "--in-flight")
      in_flight = std::atoi(v);
    else if (k == "--clients")
      clients = std::atoi(v);
    else if (k == "--quarry")
      o.exe = v;
    else if (k == "--plugin-dir")
      o.plugin_dir = v;
    else if (k == "--plan-words") {
      sizes.clear();
      std::stringstream in{v};
      for (std::string x; std::getline(in, x, ',');)
        sizes.push_back(std::atoi(x.c_str()));
    } else if (k == "--http-connections")
      o.http_connections = std::atoi(v);
    else if (k == "--model-calls")
      o.max_model_calls = std::atoi(v);
    else if (k == "--timeout-s")
      o.timeout_s = std::atoi(v);
    else if (k == "--verify")
      o.verify = std::string{v} != "off";
    else if (k == "--chunk-delay-ms")
      o.chunk_delay_ms = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  raise_fd_limit();
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = 2;
  if (mode == "researches")
    rc = run_researches(o, count, in_flight);
  else if (mode == "fanout")
    rc = run_fanout(o, clients);
  else if (mode == "resume")
    rc = run_resume(o, sizes);
  else
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  curl_global_cleanup();
  return rc;
}
