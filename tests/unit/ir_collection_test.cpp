// The IR test collection reader and the ranking measures of the retrieval
// benchmark (tests/support/ir_collection.*): hand-worked cases and the
// Cranfield collection of the fixtures.

#include "support/ir_collection.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace ir_collection_test {

using namespace quarry::test::ir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

const std::string cranfield = std::string{QUARRY_FIXTURES_DIR} + "/ir/cranfield/";

} // namespace

TEST_CASE("ir measures: nDCG@k, average precision and recall of a ranking, worked by hand") {
  // Judged: 7 (gain 3), 2 (gain 1), 9 (gain 2); 9 is never found.
  std::map<int, int> relevant{{7, 3}, {2, 1}, {9, 2}};
  // Ranks: 1 -> 5 (no), 2 -> 7 (3), 3 -> 7 again (ignored), then 4 (no), 2 (1).
  auto m = measure({5, 7, 7, 4, 2}, relevant, 3, 100);
  // DCG@3 over 5, 7, 4: 3 / log2(3). Ideal: 3 / 1 + 2 / log2(3) + 1 / 2.
  auto dcg = 3 / std::log2(3.0);
  auto ideal = 3.0 + 2 / std::log2(3.0) + 0.5;
  CHECK(m.ndcg == doctest::Approx(dcg / ideal));
  // Relevant at ranks 2 and 4: (1/2 + 2/4) / 3 relevant.
  CHECK(m.average_precision == doctest::Approx((0.5 + 0.5) / 3));
  CHECK(m.recall == doctest::Approx(2.0 / 3));
  // The cut-off counts: at depth 3 only document 7 is found.
  auto cut = measure({5, 7, 7, 4, 2}, relevant, 3, 3);
  CHECK(cut.average_precision == doctest::Approx(0.5 / 3));
  CHECK(cut.recall == doctest::Approx(1.0 / 3));
  // The ideal ranking scores 1; nothing judged scores 0.
  auto best = measure({7, 9, 2}, relevant, 10, 100);
  CHECK(best.ndcg == doctest::Approx(1.0));
  CHECK(best.average_precision == doctest::Approx(1.0));
  CHECK(best.recall == doctest::Approx(1.0));
  auto none = measure({1, 2}, {}, 10, 100);
  CHECK(none.ndcg == 0);
  CHECK(none.recall == 0);
  CHECK(measure({}, relevant, 10, 100).ndcg == 0);
}

TEST_CASE("ir collection: Cleverdon's codes become gains and other codes are left out") {
  std::string why;
  auto j = read_cleverdon_judgments("1 184 2\n1 29 1 \n1 12 4\n1 13 -1\n1 14 5\n2 5 3\n1 29 3\n",
                                    why);
  REQUIRE(j);
  CHECK(j->at(1).size() == 3);
  CHECK(j->at(1).at(29) == 4); // code 1 (and a later code 3: the higher gain stays)
  CHECK(j->at(1).at(184) == 3);
  CHECK(j->at(1).at(12) == 1);
  CHECK(j->at(1).count(13) == 0);
  CHECK(j->at(1).count(14) == 0);
  CHECK(j->at(2).at(5) == 2);
  CHECK_FALSE(read_cleverdon_judgments("1 2\n", why));
  CHECK(why.find("line 1") != std::string::npos);
  CHECK_FALSE(read_cleverdon_judgments("1 2 3 4\n", why));
  CHECK_FALSE(read_cleverdon_judgments("a 2 3\n", why));
}

TEST_CASE("ir collection: SMART records with their fields, and malformed files refused") {
  std::string why;
  auto docs = read_documents(".I 3\n.T\nwing in a\nslipstream .\n.A\nx,y.\n.W\nline one\n  line "
                             "two\n.I 8\n.T\n.W\n",
                             why);
  REQUIRE(docs);
  REQUIRE(docs->size() == 2);
  CHECK((*docs)[0].id == 3);
  CHECK((*docs)[0].title == "wing in a slipstream .");
  CHECK((*docs)[0].text == "line one\n  line two");
  CHECK((*docs)[1].id == 8);
  CHECK((*docs)[1].text.empty());
  CHECK_FALSE(read_documents(".T\nno record\n", why));
  CHECK_FALSE(read_documents(".I x\n.W\nt\n", why));
  CHECK_FALSE(read_documents(".I 1\n.W\na\n.I 1\n.W\nb\n", why));
  CHECK(why.find("twice") != std::string::npos);
  auto queries = read_queries(".I 001\n.W\nwhat similarity\nlaws .\n.I 004\n.W\nheat .\n", why);
  REQUIRE(queries);
  REQUIRE(queries->size() == 2);
  CHECK((*queries)[0].number == 1);
  CHECK((*queries)[0].text == "what similarity laws .");
  CHECK((*queries)[1].number == 2); // numbered in file order, not by .I
}

TEST_CASE("ir collection: the Cranfield fixture holds 1,400 documents, 225 queries and their "
          "judgments") {
  std::string why;
  auto docs = read_documents(slurp(cranfield + "cran.all.1400"), why);
  REQUIRE_MESSAGE(docs, why);
  CHECK(docs->size() == 1400);
  CHECK(docs->front().id == 1);
  CHECK(docs->front().title.rfind("experimental investigation of the aerodynamics", 0) == 0);
  auto queries = read_queries(slurp(cranfield + "cran.qry"), why);
  REQUIRE_MESSAGE(queries, why);
  CHECK(queries->size() == 225);
  auto judged = read_cleverdon_judgments(slurp(cranfield + "cranqrel"), why);
  REQUIRE_MESSAGE(judged, why);
  CHECK(judged->size() == 225); // every query has a document of codes 1 to 4
  CHECK(judged->rbegin()->first == 225);
  CHECK(judged->at(1).at(184) == 3);
}

} // namespace ir_collection_test
