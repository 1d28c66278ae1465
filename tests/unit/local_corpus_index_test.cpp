// Tests of the local corpus: passage splitting, query sanitising, HTML text,
// and the SQLite index (incremental updates, search, PDF and HTML files,
// refusing foreign files, symbolic links out of the folder, FIFOs, size caps,
// binary text, several writers creating one database).

#include "quarry/corpus/index.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/extract/html.hpp"

#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

namespace local_corpus_index_test {

using namespace quarry;
using namespace quarry::corpus;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Moves the file's modification time by `seconds` (file systems with coarse
// timestamps would otherwise hide quick rewrites).
void shift_mtime(const std::string& path, int seconds) {
  auto t = fs::last_write_time(path);
  fs::last_write_time(path, t + std::chrono::seconds{seconds});
}

std::string filler(const std::string& word, size_t n) {
  std::string result;
  for (size_t i = 0; i < n; ++i)
    result += word + std::to_string(i % 7) + " ";
  return result;
}

// The notes of an update, one a line (for failure messages).
std::string join_notes(const std::vector<std::string>& notes) {
  std::string out;
  for (const auto& n : notes)
    out += n + "\n";
  return out;
}

std::unique_ptr<corpus_index> open_ok(const std::string& path) {
  auto opened = corpus_index::open(path);
  if (opened.failure)
    FAIL("open failed: " << opened.failure->message);
  REQUIRE(opened.index != nullptr);
  return std::move(opened.index);
}

// Writes the three documents of the sample corpus (and files to skip).
void write_corpus(const test::temp_dir& dir) {
  dir.write("docs/plants.md", "# Plants\n\nIntro about gardens and soil.\n\n"
                              "## Photosynthesis\n\nChlorophyll absorbs light; photosynthesis "
                              "turns carbon dioxide and water into glucose.\n\n"
                              "## Roots\n\nRoots take up water and minerals.\n");
  dir.write("docs/sub/rivers.txt", "Rivers carry sediment to the sea. The delta of the Nile is "
                                   "fertile.\n\nFloods renew the soil every year.\n");
  dir.write("docs/sub/page.html", "<html><head><title>Volcano &amp; Magma</title>"
                                  "<style>p { color: red; }</style></head><body>"
                                  "<script>var lava = 1;</script>"
                                  "<h2>Eruptions</h2><p>Basalt lava flows from shield "
                                  "volcanoes.</p><!-- comment obsidian --></body></html>");
  dir.write("docs/paper.pdf", "%PDF-1.4 not really");
  dir.write("docs/image.png", "\x89PNG");
  dir.write("docs/.hidden/secret.md", "# Secret\n\nquasar\n");
}

} // namespace

TEST_CASE("local_corpus splits passages on headings and paragraphs") {
  auto text = "# Title\n\nFirst para.\n\nSecond para.\n\n## Part two\n\n" + filler("alpha", 250)
              + "\n\n" + filler("beta", 300) + "\n";
  auto ps = split_passages(text, 2000);
  REQUIRE(ps.size() == 3);
  CHECK(ps[0].heading == "Title");
  CHECK(ps[0].text == "First para.\n\nSecond para.");
  CHECK(ps[1].heading == "Part two");
  CHECK(ps[1].text.rfind("alpha0 ", 0) == 0);
  CHECK(ps[1].text.find("beta") == std::string::npos);
  CHECK(ps[2].heading == "Part two");
  CHECK(ps[2].text.rfind("beta0 ", 0) == 0);
  for (const auto& p : ps)
    CHECK(p.text.size() <= 2000);
}

TEST_CASE("local_corpus cuts an overlong paragraph at whitespace") {
  auto para = filler("word", 1000); // about 6,000 characters
  auto ps = split_passages(para, 2000);
  REQUIRE(ps.size() >= 3);
  std::string joined;
  for (const auto& p : ps) {
    CHECK(p.text.size() <= 2000);
    if (&p != &ps.back())
      CHECK(p.text.size() >= 1900);
    CHECK(p.heading.empty());
    CHECK(p.text.back() != ' ');
    if (!joined.empty())
      joined += ' ';
    joined += p.text;
  }
  CHECK(joined + " " == para);
  // No whitespace at all: cut at a UTF-8 character boundary.
  std::string umlauts;
  for (int i = 0; i < 3000; ++i)
    umlauts += "\xC3\xA4"; // ä
  auto cut = split_passages(umlauts, 2001);
  REQUIRE(cut.size() == 3);
  for (const auto& p : cut)
    CHECK(p.text.size() % 2 == 0);
}

TEST_CASE("local_corpus sanitises queries into quoted terms") {
  CHECK(sanitize_fts_query("heat pumps") == R"("heat" OR "pumps")");
  CHECK(sanitize_fts_query(R"(NEAR("a" b) * -c (( ")") == R"("NEAR" OR "a" OR "b" OR "c")");
  CHECK(sanitize_fts_query("title:foo^ AND bar") == R"("title" OR "foo" OR "AND" OR "bar")");
  CHECK(sanitize_fts_query("").empty());
  CHECK(sanitize_fts_query("  \"\" * - ( ) : ^ ").empty());
  CHECK(sanitize_fts_query("a b c d", 2) == R"("a" OR "b")");
  CHECK(sanitize_fts_query("Größe") == "\"Größe\"");
}

TEST_CASE("local_corpus strips HTML tags and keeps the title") {
  // HTML is read by the extraction module: the title, the text with its
  // headings, entities decoded, scripts and comments gone.
  const std::string html = "<html><head><TITLE> A &amp; B </TITLE>"
                           "<script>if (a < b) x();</script></head>"
                           "<body><h1>Head</h1><p>One&nbsp;two &#233;&#x263A;"
                           "</p><!-- gone --><div>Three</div></body></html>";
  CHECK(extract::extract_html(html).title == "A & B");
  CHECK(extract::html_to_text(html) == "# Head\n\nOne two \xC3\xA9\xE2\x98\xBA\n\nThree");
  // And so in the index.
  test::temp_dir tmp;
  tmp.write("docs/page.html", html);
  auto index = open_ok(tmp.file("corpus.db"));
  REQUIRE_FALSE(index->update({tmp.file("docs")}).failure.has_value());
  auto found = index->search("two three", 5);
  REQUIRE_FALSE(found.failure.has_value());
  REQUIRE(found.hits.size() == 1);
  CHECK(found.hits[0].title == "A & B");
  CHECK(found.hits[0].text.find("One two \xC3\xA9\xE2\x98\xBA") != std::string::npos);
  CHECK(found.hits[0].text.find("Three") != std::string::npos);
  CHECK(found.hits[0].text.find("gone") == std::string::npos);
  CHECK(found.hits[0].text.find("x();") == std::string::npos);
  CHECK(index->search("gone", 5).hits.empty());
}

TEST_CASE("local_corpus reads HTML files in their charset and names an unknown one") {
  test::temp_dir tmp;
  // "Привет, мир" in windows-1251, named by the page.
  tmp.write("docs/ru.html", "<html><head><meta charset=\"windows-1251\"><title>ru</title>"
                            "</head><body><p>\xCF\xF0\xE8\xE2\xE5\xF2, \xEC\xE8\xF0"
                            " zanzibar</p></body></html>");
  tmp.write("docs/odd.html", "<html><head><meta charset=\"x-martian\"><title>odd</title>"
                             "</head><body><p>quokka</p></body></html>");
  auto index = open_ok(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 2);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("odd.html: unknown charset \"x-martian\": read as UTF-8")
        != std::string::npos);
  auto ru = index->search("zanzibar", 5);
  REQUIRE(ru.hits.size() == 1);
  CHECK(ru.hits[0].text.find("\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, "
                             "\xD0\xBC\xD0\xB8\xD1\x80")
        != std::string::npos);
  CHECK(index->search("quokka", 5).hits.size() == 1);
}

TEST_CASE("local_corpus file URLs round-trip and refuse anything else") {
  for (std::string path : {"/a/b.md", "/tmp/My Docs/r\xC3\xA9sum\xC3\xA9 #1?.txt", "/x%y/"}) {
    CAPTURE(path);
    auto url = file_url(path);
    CHECK(url.find(' ') == std::string::npos);
    CHECK(path_from_file_url(url) == path);
  }
  CHECK(file_url("/a b/c") == "file:///a%20b/c");
  CHECK(path_from_file_url("file://localhost/etc/hosts") == "/etc/hosts");
  CHECK(path_from_file_url("file:///a/../etc/hosts") == "/etc/hosts");
  CHECK(path_from_file_url("file:///a?x#y") == "/a");
  for (auto bad : {"file://other.host/etc/hosts", "file:///a%2", "file:///a%zz", "file:///a%00b",
                   "http://example.com/a", "/etc/hosts", "file:/etc/hosts", "file:///a b", ""}) {
    CAPTURE(bad);
    CHECK(path_from_file_url(bad).empty());
  }
}

TEST_CASE("local_corpus indexes a folder and ranks the right passage first") {
  test::temp_dir tmp;
  write_corpus(tmp);
  auto index = open_ok(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 3);
  CHECK(r.updated == 0);
  CHECK(r.removed == 0);
  CHECK(r.unchanged == 0);
  CHECK(r.passages == 5); // plants: 3 sections, rivers: 1, page: 1
  // The fake PDF cannot be read: skipped with a note.
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("skipped") == 0);
  CHECK(r.notes[0].find("paper.pdf: damaged PDF") != std::string::npos);
  CHECK(index->size() == std::pair<size_t, size_t>{3, 5});
  auto found = index->search("how does chlorophyll do photosynthesis?", 5);
  REQUIRE_FALSE(found.failure.has_value());
  REQUIRE(found.hits.size() == 1);
  const auto& hit = found.hits[0];
  CHECK(hit.title == "Plants");
  CHECK(hit.heading == "Photosynthesis");
  CHECK(hit.path == fs::weakly_canonical(tmp.file("docs/plants.md")).string());
  CHECK(hit.url == "file://" + hit.path);
  CHECK(hit.text.rfind("Chlorophyll absorbs light", 0) == 0);
  CHECK(hit.snippet.find("Chlorophyll") != std::string::npos);
  // Several documents: the better match first.
  auto soil = index->search("floods soil sediment", 5);
  REQUIRE(soil.hits.size() == 2);
  CHECK(soil.hits[0].title == "rivers");
  CHECK(soil.hits[1].title == "Plants");
  CHECK(soil.hits[1].heading == "Plants");
  // HTML: title kept, headings remembered, scripts, styles, comments dropped.
  auto lava = index->search("basalt", 5);
  REQUIRE(lava.hits.size() == 1);
  CHECK(lava.hits[0].title == "Volcano & Magma");
  CHECK(lava.hits[0].heading == "Eruptions");
  CHECK(index->search("obsidian", 5).hits.empty());
  CHECK(index->search("lava", 5).hits.size() == 1); // the text, not the script
  CHECK(index->search("red", 5).hits.empty());
  CHECK(index->search("quasar", 5).hits.empty()); // hidden folder skipped
  // Stemming: "eruption" finds "Eruptions".
  CHECK(index->search("eruption", 5).hits.size() == 1);
  // The limit counts documents.
  CHECK(index->search("water soil sea", 1).hits.size() == 1);
  // Full text by id.
  auto doc = index->get_document(hit.document_id);
  REQUIRE(doc.has_value());
  CHECK(doc->text == slurp(tmp.file("docs/plants.md")));
  CHECK(doc->title == "Plants");
  CHECK_FALSE(index->get_document(999999).has_value());
}

TEST_CASE("local_corpus updates incrementally") {
  test::temp_dir tmp;
  write_corpus(tmp);
  auto db = tmp.file("corpus.db");
  auto index = open_ok(db);
  REQUIRE(index->update({tmp.file("docs")}).added == 3);
  auto rivers = tmp.file("docs/sub/rivers.txt");
  auto rivers_id = index->search("delta nile", 1).hits.at(0).document_id;
  SUBCASE("nothing changed") {
    auto r = index->update({tmp.file("docs")});
    CHECK(r.added + r.updated + r.removed + r.passages == 0);
    CHECK(r.unchanged == 3);
  }
  SUBCASE("touched without change: skipped by hash") {
    shift_mtime(rivers, 30);
    auto r = index->update({tmp.file("docs")});
    CHECK(r.unchanged == 3);
    CHECK(r.updated == 0);
    CHECK(r.passages == 0);
    // The new time is stored: the next update skips it without reading.
    CHECK(index->update({tmp.file("docs")}).unchanged == 3);
  }
  SUBCASE("modified: indexed again") {
    tmp.write("docs/sub/rivers.txt", "Glaciers carve valleys in mountains.\n");
    shift_mtime(rivers, 30);
    auto r = index->update({tmp.file("docs")});
    REQUIRE_FALSE(r.failure.has_value());
    CHECK(r.updated == 1);
    CHECK(r.unchanged == 2);
    CHECK(r.added == 0);
    CHECK(r.passages == 1);
    CHECK(index->search("nile", 5).hits.empty());
    auto hits = index->search("glaciers", 5).hits;
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].document_id == rivers_id);
    CHECK(index->size() == std::pair<size_t, size_t>{3, 5});
  }
  SUBCASE("deleted: removed") {
    fs::remove(rivers);
    auto r = index->update({tmp.file("docs")});
    CHECK(r.removed == 1);
    CHECK(r.unchanged == 2);
    CHECK(index->search("nile delta", 5).hits.empty());
    CHECK_FALSE(index->get_document(rivers_id).has_value());
    CHECK(index->size() == std::pair<size_t, size_t>{2, 4});
  }
  SUBCASE("single files; a file of another type is named in a note") {
    tmp.write("single/note.md", "# Note\n\nzeppelin\n");
    auto png = tmp.write("single/photo.png", "\x89PNG");
    auto r = index->update({tmp.file("single/note.md"), png});
    CHECK(r.added == 1);
    CHECK(r.removed == 0);
    REQUIRE(r.notes.size() == 1);
    CHECK(r.notes[0] == "skipped " + png + ": not a Markdown, text, HTML or PDF file");
    CHECK(index->search("zeppelin", 5).hits.size() == 1);
  }
  SUBCASE("an update of another folder removes nothing") {
    tmp.write("other/note.md", "# Note\n\nzeppelin\n");
    auto r = index->update({tmp.file("other")});
    CHECK(r.added == 1);
    CHECK(r.removed == 0);
    CHECK(index->size().first == 4);
  }
  SUBCASE("a vanished folder: its documents are removed") {
    fs::remove_all(tmp.file("docs/sub"));
    auto r = index->update({tmp.file("docs/sub")});
    CHECK(r.removed == 2);
    REQUIRE(r.notes.size() == 1);
    CHECK(r.notes[0].find("not found") != std::string::npos);
    CHECK(index->size().first == 1);
  }
  SUBCASE("the index persists across openings") {
    index.reset();
    auto again = open_ok(db);
    CHECK(again->size() == std::pair<size_t, size_t>{3, 5});
    CHECK(again->update({tmp.file("docs")}).unchanged == 3);
  }
}

TEST_CASE("local_corpus hostile queries never error") {
  test::temp_dir tmp;
  write_corpus(tmp);
  auto index = open_ok(tmp.file("corpus.db"));
  index->update({tmp.file("docs")});
  const std::vector<std::string> queries{"\"",
                                         "\"unbalanced",
                                         "NEAR(roots water)",
                                         "roots NEAR water",
                                         "*",
                                         "water*",
                                         "(((",
                                         ")",
                                         "-",
                                         "-water",
                                         "",
                                         "   ",
                                         "AND",
                                         "OR NOT",
                                         "heading:roots",
                                         "^roots",
                                         "{heading body}: water",
                                         "'; DROP TABLE x; --",
                                         "\xFF\xFE broken utf8 \xC3",
                                         std::string(5000, '(')};
  for (const auto& q : queries) {
    CAPTURE(q);
    auto r = index->search(q, 10);
    CHECK_FALSE(r.failure.has_value());
  }
  auto near = index->search("NEAR(roots water)", 10).hits;
  REQUIRE(near.size() == 1);
  CHECK(near[0].heading == "Roots");
  CHECK(index->search("-water", 10).hits.size() == 1);
  CHECK(index->search("", 10).hits.empty());
}

TEST_CASE("local_corpus refuses a file that is not its database") {
  test::temp_dir tmp;
  SUBCASE("not SQLite") {
    std::string bytes = "name,value\nalpha,1\nbeta,2\n" + std::string(4096, 'x');
    auto path = tmp.write("notes.csv", bytes);
    auto opened = corpus_index::open(path);
    REQUIRE(opened.failure.has_value());
    CHECK(opened.index == nullptr);
    CHECK(opened.failure->message.find("not a SQLite database") != std::string::npos);
    CHECK(opened.failure->message.find(path) != std::string::npos);
    CHECK(slurp(path) == bytes);
    CHECK_FALSE(fs::exists(path + "-wal"));
  }
  SUBCASE("a corrupt SQLite file") {
    std::string bytes{"SQLite format 3\0", 16};
    bytes += std::string(4080, '\x5A');
    auto path = tmp.write("broken.db", bytes);
    auto opened = corpus_index::open(path);
    REQUIRE(opened.failure.has_value());
    CHECK(opened.failure->message.find("corrupt") != std::string::npos);
    CHECK(slurp(path) == bytes);
  }
  SUBCASE("another application's SQLite database") {
    auto path = tmp.file("other.db");
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(
      sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr)
      == SQLITE_OK);
    sqlite3_close(db);
    auto bytes = slurp(path);
    auto opened = corpus_index::open(path);
    REQUIRE(opened.failure.has_value());
    CHECK(opened.failure->message.find("another application") != std::string::npos);
    CHECK(slurp(path) == bytes);
  }
  SUBCASE("a newer schema") {
    auto path = tmp.file("corpus.db");
    open_ok(path).reset();
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    auto opened = corpus_index::open(path);
    REQUIRE(opened.failure.has_value());
    CHECK(opened.failure->message.find("schema version 99") != std::string::npos);
  }
  SUBCASE("an empty file is set up") {
    auto path = tmp.write("empty.db", "");
    auto index = open_ok(path);
    CHECK(index->size() == std::pair<size_t, size_t>{0, 0});
  }
  SUBCASE("missing folders are created") {
    auto index = open_ok(tmp.file("a/b/corpus.db"));
    CHECK(fs::exists(tmp.file("a/b/corpus.db")));
  }
}

namespace {

std::string sentences(const std::string& word, int n) {
  std::string result = "<p>";
  for (int i = 0; i < n; ++i)
    result += word
              + " is described here with enough words, commas, and "
                "detail. ";
  return result + "</p>";
}

} // namespace

TEST_CASE("local_corpus indexes PDF files") {
  test::temp_dir tmp;
  test::pdf_spec spec;
  spec.pages = {"Geothermal energy\nHeat from the crust drives turbines.",
                "Binary cycle plants use isobutane."};
  spec.title = "Geothermal Primer";
  tmp.write("docs/geo.pdf", test::make_pdf_document(spec));
  tmp.write("docs/untitled.pdf", test::make_pdf({"Tidal lagoons store "
                                                 "seawater."}));
  tmp.write("docs/broken.pdf", test::make_pdf({"lost words"}).substr(0, 60));
  auto index = open_ok(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 2);
  CHECK(r.passages == 2);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("broken.pdf") != std::string::npos);
  auto hits = index->search("isobutane turbines", 5).hits;
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].title == "Geothermal Primer");
  CHECK(hits[0].path == fs::weakly_canonical(tmp.file("docs/geo.pdf")).string());
  auto doc = index->get_document(hits[0].document_id);
  REQUIRE(doc.has_value());
  CHECK(doc->text
        == "Geothermal energy\nHeat from the crust drives turbines."
           "\n\nBinary cycle plants use isobutane.");
  // No Title metadata: the file name.
  auto tidal = index->search("lagoons", 5).hits;
  REQUIRE(tidal.size() == 1);
  CHECK(tidal[0].title == "untitled");
  CHECK(index->search("lost", 5).hits.empty());
  SUBCASE("a changed PDF is indexed again") {
    tmp.write("docs/geo.pdf", test::make_pdf({"Fumaroles vent steam."}, "Geothermal Primer 2"));
    shift_mtime(tmp.file("docs/geo.pdf"), 30);
    auto again = index->update({tmp.file("docs")});
    CHECK(again.updated == 1);
    CHECK(again.unchanged == 1);
    CHECK(index->search("isobutane", 5).hits.empty());
    auto fum = index->search("fumaroles", 5).hits;
    REQUIRE(fum.size() == 1);
    CHECK(fum[0].title == "Geothermal Primer 2");
  }
  SUBCASE("a repaired PDF is added by the next update") {
    tmp.write("docs/broken.pdf", test::make_pdf({"found words"}));
    auto again = index->update({tmp.file("docs")});
    CHECK(again.added == 1);
    CHECK(again.unchanged == 2);
    CHECK(again.notes.empty());
    CHECK(index->search("found", 5).hits.size() == 1);
  }
}

TEST_CASE("local_corpus indexes the main content of HTML pages") {
  test::temp_dir tmp;
  // An article: navigation and footer are dropped.
  std::string article = "<html><head><title>Tides explained</title></head>"
                        "<body><nav><ul><li><a href='/'>Home</a></li><li>"
                        "<a href='/shop'>Shop zeppelin</a></li></ul></nav>"
                        "<article><h1>Tides explained</h1>";
  for (int i = 0; i < 4; ++i)
    article += "<p>The moon pulls the oceans, and the tides rise and fall "
               "twice a day along every coast. Spring tides come with the "
               "full and new moon, neap tides with the quarters.</p>";
  article += "</article><footer><p>Copyright marmalade</p></footer></body>"
             "</html>";
  tmp.write("site/tides.html", article);
  // Documentation-like: the scored main content keeps the first block only,
  // a quarter of the text (lists, definitions, code and a table are
  // dropped), so the whole page is indexed.
  auto reference = "<html><head><title>Reference</title></head><body><div><div><div>"
                   + sentences("alpha", 4) + "</div></div></div><ul><li>" + sentences("bravo", 2)
                   + "</li><li>" + sentences("charlie", 2) + "</li></ul><ol><li>"
                   + sentences("delta", 2) + "</li><li>" + sentences("kappa", 2)
                   + "</li></ol><dl><dt>echo</dt><dd>foxtrot golf hotel india juliet "
                     "kilo lima mike november oscar papa</dd><dt>quebec</dt><dd>romeo "
                     "sierra tango uniform victor whiskey xray yankee zulu</dd></dl><pre>"
                     "widget_open widget_close widget_open widget_close widget_resize "
                     "widget_move</pre><table><tr><td>lumen</td><td>candela</td></tr><tr>"
                     "<td>lux</td><td>nit</td></tr></table></body></html>";
  tmp.write("site/reference.htm", reference);
  {
    // The premise: main-content extraction alone would lose most of it.
    auto main = extract::extract_html(reference).text;
    CHECK(main.find("alpha") != std::string::npos);
    CHECK(main.find("charlie") == std::string::npos);
    CHECK(main.find("foxtrot") == std::string::npos);
    CHECK(main.size() * 3 < extract::html_to_text(reference).size());
  }
  // windows-1252 with a meta charset: decoded to UTF-8.
  tmp.write("site/latin.html", "<html><head><meta charset=\"windows-1252\">"
                               "<title>Caf\xE9</title></head><body><p>Cr\xE8me br\xFBl\xE9"
                               "e is served cold \x96 with caramel.</p></body></html>");
  auto index = open_ok(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("site")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 3);
  CHECK(r.notes.empty());
  auto tides = index->search("spring neap tides", 5).hits;
  REQUIRE(tides.size() == 1);
  CHECK(tides[0].title == "Tides explained");
  CHECK(index->search("zeppelin", 5).hits.empty());
  CHECK(index->search("marmalade", 5).hits.empty());
  auto ref = index->search("foxtrot", 5).hits;
  REQUIRE(ref.size() == 1);
  CHECK(ref[0].title == "Reference");
  CHECK(index->search("charlie", 5).hits.size() == 1);
  CHECK(index->search("widget_close", 5).hits.size() == 1);
  CHECK(index->search("candela", 5).hits.size() == 1);
  CHECK(index->search("alpha", 5).hits.size() == 1);
  auto latin = index->search("creme brulee", 5).hits;
  REQUIRE(latin.size() == 1);
  CHECK(latin[0].title == "Caf\xC3\xA9");
  CHECK(latin[0].text
        == "Cr\xC3\xA8me br\xC3\xBBl\xC3\xA9"
           "e is served "
           "cold \xE2\x80\x93 with caramel.");
}

TEST_CASE("local_corpus never leaves the folder being indexed") {
  test::temp_dir tmp;
  tmp.write("outside/secret.txt", "The ultraviolet password is hunter2.\n");
  tmp.write("outside/folder/leak.md", "# Leak\n\nultraviolet folder\n");
  tmp.write("docs/real.md", "# Real\n\nzeppelin airships\n");
  tmp.write("docs/sub/other.md", "# Other\n\nblimp\n");
  auto docs = fs::canonical(tmp.file("docs")).string();
  auto index = open_ok(tmp.file("corpus.db"));
  // An entry that an earlier update made through a path that is now a
  // symbolic link out of the folder.
  auto link_out = tmp.write("docs/secret.txt", "ultraviolet, indexed before\n");
  REQUIRE(index->update({tmp.file("docs")}).added == 3);
  REQUIRE(index->search("ultraviolet", 5).hits.size() == 1);
  fs::remove(link_out);
  fs::create_symlink(tmp.file("outside/secret.txt"), link_out);
  fs::create_symlink(tmp.file("outside/folder"), tmp.file("docs/folder"));
  fs::create_symlink("/etc/passwd", tmp.file("docs/passwd.txt"));
  // Links inside the folder: a file indexed once, a loop never followed.
  fs::create_symlink(tmp.file("docs/real.md"), tmp.file("docs/alias.md"));
  fs::create_symlink(tmp.file("docs/real.md"), tmp.file("docs/sub/alias2.md"));
  fs::create_symlink(tmp.file("docs"), tmp.file("docs/sub/loop"));
  fs::create_symlink(tmp.file("docs/nowhere.md"), tmp.file("docs/broken.md"));
  auto r = index->update({tmp.file("docs")});
  REQUIRE_FALSE(r.failure.has_value());
  CHECK(r.added == 0);
  CHECK(r.unchanged == 2);
  CHECK(r.removed == 1);
  CHECK(r.skipped == 4);
  auto notes = join_notes(r.notes);
  CAPTURE(notes);
  auto has_note = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const auto& n) { return n == text; });
  };
  CHECK(has_note("skipped " + docs + "/secret.txt: a symbolic link to "
                 + fs::canonical(tmp.file("outside/secret.txt")).string()
                 + ", outside the folder being indexed (" + docs + ")"));
  CHECK(has_note("skipped " + docs + "/folder: a symbolic link to "
                 + fs::canonical(tmp.file("outside/folder")).string()
                 + ", outside the folder being indexed (" + docs + ")"));
  CHECK(has_note("skipped " + docs
                 + "/passwd.txt: a symbolic link to "
                   "/etc/passwd, outside the folder being indexed ("
                 + docs + ")"));
  CHECK(has_note("skipped " + docs + "/broken.md: a broken symbolic link"));
  CHECK(index->search("ultraviolet", 5).hits.empty());
  CHECK(index->search("root", 5).hits.empty());
  CHECK_FALSE(index->find_document(docs + "/secret.txt").has_value());
  CHECK_FALSE(index->find_document(docs + "/passwd.txt").has_value());
  auto zeppelin = index->search("zeppelin", 5).hits;
  REQUIRE(zeppelin.size() == 1);
  CHECK(zeppelin[0].path == docs + "/real.md");
  CHECK(index->size().first == 2);
  // A link to a file inside the folder that the walk does not reach itself
  // (a hidden folder) indexes that file under its own path.
  tmp.write("docs/.drafts/draft.md", "# Draft\n\nquasar\n");
  fs::create_symlink(tmp.file("docs/.drafts/draft.md"), tmp.file("docs/draft.md"));
  r = index->update({tmp.file("docs")});
  CHECK(r.added == 1);
  CHECK(index->find_document(docs + "/.drafts/draft.md").has_value());
}

TEST_CASE("local_corpus skips FIFOs, files over the caps and binary text") {
  test::temp_dir tmp;
  auto docs = fs::canonical(tmp.path()).string() + "/docs";
  tmp.write("docs/ok.md", "# Fine\n\nzeppelin\n");
  REQUIRE(::mkfifo(tmp.file("docs/pipe.md").c_str(), 0600) == 0);
  tmp.write("docs/big.html", "<html><body><p>" + std::string(2000, 'x') + "</p></body></html>");
  tmp.write("docs/big.pdf", "%PDF-1.4\n" + std::string(3000, 'x'));
  std::string noise;
  uint32_t x = 7;
  for (int i = 0; i < 512; ++i) {
    x = x * 1103515245u + 12345u;
    noise += static_cast<char>((x >> 16) & 0xFF);
  }
  tmp.write("docs/random.txt", noise);
  tmp.write("docs/controls.txt", "Dirty\x07 text with \xFF bad bytes,\r\nan escape\x1B[2J and "
                                 "\xC2\x9B C1 controls about a zeppelin.\n");
  update_options caps;
  caps.max_html_bytes = 1000;
  caps.max_pdf_bytes = 2000;
  auto index = open_ok(tmp.file("corpus.db"));
  auto r = index->update({tmp.file("docs")}, caps);
  REQUIRE_FALSE(r.failure.has_value());
  auto notes = join_notes(r.notes);
  CAPTURE(notes);
  CHECK(r.added == 2);
  CHECK(r.skipped == 4);
  auto has_note = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const auto& n) { return n == text; });
  };
  CHECK(has_note("skipped " + docs + "/pipe.md: is not a regular file (a FIFO)"));
  CHECK(has_note("skipped " + docs
                 + "/big.html: is too large: more than "
                   "1000 bytes, the maximum size of HTML and text files (the "
                   "open_url option max_html_size)"));
  CHECK(has_note("skipped " + docs
                 + "/big.pdf: is too large: more than "
                   "2000 bytes, the maximum size of PDF files (the open_url "
                   "option max_pdf_size)"));
  CHECK(has_note("skipped " + docs + "/random.txt: binary data, not text"));
  auto doc = index->find_document(docs + "/controls.txt");
  REQUIRE(doc.has_value());
  CHECK(doc->text
        == "Dirty text with \xEF\xBF\xBD bad bytes,\nan escape[2J "
           "and  C1 controls about a zeppelin.\n");
  // A file indexed before it grew over the cap is removed.
  tmp.write("docs/ok.md", "# Fine\n\n" + std::string(1500, 'z'));
  shift_mtime(tmp.file("docs/ok.md"), 30);
  r = index->update({tmp.file("docs")}, caps);
  CHECK(r.removed == 1);
  CHECK(r.skipped == 5);
  CHECK(index->search("zeppelin", 5).hits.size() == 1);
  // A FIFO named as the path to index is skipped too, never opened.
  r = index->update({tmp.file("docs/pipe.md")}, caps);
  CHECK(r.skipped == 1);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0] == "skipped " + docs + "/pipe.md: is not a regular file (a FIFO)");
}

TEST_CASE("local_corpus: connections that create a new database at once all "
          "succeed") {
  // Threads with their own connections race like processes do (SQLite locks
  // the file between connections). Several rounds, each on a fresh file.
  test::temp_dir tmp;
  write_corpus(tmp);
  for (int round = 0; round < 20; ++round) {
    auto db = tmp.file("race" + std::to_string(round) + ".db");
    std::vector<open_result> opened(4);
    std::vector<update_result> updated(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < opened.size(); ++i)
      threads.emplace_back([&, i] {
        opened[i] = corpus_index::open(db);
        if (opened[i].index)
          updated[i] = opened[i].index->update({tmp.file("docs")});
      });
    for (auto& t : threads)
      t.join();
    size_t added = 0;
    for (size_t i = 0; i < opened.size(); ++i) {
      CAPTURE(round);
      CAPTURE(i);
      REQUIRE_MESSAGE(!opened[i].failure, opened[i].failure->message);
      REQUIRE_MESSAGE(!updated[i].failure, updated[i].failure->message);
      added += updated[i].added;
      CHECK(updated[i].added + updated[i].unchanged == 3);
    }
    CHECK(added == 3);
    CHECK(opened[0].index->size().first == 3);
  }
}

} // namespace local_corpus_index_test
