// The progress view of `quarry research`: lines fitted to the terminal, the
// plan's steps, log lines above the frame, the summary line.

#include "research_view.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace research_view_test {

using namespace quarry;

namespace {

core::packet make(const std::string& type, nlohmann::json fields = nlohmann::json::object(),
                  int tab = 0) {
  core::packet p;
  p.seq = 1;
  p.session = "t";
  p.where.turn_index = 1;
  p.where.tab_index = tab;
  fields["type"] = type;
  p.obj = std::move(fields);
  return p;
}

size_t columns(const std::string& s) {
  size_t n = 0;
  for (auto c : s)
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80)
      ++n;
  return n;
}

// What a live view wrote to a memory stream.
struct captured {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&buf, &size);
  ~captured() {
    if (f)
      std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string{buf, size};
  }
};

} // namespace

TEST_CASE("research_view fits text to a width in code points") {
  using app::research_view;
  CHECK(research_view::fit("short", 10) == "short");
  CHECK(research_view::fit("exactly10!", 10) == "exactly10!");
  CHECK(research_view::fit("this is far too long", 10) == "this is...");
  CHECK(columns(research_view::fit("ééééééééééééééé", 8)) == 8);
  CHECK(research_view::fit("ééééééééééééééé", 8) == "ééééé...");
  CHECK(research_view::fit("a\nb\tc\x1b[2J", 20) == "a b c");
  CHECK(research_view::fit("\x1b]0;title\x07\xC2\x9B"
                           "2Jshort",
                           10)
        == "short");
  CHECK(research_view::fit("anything", 0).empty());
}

TEST_CASE("research_view shows the plan's steps and fits every line") {
  app::research_view view{stderr, false};
  view.on_packet(make("deep_research_plan_delta",
                      {{"content", "1. Measure how efficiency falls with outdoor "
                                   "temperature across many published field studies\n"
                                   "2. Explain defrost cycles\n\n3. Compare refrigerants\n"}}));
  view.on_packet(make("research_agent_start",
                      {{"research_task", "A very long research task that goes on and on "
                                         "well past the width of any small terminal"}},
                      2));
  for (size_t width : {40u, 80u, 120u}) {
    CAPTURE(width);
    auto lines = view.status_lines(width);
    REQUIRE(lines.size() >= 5);
    CHECK(lines[0] == "Plan (3 steps):");
    CHECK(lines[2].find("2. Explain defrost cycles") != std::string::npos);
    for (const auto& l : lines)
      CHECK(columns(l) <= width);
    // Agents are numbered from 1, as in the progress lines.
    CHECK(lines[4].find("[agent 3]") != std::string::npos);
  }
}

TEST_CASE("research_view prints log lines above its frame and clears it at the end") {
  captured out;
  {
    app::research_view view{out.f, true, 60};
    view.on_packet(make("research_agent_start", {{"research_task", "Explain defrost"}}));
    auto before = out.text();
    CHECK(before.find("[agent 1] Explain defrost") != std::string::npos);
    view.print_above("a log line");
    auto after = out.text().substr(before.size());
    // The frame is erased first (cursor up + clear to end), then the log
    // line, then the frame again.
    auto clear = after.find("\x1b[J");
    auto log = after.find("a log line\n");
    auto redrawn = after.find("[agent 1]");
    REQUIRE(clear != std::string::npos);
    REQUIRE(log != std::string::npos);
    REQUIRE(redrawn != std::string::npos);
    CHECK(clear < log);
    CHECK(log < redrawn);
    view.finish();
  }
  auto all = out.text();
  // finish() leaves no frame behind: the last thing written is a clear.
  CHECK(all.rfind("\x1b[J") > all.rfind("[agent 1]"));
}

TEST_CASE("research_view counts model calls, tokens and cost for the summary") {
  app::research_view view{stderr, false};
  view.on_packet(
    make("usage", {{"input_tokens", 1000}, {"output_tokens", 500}, {"cost_usd", 0.25}}));
  view.on_packet(make("usage", {{"input_tokens", 100}, {"output_tokens", 50}, {"cost_usd", 0.0}}));
  view.on_packet(make("search_tool_documents_delta",
                      {{"documents", {{{"document_id", "a"}}, {{"document_id", "b"}}}}}));
  auto t = view.totals();
  CHECK(t.model_calls == 2);
  CHECK(t.tokens == 1650);
  CHECK(t.sources == 2);
  auto line = app::summary_line(std::chrono::milliseconds{83400}, t, {"r.md", "r.html"});
  CHECK(line
        == "quarry: done in 83.4 s, 2 model calls, 1.6k tokens, $0.2500, "
           "2 sources; wrote r.md, r.html");
}

TEST_CASE("research_view's summary says no model for the offline provider and an unknown cost") {
  auto usage = [](bool offline, bool known, double cost) {
    return make("usage", {{"input_tokens", 1000},
                          {"output_tokens", 200},
                          {"cost_usd", cost},
                          {"cost_known", known},
                          {"offline", offline}});
  };
  auto line_of = [](const app::research_view& v) {
    return app::summary_line(std::chrono::milliseconds{3200}, v.totals(), {});
  };
  app::research_view offline{stderr, false};
  for (int i = 0; i < 3; ++i)
    offline.on_packet(usage(true, true, 0));
  CHECK(offline.totals().tokens == 0);
  CHECK(line_of(offline) == "quarry: done in 3.2 s, no model (3 offline calls), 0 sources");

  app::research_view unpriced{stderr, false};
  unpriced.on_packet(usage(false, false, 0));
  unpriced.on_packet(usage(false, false, 0));
  CHECK(line_of(unpriced)
        == "quarry: done in 3.2 s, 2 model calls, 2.4k tokens, cost unknown, 0 sources");

  app::research_view mixed{stderr, false};
  mixed.on_packet(usage(false, true, 0.01));
  mixed.on_packet(usage(false, false, 0));
  mixed.on_packet(usage(true, true, 0));
  CHECK(line_of(mixed)
        == "quarry: done in 3.2 s, 2 model calls, 2.4k tokens, at least $0.0100 (1 call "
           "unpriced), 1 offline call, 0 sources");

  app::research_view free{stderr, false};
  free.on_packet(usage(false, true, 0));
  CHECK(line_of(free) == "quarry: done in 3.2 s, 1 model call, 1.2k tokens, $0.0000, 0 sources");
}

TEST_CASE("research_view shows the reflective plan as a checklist that follows the steps") {
  captured out;
  app::research_view view{out.f, false};
  auto plan = [](std::vector<std::string> statuses, int iteration) {
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < statuses.size(); ++i)
      steps.push_back({{"id", "s1." + std::to_string(i + 1)},
                       {"title", "Step " + std::to_string(i + 1)},
                       {"status", statuses[i]}});
    return make("reflective_plan", {{"plan", {{"iteration", iteration}, {"steps", steps}}}});
  };
  view.on_packet(
    make("question_classified",
         {{"complexity", "moderate"}, {"depth", "medium"}, {"mode", "deep_research"}}));
  view.on_packet(plan({"pending", "pending", "pending"}, 1));
  view.on_packet(make("plan_step_start", {{"step_id", "s1.1"}, {"title", "Step 1"}}));
  view.on_packet(plan({"in_progress", "pending", "pending"}, 1));
  auto lines = view.status_lines(80);
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0] == "Plan (3 steps):");
  CHECK(lines[1] == "  [>] s1.1 Step 1");
  CHECK(lines[2] == "  [ ] s1.2 Step 2");
  view.on_packet(make("plan_step_end", {{"step_id", "s1.1"}, {"status", "completed"}}));
  view.on_packet(plan({"completed", "pending", "pending"}, 1));
  view.on_packet(make("reflection", {{"step_id", "s1.1"},
                                     {"decision", "complete"},
                                     {"taken", "continue"},
                                     {"refused", true},
                                     {"why", "COMPLETE refused: 1 of the 3 steps"}}));
  view.on_packet(plan({"completed", "skipped", "completed"}, 1));
  lines = view.status_lines(80);
  CHECK(lines[1] == "  [x] s1.1 Step 1");
  CHECK(lines[2] == "  [-] s1.2 Step 2");
  CHECK(view.plan() == "[x] s1.1 Step 1\n[-] s1.2 Step 2\n[x] s1.3 Step 3");
  view.on_packet(make("verification_summary",
                      {{"claims", 4}, {"supported", 3}, {"unsupported", 1}, {"unverified", 0}}));
  view.finish();
  auto text = out.text();
  // The plan is printed once per iteration, with its statuses then.
  CHECK(text.find("question: moderate, depth medium, mode deep_research") != std::string::npos);
  CHECK(text.find("plan:\n[ ] s1.1 Step 1\n[ ] s1.2 Step 2") != std::string::npos);
  CHECK(text.find("step s1.1: Step 1") != std::string::npos);
  CHECK(text.find("step s1.1 completed") != std::string::npos);
  CHECK(text.find("reflection after s1.1: CONTINUE (COMPLETE refused: 1 of the 3 steps)")
        != std::string::npos);
  CHECK(text.find("verified: 3 of 4 claims supported, 1 unsupported, 0 unverified")
        != std::string::npos);
}

TEST_CASE("research_view prints no escape sequence from a model, live or not") {
  // OSC 0 (window title), OSC 52 (clipboard), ESC[2J, 8-bit CSI, BEL.
  const std::string evil = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x1b\\\x1b[2J\xC2\x9B"
                           "31m"
                           "\x07\xC2\x9D"
                           "2;t\xC2\x9C";
  auto feed = [&](app::research_view& view) {
    view.on_packet(make("deep_research_plan_delta", {{"content", "1. Step" + evil + "\n"}}));
    view.on_packet(make("section_end"));
    view.on_packet(make("research_agent_start", {{"research_task", "Task" + evil}}));
    view.on_packet(make("search_tool_queries_delta", {{"queries", {"query" + evil}}}));
    view.on_packet(make("notice", {{"text", "notice" + evil}}));
    view.on_packet(make("error", {{"message", "server said" + evil}}));
    view.on_packet(make("plan_step_start", {{"step_id", "s1"}, {"title", "title" + evil}}));
    view.print_above("log" + evil);
  };
  auto injected = [](const std::string& text) {
    for (std::string bad :
         {"\x1b]", "\x1b[2J", "\x07", "\xC2\x9B", "\xC2\x9D", "\xC2\x9C", "pwned", "cHduZWQ"})
      if (text.find(bad) != std::string::npos)
        return true;
    return false;
  };
  {
    captured out;
    app::research_view view{out.f, false};
    feed(view);
    view.finish();
    auto text = out.text();
    CAPTURE(text);
    CHECK_FALSE(injected(text));
    CHECK(text.find("agent 1: Task") != std::string::npos);
    CHECK(text.find("error: server said") != std::string::npos);
  }
  {
    captured out;
    app::research_view view{out.f, true, 200};
    feed(view);
    for (const auto& l : view.status_lines(200))
      CHECK_FALSE(injected(l));
    view.finish();
    auto text = out.text();
    CAPTURE(text);
    CHECK_FALSE(injected(text));
    CHECK(text.find("log\n") != std::string::npos);
  }
}

} // namespace research_view_test
