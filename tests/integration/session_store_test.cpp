// The research store through the real binary: every research is kept,
// `quarry sessions list/show/export/rm/resume`, follow-ups, and real
// processes killed with SIGKILL at several phases, then resumed.

#include "research_script.hpp"

#include "quarry/store/store.hpp"

#include "support/fake_llm_server.hpp"
#include "support/process.hpp"
#include "support/store_read.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace session_store_test {

using namespace quarry;
using namespace quarry::test::script;
using nlohmann::json;
using test::read_ok;

namespace {

struct store_fixture {
  test::temp_dir home;

  std::vector<std::string> argv(std::vector<std::string> args) const {
    std::vector<std::string> out{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  test::process_result
  quarry(std::vector<std::string> args,
         std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    return test::run_process(argv(std::move(args)),
                             test::isolated_quarry_options(home.path(), env));
  }

  std::string db_path() const {
    return home.path() + "/.local/share/quarry/quarry.db";
  }

  std::unique_ptr<store::store> open_db() const {
    store::open_options o;
    o.read_only = true;
    auto opened = store::store::open(db_path(), o);
    if (auto* err = std::get_if<sdk::error>(&opened))
      FAIL("store: " << err->message);
    return std::get<std::unique_ptr<store::store>>(std::move(opened));
  }
};

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    out.push_back(std::move(j));
  }
  return out;
}

std::string session_in(const std::string& err) {
  auto at = err.find("quarry: session q");
  REQUIRE(at != std::string::npos);
  return err.substr(at + 16, 17);
}

std::vector<std::pair<std::string, std::optional<std::string>>>
llm_env(const test::fake_llm_server& server) {
  return {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", server.base_url_openai()}};
}

} // namespace

TEST_CASE_FIXTURE(store_fixture, "sessions: a research is kept and can be listed, "
                                 "shown, exported and removed") {
  auto res = quarry({"research", "--no-clarify", "How loud is a heat pump?"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto id = session_in(res.err);
  CHECK(store::is_session_id(id));

  auto list = quarry({"sessions", "list", "--json"});
  REQUIRE(list.exit_code == 0);
  auto sessions = json::parse(list.out);
  REQUIRE(sessions.size() == 1);
  CHECK(sessions[0]["id"] == id);
  CHECK(sessions[0]["state"] == "completed");
  CHECK(sessions[0]["question"] == "How loud is a heat pump?");
  auto table = quarry({"sessions", "list"});
  CHECK(table.out.find(id + "  completed") != std::string::npos);
  CHECK(quarry({"sessions", "list", "--search", "loud"}).out.find(id) != std::string::npos);
  CHECK(quarry({"sessions", "list", "--search", "boiler"}).out == "No sessions.\n");

  // The report as stored is the report printed.
  auto md = quarry({"sessions", "show", id, "--md"});
  REQUIRE(md.exit_code == 0);
  CHECK(md.out == res.out);
  auto html = quarry({"sessions", "export", id, "--format", "html"});
  CHECK(html.out.find("<!DOCTYPE html>") == 0);
  auto shown = json::parse(quarry({"sessions", "show", id, "--json"}).out);
  CHECK(shown["state"] == "completed");
  CHECK(shown["usage"]["calls"].get<int>() > 0);
  CHECK_FALSE(shown["sources"].empty());

  // Every packet, in order, without a gap.
  auto jsonl = quarry({"sessions", "export", id, "--format", "jsonl"});
  REQUIRE(jsonl.exit_code == 0);
  auto packets = lines_of(jsonl.out);
  REQUIRE(packets.size() > 10);
  for (size_t i = 0; i < packets.size(); ++i) {
    CHECK(packets[i]["seq"] == i + 1);
    CHECK(packets[i]["session"] == id);
  }
  CHECK(packets.back()["obj"]["type"] == "stop");
  {
    auto db = open_db();
    CHECK(read_ok(db->latest_checkpoint(id)).has_value());
    CHECK_FALSE(read_ok(db->citations(id)).empty());
    CHECK_FALSE(read_ok(db->documents(id)).empty());
    size_t intermediate = 0;
    for (const auto& r : read_ok(db->reports(id)))
      if (r.kind == "intermediate")
        ++intermediate;
    CHECK(intermediate > 0);
  }

  // A session's folder (its uploaded files and their index, when quarry
  // serve started it) goes with it.
  auto folder = home.path() + "/.local/share/quarry/sessions/" + id;
  std::filesystem::create_directories(folder + "/files");
  std::ofstream{folder + "/files/notes.md"} << "uploaded\n";
  auto rm = quarry({"sessions", "rm", id});
  CAPTURE(rm.err);
  CHECK(rm.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(folder));
  CHECK(quarry({"sessions", "list"}).out == "No sessions.\n");
  auto gone = quarry({"sessions", "show", id});
  CHECK(gone.exit_code == 1);
  CHECK(gone.err.find("no session " + id) != std::string::npos);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: --no-store keeps nothing, and bad ids "
                                 "and states are refused clearly") {
  auto res = quarry({"research", "--no-clarify", "--no-store", "How loud is a heat pump?"});
  REQUIRE(res.exit_code == 0);
  CHECK(res.err.find("quarry: session q") == std::string::npos);
  CHECK(quarry({"sessions", "list"}).out == "No sessions.\n");

  for (const char* bad : {"nope", "q123", "../../etc/passwd", "Q0123456789ABCDEF"}) {
    CAPTURE(bad);
    auto r = quarry({"sessions", "show", bad});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not a session id") != std::string::npos);
  }
  auto unknown = quarry({"sessions", "resume", "q0123456789abcdef"});
  CHECK(unknown.exit_code == 1);

  auto done = quarry({"research", "--no-clarify", "How loud is a heat pump?"});
  auto id = session_in(done.err);
  auto again = quarry({"sessions", "resume", id});
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("is completed; only an interrupted session can be resumed")
        != std::string::npos);
  CHECK(quarry({"sessions", "list", "--state", "dancing"}).exit_code == 2);
  CHECK(quarry({"sessions", "list", "--limit", "0"}).exit_code == 2);
  auto follow = quarry({"research", "--follow-up", "q0123456789abcdef", "and then?"});
  CHECK(follow.exit_code == 2);
  CHECK(follow.err.find("no session q0123456789abcdef") != std::string::npos);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: a store file that is not a Quarry store "
                                 "is refused and left as it was") {
  auto path = db_path();
  std::filesystem::create_directories(std::filesystem::path{path}.parent_path());
  {
    std::ofstream out{path, std::ios::binary};
    out << "these are my notes, not a database\n";
  }
  auto res = quarry({"research", "--no-clarify", "How loud is a heat pump?"});
  CHECK(res.exit_code == 1);
  CHECK(res.err.find("the research store cannot be used") != std::string::npos);
  CHECK(res.err.find(path) != std::string::npos);
  CHECK(res.err.find("--no-store") != std::string::npos);
  CHECK(res.out.empty());
  CHECK(test::read_file(path) == "these are my notes, not a database\n");
  CHECK(quarry({"sessions", "list"}).exit_code == 1);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: a follow-up gives the models the earlier "
                                 "report and sources") {
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(two_agent_script()));
  auto first = quarry({"research", "--no-clarify", "--json",
                       "How do heat pumps cope with cold weather?"},
                      llm_env(server));
  CAPTURE(first.err);
  REQUIRE(first.exit_code == 0);
  auto parent = session_in(first.err);
  // The follow-up researches too (its orchestrator sends agents again).
  REQUIRE_FALSE(server.script(two_agent_script()));
  auto before = server.requests().size();
  auto second = quarry({"research", "--no-clarify", "--follow-up", parent, "And what about noise?"},
                       llm_env(server));
  CAPTURE(second.err);
  REQUIRE(second.exit_code == 0);
  auto child = session_in(second.err);
  auto reqs = server.requests();
  REQUIRE(reqs.size() > before);
  // The plan request of the follow-up carries the thread: the earlier
  // question, its report with its sources, then the question asked.
  const auto& plan = reqs[before].body["messages"];
  REQUIRE(plan.size() == 5);
  CHECK(plan[1]["role"] == "user");
  CHECK(plan[1]["content"] == "How do heat pumps cope with cold weather?");
  CHECK(plan[2]["role"] == "assistant");
  CHECK(plan[2]["content"].get<std::string>().find("Cold air lowers efficiency")
        != std::string::npos);
  CHECK(plan[2]["content"].get<std::string>().find("Sources of that report:\n[1] ")
        != std::string::npos);
  CHECK(plan[3]["content"] == "And what about noise?");
  // The final report reads the earlier research as text before the question.
  bool final_seen = false;
  for (size_t i = before; i < reqs.size(); ++i)
    if (reqs[i].raw_body.find(final_marker) != std::string::npos) {
      final_seen = true;
      CHECK(reqs[i].raw_body.find("Earlier research in this conversation") != std::string::npos);
    }
  CHECK(final_seen);
  auto shown = json::parse(quarry({"sessions", "show", parent, "--json"}).out);
  CHECK(shown["follow_ups"] == json::array({child}));
  auto list = json::parse(quarry({"sessions", "list", "--json"}).out);
  REQUIRE(list.size() == 2);
  CHECK(list[0]["parent_id"] == parent);
}

// Kills a real `quarry research` with SIGKILL while the fake LLM server
// holds the request of one phase, then resumes the session.
static void kill_and_resume(store_fixture& fx, const char* phase_marker,
                            const char* checkpoint_phase, bool expect_plan_again) {
  bool expect_checkpoint = checkpoint_phase != nullptr;
  CAPTURE(std::string{phase_marker});
  test::fake_llm_server server;
  REQUIRE_FALSE(server.script(hanging_at(two_agent_script(), phase_marker)));
  auto env = llm_env(server);
  std::string id;
  {
    test::child_process child{
      fx.argv({"research", "--no-clarify", "--json", "How do heat pumps cope with cold weather?"}),
      test::isolated_quarry_options(fx.home.path(), env)};
    REQUIRE(child.wait_for_err("quarry: session q", std::chrono::seconds{60}));
    // The request of the phase arrives and hangs.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (requests_with(server, phase_marker) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    REQUIRE(requests_with(server, phase_marker) > 0);
    id = session_in(child.err());
    // The checkpoint taken before the phase is on disk before the kill
    // (the store writes within milliseconds; wait for it, bounded).
    if (expect_checkpoint) {
      bool stored = false;
      while (!stored && std::chrono::steady_clock::now() < deadline) {
        auto c = read_ok(fx.open_db()->latest_checkpoint(id));
        stored = c && c->state.value("phase", "") == checkpoint_phase;
        if (!stored)
          std::this_thread::sleep_for(std::chrono::milliseconds{10});
      }
      REQUIRE(stored);
    }
    child.signal(SIGKILL);
    auto killed = child.wait(std::chrono::seconds{30});
    CHECK(killed.exit_code != 0);
  }
  auto stored_before = read_ok(fx.open_db()->session(id));
  REQUIRE(stored_before);
  CHECK(stored_before->state == store::session_state::running);
  auto listed = json::parse(fx.quarry({"sessions", "list", "--json"}).out);
  CHECK(listed[0]["state"] == "interrupted");
  auto checkpoint = read_ok(fx.open_db()->latest_checkpoint(id));
  CHECK(checkpoint.has_value() == expect_checkpoint);

  // The same server, now answering every phase.
  REQUIRE_FALSE(server.script(two_agent_script()));
  auto plans_before = requests_with(server, plan_marker);
  auto resumed = fx.quarry({"sessions", "resume", id, "--json"}, env);
  CAPTURE(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK((requests_with(server, plan_marker) > plans_before) == expect_plan_again);

  auto db = fx.open_db();
  auto row = read_ok(db->session(id));
  REQUIRE(row);
  CHECK(row->state == store::session_state::completed);
  auto all = read_ok(db->packets(id));
  REQUIRE(all.size() == row->last_seq);
  size_t resumed_packets = 0;
  std::map<int, std::string> numbers;
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq == i + 1);
    auto p = json::parse(all[i].line);
    CHECK(p["seq"] == i + 1);
    if (p["obj"]["type"] == "resumed") {
      ++resumed_packets;
      CHECK(p["obj"]["checkpoint"] == (checkpoint ? checkpoint->number : 0));
      CHECK(p["obj"]["superseded_after"] == (checkpoint ? checkpoint->last_seq : 0));
    }
  }
  CHECK(resumed_packets == 1);
  // The final report's citations: each number names one document, each
  // document has one number.
  std::set<std::string> docs;
  for (const auto& c : read_ok(db->citations(id))) {
    CHECK(numbers.emplace(c.number, c.document_id).second);
    CHECK(docs.insert(c.document_id).second);
  }
  CHECK_FALSE(numbers.empty());
  auto report = read_ok(db->final_report(id));
  REQUIRE(report);
  CHECK(report->text.find("Cold air lowers efficiency") != std::string::npos);
  // What --json printed on resume continues the stored stream.
  auto printed = lines_of(resumed.out);
  REQUIRE_FALSE(printed.empty());
  CHECK(printed.front()["seq"] == stored_before->last_seq + 1);
  CHECK(printed.front()["obj"]["type"] == "resumed");
  CHECK(printed.back()["seq"] == row->last_seq);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: kill -9 while planning, then resume "
                                 "starts over without a gap in the packets") {
  kill_and_resume(*this, plan_marker, nullptr, true);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: kill -9 while agents run, then resume "
                                 "goes on from the last checkpoint") {
  kill_and_resume(*this, agent_marker, "orchestrate", false);
}

TEST_CASE_FIXTURE(store_fixture, "sessions: kill -9 during the final report, then "
                                 "resume writes only the report") {
  kill_and_resume(*this, final_marker, "final_report", false);
  // Only the final report was asked for again: no orchestrator call.
}

} // namespace session_store_test
