// Benchmark of the `openai` plugin's stream decoder on the real recorded
// Chat Completions streams (the fixtures' llm/openai_chat/*.sse): the time to
// decode each whole stream, per stream and per event, fed in the small pieces
// a model's stream arrives in, with the decoder's one-pass chunk reader and
// with every chunk read into a JSON tree (read_chunks_as_trees). Prints a
// Markdown table.

#include "openai_counting_handler.hpp"
#include "openai_stream.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace openai = quarry::plugins::llm_openai;
using clock_type = std::chrono::steady_clock;

using quarry::bench::counting_handler;

struct recording {
  std::string name;
  std::string bytes;
  size_t events = 0;
};

std::vector<recording> load(const std::string& dir) {
  std::vector<recording> out;
  for (const auto& entry : std::filesystem::directory_iterator{dir}) {
    if (entry.path().extension() != ".sse")
      continue;
    std::ifstream in{entry.path(), std::ios::binary};
    std::ostringstream text;
    text << in.rdbuf();
    recording rec;
    rec.name = entry.path().stem().string();
    rec.bytes = text.str();
    for (auto pos = rec.bytes.find("data:"); pos != std::string::npos;
         pos = rec.bytes.find("data:", pos + 5))
      ++rec.events;
    out.push_back(std::move(rec));
  }
  std::sort(out.begin(), out.end(),
            [](const recording& x, const recording& y) { return x.name < y.name; });
  return out;
}

// Decodes `rec` once in pieces of `piece` bytes; returns the bytes delivered.
size_t decode(const recording& rec, size_t piece, bool trees) {
  openai::stream_decoder dec;
  dec.read_chunks_as_trees(trees);
  counting_handler handler;
  std::string_view all{rec.bytes};
  for (size_t i = 0; i < all.size(); i += piece)
    dec.feed(all.substr(i, piece), handler);
  dec.finish(handler);
  return handler.text_bytes + handler.tool_bytes + handler.usages
         + (dec.current() == openai::stream_decoder::state::done);
}

// Best time of `repeat` rounds of `loops` decodes, per decode, in seconds.
double time_of(const recording& rec, size_t piece, int loops, int repeat, bool trees,
               size_t& sink) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    auto start = clock_type::now();
    for (int i = 0; i < loops; ++i)
      sink += decode(rec, piece, trees);
    auto s = std::chrono::duration<double>(clock_type::now() - start).count();
    best = std::min(best, s / loops);
  }
  return best;
}

} // namespace

int main(int argc, char** argv) {
  std::string dir = QUARRY_FIXTURES_DIR "/llm/openai_chat";
  size_t piece = 64;
  int loops = 2000;
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0)
      dir = argv[i + 1];
    else if (std::strcmp(argv[i], "--piece") == 0)
      piece = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (std::strcmp(argv[i], "--loops") == 0)
      loops = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--repeat") == 0)
      repeat = std::atoi(argv[i + 1]);
  }
  if (piece == 0 || loops <= 0 || repeat <= 0) {
    std::fprintf(stderr, "usage: quarry_bench_openai_recordings [--dir DIR] "
                         "[--piece BYTES] [--loops N] [--repeat N]\n");
    return 2;
  }
  auto recordings = load(dir);
  if (recordings.empty()) {
    std::fprintf(stderr, "no .sse recordings in %s\n", dir.c_str());
    return 1;
  }
  std::printf("%zu recordings from %s, fed in %zu-byte pieces, best of %d "
              "rounds of %d decodes\n\n",
              recordings.size(), dir.c_str(), piece, repeat, loops);
  std::printf("| recording | bytes | events | us per stream | us per event | us per stream, "
              "trees | us per event, trees |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  size_t sink = 0;
  double total = 0;
  double total_trees = 0;
  size_t total_events = 0;
  size_t total_bytes = 0;
  for (const auto& rec : recordings) {
    auto s = time_of(rec, piece, loops, repeat, false, sink);
    auto t = time_of(rec, piece, loops, repeat, true, sink);
    total += s;
    total_trees += t;
    total_events += rec.events;
    total_bytes += rec.bytes.size();
    auto events = static_cast<double>(std::max<size_t>(rec.events, 1));
    std::printf("| %s | %zu | %zu | %.1f | %.2f | %.1f | %.2f |\n", rec.name.c_str(),
                rec.bytes.size(), rec.events, s * 1e6, s * 1e6 / events, t * 1e6, t * 1e6 / events);
  }
  auto events = static_cast<double>(total_events);
  std::printf("| all | %zu | %zu | %.1f | %.2f | %.1f | %.2f |\n\n", total_bytes, total_events,
              total * 1e6, total * 1e6 / events, total_trees * 1e6, total_trees * 1e6 / events);
  std::printf("(checksum %zu)\n", sink);
  return 0;
}
