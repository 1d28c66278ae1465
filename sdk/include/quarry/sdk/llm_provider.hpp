// This file is part of the Quarry plugin SDK.
// The interface of an LLM provider plugin: non-blocking streaming chat.

#pragma once

#include "quarry/sdk/plugin_object.hpp"
#include "quarry/sdk/types.hpp"
#include "quarry/sdk/version.hpp"

#include <functional>
#include <memory>
#include <string_view>

namespace quarry::sdk {

/// Receives the stream of one chat call. All calls may happen on the host's
/// I/O thread: implementations must return quickly and never block. The host
/// wraps this in a sink that forwards each call to an actor as a message.
class QUARRY_SDK_API chat_sink {
public:
  virtual ~chat_sink() = default;

  /// A piece of the answer text.
  virtual void on_text(std::string_view delta) = 0;

  /// A piece of the model's reasoning text.
  virtual void on_reasoning(std::string_view delta) = 0;

  /// A piece of a tool call (see @ref tool_call_delta).
  virtual void on_tool_call(const tool_call_delta& delta) = 0;

  /// Token counts, as soon as the provider reports them.
  virtual void on_usage(const usage& counts) = 0;

  /// The call finished; `result` holds the assembled text, reasoning and
  /// parsed tool calls. Exactly one of `on_done` and `on_error` is called,
  /// once, and nothing follows it.
  virtual void on_done(const chat_result& result) = 0;

  /// The call failed. `streamed` tells whether any text, reasoning or tool
  /// call delta was delivered before the failure (the host retries only
  /// calls that streamed nothing).
  virtual void on_error(const error& failure, bool streamed) = 0;
};

/// Cancels a chat call. Safe to call from any thread, any number of times.
class QUARRY_SDK_API chat_call {
public:
  virtual ~chat_call() = default;

  /// Stops the call; the sink receives `on_error(errc::cancelled)` unless
  /// the call already finished.
  virtual void cancel() = 0;
};

/// An LLM provider: one configured model behind one API.
class QUARRY_SDK_API llm_provider : public plugin_object {
public:
  /// Static facts about the configured model.
  virtual model_info info() const = 0;

  /// Starts a streaming chat call and returns at once. Results arrive through
  /// `sink`, which the provider keeps alive until it called `on_done` or
  /// `on_error`.
  virtual std::shared_ptr<chat_call>
  chat(chat_request request, std::shared_ptr<chat_sink> sink) = 0;

  /// Finds the model's facts, asking the server where it says them (e.g. the
  /// context window the server actually serves), and calls `done` with them
  /// exactly once: at once from inside this call, or later from any thread
  /// (usually the host's I/O thread). Never blocks; returns at once.
  ///
  /// `done` receives @ref info() with what the server said added:
  /// `context_window` in tokens (0 when unknown) and
  /// `context_window_source` naming where it came from (empty when nothing
  /// said it). A failure to learn anything (no such endpoint, a timeout, a
  /// malformed answer) is no error: it is the configured facts, with the
  /// window unknown unless configured. A plugin bounds the time, the size
  /// and the depth of what it reads, and may cache the result for the life
  /// of the object (the host asks once per provider and caches too).
  ///
  /// The default implementation calls `done(info())`.
  virtual void describe(std::function<void(model_info)> done) {
    done(info());
  }
};

} // namespace quarry::sdk
