// The SDK's UTF-8 repair and bounded JSON parsing, and their use in tool
// arguments and the LLM JSON forms: invalid UTF-8 and JSON nested 60,000
// deep give clear results, never a crash.

#include "quarry/core/llm_json.hpp"
#include "quarry/core/tool_args.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <variant>

namespace sdk_text_json_hostile_test {

namespace sdk = quarry::sdk;
namespace core = quarry::core;
using nlohmann::json;

namespace {

const std::string fffd{sdk::utf8_replacement};

std::string nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

std::string nested_object(size_t depth) {
  std::string out;
  for (size_t i = 0; i < depth; ++i)
    out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

} // namespace

TEST_CASE("sdk UTF-8 repair replaces each invalid byte and keeps valid text") {
  CHECK(sdk::is_valid_utf8("plain ascii"));
  CHECK(sdk::is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  CHECK_FALSE(sdk::is_valid_utf8("a\xFF"));
  CHECK_FALSE(sdk::is_valid_utf8("\xC0\xAF"));         // overlong
  CHECK_FALSE(sdk::is_valid_utf8("\xED\xA0\x80"));     // surrogate
  CHECK_FALSE(sdk::is_valid_utf8("\xF4\x90\x80\x80")); // above U+10FFFF
  CHECK_FALSE(sdk::is_valid_utf8("\xE2\x82"));         // truncated
  CHECK(sdk::repair_utf8("a\xFF"
                         "b")
        == "a" + fffd + "b");
  CHECK(sdk::repair_utf8("x\xE2\x82") == "x" + fffd + fffd);
  CHECK(sdk::repair_utf8("\xC0\xAF") == fffd + fffd);
  CHECK(sdk::repair_utf8("caf\xC3\xA9") == "caf\xC3\xA9");
  std::string s = "ok\x80";
  CHECK(sdk::repair_utf8_in_place(s));
  CHECK(s == "ok" + fffd);
  CHECK_FALSE(sdk::repair_utf8_in_place(s));
  // Cutting never splits a sequence.
  CHECK(sdk::utf8_prefix("ab\xE2\x82\xAC", 4) == "ab");
  CHECK(sdk::utf8_prefix("ab\xE2\x82\xAC", 5) == "ab\xE2\x82\xAC");
  CHECK(sdk::utf8_prefix("abc", 2) == "ab");
  std::string out;
  sdk::append_utf8(out, 0xD800);
  sdk::append_utf8(out, 0x1F600);
  CHECK(out == fffd + "\xF0\x9F\x98\x80");
  // The core helper agrees (and drops NUL bytes).
  CHECK(core::sanitize_utf8(std::string("a\0\xFF", 3)) == "a" + fffd);
}

TEST_CASE("sdk UTF-8 check finds the first invalid byte wherever it lies in the words it reads "
          "at once") {
  // The check reads ASCII eight bytes at a time: a sequence, valid or not,
  // at every place of those words, after runs of every length.
  for (std::string seq : {"\xC3\xA9", "\xF0\x9F\x98\x80", "\xFF", "\xC0\xAF", "\xE2\x82"})
    for (size_t before = 0; before < 20; ++before)
      for (size_t after : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{13}}) {
        auto text = std::string(before, 'a') + seq + std::string(after, 'b');
        CAPTURE(text);
        auto valid = seq == "\xC3\xA9" || seq == "\xF0\x9F\x98\x80";
        CHECK(sdk::first_invalid_utf8(text) == (valid ? text.size() : before));
        CHECK(sdk::is_valid_utf8(text) == valid);
      }
  CHECK(sdk::first_invalid_utf8(std::string(64, 'x')) == 64);
  CHECK(sdk::first_invalid_utf8("") == 0);
}

TEST_CASE("sdk json_plain_end finds the first byte a JSON string cannot hold as it is, wherever "
          "it lies in the blocks it reads at once") {
  // Read sixteen bytes at a time (then eight, then one): every byte value
  // at every place of two blocks, after plain runs of every length, from
  // every start, against a byte-by-byte reference.
  auto special = [](unsigned char c) { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\'; };
  size_t found = 0;
  for (int value = 0; value < 256; ++value)
    for (size_t before = 0; before < 40; ++before) {
      auto c = static_cast<char>(value);
      auto text = std::string(before, 'a') + c + std::string(before % 19, 'b');
      for (size_t start : {size_t{0}, size_t{1}, size_t{7}, size_t{16}}) {
        if (start > text.size())
          continue;
        size_t want = start;
        while (want < text.size() && !special(static_cast<unsigned char>(text[want])))
          ++want;
        CAPTURE(value);
        CAPTURE(before);
        CAPTURE(start);
        REQUIRE(sdk::json_plain_end(text, start) == want);
        found += want == before ? 1 : 0;
      }
    }
  // 162 byte values are special (32 controls, the quote, the backslash and
  // the 128 with the high bit set), each found wherever it stood at or
  // after the start: 136 (place, start) pairs each.
  CHECK(found == 162 * 136);
  CHECK(sdk::json_plain_end(std::string(100, 'x'), 0) == 100);
  CHECK(sdk::json_plain_end("", 0) == 0);
  // json_verbatim_end steps over valid UTF-8 and stops at invalid bytes.
  for (size_t before : {size_t{0}, size_t{5}, size_t{17}, size_t{33}}) {
    auto prefix = std::string(before, 'a');
    CHECK(sdk::json_verbatim_end(prefix + "\xc3\xa9\xf0\x9f\x98\x80z", 0) == before + 7);
    CHECK(sdk::json_verbatim_end(prefix + "\xc3\xa9\"", 0) == before + 2);
    CHECK(sdk::json_verbatim_end(prefix + "\xc3\xa9\xff", 0) == before + 2);
    CHECK(sdk::json_verbatim_end(prefix + "\xe2\x82", 0) == before);     // cut short
    CHECK(sdk::json_verbatim_end(prefix + "\xed\xa0\x80", 0) == before); // a surrogate
  }
}

TEST_CASE("sdk parse_json bounds the depth and repairs UTF-8") {
  CHECK(sdk::json_nesting_depth("{\"a\":[1,{\"b\":2}]}") == 3);
  CHECK(sdk::json_nesting_depth("\"[[[[\"") == 0);         // brackets in a string
  CHECK(sdk::json_nesting_depth("[\"\\\"[[\"]") == 1);     // escaped quote
  CHECK(sdk::json_nesting_depth(nested(60000), 10) == 11); // stops early
  std::string why;
  auto deep = sdk::parse_json(nested(60000), &why);
  CHECK(deep.is_discarded());
  CHECK(why == "JSON nested deeper than 256 levels");
  auto deep_objects = sdk::parse_json(nested_object(60000), &why);
  CHECK(deep_objects.is_discarded());
  auto fine = sdk::parse_json(nested(256));
  CHECK_FALSE(fine.is_discarded());
  CHECK(sdk::parse_json(nested(257)).is_discarded());
  auto limited = sdk::parse_json(nested(5), nullptr, sdk::json_limits{4, true});
  CHECK(limited.is_discarded());
  // Invalid UTF-8 inside a string is repaired, or rejected on request.
  auto repaired = sdk::parse_json("{\"q\":\"a\xFF\"}");
  REQUIRE(repaired.is_object());
  CHECK(repaired["q"] == "a" + fffd);
  CHECK(sdk::parse_json("{\"q\":\"a\xFF\"}", &why, sdk::json_limits{256, false}).is_discarded());
  CHECK(sdk::is_valid_utf8(why));
  // Syntax errors come with a reason.
  CHECK(sdk::parse_json("{not json", &why).is_discarded());
  CHECK(why.find("syntax error") != std::string::npos);
  CHECK(why.find("[json.exception") == std::string::npos);
  // Dumping text that is not UTF-8 does not throw.
  json j{{"x", std::string("bad \xFF")}};
  CHECK(sdk::dump_json(j) == "{\"x\":\"bad " + fffd + "\"}");
  CHECK(sdk::json_deeper_than(json::parse(nested(10)), 9));
  CHECK_FALSE(sdk::json_deeper_than(json::parse(nested(10)), 10));
}

TEST_CASE("tool arguments nested 60,000 deep give a clear message") {
  for (const auto& text :
       {"{\"a\":" + nested(60000) + "}", nested_object(60000), nested(60000, '{', '}'),
        // double-encoded: a JSON string holding the object
        json("{\"a\":" + nested(60000) + "}").dump()}) {
    auto parsed = core::parse_tool_arguments(text);
    auto* message = std::get_if<std::string>(&parsed);
    REQUIRE(message != nullptr);
    CHECK(message->find("deeper than 128 levels") != std::string::npos);
  }
  // A string value that holds deep JSON stays a string.
  auto holder = json{{"q", nested(60000)}}.dump();
  auto parsed = core::parse_tool_arguments(holder);
  REQUIRE(std::holds_alternative<json>(parsed));
  CHECK(std::get<json>(parsed)["q"].is_string());
  // Reasonable nesting is fine.
  auto ok = core::parse_tool_arguments("{\"a\":" + nested(100) + "}");
  CHECK(std::holds_alternative<json>(ok));
  // Invalid UTF-8 is repaired.
  auto bad = core::parse_tool_arguments("{\"q\":\"x\xFF\"}");
  REQUIRE(std::holds_alternative<json>(bad));
  CHECK(std::get<json>(bad)["q"] == "x" + fffd);
}

TEST_CASE("llm_json reads wrongly typed members without throwing and bounds "
          "tool schemas") {
  auto j = json::parse(
    R"({"role": 5, "content": {"x": 1}, "tool_calls": [1, {"id": 2, "name": "f"}],
                          "tool_call_id": null})");
  sdk::chat_message m;
  CHECK_NOTHROW(m = j.get<sdk::chat_message>());
  CHECK(m.content.empty());
  REQUIRE(m.tool_calls.size() == 1);
  CHECK(m.tool_calls[0].name == "f");
  CHECK(m.tool_calls[0].id.empty());
  sdk::error e;
  CHECK_NOTHROW(e = json::parse(R"({"class": "rate_limited", "status": "x",
                                    "retry_after_ms": 1e300})")
                      .get<sdk::error>());
  CHECK(e.code == sdk::errc::rate_limited);
  CHECK(e.http_status == 0);
  sdk::chat_result r;
  CHECK_NOTHROW(r = json::parse(R"({"usage": [1], "text": "t"})").get<sdk::chat_result>());
  CHECK(r.text == "t");
  // A tool schema nested too deep is refused with a reason.
  auto deep_schema = json::array(
    {{{"name", "f"}, {"parameters", json::parse(nested_object(100))}}});
  std::vector<sdk::tool_definition> defs;
  auto err = core::parse_tool_definitions(deep_schema, defs);
  REQUIRE(err.has_value());
  CHECK(err->find("deeper than 64 levels") != std::string::npos);
}

} // namespace sdk_text_json_hostile_test
