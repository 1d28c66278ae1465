// Benchmark of claim verification.
//
//   quarry_bench_verification [--claims N] [--runs R] [--plugin-dir DIR]
//
// 1. The verifier actor with the lexical judge on a scripted report of N
//    claims over the example corpus whose truth is known: a third copied
//    from the cited document (supported), a third with a number or a word
//    changed (unsupported), a third citing the wrong document (re-citable).
//    Reported: claims verified per second, the verified-claim rate, and how
//    often the verdict matches the known truth.
// 2. Overhead: offline research (extractive provider over the example
//    corpus), orchestrator and reflective strategies, R runs each with and
//    without verification; the share of the research's wall time that
//    verification adds, and each report's verified-claim rate.

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/actors/verifier.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/verification.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/process.hpp"

#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

using namespace quarry;
using clock_type = std::chrono::steady_clock;
namespace v = core::verification;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Sentences of `text` between 60 and 300 bytes, with a digit or not.
std::vector<std::string> sentences_of(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      cur.clear();
      continue;
    }
    cur += c;
    if ((c == '.' || c == '?' || c == '!')
        && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) {
      auto s = cur;
      while (!s.empty() && s.front() == ' ')
        s.erase(0, 1);
      if (s.size() >= 60 && s.size() <= 300 && s.find('[') == std::string::npos
          && s.find('*') == std::string::npos && s.find('|') == std::string::npos
          && s.find('#') == std::string::npos && s.find('`') == std::string::npos)
        out.push_back(s);
      cur.clear();
    }
  }
  return out;
}

struct verifier_run {
  std::vector<nlohmann::json> claims;
  nlohmann::json summary;
  double seconds = 0;
};

verifier_run run_verifier(caf::actor_system& sys, actors::verifier_spec spec) {
  auto done = std::make_shared<std::promise<void>>();
  auto got = std::make_shared<verifier_run>();
  auto listener = sys.spawn([done, got]() -> actors::verification_listener_actor::behavior_type {
    return {
      [got](actors::verified_claim_atom, const std::string& packet) {
        got->claims.push_back(nlohmann::json::parse(packet));
      },
      [done, got](actors::verified_atom, const std::string&, const std::string& sum,
                  const std::string&) {
        got->summary = nlohmann::json::parse(sum);
        done->set_value();
      },
    };
  });
  auto t0 = clock_type::now();
  actors::spawn_verifier(sys, std::move(spec), actors::llm_provider_actor{}, listener);
  done->get_future().wait();
  got->seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  caf::anon_send_exit(listener, caf::exit_reason::user_shutdown);
  return *got;
}

int verifier_part(int claims) {
  auto dir = std::string{QUARRY_SOURCE_DIR} + "/examples/corpus";
  std::vector<v::source_text> sources;
  std::vector<std::vector<std::string>> sentences;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto ext = e.path().extension().string();
    if (ext != ".md" && ext != ".txt")
      continue;
    v::source_text s;
    s.number = static_cast<int>(sources.size()) + 1;
    s.title = e.path().stem().string();
    s.url = "file://" + e.path().string();
    s.text = slurp(e.path().string());
    auto ss = sentences_of(s.text);
    if (ss.size() < 3)
      continue;
    s.number = static_cast<int>(sources.size()) + 1;
    sources.push_back(std::move(s));
    sentences.push_back(std::move(ss));
  }
  if (sources.size() < 3) {
    std::fprintf(stderr, "the example corpus has too few documents\n");
    return 1;
  }
  // The report and the truth of each claim: 0 supported, 1 unsupported,
  // 2 cites the wrong document.
  std::string report;
  std::vector<int> truth;
  for (int i = 0; i < claims; ++i) {
    auto d = static_cast<size_t>(i * 7) % sources.size();
    const auto& ss = sentences[d];
    auto sentence = ss[static_cast<size_t>(i / 3) % ss.size()];
    int kind = i % 3;
    int cite = sources[d].number;
    if (kind == 1) {
      // A changed claim: every digit moved by one, or a word replaced.
      bool digit = false;
      for (auto& c : sentence)
        if (c >= '0' && c <= '9') {
          c = c == '9' ? '1' : static_cast<char>(c + 1);
          digit = true;
        }
      if (!digit)
        sentence = "Unlike what is often said, the opposite of this holds: nothing in "
                   "the sources supports claim "
                   + std::to_string(i) + ".";
    } else if (kind == 2) {
      cite = sources[(d + 1) % sources.size()].number;
    }
    while (!sentence.empty() && (sentence.back() == '.' || sentence.back() == '?'))
      sentence.pop_back();
    report += sentence + " [" + std::to_string(cite) + "].\n\n";
    truth.push_back(kind);
  }
  core::settings cfg;
  actors::runtime rt{cfg};
  actors::verifier_spec spec;
  spec.report = report;
  spec.sources = sources;
  spec.budget = std::chrono::minutes{10};
  auto r = run_verifier(rt.system(), spec);
  if (!r.summary.is_object()) {
    std::fprintf(stderr, "the verifier gave no summary (%zu claim packets)\n", r.claims.size());
    return 1;
  }
  size_t agree = 0;
  size_t judged = std::min(r.claims.size(), truth.size());
  for (size_t i = 0; i < judged; ++i) {
    auto verdict = r.claims[i]["verdict"].get<std::string>();
    auto recited = !r.claims[i]["recited_to"].is_null();
    bool ok = truth[i] == 0   ? verdict == "supported" && !recited
              : truth[i] == 1 ? verdict != "supported"
                              : recited;
    agree += ok ? 1 : 0;
  }
  std::printf("verifier, lexical judge: %zu claims over %zu documents in %.3f s = %.0f claims/s\n",
              r.claims.size(), sources.size(), r.seconds,
              static_cast<double>(r.claims.size()) / r.seconds);
  std::printf("  verified-claim rate %.3f (%d supported, %d recited, %d unsupported or without "
              "evidence); verdicts matching the known truth: %zu of %zu (%.1f %%)\n",
              r.summary.value("rate", 0.0), r.summary.value("supported", 0),
              r.summary.value("recited", 0),
              r.summary.value("unsupported", 0) + r.summary.value("no_evidence", 0), agree, judged,
              judged == 0 ? 0.0 : 100.0 * static_cast<double>(agree) / static_cast<double>(judged));
  return 0;
}

struct research_env {
  test::temp_dir tmp;
  core::settings cfg;
  std::unique_ptr<host::host_services> services;
  std::unique_ptr<host::plugin_registry> registry;
  std::unique_ptr<actors::runtime> rt;
  std::shared_ptr<const core::prompt_library> prompts = std::make_shared<core::prompt_library>(
    core::prompt_library::embedded());
  actors::llm_provider_actor llm;
  actors::tool_set tools;

  explicit research_env(const std::string& plugin_dir) {
    cfg.runtime.data_dir = tmp.path();
    services = std::make_unique<host::host_services>(cfg);
    registry = std::make_unique<host::plugin_registry>(*services);
    registry->load_directories({plugin_dir});
    rt = std::make_unique<actors::runtime>(cfg);
    auto made = registry->make_llm("extractive", nlohmann::json::object());
    llm = actors::spawn_llm_provider(rt->system(),
                                     std::get<std::shared_ptr<sdk::llm_provider>>(made),
                                     actors::llm_actor_settings::of("main", {}));
    rt->add_stoppable(llm);
    auto db = tmp.file("corpus.db");
    {
      auto opened = corpus::corpus_index::open(db);
      opened.index->update({std::string{QUARRY_SOURCE_DIR} + "/examples/corpus"});
    }
    auto tool = std::get<std::shared_ptr<sdk::tool>>(
      registry->make_tool("local_corpus", {{"db", db}}));
    auto hdl = actors::spawn_tool_provider(rt->system(), tool,
                                           actors::tool_actor_settings::of("internal_search", {}));
    rt->add_stoppable(hdl);
    tools.tools["internal_search"] = {hdl, tool->definition(), sdk::tool_kind::internal_search};
  }

  ~research_env() {
    rt.reset();
    services->shutdown();
  }

  /// Seconds for one research, and the summary packet when verified.
  std::pair<double, nlohmann::json> research(const std::string& strategy, bool verify, int n) {
    actors::session_spec s;
    s.session_id = "bench" + std::to_string(n);
    s.question = "Why does a heat pump's efficiency drop in cold weather, and what do "
                 "manufacturers do about it?";
    s.clarify = false;
    s.current_datetime = "Sunday November 22, 2026";
    s.strategy = *actors::parse_research_strategy(strategy);
    s.reflective.depth = core::reflective::depth::medium;
    s.verify = verify;
    auto summary = std::make_shared<nlohmann::json>(nlohmann::json::object());
    auto drained = std::make_shared<std::promise<void>>();
    auto em = actors::spawn_emitter(rt->system(), s.session_id);
    auto sink = actors::spawn_line_sink(
      rt->system(),
      [summary](const std::string& line, uint64_t) {
        if (line.find("verification_summary") == std::string::npos)
          return;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("obj")
            && j["obj"].value("type", "") == "verification_summary")
          *summary = j["obj"];
      },
      [drained](uint64_t) { drained->set_value(); });
    caf::anon_send(em, actors::subscribe_atom::value, sink, uint64_t{0});
    caf::scoped_actor self{rt->system()};
    actors::session_models models{llm, llm, llm, llm, llm};
    auto t0 = clock_type::now();
    actors::spawn_research_session(rt->system(), std::move(s), models, tools, em, prompts,
                                   caf::actor_cast<actors::session_requester_actor>(self));
    self->receive([](actors::session_done_atom, actors::session_result&) {});
    auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    self->request(em, std::chrono::seconds{10}, actors::stop_atom::value)
      .receive([](uint64_t) {}, [](const caf::error&) {});
    // Every packet reached the sink.
    drained->get_future().wait_for(std::chrono::seconds{10});
    return {secs, *summary};
  }
};

int overhead_part(const std::string& plugin_dir, int runs) {
  research_env env{plugin_dir};
  std::printf("\noffline research (extractive provider, example corpus, %d runs each):\n", runs);
  std::printf("%-13s %12s %12s %10s %8s %6s\n", "strategy", "without ms", "with ms", "overhead",
              "claims", "rate");
  for (const auto* strategy : {"orchestrator", "reflective"}) {
    std::vector<double> off;
    std::vector<double> on;
    nlohmann::json last;
    env.research(strategy, false, 0); // warm-up
    for (int i = 0; i < runs; ++i) {
      off.push_back(env.research(strategy, false, 2 * i + 1).first);
      auto [secs, summary] = env.research(strategy, true, 2 * i + 2);
      on.push_back(secs);
      last = summary;
    }
    std::sort(off.begin(), off.end());
    std::sort(on.begin(), on.end());
    auto median = [](const std::vector<double>& xs) { return xs[xs.size() / 2]; };
    auto a = median(off);
    auto b = median(on);
    std::printf("%-13s %12.1f %12.1f %9.1f%% %8d %6.2f\n", strategy, a * 1000, b * 1000,
                100.0 * (b - a) / b, last.value("claims", 0), last.value("rate", 0.0));
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int claims = 300;
  int runs = 5;
  std::string plugin_dir = QUARRY_PLUGIN_DIR;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--claims") == 0)
      claims = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--runs") == 0)
      runs = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--plugin-dir") == 0)
      plugin_dir = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (claims < 3 || runs < 1) {
    std::fprintf(stderr, "--claims must be at least 3 and --runs at least 1\n");
    return 2;
  }
  if (auto rc = verifier_part(claims); rc != 0)
    return rc;
  return overhead_part(plugin_dir, runs);
}
