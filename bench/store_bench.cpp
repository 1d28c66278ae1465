// Benchmark of the research store: packet append rate in batches of 1, 64
// and 512 packets of about 300 bytes (one transaction per batch, as the
// store actor writes them), and reading the packets back (whole, and in
// pages of 1,000 as an event stream replays them).

#include "quarry/store/store.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

using namespace quarry::store;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

size_t arg(int argc, char** argv, const std::string& name, size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return static_cast<size_t>(std::strtoull(argv[i + 1], nullptr, 10));
  return fallback;
}

/// The value of a store read; on an error, prints it and exits with status 1.
template <class T>
T read_ok(result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    std::exit(1);
  }
  return std::move(*r);
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// A packet line of about 300 bytes, shaped like core::encode's.
std::string line(const std::string& session, uint64_t seq) {
  std::string text(180, 'w');
  for (size_t i = 0; i < text.size(); i += 7)
    text[i] = ' ';
  return R"({"obj":{"content":")" + text
         + R"(","type":"message_delta"},"placement":{"sub_turn_index":null,"tab_index":1,"turn_index":2},"seq":)"
         + std::to_string(seq) + R"(,"session":")" + session + "\"}";
}

} // namespace

int main(int argc, char** argv) {
  auto packets = arg(argc, argv, "--packets", 100000);
  auto dir = fs::temp_directory_path() / ("quarry-store-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto opened = store::open((dir / "store.db").string());
  if (auto* err = std::get_if<quarry::sdk::error>(&opened)) {
    std::fprintf(stderr, "open: %s\n", err->message.c_str());
    return 1;
  }
  auto& db = *std::get<std::unique_ptr<store>>(opened);
  int status = 0;
  std::printf("| batch size | packets | transactions | packets/s | "
              "us per batch | MB/s |\n|---:|---:|---:|---:|---:|---:|\n");
  std::string last_id;
  for (size_t per_batch : {size_t{1}, size_t{64}, size_t{512}}) {
    auto id = make_session_id();
    batch create;
    session_row row;
    row.id = id;
    row.question = "benchmark";
    create.new_sessions.push_back(row);
    if (auto err = db.write(create)) {
      std::fprintf(stderr, "write: %s\n", err->message.c_str());
      return 1;
    }
    // The lines are made before timing.
    std::vector<std::string> lines;
    lines.reserve(packets);
    size_t bytes = 0;
    for (uint64_t seq = 1; seq <= packets; ++seq) {
      lines.push_back(line(id, seq));
      bytes += lines.back().size();
    }
    size_t transactions = 0;
    auto t0 = clock_type::now();
    for (uint64_t seq = 1; seq <= packets;) {
      batch b;
      for (size_t i = 0; i < per_batch && seq <= packets; ++i, ++seq)
        b.packets.push_back({id, {seq, lines[seq - 1]}});
      if (auto err = db.write(b)) {
        std::fprintf(stderr, "write: %s\n", err->message.c_str());
        return 1;
      }
      ++transactions;
    }
    auto s = seconds_since(t0);
    std::printf("| %zu | %zu | %zu | %.0f | %.1f | %.1f |\n", per_batch, packets, transactions,
                static_cast<double>(packets) / s, s * 1e6 / static_cast<double>(transactions),
                static_cast<double>(bytes) / s / 1e6);
    auto stored = read_ok(db.session(id), "read session");
    if (!stored || stored->last_seq != packets)
      status = 1;
    last_id = id;
  }
  // Reading back the last session's packets.
  auto t0 = clock_type::now();
  auto all = read_ok(db.packets(last_id), "read packets");
  auto whole_s = seconds_since(t0);
  t0 = clock_type::now();
  size_t paged = 0;
  for (uint64_t from = 1;;) {
    auto page = read_ok(db.packets(last_id, from, 1000), "read packets");
    if (page.empty())
      break;
    paged += page.size();
    from = page.back().seq + 1;
  }
  auto paged_s = seconds_since(t0);
  std::printf("\n| read | packets | seconds | packets/s |\n|---|---:|---:|---:|\n");
  std::printf("| all at once | %zu | %.3f | %.0f |\n", all.size(), whole_s,
              static_cast<double>(all.size()) / whole_s);
  std::printf("| pages of 1,000 | %zu | %.3f | %.0f |\n", paged, paged_s,
              static_cast<double>(paged) / paged_s);
  std::error_code ec;
  uintmax_t size = 0;
  for (const char* name : {"store.db", "store.db-wal"}) {
    auto n = fs::file_size(dir / name, ec);
    if (!ec)
      size += n;
  }
  std::printf("\ndatabase size (with WAL): %.1f MB\n", static_cast<double>(size) / 1e6);
  if (all.size() != packets || paged != packets)
    status = 1;
  fs::remove_all(dir, ec);
  return status;
}
