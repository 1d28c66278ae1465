// Tests of the citation machinery: Onyx's scenarios 19.1-19.9, the worked
// collapse examples, the fixed quirks, split invariance and linear time.

#include "quarry/core/citations.hpp"

#include "quarry/sdk/types.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

namespace citation_test {

using namespace quarry;
using namespace quarry::core;

namespace {

const std::string link1 = "[[1]](https://example.com/doc1)";
const std::string link2 = "[[2]](https://example.com/doc2)";
const std::string link3 = "[[3]]()";
const std::string link4 = "[[4]](https://example.com/doc4)";
const std::string link5 = "[[5]](https://example.com/doc5)";

// Numbers 1..5 -> doc_1..doc_5; doc_3 has no link.
citation_mapping test_mapping() {
  citation_mapping result;
  for (int i = 1; i <= 5; ++i) {
    auto n = std::to_string(i);
    result.insert(i, document_ref{"doc_" + n, i == 3 ? "" : "https://example.com/doc" + n,
                                  "Document " + n});
  }
  return result;
}

document_ref doc(const std::string& id) {
  return document_ref{id, "https://example.com/" + id, id};
}

// Everything a stream produced, with event offsets into the whole text.
struct run_result {
  std::string text;
  std::vector<citation_event> events;
  std::vector<int> unknown;
};

void append(run_result& r, citation_chunk chunk) {
  for (auto& event : chunk.citations)
    r.events.push_back({r.text.size() + event.offset, event.info});
  r.text += chunk.text;
  r.unknown.insert(r.unknown.end(), chunk.unknown.begin(), chunk.unknown.end());
}

run_result feed(citation_processor& p, const std::vector<std::string>& tokens, bool finish = true) {
  run_result r;
  for (const auto& token : tokens)
    append(r, p.process(token));
  if (finish)
    append(r, p.finish());
  return r;
}

run_result run(citation_mode mode, const std::vector<std::string>& tokens) {
  citation_processor p{mode};
  p.update_mapping(test_mapping());
  return feed(p, tokens);
}

std::string run_text(citation_mode mode, const std::string& input) {
  return run(mode, {input}).text;
}

std::vector<int> ints(std::initializer_list<int> xs) {
  return std::vector<int>(xs);
}

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto i = haystack.find(needle); i != std::string::npos;
       i = haystack.find(needle, i + needle.size()))
    ++n;
  return n;
}

constexpr auto hyperlink = citation_mode::hyperlink;
constexpr auto keep = citation_mode::keep_markers;
constexpr auto remove_mode = citation_mode::remove;

} // namespace

// -- mappings -------------------------------------------------------------------

TEST_CASE("citation mapping keeps insertion order and never overwrites") {
  citation_mapping m{{3, doc("c")}, {1, doc("a")}};
  CHECK(m.numbers() == ints({3, 1}));
  CHECK_FALSE(m.insert(3, doc("x")));
  CHECK(m.find(3)->document_id == "c");
  CHECK(m.next_number() == 4);
  m.merge(citation_mapping{{1, doc("z")}, {10, doc("d")}});
  CHECK(m.find(1)->document_id == "a");
  CHECK(m.numbers() == ints({3, 1, 10}));
  CHECK(m.next_number() == 11);
  m.merge(citation_mapping{{1, doc("z")}}, true);
  CHECK(m.find(1)->document_id == "z");
  CHECK(m.numbers() == ints({3, 1, 10}));
  CHECK(citation_mapping{}.next_number() == 1);
  CHECK_FALSE(citation_mapping{}.max_number().has_value());
  CHECK(m.find(2) == nullptr);
}

TEST_CASE("citation processor mapping updates never overwrite existing keys") {
  citation_processor p;
  CHECK(p.next_citation_number() == 1);
  p.update_mapping(citation_mapping{{1, doc("web")}});
  p.update_mapping(citation_mapping{{1, doc("open_url")}, {2, doc("b")}});
  CHECK(p.mapping().find(1)->document_id == "web");
  CHECK(p.next_citation_number() == 3);
  p.update_mapping(citation_mapping{{1, doc("forced")}}, true);
  CHECK(p.mapping().find(1)->document_id == "forced");
}

TEST_CASE("citation document_ref converts an SDK document") {
  sdk::document d;
  d.id = "WEB_SEARCH_DOC_https://a.example/x";
  d.url = "https://a.example/x";
  d.title = "A page";
  d.snippet = "ignored";
  auto ref = make_document_ref(d);
  CHECK(ref.document_id == d.id);
  CHECK(ref.link == d.url);
  CHECK(ref.title == "A page");
  CHECK(std::string{to_string(citation_mode::keep_markers)} == "keep_markers");
}

// -- scenario 19.1 --------------------------------------------------------------

TEST_CASE("citation scenario 1: hyperlink, split tokens") {
  auto r = run(hyperlink, {"Text[", "1", "] here."});
  CHECK(r.text == "Text " + link1 + " here.");
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].info == citation_info{1, "doc_1"});
  // The event comes before the hyperlink (and its added space).
  CHECK(r.events[0].offset == 4);
}

// -- scenario 19.2 --------------------------------------------------------------

TEST_CASE("citation scenario 2: comma list and a link-less document") {
  citation_processor p;
  p.update_mapping(test_mapping());
  auto r = feed(p, {"Text [", "1", ",", " ", "2", ",", "3", "] end."});
  CHECK(r.text == "Text " + link1 + " " + link2 + " " + link3 + " end.");
  REQUIRE(r.events.size() == 3);
  CHECK(r.events[0].info == citation_info{1, "doc_1"});
  CHECK(r.events[1].info == citation_info{2, "doc_2"});
  CHECK(r.events[2].info == citation_info{3, "doc_3"});
  for (const auto& event : r.events)
    CHECK(event.offset == 5);
  CHECK(p.seen_citations().numbers() == ints({1, 2, 3}));
}

// -- scenario 19.3 --------------------------------------------------------------

TEST_CASE("citation scenario 3: double, unicode and full-width brackets") {
  CHECK(run_text(hyperlink, "See [[2]] x") == "See " + link2 + " x");
  CHECK(run_text(hyperlink, "A 【3】 b") == "A " + link3 + " b");
  CHECK(run_text(hyperlink, "A ［4］ b") == "A " + link4 + " b");
  CHECK(run_text(hyperlink, "A 【【5】】 b") == "A " + link5 + " b");
  CHECK(run_text(hyperlink, "A ［［1］］ b") == "A " + link1 + " b");
  // Mixed bracket kinds match too.
  CHECK(run_text(hyperlink, "A [【1]】 b") == "A " + link1 + " b");
  CHECK(run_text(hyperlink, "A 【1] b") == "A " + link1 + " b");
  // "[[1, 2]]": only the inner list matches; the outer brackets stay.
  CHECK(run_text(hyperlink, "see [[1, 2]] x") == "see [ " + link1 + " " + link2 + "] x");
  for (auto input : {"See [[2]] x", "A 【3】 b", "A ［4］ b", "A 【【5】】 b", "A [【1]】 b",
                     "see [[1, 2]] x"}) {
    citation_processor p{keep};
    p.update_mapping(test_mapping());
    auto r = feed(p, {input});
    CHECK(r.text == input);
    CHECK(r.events.empty());
    CHECK_FALSE(p.seen_citations().empty());
  }
}

TEST_CASE("citation grammar: what is not a marker passes through") {
  for (auto input : {"x [1 ,2] y", "x [ 1] y", "x [1,  2] y", "x [-1] y", "x [1.5] y", "x [abc] y",
                     "x [] y", "x [[]] y", "x [1,] y", "x [,1] y", "x 【 1】 y", "x [1 y"}) {
    for (auto mode : {hyperlink, keep, remove_mode}) {
      citation_processor p{mode};
      p.update_mapping(test_mapping());
      auto r = feed(p, {input});
      CHECK(r.text == input);
      CHECK(r.events.empty());
      CHECK(p.seen_citations().empty());
    }
  }
}

// -- scenario 19.4 --------------------------------------------------------------

TEST_CASE("citation scenario 4: unknown number") {
  SUBCASE("hyperlink") {
    citation_processor p{hyperlink};
    p.update_mapping(test_mapping());
    auto r = feed(p, {"Text [99] here."});
    // Quirk 10 fixed: Onyx leaves "Text  here." (double space).
    CHECK(r.text == "Text here.");
    CHECK(r.events.empty());
    CHECK(p.seen_citations().empty());
    CHECK(p.unknown_citations() == ints({99}));
    CHECK(r.unknown == ints({99}));
  }
  SUBCASE("keep markers") {
    citation_processor p{keep};
    p.update_mapping(test_mapping());
    auto r = feed(p, {"Text [99] here."});
    CHECK(r.text == "Text [99] here.");
    CHECK(p.seen_citations().empty());
    CHECK(p.unknown_citations() == ints({99}));
  }
  SUBCASE("remove") {
    citation_processor p{remove_mode};
    p.update_mapping(test_mapping());
    auto r = feed(p, {"Text [99] here."});
    CHECK(r.text == "Text here.");
    CHECK(p.seen_citations().empty());
  }
}

TEST_CASE("citation quirk 10 fixed: unknown numbers in hyperlink mode") {
  CHECK(run_text(hyperlink, "x [99] y") == "x y");
  CHECK(run_text(hyperlink, "x [99]. y") == "x. y");
  CHECK(run_text(hyperlink, "x [98][99] y") == "x y");
  CHECK(run_text(hyperlink, "x [99] [1] y") == "x " + link1 + " y");
  CHECK(run_text(hyperlink, "x [1] [99] y") == "x " + link1 + " y");
  CHECK(run_text(hyperlink, "x [1, 99] y") == "x " + link1 + " y");
  CHECK(run_text(hyperlink, "x[99]y") == "xy");
  // Split so that the marker ends a token: the decision waits for the next
  // character.
  CHECK(run(hyperlink, {"x [9", "9]", " y"}).text == "x y");
  // Reported once each, in order of first appearance, in every mode.
  citation_processor p{keep};
  p.update_mapping(test_mapping());
  auto r = feed(p, {"A [99] and [1, 98] and [99] and [12345678901234567890]."});
  CHECK(r.text == "A [99] and [1, 98] and [99] and [12345678901234567890].");
  CHECK(r.unknown == ints({99, 98}));
  CHECK(p.unknown_citations() == ints({99, 98}));
  CHECK(p.seen_citations().numbers() == ints({1}));
}

// -- scenario 19.5 --------------------------------------------------------------

TEST_CASE("citation scenario 5: one citation_info per document") {
  citation_processor p;
  p.update_mapping(test_mapping());
  auto first = feed(p, {"[", "3", "][", "1", "][", "2", "]"}, false);
  // Consecutive citations stay together, as in Onyx.
  CHECK(first.text == link3 + link1 + link2);
  REQUIRE(first.events.size() == 3);
  CHECK(first.events[0].info.citation_number == 3);
  CHECK(first.events[1].info.citation_number == 1);
  CHECK(first.events[2].info.citation_number == 2);
  CHECK(first.events[0].offset == 0);
  CHECK(first.events[1].offset == link3.size());
  auto second = feed(p, {" again [", "1", "] and [1]."});
  CHECK(second.text == " again " + link1 + " and " + link1 + ".");
  CHECK(second.events.empty());
  CHECK(p.cited_document_ids() == std::vector<std::string>{"doc_3", "doc_1", "doc_2"});
  CHECK(p.cited_documents().at(1).link == "https://example.com/doc1");
  // The same document under another number: still a hyperlink, no event.
  auto doc1 = *test_mapping().find(1);
  p.update_mapping(citation_mapping{{6, doc1}});
  auto third = feed(p, {"Then [6]."});
  CHECK(third.text == "Then [[6]](https://example.com/doc1).");
  CHECK(third.events.empty());
  CHECK(p.seen_citations().numbers() == ints({3, 1, 2, 6}));
}

// -- scenario 19.6 --------------------------------------------------------------

TEST_CASE("citation scenario 6: code blocks and fences") {
  SUBCASE("markers inside a code block are left alone") {
    citation_processor p;
    p.update_mapping(test_mapping());
    auto r = feed(p,
                  {"Here's code:\n```\n", "def example():\n    print('[1]')\n", "```\n", "End."});
    CHECK(r.events.empty());
    CHECK(p.seen_citations().empty());
    CHECK(r.text.find("```plaintext") != std::string::npos);
    CHECK(r.text
          == "Here's code:\n```plaintext\ndef example():\n    print('[1]')\n"
             "```\nEnd.");
  }
  SUBCASE("only language-less opening fences are labelled") {
    auto r = run(hyperlink, {"A:\n```\nx\n```\nB:\n```bash", "\necho hi\n```\nDone.\n"});
    CHECK(count(r.text, "```plaintext") == 1);
    CHECK(count(r.text, "```bash") == 1);
    CHECK(r.text.find("```plaintextbash") == std::string::npos);
    CHECK(r.text == "A:\n```plaintext\nx\n```\nB:\n```bash\necho hi\n```\nDone.\n");
  }
  SUBCASE("fences split across tokens") {
    auto r = run(keep, {"A:\n`", "`", "`", "\ny [1]\n``", "`\n"});
    CHECK(r.text == "A:\n```plaintext\ny [1]\n```\n");
  }
}

TEST_CASE("citation quirk 11 fixed: fence state by position") {
  // One chunk with a whole fenced block and a later citation: Onyx sees an
  // even ``` count and rewrites the marker inside the block; here it stays.
  citation_processor p;
  p.update_mapping(test_mapping());
  auto r = feed(p, {"```\nprint(a[1])\n```\nSee [2]."});
  CHECK(r.text == "```plaintext\nprint(a[1])\n```\nSee " + link2 + ".");
  CHECK(p.seen_citations().numbers() == ints({2}));
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].info.citation_number == 2);
  // Four backticks are one fence plus one backtick; six are two fences.
  CHECK(run_text(hyperlink, "````\n[1]\n") == "````\n[1]\n");
  CHECK(run_text(hyperlink, "``````\n[1]") == "``````\n" + link1);
  // Inline double backticks do not open a block.
  CHECK(run_text(hyperlink, "use `` [1]") == "use `` " + link1);
}

// -- scenario 19.7 --------------------------------------------------------------

TEST_CASE("citation scenario 7: remove-mode spacing") {
  CHECK(run(remove_mode, {"Text [", "1", "]."}).text == "Text.");
  CHECK(run(remove_mode, {"Text [", "1", "] more."}).text == "Text more.");
  auto q = run_text(remove_mode, "Is this true [1]?");
  CHECK(q.find("true ?") == std::string::npos);
  CHECK(q == "Is this true?");
  auto s = run_text(remove_mode, "(see this [1])");
  CHECK(s.find("this )") == std::string::npos);
  CHECK(s == "(see this)");
  CHECK(run_text(remove_mode, "A [1] [2], B") == "A, B");
  // Deviation 4: spacing looks at the output, so adjacent markers do not
  // leave a double space (Onyx: "A  B").
  CHECK(run_text(remove_mode, "A [1][2] B") == "A B");
  // Nothing follows: the space stays, as in Onyx.
  CHECK(run_text(remove_mode, "Text [1]") == "Text ");
  CHECK(run_text(remove_mode, "Text [1]x") == "Text x");
  citation_processor p{remove_mode};
  p.update_mapping(test_mapping());
  feed(p, {"a [2] b [99] c [1]"});
  CHECK(p.seen_citations().numbers() == ints({2, 1}));
  CHECK(p.cited_documents().empty());
}

// -- scenario 19.8 --------------------------------------------------------------

TEST_CASE("citation scenario 8: no catastrophic backtracking") {
  auto input = "[" + std::string(60, '9') + "!";
  for (auto mode : {hyperlink, keep, remove_mode})
    CHECK(run_text(mode, input) == input);
  CHECK_FALSE(ends_with_partial_citation(input));
  CHECK(ends_with_partial_citation("text [12, 34, 5"));
  CHECK(ends_with_partial_citation("text 【1"));
  CHECK_FALSE(ends_with_partial_citation("[1, 2]"));
  CHECK_FALSE(ends_with_partial_citation("ends with a number 5"));
  CHECK_FALSE(ends_with_partial_citation("[1]"));
  for (auto x :
       {"text [", "text [[", "text [1", "text [1,", "text [1, ", "text ［", "［［12", "【", "[[1,"})
    CHECK_MESSAGE(ends_with_partial_citation(x), x);
  for (auto x :
       {"", "text", "text [1,  ", "text [1 ,", "text [ 1", "text ]", "text [a", "text [1, 2 "})
    CHECK_MESSAGE(!ends_with_partial_citation(x), x);
  // Python's `$` matches before a final newline.
  CHECK(ends_with_partial_citation("text [1\n"));
  CHECK_FALSE(ends_with_partial_citation("text [1\n\n"));
  auto long_digits = "[" + std::string(200000, '7');
  CHECK(ends_with_partial_citation(long_digits));
  CHECK_FALSE(ends_with_partial_citation(long_digits + "!"));
}

// -- scenario 19.9 --------------------------------------------------------------

TEST_CASE("citation scenario 9: collapse_citations") {
  SUBCASE("a: fresh numbers") {
    auto r = collapse_citations("See [50] and [60].", {},
                                {{50, doc("doc_50")}, {60, doc("doc_60")}});
    CHECK(r.text == "See [1] and [2].");
    CHECK(r.mapping.numbers() == ints({1, 2}));
    CHECK(r.mapping.find(2)->document_id == "doc_60");
  }
  SUBCASE("b: existing documents keep their numbers") {
    auto r = collapse_citations("Refs: [30], [31], [32].", {{1, doc("doc_a")}, {2, doc("doc_b")}},
                                {{30, doc("doc_a")}, {31, doc("doc_c")}, {32, doc("doc_b")}});
    CHECK(r.text == "Refs: [1], [3], [2].");
    CHECK(r.mapping.size() == 3);
    CHECK(r.mapping.find(3)->document_id == "doc_c");
  }
  SUBCASE("c: lists are re-joined with comma and space") {
    citation_mapping fresh{{10, doc("x")}, {20, doc("y")}};
    CHECK(collapse_citations("[10, 20]", {}, fresh).text == "[1, 2]");
    CHECK(collapse_citations("[10,20]", {}, fresh).text == "[1, 2]");
  }
  SUBCASE("d: double brackets") {
    CHECK(collapse_citations("See [[25]] for info.", {}, {{25, doc("d")}}).text
          == "See [[1]] for info.");
  }
  SUBCASE("e: one document under two numbers") {
    auto r = collapse_citations("[50] and [60]", {}, {{50, doc("same")}, {60, doc("same")}});
    CHECK(r.text == "[1] and [1]");
    CHECK(r.mapping.size() == 1);
  }
  SUBCASE("f: non-contiguous existing numbers") {
    auto r = collapse_citations("[99]", {{5, doc("a")}, {10, doc("b")}}, {{99, doc("c")}});
    CHECK(r.text == "[11]");
    CHECK(r.mapping.numbers() == ints({5, 10, 11}));
  }
  SUBCASE("g: a number not in the new mapping") {
    // Onyx leaves "[99]" (quirk 10); it is removed here so that it can never
    // point at global document 99. Nothing follows it, so the space before it
    // stays, as in remove mode.
    auto r = collapse_citations("[25] and [99]", {}, {{25, doc("d")}});
    CHECK(r.text == "[1] and ");
    CHECK(r.removed == ints({99}));
    CHECK(collapse_citations("[25] and [99].", {}, {{25, doc("d")}}).text == "[1] and.");
  }
  SUBCASE("h: the order of the new mapping decides") {
    auto r = collapse_citations("[300] [100] [200]", {},
                                {{300, doc("a")}, {100, doc("b")}, {200, doc("c")}});
    CHECK(r.text == "[1] [2] [3]");
    CHECK(r.renumbered == std::vector<std::pair<int, int>>{{300, 1}, {100, 2}, {200, 3}});
  }
}

TEST_CASE("citation collapse: worked example of the specification") {
  citation_mapping existing{{1, doc("d2")}, {2, doc("x")}};
  citation_mapping fresh{{3, doc("d3")}, {1, doc("d1")}, {2, doc("d2")}};
  auto r = collapse_citations("A [3] B [1, 2] C [[3]] D [7] E [1,3]", existing, fresh);
  // Onyx: "... D [7] E [4, 3]"; the unknown [7] is removed here (quirk 10).
  CHECK(r.text == "A [3] B [4, 1] C [[3]] D E [4, 3]");
  CHECK(r.mapping
        == citation_mapping{{1, doc("d2")}, {2, doc("x")}, {3, doc("d3")}, {4, doc("d1")}});
  CHECK(r.removed == ints({7}));
}

TEST_CASE("citation collapse: Onyx's test case") {
  citation_mapping existing{{1, doc("wiki_python")}, {2, doc("docs_typing")}, {3, doc("blog")}};
  citation_mapping fresh{{100, doc("wiki_python")},
                         {101, doc("new_tutorial")},
                         {102, doc("docs_typing")},
                         {103, doc("another_new")}};
  auto r = collapse_citations("According to [100] and [101], also see [102] and [103].", existing,
                              fresh);
  CHECK(r.text == "According to [1] and [4], also see [2] and [5].");
  CHECK(r.mapping.size() == 5);
  CHECK(r.mapping.find(4)->document_id == "new_tutorial");
  CHECK(r.mapping.find(5)->document_id == "another_new");
  CHECK(r.mapping.find(1)->document_id == "wiki_python");
}

TEST_CASE("citation collapse: edge cases") {
  citation_mapping fresh{{25, doc("d")}};
  CHECK(collapse_citations("", {}, {}).text.empty());
  CHECK(collapse_citations("", {{1, doc("a")}}, fresh).mapping.size() == 2);
  CHECK(collapse_citations("no markers", {}, {}).text == "no markers");
  CHECK(collapse_citations("[50][60]", {}, {{50, doc("a")}, {60, doc("b")}}).text == "[1][2]");
  CHECK(collapse_citations("x 【25】 y", {}, fresh).text == "x 【1】 y");
  CHECK(collapse_citations("x ［25］ y", {}, fresh).text == "x ［1］ y");
  CHECK(collapse_citations("x 【【25】】 y", {}, fresh).text == "x 【【1】】 y");
  // Deviation 9: mixed double brackets are renumbered (Onyx leaves them).
  CHECK(collapse_citations("x [【25]】 y", {}, fresh).text == "x [【1]】 y");
  // Replacements never chain: old 1 -> 4 and old 4 -> 5.
  auto r = collapse_citations("[1] [4]", {{1, doc("x")}, {2, doc("y")}, {3, doc("z")}},
                              {{1, doc("d1")}, {4, doc("d4")}});
  CHECK(r.text == "[4] [5]");
  // Non-markers stay as they are.
  CHECK(collapse_citations("[1 ,2] [ 25] [a]", {}, fresh).text == "[1 ,2] [ 25] [a]");
  // Existing entries never change.
  auto e = collapse_citations("[25]", {{7, doc("d")}}, {{25, doc("other")}});
  CHECK(e.mapping.find(7)->document_id == "d");
}

TEST_CASE("citation collapse: unknown numbers cannot collide") {
  // The agent knew only its own [1]; "[2]" is a stray marker. Kept as is it
  // would now cite global document 2 (doc b). It is removed instead.
  auto r = collapse_citations("c [1], stray [2]. Both [1, 2].", {{1, doc("a")}, {2, doc("b")}},
                              {{1, doc("c")}});
  CHECK(r.text == "c [3], stray. Both [3].");
  CHECK(r.removed == ints({2}));
  CHECK(r.mapping.numbers() == ints({1, 2, 3}));
  // No new mapping at all: every marker is unknown.
  CHECK(collapse_citations("x [1] y", {{1, doc("a")}}, {}).text == "x y");
}

TEST_CASE("citation collapse: fenced code is left alone") {
  auto r = collapse_citations("```\na[1] = b[99]\n```\nSee [1].", {{1, doc("x")}}, {{1, doc("d")}});
  CHECK(r.text == "```\na[1] = b[99]\n```\nSee [2].");
  CHECK(r.removed.empty());
}

// -- order extraction -------------------------------------------------------------

TEST_CASE("citation extract_citation_order") {
  CHECK(extract_citation_order("A [3] B [1, 2] C [[3]] D [2 , 5] E 【7】 F [8 ,9] G [10,   11]")
        == ints({3, 1, 2, 5, 7, 8, 9, 10, 11}));
  CHECK(extract_citation_order("x [[2]](https://a) y [[1]](https://b) "
                               "[[2]](https://a)")
        == ints({2, 1}));
  CHECK(extract_citation_order("```\n[9]\n```\n[4]") == ints({4}));
  CHECK(extract_citation_order("[ 1] [1 ,] [a] [99999999999]").empty());
  CHECK(extract_citation_order("").empty());
}

// -- quirk 9 --------------------------------------------------------------------

TEST_CASE("citation quirk 9 fixed: leading space at a segment start") {
  // Onyx: "Text[[1]](...)" because the citation starts a new segment.
  CHECK(run(hyperlink, {"Text", "[1]"}).text == "Text " + link1);
  CHECK(run(hyperlink, {"Text", "[1]", " x"}).text == "Text " + link1 + " x");
  CHECK(run(hyperlink, {"Text ", "[1]"}).text == "Text " + link1);
  CHECK(run(hyperlink, {"Text\n", "[1]"}).text == "Text\n" + link1);
  // No space at the very start, none between consecutive citations.
  CHECK(run(hyperlink, {"[1]", " start"}).text == link1 + " start");
  CHECK(run(hyperlink, {"A", "[1]", "[2]"}).text == "A " + link1 + link2);
  CHECK(run(hyperlink, {"A[1]", "[99]", "[2]"}).text == "A " + link1 + link2);
  CHECK(run(hyperlink, {"A[1]", " ", "[2]"}).text == "A " + link1 + " " + link2);
}

// -- split invariance -------------------------------------------------------------

TEST_CASE("citation random token splits give the same result as one token") {
  std::vector<std::string> inputs = {
    "Intro text[1] more [2, 3] and [[4]] plus 【5】 and ［1］.\n",
    "A [99] b [1,2] c [1 ,2] d [ 1] e [1,  2] f [-1] g [1.5] h [abc]\n",
    "Code:\n```\nx = a[1]\n```\nAfter [2]. ```` odd `` run ```bash\necho [3]\n"
    "```\n``````\n[4] ```\n",
    "(see this [1]) Is this true [2]? Text [3]. Text [4] more. A [1][2] B\n",
    "[[1, 2]] [[[3]]] [【4]】 [1]]]] [[[[ [12345678901234567890] [0] [01] ",
    "Unicode 文本【1】中文［2］ and 【【3】】 end 【 ［ 】 ］ 【1, 2】",
    "   [1]   \n\n[2]\t[99]\t.  [98] [97], x[1][99][2]y  ",
    "trailing [1, 2",
    "[" + std::string(60, '9') + "!",
    "ends with ``",
    "x [99]",
    "Text [1]",
  };
  std::mt19937 rng{20261122};
  // Plus random texts made of the pieces that matter.
  const std::vector<std::string> pieces = {"[",  "]", "1", "2",  "99", ",",  " ",  "`",  "```",
                                           "\n", "x", ".", "【", "】", "［", "］", "\t", "文"};
  std::uniform_int_distribution<std::size_t> pick{0, pieces.size() - 1};
  for (int i = 0; i < 30; ++i) {
    std::string text;
    for (int j = 0; j < 60; ++j)
      text += pieces[pick(rng)];
    inputs.push_back(std::move(text));
  }
  for (auto mode : {hyperlink, keep, remove_mode}) {
    for (const auto& input : inputs) {
      citation_processor whole_p{mode};
      whole_p.update_mapping(test_mapping());
      auto whole = feed(whole_p, {input});
      for (int round = 0; round < 40; ++round) {
        std::vector<std::string> tokens;
        if (round == 0) {
          for (auto c : input)
            tokens.emplace_back(1, c);
        } else {
          std::uniform_int_distribution<std::size_t> len{1, 6};
          for (std::size_t i = 0; i < input.size();) {
            auto n = std::min(len(rng), input.size() - i);
            tokens.push_back(input.substr(i, n));
            i += n;
          }
        }
        citation_processor p{mode};
        p.update_mapping(test_mapping());
        auto split = feed(p, tokens);
        INFO("mode " << to_string(mode) << ", input: " << input << ", round " << round);
        CHECK(split.text == whole.text);
        CHECK(split.unknown == whole.unknown);
        REQUIRE(split.events.size() == whole.events.size());
        for (std::size_t i = 0; i < split.events.size(); ++i) {
          CHECK(split.events[i].offset == whole.events[i].offset);
          CHECK(split.events[i].info == whole.events[i].info);
        }
        CHECK(p.seen_citations() == whole_p.seen_citations());
        CHECK(p.cited_document_ids() == whole_p.cited_document_ids());
        CHECK(p.held_bytes() == 0);
      }
    }
  }
}

// -- long inputs ------------------------------------------------------------------

TEST_CASE("citation one megabyte token by token") {
  const std::string paragraph
    = "Paragraph with a citation [1] and a list [2, 3] and an unknown [99] and "
      "code:\n```\nkeep [4]\n```\nDone [[5]].\n";
  const std::string expected_paragraph
    = "Paragraph with a citation " + link1 + " and a list " + link2 + " " + link3
      + " and an unknown and code:\n```plaintext\nkeep [4]\n```\nDone " + link5 + ".\n";
  std::string input;
  std::string expected;
  while (input.size() < (1u << 20)) {
    input += paragraph;
    expected += expected_paragraph;
  }
  citation_processor p;
  p.update_mapping(test_mapping());
  std::mt19937 rng{7};
  std::uniform_int_distribution<std::size_t> len{1, 7};
  run_result r;
  for (std::size_t i = 0; i < input.size();) {
    auto n = std::min(len(rng), input.size() - i);
    append(r, p.process(std::string_view{input}.substr(i, n)));
    i += n;
  }
  append(r, p.finish());
  CHECK(r.text == expected);
  REQUIRE(r.events.size() == 4);
  CHECK(r.events[3].info == citation_info{5, "doc_5"});
  CHECK(p.seen_citations().numbers() == ints({1, 2, 3, 5}));
  CHECK(p.unknown_citations() == ints({99}));

  // A megabyte that stays a possible citation until its last character, one
  // byte per token: held and scanned once, never re-scanned from the start.
  citation_processor q;
  q.update_mapping(test_mapping());
  std::string digits = "x [" + std::string(1u << 20, '1');
  std::string out;
  for (auto c : digits)
    out += q.process(std::string_view{&c, 1}).text;
  CHECK(out == "x");
  CHECK(q.held_bytes() == digits.size() - 1);
  out += q.process("!").text;
  out += q.finish().text;
  CHECK(out == digits + "!");
  CHECK(q.seen_citations().empty());
}

} // namespace citation_test
