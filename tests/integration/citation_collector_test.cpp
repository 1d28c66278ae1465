// The per-session citation collector: document identity across agents,
// global numbers in report order, and the digest for later agents.

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/runtime.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

namespace citation_collector_test {

using namespace quarry;

namespace {

sdk::document doc(const std::string& id, const std::string& title) {
  sdk::document d;
  d.id = id;
  d.url = "https://example.org/" + id;
  d.title = title;
  return d;
}

actors::agent_result report(std::string text, std::vector<std::pair<int, sdk::document>> cited) {
  actors::agent_result r;
  r.ok = true;
  r.report = std::move(text);
  r.cited = std::move(cited);
  return r;
}

} // namespace

TEST_CASE("citation collector numbers documents across agents and rounds") {
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  actors::runtime rt{cfg};
  auto collector = actors::spawn_citation_collector(rt.system());
  caf::scoped_actor self{rt.system()};
  auto collapse = [&](actors::collapse_request req) {
    actors::collapse_reply out;
    self->request(collector, std::chrono::seconds{10}, actors::collapse_atom::value, std::move(req))
      .receive([&](actors::collapse_reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  };
  auto a = doc("a", "Doc A");
  auto b = doc("b", "Doc B");
  auto c = doc("c", "Doc C");
  actors::collapse_request round1;
  round1.reports.emplace_back("Task one", report("One [1] and two [2].", {{1, a}, {2, b}}));
  // The second agent numbered B as its 1 and cites an unknown [7].
  round1.reports.emplace_back("Task two", report("Again [1], and [7].", {{1, b}}));
  auto r1 = collapse(round1);
  REQUIRE(r1.texts.size() == 2);
  CHECK(r1.texts[0] == "One [1] and two [2].");
  CHECK(r1.texts[1] == "Again [2], and."); // the unknown [7] is removed
  CHECK(r1.global.size() == 2);
  CHECK(r1.documents.size() == 2);
  actors::collapse_request round2;
  round2.reports.emplace_back("Task three", report("New [1], old [2].", {{1, c}, {2, a}}));
  auto r2 = collapse(round2);
  REQUIRE(r2.texts.size() == 1);
  CHECK(r2.texts[0] == "New [3], old [1].");
  REQUIRE(r2.global.size() == 3);
  CHECK(r2.global.find(3)->document_id == "c");
  CHECK(r2.findings.size() == 3);
  std::string digest;
  self->request(collector, std::chrono::seconds{10}, actors::digest_atom::value)
    .receive([&](std::string& d) { digest = std::move(d); },
             [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(digest.find("Earlier research agents already found") == 0);
  CHECK(digest.find("- Task one: One and two.") != std::string::npos);
  CHECK(digest.find("- Task three: New, old.") != std::string::npos);
  CHECK(digest.find('[') == std::string::npos);
  self->send_exit(collector, caf::exit_reason::user_shutdown);
}

} // namespace citation_collector_test
