// sdk::strip_terminal_controls: text from outside cleaned of every escape
// sequence, control string and control character before it reaches a
// terminal (ECMA-48), bounded and linear, UTF-8 in and out.

#include "quarry/sdk/strings.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sdk_terminal_controls_test {

using namespace quarry;
using sdk::strip_terminal_controls;

namespace {

// Whether `x` may go to a terminal: valid UTF-8, no C0 control but line feed
// and tab, no DEL and no C1 control (U+0080-U+009F).
bool terminal_safe(const std::string& x) {
  if (!sdk::is_valid_utf8(x))
    return false;
  for (size_t i = 0; i < x.size(); ++i) {
    auto u = static_cast<unsigned char>(x[i]);
    if ((u < 0x20 && u != '\n' && u != '\t') || u == 0x7F)
      return false;
    if (u == 0xC2 && i + 1 < x.size()) {
      auto next = static_cast<unsigned char>(x[i + 1]);
      if (next >= 0x80 && next <= 0x9F)
        return false;
    }
  }
  return true;
}

// Cleans `x` and checks the result is safe and cleaned again unchanged.
std::string strip(const std::string& x) {
  auto out = strip_terminal_controls(x);
  CHECK(terminal_safe(out));
  CHECK(strip_terminal_controls(out) == out);
  return out;
}

const std::string esc = "\x1b";
const std::string bel = "\x07";
const std::string st = "\x1b\\";

// A C1 control as UTF-8.
std::string c1(unsigned cp) {
  std::string out;
  sdk::append_utf8(out, cp);
  return out;
}

} // namespace

TEST_CASE("terminal controls: text, emoji, CJK, line feeds and tabs stay") {
  for (std::string x :
       {"", "plain text", "line one\nline two\n", "a\tb\t\tc", "caf\xC3\xA9 na\xC3\xAFve",
        "\xE6\xB7\xB1\xE5\xBA\xA6\xE7\xA0\x94\xE7\xA9\xB6", "\xF0\x9F\x94\xA5 \xF0\x9F\x91\x8D",
        "\xEF\xBF\xBD already replaced",
        "no\xC2\xA0"
        "break space",
        "[1] (x) {y} ~ ^ _ \\"}) {
    CAPTURE(x);
    CHECK(strip(x) == x);
  }
}

TEST_CASE("terminal controls: C0 controls but line feed and tab, and DEL, go") {
  std::string all;
  for (int c = 0; c < 0x20; ++c)
    all += static_cast<char>(c);
  all += "\x7F";
  CHECK(strip("a" + all + "b") == "a\t\nb");
  CHECK(strip("over\rwrite") == "overwrite");
  CHECK(strip("crlf\r\nline") == "crlf\nline");
  CHECK(strip(std::string{"nul\0byte", 8}) == "nulbyte");
  CHECK(strip("ring" + bel + "bell") == "ringbell");
}

TEST_CASE("terminal controls: control sequences (CSI), 7-bit and 8-bit") {
  CHECK(strip("a" + esc + "[2Jb") == "ab");
  CHECK(strip(esc + "[H" + esc + "[2J" + esc + "[3Jclear") == "clear");
  CHECK(strip(esc + "[1;31mred" + esc + "[0m") == "red");
  CHECK(strip(esc + "[38;2;255;0;0mtrue colour" + esc + "[m") == "true colour");
  CHECK(strip(esc + "[?1049h" + esc + "[?25l" + "alt") == "alt");
  CHECK(strip(esc + "[2 q" + "cursor shape") == "cursor shape"); // intermediate byte
  CHECK(strip(esc + "[>c" + esc + "[6n" + "reports") == "reports");
  CHECK(strip("up" + esc + "[10A" + esc + "[K") == "up");
  // 8-bit CSI (U+009B as UTF-8).
  CHECK(strip("a" + c1(0x9B) + "2Jb") == "ab");
  CHECK(strip(c1(0x9B) + "1;31mred" + c1(0x9B) + "0m") == "red");
}

TEST_CASE("terminal controls: OSC strings end at BEL or ST, 7-bit and 8-bit") {
  // Window title (OSC 0 and 2), clipboard (OSC 52), hyperlink (OSC 8).
  CHECK(strip("a" + esc + "]0;pwned" + bel + "b") == "ab");
  CHECK(strip("a" + esc + "]2;pwned" + st + "b") == "ab");
  CHECK(strip(esc + "]52;c;cm0gLXJmIH4=" + bel + "text") == "text");
  CHECK(strip(esc + "]52;c;cm0gLXJmIH4=" + st + "text") == "text");
  CHECK(strip(esc + "]8;;https://evil.example/" + st + "link" + esc + "]8;;" + st) == "link");
  // A UTF-8 title is part of the string.
  CHECK(strip(esc + "]0;\xE6\xA0\x87\xE9\xA2\x98 \xF0\x9F\x99\x82" + bel + "x") == "x");
  // A line feed inside does not end it (ECMA-48 allows 0x08-0x0D there).
  CHECK(strip(esc + "]0;two\nlines" + bel + "x") == "x");
  // 8-bit OSC and ST (U+009D, U+009C), and the mixed forms.
  CHECK(strip("a" + c1(0x9D) + "0;pwned" + c1(0x9C) + "b") == "ab");
  CHECK(strip("a" + c1(0x9D) + "52;c;eA==" + bel + "b") == "ab");
  CHECK(strip("a" + esc + "]0;t" + c1(0x9C) + "b") == "ab");
}

TEST_CASE("terminal controls: DCS, SOS, PM and APC strings end at ST only") {
  for (auto intro : {std::string{"P"}, std::string{"X"}, std::string{"^"}, std::string{"_"}}) {
    CAPTURE(intro);
    CHECK(strip("a" + esc + intro + "payload 1;2" + st + "b") == "ab");
    // BEL does not end them; the BEL inside goes with them.
    CHECK(strip("a" + esc + intro + "pay" + bel + "load" + st + "b") == "ab");
  }
  CHECK(strip(esc + "P1$r0m" + st + "DECRQSS") == "DECRQSS");
  CHECK(strip(esc + "_Gf=100;AAAA" + st + "kitty") == "kitty");
  for (unsigned cp : {0x90u, 0x98u, 0x9Eu, 0x9Fu}) {
    CAPTURE(cp);
    CHECK(strip("a" + c1(cp) + "payload" + c1(0x9C) + "b") == "ab");
    CHECK(strip("a" + c1(cp) + "payload" + st + "b") == "ab");
  }
}

TEST_CASE("terminal controls: two-byte and other escape sequences") {
  for (std::string seq :
       {"7", "8", "c", "M", "D", "E", "=", ">", "(B", ")0", "#8", "%G", " F", "\\"}) {
    CAPTURE(seq);
    CHECK(strip("a" + esc + seq + "b") == "ab");
  }
  // ESC before something that cannot follow it goes alone.
  CHECK(strip("a" + esc + "\nb") == "a\nb");
  CHECK(strip("a" + esc + esc + "[2Jb") == "ab");
  CHECK(strip("a" + esc + "\xC3\xA9" + "b")
        == "a\xC3\xA9"
           "b");
  CHECK(strip("a" + esc + "\x9B" + "2Jb")
        == "a\xEF\xBF\xBD"
           "2Jb");
}

TEST_CASE("terminal controls: other C1 controls go, raw 8-bit bytes are not UTF-8") {
  for (unsigned cp = 0x80; cp <= 0x9F; ++cp) {
    CAPTURE(cp);
    auto out = strip("a" + c1(cp) + "b");
    // Those that introduce a sequence take the `b` as its body or final
    // byte only when it may be one; the rest go alone.
    CHECK((out == "ab" || out == "a"));
  }
  CHECK(strip("next" + c1(0x85) + "line") == "nextline");
  CHECK(strip("stray" + c1(0x9C) + "st") == "strayst");
  // Raw bytes 0x9B and 0x9D are not UTF-8: each becomes U+FFFD, so no
  // terminal in an 8-bit mode sees a CSI or an OSC either.
  CHECK(strip("a\x9B"
              "2Jb")
        == "a\xEF\xBF\xBD"
           "2Jb");
  CHECK(strip("a\x9D"
              "0;t\x07"
              "b")
        == "a\xEF\xBF\xBD"
           "0;tb");
}

TEST_CASE("terminal controls: an unterminated sequence loses only its introducer") {
  CHECK(strip("x" + esc) == "x");
  CHECK(strip("x" + esc + "[") == "x");
  CHECK(strip("x" + esc + "[12;") == "x12;");
  CHECK(strip("x" + esc + "(") == "x(");
  CHECK(strip("x" + esc + "]0;no end") == "x0;no end");
  CHECK(strip("x" + esc + "]0;no end" + esc) == "x");
  CHECK(strip("x" + esc + "Pdata") == "xdata");
  CHECK(strip("x" + c1(0x9B)) == "x");
  CHECK(strip("x" + c1(0x9D) + "52;c;eA==") == "x52;c;eA==");
  CHECK(strip("x\xC2") == "x\xEF\xBF\xBD");
  // A CSI broken by a byte that cannot be in it.
  CHECK(strip(esc + "[31\nred") == "31\nred");
  CHECK(strip(esc + "[31" + c1(0x9B) + "0m" + "red") == "31red");
  // A string cut by ESC, CAN, SUB or a C1 control goes whole, as a terminal
  // ends it there; what cut it is handled on its own.
  CHECK(strip("a" + esc + "]0;t" + esc + "[2Jb") == "ab");
  CHECK(strip("a" + esc
              + "]0;t\x18"
                "b")
        == "ab");
  CHECK(strip("a" + esc
              + "]0;t\x1A"
                "b")
        == "ab");
  CHECK(strip("a" + esc + "]0;t" + c1(0x85) + "b") == "ab");
  CHECK(strip("a" + esc + "Pq" + c1(0x9B) + "2Jb") == "ab");
}

TEST_CASE("terminal controls: a sequence is bounded") {
  auto limit = sdk::max_terminal_sequence;
  // An OSC of exactly the limit goes whole; one byte more is text.
  auto fits = std::string(limit - 3, 'a');
  CHECK(strip("<" + esc + "]" + fits + bel + ">") == "<>");
  auto longer = fits + "a";
  CHECK(strip("<" + esc + "]" + longer + bel + ">") == "<" + longer + ">");
  // A stray introducer before a long text and a late ESC swallows nothing.
  std::string report(100'000, 'r');
  CHECK(strip(esc + "]" + report + esc + "\\") == report);
  CHECK(strip(c1(0x9D) + report + bel) == report);
  CHECK(strip(esc + "[" + std::string(limit, '1') + "m") == std::string(limit, '1') + "m");
  CHECK(strip(esc + std::string(limit, ' ') + "0") == std::string(limit, ' ') + "0");
}

TEST_CASE("terminal controls: huge hostile inputs take linear time") {
  constexpr size_t size = 4 << 20;
  auto repeat = [](const std::string& unit) {
    std::string out;
    out.reserve(size + unit.size());
    while (out.size() < size)
      out += unit;
    return out;
  };
  auto near_limit = std::string(sdk::max_terminal_sequence - 10, 'a');
  for (auto unit : {esc, esc + "]", esc + "[", esc + "P", c1(0x9D), c1(0x9B), esc + "[1;",
                    esc + " ", esc + "]" + near_limit, esc + "]" + near_limit + esc,
                    c1(0x9D) + near_limit + bel, esc + "]0;t" + bel, std::string{"\xC2"},
                    std::string{"\xFF"}, std::string{"\x7F"}, std::string{"\xE6\xB7\xB1"}}) {
    auto input = repeat(unit);
    auto started = std::chrono::steady_clock::now();
    auto out = strip_terminal_controls(input);
    auto took = std::chrono::steady_clock::now() - started;
    CAPTURE(unit.substr(0, 8));
    CHECK(terminal_safe(out));
    // A quadratic scan would take hours here; linear takes milliseconds
    // (seconds under the sanitizers).
    CHECK(took < std::chrono::seconds{20});
  }
}

TEST_CASE("terminal controls: invalid UTF-8 becomes U+FFFD, one per byte") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(strip("a\xFF"
              "b")
        == "a" + r + "b");
  CHECK(strip("a\xE2\x82"
              "b")
        == "a" + r + r + "b"); // truncated
  CHECK(strip("a\xC0\x9B"
              "b")
        == "a" + r + r + "b"); // overlong ESC-ish
  CHECK(strip("a\xC1\x9B"
              "b")
        == "a" + r + r + "b"); // overlong CSI
  CHECK(strip("a\xED\xA0\x80"
              "b")
        == "a" + r + r + r + "b"); // surrogate
  CHECK(strip("a\xF4\x90\x80\x80"
              "b")
        == "a" + r + r + r + r + "b"); // above U+10FFFF
  CHECK(strip("\x80\xBF") == r + r);
}

TEST_CASE("terminal controls: any bytes give terminal-safe text") {
  // Deterministic pseudo-random bytes, drawn mostly from the bytes that
  // build sequences.
  const std::string alphabet = std::string{"\x1b\x07\x18\x1a\r\n\t\xc2\x9b\x9c\x9d\x90\xe6\xff"}
                               + "[]P^_X\\;0123456789 ()#mJHa";
  uint32_t seed = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string x;
    auto n = (seed = seed * 1103515245 + 12345) % 64;
    for (uint32_t k = 0; k < n; ++k) {
      seed = seed * 1103515245 + 12345;
      x += alphabet[(seed >> 16) % alphabet.size()];
    }
    CAPTURE(x);
    strip(x);
  }
}

namespace {

/// `x` cut at `cuts` (ascending offsets), fed piece by piece.
std::string filtered(const std::string& x, const std::vector<size_t>& cuts) {
  quarry::sdk::terminal_text_filter f;
  std::string out;
  size_t from = 0;
  for (auto at : cuts) {
    out += f.feed(std::string_view{x}.substr(from, at - from));
    from = at;
  }
  out += f.feed(std::string_view{x}.substr(from));
  out += f.finish();
  CHECK(f.pending() == 0);
  return out;
}

} // namespace

TEST_CASE("terminal controls: a stream cut anywhere is cleaned as the whole text") {
  // Every sequence kind, split at every byte.
  const std::vector<std::string> samples{
    "a\x1b]0;pwned\x07"
    "b",
    "a\x1b]52;c;ZXZpbA==\x1b\\b",
    "x\x1b[2J\x1b[1;31mred\x1b[0m",
    "\xc2\x9b"
    "2J after \xc2\x9d"
    "0;t\xc2\x9c end",
    "\x1bP dcs \x1b\\ ok \x1b_ apc \x1b\\",
    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \x1b(B",
    "\x1b]0;cut by esc\x1b[31mrest",
    "lone\x1b",
    "open osc \x1b]0;never ends",
  };
  for (const auto& x : samples) {
    auto whole = strip_terminal_controls(x);
    for (size_t at = 0; at <= x.size(); ++at) {
      CAPTURE(x);
      CAPTURE(at);
      CHECK(filtered(x, {at}) == whole);
    }
    std::vector<size_t> every;
    for (size_t at = 1; at < x.size(); ++at)
      every.push_back(at);
    CHECK(filtered(x, every) == whole);
  }
}

TEST_CASE("terminal controls: a stream holds back at most one bounded sequence") {
  quarry::sdk::terminal_text_filter f;
  std::string out = f.feed("text \x1b]0;");
  CHECK(out == "text ");
  CHECK(f.pending() == 4);
  // An OSC longer than the bound is text: its introducer goes, the rest
  // is printed as it comes.
  out = f.feed(std::string(quarry::sdk::max_terminal_sequence, 'x'));
  CHECK(f.pending() == 0);
  CHECK(out == "0;" + std::string(quarry::sdk::max_terminal_sequence, 'x'));
  CHECK(f.finish().empty());
}

TEST_CASE("terminal controls: random pieces of random bytes agree with the whole") {
  const std::string alphabet = std::string{"\x1b\x07\x18\x1a\r\n\t\xc2\x9b\x9c\x9d\x90\xe6\xff"}
                               + "[]P^_X\\;0123456789 ()#mJHa";
  uint32_t seed = 777;
  auto next = [&] { return (seed = seed * 1103515245 + 12345) >> 16; };
  for (int round = 0; round < 2000; ++round) {
    std::string x;
    auto n = next() % 64;
    for (uint32_t k = 0; k < n; ++k)
      x += alphabet[next() % alphabet.size()];
    std::vector<size_t> cuts;
    for (size_t at = 1; at < x.size(); ++at)
      if (next() % 3 == 0)
        cuts.push_back(at);
    CAPTURE(x);
    CHECK(filtered(x, cuts) == strip_terminal_controls(x));
  }
}

} // namespace sdk_terminal_controls_test
