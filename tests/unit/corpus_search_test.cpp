// Tests of the local corpus index's search features and update mechanics:
// phrase queries, path filters, document dates, the top-k pruning, the
// rebuild of an older schema, progress reports and short write
// transactions.

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/text.hpp"

#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>

namespace corpus_search_test {

using namespace quarry;
using namespace quarry::corpus;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<corpus_index> open_index(const std::string& path) {
  auto opened = corpus_index::open(path);
  if (opened.failure)
    FAIL("open failed: " << opened.failure->message);
  REQUIRE(opened.index != nullptr);
  return std::move(opened.index);
}

// Writes `n` filler documents docs/f0.md ... whose text is `text`.
void write_fillers(const test::temp_dir& tmp, int n, const std::string& text) {
  for (int i = 0; i < n; ++i)
    tmp.write("docs/f" + std::to_string(i) + ".md",
              "# Filler " + std::to_string(i) + "\n\n" + text + "\n");
}

std::vector<std::string> titles(const search_result& r) {
  std::vector<std::string> out;
  for (const auto& h : r.hits)
    out.push_back(h.title);
  return out;
}

} // namespace

TEST_CASE("corpus_search parses phrases and path filters") {
  auto q = parse_search_query(R"(solar "heat pump" path:notes/ site:x.org "one")");
  CHECK(q.words == std::vector<std::string>{"solar", "one"});
  REQUIRE(q.phrases.size() == 1);
  CHECK(q.phrases[0] == std::vector<std::string>{"heat", "pump"});
  CHECK(q.paths == std::vector<std::string>{"notes/", "x.org"});
  // Not filters: inside a word, or another prefix.
  auto plain = parse_search_query("xpath:a heading:roots");
  CHECK(plain.paths.empty());
  CHECK(plain.words == std::vector<std::string>{"xpath", "a", "heading", "roots"});
  // An unbalanced quote runs to the end.
  auto open = parse_search_query("tidal \"neap spring");
  CHECK(open.words == std::vector<std::string>{"tidal"});
  REQUIRE(open.phrases.size() == 1);
  CHECK(open.phrases[0].size() == 2);
  // Bounded: at most 4 filters, long ones dropped.
  auto many = parse_search_query("path:a path:b path:c path:d path:e path:"
                                 + std::string(600, 'x'));
  CHECK(many.paths.size() == 4);
}

TEST_CASE("corpus_search: a plain text file's first line is its title") {
  CHECK(text_title("COMMISSIONING AND FIRST-WINTER NOTES FOR A HEAT PUMP\n\n"
                   "These notes describe.")
        == "Commissioning and First-Winter Notes for a Heat Pump");
  CHECK(text_title("CHECKLIST: A BOILER WITH A HEAT PUMP\n\nText.")
        == "Checklist: A Boiler with a Heat Pump");
  CHECK(text_title("\n\n  Site visit, 3 March  \n\nPressure fine.") == "Site visit, 3 March");
  CHECK(text_title("Only a line") == "Only a line");
  // Not titles: a sentence, a paragraph's first line, too long, no letters.
  CHECK(text_title("The pump was noisy.\n\nMore.").empty());
  CHECK(text_title("First line of a paragraph\nthat goes on.\n").empty());
  CHECK(text_title(std::string(130, 'x') + "\n\nText").empty());
  CHECK(text_title("one two three four five six seven eight nine ten eleven "
                   "twelve thirteen fourteen fifteen sixteen seventeen\n\nx")
          .empty());
  CHECK(text_title("2024-03-01\n\nText").empty());
  CHECK(text_title("").empty());
  CHECK(text_title(" \n \n").empty());
  // Indexed: a text file gets it, else its name.
  test::temp_dir tmp;
  tmp.write("docs/notes-file.txt", "FIRST-WINTER NOTES\n\nThe pump ran well.\n");
  tmp.write("docs/plain.txt", "The pump ran well all winter.\nNo faults.\n");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto r = index->search("pump", 5);
  std::set<std::string> got;
  for (const auto& h : r.hits)
    got.insert(h.title);
  CHECK(got == std::set<std::string>{"First-Winter Notes", "plain"});
}

TEST_CASE("corpus_search passages know where they lie in the source") {
  std::string text = "# Title\n\n  First para.  \nsame para\n\n\n"
                     "Second para.\n\n## Part\n\nThird.\n";
  auto ps = split_passages(text, 2000);
  REQUIRE(ps.size() == 2);
  CHECK(text.substr(ps[0].offset, ps[0].length) == "First para.  \nsame para\n\n\nSecond para.");
  CHECK(text.substr(ps[1].offset, ps[1].length) == "Third.");
  std::string words;
  for (int i = 0; i < 800; ++i)
    words += "word" + std::to_string(i % 10) + " ";
  for (const auto& p : split_passages(words, 500))
    CHECK(words.substr(p.offset, p.length) == p.text);
}

TEST_CASE("corpus_search snippets show the matching words") {
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += "filler" + std::to_string(i) + " ";
  text += "the Eruptions of basalt ";
  for (int i = 0; i < 100; ++i)
    text += "tail" + std::to_string(i) + " ";
  auto s = make_snippet(text, {"eruption"}, 20);
  CHECK(s.find("Eruptions of basalt") != std::string::npos);
  CHECK(s.rfind("...", 0) == 0);
  CHECK(s.size() > 3);
  CHECK(s.substr(s.size() - 3) == "...");
  CHECK(make_snippet("short text", {"zzz"}) == "short text");
  CHECK(make_snippet("", {"a"}).empty());
}

TEST_CASE("corpus_search finds exact phrases") {
  test::temp_dir tmp;
  tmp.write("docs/a.md", "# Alpha\n\nThe red fox jumps over the fence.\n");
  tmp.write("docs/b.md", "# Beta\n\nA fox that is red sleeps in the den.\n");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  CHECK(index->search("red fox", 5).hits.size() == 2);
  auto phrase = index->search("\"red fox\"", 5);
  REQUIRE_FALSE(phrase.failure.has_value());
  CHECK(titles(phrase) == std::vector<std::string>{"Alpha"});
  // A phrase must match; other words only rank.
  CHECK(titles(index->search("den \"red fox\"", 5)) == std::vector<std::string>{"Alpha"});
  CHECK(index->search("\"fox red\"", 5).hits.empty());
  // Stemmed like the index: "jumping fence" matches "jumps over the fence"?
  // No: a phrase is consecutive words.
  CHECK(index->search("\"jumps fence\"", 5).hits.empty());
  CHECK(titles(index->search("\"jumping over\"", 5)) == std::vector<std::string>{"Alpha"});
}

TEST_CASE("corpus_search: terms() gives the index's own tokens of a text, in order") {
  test::temp_dir tmp;
  tmp.write("docs/a.md", "# Alpha\n\nHeat pumps running in the cold.\n");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  // Lower case and Snowball stems, stop words kept, as the index has them.
  CHECK(index->terms("Heat PUMPS running in the cold.")
        == std::vector<std::string>{"heat", "pump", "run", "in", "the", "cold"});
  // Each stem finds the document the search finds for the word.
  for (const auto& t : index->terms("pumps running"))
    CHECK(index->search(t, 5).hits.size() == 1);
  CHECK(index->terms("Heat pumps running", 2) == std::vector<std::string>{"heat", "pump"});
  CHECK(index->terms("").empty());
  CHECK(index->terms("... !!").empty());
}

TEST_CASE("corpus_search: feedback widens a query with the words its best passages share") {
  test::temp_dir tmp;
  tmp.write("docs/pumps.md", "# Heat pumps\n\nHeat pumps move heat with a compressor and a "
                             "refrigerant loop.\n");
  tmp.write("docs/service.md", "# Service notes\n\nA compressor and its refrigerant loop need "
                               "yearly service.\n");
  tmp.write("docs/garden.md", "# Garden\n\nTomatoes need sun and water.\n");
  tmp.write("docs/other/loop.md", "# Other\n\nA refrigerant loop in a fridge.\n");
  // Words in half of the passages or more weigh nothing: a corpus of more.
  write_fillers(tmp, 8, "Notes on bread, cheese and apples.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  // Without feedback only the document with the query's words is found.
  CHECK(titles(index->search("heat pumps", 5)) == std::vector<std::string>{"Heat pumps"});
  search_options fb;
  fb.feedback_documents = 1;
  fb.feedback_terms = 6;
  auto widened = titles(index->search("heat pumps", 5, fb));
  REQUIRE(widened.size() == 3);
  CHECK(widened[0] == "Heat pumps"); // the query's own words still rank first
  CHECK(std::find(widened.begin(), widened.end(), "Service notes") != widened.end());
  CHECK(std::find(widened.begin(), widened.end(), "Garden") == widened.end());
  // Path filters and phrases still apply to what feedback adds.
  CHECK(titles(index->search("heat pumps path:other/", 5, fb)).empty());
  CHECK(titles(index->search("\"heat pumps\"", 5, fb)) == std::vector<std::string>{"Heat pumps"});
  // The query keeping all the weight adds nothing that ranks.
  fb.query_share = 1;
  CHECK(titles(index->search("heat pumps", 5, fb)) == std::vector<std::string>{"Heat pumps"});
  // A query that finds nothing has nothing to feed back.
  fb.query_share = 0.5;
  CHECK(index->search("zeppelin", 5, fb).hits.empty());
}

TEST_CASE("corpus_search: feedback from passages with quotes, FTS5 syntax and bad bytes stays a "
          "search") {
  test::temp_dir tmp;
  // The words feedback adds come from the passages: quotes inside words,
  // FTS5 operators and column filters, stray bytes.
  tmp.write("docs/odd.md", "# Odd\n\nValve say\"s \"NEAR(valve\" OR AND NOT body: title:* "
                           "valve^2 \xff\xfe\xc3 valve-valve valve\n");
  tmp.write("docs/plain.md", "# Plain\n\nA valve and a body near the title.\n");
  write_fillers(tmp, 8, "Notes on bread, cheese and apples.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  search_options fb;
  fb.feedback_documents = 2;
  fb.feedback_terms = 20;
  auto found = index->search("valve", 5, fb);
  REQUIRE_FALSE(found.failure.has_value());
  auto got = titles(found);
  CHECK(std::find(got.begin(), got.end(), "Odd") != got.end());
  CHECK(std::find(got.begin(), got.end(), "Plain") != got.end());
  CHECK(std::find(got.begin(), got.end(), "Filler 0") == got.end());
}

TEST_CASE("corpus_search filters by path") {
  test::temp_dir tmp;
  tmp.write("docs/notes/energy.md", "# Notes\n\nSolar panels and wind.\n");
  tmp.write("docs/papers/solar.md", "# Paper\n\nSolar cells in detail.\n");
  tmp.write("docs/papers/old/solar.md", "# Old\n\nSolar history.\n");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  CHECK(index->search("solar", 5).hits.size() == 3);
  CHECK(titles(index->search("solar path:notes/", 5)) == std::vector<std::string>{"Notes"});
  CHECK(index->search("solar path:papers/", 5).hits.size() == 2);
  CHECK(titles(index->search("solar path:papers/ path:old", 5)) == std::vector<std::string>{"Old"});
  CHECK(index->search("solar site:nowhere", 5).hits.empty());
  // A filter alone matches nothing (no words).
  CHECK(index->search("path:notes/", 5).hits.empty());
}

TEST_CASE("corpus_search returns document dates and says where they come "
          "from") {
  test::temp_dir tmp;
  auto md = tmp.write("docs/plain.md", "# Plain\n\nZebra crossing notes.\n");
  // 2020-06-15 12:00:00 UTC as the file's modification time.
  {
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = 1592222400;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    REQUIRE(utimensat(AT_FDCWD, md.c_str(), times, 0) == 0);
  }
  tmp.write("docs/page.html", "<html><head><title>Page</title>"
                              "<meta property=\"article:published_time\" "
                              "content=\"2021-03-04T10:00:00Z\"></head><body><article>"
                              "<p>Zebra stripes confuse flies, a study of many zebras "
                              "found.</p></article></body></html>");
  test::pdf_spec spec;
  spec.pages = {"Zebra population survey."};
  spec.title = "Survey";
  spec.creation_date = "D:20190102030405Z";
  tmp.write("docs/survey.pdf", test::make_pdf_document(spec));
  auto index = open_index(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  REQUIRE(r.added == 3);
  auto hits = index->search("zebra", 5).hits;
  REQUIRE(hits.size() == 3);
  for (const auto& h : hits) {
    CAPTURE(h.title);
    if (h.title == "Plain") {
      CHECK(h.date == "2020-06-15");
      CHECK(h.date_source == "mtime");
    } else if (h.title == "Page") {
      CHECK(h.date == "2021-03-04");
      CHECK(h.date_source == "html");
    } else {
      CHECK(h.title == "Survey");
      CHECK(h.date == "2019-01-02");
      CHECK(h.date_source == "pdf");
    }
    auto doc = index->get_document(h.document_id);
    REQUIRE(doc.has_value());
    CHECK(doc->date == h.date);
    CHECK(doc->date_source == h.date_source);
  }
}

TEST_CASE("corpus_search ranks exactly although it ranks rare words first") {
  // Ten documents. "quokka" is in one; "marsupial" in two, one of which has
  // it many times (and in its heading): that one scores more than the
  // quokka document, so pruning by the rarest word must look further.
  test::temp_dir tmp;
  tmp.write("docs/q.md", "# Animals\n\nA quokka lives on an island.\n");
  std::string many;
  for (int i = 0; i < 12; ++i)
    many += "marsupial ";
  tmp.write("docs/m.md", "# Marsupial marsupial\n\n" + many + "\n");
  tmp.write("docs/m2.md", "# Other\n\nOne marsupial here.\n");
  write_fillers(tmp, 7, "Nothing of note, plain words.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto one = index->search("quokka marsupial", 1);
  REQUIRE(one.hits.size() == 1);
  CHECK(one.hits[0].title == "Marsupial marsupial");
  auto all = index->search("quokka marsupial", 10);
  CHECK(titles(all) == std::vector<std::string>{"Marsupial marsupial", "Animals", "Other"});
  // More documents wanted than the rare word has: the others fill in.
  tmp.write("docs/z.md", "# Zed\n\nA wombat and a marsupial.\n");
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto filled = index->search("quokka marsupial wombat", 10);
  CHECK(filled.hits.size() == 4);
}

TEST_CASE("corpus_search ranks a passage with the query's words together above one with them "
          "apart") {
  // Two passages of the same words and length: in one the query's words
  // stand next to each other, in the other they are far apart. BM25 alone
  // scores them the same; the proximity bonus decides.
  test::temp_dir tmp;
  std::string filler = "plain words about nothing much at all, said twice over; ";
  tmp.write("docs/near.md", "# One\n\nthermal storage " + filler + filler + "end.\n");
  tmp.write("docs/far.md", "# Two\n\nthermal " + filler + filler + "storage end.\n");
  write_fillers(tmp, 8, "Bread, cheese and apples.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  for (const auto* query : {"thermal storage", "storage thermal", "storage of thermal energy"}) {
    CAPTURE(query);
    auto found = index->search(query, 5);
    REQUIRE(found.hits.size() == 2);
    CHECK(found.hits[0].title == "One");
    CHECK(found.hits[1].title == "Two");
    CHECK(found.hits[0].score < found.hits[1].score); // lower is better
    // The same with FTS5's sorter (a path filter every file passes).
    auto sorted = index->search(std::string{query} + " path:docs", 5);
    REQUIRE(sorted.hits.size() == 2);
    CHECK(sorted.hits[0].title == "One");
    CHECK(sorted.hits[0].score == doctest::Approx(found.hits[0].score));
  }
  // One word has no neighbour: both score the same (the lower id first).
  auto one = index->search("thermal", 5);
  REQUIRE(one.hits.size() == 2);
  CHECK(one.hits[0].score == doctest::Approx(one.hits[1].score));
  // A passage made of nothing but the query's words, over and over (more
  // matches than the bonus reads), still ranks and its bonus stays bounded.
  std::string many;
  for (int i = 0; i < 3000; ++i)
    many += i % 2 == 0 ? "thermal " : "storage ";
  tmp.write("docs/many.md", "# Many\n\n" + many + "\n");
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto flood = index->search("thermal storage", 5);
  REQUIRE_FALSE(flood.failure.has_value());
  CHECK(flood.hits.size() == 3);
}

TEST_CASE("corpus_search's pruned top documents are the top of the whole ranking") {
  // The top-k pruning bounds what a passage without the rarest words can
  // score, proximity bonus included: the best 1, 3 and 10 documents must
  // be the first of a ranking deep enough to hold every match.
  test::temp_dir tmp;
  std::mt19937 rng{29};
  std::vector<std::string> vocab;
  for (int i = 0; i < 120; ++i)
    vocab.push_back("v" + std::to_string(i) + "y");
  std::vector<double> weights;
  for (int i = 0; i < 120; ++i)
    weights.push_back(1.0 / (i + 1));
  std::discrete_distribution<int> zipf{weights.begin(), weights.end()};
  for (int f = 0; f < 150; ++f) {
    std::string text = "# " + vocab[static_cast<size_t>(zipf(rng))] + " doc " + std::to_string(f)
                       + "\n\n";
    auto words = 10 + rng() % 120;
    for (size_t w = 0; w < words; ++w)
      text += vocab[static_cast<size_t>(zipf(rng))] + (w % 9 == 8 ? ". " : " ");
    tmp.write("docs/d" + std::to_string(f) + ".md", text + "\n");
  }
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  size_t compared = 0;
  for (int q = 0; q < 60; ++q) {
    std::string query;
    auto n = 2 + rng() % 4;
    for (size_t i = 0; i < n; ++i)
      query += vocab[rng() % 60] + " ";
    CAPTURE(query);
    auto whole = index->search(query, 1000);
    REQUIRE_FALSE(whole.failure.has_value());
    for (size_t limit : {1, 3, 10}) {
      CAPTURE(limit);
      auto top = index->search(query, limit);
      REQUIRE(top.hits.size() == std::min(limit, whole.hits.size()));
      for (size_t i = 0; i < top.hits.size(); ++i)
        CHECK(top.hits[i].score == doctest::Approx(whole.hits[i].score));
      compared += top.hits.size();
    }
  }
  CHECK(compared > 500);
}

TEST_CASE("corpus_search ranks a document whose title holds the query first") {
  test::temp_dir tmp;
  // A short passage that says "seasonal performance" twice outscores the
  // long document about it, word for word; its title decides.
  std::string long_body;
  for (int i = 0; i < 30; ++i)
    long_body += "Measured over a year, with defrost, standby and pumps "
                 "included, the figure is lower than a test point. ";
  tmp.write("docs/spf.md", "# Seasonal Performance: SCOP and SPF\n\n"
                           "Seasonal performance is the heat over a year "
                           "divided by the electricity. "
                             + long_body + "\n");
  tmp.write("docs/cold.md", "# Cold Climates\n\nSeasonal performance, "
                            "and seasonal performance again.\n");
  tmp.write("docs/title-only.md", "# Quokka Habitats\n\nSmall animals live "
                                  "on a few islands.\n");
  tmp.write("docs/site-visit-log.txt", "Pressure checked, valves opened.\n");
  write_fillers(tmp, 6, "Nothing of note, plain words about performance.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto r = index->search("seasonal performance", 10);
  REQUIRE(r.hits.size() >= 2);
  CHECK(r.hits[0].title == "Seasonal Performance: SCOP and SPF");
  CHECK(r.hits[1].title == "Cold Climates");
  // One result: the pruning stops no earlier for the title's sake.
  auto one = index->search("seasonal performance", 1);
  REQUIRE(one.hits.size() == 1);
  CHECK(one.hits[0].title == "Seasonal Performance: SCOP and SPF");
  // A word only the title holds finds the document (its first passage).
  auto habitat = index->search("habitats", 5);
  REQUIRE(habitat.hits.size() == 1);
  CHECK(habitat.hits[0].title == "Quokka Habitats");
  // A path filter applies to documents found by their titles too.
  CHECK(index->search("habitats path:cold", 5).hits.empty());
  // A text file's title is its name: a word of it finds the file, but a
  // quoted phrase must be in a passage, not only in the title.
  auto visit = index->search("visit", 5);
  REQUIRE(visit.hits.size() == 1);
  CHECK(visit.hits[0].title == "site-visit-log");
  CHECK(index->search("\"visit log\"", 5).hits.empty());
  // The title changes: its old words no longer find the document.
  tmp.write("docs/title-only.md", "# Island Fauna\n\nSmall animals live "
                                  "on a few islands.\n");
  auto later = ::time(nullptr) + 5;
  struct timespec times[2] = {{later, 0}, {later, 0}};
  ::utimensat(AT_FDCWD, tmp.file("docs/title-only.md").c_str(), times, 0);
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  CHECK(index->search("habitats", 5).hits.empty());
  auto fauna = index->search("fauna", 5);
  REQUIRE(fauna.hits.size() == 1);
  CHECK(fauna.hits[0].title == "Island Fauna");
  // Removed: gone from the titles too.
  fs::remove(tmp.file("docs/title-only.md"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  CHECK(index->search("fauna", 5).hits.empty());
}

TEST_CASE("corpus_search: hostile titles are indexed and removed without a "
          "trace") {
  // A 200 KB Markdown title with bad bytes and a CJK run, a text file whose
  // first line is bad bytes, and a title that is one 100 KB word.
  test::temp_dir tmp;
  std::string huge = "# Zephyr \xff\xfe " + std::string(200000, 'z')
                     + " \xe7\x83\xad\xe6\xb3\xb5"
                       "\xe7\x83\xad\xe6\xb3\xb5\n\nBody text of the zephyr file.\n";
  tmp.write("docs/huge.md", huge);
  tmp.write("docs/bytes.txt", "\xc3\x28 \xa0\xa1 QUIRT\n\nBody of the quirt file.\n");
  tmp.write("docs/word.md", "# " + std::string(100000, 'w') + "\n\nBody of the word file.\n");
  auto index = open_index(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 3);
  auto zephyr = index->search("zephyr", 5);
  REQUIRE(zephyr.hits.size() == 1);
  CHECK(zephyr.hits[0].path.find("huge.md") != std::string::npos);
  CHECK(index->search("热泵", 5).hits.size() == 1);
  CHECK(index->search("quirt", 5).hits.size() == 1);
  CHECK_FALSE(index->search(std::string(100000, 'w'), 5).failure.has_value());
  // Removed: no title word finds anything any more.
  std::filesystem::remove_all(tmp.file("docs"));
  std::filesystem::create_directories(tmp.file("docs"));
  auto gone = index->update({tmp.file("docs")});
  REQUIRE_FALSE(gone.failure.has_value());
  CHECK(gone.removed == 3);
  for (const auto& q : {"zephyr", "热泵", "quirt", "body"})
    CHECK(index->search(q, 5).hits.empty());
  CHECK(index->size() == std::pair<size_t, size_t>{0, 0});
}

TEST_CASE("corpus_search picks the same passages without FTS5's sorter as "
          "with it") {
  // A path filter that every file passes makes the search rank with
  // FTS5's ORDER BY rank; without one, quarry_collect keeps the best rows.
  // Both must give the same documents, passages and scores.
  test::temp_dir tmp;
  std::mt19937 rng{11};
  std::vector<std::string> vocab;
  for (int i = 0; i < 300; ++i)
    vocab.push_back("w" + std::to_string(i) + "x");
  std::vector<double> weights;
  for (int i = 0; i < 300; ++i)
    weights.push_back(1.0 / (i + 1));
  std::discrete_distribution<int> zipf{weights.begin(), weights.end()};
  for (int f = 0; f < 120; ++f) {
    std::string text = "# " + vocab[static_cast<size_t>(zipf(rng))] + " notes " + std::to_string(f)
                       + "\n\n";
    auto sections = 1 + rng() % 4;
    for (size_t s = 0; s < sections; ++s) {
      text += "## " + vocab[static_cast<size_t>(zipf(rng))] + "\n\n";
      auto words = 20 + rng() % 150;
      for (size_t w = 0; w < words; ++w)
        text += vocab[static_cast<size_t>(zipf(rng))] + (w % 11 == 10 ? ". " : " ");
      text += "\n\n";
    }
    tmp.write("docs/d" + std::to_string(f) + ".md", text);
  }
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  size_t compared = 0;
  for (int q = 0; q < 60; ++q) {
    std::string query;
    auto n = 1 + rng() % 4;
    for (size_t i = 0; i < n; ++i)
      query += vocab[5 + rng() % 200] + " ";
    for (size_t limit : {1, 3, 10}) {
      CAPTURE(query);
      CAPTURE(limit);
      auto plain = index->search(query, limit);
      auto sorted = index->search(query + "path:docs", limit);
      REQUIRE_FALSE(plain.failure.has_value());
      REQUIRE_FALSE(sorted.failure.has_value());
      REQUIRE(plain.hits.size() == sorted.hits.size());
      for (size_t i = 0; i < plain.hits.size(); ++i) {
        CHECK(plain.hits[i].passage_id == sorted.hits[i].passage_id);
        CHECK(plain.hits[i].score == doctest::Approx(sorted.hits[i].score));
      }
      compared += plain.hits.size();
    }
  }
  CHECK(compared > 600);
}

TEST_CASE("corpus_search rebuilds an index of an older schema") {
  test::temp_dir tmp;
  tmp.write("docs/a.md", "# Alpha\n\nGlaciers carve valleys.\n");
  auto path = tmp.file("corpus.db");
  {
    // A version 1 database as an older build left it.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    auto sql = "CREATE TABLE documents(id INTEGER PRIMARY KEY, path TEXT "
               "NOT NULL UNIQUE, title TEXT NOT NULL, mtime INTEGER NOT NULL, "
               "size INTEGER NOT NULL, hash TEXT NOT NULL, body TEXT NOT "
               "NULL);"
               "CREATE TABLE passages(id INTEGER PRIMARY KEY, document_id "
               "INTEGER NOT NULL, ordinal INTEGER NOT NULL, heading TEXT NOT "
               "NULL, body TEXT NOT NULL);"
               "CREATE VIRTUAL TABLE passages_fts USING fts5(heading, body, "
               "content='passages', content_rowid='id');"
               "INSERT INTO documents VALUES (1, '/gone.md', 'Gone', 0, 0, "
               "'x', 'old text');"
               "PRAGMA application_id=1364349529; PRAGMA user_version=1;";
    REQUIRE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto index = open_index(path);
  CHECK(index->size() == std::pair<size_t, size_t>{0, 0});
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 1);
  CHECK(index->search("glaciers", 5).hits.size() == 1);
  index.reset();
  // Opened again: the current version now, nothing rebuilt.
  index = open_index(path);
  CHECK(index->size() == std::pair<size_t, size_t>{1, 1});
}

TEST_CASE("corpus_search updates report progress and let others write while "
          "a file is read") {
  test::temp_dir tmp;
  for (int i = 0; i < 5; ++i)
    tmp.write("docs/f" + std::to_string(i) + ".md",
              "# File " + std::to_string(i) + "\n\nPelican number " + std::to_string(i) + ".\n");
  auto path = tmp.file("corpus.db");
  auto index = open_index(path);
  // A first batch of files in the index, so a write is pending mid-update.
  REQUIRE_FALSE(index->update({tmp.file("docs/f0.md")}).failure.has_value());
  std::vector<update_progress> reports;
  int other_writes = 0;
  std::string other_error;
  update_options options;
  options.progress = [&](const update_progress& p) { reports.push_back(p); };
  // Stands in for a slow extraction: while "reading" each file, another
  // connection writes to the database, with a short busy timeout (it would
  // time out if the update held the write lock).
  options.before_read = [&](const std::string&) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
      other_error = "cannot open";
      sqlite3_close(db);
      return;
    }
    sqlite3_busy_timeout(db, 200);
    char* err = nullptr;
    if (sqlite3_exec(db,
                     "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS t(x); "
                     "INSERT INTO t VALUES (1); COMMIT;",
                     nullptr, nullptr, &err)
        == SQLITE_OK)
      ++other_writes;
    else
      other_error = err != nullptr ? err : "?";
    sqlite3_free(err);
    sqlite3_close(db);
  };
  auto r = index->update({tmp.file("docs")}, options);
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(other_error.empty());
  CHECK(other_writes == 4); // f0 is unchanged: not read
  CHECK(r.added == 4);
  CHECK(r.unchanged == 1);
  REQUIRE(reports.size() == 5);
  CHECK(reports.back().files_done == 5);
  CHECK(reports.back().files_total == 5);
  CHECK(reports.back().bytes_done == reports.back().bytes_total);
  CHECK(reports.back().bytes_total > 0);
  for (size_t i = 1; i < reports.size(); ++i)
    CHECK(reports[i].files_done == reports[i - 1].files_done + 1);
  CHECK(index->search("pelican", 10).hits.size() == 5);
}

TEST_CASE("corpus_search: feedback with its largest number of words is still a search") {
  test::temp_dir tmp;
  // Passages with more than a hundred distinct words each: feedback may add
  // as many words as search_options allows (100).
  std::string words;
  for (int i = 0; i < 150; ++i)
    words += " word" + std::to_string(i) + "x";
  tmp.write("docs/a.md", "# Many words\n\nValve" + words + ".\n");
  tmp.write("docs/b.md", "# More words\n\nA valve and" + words + " again.\n");
  write_fillers(tmp, 8, "Notes on bread, cheese and apples.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  search_options fb;
  fb.feedback_documents = 10;
  for (size_t terms : {10, 60, 100}) {
    fb.feedback_terms = terms;
    auto r = index->search("valve word1x word2x word3x word4x word5x word6x word7x word8x word9x "
                           "word10x word11x word12x word13x word14x word15x word16x word17x",
                           5, fb);
    CAPTURE(terms);
    CHECK_FALSE(r.failure.has_value());
    CHECK(r.hits.size() == 2);
  }
}

TEST_CASE("corpus_search: a query of more phrases than an SQL function takes arguments is "
          "ranked, with and without a path filter, titles and feedback") {
  // SQLite allows an SQL function 127 arguments; a query ranks with two
  // weights per phrase: its words (32 at most) and up to 100 that feedback
  // adds are beyond that. Some of the words are in the titles (the title
  // bonus ranks those documents' passages on their own); the filter comes
  // first, as the search reads 32 words.
  test::temp_dir tmp;
  std::string words;
  for (int i = 0; i < 80; ++i)
    words += " term" + std::to_string(i) + "x";
  tmp.write("docs/valves/a.md", "# Valve term1x term2x\n\nValve" + words + ".\n");
  tmp.write("docs/valves/b.md", "# Valve notes\n\nA valve and" + words + " again.\n");
  tmp.write("docs/other/c.md", "# Valve elsewhere\n\nA valve with term3x and term4x.\n");
  write_fillers(tmp, 8, "Notes on bread, cheese and apples.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto query = "valve" + words;
  search_options fb;
  fb.feedback_documents = 10;
  fb.feedback_terms = 100;
  for (const auto* filter : {"", "path:valves/ "}) {
    for (bool feedback : {false, true}) {
      std::string shown_filter = filter;
      CAPTURE(shown_filter);
      CAPTURE(feedback);
      auto r = index->search(filter + query, 5, feedback ? fb : search_options{});
      INFO((r.failure ? r.failure->message : std::string{}));
      CHECK_FALSE(r.failure.has_value());
      CHECK(r.hits.size() == (*filter ? 2u : 3u));
      for (const auto& h : r.hits)
        CHECK((*filter == 0 || h.path.find("/valves/") != std::string::npos));
    }
  }
}

} // namespace corpus_search_test
