// Unit tests of packets: the JSON of every type, the envelope and decoding.

#include "quarry/core/packets.hpp"
#include "quarry/sdk/json.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <random>

namespace packets_test {

using namespace quarry;
using namespace quarry::core;
using nlohmann::json;

TEST_CASE("packets encode the envelope and decode it back") {
  packet p;
  p.seq = 42;
  p.session = "s-1";
  p.where = {3, 1, 2};
  p.obj = packets::reasoning_delta("thinking \"hard\"\n");
  auto line = encode(p);
  CHECK(line.find('\n') == std::string::npos);
  auto j = json::parse(line);
  CHECK(j == json::parse(R"({"seq": 42, "session": "s-1",
    "placement": {"turn_index": 3, "tab_index": 1, "sub_turn_index": 2},
    "obj": {"type": "reasoning_delta", "reasoning": "thinking \"hard\"\n"}})"));
  auto back = decode(line);
  REQUIRE(std::holds_alternative<packet>(back));
  const auto& q = std::get<packet>(back);
  CHECK(q.seq == 42);
  CHECK(q.session == "s-1");
  CHECK(q.where == p.where);
  CHECK(q.obj == p.obj);
  CHECK(q.type() == "reasoning_delta");
  packet top;
  top.obj = packets::stop();
  CHECK(json::parse(encode(top))["placement"]["sub_turn_index"].is_null());
  CHECK(json::parse(encode(top))["obj"] == json{{"type", "stop"}, {"stop_reason", nullptr}});
}

TEST_CASE("a packet encoded from its object's text is byte for byte the one encode() "
          "makes of the parsed object") {
  std::vector<json> objs{
    packets::reasoning_delta("thinking \"hard\"\n\u00e9 \xe2\x82\xac"), packets::stop(),
    packets::usage("plan", {}, 0.125), packets::error("x\ty", "tool_failed"),
    json{{"type", "odd"}, {"n", -3}, {"f", 1e-7}, {"a", json::array({1, "b"})}}};
  for (const auto& where : {placement{0, 0, std::nullopt}, placement{7, 2, 3}}) {
    for (const auto& obj : objs) {
      packet p;
      p.seq = 12345;
      p.session = "q0123456789abcdef \"quoted\"";
      p.where = where;
      p.obj = obj;
      auto text = obj.dump(-1, ' ', false, json::error_handler_t::replace);
      auto line = encode(p.seq, p.session, p.where, text);
      REQUIRE(line);
      CHECK(*line == encode(p));
    }
  }
  // From another node the text may be hostile: deeply nested (checked
  // without recursion), or large, it is encoded as the parsed object is.
  std::string deep = "{\"a\":";
  for (int i = 0; i < 100000; ++i)
    deep += "[";
  for (int i = 0; i < 100000; ++i)
    deep += "]";
  deep += "}";
  auto nested = encode(1, "s", placement{}, deep);
  REQUIRE(nested);
  CHECK(nested->find(deep) != std::string::npos);
  CHECK_FALSE(encode(1, "s", placement{}, deep.substr(0, deep.size() - 2) + "}"));
  std::string big = "{\"type\":\"message_delta\",\"content\":\"" + std::string(3 << 20, 'x')
                    + "\"}";
  auto large = encode(2, "s", placement{}, big);
  REQUIRE(large);
  CHECK(large->size() > big.size());
  // Not an object, not JSON, or not UTF-8: nothing.
  for (std::string bad : {"", "[]", "\"s\"", "{", "{\"a\":1}x", "{\"a\":\"\xff\"}", "null"})
    CHECK_FALSE(encode(1, "s", placement{}, bad));
}

TEST_CASE("append_json_string writes what nlohmann writes, at every alignment") {
  // Strings made of pieces that take each path of the writer: plain runs
  // of several lengths, the escapes, UTF-8 of 2, 3 and 4 bytes, and invalid
  // bytes (nlohmann's replacement); appended after text already in `out`.
  std::vector<std::string> pieces{"a",
                                  "bcdefgh",
                                  "ijklmnopqrstuvw",
                                  "\"",
                                  "\\",
                                  "\n",
                                  "\t",
                                  "\x01",
                                  "\x1f",
                                  "\x7f",
                                  "/",
                                  " ",
                                  "\xc3\xa9",
                                  "\xe2\x82\xac",
                                  "\xf0\x9f\x98\x80",
                                  "\xff",
                                  "\xc3",
                                  "\xed\xa0\x80",
                                  "\x80",
                                  "\n    \"k\": "};
  std::mt19937 rng{29};
  size_t invalid = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string text;
    auto count = rng() % 40;
    for (size_t i = 0; i < count; ++i)
      text += pieces[rng() % (round % 2 == 0 ? 15 : pieces.size())];
    std::string out(rng() % 24, 'x');
    auto before = out;
    sdk::append_json_string(out, text);
    auto want = before + json(text).dump(-1, ' ', false, json::error_handler_t::replace);
    CAPTURE(text);
    REQUIRE(out == want);
    invalid += sdk::is_valid_utf8(text) ? 0 : 1;
  }
  CHECK(invalid > 1000); // both paths were taken
  // Text without an escape, of every length around the one-append limit,
  // ASCII and UTF-8.
  for (size_t length = 0; length < 70; ++length)
    for (std::string unit : {"a", "\xc3\xa9"}) {
      std::string text;
      while (text.size() + unit.size() <= length)
        text += unit;
      std::string out = "x";
      sdk::append_json_string(out, text);
      CAPTURE(text);
      CHECK(out == "x" + json(text).dump());
    }
  // A long text of nothing but escapes grows `out` several times.
  std::string controls(10000, '\x02');
  std::string out;
  sdk::append_json_string(out, controls);
  CHECK(out.size() == 10000 * 6 + 2);
  CHECK(out == json(controls).dump());
}

TEST_CASE("append_json_string stays inside the capacity reserved for the escaped text") {
  // A writer that reserved room for the whole escaped text (a request body,
  // held while its call runs) keeps that capacity: the writer's margin
  // must not grow the string past it, which would double it. Texts of
  // tool results written as indented JSON, with each escape last.
  std::vector<std::string> texts;
  std::string indented;
  for (int i = 0; i < 300; ++i)
    indented += "  {\n    \"title\": \"Heat pumps \\ defrost\",\n    \"n\": " + std::to_string(i)
                + "\n  },\n";
  texts.push_back(indented);
  for (std::string last : {"\"", "\n", "\x01", "\\"})
    texts.push_back(std::string(5000, 'a') + last);
  texts.push_back(std::string(3000, '\x02'));
  for (const auto& text : texts) {
    auto escaped = json(text).dump();
    for (size_t slack : {0, 1, 5, 64}) {
      std::string out = "{\"content\":";
      out.reserve(out.size() + escaped.size() + 1 + slack);
      auto capacity = out.capacity();
      sdk::append_json_string(out, text);
      out += '}';
      CAPTURE(slack);
      CHECK(out == "{\"content\":" + escaped + "}");
      CHECK(out.capacity() == capacity);
    }
  }
}

TEST_CASE("dump_json writes what nlohmann's dump writes, byte for byte") {
  auto nlohmann_dump = [](const json& x) {
    return x.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  std::string controls;
  for (int c = 0; c < 0x20; ++c)
    controls += static_cast<char>(c);
  controls += "\x7f \"\\/";
  std::vector<json> values{
    nullptr, true, false, 0, -1, std::numeric_limits<int64_t>::min(),
    std::numeric_limits<uint64_t>::max(), 0.0, -0.0, 1.5, 1e-7, 1e300, 0.1 + 0.2,
    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), "", controls,
    "plain words, \u00e9t\u00e9 \xe2\x82\xac \xf0\x9f\x98\x80",
    // Invalid UTF-8 in several places: nlohmann's replacement, exactly.
    "a\xff b", "\xc3", "x\xe2\x82", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong \xf4\x90\x80\x80",
    json::array(), json::object(), json::binary({1, 2, 3}),
    json{{"type", "message_delta"}, {"content", "one\nword\t\"q\""}},
    json{{"b", json::array({1, "two", nullptr, json::object({{"k\x01", "v\xfe"}})})},
         {"a", {{"nested", {{"deeper", json::array({json::array(), json::object()})}}}}}},
    packets::search_tool_documents_delta({}), packets::usage("plan", {}, 0.125)};
  for (const auto& v : values) {
    CAPTURE(nlohmann_dump(v));
    CHECK(dump_json(v) == nlohmann_dump(v));
  }
  // Indented, as the tools write what the model reads: every value above,
  // alone and nested in arrays and objects at a few depths (a binary value
  // deep inside is written by nlohmann too).
  std::vector<json> indented = values;
  indented.push_back(json{{"results", values}});
  indented.push_back(json::array({values, json{{"k", values}}, json::array({json::array({})})}));
  indented.push_back(json{{"a", {{"b", {{"c", json::array({1, json::object(), "x"})}}}}}});
  for (int indent : {0, 1, 2, 4}) {
    for (const auto& v : indented) {
      auto want = v.dump(indent, ' ', false, json::error_handler_t::replace);
      CAPTURE(indent);
      CAPTURE(want);
      CHECK(sdk::dump_json(v, indent) == want);
    }
  }
  CHECK(session_json("q \"x\"\n") == nlohmann_dump(json("q \"x\"\n")));
  // encode_dumped joins as encode() does, without the check.
  auto obj = packets::message_delta("word");
  auto text = dump_json(obj);
  CHECK(encode_dumped(3, session_json("s"), placement{1, 2, 3}, text)
        == *encode(3, "s", placement{1, 2, 3}, text));
}

TEST_CASE("documents packets written as text are byte for byte the constructors' dump") {
  std::vector<sdk::document> docs;
  CHECK(documents_packet_text("search_tool_documents_delta", "documents", docs)
        == dump_json(packets::search_tool_documents_delta(docs)));
  sdk::document web;
  web.id = "doc-1";
  web.url = "https://example.org/a?b=\"c\"";
  web.title = "Heat \"pumps\"\n\tin \u00e9t\u00e9 \xe2\x82\xac";
  web.snippet = "A snippet with \\ and \x01 control";
  web.published = "2024-05-01";
  docs.push_back(web);
  sdk::document local = web;
  local.id = "local/7";
  local.url.clear(); // no link: null, and the title names it
  local.kind = sdk::source_kind::internal;
  local.content = "read text";
  local.published.reset();
  docs.push_back(local);
  sdk::document untitled;
  untitled.id = "x";
  untitled.url = "https://example.org/only-url";
  untitled.snippet = "bad \xff byte"; // not UTF-8: U+FFFD as nlohmann writes it
  docs.push_back(untitled);
  for (auto kind : {sdk::source_kind::web, sdk::source_kind::internal, sdk::source_kind::file,
                    sdk::source_kind::other}) {
    docs.back().kind = kind;
    CAPTURE(dump_json(packets::search_tool_documents_delta(docs)));
    CHECK(documents_packet_text("search_tool_documents_delta", "documents", docs)
          == dump_json(packets::search_tool_documents_delta(docs)));
    CHECK(documents_packet_text("open_url_documents", "documents", docs)
          == dump_json(packets::open_url_documents(docs)));
    CHECK(documents_packet_text("intermediate_report_cited_docs", "cited_docs", docs)
          == dump_json(packets::intermediate_report_cited_docs(docs)));
  }
}

TEST_CASE("packets reject malformed lines with a reason") {
  for (auto bad : {"", "[]",
                   "{\"seq\": -1, \"placement\": {\"turn_index\": 0}, "
                   "\"obj\": {\"type\": \"stop\"}}",
                   "{\"seq\": 1, \"obj\": {\"type\": \"stop\"}}",
                   "{\"seq\": 1, \"placement\": {\"turn_index\": \"0\"}, "
                   "\"obj\": {\"type\": \"stop\"}}",
                   "{\"seq\": 1, \"placement\": {\"turn_index\": 0, "
                   "\"sub_turn_index\": \"x\"}, \"obj\": {\"type\": \"stop\"}}",
                   "{\"seq\": 1, \"placement\": {\"turn_index\": 0}, \"obj\": {}}"}) {
    CAPTURE(bad);
    auto r = decode(bad);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK_FALSE(std::get<std::string>(r).empty());
  }
}

TEST_CASE("packets carry Onyx's field names") {
  sdk::document d;
  d.id = "https://a.example/x";
  d.url = "https://a.example/x";
  d.title = "A page";
  d.snippet = "snippet";
  d.published = "2024-01-02";
  auto docs = std::vector<sdk::document>{d};
  CHECK(packets::search_tool_start(true)
        == json{{"type", "search_tool_start"}, {"is_internet_search", true}});
  CHECK(packets::search_tool_queries_delta({"a", "b"})["queries"] == json{"a", "b"});
  auto sd = packets::search_tool_documents_delta(docs)["documents"][0];
  CHECK(sd["document_id"] == "https://a.example/x");
  CHECK(sd["semantic_identifier"] == "A page");
  CHECK(sd["link"] == "https://a.example/x");
  CHECK(sd["blurb"] == "snippet");
  CHECK(sd["updated_at"] == "2024-01-02");
  CHECK(sd["is_internet"] == true);
  CHECK(sd["source_type"] == "web");
  CHECK(packets::open_url_urls({"u"}) == json{{"type", "open_url_urls"}, {"urls", {"u"}}});
  CHECK(packets::open_url_documents(docs)["documents"].size() == 1);
  CHECK(packets::top_level_branching(2)["num_parallel_branches"] == 2);
  CHECK(packets::research_agent_start("task")["research_task"] == "task");
  CHECK(packets::deep_research_plan_delta("1. x")["content"] == "1. x");
  CHECK(packets::intermediate_report_delta("r")["content"] == "r");
  CHECK(packets::intermediate_report_cited_docs(docs)["cited_docs"][0]["blurb"] == "snippet");
  CHECK(packets::message_start(nullptr, std::nullopt)
        == json{{"type", "message_start"},
                {"final_documents", nullptr},
                {"pre_answer_processing_seconds", nullptr}});
  CHECK(packets::message_start(&docs, 1.5)["final_documents"].size() == 1);
  CHECK(packets::message_delta("t")["content"] == "t");
  CHECK(packets::citation_info(3, "d")
        == json{{"type", "citation_info"}, {"citation_number", 3}, {"document_id", "d"}});
  CHECK(packets::stop("user_cancelled")["stop_reason"] == "user_cancelled");
  CHECK(packets::heartbeat()["type"] == "chat_heartbeat");
  sdk::usage u;
  u.input_tokens = 10;
  u.output_tokens = 5;
  auto us = packets::usage("orchestrator", u, 0.25);
  CHECK(us["input_tokens"] == 10);
  CHECK(us["cost_usd"] == 0.25);
  for (const auto& obj :
       {packets::section_end(), packets::reasoning_start(), packets::reasoning_done(),
        packets::open_url_start(), packets::deep_research_plan_start(),
        packets::intermediate_report_start(), packets::error("boom"), packets::clarification("q?"),
        packets::notice("n"), us})
    CHECK(is_known_packet_type(obj["type"].get<std::string>()));
  CHECK_FALSE(is_known_packet_type("image_generation_start"));
  sdk::document internal = d;
  internal.kind = sdk::source_kind::internal;
  internal.url.clear();
  auto isd = search_doc(internal);
  CHECK(isd["is_internet"] == false);
  CHECK(isd["link"].is_null());
  // A document whose text was read is not "snippet only"; a search result
  // never opened is.
  internal.content = "The passage that was read.";
  CHECK(search_doc(internal)["snippet_only"] == false);
  internal.content.clear();
  internal.snippet = "A snippet.";
  CHECK(search_doc(internal)["snippet_only"] == true);
}

} // namespace packets_test
