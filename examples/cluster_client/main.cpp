// An example CAF 0.17 program that joins a Quarry cluster through the
// installed node interfaces only (quarry/cluster/*.hpp):
//
//   quarry_cluster_client --serve HOST:PORT "question"
//     starts a research on `quarry serve` (cluster.listen), prints each of its
//     packets as a JSON line, then the report, and exits 0 when the report
//     arrives (1 if the research ended without one);
//   quarry_cluster_client --worker HOST:PORT "task"
//     starts one research agent on `quarry worker`, prints its packets and
//     its intermediate report, and exits 0 when the report arrives.
//
// Options: --tls CERT KEY CA (mutual TLS, as the nodes' cluster.tls),
// --timeout SECONDS (default 600).

#include "quarry/cluster/messages.hpp"
#include "quarry/cluster/register.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <string>

namespace qc = quarry::cluster;

namespace {

struct options {
  std::string mode;
  std::string host;
  uint16_t port = 0;
  std::string text;
  std::string cert, key, ca;
  int timeout_s = 600;
};

int usage() {
  std::cerr << "usage: quarry_cluster_client (--serve|--worker) HOST:PORT [--tls CERT KEY CA] "
               "[--timeout SECONDS] TEXT\n";
  return 2;
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--serve" || a == "--worker") && i + 1 < argc) {
      o.mode = a.substr(2);
      std::string where = argv[++i];
      auto colon = where.rfind(':');
      if (colon == std::string::npos)
        return false;
      o.host = where.substr(0, colon);
      o.port = static_cast<uint16_t>(std::atoi(where.c_str() + colon + 1));
    } else if (a == "--tls" && i + 3 < argc) {
      o.cert = argv[++i];
      o.key = argv[++i];
      o.ca = argv[++i];
    } else if (a == "--timeout" && i + 1 < argc) {
      o.timeout_s = std::atoi(argv[++i]);
    } else if (o.text.empty()) {
      o.text = a;
    } else {
      return false;
    }
  }
  return !o.mode.empty() && o.port != 0 && !o.text.empty() && o.timeout_s > 0;
}

/// Connects to the actor published at the node, over TLS when asked.
template <class Handle>
caf::expected<Handle> connect(caf::actor_system& sys, const options& o) {
  if (!o.cert.empty())
    return caf::openssl::remote_actor<Handle>(sys, o.host, o.port);
  return sys.middleman().remote_actor<Handle>(o.host, o.port);
}

/// Prints packets; a research's packets come as encoded lines, an agent's
/// as placement and object.
using printer_actor
  = qc::line_sink_actor::extend<caf::reacts_to<qc::packet_atom, qc::packet_msg>,
                                caf::reacts_to<qc::agent_done_atom, qc::agent_result>>;

printer_actor::behavior_type printer(printer_actor::pointer self,
                                     std::promise<qc::agent_result>* agent_done,
                                     std::promise<uint64_t>* research_end) {
  return {
    [](qc::packet_atom, const std::string& line, uint64_t) { std::cout << line << "\n"; },
    [=](qc::stop_atom, uint64_t last) {
      research_end->set_value(last);
      self->quit();
    },
    [](qc::packet_atom, const qc::packet_msg& p) {
      std::cout << "{\"turn_index\": " << p.turn_index << ", \"tab_index\": " << p.tab_index
                << ", \"obj\": " << p.obj << "}\n";
    },
    [=](qc::agent_done_atom, const qc::agent_result& r) {
      agent_done->set_value(r);
      self->quit();
    },
  };
}

int run(caf::actor_system& sys, const options& o) {
  std::promise<qc::agent_result> agent_done;
  std::promise<uint64_t> research_end;
  auto timeout = std::chrono::seconds{o.timeout_s};
  auto p = sys.spawn(printer, &agent_done, &research_end);
  caf::scoped_actor self{sys};
  if (o.mode == "serve") {
    auto svc = connect<qc::research_service_actor>(sys, o);
    if (!svc) {
      std::cerr << "cannot reach the research service: " << sys.render(svc.error()) << "\n";
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
      return 1;
    }
    qc::research_request req;
    req.question = o.text;
    std::string id;
    self
      ->request(*svc, std::chrono::seconds{30}, qc::research_atom::value, req,
                qc::line_sink_actor{p})
      .receive([&](const std::string& x) { id = x; },
               [&](const caf::error& e) { std::cerr << "refused: " << sys.render(e) << "\n"; });
    if (id.empty()) {
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
      return 1;
    }
    std::cerr << "session " << id << "\n";
    if (research_end.get_future().wait_for(timeout) != std::future_status::ready) {
      self->send(*svc, qc::cancel_research_atom::value, id);
      std::cerr << "no end in time; cancelled\n";
      return 1;
    }
    qc::session_result result;
    self->request(*svc, std::chrono::seconds{60}, qc::result_atom::value, id)
      .receive([&](qc::session_result& r) { result = std::move(r); },
               [&](const caf::error& e) { result.failure = sys.render(e); });
    if (result.status != qc::session_status::report) {
      std::cerr << "no report: " << result.failure << "\n";
      return 1;
    }
    std::cout << "\n" << result.report << "\n";
    for (const auto& s : result.sources)
      std::cout << "[" << s.number << "] " << s.title << " " << s.url << "\n";
    return 0;
  }
  auto host = connect<qc::agent_host_actor>(sys, o);
  if (!host) {
    std::cerr << "cannot reach the worker: " << sys.render(host.error()) << "\n";
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    return 1;
  }
  qc::agent_spec spec;
  spec.call_id = "cluster_client";
  spec.task = o.text;
  qc::spawn_reply reply;
  self
    ->request(*host, std::chrono::seconds{30}, qc::spawn_agent_atom::value, qc::protocol_version,
              spec, qc::agent_parent_actor{p}, qc::packet_sink_actor{p})
    .receive([&](qc::spawn_reply& r) { reply = std::move(r); },
             [&](const caf::error& e) { reply.refusal = sys.render(e); });
  if (!reply.agent) {
    std::cerr << "refused: " << reply.refusal << "\n";
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    return 1;
  }
  auto done = agent_done.get_future();
  if (done.wait_for(timeout) != std::future_status::ready) {
    self->send(reply.agent, qc::stop_atom::value);
    std::cerr << "no report in time; stopped\n";
    return 1;
  }
  auto r = done.get();
  if (!r.ok) {
    std::cerr << "the agent failed: " << r.failure << "\n";
    return 1;
  }
  std::cout << "\n" << r.report << "\n";
  for (const auto& [n, doc] : r.cited)
    std::cout << "[" << n << "] " << doc.title << " " << doc.url << "\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o))
    return usage();
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  qc::register_types(cfg);
  cfg.load<caf::io::middleman>();
  if (!o.cert.empty()) {
    cfg.openssl_certificate = o.cert;
    cfg.openssl_key = o.key;
    cfg.openssl_cafile = o.ca;
    cfg.load<caf::openssl::manager>();
  }
  int rc = 1;
  {
    caf::actor_system sys{cfg};
    rc = run(sys, o);
  }
  return rc;
}
