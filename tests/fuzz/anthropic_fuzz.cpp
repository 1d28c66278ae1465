// libFuzzer target for the `anthropic` plugin: arbitrary bytes go through the
// SSE parser into the stream assembler in pieces whose sizes the input
// chooses; the same bytes are also classified as an error body and, if they
// are JSON, assembled as a non-streamed message.

#include "anthropic_errors.hpp"
#include "anthropic_stream.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace {

namespace anth = quarry::plugins::llm_anthropic;
namespace sdk = quarry::sdk;

void check(bool condition) {
  if (!condition)
    std::abort();
}

// Records deltas so that they can be compared with the assembled result.
struct listener : anth::stream_listener {
  std::string text;
  std::string reasoning;
  std::map<int, std::string> arguments;
  bool any = false;

  void on_text(std::string_view delta) override {
    check(!delta.empty());
    text += delta;
    any = true;
  }
  void on_reasoning(std::string_view delta) override {
    check(!delta.empty());
    reasoning += delta;
    any = true;
  }
  void on_tool_call(const sdk::tool_call_delta& delta) override {
    check(delta.index >= 0);
    arguments[delta.index] += delta.arguments;
    any = true;
  }
  void on_usage(const sdk::usage& counts) override {
    check(counts.cached_input_tokens >= 0);
  }
};

// Checks what holds for every outcome.
void check_outcome(const anth::stream_assembler& a, const listener& out) {
  check(a.streamed() == out.any);
  auto res = a.result();
  check(res.text == out.text);
  check(res.reasoning == out.reasoning);
  check(out.arguments.size() == res.tool_calls.size());
  for (size_t i = 0; i < res.tool_calls.size(); ++i) {
    check(!res.tool_calls[i].arguments.empty());
    // The streamed pieces add up to the final arguments, except for the
    // `{}` of a call whose block never closed and had no piece.
    const auto& streamed = out.arguments.at(static_cast<int>(i));
    check(streamed == res.tool_calls[i].arguments
          || (streamed.empty() && res.tool_calls[i].arguments == "{}"));
  }
  if (a.state() == anth::stream_state::failed)
    check(a.failure().has_value());
  else
    check(!a.failure().has_value());
  // Everything that leaves the decoder is valid UTF-8 and serialises.
  check(sdk::is_valid_utf8(res.text) && sdk::is_valid_utf8(res.reasoning)
        && sdk::is_valid_utf8(res.model));
  for (const auto& call : res.tool_calls)
    check(sdk::is_valid_utf8(call.id) && sdk::is_valid_utf8(call.name)
          && sdk::is_valid_utf8(call.arguments));
  if (a.failure())
    check(sdk::is_valid_utf8(a.failure()->message));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  // The first byte picks the piece size (0 means all at once).
  size_t piece = data[0] % 32;
  std::string_view bytes{reinterpret_cast<const char*>(data) + 1, size - 1};
  {
    anth::stream_decoder dec;
    listener out;
    if (piece == 0) {
      dec.feed(bytes, out);
    } else {
      for (size_t pos = 0; pos < bytes.size(); pos += piece)
        dec.feed(bytes.substr(pos, piece), out);
    }
    auto state = dec.finish(out);
    check(state != anth::stream_state::running);
    check_outcome(dec.assembler(), out);
  }
  {
    auto err = anth::classify_error_body(bytes, 0);
    check(!err.message.empty());
    check(sdk::is_valid_utf8(err.message));
    // A 529 is `overloaded`, unless its body proves a cause no retry cures
    // (an unknown model, a prompt too long, no quota, bad credentials): that
    // cause wins, and no retry is hinted.
    auto http = anth::classify_http_error(529, {}, bytes);
    check(http.code == sdk::errc::overloaded
          || (http.retry_hint == false
              && (http.code == sdk::errc::not_found || http.code == sdk::errc::context_too_long
                  || http.code == sdk::errc::quota || http.code == sdk::errc::auth)));
  }
  auto message = sdk::parse_json(bytes);
  if (!message.is_discarded()) {
    anth::stream_assembler a;
    listener out;
    auto state = a.on_message(message, out);
    check(state != anth::stream_state::running);
    check_outcome(a, out);
  }
  return 0;
}
