// The seven stages of claim verification, each on its own, then together on
// a small report.

#include "quarry/core/verification.hpp"
#include "quarry/lexical/lexical.hpp"

#include <doctest/doctest.h>

namespace verification_test {

using namespace quarry::core::verification;
using nlohmann::json;

namespace {

source_text src(int number, std::string title, std::string url, std::string text) {
  source_text s;
  s.number = number;
  s.title = std::move(title);
  s.url = std::move(url);
  s.text = std::move(text);
  return s;
}

// Stages 2 to 6 over `claims`, judged lexically, as the verifier runs them.
std::vector<claim_result> judge_all(const std::vector<claim>& claims,
                                    const std::map<int, indexed_document>& docs) {
  std::vector<claim_result> results;
  for (const auto& c : claims) {
    claim_result r;
    r.subject = c;
    std::optional<evidence> best;
    for (auto n : map_claim(c, docs).with_text) {
      auto ev = best_evidence(c.text, docs.at(n));
      if (ev && (!best || ev->coverage > best->coverage))
        best = ev;
    }
    r.judged = judge_lexically(c.text, best);
    if (r.judged.result != verdict::supported)
      if (auto other = find_recitation(c, docs)) {
        r.recited_to = other->number;
        r.judged = *other;
      }
    results.push_back(r);
  }
  return results;
}

std::map<int, indexed_document> library() {
  std::map<int, indexed_document> docs;
  docs[1] = index_document(src(1, "Cold climate heat pumps", "https://a.example/cold",
                               "Air-source heat pumps lose efficiency as the outdoor air gets "
                               "colder. At -15 C a typical unit still reaches a COP of about 2. "
                               "Cold-climate models use variable-speed compressors.\n\n"
                               "Defrost cycles run when frost builds up on the outdoor coil."));
  docs[2] = index_document(src(2, "Defrost", "https://b.example/defrost",
                               "Reverse-cycle defrost briefly runs the heat pump backwards to "
                               "melt frost on the outdoor coil. A defrost cycle lasts two to ten "
                               "minutes."));
  docs[3] = index_document(src(3, "Nothing stored", "https://c.example/", ""));
  return docs;
}

} // namespace

TEST_CASE("verification 1: claims are the cited sentences and the uncited facts") {
  std::string report
    = "# Heat pumps in the cold\n\n"
      "## Efficiency\n\n"
      "Heat pumps lose efficiency in cold air [1]. At -15 C a unit still "
      "reaches a COP of about 2. [1] Is that enough?\n"
      "This is why people like them.\n\n"
      "- Defrost runs the unit backwards [[2]](https://b.example/defrost).\n"
      "- e.g. a short note.\n\n"
      "| Model | COP |\n|---|---|\n| Mitsubishi Zuba at -15 C reaches 2.1 [1] | 2.1 |\n\n"
      "```\nCode with a claim [9].\n```\n\n"
      "> Quoted question from Alice Smith in 2024 about heat pumps?\n\n"
      "## Sources\n\n[1] Cold climate heat pumps. https://a.example/cold\n";
  auto claims = split_claims(report);
  REQUIRE(claims.size() == 4);
  CHECK(claims[0].text == "Heat pumps lose efficiency in cold air.");
  CHECK(claims[0].citations == std::vector<int>{1});
  CHECK(report.substr(claims[0].begin, claims[0].end - claims[0].begin)
        == "Heat pumps lose efficiency in cold air [1].");
  // A marker after the stop belongs to the sentence before it.
  CHECK(claims[1].text == "At -15 C a unit still reaches a COP of about 2.");
  CHECK(claims[1].citations == std::vector<int>{1});
  CHECK(claims[2].text == "Defrost runs the unit backwards.");
  CHECK(claims[2].citations == std::vector<int>{2});
  CHECK(claims[3].text == "Mitsubishi Zuba at -15 C reaches 2.1");
  for (size_t i = 0; i < claims.size(); ++i)
    CHECK(claims[i].index == i);
  // An uncited sentence that states a fact is a claim; one that does not is
  // not.
  auto facts = split_claims("Heat pumps were installed in 3 million homes in 2023. "
                            "They are nice to have around here.");
  REQUIRE(facts.size() == 1);
  CHECK(facts[0].citations.empty());
  CHECK(split_claims("", 10).empty());
  CHECK(split_claims("Fact [1]. Fact [2]. Fact [3].", 2).size() == 2);
}

TEST_CASE("verification 1: hostile reports stay bounded") {
  std::string huge(200000, '[');
  CHECK(split_claims(huge).empty());
  std::string long_sentence;
  for (int i = 0; i < 3000; ++i)
    long_sentence += "word ";
  long_sentence += "[1].";
  auto claims = split_claims(long_sentence);
  CHECK_FALSE(claims.empty());
  for (const auto& c : claims)
    CHECK(c.text.size() <= 2100);
  // Many unclosed links: still linear (this would take minutes otherwise).
  std::string links;
  for (int i = 0; i < 20000; ++i)
    links += "Fact [[1]](x. ";
  CHECK_NOTHROW(split_claims(links));
  // Unterminated markers and link forms do not throw.
  CHECK_NOTHROW(split_claims("A claim [[1]](https://x.example/ never closed. Then [12345678]."));
}

TEST_CASE("verification 2: claims map to the cited documents that have text") {
  auto docs = library();
  claim c;
  c.citations = {1, 3, 7};
  auto m = map_claim(c, docs);
  CHECK(m.with_text == std::vector<int>{1});
  CHECK(m.missing == std::vector<int>{3, 7});
}

TEST_CASE("verification 3 and 4: the best passage and the evidence span") {
  auto docs = library();
  const auto& d1 = docs.at(1);
  REQUIRE_FALSE(d1.passages.empty());
  auto cands = candidate_passages("COP at -15 C", d1);
  REQUIRE_FALSE(cands.empty());
  auto ev = best_evidence("At -15 C a unit still reaches a COP of about 2.", d1);
  REQUIRE(ev.has_value());
  CHECK(ev->number == 1);
  CHECK(ev->quote.find("COP of about 2") != std::string::npos);
  CHECK(ev->numbers_match);
  CHECK(ev->coverage >= 0.75);
  CHECK(candidate_passages("photosynthesis chlorophyll", d1).empty());
  CHECK_FALSE(best_evidence("photosynthesis chlorophyll", d1).has_value());
  // Long documents are cut into several passages.
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "Sentence number " + std::to_string(i) + " talks about topic " + std::to_string(i)
            + " in some detail here. ";
  auto big = index_document(src(4, "", "", text), 40);
  CHECK(big.passages.size() > 20);
  CHECK(big.passages.size() == big.tokens.size());
  auto found = best_evidence("topic 137", big);
  REQUIRE(found.has_value());
  CHECK(found->quote.find("topic 137") != std::string::npos);
}

TEST_CASE("verification 5: the lexical judge") {
  evidence full{1, "At -15 C a typical unit still reaches a COP of about 2.", 0.9, true};
  CHECK(judge_lexically("x", full).result == verdict::supported);
  evidence wrong_number{1, "q", 0.9, false};
  CHECK(judge_lexically("x", wrong_number).result == verdict::partly_supported);
  evidence half{1, "q", 0.5, true};
  CHECK(judge_lexically("x", half).result == verdict::partly_supported);
  evidence little{1, "q", 0.2, true};
  CHECK(judge_lexically("x", little).result == verdict::unsupported);
  CHECK(judge_lexically("x", std::nullopt).result == verdict::no_evidence);
  // Against real evidence: a claim with a wrong number is not supported.
  auto docs = library();
  auto claim_text = "At -15 C a unit still reaches a COP of about 4.";
  auto j = judge_lexically(claim_text, best_evidence(claim_text, docs.at(1)));
  CHECK(j.result != verdict::supported);
}

TEST_CASE("verification 5: typographic minus signs, dashes and spaces part words as "
          "their ASCII forms do") {
  namespace lex = quarry::lexical;
  // U+2212 minus, U+2013 en dash, U+00A0 no-break space, U+202F narrow one.
  CHECK(lex::tokenize("rated down to \u221225\u00A0\u00B0C")
        == lex::tokenize("rated down to -25 \u00B0C"));
  CHECK(lex::tokenize("2\u20133 minutes") == std::vector<std::string>{"2", "3", "minut"});
  CHECK(lex::tokenize("10\u202Fkm") == std::vector<std::string>{"10", "km"});
  // Other non-ASCII letters stay inside their words.
  CHECK(lex::words("W\u00E4rmepumpe") == std::vector<std::string>{"w\u00E4rmepumpe"});
  // A cut-off sequence at the end is kept as bytes, not read past.
  CHECK(lex::tokenize(std::string_view{"a\xE2\x88", 3}).size() == 1);
  auto docs = std::map<int, indexed_document>{};
  docs[1] = index_document(src(1, "Myths", "https://m.example/",
                               "Modern units keep working well below freezing, and cold-climate "
                               "models are rated down to \u221225 \u00B0C or lower."));
  auto claim_text = "Cold-climate models are rated down to -25 \u00B0C or lower.";
  CHECK(judge_lexically(claim_text, best_evidence(claim_text, docs.at(1))).result
        == verdict::supported);
}

TEST_CASE("verification 5: a model judge's verdicts, held to the evidence") {
  std::vector<std::optional<evidence>> ev{
    evidence{1, "At -15 C a typical unit still reaches a COP of about 2.", 0.8, true},
    evidence{2, "A defrost cycle lasts two to ten minutes.", 0.8, true}, std::nullopt};
  auto args = json{{"verdicts",
                    {{{"id", 0}, {"verdict", "supported"}, {"quote", "reaches a COP of about 2"}},
                     {{"id", 1}, {"verdict", "supported"}, {"quote", "lasts an hour"}},
                     {{"id", 2}, {"verdict", "supported"}, {"quote", "x"}},
                     {{"id", 9}, {"verdict", "supported"}},
                     {{"id", 0}, {"verdict", "nonsense"}}}}};
  auto read = read_judgements(args, ev);
  REQUIRE(std::holds_alternative<std::vector<judgement>>(read));
  auto& js = std::get<std::vector<judgement>>(read);
  REQUIRE(js.size() == 3);
  CHECK(js[0].result == verdict::supported);
  CHECK(js[0].quote == "reaches a COP of about 2");
  // A quote that is not in the evidence: not fully supported.
  CHECK(js[1].result == verdict::partly_supported);
  CHECK(js[1].quote == "A defrost cycle lasts two to ten minutes.");
  // No evidence stays no evidence, whatever the judge says.
  CHECK(js[2].result == verdict::no_evidence);
  CHECK(std::holds_alternative<std::string>(read_judgements(json{{"verdicts", 3}}, ev)));
  CHECK(std::holds_alternative<std::string>(
    read_judgements(json{{"verdicts", {{{"id", 7}, {"verdict", "supported"}}}}}, ev)));
  CHECK(judge_tool().parameters["properties"].contains("verdicts"));
  claim c0;
  c0.text = "Claim zero.";
  auto prompt = judge_prompt({c0}, {ev[0]});
  CHECK(prompt.find("Claim 0: Claim zero.") != std::string::npos);
  CHECK(prompt.find("source [1]") != std::string::npos);
}

TEST_CASE("verification 6: re-citing to a read source, marking and dropping") {
  auto docs = library();
  std::string report = "Reverse-cycle defrost briefly runs the heat pump backwards to melt "
                       "frost [1]. Defrost is made of cheese and chocolate [2]. Cold-climate "
                       "models use variable-speed compressors for Heat Pumps.\n";
  auto claims = split_claims(report);
  REQUIRE(claims.size() == 3);
  auto results = judge_all(claims, docs);
  // The first cites [1], but [2] says it.
  REQUIRE(results[0].recited_to.has_value());
  CHECK(*results[0].recited_to == 2);
  CHECK(results[1].judged.result == verdict::unsupported);
  CHECK_FALSE(results[1].recited_to.has_value());
  // The uncited fact finds its source.
  REQUIRE(results[2].recited_to.has_value());
  CHECK(*results[2].recited_to == 1);
  auto marked = apply_verification(report, results, action::mark);
  CHECK(marked.find("to melt frost [2].") != std::string::npos);
  CHECK(marked.find("made of cheese and chocolate [2] *(unverified)*.") != std::string::npos);
  CHECK(marked.find("for Heat Pumps [1].") != std::string::npos);
  auto dropped = apply_verification(report, results, action::drop);
  CHECK(dropped.find("cheese") == std::string::npos);
  CHECK(dropped.find("to melt frost [2]. Cold-climate") != std::string::npos);
  // In a report with links, the new marker is a link too (when its URL is
  // known); an uncited claim gets the plain form.
  std::string linked = "Reverse-cycle defrost briefly runs the heat pump backwards to melt "
                       "frost [[1]](https://a.example/cold).";
  auto linked_claims = split_claims(linked);
  REQUIRE(linked_claims.size() == 1);
  claim_result lr;
  lr.subject = linked_claims[0];
  lr.recited_to = 2;
  lr.judged = results[0].judged;
  std::map<int, std::string> urls{{1, "https://a.example/cold"}, {2, "https://b.example/defrost"}};
  CHECK(apply_verification(linked, {lr}, action::mark, urls)
        == "Reverse-cycle defrost briefly runs the heat pump backwards to melt frost "
           "[[2]](https://b.example/defrost).");
  CHECK(apply_verification(linked, {lr}, action::mark)
        == "Reverse-cycle defrost briefly runs the heat pump backwards to melt frost [2].");
  CHECK(apply_verification(report, results, action::mark, urls) == marked);
  // Out-of-range claims are ignored, not applied.
  auto bogus = results;
  bogus[0].subject.end = report.size() + 100;
  CHECK_NOTHROW(apply_verification(report, bogus, action::mark));

  // 7. summary.
  auto s = summarize(results);
  CHECK(s.claims == 3);
  CHECK(s.cited == 2);
  CHECK(s.recited == 2);
  CHECK(s.unsupported == 1);
  CHECK(s.rate == doctest::Approx(2.0 / 3.0));
  auto section = summary_section(s, action::mark);
  CHECK(section.rfind("## Verification\n", 0) == 0);
  CHECK(section.find("3 claims") != std::string::npos);
  CHECK(section.find("2 re-cited") != std::string::npos);
  CHECK(section.find("Verified: 67 %") != std::string::npos);
  auto p = claim_verified_packet(results[1]);
  CHECK(p["type"] == "claim_verified");
  CHECK(p["verdict"] == "unsupported");
  CHECK(p["citations"] == json::array({2}));
  CHECK(summary_packet(s)["type"] == "verification_summary");
}

TEST_CASE("verification 7: claims the deadline cut are unverified, not failures") {
  std::vector<claim_result> results(4);
  results[0].judged.result = verdict::supported;
  results[1].judged.result = verdict::supported;
  results[2].judged.result = verdict::unverified;
  results[3].judged.result = verdict::unverified;
  auto s = summarize(results);
  CHECK(s.unverified == 2);
  CHECK(s.rate == doctest::Approx(1.0));
  CHECK(summary_section(s, action::drop).find("2 not checked before the deadline")
        != std::string::npos);
  CHECK(summarize({}).rate == 0.0);
  CHECK(parse_verdict("partly supported") == verdict::partly_supported);
  CHECK_FALSE(parse_verdict("maybe").has_value());
  CHECK(parse_action("drop") == action::drop);
  CHECK_FALSE(parse_action("delete").has_value());
}

TEST_CASE("verification: evidence has its range in the document, and says when it is a snippet") {
  auto docs = library();
  const auto& text = docs.at(1).source.text;
  auto ev = best_evidence("At -15 C a unit still reaches a COP of about 2.", docs.at(1));
  REQUIRE(ev.has_value());
  REQUIRE(ev->end <= text.size());
  REQUIRE(ev->begin < ev->end);
  // The range holds the quote (the quote is never longer than the range).
  CHECK(text.substr(ev->begin, ev->end - ev->begin).find(ev->quote) == 0);
  CHECK_FALSE(ev->snippet_only);
  auto j = judge_lexically("At -15 C a unit still reaches a COP of about 2.", ev);
  CHECK(j.judge == "lexical");
  CHECK(j.begin == ev->begin);
  CHECK(j.end == ev->end);
  // A search result never opened: judged by its snippet, and labelled so.
  auto snippet = src(7, "A search result", "https://d.example/", "Defrost cycles last minutes.");
  snippet.snippet_only = true;
  snippet.document_id = "https://d.example/";
  auto doc = index_document(snippet);
  auto sev = best_evidence("Defrost cycles last minutes.", doc);
  REQUIRE(sev.has_value());
  CHECK(sev->snippet_only);
  CHECK(judge_prompt({split_claims("Defrost cycles last minutes [7].")[0]}, {sev})
          .find("search snippet only")
        != std::string::npos);
  auto judged = judge_lexically("Defrost cycles last minutes.", sev);
  CHECK(judged.snippet_only);
  claim_result r;
  r.subject = split_claims("Defrost cycles last minutes [7].")[0];
  r.judged = judged;
  auto p = claim_verified_packet(r);
  CHECK(p["snippet_only"] == true);
  CHECK(p["judge"] == "lexical");
  CHECK(p["id"] == 0);
  auto s = summarize({r});
  CHECK(s.snippet_only == 1);
  CHECK(summary_section(s, action::mark).find("snippet only") != std::string::npos);
  CHECK(summary_packet(s)["snippet_only"] == 1);
  // A model's verdict carries the evidence's range and label too.
  auto read = read_judgements(
    json{{"verdicts",
          json::array({{{"id", 0}, {"verdict", "supported"}, {"quote", "last minutes"}}})}},
    {sev});
  REQUIRE(std::holds_alternative<std::vector<judgement>>(read));
  const auto& m = std::get<std::vector<judgement>>(read)[0];
  CHECK(m.judge == "model");
  CHECK(m.snippet_only);
  CHECK(m.end == sev->end);
}

TEST_CASE("verification: the claims' ranges in the verified report, and their records") {
  auto docs = library();
  std::string report = "Reverse-cycle defrost briefly runs the heat pump backwards to melt "
                       "frost [1]. Defrost is made of cheese and chocolate [2]. At -15 C a "
                       "typical unit still reaches a COP of about 2 [1].\n";
  auto claims = split_claims(report);
  REQUIRE(claims.size() == 3);
  auto results = judge_all(claims, docs);
  REQUIRE(results[0].recited_to == std::optional<int>{2});
  REQUIRE(results[1].judged.result == verdict::unsupported);
  REQUIRE(results[2].judged.result == verdict::supported);
  for (auto what : {action::mark, action::drop}) {
    std::vector<std::optional<span>> spans;
    auto out = apply_verification(report, results, what, {}, &spans);
    REQUIRE(spans.size() == 3);
    REQUIRE(spans[0].has_value());
    REQUIRE(spans[2].has_value());
    // Each kept claim's range holds its sentence in the new text.
    auto at = [&](size_t i) {
      return out.substr(spans[i]->first, spans[i]->second - spans[i]->first);
    };
    CHECK(at(0).rfind("Reverse-cycle defrost", 0) == 0);
    CHECK(at(0).find("[2].") != std::string::npos);
    CHECK(at(2).rfind("At -15 C", 0) == 0);
    CHECK(at(2).find("COP of about 2 [1].") != std::string::npos);
    if (what == action::mark) {
      REQUIRE(spans[1].has_value());
      CHECK(at(1).rfind("Defrost is made of cheese", 0) == 0);
      CHECK(at(1).find("*(unverified)*.") != std::string::npos);
    } else {
      CHECK_FALSE(spans[1].has_value());
    }
    auto records = claim_records(results, spans, {{1, "doc-a"}, {2, "doc-b"}});
    REQUIRE(records.size() == 3);
    CHECK(records[0]["document_id"] == "doc-b");
    CHECK(records[0]["recited_to"] == 2);
    CHECK(records[2]["document_id"] == "doc-a");
    CHECK(records[2]["verdict"] == "supported");
    CHECK(records[2]["report_begin"] == spans[2]->first);
    // The evidence's range is in the cited document's text.
    auto b = records[2]["evidence_begin"].get<size_t>();
    auto e = records[2]["evidence_end"].get<size_t>();
    CHECK(docs.at(1).source.text.substr(b, e - b).find("COP of about 2") != std::string::npos);
    CHECK(records[1]["verdict"] == "unsupported");
    CHECK(records[1]["report_begin"].is_null() == (what == action::drop));
  }
}

} // namespace verification_test
