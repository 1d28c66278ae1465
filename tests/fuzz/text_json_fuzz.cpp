// libFuzzer target: arbitrary bytes through the SDK's UTF-8 repair and
// bounded JSON parser, core::is_json (which must agree with nlohmann's
// accept()), core::parse_tool_arguments and the from_json forms of the LLM
// types, and arguments checked against a schema. Checks: repaired text is
// valid UTF-8, valid text is left alone, parsed values respect the depth
// limit and serialise, nothing throws.

#include "quarry/core/json_check.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/core/tool_args.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

namespace sdk = quarry::sdk;
namespace core = quarry::core;

namespace {

void check(bool condition) {
  if (!condition)
    std::abort();
}

template <class T>
void read_as(const nlohmann::json& j) {
  T x;
  from_json(j, x);
  nlohmann::json back;
  to_json(back, x);
  check(!sdk::dump_json(back).empty());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  // UTF-8 repair.
  auto repaired = sdk::repair_utf8(bytes);
  check(sdk::is_valid_utf8(repaired));
  check(sdk::repair_utf8(repaired) == repaired);
  if (sdk::is_valid_utf8(bytes))
    check(repaired == bytes);
  check(repaired.size() >= bytes.size());
  // The string writer, after some text already written, writes the bytes as
  // nlohmann writes them (its replacement of invalid UTF-8 included).
  std::string written(size % 13, 'x');
  sdk::append_json_string(written, bytes);
  check(written
        == std::string(size % 13, 'x')
             + nlohmann::json(std::string{bytes})
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  for (size_t n : {size_t{0}, size_t{1}, size / 2, size}) {
    auto prefix = sdk::utf8_prefix(repaired, n);
    check(prefix.size() <= n && sdk::is_valid_utf8(prefix));
  }
  // Bounded parsing.
  std::string why;
  auto j = sdk::parse_json(bytes, &why, sdk::json_limits{32, true});
  if (j.is_discarded()) {
    check(!why.empty() && sdk::is_valid_utf8(why));
  } else {
    check(!sdk::json_deeper_than(j, 32));
    check(sdk::is_valid_utf8(sdk::dump_json(j)));
    // The fast writers, compact and indented, write what nlohmann writes.
    for (int indent : {-1, 0, 2})
      check(sdk::dump_json(j, indent)
            == j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace));
    if (j.is_object()) {
      read_as<sdk::chat_request>(j);
      read_as<sdk::chat_result>(j);
      read_as<sdk::chat_message>(j);
      read_as<sdk::error>(j);
      read_as<sdk::document>(j);
    }
    std::vector<sdk::tool_definition> defs;
    core::parse_tool_definitions(j, defs);
  }
  if (sdk::json_nesting_depth(bytes) > 32)
    check(j.is_discarded());
  // Tool arguments: an object or a message, never a throw.
  auto args = core::parse_tool_arguments(bytes);
  if (auto* obj = std::get_if<nlohmann::json>(&args)) {
    check(obj->is_object());
    // The same bytes as a schema: checking never throws, a message is text.
    if (!j.is_discarded())
      if (auto why = core::check_tool_arguments(j, *obj))
        check(!why->empty());
    check(!sdk::json_deeper_than(*obj, core::max_argument_depth + 1));
    check(sdk::is_valid_utf8(sdk::dump_json(*obj)));
  } else {
    check(!std::get<std::string>(args).empty());
  }
  // The byte-once validator agrees with the parser within its depth, and
  // accepts nothing the parser refuses (brackets after a NUL byte, which
  // ends the parser's input, count for json_nesting_depth but not here).
  auto accepted = nlohmann::json::accept(bytes.begin(), bytes.end());
  if (sdk::json_nesting_depth(bytes) <= 32)
    check(core::is_json(bytes, 32) == accepted);
  else if (core::is_json(bytes, 32))
    check(accepted);
  return 0;
}
