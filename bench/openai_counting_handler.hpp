// A stream handler for the benchmarks of the `openai` plugin's decoder: it
// counts what the decoder delivers, so that nothing is optimised away.

#pragma once

#include "openai_stream.hpp"

#include <cstddef>
#include <string_view>

namespace quarry::bench {

/// Counts text, reasoning and argument bytes and usage reports.
struct counting_handler : plugins::llm_openai::stream_handler {
  size_t text_bytes = 0;
  size_t tool_bytes = 0;
  size_t usages = 0;

  void on_text(std::string_view x) override {
    text_bytes += x.size();
  }
  void on_reasoning(std::string_view x) override {
    text_bytes += x.size();
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    tool_bytes += x.arguments.size();
  }
  void on_usage(const sdk::usage&) override {
    ++usages;
  }
};

} // namespace quarry::bench
