// A client of a real `quarry serve` for the integration tests: the server
// started in a child process on 127.0.0.1 and a free port, HTTP requests
// with libcurl, Server-Sent Events parsed.

#pragma once

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace quarry::test::serve {

using nlohmann::json;

struct reply {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  json as_json() const {
    auto j = json::parse(body, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    return j;
  }

  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      std::string lk = k;
      for (auto& c : lk)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lk == name)
        return v;
    }
    return {};
  }
};

inline size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

inline size_t collect_header(char* data, size_t size, size_t n, void* out) {
  std::string line{data, size * n};
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    auto value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' '))
      value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n'))
      value.pop_back();
    static_cast<reply*>(out)->headers.emplace_back(line.substr(0, colon), value);
  }
  return size * n;
}

// One HTTP request with libcurl; `timeout` bounds the whole transfer (an
// event stream is read until the server closes it).
inline reply call(const std::string& method, const std::string& url, const std::string& body = {},
                  std::vector<std::string> headers = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds{60}) {
  reply out;
  auto* h = curl_easy_init();
  REQUIRE(h != nullptr);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST" || !body.empty()) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  struct curl_slist* list = nullptr;
  if (!body.empty())
    headers.push_back("Content-Type: application/json");
  for (const auto& x : headers)
    list = curl_slist_append(list, x.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &out);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  auto rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK && rc != CURLE_OPERATION_TIMEDOUT)
    FAIL("curl: " << curl_easy_strerror(rc) << " for " << method << " " << url);
  return out;
}

struct sse_event {
  std::string id;
  std::string event;
  std::string data;
};

inline std::vector<sse_event> parse_sse(const std::string& text, size_t* heartbeats = nullptr) {
  std::vector<sse_event> out;
  sse_event cur;
  bool any = false;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty()) {
      if (any)
        out.push_back(cur);
      cur = {};
      any = false;
      continue;
    }
    if (line[0] == ':') {
      if (heartbeats != nullptr && line.find("heartbeat") != std::string::npos)
        ++*heartbeats;
      continue;
    }
    auto colon = line.find(':');
    auto field = line.substr(0, colon);
    auto value = colon == std::string::npos ? std::string{} : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ')
      value.erase(0, 1);
    any = true;
    if (field == "id")
      cur.id = value;
    else if (field == "event")
      cur.event = value;
    else if (field == "data")
      cur.data += (cur.data.empty() ? "" : "\n") + value;
  }
  return out;
}

// A running `quarry serve` on 127.0.0.1 and a free port.
struct server_process {
  std::unique_ptr<test::child_process> proc;
  std::string base;

  server_process(const test::temp_dir& home, std::vector<std::string> extra,
                 std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("serve");
    argv.push_back("--listen");
    argv.push_back("127.0.0.1:0");
    auto opts = test::isolated_quarry_options(home.path(), env);
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

inline std::vector<std::pair<std::string, std::optional<std::string>>>
llm_env(const test::fake_llm_server& server) {
  return {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
}

/// The state of a session (GET /v1/research/{id}).
inline std::string state_of(const server_process& srv, const std::string& id) {
  return call("GET", srv.url("/v1/research/" + id)).as_json()["state"].get<std::string>();
}

/// Waits up to a minute for `pred`; fails the test then.
template <class Pred>
void wait_until(Pred pred, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      FAIL("timed out waiting for " << what);
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

} // namespace quarry::test::serve
