// Benchmark of the store actor (actors/store.hpp): packets sent as the
// emitters send them, `(packet_atom, session, seq, line, turn, tab, fact)`, written by the one
// store actor in batches (20 ms or 512 writes, one transaction each) to a
// fresh research store. Measures the append rate through the actor (mailbox,
// batching, SQLite), where quarry_bench_store measures the library alone.
//
//   quarry_bench_store_actor [--packets P] [--sessions 1,16,256] [--repeat N]
//
// For each number of sessions S: S sessions are created (create_atom, each
// answered), then one sender sends P packets in turn to the sessions (seq
// order within each), then a flush; the time runs from the first packet to
// the flush's answer. The packets are then counted in the database.

#include "quarry/actors/runtime.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/core/settings.hpp"
#include "quarry/store/store.hpp"

#include "support/process.hpp"

#include "process_usage.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace quarry;
using clock_type = std::chrono::steady_clock;

namespace {

std::string line(const std::string& session, uint64_t seq) {
  std::string text(180, 'w');
  for (size_t i = 0; i < text.size(); i += 7)
    text[i] = ' ';
  return R"({"obj":{"content":")" + text
         + R"(","type":"message_delta"},"placement":{"sub_turn_index":null,"tab_index":1,"turn_index":2},"seq":)"
         + std::to_string(seq) + R"(,"session":")" + session + "\"}";
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  std::stringstream in{text};
  for (std::string x; std::getline(in, x, ',');)
    out.push_back(std::atoi(x.c_str()));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  size_t packets = 200000;
  std::vector<int> session_counts{1, 16, 256};
  int repeat = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--packets") == 0)
      packets = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--sessions") == 0)
      session_counts = parse_list(argv[i + 1]);
    else if (std::strcmp(argv[i], "--repeat") == 0)
      repeat = std::atoi(argv[i + 1]);
  }
  core::settings cfg;
  actors::runtime rt{cfg};
  int rc = 0;
  std::printf("| sessions | packets | seconds | packets/s | MB/s | CPU s (process) | "
              "peak RSS MiB |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int round = 0; round < repeat; ++round) {
    for (int sessions : session_counts) {
      test::temp_dir tmp;
      auto path = tmp.file("quarry.db");
      auto opened = store::store::open(path);
      if (auto* err = std::get_if<sdk::error>(&opened)) {
        std::fprintf(stderr, "open: %s\n", err->message.c_str());
        return 1;
      }
      std::shared_ptr<store::store> db = std::move(std::get<std::unique_ptr<store::store>>(opened));
      auto st = actors::spawn_store(rt.system(), db);
      db.reset();
      caf::scoped_actor self{rt.system()};
      std::vector<std::string> ids;
      for (int s = 0; s < sessions; ++s) {
        ids.push_back(store::make_session_id());
        std::string err;
        self
          ->request(st, std::chrono::seconds{30}, actors::create_atom::value, ids.back(),
                    std::string{}, std::string{"benchmark"}, std::string{"{}"})
          .receive([&](std::string& e) { err = std::move(e); },
                   [&](caf::error& e) { err = caf::to_string(e); });
        if (!err.empty()) {
          std::fprintf(stderr, "create: %s\n", err.c_str());
          return 1;
        }
      }
      // The lines are made before timing.
      std::vector<std::string> lines;
      lines.reserve(packets);
      size_t bytes = 0;
      for (size_t i = 0; i < packets; ++i) {
        auto s = i % static_cast<size_t>(sessions);
        lines.push_back(line(ids[s], i / static_cast<size_t>(sessions) + 1));
        bytes += lines.back().size();
      }
      auto cpu0 = bench::process_cpu_seconds();
      auto t0 = clock_type::now();
      for (size_t i = 0; i < packets; ++i) {
        auto s = i % static_cast<size_t>(sessions);
        self->send(st, actors::packet_atom::value, ids[s],
                   static_cast<uint64_t>(i / static_cast<size_t>(sessions) + 1),
                   std::move(lines[i]), int32_t{1}, int32_t{0}, actors::packet_fact{});
      }
      std::string flushed;
      self->request(st, std::chrono::minutes{5}, actors::flush_atom::value)
        .receive([&](std::string& e) { flushed = std::move(e); },
                 [&](caf::error& e) { flushed = caf::to_string(e); });
      auto wall = std::chrono::duration<double>(clock_type::now() - t0).count();
      auto cpu = bench::process_cpu_seconds() - cpu0;
      self->send(st, actors::stop_atom::value);
      self->wait_for(st);
      if (!flushed.empty()) {
        std::fprintf(stderr, "flush: %s\n", flushed.c_str());
        rc = 1;
      }
      // Count what was written.
      store::open_options ro;
      ro.read_only = true;
      auto check = store::store::open(path, ro);
      size_t stored = 0;
      if (auto* reader = std::get_if<std::unique_ptr<store::store>>(&check))
        for (const auto& id : ids) {
          auto read = (*reader)->packets(id, 1, 1000000000);
          if (!read) {
            // Not std::exit: the actor system's threads still run.
            std::fprintf(stderr, "read: %s\n", read.error().message.c_str());
            rc = 1;
            break;
          }
          stored += read->size();
        }
      if (stored != packets) {
        std::fprintf(stderr, "stored %zu packets of %zu\n", stored, packets);
        rc = 1;
      }
      std::printf("| %d | %zu | %.3f | %.0f | %.1f | %.2f | %.1f |\n", sessions, packets, wall,
                  static_cast<double>(packets) / wall, static_cast<double>(bytes) / wall / 1e6, cpu,
                  static_cast<double>(bench::peak_rss_kib()) / 1024.0);
    }
  }
  return rc;
}
