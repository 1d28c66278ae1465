// This file is part of the Quarry plugin SDK.
// A response sink that collects a whole HTTP response into a bounded buffer,
// and the mapping of error responses to classified errors: what a plugin
// that calls a JSON API needs instead of writing its own sink.

#pragma once

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace quarry::sdk {

/// A complete HTTP response.
struct http_response {
  /// The final status (after redirects); 0 if none arrived.
  int status = 0;
  http_headers headers;
  std::string body;

  /// Returns whether the status is 2xx.
  bool ok() const noexcept {
    return status >= 200 && status <= 299;
  }
};

/// Returns a readable message from an API's error body, at most `max_size`
/// bytes of valid UTF-8 on one line: the JSON members `error.detail`,
/// `error.message`, `error.code`, `error` (a string), `detail.error`,
/// `detail` or `message`, else the first 200 bytes of the body. Escape
/// sequences and control characters go (@ref strip_terminal_controls: the
/// message may reach a terminal), line breaks and tabs become spaces, runs of
/// spaces fold to one and the ends are trimmed.
inline std::string http_error_message(std::string_view body, size_t max_size = 300) {
  std::string msg;
  auto j = parse_json(body);
  auto str = [](const nlohmann::json& x) -> std::string {
    return x.is_string() ? x.get<std::string>() : std::string{};
  };
  if (j.is_object()) {
    if (auto e = j.find("error"); e != j.end()) {
      if (e->is_object()) {
        for (auto key : {"detail", "message", "code"})
          if (auto d = e->find(key); d != e->end() && msg.empty())
            msg = str(*d);
      } else {
        msg = str(*e);
      }
    }
    if (auto d = j.find("detail"); msg.empty() && d != j.end()) {
      if (d->is_object() && d->contains("error"))
        msg = str((*d)["error"]);
      else
        msg = str(*d);
    }
    if (auto m = j.find("message"); msg.empty() && m != j.end())
      msg = str(*m);
  }
  if (msg.empty())
    msg = std::string{utf8_prefix(body, 200)};
  std::string out;
  out.reserve(msg.size());
  for (auto c : strip_terminal_controls(msg)) {
    if (c == '\n' || c == '\t')
      c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' '))
      continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  // Valid UTF-8 already (strip_terminal_controls), cut at a character.
  if (out.size() > max_size)
    out.resize(utf8_prefix(out, max_size).size());
  return out;
}

/// Classifies an error response (status outside 2xx) with `message` as the
/// error's text: the class from the status (classify_http_status), the wait
/// the server asks for (`retry-after-ms`, `Retry-After`) and its retry hint
/// (`x-should-retry`). Plugins refine the class with what the body says.
inline error http_status_error(int status, const http_headers& headers, std::string message) {
  auto err = make_error(classify_http_status(status), std::move(message), status);
  err.retry_after_ms = retry_after_ms(headers);
  err.retry_hint = should_retry_header(headers);
  return err;
}

/// Collects one response into a buffer of at most `max_body_bytes` and calls
/// `done` exactly once, on the host's I/O thread, with the response and:
/// - nothing, for a complete 2xx response;
/// - http_status_error(status, headers, http_error_message(body)) for any
///   other status (the body is still there, to refine the error);
/// - errc::too_large once the body outgrows the buffer (the request is
///   aborted at once);
/// - the host's error when the request failed (network, timeout, cancelled).
class buffered_response_sink final : public http_response_sink {
public:
  /// Receives the outcome.
  using callback = std::function<void(http_response response, std::optional<error> failure)>;

  buffered_response_sink(int64_t max_body_bytes, callback done)
    : max_body_bytes_(max_body_bytes), done_(std::move(done)) {
    // nop
  }

  bool on_response(int status, const http_headers& headers) override {
    response_.status = status;
    response_.headers = headers;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    if (static_cast<int64_t>(response_.body.size() + bytes.size()) > max_body_bytes_) {
      too_large_ = true;
      return false;
    }
    response_.body.append(bytes.data(), bytes.size());
    return true;
  }

  void on_complete(std::optional<error> failure) override {
    auto done = std::exchange(done_, nullptr);
    if (!done)
      return;
    if (too_large_)
      failure = make_error(errc::too_large, "the response is larger than "
                                              + std::to_string(max_body_bytes_) + " bytes");
    else if (!failure && !response_.ok())
      failure = http_status_error(response_.status, response_.headers,
                                  http_error_message(response_.body));
    done(std::move(response_), std::move(failure));
  }

private:
  int64_t max_body_bytes_;
  callback done_;
  http_response response_;
  bool too_large_ = false;
};

/// Starts `request` and collects its response (see buffered_response_sink).
/// The host's own size limit is set to `max_body_bytes` too, unless the
/// request has a smaller one. Returns the handle that cancels the request.
inline std::shared_ptr<http_call> fetch_buffered(http_client& client, http_request request,
                                                 int64_t max_body_bytes,
                                                 buffered_response_sink::callback done) {
  if (request.max_response_bytes == 0 || request.max_response_bytes > max_body_bytes)
    request.max_response_bytes = max_body_bytes;
  return client.start(std::move(request),
                      std::make_shared<buffered_response_sink>(max_body_bytes, std::move(done)));
}

} // namespace quarry::sdk
