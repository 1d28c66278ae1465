// A fake LLM server for tests and benchmarks: a real HTTP server on 127.0.0.1
// that speaks the OpenAI Chat Completions and Anthropic Messages wire formats.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/types.hpp"

#include "support/http_server.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::test {

/// A request the fake LLM server received.
struct llm_request {
  /// `openai` (a path ending in `/chat/completions`), `anthropic` (a path
  /// ending in `/messages`) or empty for any other path.
  std::string protocol;
  /// `POST`, `GET`, ...
  std::string method;
  /// The path without the query string, e.g. `/v1/chat/completions`.
  std::string path;
  /// The request target as sent, query string included.
  std::string target;
  /// Header fields in the order received.
  sdk::http_headers headers;
  /// The body as received.
  std::string raw_body;
  /// The parsed JSON body; null if the body is not JSON.
  nlohmann::json body;
  /// Index of the script rule that answered (0-based), or -1 if none did.
  int rule = -1;

  /// Returns the first header named `name` (case-insensitive).
  std::optional<std::string> header(std::string_view name) const;
};

/// How @ref fake_llm_server::replay serves its bytes.
struct replay_options {
  /// HTTP status of the answer.
  int status = 200;
  /// Extra header fields.
  sdk::http_headers headers;
  /// Splits the bytes into pieces of this many bytes (one chunk each);
  /// 0 sends them in one piece.
  size_t chunk_bytes = 0;
  /// Pause between two pieces.
  std::chrono::milliseconds chunk_delay{0};
  /// Pause before the status line.
  std::chrono::milliseconds latency{0};
  /// How many requests the replay answers; -1 means any number.
  int64_t times = -1;
};

/// A fake OpenAI / Anthropic endpoint driven by a script of rules (see
/// docs/testing.md for the script format). Answers `POST` on any path ending
/// in `/chat/completions` (OpenAI) or `/messages` (Anthropic), records every
/// request, and answers each one with the first rule that matches it and has
/// uses left. A request no rule matches gets a 500 with a JSON error naming
/// it. A `GET` on a path ending in `/models` (the model list the openai
/// plugin reads the context window from) gets an empty list and is neither
/// recorded nor counted; route it on server() to answer otherwise. All
/// member functions are thread-safe.
class fake_llm_server {
public:
  /// Starts an HTTP server on 127.0.0.1 and an ephemeral port, with an empty
  /// script.
  fake_llm_server();

  /// Stops the server.
  ~fake_llm_server();

  fake_llm_server(const fake_llm_server&) = delete;
  fake_llm_server& operator=(const fake_llm_server&) = delete;

  /// Replaces the script with `rules`: a JSON array of rules, or an object
  /// with a `rules` array. Relative replay paths resolve against `base_dir`
  /// (the current directory if empty). On error, keeps the old script.
  std::optional<sdk::error> script(const nlohmann::json& rules, const std::string& base_dir = "");

  /// Replaces the script with the one in the JSON file `path`; relative
  /// replay paths resolve against the file's folder.
  std::optional<sdk::error> script_file(const std::string& path);

  /// Appends one rule to the script.
  std::optional<sdk::error> add_rule(const nlohmann::json& rule, const std::string& base_dir = "");

  /// Appends a rule that answers any request with `path_or_bytes` byte for
  /// byte: the contents of the file of that name if the argument has no
  /// newline, else the bytes themselves. An empty `content_type` is derived
  /// from the file name (`.sse`: event stream, `.json`: JSON).
  std::optional<sdk::error> replay(const std::string& path_or_bytes, std::string content_type = "",
                                   replay_options opts = {});

  /// Appends a rule that answers any request with the bytes of `path`.
  std::optional<sdk::error> replay_file(const std::string& path, std::string content_type = "",
                                        replay_options opts = {});

  /// Appends a rule that answers any request with `bytes`.
  void replay_bytes(std::string bytes,
                    std::string content_type = "text/event-stream; charset=utf-8",
                    replay_options opts = {});

  /// Removes all rules.
  void clear_script();

  /// Returns copies of all recorded requests, oldest first.
  std::vector<llm_request> requests() const;

  /// Returns the number of requests received since construction or the last
  /// clear_requests(), recorded or not.
  size_t request_count() const;

  /// Turns recording on (the default) or off. Benchmarks that send many
  /// requests turn it off; request_count() still counts.
  void record_requests(bool on);

  /// Leaves `text` out of the default input token count (body bytes / 4):
  /// each occurrence counts as if it were absent. Tests that compare counts
  /// across checkouts leave out the checkout's and the home folder's paths,
  /// which reach the model inside `file://` URLs. Empty `text` is ignored.
  void uncounted(std::string text);

  /// Returns a copy of the `i`-th recorded request (0-based), if any.
  std::optional<llm_request> request_at(size_t i) const;

  /// Forgets all recorded requests and resets request_count().
  void clear_requests();

  /// Blocks until request_count() reaches `n` or `timeout` expired. Returns
  /// whether `n` requests arrived.
  bool wait_for_requests(size_t n, std::chrono::milliseconds timeout) const;

  /// Returns how many rules still have uses left (rules without `times`
  /// always count).
  size_t rules_left() const;

  /// The port the server listens on.
  uint16_t port() const noexcept;

  /// Returns `http://127.0.0.1:PORT/v1`, the base URL of an OpenAI client.
  std::string base_url_openai() const;

  /// Returns `http://127.0.0.1:PORT`, the base URL of an Anthropic client.
  std::string base_url_anthropic() const;

  /// Returns `http://127.0.0.1:PORT` followed by `path`.
  std::string url(std::string_view path = "/") const;

  /// Closes all connections and stops the server. Idempotent.
  void stop();

  /// The underlying HTTP server, e.g. for its counters.
  http_server& server() noexcept {
    return server_;
  }

private:
  struct rule;
  using rule_ptr = std::shared_ptr<rule>;

  response_plan answer(const request& req);

  std::optional<sdk::error> parse_rules(const nlohmann::json& rules, const std::string& base_dir,
                                        std::vector<std::shared_ptr<rule>>& out);

  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  std::vector<std::shared_ptr<rule>> rules_;
  std::vector<llm_request> requests_;
  size_t request_count_ = 0;
  bool recording_ = true;
  std::vector<std::string> uncounted_;
  uint64_t answered_ = 0;
  http_server server_;
};

} // namespace quarry::test
