// libFuzzer target of the `openai` plugin's stream decoder: feeds arbitrary
// bytes as an SSE body (split at a size taken from the input), as a single
// chunk and as an error body, and checks the decoder's invariants and that
// its one-pass chunk reader agrees with reading every chunk into a tree.

#include "openai_stream.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace {

namespace openai = quarry::plugins::llm_openai;
namespace sdk = quarry::sdk;

struct collector : openai::stream_handler {
  std::string text;
  std::map<int, std::string> args;
  // Every callback in order, for comparing two decodings.
  std::string log;

  void on_text(std::string_view x) override {
    text += x;
    log += "T";
    log += x;
  }
  void on_reasoning(std::string_view x) override {
    log += "R";
    log += x;
  }
  void on_tool_call(const sdk::tool_call_delta& x) override {
    if (x.index < 0)
      std::abort();
    args[x.index] += x.arguments;
    log += "C" + std::to_string(x.index) + "|" + x.id + "|" + x.name + "|" + x.arguments;
  }
  void on_usage(const sdk::usage& x) override {
    log += "U" + std::to_string(x.input_tokens) + "," + std::to_string(x.output_tokens) + ","
           + std::to_string(x.reasoning_tokens) + "," + std::to_string(x.cached_input_tokens);
  }
};

// Two decodings of the same bytes (fed in different pieces) must agree.
void compare(const openai::stream_decoder& x, const collector& x_seen,
             const openai::stream_decoder& y, const collector& y_seen) {
  if (x.current() != y.current() || x_seen.log != y_seen.log || x.streamed() != y.streamed())
    std::abort();
  if (x.failure().has_value() != y.failure().has_value())
    std::abort();
  if (x.failure() && x.failure()->code != y.failure()->code)
    std::abort();
  auto a = x.result();
  auto b = y.result();
  if (a.text != b.text || a.reasoning != b.reasoning || a.finish != b.finish || a.model != b.model
      || a.tool_calls.size() != b.tool_calls.size())
    std::abort();
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].id != b.tool_calls[i].id || a.tool_calls[i].name != b.tool_calls[i].name
        || a.tool_calls[i].arguments != b.tool_calls[i].arguments)
      std::abort();
}

void check(const openai::stream_decoder& dec, const collector& seen) {
  if (dec.current() == openai::stream_decoder::state::running)
    std::abort(); // finish() must always decide
  if (dec.current() == openai::stream_decoder::state::failed && !dec.failure().has_value())
    std::abort();
  auto result = dec.result();
  // What streamed is exactly what was assembled.
  if (result.text != seen.text)
    std::abort();
  if (dec.streamed() == false && (!seen.text.empty() || !seen.args.empty()))
    std::abort();
  // Everything that leaves the decoder is valid UTF-8.
  if (!sdk::is_valid_utf8(result.text) || !sdk::is_valid_utf8(result.reasoning)
      || !sdk::is_valid_utf8(result.model))
    std::abort();
  for (const auto& call : result.tool_calls)
    if (!sdk::is_valid_utf8(call.id) || !sdk::is_valid_utf8(call.name)
        || !sdk::is_valid_utf8(call.arguments))
      std::abort();
  if (dec.failure() && !sdk::is_valid_utf8(dec.failure()->message))
    std::abort();
}

// Feeds `input` as an SSE body in pieces of `piece` bytes, then ends it.
void decode(openai::stream_decoder& dec, collector& seen, std::string_view input, size_t piece,
            bool trees) {
  dec.read_chunks_as_trees(trees);
  for (size_t i = 0; i < input.size(); i += std::max<size_t>(piece, 1))
    dec.feed(input.substr(i, piece), seen);
  dec.finish(seen);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  size_t piece = 1 + data[0] % 64;
  std::string_view input{reinterpret_cast<const char*>(data) + 1, size - 1};
  {
    collector seen;
    openai::stream_decoder dec;
    decode(dec, seen, input, piece, false);
    check(dec, seen);
    collector whole_seen;
    openai::stream_decoder whole;
    decode(whole, whole_seen, input, input.size(), false);
    compare(dec, seen, whole, whole_seen);
    // Every chunk read into a tree (the reference of the one-pass reader).
    collector tree_seen;
    openai::stream_decoder tree;
    decode(tree, tree_seen, input, input.size(), true);
    compare(dec, seen, tree, tree_seen);
  }
  {
    // The same bytes as the payload of one event (the chunk parser alone),
    // read in one pass and into a tree: the two agree.
    sdk::sse_event ev;
    ev.data = std::string{input};
    collector seen[2];
    openai::stream_decoder dec[2];
    for (int trees = 0; trees < 2; ++trees) {
      dec[trees].read_chunks_as_trees(trees == 1);
      dec[trees].on_event(ev, seen[trees]);
      dec[trees].finish(seen[trees]);
    }
    check(dec[0], seen[0]);
    compare(dec[0], seen[0], dec[1], seen[1]);
  }
  {
    // As an error body, and as tool-call fragments.
    auto err = openai::classify_error(400 + data[0] % 200, {}, input);
    if (err.message.empty() || !sdk::is_valid_utf8(err.message))
      std::abort();
    auto parsed = sdk::parse_json(input);
    if (parsed.is_array()) {
      openai::tool_call_accumulator acc;
      for (size_t i = 0; i < parsed.size(); ++i)
        acc.add(parsed[i], i, parsed.size());
      for (const auto& call : acc.calls())
        if (call.id.empty() || call.arguments.empty())
          std::abort();
    }
  }
  return 0;
}
