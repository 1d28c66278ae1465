// Benchmark of the LLM provider actor path: a real `openai` plugin loaded from
// disk, the provider actor, the host HTTP client and the fake LLM server with
// zero latency, all in one process on loopback.
//
//   quarry_bench_llm_actor [--calls N] [--concurrent N] [--plugin-dir DIR]
//
// Prints the latency of sequential calls (p50/p99) and the outcome, time and
// memory of N concurrent streaming calls through one provider actor.

#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include "process_usage.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace quarry;
using clock_type = std::chrono::steady_clock;
using bench::rss_mib;

namespace {

sdk::chat_request make_request() {
  sdk::chat_request req;
  req.messages.push_back({sdk::role::user, "Say something short.", {}, {}, {}, {}, {}});
  return req;
}

} // namespace

int main(int argc, char** argv) {
  int calls = 2000;
  int concurrent = 1000;
  std::string plugin_dir = QUARRY_PLUGIN_DIR;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--calls") == 0)
      calls = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--concurrent") == 0)
      concurrent = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--plugin-dir") == 0)
      plugin_dir = argv[i + 1];
  }
  actors::block_stop_signals();
  test::fake_llm_server server;
  server.record_requests(false);
  auto err = server.script(nlohmann::json::parse(R"([
    {"respond": {"text": "A short streamed answer of about twelve words for the benchmark run.",
                 "chunk_words": 1, "usage": {"input_tokens": 10, "output_tokens": 12}}}
  ])"));
  if (err) {
    std::fprintf(stderr, "script: %s\n", err->message.c_str());
    return 1;
  }
  test::temp_dir tmp;
  core::settings cfg;
  cfg.runtime.data_dir = tmp.path();
  cfg.http.max_connections = 2048;
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  registry.load_directories({plugin_dir});
  nlohmann::json pcfg{
    {"base_url", server.base_url_openai()}, {"model", "bench"}, {"api_key", "sk-bench"}};
  auto made = registry.make_llm("openai", pcfg, "bench");
  if (auto* e = std::get_if<std::string>(&made)) {
    std::fprintf(stderr, "plugin: %s\n", e->c_str());
    return 1;
  }
  auto provider = std::get<std::shared_ptr<sdk::llm_provider>>(made);
  int rc = 0;
  {
    actors::runtime rt{cfg};
    actors::llm_actor_settings settings;
    settings.name = "bench";
    settings.max_concurrency = std::max(concurrent, 16);
    auto hdl = actors::spawn_llm_provider(rt.system(), provider, settings);
    rt.add_stoppable(hdl);
    caf::scoped_actor self{rt.system()};

    // 1. Sequential calls: the whole path per call.
    std::vector<double> lat;
    lat.reserve(static_cast<size_t>(calls));
    int failures = 0;
    size_t deltas = 0;
    for (int i = 0; i < calls; ++i) {
      auto t0 = clock_type::now();
      self->send(hdl, actors::chat_atom::value,
                 actors::llm_call{static_cast<uint64_t>(i), make_request()});
      auto done = false;
      while (!done)
        self->receive([&](actors::delta_atom,
                          const actors::llm_deltas& ds) { deltas += ds.size(); },
                      [&](const actors::llm_reply&) { done = true; },
                      [&](const caf::error&) {
                        ++failures;
                        done = true;
                      });
      lat.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double p) {
      return lat.empty() ? 0.0 : lat[static_cast<size_t>(p * (lat.size() - 1))];
    };
    std::printf("sequential calls: %d, failures %d, deltas %zu\n", calls, failures, deltas);
    std::printf("  latency per call: p50 %.0f us, p90 %.0f us, p99 %.0f us\n", pct(0.5), pct(0.9),
                pct(0.99));

    // 2. Concurrent streaming calls through the one actor.
    auto rss_before = rss_mib();
    auto t0 = clock_type::now();
    for (int i = 0; i < concurrent; ++i)
      self->send(hdl, actors::chat_atom::value,
                 actors::llm_call{static_cast<uint64_t>(100000 + i), make_request()});
    int ok = 0;
    int bad = 0;
    deltas = 0;
    double rss_peak = rss_before;
    while (ok + bad < concurrent) {
      self->receive(
        [&](actors::delta_atom, const actors::llm_deltas& ds) {
          auto before = deltas;
          deltas += ds.size();
          if ((before >> 10) != (deltas >> 10))
            rss_peak = std::max(rss_peak, rss_mib());
        },
        [&](const actors::llm_reply&) { ++ok; },
        [&](const caf::error& e) {
          if (bad++ == 0)
            std::fprintf(stderr, "first error: %s\n", actors::from_caf_error(e).message.c_str());
        });
    }
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    rss_peak = std::max(rss_peak, rss_mib());
    std::printf("concurrent calls: %d, ok %d, failed %d, deltas %zu, %.2f s\n", concurrent, ok, bad,
                deltas, secs);
    std::printf("  RSS before %.1f MiB, peak %.1f MiB: %.1f KiB per concurrent call\n", rss_before,
                rss_peak, (rss_peak - rss_before) * 1024.0 / std::max(concurrent, 1));
    rc = (failures == 0 && bad == 0) ? 0 : 1;
  }
  services.shutdown();
  return rc;
}
