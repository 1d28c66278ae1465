// The SDK's Server-Sent Events parser (sdk/sse.hpp): the events of the
// WHATWG rules it follows, in pieces of every size, against a reference
// that reads the bytes one at a time.

#include "quarry/sdk/sse.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sse_parser_test {

using quarry::sdk::sse_event;
using quarry::sdk::sse_parser;

namespace {

/// What a parse produced: the events, and how each call ended.
struct sse_trace {
  std::vector<sse_event> events;
  bool stopped = false;
  bool overflowed = false;

  bool operator==(const sse_trace& other) const {
    if (events.size() != other.events.size() || stopped != other.stopped
        || overflowed != other.overflowed)
      return false;
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].type != other.events[i].type || events[i].data != other.events[i].data
          || events[i].id != other.events[i].id)
        return false;
    return true;
  }
};

/// The reference: the same rules, one byte at a time, whole stream at once
/// (line ends \n, \r\n and \r; `data`, `event`, `id`; comments; one space
/// after the colon dropped; a blank line dispatches; the end of the stream
/// dispatches pending data).
sse_trace sse_reference(const std::string& stream, size_t stop_after) {
  sse_trace out;
  sse_event pending;
  bool has_data = false;
  auto dispatch = [&] {
    out.events.push_back(pending);
    pending = sse_event{};
    has_data = false;
    return out.events.size() < stop_after;
  };
  auto line_done = [&](const std::string& line) {
    if (line.empty()) {
      if (has_data || !pending.type.empty())
        return dispatch();
      return true;
    }
    if (line[0] == ':')
      return true;
    auto colon = line.find(':');
    auto field = line.substr(0, colon);
    std::string value;
    if (colon != std::string::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ')
        value.erase(0, 1);
    }
    if (field == "data") {
      if (has_data)
        pending.data += '\n';
      pending.data += value;
      has_data = true;
    } else if (field == "event") {
      pending.type = value;
    } else if (field == "id") {
      pending.id = value;
    }
    return true;
  };
  std::string line;
  for (size_t i = 0; i < stream.size(); ++i) {
    auto c = stream[i];
    if (c != '\r' && c != '\n') {
      line += c;
      continue;
    }
    if (c == '\r' && i + 1 < stream.size() && stream[i + 1] == '\n')
      ++i;
    auto ok = line_done(line);
    line.clear();
    if (!ok) {
      out.stopped = true;
      return out;
    }
  }
  if (!line.empty() && !line_done(line)) {
    out.stopped = true;
    return out;
  }
  if (has_data && !dispatch())
    out.stopped = true;
  return out;
}

/// Feeds `stream` to a parser cut at `cuts` (ascending offsets), then ends it.
sse_trace sse_parse(const std::string& stream, const std::vector<size_t>& cuts, size_t stop_after,
                    size_t max_event_size = sse_parser::default_max_event_size) {
  sse_trace out;
  sse_parser parser{max_event_size};
  auto on_event = [&](const sse_event& ev) {
    out.events.push_back(ev);
    return out.events.size() < stop_after;
  };
  size_t from = 0;
  auto pieces = cuts;
  pieces.push_back(stream.size());
  for (auto to : pieces) {
    if (!parser.feed(std::string_view{stream}.substr(from, to - from), on_event)) {
      out.overflowed = parser.overflowed();
      out.stopped = !out.overflowed;
      return out;
    }
    from = to;
  }
  if (!parser.finish(on_event))
    out.stopped = true;
  return out;
}

/// A stream of random lines: fields, comments, blank lines, every line end,
/// values with spaces, colons and bytes above 0x7f.
std::string sse_random_stream(std::mt19937& rng) {
  static const std::vector<std::string> starts = {
    "data:",  "data: ",    "data", "event:",  "event: ",  "id: ", "id:", ":",
    ": ping", "retry: 10", "dat",  "data:  ", "other: x", "",     ""};
  static const std::vector<std::string> ends = {"\n", "\r\n", "\r", "\n\n", "\r\n\r\n", "\r\r"};
  static const std::string alphabet = "ab :{}\"\xc3\xa9x";
  std::string out;
  auto lines = std::uniform_int_distribution<int>{0, 12}(rng);
  for (int l = 0; l < lines; ++l) {
    out += starts[rng() % starts.size()];
    auto length = std::uniform_int_distribution<int>{0, 20}(rng);
    for (int i = 0; i < length; ++i)
      out += alphabet[rng() % alphabet.size()];
    out += ends[rng() % ends.size()];
  }
  if (rng() % 3 == 0)
    out += "data: no end";
  return out;
}

} // namespace

TEST_CASE("sse parser: line ends, fields and comments as the event-stream rules say") {
  auto whole = [](const std::string& s) { return sse_parse(s, {}, SIZE_MAX).events; };
  SUBCASE("each line end, and \\r\\n as one") {
    for (std::string eol : {"\n", "\r\n", "\r"}) {
      CAPTURE(eol.size());
      auto events = whole("event: a" + eol + "data: one" + eol + "data:two" + eol + "id: 7" + eol
                          + eol + "data: three" + eol + eol);
      REQUIRE(events.size() == 2);
      CHECK(events[0].type == "a");
      CHECK(events[0].data == "one\ntwo");
      CHECK(events[0].id == "7");
      CHECK(events[1].type.empty());
      CHECK(events[1].data == "three");
    }
  }
  SUBCASE("comments, unknown fields and blank lines alone dispatch nothing") {
    CHECK(whole(": ping\n\nretry: 5\n\nfoo: bar\n\n\r\n\r").empty());
  }
  SUBCASE("the last event is dispatched at the end of the stream") {
    auto events = whole("data: a\n\ndata: b");
    REQUIRE(events.size() == 2);
    CHECK(events[1].data == "b");
  }
  SUBCASE("\\r\\n split between two pieces is one line end") {
    auto trace = sse_parse("data: a\r\n\r\ndata: b\r\n\r\n", {8, 10}, SIZE_MAX);
    REQUIRE(trace.events.size() == 2);
    CHECK(trace.events[0].data == "a");
    CHECK(trace.events[1].data == "b");
  }
  SUBCASE("a stream with \\r alone as its line end") {
    std::string stream;
    for (int i = 0; i < 2000; ++i)
      stream += "data: " + std::to_string(i) + "\r\r";
    auto events = whole(stream);
    REQUIRE(events.size() == 2000);
    CHECK(events[1999].data == "1999");
  }
}

TEST_CASE("sse parser: in pieces of any size, the events of the whole stream") {
  std::mt19937 rng{20261202};
  for (int n = 0; n < 3000; ++n) {
    auto stream = sse_random_stream(rng);
    // Stop after the k-th event on some streams.
    size_t stop_after = rng() % 4 == 0 ? 1 + rng() % 3 : SIZE_MAX;
    auto expected = sse_reference(stream, stop_after);
    std::vector<std::vector<size_t>> cuttings;
    cuttings.push_back({});
    std::vector<size_t> every;
    for (size_t i = 1; i < stream.size(); ++i)
      every.push_back(i);
    cuttings.push_back(every);
    std::vector<size_t> random;
    for (size_t i = 1; i < stream.size(); ++i)
      if (rng() % 5 == 0)
        random.push_back(i);
    cuttings.push_back(random);
    for (const auto& cuts : cuttings) {
      auto got = sse_parse(stream, cuts, stop_after);
      if (!(got == expected)) {
        CAPTURE(stream);
        CAPTURE(cuts.size());
        CHECK(got.events.size() == expected.events.size());
        FAIL("the parser's events differ from the reference's");
      }
    }
  }
}

TEST_CASE("sse parser: an event larger than the limit stops the parse") {
  SUBCASE("a line that never ends") {
    auto trace = sse_parse("data: " + std::string(300, 'x'), {100, 200}, SIZE_MAX, 256);
    CHECK(trace.overflowed);
    CHECK(trace.events.empty());
  }
  SUBCASE("many data lines of one event") {
    std::string stream;
    for (int i = 0; i < 40; ++i)
      stream += "data: 0123456789\n";
    auto trace = sse_parse(stream, {}, SIZE_MAX, 256);
    CHECK(trace.overflowed);
  }
  SUBCASE("events under the limit pass") {
    std::string stream;
    for (int i = 0; i < 40; ++i)
      stream += "data: 0123456789\n\n";
    auto trace = sse_parse(stream, {17, 300}, SIZE_MAX, 256);
    CHECK_FALSE(trace.overflowed);
    CHECK(trace.events.size() == 40);
  }
}

} // namespace sse_parser_test
