// The `anthropic` provider: one HTTP request per chat call, decoded as it
// streams, with cancellation from any thread and exactly one completion.

#include "anthropic_provider.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/secrets.hpp"

#include "anthropic_errors.hpp"
#include "anthropic_request.hpp"
#include "anthropic_stream.hpp"

#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace quarry::plugins::llm_anthropic {

namespace {

// How to read the body of the current response.
enum class body_mode { sse, json, error };

// Masks `secret` in `text` (the SDK's rule: whole values of a useful length).
void redact(std::string& text, const std::string& secret) {
  text = sdk::mask_secret(std::move(text), secret);
}

// The state of one chat call. It is the HTTP client's sink, the assembler's
// listener and the caller's cancel handle at once. A recursive mutex
// serialises the I/O thread and cancel(); sink calls happen under it, so that
// nothing reaches the sink after its completion, and a sink may call cancel()
// from inside a callback.
class call final : public sdk::chat_call, public sdk::http_response_sink, public stream_listener {
public:
  call(std::shared_ptr<sdk::chat_sink> sink, std::string api_key, std::string model)
    : sink_(std::move(sink)), api_key_(std::move(api_key)), model_(std::move(model)) {
    // nop
  }

  // Keeps the HTTP handle for cancel(), unless the call already ended.
  void attach(std::shared_ptr<sdk::http_call> http) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (!finished_)
      http_ = std::move(http);
  }

  // Fails the call before any request went out.
  void fail(sdk::error err) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    finish_error(std::move(err));
  }

  // -- sdk::chat_call ---------------------------------------------------------

  void cancel() override {
    std::shared_ptr<sdk::http_call> http;
    {
      std::lock_guard<std::recursive_mutex> guard{mtx_};
      if (finished_)
        return;
      http = std::move(http_);
      finish_error(sdk::make_error(sdk::errc::cancelled, "anthropic: call cancelled"));
    }
    if (http)
      http->cancel();
  }

  // -- sdk::http_response_sink ------------------------------------------------

  bool on_response(int status, const sdk::http_headers& headers) override {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (finished_)
      return !aborted_;
    status_ = status;
    headers_ = headers;
    if (status < 200 || status >= 300) {
      mode_ = body_mode::error;
    } else {
      auto type = sdk::find_header(headers, "content-type").value_or("");
      mode_ = type.find("application/json") != std::string::npos ? body_mode::json : body_mode::sse;
    }
    return true;
  }

  bool on_data(std::string_view bytes) override {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (finished_)
      return !aborted_; // drain the rest after message_stop
    if (mode_ != body_mode::sse) {
      if (body_.size() + bytes.size() > max_buffered_body) {
        finish_error(
          sdk::make_error(sdk::errc::too_large, "anthropic: response body too large", status_));
        return false;
      }
      body_.append(bytes.data(), bytes.size());
      return true;
    }
    try {
      return after(decoder_.feed(bytes, *this));
    } catch (const std::exception& ex) {
      finish_error(sdk::make_error(sdk::errc::internal, std::string{"anthropic: "} + ex.what()));
      return false;
    }
  }

  void on_complete(std::optional<sdk::error> failure) override {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    http_.reset();
    if (finished_)
      return;
    try {
      complete(std::move(failure));
    } catch (const std::exception& ex) {
      finish_error(sdk::make_error(sdk::errc::internal, std::string{"anthropic: "} + ex.what()));
    }
  }

  // -- stream_listener --------------------------------------------------------

  void on_text(std::string_view delta) override {
    if (finished_ || !sink_)
      return;
    streamed_ = true;
    sink_->on_text(delta);
  }

  void on_reasoning(std::string_view delta) override {
    if (finished_ || !sink_)
      return;
    streamed_ = true;
    sink_->on_reasoning(delta);
  }

  void on_tool_call(const sdk::tool_call_delta& delta) override {
    if (finished_ || !sink_)
      return;
    streamed_ = true;
    sink_->on_tool_call(delta);
  }

  void on_usage(const sdk::usage& counts) override {
    if (finished_ || !sink_)
      return;
    sink_->on_usage(counts);
  }

private:
  // Ends the call once the transfer ended, with or without `failure`.
  void complete(std::optional<sdk::error> failure) {
    if (failure) {
      if (mode_ == body_mode::error && status_ != 0 && failure->code != sdk::errc::cancelled) {
        // The status says more than a broken error body.
        finish_error(classify_http_error(status_, headers_, body_));
        return;
      }
      finish_error(std::move(*failure));
      return;
    }
    switch (mode_) {
      case body_mode::error:
        finish_error(classify_http_error(status_, headers_, body_));
        return;
      case body_mode::json: {
        std::string why;
        auto message = sdk::parse_json(body_, &why);
        if (message.is_discarded()) {
          finish_error(sdk::make_error(sdk::errc::invalid_response,
                                       "anthropic: response is not JSON (" + why + ")", status_));
          return;
        }
        after(decoder_.assembler().on_message(message, *this));
        return;
      }
      case body_mode::sse:
        after(decoder_.finish(*this));
        return;
    }
  }

  // Completes the call according to `state`; returns whether to go on
  // reading.
  bool after(stream_state state) {
    if (finished_)
      return !aborted_;
    switch (state) {
      case stream_state::running:
        return true;
      case stream_state::done:
        finish_done();
        return true;
      case stream_state::failed:
        finish_error(decoder_.assembler().failure().value_or(
          sdk::make_error(sdk::errc::internal, "anthropic: stream failed")));
        return false;
    }
    return true;
  }

  void finish_done() {
    if (finished_)
      return;
    finished_ = true;
    auto sink = std::move(sink_);
    auto result = decoder_.assembler().result();
    if (result.model.empty())
      result.model = model_;
    if (sink)
      sink->on_done(result);
  }

  void finish_error(sdk::error err) {
    if (finished_)
      return;
    finished_ = true;
    aborted_ = true;
    redact(err.message, api_key_);
    auto sink = std::move(sink_);
    if (sink)
      sink->on_error(err, streamed_);
  }

  std::recursive_mutex mtx_;
  std::shared_ptr<sdk::chat_sink> sink_;
  std::shared_ptr<sdk::http_call> http_;
  std::string api_key_;
  std::string model_;
  bool finished_ = false;
  bool aborted_ = false;
  bool streamed_ = false;
  int status_ = 0;
  sdk::http_headers headers_;
  body_mode mode_ = body_mode::sse;
  std::string body_;
  stream_decoder decoder_;
};

} // namespace

provider::provider(sdk::host_context& host, config cfg) : host_(host), cfg_(std::move(cfg)) {
  // nop
}

sdk::model_info provider::info() const {
  sdk::model_info result;
  result.model = cfg_.model;
  result.context_window = cfg_.context_window;
  result.supports_tools = true;
  result.supports_reasoning = cfg_.reasoning;
  return result;
}

std::shared_ptr<sdk::chat_call> provider::chat(sdk::chat_request request,
                                               std::shared_ptr<sdk::chat_sink> sink) {
  auto model = request.model.empty() ? cfg_.model : request.model;
  auto result = std::make_shared<call>(std::move(sink), cfg_.api_key, model);
  sdk::http_request req;
  try {
    std::vector<std::string> warnings;
    auto body = build_request_body(cfg_, request, warnings);
    for (const auto& line : warnings)
      host_.log().log(sdk::log_level::warn, line);
    req.method = "POST";
    req.url = cfg_.messages_url();
    req.headers = make_headers(cfg_);
    req.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    req.follow_redirects = false;
  } catch (const std::exception& ex) {
    result->fail(sdk::make_error(sdk::errc::internal, std::string{"anthropic: cannot build the "
                                                                  "request: "}
                                                        + ex.what()));
    return result;
  }
  result->attach(host_.http().start(std::move(req), result));
  return result;
}

std::unique_ptr<sdk::plugin_object> make_provider(sdk::host_context& host,
                                                  const nlohmann::json& cfg) {
  return std::make_unique<provider>(host, parse_config(cfg));
}

} // namespace quarry::plugins::llm_anthropic
