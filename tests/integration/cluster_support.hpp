// Helpers of the cluster tests: `quarry worker` processes on loopback, the
// research command pointed at them, packets grouped by placement, and a
// private certificate authority made with the openssl command.

#pragma once

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace quarry::test::cluster {

/// A running `quarry worker`.
struct worker {
  std::unique_ptr<child_process> process;
  /// `127.0.0.1:PORT` it listens on.
  std::string address;
};

/// Certificates of a private CA: a worker's, a client's, and one of another
/// CA.
struct pki {
  std::string ca;
  std::string node_cert, node_key;
  std::string client_cert, client_key;
  std::string foreign_cert, foreign_key, foreign_ca;
};

/// Groups packet objects by placement (turn, tab, sub turn), each group in
/// order, with fields that measure time removed.
inline std::map<std::string, std::vector<std::string>>
packets_by_placement(const std::vector<nlohmann::json>& packets) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& p : packets) {
    auto obj = p["obj"];
    for (const char* timing :
         {"elapsed_seconds", "duration_ms", "cost_usd", "pre_answer_processing_seconds"})
      obj.erase(timing);
    out[p["placement"].dump()].push_back(obj.dump());
  }
  return out;
}

inline std::vector<std::string> concat(std::vector<std::string> a,
                                       const std::vector<std::string>& b,
                                       const std::vector<std::string>& c) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

struct cluster_fixture {
  temp_dir home;

  std::vector<std::string> argv(std::vector<std::string> args) const {
    std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  static std::vector<std::pair<std::string, std::optional<std::string>>>
  llm_env(const fake_llm_server& server) {
    return {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
  }

  process_result quarry(std::vector<std::string> args,
                        std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    return run_process(argv(std::move(args)), isolated_quarry_options(home.path(), env));
  }

  /// `quarry research --no-clarify --no-store ARGS` against `server`.
  process_result research(const fake_llm_server& server, std::vector<std::string> args) {
    std::vector<std::string> all{"--log-level", "info", "research", "--no-clarify", "--no-store"};
    all.insert(all.end(), args.begin(), args.end());
    return quarry(std::move(all), llm_env(server));
  }

  /// The same in the background.
  std::unique_ptr<child_process> start_research(const fake_llm_server& server,
                                                std::vector<std::string> args) {
    std::vector<std::string> all{"--log-level", "info", "research", "--no-clarify", "--no-store"};
    all.insert(all.end(), args.begin(), args.end());
    return std::make_unique<child_process>(argv(std::move(all)),
                                           isolated_quarry_options(home.path(), llm_env(server)));
  }

  /// Starts `quarry worker --listen 127.0.0.1:0` with its own home folder
  /// `name` and waits until it listens.
  std::unique_ptr<worker> start_worker(const fake_llm_server& server, const std::string& name,
                                       std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--log-level", "info", "worker", "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto w = std::make_unique<worker>();
    w->process = std::make_unique<child_process>(
      argv(std::move(args)), isolated_quarry_options(home.path() + "/" + name, llm_env(server)));
    auto line = w->process->wait_for_err_line("worker listening on ", std::chrono::seconds{90});
    INFO(w->process->err());
    REQUIRE(line);
    auto at = line->find("worker listening on ") + 20;
    w->address = line->substr(at, line->find(' ', at) - at);
    return w;
  }

  static std::string workers_setting(const std::vector<std::string>& addresses) {
    std::string list;
    for (const auto& a : addresses)
      list += (list.empty() ? "" : ", ") + a;
    return "cluster.workers=[" + list + "]";
  }

  static std::vector<std::string> tls_settings(const std::string& cert, const std::string& key,
                                               const std::string& ca) {
    return {"--set", "cluster.tls.cert=" + cert, "--set", "cluster.tls.key=" + key,
            "--set", "cluster.tls.ca=" + ca};
  }

  static std::vector<nlohmann::json> lines(const std::string& text) {
    std::vector<nlohmann::json> out;
    std::istringstream in{text};
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      REQUIRE_FALSE(j.is_discarded());
      out.push_back(std::move(j));
    }
    return out;
  }

  static size_t count_of(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + needle.size()))
      ++n;
    return n;
  }

  static bool wait_for_requests(const fake_llm_server& server, const char* marker, size_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (std::chrono::steady_clock::now() < deadline) {
      size_t seen = 0;
      for (const auto& r : server.requests())
        if (r.raw_body.find(marker) != std::string::npos)
          ++seen;
      if (seen >= n)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    return false;
  }

  /// Makes a CA, a worker's and a client's certificate signed by it, and a
  /// certificate of another CA, with the openssl command.
  pki make_pki() {
    auto dir = home.path() + "/pki";
    auto openssl = [&](std::vector<std::string> args) {
      args.insert(args.begin(), "openssl");
      auto r = run_process(args);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
    };
    home.write("pki/.keep", "");
    auto ca = [&](const std::string& name) {
      openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
               "/CN=" + name, "-keyout", dir + "/" + name + ".key", "-out",
               dir + "/" + name + ".pem"});
    };
    auto leaf = [&](const std::string& name, const std::string& by) {
      openssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout",
               dir + "/" + name + ".key", "-out", dir + "/" + name + ".csr"});
      openssl({"x509", "-req", "-days", "2", "-in", dir + "/" + name + ".csr", "-CA",
               dir + "/" + by + ".pem", "-CAkey", dir + "/" + by + ".key", "-CAcreateserial",
               "-out", dir + "/" + name + ".pem"});
    };
    ca("cluster-ca");
    ca("other-ca");
    leaf("worker", "cluster-ca");
    leaf("session", "cluster-ca");
    leaf("stranger", "other-ca");
    pki out;
    out.ca = dir + "/cluster-ca.pem";
    out.node_cert = dir + "/worker.pem";
    out.node_key = dir + "/worker.key";
    out.client_cert = dir + "/session.pem";
    out.client_key = dir + "/session.key";
    out.foreign_cert = dir + "/stranger.pem";
    out.foreign_key = dir + "/stranger.key";
    out.foreign_ca = dir + "/other-ca.pem";
    return out;
  }
};

} // namespace quarry::test::cluster
