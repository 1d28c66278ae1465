// The store actor with emitters on the real scheduler: packets, checkpoints,
// reports and states of several sessions written in batches; a first seq
// that continues a stored session; and a full disk (SQLite's writes failing
// through the fault-injecting VFS) that becomes an error packet for the
// live subscribers while nothing already stored is damaged, and the end of
// such a session is stored as interrupted with the reason once the disk
// takes it.

#include "quarry/actors/emitter.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/core/checkpoint.hpp"
#include "quarry/core/packets.hpp"
#include "quarry/store/store.hpp"

#include "support/faulty_vfs.hpp"
#include "support/process.hpp"
#include "support/store_read.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <future>
#include <map>
#include <mutex>

namespace store_actor_test {

using namespace quarry;
using test::read_ok;

namespace {

struct collected {
  std::mutex mtx;
  std::vector<std::string> lines;
  std::promise<uint64_t> ended;
};

actors::line_sink_actor collector(caf::actor_system& sys, std::shared_ptr<collected> c) {
  return actors::spawn_line_sink(
    sys,
    [c](const std::string& line, uint64_t) {
      std::lock_guard<std::mutex> guard{c->mtx};
      c->lines.push_back(line);
    },
    [c](uint64_t last) { c->ended.set_value(last); });
}

std::shared_ptr<store::store> open_store(const std::string& path, const std::string& vfs = {}) {
  store::open_options o;
  o.vfs = vfs;
  auto opened = store::store::open(path, o);
  if (auto* err = std::get_if<sdk::error>(&opened))
    FAIL("open: " << err->message);
  return std::shared_ptr<store::store>{std::get<std::unique_ptr<store::store>>(std::move(opened))};
}

store::session_row new_session(const std::string& id) {
  store::session_row row;
  row.id = id;
  row.question = "q";
  row.state = store::session_state::running;
  return row;
}

// A store at `path` opened through the fault-injecting VFS (disarmed), with
// the sessions `ids` created.
std::shared_ptr<store::store> open_faulty_store(const std::string& path,
                                                const std::vector<std::string>& ids) {
  auto& vfs = test::faulty_vfs::get();
  vfs.disarm();
  auto db = open_store(path, vfs.name());
  store::batch b;
  for (const auto& id : ids)
    b.new_sessions.push_back(new_session(id));
  REQUIRE_FALSE(db->write(b));
  return db;
}

std::string flush(caf::scoped_actor& self, const actors::store_actor& st) {
  std::string out = "no answer";
  self->request(st, std::chrono::seconds{30}, actors::flush_atom::value)
    .receive([&](std::string& err) { out = err; },
             [&](const caf::error& e) { out = caf::to_string(e); });
  return out;
}

// Everything the emitter received is handed to the store, then written.
std::string settle(caf::scoped_actor& self, const actors::emitter_actor& em,
                   const actors::store_actor& st) {
  self->request(em, std::chrono::seconds{30}, actors::flush_atom::value)
    .receive([](uint64_t) {}, [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  return flush(self, st);
}

uint64_t stop_emitter(caf::scoped_actor& self, const actors::emitter_actor& em) {
  uint64_t last = 0;
  self->request(em, std::chrono::seconds{30}, actors::stop_atom::value)
    .receive([&](uint64_t n) { last = n; }, [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  return last;
}

actors::checkpoint_ptr checkpoint_of(int cycle) {
  auto made = std::make_shared<core::research_checkpoint>();
  auto& c = *made;
  c.cycle = cycle;
  c.plan = "1. Step";
  sdk::document doc;
  doc.id = "doc-1";
  doc.url = "https://example.org/1";
  doc.title = "One";
  doc.content = "The text that was read.";
  c.documents[doc.id] = doc;
  c.global.insert(1, core::make_document_ref(doc));
  return made;
}

} // namespace

TEST_CASE("store actor writes the packets, checkpoints, reports and states of "
          "several sessions, and a session goes on from its last seq") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  auto db = open_store(path);
  store::batch b;
  b.new_sessions = {new_session("q0000000000000001"), new_session("q0000000000000002")};
  REQUIRE_FALSE(db->write(b));
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    auto st = actors::spawn_store(sys, db);
    caf::scoped_actor self{sys};
    std::vector<actors::emitter_actor> ems;
    for (const char* id : {"q0000000000000001", "q0000000000000002"})
      ems.push_back(actors::spawn_emitter(sys, id, {st, 1}));
    for (int i = 0; i < 300; ++i)
      for (auto& em : ems) {
        self->send(em, actors::packet_atom::value,
                   actors::make_packet({1, 0, std::nullopt},
                                       core::packets::message_delta(std::to_string(i))));
        if (i == 150)
          self->send(em, actors::checkpoint_atom::value, checkpoint_of(1));
      }
    // An intermediate report streamed by an agent becomes a report row.
    self->send(ems[0], actors::packet_atom::value,
               actors::make_packet({2, 1, 0}, core::packets::intermediate_report_start()));
    self->send(ems[0], actors::packet_atom::value,
               actors::make_packet({2, 1, 0},
                                   core::packets::intermediate_report_delta("Found [1].")));
    self->send(ems[0], actors::packet_atom::value,
               actors::make_packet({2, 1, 0}, core::packets::section_end()));
    for (auto& em : ems)
      CHECK(stop_emitter(self, em) >= 300);
    self->send(st, actors::report_atom::value, std::string{"q0000000000000001"},
               std::string{"The report [[1]](https://example.org/1)."});
    self->send(st, actors::state_atom::value, std::string{"q0000000000000001"},
               std::string{"completed"}, std::string{});
    CHECK(flush(self, st).empty());
    // The second session goes on after packet 300 (a resume).
    auto next = actors::spawn_emitter(sys, "q0000000000000002", {st, 301});
    self->send(next, actors::packet_atom::value,
               actors::make_packet({3, 0, std::nullopt}, core::packets::notice("again")));
    CHECK(stop_emitter(self, next) == 301);
    CHECK(flush(self, st).empty());
  }
  auto check = open_store(path);
  auto one = read_ok(check->session("q0000000000000001"));
  REQUIRE(one);
  CHECK(one->state == store::session_state::completed);
  CHECK(one->last_seq == 303);
  auto packets = read_ok(check->packets("q0000000000000001"));
  REQUIRE(packets.size() == 303);
  for (size_t i = 0; i < packets.size(); ++i)
    CHECK(packets[i].seq == i + 1);
  auto cp = read_ok(check->latest_checkpoint("q0000000000000001"));
  REQUIRE(cp);
  CHECK(cp->number == 1);
  CHECK(cp->last_seq == 151);
  REQUIRE(read_ok(check->citations("q0000000000000001")).size() == 1);
  auto docs = read_ok(check->documents("q0000000000000001"));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].text == "The text that was read.");
  CHECK_FALSE(docs[0].sha256.empty());
  bool intermediate = false;
  for (const auto& r : read_ok(check->reports("q0000000000000001")))
    if (r.kind == "intermediate" && r.text == "Found [1]." && r.tab == 1)
      intermediate = true;
  CHECK(intermediate);
  CHECK(read_ok(check->final_report("q0000000000000001"))->text
        == "The report [[1]](https://example.org/1).");
  CHECK(read_ok(check->session("q0000000000000002"))->last_seq == 301);
  CHECK(read_ok(check->packets("q0000000000000002")).back().line.find("again")
        != std::string::npos);
}

TEST_CASE("store actor: usage and reports come from what the packets' makers said, never "
          "from reading a line") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  auto db = open_store(path);
  store::batch b;
  b.new_sessions = {new_session("q0000000000000003")};
  REQUIRE_FALSE(db->write(b));
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  std::string id = "q0000000000000003";
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    auto st = actors::spawn_store(sys, db);
    caf::scoped_actor self{sys};
    auto send = [&](uint64_t seq, std::string line, actors::packet_fact fact) {
      self->send(st, actors::packet_atom::value, id, seq, std::move(line), int32_t{1}, int32_t{2},
                 std::move(fact));
    };
    // A line that reads as a usage packet, but nobody said so: no usage row.
    send(1,
         core::encode(1, id, {1, 2, std::nullopt},
                      R"({"type":"usage","role":"x",)"
                      R"("input_tokens":99,"output_tokens":1})")
           .value(),
         {});
    // A usage fact with a line that is not even JSON: a usage row.
    actors::packet_fact used;
    used.what = actors::packet_fact::kind::usage;
    used.role = "research";
    used.input_tokens = 1000;
    used.output_tokens = 20;
    used.cost_usd = 0.5;
    send(2, "not JSON", used);
    // A report told in pieces; the lines say nothing of it.
    actors::packet_fact start;
    start.what = actors::packet_fact::kind::report_start;
    send(3, "{}", start);
    for (const char* piece : {"Heat pumps ", "work [1]."}) {
      actors::packet_fact text;
      text.what = actors::packet_fact::kind::report_text;
      text.text = piece;
      send(4 + (piece[0] == 'w'), "{}", text);
    }
    actors::packet_fact end;
    end.what = actors::packet_fact::kind::report_end;
    send(6, "{}", end);
    CHECK(flush(self, st).empty());
  }
  auto check = open_store(path);
  auto used = read_ok(check->usage(id));
  CHECK(used.calls == 1);
  CHECK(used.input_tokens == 1000);
  CHECK(used.output_tokens == 20);
  CHECK(used.cost == doctest::Approx(0.5));
  auto reports = read_ok(check->reports(id));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == "intermediate");
  CHECK(reports[0].text == "Heat pumps work [1].");
  CHECK(reports[0].turn == 1);
  CHECK(reports[0].tab == 2);
  CHECK(read_ok(check->packets(id)).size() == 6);
}

TEST_CASE("store actor: checkpoints that repeat a document store it once, keep its "
          "read text over its snippet, the longest read text, and fill in a field it lacked") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  auto db = open_store(path);
  store::batch b;
  b.new_sessions = {new_session("q00000000000000d1")};
  REQUIRE_FALSE(db->write(b));
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  auto checkpoint = [](std::string title, std::string snippet, std::string content) {
    auto made = std::make_shared<core::research_checkpoint>();
    sdk::document doc;
    doc.id = "doc-1";
    doc.url = "https://example.org/1";
    doc.title = std::move(title);
    doc.snippet = std::move(snippet);
    doc.content = std::move(content);
    made->documents[doc.id] = doc;
    made->global.insert(1, core::make_document_ref(doc));
    return actors::checkpoint_ptr{made};
  };
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    auto st = actors::spawn_store(sys, db);
    caf::scoped_actor self{sys};
    auto em = actors::spawn_emitter(sys, "q00000000000000d1", {st, 1});
    // No title yet, a snippet; then the same; then the title; then the
    // page's text; then the snippet again (shorter: kept as it is).
    self->send(em, actors::checkpoint_atom::value, checkpoint("", "A snippet.", ""));
    self->send(em, actors::checkpoint_atom::value, checkpoint("", "A snippet.", ""));
    self->send(em, actors::checkpoint_atom::value, checkpoint("One", "A snippet.", ""));
    self->send(em, actors::checkpoint_atom::value,
               checkpoint("One", "A snippet.", "The whole text of the page."));
    self->send(em, actors::checkpoint_atom::value, checkpoint("One", "A snippet.", ""));
    // A snippet longer than the page's text (never stored over it), then
    // more of the page read: that is stored.
    self->send(em, actors::checkpoint_atom::value,
               checkpoint("One",
                          "A search engine's snippet that runs on for longer than the text "
                          "of the page that was read.",
                          ""));
    self->send(em, actors::checkpoint_atom::value,
               checkpoint("One", "A snippet.", "The whole text of the page, and more of it."));
    stop_emitter(self, em);
    CHECK(flush(self, st).empty());
  }
  auto check = open_store(path);
  auto docs = read_ok(check->documents("q00000000000000d1"));
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].text == "The whole text of the page, and more of it.");
  CHECK_FALSE(docs[0].snippet_only);
  CHECK(docs[0].title == "One");
  CHECK(docs[0].url == "https://example.org/1");
  CHECK(read_ok(check->latest_checkpoint("q00000000000000d1"))->number == 7);
}

TEST_CASE("store actor: a full disk is an error packet for the live view, the "
          "research goes on, and what was stored stays intact") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  auto& vfs = test::faulty_vfs::get();
  auto db = open_faulty_store(path, {"q00000000000000aa"});
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  auto seen = std::make_shared<collected>();
  std::string flushed;
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    // Batches of one write each, so the fault hits a known batch.
    actors::store_actor_settings ss;
    ss.batch_limit = 1;
    auto st = actors::spawn_store(sys, db, ss);
    caf::scoped_actor self{sys};
    auto em = actors::spawn_emitter(sys, "q00000000000000aa", {st, 1});
    self->send(em, actors::subscribe_atom::value, collector(sys, seen), uint64_t{1});
    for (int i = 0; i < 20; ++i)
      self->send(em, actors::packet_atom::value,
                 actors::make_packet({1, 0, std::nullopt},
                                     core::packets::message_delta("before " + std::to_string(i))));
    REQUIRE(settle(self, em, st).empty());
    // The disk fills up: every write fails from now on.
    test::fault_plan full;
    full.when = test::fault_plan::trigger::on_write;
    full.nth = 1;
    full.code = 13; // SQLITE_FULL
    vfs.arm(full);
    for (int i = 0; i < 20; ++i)
      self->send(em, actors::packet_atom::value,
                 actors::make_packet({1, 0, std::nullopt},
                                     core::packets::message_delta("after " + std::to_string(i))));
    flushed = settle(self, em, st);
    CHECK(vfs.faults() > 0);
    vfs.disarm();
    // The research goes on: packets still reach the live view.
    self->send(em, actors::packet_atom::value,
               actors::make_packet({1, 0, std::nullopt}, core::packets::message_delta("later")));
    stop_emitter(self, em);
    seen->ended.get_future().wait();
  }
  CAPTURE(flushed);
  // The first failure is reported to whoever flushes (the CLI prints it).
  CHECK(flushed.find("full") != std::string::npos);
  // The live view got every packet and one error packet that says why.
  size_t errors = 0;
  bool later = false;
  for (const auto& line : seen->lines) {
    if (line.find("\"store_failed\"") != std::string::npos) {
      ++errors;
      CHECK(line.find("the research store cannot be written") != std::string::npos);
    }
    if (line.find("later") != std::string::npos)
      later = true;
  }
  CHECK(errors == 1);
  CHECK(later);
  // What was stored before the fault is intact, and nothing after it.
  auto check = open_store(path);
  auto packets = read_ok(check->packets("q00000000000000aa"));
  REQUIRE(packets.size() >= 20);
  for (size_t i = 0; i < packets.size(); ++i) {
    CHECK(packets[i].seq == i + 1);
    CHECK(packets[i].line.find("after") == std::string::npos);
  }
  CHECK(packets[19].line.find("before 19") != std::string::npos);
}

TEST_CASE("store actor: an emitter lets go of the packets the store wrote, and a late "
          "subscriber reads those from the store and the rest from the emitter") {
  // An emitter that holds at most 2 KiB of written packets; a subscriber
  // from the start, and one that comes late asking from seq 1. With a
  // working disk, and with a disk that fills up halfway (packets the store
  // could not write are never let go).
  for (bool disk_full : {false, true}) {
    CAPTURE(disk_full);
    test::temp_dir dir;
    auto path = dir.path() + "/quarry.db";
    const std::string id = "q00000000000000e1";
    auto db = open_faulty_store(path, {id});
    auto& vfs = test::faulty_vfs::get();
    core::settings cfg;
    cfg.runtime.scheduler_threads = 2;
    auto early = std::make_shared<collected>();
    auto late = std::make_shared<collected>();
    uint64_t first = 0;
    uint64_t last = 0;
    {
      actors::runtime rt{cfg};
      auto& sys = rt.system();
      auto st = actors::spawn_store(sys, db);
      caf::scoped_actor self{sys};
      auto em = actors::spawn_emitter(sys, id, {st, 1, 2048});
      caf::anon_send(em, actors::subscribe_atom::value, collector(sys, early), uint64_t{0});
      auto send = [&](const std::string& text, int n) {
        for (int i = 0; i < n; ++i)
          self->send(em, actors::packet_atom::value,
                     actors::make_packet({1, 0, std::nullopt},
                                         core::packets::message_delta(text + " " + std::to_string(i)
                                                                      + std::string(100, '.'))));
      };
      send("before", 100);
      REQUIRE(settle(self, em, st).empty());
      // More packets after the first written: the emitter lets go of more.
      send("between", 50);
      REQUIRE(settle(self, em, st).empty());
      if (disk_full) {
        test::fault_plan full;
        full.when = test::fault_plan::trigger::on_write;
        full.nth = 1;
        full.code = 13; // SQLITE_FULL
        vfs.arm(full);
      }
      send("after", 100);
      // (The failure is told to the first flush after it: the emitter's or
      // this one.)
      settle(self, em, st);
      vfs.disarm();
      self
        ->request(em, std::chrono::seconds{30}, actors::subscribe_atom::value, collector(sys, late),
                  uint64_t{1})
        .receive([&](uint64_t n) { first = n; },
                 [&](const caf::error& e) { FAIL(caf::to_string(e)); });
      send("live", 10);
      last = stop_emitter(self, em);
      early->ended.get_future().wait();
      late->ended.get_future().wait();
    }
    // The emitter let go of packets the store had written...
    CHECK(first > 1);
    // ... and of none it could not write.
    if (disk_full)
      CHECK(first <= 151);
    REQUIRE(early->lines.size() == last);
    // The store's packets before `first`, then the late subscriber's: every
    // packet, in order, as the first subscriber got them.
    auto check = open_store(path);
    auto stored = read_ok(check->packets(id));
    REQUIRE(stored.size() >= first - 1);
    std::vector<std::string> joined;
    for (uint64_t seq = 1; seq < first; ++seq) {
      CHECK(stored[seq - 1].seq == seq);
      joined.push_back(stored[seq - 1].line);
    }
    joined.insert(joined.end(), late->lines.begin(), late->lines.end());
    CHECK(joined == early->lines);
    CHECK(late->lines.back().find("live 9") != std::string::npos);
  }
}

TEST_CASE("store actor: a session that stopped being saved ends as interrupted with the "
          "reason, stored once the disk takes it") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  auto& vfs = test::faulty_vfs::get();
  vfs.disarm();
  auto db = open_store(path, vfs.name());
  const std::vector<std::string> ids{"q00000000000000b1", "q00000000000000b2", "q00000000000000b3"};
  store::batch b;
  for (const auto& id : ids)
    b.new_sessions.push_back(new_session(id));
  REQUIRE_FALSE(db->write(b));
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  int64_t faults_before_end = 0;
  int64_t faults_after_end = 0;
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    actors::store_actor_settings ss;
    ss.batch_limit = 1;
    auto st = actors::spawn_store(sys, db, ss);
    caf::scoped_actor self{sys};
    std::vector<actors::emitter_actor> ems;
    for (const auto& id : ids)
      ems.push_back(actors::spawn_emitter(sys, id, {st, 1}));
    auto send_packets = [&](const std::string& text) {
      for (auto& em : ems)
        for (int i = 0; i < 5; ++i)
          self->send(em, actors::packet_atom::value,
                     actors::make_packet({1, 0, std::nullopt},
                                         core::packets::message_delta(text + std::to_string(i))));
      for (auto& em : ems)
        settle(self, em, st);
    };
    send_packets("before ");
    // The disk fills up: every session stops being saved.
    test::fault_plan full;
    full.when = test::fault_plan::trigger::on_write;
    full.code = 13; // SQLITE_FULL
    vfs.arm(full);
    send_packets("after ");
    REQUIRE(vfs.faults() > 0);
    // The first run ends (completed) while the disk is still full: its end
    // cannot be written yet and is kept.
    stop_emitter(self, ems[0]);
    faults_before_end = vfs.faults();
    self->send(st, actors::state_atom::value, ids[0], std::string{"completed"}, std::string{});
    flush(self, st);
    faults_after_end = vfs.faults();
    // Space again: the next flush stores it.
    vfs.disarm();
    flush(self, st);
    // The second run ends (failed) with space: stored at once, as
    // interrupted too (what was saved can be resumed).
    stop_emitter(self, ems[1]);
    self->send(st, actors::state_atom::value, ids[1], std::string{"failed"},
               std::string{"the model failed"});
    flush(self, st);
    // The third one goes on from what was saved (a resume, with a new
    // emitter): saved again, its states as sent.
    stop_emitter(self, ems[2]);
    auto again = actors::spawn_emitter(sys, ids[2], {st, 6});
    settle(self, again, st);
    self->send(st, actors::state_atom::value, ids[2], std::string{"running"}, std::string{});
    self->send(again, actors::packet_atom::value,
               actors::make_packet({2, 0, std::nullopt}, core::packets::notice("resumed")));
    settle(self, again, st);
    stop_emitter(self, again);
    self->send(st, actors::state_atom::value, ids[2], std::string{"completed"}, std::string{});
    CHECK(flush(self, st).empty());
  }
  CHECK(faults_after_end > faults_before_end); // its end was tried on the full disk
  auto check = open_store(path);
  for (const auto& id : {ids[0], ids[1]}) {
    CAPTURE(id);
    auto row = read_ok(check->session(id));
    REQUIRE(row);
    CHECK(row->state == store::session_state::interrupted);
    CAPTURE(row->error);
    CHECK(row->error.find("the research store could not be written, so the rest of this "
                          "session was not saved: ")
          == 0);
    CHECK(row->error.find("the disk is full") != std::string::npos);
    CHECK(row->error.find("research store: ") == std::string::npos);
    CHECK(row->last_seq == 5);
  }
  auto third = read_ok(check->session(ids[2]));
  REQUIRE(third);
  CHECK(third->state == store::session_state::completed);
  CHECK(third->error.empty());
  CHECK(third->last_seq == 6);
}

TEST_CASE("store actor: flushes that come together share a transaction, and each is answered "
          "once what came before it is stored") {
  test::temp_dir dir;
  auto path = dir.path() + "/quarry.db";
  constexpr int sessions = 24;
  auto id_of = [](int i) {
    auto n = std::to_string(i);
    return "q" + std::string(16 - n.size(), '0') + n;
  };
  std::vector<std::string> ids;
  for (int i = 0; i < sessions; ++i)
    ids.push_back(id_of(i));
  auto& vfs = test::faulty_vfs::get();
  auto db = open_faulty_store(path, ids);
  struct outcome {
    std::mutex mtx;
    // Per session: the packets another connection read when its flush was
    // answered, or -1 for an error.
    std::map<std::string, int> seen;
    std::promise<void> all;

    void record(const std::string& id, int n) {
      std::lock_guard<std::mutex> guard{mtx};
      seen[id] = n;
      if (seen.size() == static_cast<size_t>(sessions))
        all.set_value();
    }
  };
  auto out = std::make_shared<outcome>();
  core::settings cfg;
  cfg.runtime.scheduler_threads = 2;
  {
    actors::runtime rt{cfg};
    auto& sys = rt.system();
    auto st = actors::spawn_store(sys, db);
    caf::scoped_actor self{sys};
    auto packet = [&](caf::event_based_actor* sender, const std::string& id) {
      sender->send(st, actors::packet_atom::value, id, uint64_t{1},
                   std::string{R"({"type":"notice"})"}, int32_t{1}, int32_t{0},
                   actors::packet_fact{});
    };
    // Sessions end one after another, each storing its last packets and
    // flushing: one actor does it for all at once.
    auto ender = [&, out](caf::event_based_actor* sender) {
      for (int i = 0; i < sessions; ++i) {
        auto id = id_of(i);
        packet(sender, id);
        sender->request(st, caf::infinite, actors::flush_atom::value)
          .then(
            [=](const std::string& err) {
              int n = -1;
              if (err.empty()) {
                store::open_options o;
                o.read_only = true;
                auto reader = store::store::open(path, o);
                if (auto* r = std::get_if<std::unique_ptr<store::store>>(&reader))
                  if (auto got = (*r)->packets(id))
                    n = static_cast<int>(got->size());
              }
              out->record(id, n);
            },
            [=](const caf::error&) { out->record(id, -1); });
      }
    };
    test::fault_plan count_only;
    vfs.arm(count_only);
    sys.spawn(ender);
    REQUIRE(out->all.get_future().wait_for(std::chrono::seconds{60}) == std::future_status::ready);
    // One transaction for the first (a lone flush is written at once), one
    // or two for the rest, not one per flush.
    auto commits = vfs.commits();
    CAPTURE(commits);
    CHECK(commits >= 1);
    CHECK(commits <= 4);
    // A flush after the burst is answered too, with no error.
    CHECK(flush(self, st).empty());
  }
  vfs.disarm();
  std::lock_guard<std::mutex> guard{out->mtx};
  for (int i = 0; i < sessions; ++i) {
    CAPTURE(i);
    CHECK(out->seen[id_of(i)] == 1);
  }
}

} // namespace store_actor_test
