// Tests of Quarry's one stemmer (quarry/lexical/stemmer.hpp): the Snowball
// stemmer of each language the corpus stems, the cached English stem that
// lexical matching uses (equal to the stemmer's own answer whatever the
// cache holds, on any thread), and the words lexical::tokenize and
// lexical::words give.

#include "quarry/lexical/lexical.hpp"
#include "quarry/lexical/stemmer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

namespace lexical_test {

namespace lex = quarry::lexical;

namespace {

// Distinct words, many of them inflected: "pump0s", "pump0ing", ...
std::vector<std::string> many_words(size_t n) {
  static const char* endings[] = {"", "s", "ing", "ed", "ies", "ation", "ness"};
  std::vector<std::string> out;
  for (size_t i = 0; out.size() < n; ++i)
    for (const auto* e : endings)
      out.push_back("pump" + std::to_string(i) + "x" + e);
  out.resize(n);
  return out;
}

} // namespace

TEST_CASE("lexical stemmer: each language the corpus stems has its Snowball stemmer") {
  struct word_pair {
    const char* language;
    const char* a;
    const char* b;
  };
  // Two inflections that must share a stem.
  const word_pair pairs[] = {
    {"en", "running", "runs"},         {"de", "häuser", "haus"},       {"fr", "maisons", "maison"},
    {"es", "edificios", "edificio"},   {"it", "finestre", "finestra"}, {"nl", "dijken", "dijk"},
    {"pt", "geladeiras", "geladeira"}, {"ru", "насосы", "насос"},
  };
  for (const auto& p : pairs) {
    CAPTURE(p.language);
    lex::stemmer s{p.language};
    REQUIRE(s.stems());
    CHECK(s.stem(p.a) == s.stem(p.b));
  }
  lex::stemmer none{"sv"};
  CHECK_FALSE(none.stems());
  CHECK(none.stem("husen") == "husen");
  // Overlong and empty words are not stemmed.
  lex::stemmer en{"en"};
  std::string huge(lex::stemmer::max_stemmed_bytes + 1, 'a');
  CHECK(en.stem(huge) == huge);
  CHECK(en.stem("").empty());
}

TEST_CASE("lexical stem: English Snowball, the same as the stemmer's own answer") {
  // Inflections meet (the plural-only stemmer this replaced kept "falling",
  // "sized" and "declining" apart from their other forms).
  CHECK(lex::stem("batteries") == lex::stem("battery"));
  CHECK(lex::stem("pumps") == "pump");
  CHECK(lex::stem("falling") == "fall");
  CHECK(lex::stem("falls") == "fall");
  CHECK(lex::stem("sized") == lex::stem("sizing"));
  CHECK(lex::stem("sizing") == lex::stem("size"));
  CHECK(lex::stem("declining") == lex::stem("decline"));
  CHECK(lex::stem("controlled") == lex::stem("control"));
  CHECK(lex::stem("gas") == "gas");
  CHECK(lex::stem("2025") == "2025");
  CHECK(lex::stem("").empty());
  // More words than the cache holds, twice: each answer equals the
  // stemmer's, whether it came from the cache or not.
  lex::stemmer en{"en"};
  auto words = many_words(10000);
  for (int round = 0; round < 2; ++round)
    for (const auto& w : words)
      REQUIRE(lex::stem(w) == en.stem(w));
}

TEST_CASE("lexical stem: every thread has its own stemmer and cache") {
  auto words = many_words(3000);
  std::vector<std::string> expected;
  lex::stemmer en{"en"};
  for (const auto& w : words)
    expected.push_back(en.stem(w));
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < wrong.size(); ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < words.size(); ++i) {
          auto k = (i * (t + 1) + static_cast<size_t>(round)) % words.size();
          if (lex::stem(words[k]) != expected[k])
            ++wrong[t];
        }
    });
  for (auto& t : threads)
    t.join();
  for (auto n : wrong)
    CHECK(n == 0);
}

TEST_CASE("lexical tokenize: words without stop words, stemmed; words as written") {
  CHECK(lex::words("The Batteries of heat-pumps, falling!")
        == std::vector<std::string>{"batteries", "heat", "pumps", "falling"});
  CHECK(lex::tokenize("The Batteries of heat-pumps, falling!")
        == std::vector<std::string>{"batteri", "heat", "pump", "fall"});
  // Non-ASCII letters stay inside their words.
  CHECK(lex::words("W\u00E4rmepumpe") == std::vector<std::string>{"w\u00E4rmepumpe"});
  // A question framed by documents: its framing words are no key words,
  // whatever their inflection.
  CHECK(lex::is_framing_word(lex::stem("sources")));
  CHECK(lex::is_framing_word(lex::stem("describes")));
  CHECK_FALSE(lex::is_framing_word(lex::stem("pumps")));
  auto framed = lex::question_coverage("Which documents describe pump noise?",
                                       {"Pump noise is low."});
  CHECK(framed.terms == 2);
  CHECK(framed.answered);
}

} // namespace lexical_test
