// A chat sink for provider tests: records every callback, counts calls after
// the final one, and lets the test wait for the end. Header-only.

#pragma once

#include "quarry/sdk/llm_provider.hpp"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::test {

/// Records a chat call and lets the test wait for its end.
class chat_recorder final : public sdk::chat_sink {
public:
  void on_text(std::string_view x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    text += x;
    cv_.notify_all();
  }
  void on_reasoning(std::string_view x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    reasoning += x;
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    calls.push_back(x);
  }
  void on_usage(const sdk::usage& x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    usages.push_back(x);
  }
  void on_done(const sdk::chat_result& x) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    ++finals;
    result = x;
    cv_.notify_all();
  }
  void on_error(const sdk::error& x, bool was_streamed) override {
    std::lock_guard<std::mutex> guard{mtx_};
    check_open();
    ++finals;
    failure = x;
    streamed = was_streamed;
    cv_.notify_all();
  }

  /// Waits for on_done / on_error.
  bool wait() {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard_, [this] { return finals > 0; });
  }

  /// Waits until some text arrived.
  bool wait_text() {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard_, [this] { return !text.empty(); });
  }

  /// Re-assembles tool calls from the deltas by index.
  std::map<int, sdk::tool_call> assembled_calls() const {
    std::map<int, sdk::tool_call> out;
    for (const auto& d : calls) {
      auto& c = out[d.index];
      if (!d.id.empty())
        c.id = d.id;
      if (!d.name.empty())
        c.name = d.name;
      c.arguments += d.arguments;
    }
    return out;
  }

  std::string text;
  std::string reasoning;
  std::vector<sdk::tool_call_delta> calls;
  std::vector<sdk::usage> usages;
  int finals = 0;
  int after_final = 0;
  std::optional<sdk::chat_result> result;
  std::optional<sdk::error> failure;
  bool streamed = false;

private:
  // Only guards against a hanging test; never a timing assertion.
  static constexpr std::chrono::seconds hang_guard_{30};

  void check_open() {
    if (finals > 0)
      ++after_final;
  }

  std::mutex mtx_;
  std::condition_variable cv_;
};

} // namespace quarry::test
