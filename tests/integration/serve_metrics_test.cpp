// GET /metrics of a real `quarry serve` after one offline research (the
// example corpus and the extractive model): every family with HELP and
// TYPE, an exposition that parses line by line, counts that match what ran,
// and the bearer token it needs.

#include "support/process.hpp"

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace serve_metrics_test {

using namespace quarry;
using nlohmann::json;

namespace {

constexpr const char* token = "metrics-token-for-tests";

struct reply {
  long status = 0;
  std::string body;
  std::string content_type;
};

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

reply call(const std::string& method, const std::string& url, const std::string& body = {},
           bool with_token = true) {
  reply out;
  auto* h = curl_easy_init();
  REQUIRE(h != nullptr);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (!body.empty()) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  struct curl_slist* list = nullptr;
  if (!body.empty())
    list = curl_slist_append(list, "Content-Type: application/json");
  if (with_token)
    list = curl_slist_append(list, (std::string{"Authorization: Bearer "} + token).c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 90'000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  auto rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  char* type = nullptr;
  curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &type);
  if (type != nullptr)
    out.content_type = type;
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK)
    FAIL("curl: " << curl_easy_strerror(rc) << " for " << method << " " << url);
  return out;
}

// One sample: name, labels, value.
struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// A parsed exposition: the samples, and each family's HELP and TYPE.
struct exposition {
  std::vector<sample> samples;
  std::map<std::string, std::string> help;
  std::map<std::string, std::string> type;

  // The sum of the samples named `name` whose labels include `want`.
  double sum(const std::string& name, const std::map<std::string, std::string>& want = {}) const {
    double out = 0;
    for (const auto& s : samples) {
      if (s.name != name)
        continue;
      bool match = true;
      for (const auto& [k, v] : want)
        if (auto i = s.labels.find(k); i == s.labels.end() || i->second != v)
          match = false;
      if (match)
        out += s.value;
    }
    return out;
  }

  size_t count(const std::string& name) const {
    size_t n = 0;
    for (const auto& s : samples)
      n += s.name == name ? 1 : 0;
    return n;
  }
};

bool valid_name(const std::string& x) {
  static const std::regex re{"[a-zA-Z_:][a-zA-Z0-9_:]*"};
  return std::regex_match(x, re);
}

// Parses `name{label="value",...} value` (and the comment lines); fails the
// test on anything else.
exposition parse(const std::string& text) {
  exposition out;
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    CAPTURE(line);
    REQUIRE_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      auto rest = line.substr(7);
      auto space = rest.find(' ');
      REQUIRE(space != std::string::npos);
      auto name = rest.substr(0, space);
      REQUIRE(valid_name(name));
      auto& slot = line[2] == 'H' ? out.help[name] : out.type[name];
      CHECK(slot.empty()); // once per family
      slot = rest.substr(space + 1);
      if (line[2] == 'T') {
        CHECK(out.help.count(name) == 1); // HELP comes first
        CHECK(std::set<std::string>{"counter", "gauge", "histogram"}.count(slot) == 1);
      }
      continue;
    }
    REQUIRE(line[0] != '#');
    sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ')
      ++i;
    s.name = line.substr(0, i);
    REQUIRE(valid_name(s.name));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        auto eq = line.find('=', i);
        REQUIRE(eq != std::string::npos);
        auto label = line.substr(i, eq - i);
        REQUIRE(valid_name(label));
        REQUIRE(eq + 1 < line.size());
        REQUIRE(line[eq + 1] == '"');
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            REQUIRE(j + 1 < line.size());
            ++j;
            REQUIRE(std::string{"\\\"n"}.find(line[j]) != std::string::npos);
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        REQUIRE(j < line.size());
        CHECK(s.labels.count(label) == 0);
        s.labels[label] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',')
          ++i;
      }
      REQUIRE(i < line.size());
      ++i; // '}'
    }
    REQUIRE(i < line.size());
    REQUIRE(line[i] == ' ');
    auto value = line.substr(i + 1);
    if (value == "+Inf")
      s.value = INFINITY;
    else {
      size_t used = 0;
      s.value = std::stod(value, &used);
      REQUIRE(used == value.size());
    }
    // Every sample belongs to a family declared before it.
    auto family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!out.type.count(family) && family.size() > std::strlen(suffix)
          && family.compare(family.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        family = family.substr(0, family.size() - std::strlen(suffix));
    REQUIRE(out.type.count(family) == 1);
    if (out.type[family] == "histogram")
      CHECK(family != s.name);
    out.samples.push_back(std::move(s));
  }
  return out;
}

// The buckets of each child of histogram `name` are cumulative and end in
// +Inf with the child's count; returns the total count.
double check_histogram(const exposition& e, const std::string& name, const std::string& label) {
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;
  for (const auto& s : e.samples)
    if (s.name == name + "_bucket") {
      REQUIRE(s.labels.count("le") == 1);
      REQUIRE(s.labels.count(label) == 1);
      auto le = s.labels.at("le") == "+Inf" ? INFINITY : std::stod(s.labels.at("le"));
      buckets[s.labels.at(label)].emplace_back(le, s.value);
    }
  double total = 0;
  for (const auto& child_list : buckets) {
    const auto& child = child_list.first;
    const auto& list = child_list.second;
    CAPTURE(child);
    REQUIRE_FALSE(list.empty());
    for (size_t i = 1; i < list.size(); ++i) {
      CHECK(list[i].first > list[i - 1].first);
      CHECK(list[i].second >= list[i - 1].second);
    }
    CHECK(std::isinf(list.back().first));
    CHECK(list.back().second == e.sum(name + "_count", {{label, child}}));
    CHECK(e.sum(name + "_sum", {{label, child}}) >= 0);
    total += list.back().second;
  }
  return total;
}

struct server_process {
  std::unique_ptr<test::child_process> proc;
  std::string base;

  explicit server_process(const test::temp_dir& home) {
    std::vector<std::string> argv{QUARRY_EXE,
                                  "--plugin-dir",
                                  QUARRY_PLUGIN_DIR,
                                  "--set",
                                  "server.auth_token=${QUARRY_TEST_TOKEN}",
                                  "serve",
                                  "--listen",
                                  "127.0.0.1:0"};
    auto opts = test::isolated_quarry_options(home.path(), {{"QUARRY_TEST_TOKEN", token}});
    opts.timeout = std::chrono::minutes{5};
    proc = std::make_unique<test::child_process>(argv, opts);
    auto line = proc->wait_for_err_line("quarry: listening on http://", std::chrono::seconds{60});
    INFO(proc->err());
    REQUIRE(line);
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex{R"(listening on (http://127\.0\.0\.1:\d+)/)"}));
    base = m[1];
  }

  std::string url(const std::string& path) const {
    return base + path;
  }
};

const std::vector<std::pair<std::string, std::string>> families = {
  {"quarry_sessions", "gauge"},
  {"quarry_sessions_running", "gauge"},
  {"quarry_llm_calls_total", "counter"},
  {"quarry_llm_tokens_total", "counter"},
  {"quarry_llm_retries_total", "counter"},
  {"quarry_llm_call_seconds", "histogram"},
  {"quarry_tool_calls_total", "counter"},
  {"quarry_tool_call_seconds", "histogram"},
  {"quarry_errors_total", "counter"},
  {"quarry_http_requests_total", "counter"},
  {"quarry_event_streams", "gauge"},
};

} // namespace

TEST_CASE("serve metrics: after one offline research every family is there and "
          "the counts match what ran") {
  test::temp_dir home;
  server_process srv{home};

  // Not public: the token is needed.
  auto refused = call("GET", srv.url("/metrics"), {}, false);
  CHECK(refused.status == 401);
  CHECK(refused.body.find("quarry_") == std::string::npos);

  // Before any research: the families are there, nothing ran.
  auto first = call("GET", srv.url("/metrics"));
  REQUIRE(first.status == 200);
  CHECK(first.content_type.rfind("text/plain; version=0.0.4", 0) == 0);
  auto before = parse(first.body);
  CHECK(before.sum("quarry_llm_calls_total") == 0);
  CHECK(before.sum("quarry_tool_calls_total") == 0);
  CHECK(before.sum("quarry_sessions") == 0);
  CHECK(before.sum("quarry_http_requests_total", {{"code", "401"}}) == 1);

  auto started = call("POST", srv.url("/v1/research"),
                      json{{"question", "How loud is a heat pump?"}, {"clarify", false}}.dump());
  CAPTURE(started.body);
  REQUIRE(started.status == 202);
  auto id = json::parse(started.body)["id"].get<std::string>();
  // The stream ends when the session does.
  auto stream = call("GET", srv.url("/v1/research/" + id + "/events"));
  REQUIRE(stream.status == 200);
  CHECK(stream.body.find("event: end") != std::string::npos);
  REQUIRE(json::parse(call("GET", srv.url("/v1/research/" + id)).body)["state"] == "completed");

  auto scraped = call("GET", srv.url("/metrics"));
  REQUIRE(scraped.status == 200);
  auto m = parse(scraped.body);
  for (const auto& name_type : families) {
    const auto& name = name_type.first;
    const auto& type = name_type.second;
    CAPTURE(name);
    CHECK(m.help.count(name) == 1);
    CHECK(m.type[name] == type);
  }
  CHECK(m.type.size() == families.size());

  // The sessions.
  CHECK(m.sum("quarry_sessions", {{"state", "completed"}}) == 1);
  CHECK(m.sum("quarry_sessions") == 1);
  CHECK(m.count("quarry_sessions") == 7); // every state, zeros included
  CHECK(m.count("quarry_sessions_running") == 1);
  CHECK(m.sum("quarry_sessions_running") == 0);

  // The LLM calls: some succeeded, each one ended is timed.
  auto llm_ok = m.sum("quarry_llm_calls_total", {{"outcome", "ok"}});
  CHECK(llm_ok > 0);
  auto llm_ended = llm_ok + m.sum("quarry_llm_calls_total", {{"outcome", "error"}});
  CHECK(check_histogram(m, "quarry_llm_call_seconds", "provider") == llm_ended);
  CHECK(m.sum("quarry_llm_tokens_total") >= 0);
  for (const auto& s : m.samples)
    if (s.name == "quarry_llm_calls_total" || s.name == "quarry_llm_tokens_total")
      CHECK(s.labels.count("provider") == 1);

  // The tool calls: the agents searched the corpus.
  CHECK(m.sum("quarry_tool_calls_total") > 0);
  auto tool_runs = m.sum("quarry_tool_calls_total", {{"outcome", "ok"}})
                   + m.sum("quarry_tool_calls_total", {{"outcome", "error"}})
                   + m.sum("quarry_tool_calls_total", {{"outcome", "timeout"}})
                   + m.sum("quarry_tool_calls_total", {{"outcome", "cancelled"}});
  // Failures with bad arguments are not timed: at most every run.
  auto timed = check_histogram(m, "quarry_tool_call_seconds", "tool");
  CHECK(timed > 0);
  CHECK(timed <= tool_runs);
  // Errors by class add up to the failed calls (none failed for being
  // cancelled: the research completed).
  CHECK(m.sum("quarry_errors_total")
        == m.sum("quarry_llm_calls_total", {{"outcome", "error"}})
             + m.sum("quarry_tool_calls_total", {{"outcome", "error"}})
             + m.sum("quarry_tool_calls_total", {{"outcome", "timeout"}}));

  // The HTTP responses so far: 401 once, 202 once, the earlier scrape and
  // the stream and reads as 200 (this scrape is not counted yet).
  CHECK(m.sum("quarry_http_requests_total", {{"code", "401"}}) == 1);
  CHECK(m.sum("quarry_http_requests_total", {{"code", "202"}}) == 1);
  CHECK(m.sum("quarry_http_requests_total", {{"code", "200"}}) >= 3);
  CHECK(m.count("quarry_event_streams") == 1);
  // The next scrape counts this one.
  auto again = parse(call("GET", srv.url("/metrics")).body);
  CHECK(again.sum("quarry_http_requests_total", {{"code", "200"}})
        == m.sum("quarry_http_requests_total", {{"code", "200"}}) + 1);
  CHECK(again.sum("quarry_llm_calls_total") == m.sum("quarry_llm_calls_total"));
}

} // namespace serve_metrics_test
