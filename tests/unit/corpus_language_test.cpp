// Tests of the local corpus's languages: detection per document, stop
// words, case and diacritic folding, Snowball stemming (lexical::stemmer) in
// English, German, French, Spanish, Italian, Dutch, Portuguese and Russian,
// and Chinese, Japanese and Korean text searchable by character pairs.

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/language.hpp"
#include "quarry/lexical/stemmer.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace corpus_language_test {

using namespace quarry;
using namespace quarry::corpus;

namespace {

// One document per language: a few sentences of ordinary prose, and a
// query that matches it only through stemming (another inflection of its
// words) or, for CJK, through character pairs.
struct language_case {
  const char* language;
  const char* file;
  const char* text;
  const char* query;
};

const language_case cases[] = {
  {"en", "en.md",
   "# Batteries\n\nThe batteries were charging slowly because the garage "
   "was cold, and the owners noticed that their cars lost range in winter.",
   "battery charged"},
  {"de", "de.md",
   "# Wärmepumpen\n\nDie Wärmepumpen arbeiten auch bei niedrigen "
   "Temperaturen effizient, weil die Häuser gut gedämmt sind und die "
   "Heizkörper groß genug sind.",
   "Wärmepumpe Haus"},
  {"fr", "fr.md",
   "# Pompes\n\nLes pompes à chaleur fonctionnent bien dans les maisons "
   "anciennes et elles sont très efficaces pendant les hivers doux.",
   "pompe maison"},
  {"es", "es.md",
   "# Calderas\n\nLas calderas de gas son todavía muy comunes en los "
   "edificios y los propietarios pagan facturas altas cada invierno.",
   "caldera edificio"},
  {"it", "it.md",
   "# Cantine\n\nLe cantine delle case vecchie sono umide e i proprietari "
   "devono aprire le finestre per asciugare i muri durante l'estate.",
   "cantina finestra"},
  {"nl", "nl.md",
   "# Dijken\n\nDe dijken beschermen de polders tegen het water en zij "
   "worden elk jaar door de waterschappen gecontroleerd.",
   "dijk polder"},
  {"pt", "pt.md",
   "# Geladeiras\n\nAs geladeiras consomem menos energia quando as portas "
   "ficam fechadas e os alimentos são guardados frios.",
   "geladeira porta"},
  {"ru", "ru.md",
   "# Насосы\n\nТепловые насосы работают эффективно даже в холодных домах, "
   "если они хорошо утеплены и если радиаторы достаточно большие.",
   "насос радиатор"},
  {"zh", "zh.md", "# 热泵\n\n热泵在寒冷天气中的效率会下降，但是现代的压缩机可以弥补这个问题。",
   "寒冷天气"},
  {"ja", "ja.md",
   "# ヒートポンプ\n\nヒートポンプは寒い地域でも効率よく暖房できます。"
   "冬の電気代は灯油より安いことが多いです。",
   "暖房"},
  {"ko", "ko.md", "# 히트펌프\n\n히트펌프는 추운 날씨에도 난방을 효율적으로 할 수 있습니다.",
   "난방"},
};

std::unique_ptr<corpus_index> open_index(const std::string& path) {
  auto opened = corpus_index::open(path);
  if (opened.failure)
    FAIL("open failed: " << opened.failure->message);
  REQUIRE(opened.index != nullptr);
  return std::move(opened.index);
}

std::string file_name(const search_hit& hit) {
  return hit.path.substr(hit.path.rfind('/') + 1);
}

} // namespace

TEST_CASE("corpus_language detects the language of a text") {
  for (const auto& c : cases) {
    CAPTURE(c.language);
    CHECK(detect_language(c.text) == c.language);
  }
  // Too little evidence: no stop words, no telling script.
  CHECK(detect_language("").empty());
  CHECK(detect_language("Heat pump COP 3.5 at 7 °C").empty());
  CHECK(detect_language("42 17 99").empty());
  // A single stop word is enough when asked for less evidence (queries).
  CHECK(detect_language("warum Wärmepumpe", 1) == "de");
  CHECK(detect_language("why heat pumps", 1) == "en");
  // Only the first 8 KB are read: a long text is cheap.
  std::string long_text(1 << 20, 'x');
  CHECK(detect_language(long_text).empty());
  // Invalid UTF-8 does not trip it.
  CHECK(detect_language("\xff\xfe die und der das ist \xc3").size() == 2);
}

TEST_CASE("corpus_language knows stop words, folds case and diacritics") {
  CHECK(is_stop_word("en", "the"));
  CHECK(is_stop_word("de", "und"));
  CHECK(is_stop_word("fr", "les"));
  CHECK(is_stop_word("es", "los"));
  CHECK(is_stop_word("it", "della"));
  CHECK(is_stop_word("nl", "het"));
  CHECK(is_stop_word("pt", "não"));
  CHECK(is_stop_word("ru", "что"));
  CHECK_FALSE(is_stop_word("en", "die"));
  CHECK_FALSE(is_stop_word("de", "pumpe"));
  CHECK_FALSE(is_stop_word("xx", "the"));
  CHECK(fold_case("Wärme ÜBER Straße") == "wärme über straße");
  CHECK(fold_case("Привет ЁЛКА") == "привет ёлка");
  CHECK(fold_case("ŁÓDŹ") == "łódź");
  CHECK(strip_diacritics("wärme") == "warme");
  CHECK(strip_diacritics("straße") == "strasse");
  CHECK(strip_diacritics("été") == "ete");
  CHECK(strip_diacritics("cœur") == "coeur");
  CHECK(strip_diacritics("łódź") == "lodz");
  CHECK(strip_diacritics("привет") == "привет");
  CHECK(normalize_language("de-AT") == "de");
  CHECK(normalize_language("pt_BR") == "pt");
  CHECK(normalize_language("EN") == "en");
  CHECK(normalize_language("zh-Hans") == "zh");
  CHECK(normalize_language("sv").empty());
  CHECK(normalize_language("english").empty());
  CHECK(is_cjk(U'热'));
  CHECK(is_cjk(U'ヒ'));
  CHECK(is_cjk(U'난'));
  CHECK_FALSE(is_cjk(U'a'));
}

TEST_CASE("corpus_language: every language it stems has a Snowball stemmer") {
  // The stemmers themselves: lexical_test.cpp.
  for (const auto& language : stemmed_languages()) {
    CAPTURE(language);
    CHECK(lexical::stemmer{language}.stems());
  }
}

TEST_CASE("corpus_language: documents in each language are found by "
          "another inflection, and CJK text by its characters") {
  test::temp_dir tmp;
  for (const auto& c : cases)
    tmp.write(std::string{"docs/"} + c.file, c.text);
  auto index = open_index(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  REQUIRE(r.added == std::size(cases));
  for (const auto& c : cases) {
    CAPTURE(c.language);
    CAPTURE(c.query);
    auto found = index->search(c.query, 3);
    REQUIRE_FALSE(found.failure.has_value());
    REQUIRE_FALSE(found.hits.empty());
    CHECK(file_name(found.hits.front()) == c.file);
    CHECK(found.hits.front().language == c.language);
    auto doc = index->get_document(found.hits.front().document_id);
    REQUIRE(doc.has_value());
    CHECK(doc->language == c.language);
  }
  // Diacritics need not be typed.
  auto plain = index->search("Warmepumpen Hauser", 3);
  REQUIRE_FALSE(plain.hits.empty());
  CHECK(file_name(plain.hits.front()) == "de.md");
  // A CJK word inside a sentence, and one that is not in the text.
  auto inside = index->search("效率", 3);
  REQUIRE_FALSE(inside.hits.empty());
  CHECK(file_name(inside.hits.front()) == "zh.md");
  CHECK(index->search("天气预报", 3).hits.empty());
  // A German word does not find the English document by accident.
  for (const auto& hit : index->search("Heizkörper", 10).hits)
    CHECK(file_name(hit) == "de.md");
}

TEST_CASE("corpus_language: a query's stop words are dropped, unless "
          "nothing else is left") {
  test::temp_dir tmp;
  tmp.write("docs/a.md", "# Heat\n\nThe heat pump moves heat from the air.");
  tmp.write("docs/b.md", "# Other\n\nThe cat sat on the mat and the dog too.");
  tmp.write("docs/c.md", "# Band\n\nThe Who played loud rock music.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  // "the" is in every document; only "heat" selects.
  auto r = index->search("how does the heat", 10);
  REQUIRE(r.hits.size() == 1);
  CHECK(file_name(r.hits.front()) == "a.md");
  // Only stop words: searched as they are.
  auto who = index->search("the who", 10);
  REQUIRE_FALSE(who.hits.empty());
  CHECK(file_name(who.hits.front()) == "c.md");
  // In a phrase, stop words count.
  auto phrase = index->search("\"on the mat\"", 10);
  REQUIRE(phrase.hits.size() == 1);
  CHECK(file_name(phrase.hits.front()) == "b.md");
}

TEST_CASE("corpus_language: a changed document leaves no word of its old "
          "text in the index, whatever its language") {
  test::temp_dir tmp;
  tmp.write("docs/de.md", "# Häuser\n\nDie Häuser sind alt und die Dächer "
                          "sind undicht, aber die Mieter bleiben gern.");
  auto index = open_index(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  CHECK(index->search("Haus", 5).hits.size() == 1);
  // The new text (in French now) reuses the passage ids of the old one;
  // the old words must be gone from the index, not point at the new text.
  tmp.write("docs/de.md", "# Jardins\n\nLes jardins sont grands et les "
                          "arbres sont vieux, mais les voisins restent.");
  auto later = std::filesystem::last_write_time(tmp.file("docs/de.md")) + std::chrono::seconds{5};
  std::filesystem::last_write_time(tmp.file("docs/de.md"), later);
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.updated == 1);
  CHECK(index->search("Haus", 5).hits.empty());
  CHECK(index->search("Dächer", 5).hits.empty());
  auto fr = index->search("jardin arbre", 5);
  REQUIRE(fr.hits.size() == 1);
  CHECK(fr.hits.front().language == "fr");
}

TEST_CASE("corpus_language: hostile text and queries reach the tokenizer "
          "without errors") {
  test::temp_dir tmp;
  std::string cjk_run;
  for (int i = 0; i < 20000; ++i)
    cjk_run += i % 2 == 0 ? "热" : "泵";
  // Bad bytes (decoded to U+FFFD), a 100 KB word, a CJK run of 20,000
  // characters without punctuation, lone combining marks, a word that
  // mixes scripts.
  tmp.write("docs/bytes.txt", "Kettle \xff\xfe\xc3 boils \xe2\x82 water.");
  tmp.write("docs/long.md",
            "# Long\n\n" + std::string(100000, 'q') + " ends here.\n\n" + cjk_run + "\n");
  tmp.write("docs/marks.md", "# Marks\n\n\xcc\x81\xcc\x81 e\xcc\x81t\xc3\xa9 "
                             "abc\xe7\x83\xad\xe6\xb3\xb5"
                             "def mixed.\n");
  auto index = open_index(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 3);
  const std::vector<std::string> queries{
    "\xff\xfe \xc3",          std::string(5000, 'q'),
    cjk_run.substr(0, 30000), "\xcc\x81",
    "abc\xe7\x83\xad",        "\"\xe7\x83\xad\xe6\xb3\xb5 def\"",
    std::string(200, '\xe7'), "热"};
  for (const auto& q : queries) {
    CAPTURE(q.size());
    auto found = index->search(q, 5);
    CHECK_FALSE(found.failure.has_value());
  }
  // The text around the bad bytes and the mixed word's parts are found.
  auto kettle = index->search("kettle boils", 5);
  REQUIRE_FALSE(kettle.hits.empty());
  CHECK(file_name(kettle.hits.front()) == "bytes.txt");
  auto mixed = index->search("abc", 5);
  REQUIRE_FALSE(mixed.hits.empty());
  CHECK(file_name(mixed.hits.front()) == "marks.md");
  auto pair = index->search("热泵", 5);
  REQUIRE_FALSE(pair.hits.empty());
  // The index stays consistent: the files are removed without a trace.
  std::filesystem::remove_all(tmp.file("docs"));
  std::filesystem::create_directories(tmp.file("docs"));
  auto gone = index->update({tmp.file("docs")});
  REQUIRE_FALSE(gone.failure.has_value());
  CHECK(gone.removed == 3);
  CHECK(index->search("kettle", 5).hits.empty());
  CHECK(index->search("热泵", 5).hits.empty());
}

TEST_CASE("corpus_language: tokens recorded while reading index the same "
          "as tokens made while inserting") {
  // Every language case, hostile bytes, a CJK run and mixed scripts, in
  // two indexes: one tokenized on the reading thread, one as inserted.
  // Every word of the texts finds the same passages with the same scores,
  // and after the files change and go, nothing is left in either.
  test::temp_dir tmp;
  std::string all_text;
  for (const auto& c : cases) {
    tmp.write(std::string{"docs/"} + c.file, c.text);
    all_text += std::string{c.text} + "\n";
  }
  std::string odd = "# Odd\n\nKettle \xff\xfe\xc3 boils \xe2\x82 water. "
                    "abc\xe7\x83\xad\xe6\xb3\xb5"
                    "def e\xcc\x81t\xc3\xa9.\n\n"
                    "## Empty heading next\n\n##\n\nText under it.\n";
  tmp.write("docs/odd.md", odd);
  all_text += odd;
  auto recorded = open_index(tmp.file("recorded.db"));
  auto inserted = open_index(tmp.file("inserted.db"));
  update_options direct;
  direct.tokenize_while_reading = false;
  REQUIRE_FALSE(recorded->update({tmp.file("docs")}).failure.has_value());
  REQUIRE_FALSE(inserted->update({tmp.file("docs")}, direct).failure.has_value());
  std::set<std::string> words;
  std::string word;
  for (char c : all_text + " ") {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalnum(u)) {
      word += c;
    } else {
      if (!word.empty())
        words.insert(word);
      word.clear();
    }
  }
  REQUIRE(words.size() > 100);
  size_t found = 0;
  auto compare = [&](const std::string& q) {
    CAPTURE(q);
    auto a = recorded->search(q, 20);
    auto b = inserted->search(q, 20);
    REQUIRE(a.hits.size() == b.hits.size());
    for (size_t i = 0; i < a.hits.size(); ++i) {
      CHECK(a.hits[i].path == b.hits[i].path);
      CHECK(a.hits[i].passage_id == b.hits[i].passage_id);
      CHECK(a.hits[i].score == doctest::Approx(b.hits[i].score));
    }
    found += a.hits.size();
  };
  for (const auto& w : words)
    compare(w);
  CHECK(found >= words.size());
  // Changed (the German file rewritten in French), then removed: both
  // indexes delete with the tokens the text was indexed with.
  tmp.write("docs/de.md", "# Jardins\n\nLes jardins sont grands.");
  auto later = std::filesystem::last_write_time(tmp.file("docs/de.md")) + std::chrono::seconds{5};
  std::filesystem::last_write_time(tmp.file("docs/de.md"), later);
  REQUIRE_FALSE(recorded->update({tmp.file("docs")}).failure.has_value());
  REQUIRE_FALSE(inserted->update({tmp.file("docs")}, direct).failure.has_value());
  for (const auto& q : {"Wärmepumpen", "Häuser", "jardin"})
    compare(q);
  CHECK(recorded->search("jardin", 5).hits.size() == 1);
  std::filesystem::remove_all(tmp.file("docs"));
  std::filesystem::create_directories(tmp.file("docs"));
  REQUIRE(recorded->update({tmp.file("docs")}).removed == std::size(cases) + 1);
  REQUIRE(inserted->update({tmp.file("docs")}, direct).removed == std::size(cases) + 1);
  CHECK(recorded->size() == std::pair<size_t, size_t>{0, 0});
  for (const auto& w : words)
    CHECK(recorded->search(w, 5).hits.empty());
}

} // namespace corpus_language_test
