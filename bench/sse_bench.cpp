// Benchmark of the `openai` plugin's stream decoding: SSE framing alone and
// the full decoder (SSE + chunk JSON + tool-call accumulation) on a large
// synthetic Chat Completions stream. Prints a Markdown table.

#include "openai_counting_handler.hpp"
#include "openai_stream.hpp"

#include "quarry/sdk/sse.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

namespace openai = quarry::plugins::llm_openai;
namespace sdk = quarry::sdk;
using clock_type = std::chrono::steady_clock;

using quarry::bench::counting_handler;

// Builds a stream shaped like a real gpt-4o stream (same envelope fields,
// `usage:null` and `obfuscation` on every chunk): text deltas of a few
// characters, then one tool call whose arguments arrive in small pieces, then
// the finish, usage and [DONE] chunks. Returns at least `target` bytes.
std::string make_stream(size_t target) {
  static constexpr const char* head
    = R"(data: {"id":"chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL","object":"chat.completion.chunk",)"
      R"("created":1727346172,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd",)"
      R"("service_tier":"default","choices":[{"index":0,"delta":)";
  static constexpr const char* tail
    = R"(,"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1Yz"})"
      "\n\n";
  static constexpr const char* words[] = {
    "The",  " quick", " brown",          " fox",        " jumps", " over", " the", " lazy",
    " dog", ".\\n",   " \\\"Quoted\\\"", " caf\\u00e9", " 18°C"};
  std::string out;
  out.reserve(target + 4096);
  out += head;
  out += R"({"role":"assistant","content":""})";
  out += tail;
  size_t i = 0;
  while (out.size() < target * 3 / 4) {
    out += head;
    out += R"({"content":")";
    out += words[i++ % (sizeof(words) / sizeof(words[0]))];
    out += R"("})";
    out += tail;
  }
  out += head;
  out
    += R"({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"web_search","arguments":""}}]})";
  out += tail;
  while (out.size() < target) {
    out += head;
    out += R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"q\": \"ab"}}]})";
    out += tail;
  }
  out += head;
  out += R"({},"finish_reason":"tool_calls"}],"usage":null})"
         "\n\n";
  out += R"(data: {"id":"x","object":"chat.completion.chunk","choices":[],)"
         R"("usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}})"
         "\n\n";
  out += "data: [DONE]\n\n";
  return out;
}

struct measurement {
  double seconds = 0;
  size_t check = 0;
};

measurement run_sse_only(const std::string& stream, size_t piece) {
  measurement m;
  sdk::sse_parser parser;
  size_t events = 0;
  auto start = clock_type::now();
  auto on_event = [&events](const sdk::sse_event&) {
    ++events;
    return true;
  };
  for (size_t i = 0; i < stream.size(); i += piece)
    parser.feed(std::string_view{stream}.substr(i, piece), on_event);
  parser.finish(on_event);
  m.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  m.check = events;
  return m;
}

measurement run_decoder(const std::string& stream, size_t piece) {
  measurement m;
  openai::stream_decoder dec;
  counting_handler handler;
  auto start = clock_type::now();
  for (size_t i = 0; i < stream.size(); i += piece)
    dec.feed(std::string_view{stream}.substr(i, piece), handler);
  auto state = dec.finish(handler);
  auto result = dec.result();
  m.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (state != openai::stream_decoder::state::done || result.tool_calls.size() != 1
      || handler.usages != 1) {
    std::fprintf(stderr, "decoder failed on the synthetic stream\n");
    std::exit(1);
  }
  m.check = handler.text_bytes + handler.tool_bytes;
  return m;
}

} // namespace

int main(int argc, char** argv) {
  size_t mib = 64;
  size_t piece = 16 * 1024;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib") == 0)
      mib = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (std::strcmp(argv[i], "--piece") == 0)
      piece = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (std::strcmp(argv[i], "--repeat") == 0)
      repeat = std::atoi(argv[i + 1]);
  }
  if (mib == 0 || piece == 0 || repeat <= 0) {
    std::fprintf(stderr, "usage: quarry_bench_sse [--mib N] [--piece BYTES] [--repeat N]\n");
    return 2;
  }
  auto stream = make_stream(mib * 1024 * 1024);
  auto mb = static_cast<double>(stream.size()) / 1e6;
  size_t events = 0;
  for (size_t pos = stream.find("\n\n"); pos != std::string::npos;
       pos = stream.find("\n\n", pos + 2))
    ++events;
  std::printf("stream: %.1f MB, %zu events (avg %.0f bytes), fed in %zu-byte pieces, "
              "best of %d\n\n",
              mb, events, static_cast<double>(stream.size()) / static_cast<double>(events), piece,
              repeat);
  std::printf("| stage | MB/s | events/s | s |\n|---|---:|---:|---:|\n");
  auto report = [&](const char* name, auto fn) {
    double best = 1e300;
    for (int r = 0; r < repeat; ++r)
      best = std::min(best, fn().seconds);
    std::printf("| %s | %.0f | %.0f | %.3f |\n", name, mb / best,
                static_cast<double>(events) / best, best);
  };
  report("SSE framing only (sdk::sse_parser)", [&] { return run_sse_only(stream, piece); });
  report("full decoder (SSE + JSON + tool calls)", [&] { return run_decoder(stream, piece); });
  return 0;
}
