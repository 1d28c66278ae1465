// Every message payload type round-trips through CAF's binary serializer as a
// type-erased message (so its registered name is used to load it again), and
// comes back equal field by field. The list of types covered here must equal
// the list register_message_types announces: a new type that is not
// registered, or not tested here, fails the first test case. Last, typed
// actors are used from a second actor system over CAF's network layer.

#include "quarry/actors/citation_collector.hpp"
#include "quarry/actors/emitter.hpp"
#include "quarry/actors/llm_messages.hpp"
#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/message_types.hpp"
#include "quarry/actors/research_agent.hpp"
#include "quarry/actors/session.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/cluster/register.hpp"
#include "quarry/core/packets.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>

#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>

namespace message_types_test {

using namespace quarry;

namespace {

// -- values with every field set ----------------------------------------------

const std::string umlauts = "Zürich, 東京 und 🚀 — \"quoted\"\n\ttabbed";

sdk::error some_error() {
  sdk::error e;
  e.code = sdk::errc::quota;
  e.message = "Kontingent erschöpft: " + umlauts;
  e.http_status = 429;
  e.retry_after_ms = 1500;
  e.retry_hint = false;
  return e;
}

sdk::tool_call some_call(int i) {
  return {"call_" + std::to_string(i), "web_search",
          R"({"queries": ["Wärmepumpe", "ヒートポンプ"]})"};
}

sdk::usage some_usage() {
  sdk::usage u;
  u.input_tokens = 1234567890123;
  u.output_tokens = 42;
  u.reasoning_tokens = 7;
  u.cached_input_tokens = 99;
  return u;
}

sdk::chat_request some_request() {
  sdk::chat_request r;
  sdk::chat_message sys;
  sys.author = sdk::role::system;
  sys.content = "Du bist ein Rechercheur. " + umlauts;
  sdk::chat_message asst;
  asst.author = sdk::role::assistant;
  asst.content = "Ich suche.";
  asst.reasoning = "Zuerst die Suche…";
  asst.tool_calls = {some_call(1), some_call(2)};
  sdk::chat_message tool;
  tool.author = sdk::role::tool;
  tool.content = R"({"results": []})";
  tool.tool_call_id = "call_1";
  tool.tool_name = "web_search";
  r.messages = {sys, asst, tool};
  sdk::tool_definition def;
  def.name = "web_search";
  def.description = "Sucht im Netz — 検索";
  def.parameters = {{"type", "object"},
                    {"properties",
                     {{"queries", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                    {"required", {"queries"}}};
  r.tools = {def, def};
  r.tools[1].name = "open_url";
  r.choice = sdk::tool_choice::required;
  r.max_tokens = 4096;
  r.temperature = 0.25;
  r.reasoning_effort = "high";
  r.role_tag = "research_agent";
  r.model = "gpt-ü";
  return r;
}

sdk::chat_result some_result() {
  sdk::chat_result r;
  r.text = "Antwort: " + umlauts;
  r.reasoning = "Überlegung";
  r.tool_calls = {some_call(3)};
  r.finish = sdk::finish_reason::tool_calls;
  r.usage = some_usage();
  r.model = "claude-ö";
  return r;
}

sdk::tool_call_delta some_tool_delta() {
  return {2, "call_9", "open_url", R"({"urls": ["https://例え.jp/)"};
}

sdk::document some_document(const std::string& id) {
  sdk::document d;
  d.id = id;
  d.url = "https://example.org/" + id + "?q=ü";
  d.title = "Titel " + umlauts;
  d.snippet = "Ausschnitt";
  d.content = "Inhalt\nmit Zeilen";
  d.published = "2026-11-22";
  d.kind = sdk::source_kind::file;
  return d;
}

sdk::tool_result some_tool_result() {
  sdk::tool_result r;
  r.llm_text = "Gefunden: " + umlauts;
  r.documents = {some_document("a"), some_document("b")};
  r.failure = some_error();
  return r;
}

actors::agent_result some_agent_result() {
  actors::agent_result r;
  r.call_id = "call_ä";
  r.tab_index = 3;
  r.ok = true;
  r.report = "Bericht [1] und [2].";
  r.cited = {{1, some_document("a")}, {2, some_document("b")}};
  r.failure = "keiner";
  return r;
}

// -- field-by-field comparison ------------------------------------------------

void same(const sdk::error& x, const sdk::error& y);
void same(const sdk::tool_call& x, const sdk::tool_call& y);
void same(const std::string& x, const std::string& y);
template <class T>
void same(const std::vector<T>& x, const std::vector<T>& y);
template <class A, class B>
void same(const std::pair<A, B>& x, const std::pair<A, B>& y);
void same(const sdk::chat_message& x, const sdk::chat_message& y);
void same(const sdk::tool_definition& x, const sdk::tool_definition& y);
void same(const sdk::usage& x, const sdk::usage& y);

void same(const sdk::model_info& x, const sdk::model_info& y) {
  CHECK(x.model == y.model);
  CHECK(x.context_window == y.context_window);
  CHECK(x.supports_tools == y.supports_tools);
  CHECK(x.supports_reasoning == y.supports_reasoning);
  CHECK(x.context_window_source == y.context_window_source);
}
void same(const sdk::chat_request& x, const sdk::chat_request& y);
void same(const sdk::chat_result& x, const sdk::chat_result& y);
void same(const sdk::tool_call_delta& x, const sdk::tool_call_delta& y);
void same(const sdk::document& x, const sdk::document& y);
void same(const sdk::tool_result& x, const sdk::tool_result& y);
void same(const core::citation_mapping& x, const core::citation_mapping& y);
void same(const actors::llm_call& x, const actors::llm_call& y);
void same(const actors::llm_delta& x, const actors::llm_delta& y);
void same(const actors::llm_reply& x, const actors::llm_reply& y);
void same(const actors::llm_deltas& x, const actors::llm_deltas& y);
void same(const actors::tool_call_msg& x, const actors::tool_call_msg& y);
void same(const actors::tool_reply& x, const actors::tool_reply& y);
void same(const actors::tool_done_event& x, const actors::tool_done_event& y);
void same(const actors::packet_fact& x, const actors::packet_fact& y);
void same(const actors::packet_msg& x, const actors::packet_msg& y);
void same(const actors::agent_result& x, const actors::agent_result& y);
void same(const actors::collapse_request& x, const actors::collapse_request& y);
void same(const actors::collapse_reply& x, const actors::collapse_reply& y);
void same(const actors::report_source& x, const actors::report_source& y);
void same(const actors::session_result& x, const actors::session_result& y);
void same(const actors::line_sink_actor& x, const actors::line_sink_actor& y);
void same(const cluster::agent_spec& x, const cluster::agent_spec& y);
void same(const cluster::worker_status& x, const cluster::worker_status& y);
void same(const cluster::spawn_reply& x, const cluster::spawn_reply& y);
void same(const cluster::research_request& x, const cluster::research_request& y);
template <class... Sigs>
void same(const caf::typed_actor<Sigs...>& x, const caf::typed_actor<Sigs...>& y) {
  CHECK(x == y);
}

void same(const sdk::error& x, const sdk::error& y) {
  CHECK(x.code == y.code);
  CHECK(x.message == y.message);
  CHECK(x.http_status == y.http_status);
  CHECK(x.retry_after_ms == y.retry_after_ms);
  CHECK(x.retry_hint == y.retry_hint);
}

void same(const sdk::tool_call& x, const sdk::tool_call& y) {
  CHECK(x.id == y.id);
  CHECK(x.name == y.name);
  CHECK(x.arguments == y.arguments);
}

template <class T>
void same(const std::vector<T>& x, const std::vector<T>& y) {
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i)
    same(x[i], y[i]);
}

void same(const std::string& x, const std::string& y) {
  CHECK(x == y);
}

template <class A, class B>
void same(const std::pair<A, B>& x, const std::pair<A, B>& y) {
  if constexpr (std::is_same_v<A, int>)
    CHECK(x.first == y.first);
  else
    same(x.first, y.first);
  same(x.second, y.second);
}

void same(const sdk::chat_message& x, const sdk::chat_message& y) {
  CHECK(x.author == y.author);
  CHECK(x.content == y.content);
  CHECK(x.reasoning == y.reasoning);
  same(x.tool_calls, y.tool_calls);
  CHECK(x.tool_call_id == y.tool_call_id);
  CHECK(x.tool_name == y.tool_name);
}

void same(const sdk::tool_definition& x, const sdk::tool_definition& y) {
  CHECK(x.name == y.name);
  CHECK(x.description == y.description);
  CHECK(x.parameters == y.parameters);
}

void same(const sdk::usage& x, const sdk::usage& y) {
  CHECK(x.input_tokens == y.input_tokens);
  CHECK(x.output_tokens == y.output_tokens);
  CHECK(x.reasoning_tokens == y.reasoning_tokens);
  CHECK(x.cached_input_tokens == y.cached_input_tokens);
}

void same(const sdk::chat_request& x, const sdk::chat_request& y) {
  same(x.messages, y.messages);
  same(x.tools, y.tools);
  CHECK(x.choice == y.choice);
  CHECK(x.max_tokens == y.max_tokens);
  CHECK(x.temperature == y.temperature);
  CHECK(x.reasoning_effort == y.reasoning_effort);
  CHECK(x.role_tag == y.role_tag);
  CHECK(x.model == y.model);
}

void same(const sdk::chat_result& x, const sdk::chat_result& y) {
  CHECK(x.text == y.text);
  CHECK(x.reasoning == y.reasoning);
  same(x.tool_calls, y.tool_calls);
  CHECK(x.finish == y.finish);
  same(x.usage, y.usage);
  CHECK(x.model == y.model);
}

void same(const sdk::tool_call_delta& x, const sdk::tool_call_delta& y) {
  CHECK(x.index == y.index);
  CHECK(x.id == y.id);
  CHECK(x.name == y.name);
  CHECK(x.arguments == y.arguments);
}

void same(const sdk::document& x, const sdk::document& y) {
  CHECK(x.id == y.id);
  CHECK(x.url == y.url);
  CHECK(x.title == y.title);
  CHECK(x.snippet == y.snippet);
  CHECK(x.content == y.content);
  CHECK(x.published == y.published);
  CHECK(x.kind == y.kind);
}

void same(const sdk::tool_result& x, const sdk::tool_result& y) {
  CHECK(x.llm_text == y.llm_text);
  same(x.documents, y.documents);
  REQUIRE(x.failure.has_value() == y.failure.has_value());
  if (x.failure)
    same(*x.failure, *y.failure);
}

void same(const core::citation_mapping& x, const core::citation_mapping& y) {
  REQUIRE(x.size() == y.size());
  auto i = x.begin();
  auto j = y.begin();
  for (; i != x.end(); ++i, ++j) {
    CHECK(i->first == j->first);
    CHECK(i->second.document_id == j->second.document_id);
    CHECK(i->second.link == j->second.link);
    CHECK(i->second.title == j->second.title);
  }
}

void same(const actors::llm_call& x, const actors::llm_call& y) {
  CHECK(x.id == y.id);
  same(x.request, y.request);
}

void same(const actors::llm_delta& x, const actors::llm_delta& y) {
  CHECK(x.call_id == y.call_id);
  CHECK(x.kind == y.kind);
  CHECK(x.text == y.text);
  same(x.tool, y.tool);
  same(x.counts, y.counts);
}

void same(const actors::llm_reply& x, const actors::llm_reply& y) {
  CHECK(x.call_id == y.call_id);
  same(x.result, y.result);
  CHECK(x.provider == y.provider);
  CHECK(x.attempts == y.attempts);
  CHECK(x.cost_usd == y.cost_usd);
  CHECK(x.basis == y.basis);
}

void same(const actors::llm_deltas& x, const actors::llm_deltas& y) {
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i)
    same(x[i], y[i]);
}

void same(const actors::tool_call_msg& x, const actors::tool_call_msg& y) {
  CHECK(x.id == y.id);
  CHECK(x.arguments == y.arguments);
}

void same(const actors::tool_reply& x, const actors::tool_reply& y) {
  CHECK(x.id == y.id);
  same(x.result, y.result);
  CHECK(x.cached == y.cached);
}

void same(const actors::tool_done_event& x, const actors::tool_done_event& y) {
  CHECK(x.key == y.key);
  same(x.result, y.result);
}

void same(const actors::packet_fact& x, const actors::packet_fact& y) {
  CHECK(x.what == y.what);
  CHECK(x.role == y.role);
  CHECK(x.provider == y.provider);
  CHECK(x.model == y.model);
  CHECK(x.input_tokens == y.input_tokens);
  CHECK(x.output_tokens == y.output_tokens);
  CHECK(x.cost_usd == y.cost_usd);
  CHECK(x.cost_basis == y.cost_basis);
  CHECK(x.text == y.text);
}

void same(const actors::packet_msg& x, const actors::packet_msg& y) {
  CHECK(x.turn_index == y.turn_index);
  CHECK(x.tab_index == y.tab_index);
  CHECK(x.sub_turn_index == y.sub_turn_index);
  CHECK(x.type == y.type);
  CHECK(x.obj == y.obj);
  same(x.fact, y.fact);
}

void same(const actors::agent_result& x, const actors::agent_result& y) {
  CHECK(x.call_id == y.call_id);
  CHECK(x.tab_index == y.tab_index);
  CHECK(x.ok == y.ok);
  CHECK(x.report == y.report);
  same(x.cited, y.cited);
  CHECK(x.failure == y.failure);
}

void same(const actors::collapse_request& x, const actors::collapse_request& y) {
  same(x.reports, y.reports);
}

void same(const actors::collapse_reply& x, const actors::collapse_reply& y) {
  same(x.texts, y.texts);
  same(x.global, y.global);
  REQUIRE(x.documents.size() == y.documents.size());
  for (const auto& [id, doc] : x.documents) {
    REQUIRE(y.documents.count(id) == 1);
    same(doc, y.documents.at(id));
  }
  same(x.findings, y.findings);
}

void same(const actors::report_source& x, const actors::report_source& y) {
  CHECK(x.number == y.number);
  CHECK(x.document_id == y.document_id);
  CHECK(x.title == y.title);
  CHECK(x.url == y.url);
}

void same(const actors::session_result& x, const actors::session_result& y) {
  CHECK(x.status == y.status);
  CHECK(x.report == y.report);
  CHECK(x.plan == y.plan);
  CHECK(x.questions == y.questions);
  same(x.sources, y.sources);
  CHECK(x.failure == y.failure);
  CHECK(x.notices == y.notices);
  CHECK(x.interrupted == y.interrupted);
}

void same(const actors::line_sink_actor& x, const actors::line_sink_actor& y) {
  CHECK(x == y);
}

void same(const cluster::agent_spec& x, const cluster::agent_spec& y) {
  CHECK(x.call_id == y.call_id);
  CHECK(x.task == y.task);
  CHECK(x.context == y.context);
  CHECK(x.turn_index == y.turn_index);
  CHECK(x.tab_index == y.tab_index);
  CHECK(x.max_cycles == y.max_cycles);
  CHECK(x.reasoning_model == y.reasoning_model);
  CHECK(x.force_report_after == y.force_report_after);
  CHECK(x.hard_timeout == y.hard_timeout);
  CHECK(x.context_tokens == y.context_tokens);
  CHECK(x.step_max_tokens == y.step_max_tokens);
  CHECK(x.report_max_tokens == y.report_max_tokens);
  CHECK(x.current_datetime == y.current_datetime);
  CHECK(x.tools == y.tools);
}

void same(const cluster::worker_status& x, const cluster::worker_status& y) {
  CHECK(x.name == y.name);
  CHECK(x.version == y.version);
  CHECK(x.protocol == y.protocol);
  CHECK(x.capacity == y.capacity);
  CHECK(x.running == y.running);
  CHECK(x.tools == y.tools);
  CHECK(x.model == y.model);
}

void same(const cluster::spawn_reply& x, const cluster::spawn_reply& y) {
  CHECK(x.agent == y.agent);
  CHECK(x.refusal == y.refusal);
}

void same(const cluster::research_request& x, const cluster::research_request& y) {
  CHECK(x.question == y.question);
  CHECK(x.max_agents == y.max_agents);
  CHECK(x.deadline_ms == y.deadline_ms);
}

cluster::agent_spec some_agent_spec() {
  cluster::agent_spec s;
  s.call_id = "call_7";
  s.task = "Wärmepumpen im Winter: " + umlauts;
  s.context = "Frühere Befunde [1]";
  s.turn_index = 3;
  s.tab_index = 2;
  s.max_cycles = 5;
  s.reasoning_model = true;
  s.force_report_after = std::chrono::milliseconds{123456};
  s.hard_timeout = std::chrono::milliseconds{234567};
  s.context_tokens = 64000;
  s.step_max_tokens = 900;
  s.report_max_tokens = 9000;
  s.current_datetime = "2026-11-26 15:00";
  s.tools = {"internal_search", "open_url"};
  return s;
}

// -- the fixture --------------------------------------------------------------

struct message_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  message_fixture() {
    cfg.set("logger.verbosity", caf::atom("quiet"));
    actors::register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  // Serializes `x` inside a type-erased message, loads it back by its
  // registered name and checks the copy field by field.
  template <class T>
  T round_trip(const T& x) {
    auto in = caf::make_message(x);
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    auto err = sink(in);
    REQUIRE_MESSAGE(!err, sys->render(err));
    caf::message out;
    caf::binary_deserializer source{*sys, buf};
    err = source(out);
    REQUIRE_MESSAGE(!err, sys->render(err));
    CHECK(source.remaining() == 0);
    REQUIRE(out.match_elements<T>());
    same(x, out.get_as<T>(0));
    return out.get_as<T>(0);
  }

  // Serializes `xs` as raw fields and tries to load a `T` from them.
  template <class T, class... Ts>
  caf::error load_from_fields(Ts... xs) {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    auto err = sink(xs...);
    REQUIRE_MESSAGE(!err, sys->render(err));
    T out;
    caf::binary_deserializer source{*sys, buf};
    return source(out);
  }
};

} // namespace

TEST_CASE_FIXTURE(message_fixture, "every registered message type round-trips "
                                   "through the binary serializer field by field") {
  std::map<std::string, std::function<void()>> cases;
  cases["quarry.error"] = [&] {
    round_trip(some_error());
    // An LLM failure as an actor's error response: the SDK error rides in the
    // error's context and comes back whole.
    auto err = actors::to_caf_error(some_error());
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    REQUIRE(!sink(err));
    caf::error loaded;
    caf::binary_deserializer source{*sys, buf};
    REQUIRE(!source(loaded));
    same(some_error(), actors::from_caf_error(loaded));
  };
  cases["quarry.llm_call"] = [&] { round_trip(actors::llm_call{77, some_request()}); };
  cases["quarry.llm_deltas"] = [&] {
    actors::llm_delta d;
    d.call_id = 9;
    d.kind = actors::delta_kind::tool_call;
    d.text = umlauts;
    d.tool = some_tool_delta();
    d.counts = some_usage();
    actors::llm_delta t;
    t.call_id = 9;
    t.text = "Grüße";
    round_trip(actors::llm_deltas{d, t});
  };
  cases["quarry.llm_reply"] = [&] {
    actors::llm_reply r;
    r.call_id = 5;
    r.result = some_result();
    r.provider = "haupt-ä";
    r.attempts = 3;
    r.cost_usd = 0.125;
    r.basis = core::cost_basis::priced;
    round_trip(r);
    r.basis = core::cost_basis::offline;
    round_trip(r);
  };
  cases["quarry.model_info"] = [&] {
    round_trip(sdk::model_info{"qwen3:8b-ä", 65536, false, true, "ollama /api/show num_ctx"});
  };
  cases["quarry.tool_call"] = [&] {
    round_trip(actors::tool_call_msg{3, R"({"queries": ["Größe"]})"});
    // The requester's parse stays in its process: the text says the same.
    actors::tool_call_msg with_parse{
      3, R"({"queries":["x"]})",
      std::make_shared<const nlohmann::json>(nlohmann::json{{"queries", {"x"}}})};
    auto back = round_trip(with_parse);
    CHECK(back.arguments == with_parse.arguments);
    CHECK(back.parsed == nullptr);
  };
  cases["quarry.tool_reply"] = [&] { round_trip(actors::tool_reply{4, some_tool_result(), true}); };
  cases["quarry.tool_done_event"] = [&] {
    round_trip(actors::tool_done_event{12, some_tool_result()});
  };
  cases["quarry.packet"] = [&] {
    actors::packet_msg p;
    p.turn_index = 2;
    p.tab_index = 4;
    p.sub_turn_index = 1;
    p.obj = R"({"type": "message_delta", "content": "Grüße"})";
    round_trip(p);
    // What the store keeps of a report's piece travels with it.
    auto piece = actors::make_packet({2, 1, 0}, core::packets::intermediate_report_delta("Grüße"));
    CHECK(piece.fact.what == actors::packet_fact::kind::report_text);
    CHECK(piece.fact.text == "Grüße");
    round_trip(piece);
  };
  cases["quarry.packet_fact"] = [&] {
    actors::packet_fact f;
    f.what = actors::packet_fact::kind::usage;
    f.role = "research";
    f.input_tokens = 1200;
    f.output_tokens = 34;
    f.cost_usd = 0.0125;
    f.provider = "haupt";
    f.model = "gpt-4.1-mini";
    f.cost_basis = "unpriced";
    round_trip(f);
    // A usage packet says who answered and how its cost is known.
    sdk::usage u;
    u.input_tokens = 3;
    auto made = actors::make_packet(
      {0, 0, std::nullopt},
      core::packets::usage("plan", u, 0, {"offline", "extractive", core::cost_basis::offline}));
    CHECK(made.fact.provider == "offline");
    CHECK(made.fact.model.empty());
    CHECK(made.fact.cost_basis == "offline");
  };
  cases["quarry.line_sink_actor"] = [&] {
    auto sink = actors::spawn_line_sink(
      *sys, [](const std::string&, uint64_t) {}, [](uint64_t) {});
    round_trip(sink);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  };
  cases["quarry.agent_result"] = [&] { round_trip(some_agent_result()); };
  cases["quarry.collapse_request"] = [&] {
    actors::collapse_request r;
    r.reports = {{"Aufgabe eins", some_agent_result()}, {"タスク二", some_agent_result()}};
    r.reports[1].second.ok = false;
    round_trip(r);
  };
  cases["quarry.collapse_reply"] = [&] {
    actors::collapse_reply r;
    r.texts = {"eins [1]", "zwei [2]"};
    r.global.insert(2, {"b", "https://example.org/b", "Bé"});
    r.global.insert(1, {"a", "https://example.org/a", "Á"});
    r.documents = {{"a", some_document("a")}, {"b", some_document("b")}};
    r.findings = {{"Aufgabe", "Befund"}, {"課題", "所見"}};
    round_trip(r);
  };
  cases["quarry.session_result"] = [&] {
    actors::session_result r;
    r.status = actors::session_status::clarification;
    r.report = "# Bericht\n" + umlauts;
    r.plan = "1. Suchen";
    r.questions = "Welche Region?";
    r.sources = {{1, "a", "Titel A", "https://a.example"},
                 {2, "b", "Titel B", "https://b.example"}};
    r.failure = "nichts";
    r.notices = {"Frist erreicht", "期限"};
    r.interrupted = true;
    round_trip(r);
  };
  // The node interfaces (quarry/cluster/messages.hpp).
  cases["quarry.packet_sink_actor"] = [&] {
    auto em = actors::spawn_emitter(*sys, "s");
    round_trip(actors::packet_sink_actor{em});
    caf::anon_send_exit(em, caf::exit_reason::user_shutdown);
  };
  cases["quarry.agent_spec"] = [&] { round_trip(some_agent_spec()); };
  cases["quarry.agent_parent_actor"] = [&] {
    auto parent = sys->spawn([]() -> actors::agent_parent_actor::behavior_type {
      return {[](cluster::agent_done_atom, const cluster::agent_result&) {}};
    });
    round_trip(parent);
    caf::anon_send_exit(parent, caf::exit_reason::user_shutdown);
  };
  cases["quarry.remote_agent_actor"] = [&] {
    auto agent = sys->spawn([]() -> cluster::remote_agent_actor::behavior_type {
      return {[](cluster::report_now_atom) {}, [](cluster::stop_atom) {}};
    });
    round_trip(agent);
    cluster::spawn_reply r;
    r.agent = agent;
    round_trip(r);
    caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
  };
  cases["quarry.worker_status"] = [&] {
    cluster::worker_status w{"127.0.0.1:8701", "0.1.0", 1, 8, 3, {"internal_search", "open_url"},
                             "main (openai)"};
    round_trip(w);
  };
  cases["quarry.spawn_reply"] = [&] {
    cluster::spawn_reply r;
    r.refusal = "this worker has no tool open_url (it has: internal_search)";
    round_trip(r);
  };
  cases["quarry.research_request"] = [&] {
    round_trip(cluster::research_request{"Wie laut ist eine Wärmepumpe?", 2, 60000});
  };
  std::set<std::string> covered;
  for (const auto& [name, fn] : cases)
    covered.insert(name);
  const auto& announced = actors::message_type_names();
  CHECK(covered == std::set<std::string>(announced.begin(), announced.end()));
  CHECK(announced.size() == covered.size()); // no name announced twice
  for (const auto& name : announced) {
    CAPTURE(name);
    CHECK(cfg.value_factories_by_name.count(name) == 1);
    CHECK(cfg.value_factories_by_name.count("std::vector<" + name + ">") == 1);
  }
  for (const auto& name_fn : cases) {
    const auto& name = name_fn.first;
    const auto& fn = name_fn.second;
    CAPTURE(name);
    fn();
  }
}

TEST_CASE_FIXTURE(message_fixture, "a loaded message with an impossible value "
                                   "is refused") {
  SUBCASE("an enum past its last value") {
    // llm_delta: call id, kind, text, tool delta, usage.
    auto err = load_from_fields<actors::llm_delta>(
      uint64_t{1}, uint8_t{200}, std::string{"x"}, int32_t{0}, std::string{}, std::string{},
      std::string{}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0});
    CHECK(err == caf::sec::invalid_argument);
  }
  SUBCASE("a negative context window") {
    auto err = load_from_fields<sdk::model_info>(std::string{"m"}, int64_t{-1}, true, false,
                                                 std::string{"config"});
    CHECK(err == caf::sec::invalid_argument);
  }
  SUBCASE("an error class of 0") {
    auto err = load_from_fields<sdk::error>(uint8_t{0}, std::string{"m"}, int32_t{0}, false,
                                            int64_t{0}, false, false);
    CHECK(err == caf::sec::invalid_argument);
  }
  SUBCASE("a tool schema that is not JSON") {
    auto err = load_from_fields<sdk::tool_definition>(std::string{"t"}, std::string{"d"},
                                                      std::string{"{\"type\": "});
    CHECK(err == caf::sec::invalid_argument);
  }
  SUBCASE("a tool schema nested too deeply") {
    auto deep = std::string(core::max_schema_depth + 1, '[')
                + std::string(core::max_schema_depth + 1, ']');
    auto err = load_from_fields<sdk::tool_definition>(std::string{"t"}, std::string{"d"}, deep);
    CHECK(err == caf::sec::invalid_argument);
  }
  SUBCASE("an agent's task past its bound, or a negative time limit") {
    auto big = some_agent_spec();
    big.task.assign(cluster::max_task_bytes + 1, 'x');
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    REQUIRE(!sink(big));
    cluster::agent_spec out;
    caf::binary_deserializer source{*sys, buf};
    CHECK(source(out) == caf::sec::invalid_argument);
    auto negative = some_agent_spec();
    negative.hard_timeout = std::chrono::milliseconds{-5};
    buf.clear();
    caf::binary_serializer sink2{*sys, buf};
    REQUIRE(!sink2(negative));
    caf::binary_deserializer source2{*sys, buf};
    CHECK(source2(out) == caf::sec::invalid_argument);
  }
  SUBCASE("a packet fact of a kind no node writes") {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    REQUIRE(!sink(uint8_t{5}, std::string{}, int64_t{0}, int64_t{0}, 0.0, std::string{}));
    actors::packet_fact out;
    caf::binary_deserializer source{*sys, buf};
    CHECK(source(out) == caf::sec::invalid_argument);
  }
  SUBCASE("a packet past its bound") {
    actors::packet_msg p;
    p.obj.assign(cluster::max_packet_bytes + 1, ' ');
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    REQUIRE(!sink(p));
    actors::packet_msg out;
    caf::binary_deserializer source{*sys, buf};
    CHECK(source(out) == caf::sec::invalid_argument);
  }
  SUBCASE("the same fields with valid values load") {
    auto err = load_from_fields<actors::llm_delta>(
      uint64_t{1}, uint8_t{1}, std::string{"x"}, int32_t{0}, std::string{}, std::string{},
      std::string{}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0});
    CHECK(!err);
  }
}

// Two actor systems in one process stand for two nodes: actors published on
// one are used through CAF's network layer (loopback only) from the other,
// with their typed interfaces checked on connection.
TEST_CASE("typed actors answer across nodes and a wrong interface is refused") {
  auto make_config = [] {
    auto cfg = std::make_unique<caf::actor_system_config>();
    cfg->set("logger.verbosity", caf::atom("quiet"));
    cfg->set("scheduler.max-threads", 2);
    actors::register_message_types(*cfg);
    cfg->load<caf::io::middleman>();
    return cfg;
  };
  auto cfg_a = make_config();
  auto cfg_b = make_config();
  caf::actor_system a{*cfg_a};
  caf::actor_system b{*cfg_b};
  auto collector = actors::spawn_citation_collector(a);
  auto em = actors::spawn_emitter(a, "remote");
  auto collector_port = a.middleman().publish(collector, 0, "127.0.0.1");
  REQUIRE_MESSAGE(collector_port, a.render(collector_port.error()));
  auto em_port = a.middleman().publish(em, 0, "127.0.0.1");
  REQUIRE_MESSAGE(em_port, a.render(em_port.error()));
  // A node that expects another interface on that port is refused.
  auto wrong = b.middleman().remote_actor<actors::emitter_actor>("127.0.0.1", *collector_port);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error() == caf::sec::unexpected_actor_messaging_interface);
  auto remote_collector = b.middleman().remote_actor<actors::citation_collector_actor>(
    "127.0.0.1", *collector_port);
  REQUIRE_MESSAGE(remote_collector, b.render(remote_collector.error()));
  auto remote_em = b.middleman().remote_actor<actors::emitter_actor>("127.0.0.1", *em_port);
  REQUIRE_MESSAGE(remote_em, b.render(remote_em.error()));
  caf::scoped_actor self{b};
  // A round of reports goes over and comes back renumbered.
  actors::collapse_request req;
  req.reports = {{"Aufgabe", some_agent_result()}};
  actors::collapse_reply reply;
  self->request(*remote_collector, std::chrono::seconds{10}, actors::collapse_atom::value, req)
    .receive([&](actors::collapse_reply& r) { reply = std::move(r); },
             [&](const caf::error& err) { FAIL(b.render(err)); });
  REQUIRE(reply.texts.size() == 1);
  CHECK(reply.texts[0] == "Bericht [1] und [2].");
  CHECK(reply.global.size() == 2);
  CHECK(reply.documents.size() == 2);
  // A line sink on this node subscribes to the emitter on the other: its
  // typed handle crosses the network inside the subscription.
  std::mutex mtx;
  std::vector<std::string> got;
  std::promise<uint64_t> ended;
  auto sink = actors::spawn_line_sink(
    b,
    [&](const std::string& line, uint64_t) {
      std::lock_guard<std::mutex> guard{mtx};
      got.push_back(line);
    },
    [&](uint64_t n) { ended.set_value(n); });
  self->send(*remote_em, actors::subscribe_atom::value, sink, uint64_t{0});
  self->send(*remote_em, actors::packet_atom::value,
             actors::make_packet({1, 0, std::nullopt},
                                 core::packets::message_delta("Grüße, 世界")));
  uint64_t count = 0;
  self->request(*remote_em, std::chrono::seconds{10}, actors::stop_atom::value)
    .receive([&](uint64_t n) { count = n; }, [&](const caf::error& err) { FAIL(b.render(err)); });
  CHECK(count == 1);
  auto done = ended.get_future();
  REQUIRE(done.wait_for(std::chrono::seconds{10}) == std::future_status::ready);
  CHECK(done.get() == 1);
  {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE(got.size() == 1);
    CHECK(got[0].find("Grüße, 世界") != std::string::npos);
  }
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

TEST_CASE("register_types gives a program heartbeats for Quarry nodes, and keeps its own "
          "interval") {
  using std::chrono::seconds;
  auto interval = [](caf::actor_system_config& cfg) {
    return caf::get_or(cfg.content, "middleman.heartbeat-interval", caf::timespan{0});
  };
  caf::actor_system_config plain;
  quarry::cluster::register_types(plain);
  CHECK(interval(plain) == caf::timespan{seconds{1}});
  caf::actor_system_config off;
  off.set("middleman.heartbeat-interval", caf::timespan{0});
  quarry::cluster::register_types(off);
  CHECK(interval(off) == caf::timespan{seconds{1}});
  caf::actor_system_config own;
  own.set("middleman.heartbeat-interval", caf::timespan{seconds{3}});
  quarry::cluster::register_types(own);
  CHECK(interval(own) == caf::timespan{seconds{3}});
}

} // namespace message_types_test
