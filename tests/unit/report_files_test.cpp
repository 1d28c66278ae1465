// The report files of `quarry research`: writing to whatever a path names
// (regular files, symbolic links, FIFOs, devices, folders) and the HTML page
// whose links all work.

#include "output_file.hpp"
#include "report_render.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace report_files_test {

using namespace quarry;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode;
}

size_t entries_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

} // namespace

TEST_CASE("report files: a new file gets the usual mode and no temporary file stays") {
  test::temp_dir dir;
  auto path = dir.file("report.md");
  auto old_mask = ::umask(022);
  auto err = app::write_output_file(path, "hello\n");
  ::umask(old_mask);
  REQUIRE_FALSE(err);
  CHECK(slurp(path) == "hello\n");
  CHECK((mode_of(path) & 0777) == 0644);
  CHECK(entries_in(dir.path()) == 1);
}

TEST_CASE("report files: an existing file keeps its mode") {
  test::temp_dir dir;
  auto path = dir.write("report.md", "old\n");
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  REQUIRE_FALSE(app::write_output_file(path, "new\n"));
  CHECK(slurp(path) == "new\n");
  CHECK((mode_of(path) & 0777) == 0600);
  CHECK(S_ISREG(mode_of(path)));
  CHECK(entries_in(dir.path()) == 1);
}

TEST_CASE("report files: a symbolic link stays a link and its target gets the text") {
  test::temp_dir dir;
  auto target = dir.write("real/report.md", "old\n");
  REQUIRE(::chmod(target.c_str(), 0640) == 0);
  auto link = dir.file("link.md");
  REQUIRE(::symlink("real/report.md", link.c_str()) == 0);
  REQUIRE_FALSE(app::write_output_file(link, "new\n"));
  CHECK(S_ISLNK(mode_of(link)));
  CHECK(slurp(target) == "new\n");
  CHECK((mode_of(target) & 0777) == 0640);
}

TEST_CASE("report files: a dangling link, a folder and a missing folder are refused") {
  test::temp_dir dir;
  auto dangling = dir.file("dangling.md");
  REQUIRE(::symlink("nowhere/report.md", dangling.c_str()) == 0);
  auto err = app::check_output_path(dangling);
  REQUIRE(err);
  CHECK(err->find("symbolic link to 'nowhere/report.md', which does not exist")
        != std::string::npos);
  CHECK(app::write_output_file(dangling, "x"));
  CHECK(S_ISLNK(mode_of(dangling)));
  auto folder_err = app::check_output_path(dir.path());
  REQUIRE(folder_err);
  CHECK(folder_err->find("it is a folder") != std::string::npos);
  auto missing = app::check_output_path(dir.file("no/such/folder/report.md"));
  REQUIRE(missing);
  CHECK(missing->find("does not exist") != std::string::npos);
}

TEST_CASE("report files: a character device is written through, not replaced") {
  // /dev/null stays a device (as root, replacing it would break the system).
  REQUIRE_FALSE(app::check_output_path("/dev/null"));
  REQUIRE_FALSE(app::write_output_file("/dev/null", "report\n"));
  CHECK(S_ISCHR(mode_of("/dev/null")));
}

TEST_CASE("report files: a FIFO is written through to its reader") {
  test::temp_dir dir;
  auto fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No reader: an error at once, not a wait.
  auto none = app::write_output_file(fifo, "x");
  REQUIRE(none);
  CHECK(none->find("no process is reading it") != std::string::npos);
  // A reader: it gets every byte. (A second writer, held here, keeps the
  // reader's reads waiting for data instead of seeing end of file.)
  auto rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rfd >= 0);
  auto held = ::open(fifo.c_str(), O_WRONLY);
  REQUIRE(held >= 0);
  ::fcntl(rfd, F_SETFL, 0);
  std::string text(200 * 1024, 'r'); // more than a pipe's buffer
  std::string got;
  std::thread reader{[&] {
    char buf[4096];
    while (got.size() < text.size()) {
      auto n = ::read(rfd, buf, sizeof(buf));
      if (n <= 0)
        break;
      got.append(buf, static_cast<size_t>(n));
    }
  }};
  auto err = app::write_output_file(fifo, text);
  reader.join();
  ::close(held);
  ::close(rfd);
  CHECK_FALSE(err);
  CHECK(got == text);
  CHECK(S_ISFIFO(mode_of(fifo)));
}

TEST_CASE("report files: a reader that goes away is an error, not the end of the process") {
  test::temp_dir dir;
  auto fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rfd >= 0);
  auto held = ::open(fifo.c_str(), O_WRONLY);
  REQUIRE(held >= 0);
  ::fcntl(rfd, F_SETFL, 0);
  std::thread closer{[&] {
    // Read a little, then leave with the writer still writing.
    char buf[16];
    (void)::read(rfd, buf, sizeof(buf));
    ::close(rfd);
  }};
  auto err = app::write_output_file(fifo, std::string(1 << 20, 'x'));
  closer.join();
  ::close(held);
  REQUIRE(err);
  CAPTURE(*err);
  CHECK(err->find("Broken pipe") != std::string::npos);
}

TEST_CASE("report files: a failed write names the path and the reason") {
  if (::geteuid() == 0) {
    // Root writes into read-only folders; a full device shows the reason.
    auto err = app::write_output_file("/dev/full", "x");
    REQUIRE(err);
    CHECK(err->find("'/dev/full'") != std::string::npos);
    CHECK(err->find("No space left on device") != std::string::npos);
    return;
  }
  test::temp_dir dir;
  auto ro = dir.file("ro");
  std::filesystem::create_directory(ro);
  REQUIRE(::chmod(ro.c_str(), 0500) == 0);
  auto err = app::write_output_file(ro + "/report.md", "x");
  REQUIRE(err);
  CHECK(err->find("report.md") != std::string::npos);
  CHECK(err->find(".quarry-") == std::string::npos);
}

TEST_CASE("report HTML: local citations link to the sources list, which shows the path") {
  app::report_parts r;
  r.question = "Heat pumps <in> the cold?";
  r.body
    = "Cold air lowers efficiency [[1]](file:///docs/heat%20pumps/cold.md). "
      "The grid matters [[2]](https://example.com/grid?a=1&b=2). "
      "An unknown one [[9]](). Brackets before one [[[[1]](file:///docs/heat%20pumps/cold.md). "
      "A broken one [[4]](x[[1]](file:///docs/heat%20pumps/cold.md). "
      "Parentheses [[2]](https://en.wikipedia.org/wiki/Heat_pump_(disambiguation)).";
  r.sources = {{1, "Cold climates", "file:///docs/heat%20pumps/cold.md"},
               {2, "Grid", "https://example.com/grid?a=1&b=2"}};
  auto html = app::html_report(r);
  // Every file:// citation became an anchor: none is left for the Markdown
  // renderer to empty (found by the report fuzz target).
  CHECK(html.find("href=\"\"") == std::string::npos);
  CHECK(html.find("<a class=\"cite\" data-n=\"1\" href=\"#source-1\">[1]</a>")
        != std::string::npos);
  CHECK(html.find("<li id=\"source-1\" value=\"1\">") != std::string::npos);
  CHECK(html.find("<code>/docs/heat pumps/cold.md</code>") != std::string::npos);
  CHECK(html.find("href=\"https://example.com/grid?a=1&amp;b=2\"") != std::string::npos);
  CHECK(html.find("<title>Heat pumps &lt;in&gt; the cold?</title>") != std::string::npos);
  CHECK(html.find("[9]") != std::string::npos);
  CHECK(html.find("href=\"https://en.wikipedia.org/wiki/Heat_pump_(disambiguation)\"")
        != std::string::npos);
  CHECK(html.find("source-9") == std::string::npos);
  // The Markdown keeps the original links.
  auto md = app::markdown_report(r);
  CHECK(md.find("[[1]](file:///docs/heat%20pumps/cold.md)") != std::string::npos);
  CHECK(md.find("1. Cold climates <file:///docs/heat%20pumps/cold.md>") != std::string::npos);
}

TEST_CASE("report files: a partial report says so under its title") {
  app::report_parts r;
  r.question = "Q";
  r.body = "Found [[1]](https://a.example/).";
  r.sources = {{1, "A", "https://a.example/"}};
  r.partial = true;
  auto md = app::markdown_report(r);
  CHECK(md.find("# Q\n\n> **Partial report.**") == 0);
  CHECK(app::html_report(r).find("<strong>Partial report.</strong>") != std::string::npos);
  CHECK(app::local_path_of("https://a.example/").empty());
  CHECK(app::local_path_of("file:///a%2Fb%20c") == "/a/b c");
  CHECK(app::local_path_of("file:///a%zz").empty());
}

TEST_CASE("report printed: cleaned of escape sequences on a terminal, as it is elsewhere") {
  app::report_parts r;
  r.question = "Q\x1b]0;pwned\x07";
  r.body = "Found\x1b[2J \xC2\x9B"
           "31mit [[1]](https://a.example/).\n\tindented \xE6\xB7\xB1";
  r.sources = {{1, "A\x1b]52;c;eA==\x1b\\", "https://a.example/"}};
  auto md = app::markdown_report(r);
  auto shown = app::printed_report(md, true);
  CHECK(shown
        == "# Q\n\nFound it [[1]](https://a.example/).\n\tindented \xE6\xB7\xB1\n\n"
           "## Sources\n\n1. A <https://a.example/>\n");
  // Into a pipe or a file it is data: byte for byte.
  CHECK(app::printed_report(md, false) == md);
}

TEST_CASE("report files: a database of Quarry, its WAL, a link or a hard link to it "
          "is refused as a report's path") {
  test::temp_dir dir;
  auto store = dir.write("data/quarry.db", "SQLite format 3");
  auto corpus = dir.write("data/corpora/0123456789abcdef.db", "SQLite format 3");
  dir.write("data/corpora/notes.txt", "not a database");
  auto dbs = app::database_files(dir.file("data"), store);
  CHECK(std::find(dbs.begin(), dbs.end(), corpus) != dbs.end());
  auto refused = [&](const std::string& path) {
    auto why = app::check_output_path(path, dbs);
    INFO(path);
    REQUIRE(why);
    CHECK(why->find("Quarry's database") != std::string::npos);
  };
  refused(store);
  refused(store + "-wal"); // not there now: refused by its name
  refused(store + "-journal");
  refused(corpus);
  refused(dir.file("data/corpora/../quarry.db"));
  std::filesystem::create_symlink(store, dir.file("link.md"));
  refused(dir.file("link.md"));
  REQUIRE(::link(corpus.c_str(), dir.file("hard.md").c_str()) == 0);
  refused(dir.file("hard.md"));
  // Nothing was opened, nothing changed.
  CHECK(slurp(store) == "SQLite format 3");
  // Other files, in the data folder too, take reports.
  CHECK_FALSE(app::check_output_path(dir.file("report.md"), dbs));
  CHECK_FALSE(app::check_output_path(dir.file("data/corpora/notes.txt"), dbs));
  CHECK_FALSE(app::check_output_path(dir.file("data/report.db.md"), dbs));
}

TEST_CASE("terminal report: wrapped to the width, citations as [n], short source locations") {
  app::report_parts r;
  r.question = "Why does a heat pump's efficiency drop in cold weather?";
  r.body = "## Why it drops\n\nHeat pump efficiency falls as the outdoor air gets colder "
           "[[1]](file:///docs/corpus/physics/cop.md), because the compressor must lift heat "
           "across a larger temperature difference [[2]](https://www.example.com/heat/cold?x=1). "
           "**Bold** and a [link](https://example.org).\n\n"
           "- one item that is long enough to wrap around the width of forty columns [[1]]"
           "(file:///docs/corpus/physics/cop.md)\n- two\n";
  r.sources = {{1, "Coefficient of performance", "file:///docs/corpus/physics/cop.md", false},
               {2, "Heat pumps in the cold", "https://www.example.com/heat/cold?x=1", true}};
  r.corpus_root = "/docs/corpus";
  for (int width : {40, 80, 120}) {
    CAPTURE(width);
    auto text = app::terminal_report(r, width);
    CAPTURE(text);
    std::istringstream lines{text};
    for (std::string line; std::getline(lines, line);) {
      CAPTURE(line);
      CHECK(line.size() <= static_cast<size_t>(width));
    }
    CHECK(text.find("[1]") != std::string::npos);
    CHECK(text.find("[2]") != std::string::npos);
    CHECK(text.find("](") == std::string::npos);
    CHECK(text.find("file://") == std::string::npos);
    CHECK(text.find("**") == std::string::npos);
    CHECK(text.find("## ") == std::string::npos);
    CHECK(text.find("Why it drops\n------------\n") != std::string::npos);
    CHECK(text.find("\nSources\n-------\n[1] Coefficient of performance\n    physics/cop.md\n")
          != std::string::npos);
    CHECK(text.find(width > 40 ? "[2] Heat pumps in the cold (snippet only)\n    "
                                 "example.com/heat/cold\n"
                               : "[2] Heat pumps in the cold (snippet\n    only)\n    "
                                 "example.com/heat/cold\n")
          != std::string::npos);
  }
  // The title is underlined; a narrow terminal wraps it.
  auto narrow = app::terminal_report(r, 20);
  CHECK(narrow.rfind("Why does a heat\npump's efficiency\n", 0) == 0);
  // A partial report says so first.
  r.partial = true;
  CHECK(app::terminal_report(r, 80).find("Partial report.") != std::string::npos);
}

TEST_CASE("report HTML over HTTP: every source links its page on the server, no file:// URL") {
  app::report_parts r;
  r.question = "Heat pumps?";
  r.body = "Cold air lowers efficiency [[1]](file:///srv/corpus/heat/cold.md). "
           "The grid matters [[2]](https://example.com/grid?a=1&b=2).";
  r.sources = {{1, "Cold climates", "file:///srv/corpus/heat/cold.md"},
               {2, "Grid", "https://example.com/grid?a=1&b=2"}};
  r.corpus_root = "/srv/corpus";
  auto html = app::html_report(r, "/v1/research/q0123456789abcdef/sources");
  CHECK(html.find("file:") == std::string::npos);
  CHECK(html.find("/srv/corpus") == std::string::npos);
  CHECK(html.find("<a class=\"cite\" data-n=\"1\" "
                  "href=\"/v1/research/q0123456789abcdef/sources/1?format=html\">[1]</a>")
        != std::string::npos);
  // A web citation keeps its link.
  CHECK(
    html.find("<a class=\"cite\" data-n=\"2\" data-url=\"https://example.com/grid?a=1&amp;b=2\" "
              "href=\"https://example.com/grid?a=1&amp;b=2\">[2]</a>")
    != std::string::npos);
  // The Sources entry of the local one: its page, and its path in the corpus.
  CHECK(html.find("<a href=\"/v1/research/q0123456789abcdef/sources/1?format=html\">Cold "
                  "climates</a><br><code>heat/cold.md</code>")
        != std::string::npos);
  CHECK(html.find("Content-Security-Policy") != std::string::npos);
  // The file written for the disk keeps its file:// link.
  CHECK(app::html_report(r).find("file:///srv/corpus/heat/cold.md") != std::string::npos);
}

TEST_CASE("report HTML: a citation in a table cell stays a link to its source") {
  // A table cell holds no custom inline node (cmark-gfm's table extension),
  // so there a citation is a plain link to the same place; it was dropped,
  // and its node leaked (found by the report fuzz target).
  app::report_parts r;
  r.question = "Q";
  r.body = "| Claim | Where |\n|---|---|\n| Cold air [[1]](file:///docs/a%20b.md) | "
           "web [[2]](https://example.com/x) |\n\nAfter [[1]](file:///docs/a%20b.md).\n";
  r.sources = {{1, "Local", "file:///docs/a%20b.md"}, {2, "Web", "https://example.com/x"}};
  auto html = app::html_report(r);
  CAPTURE(html);
  CHECK(html.find("<td>Cold air <a href=\"#source-1\">[1]</a></td>") != std::string::npos);
  CHECK(html.find("<td>web <a href=\"https://example.com/x\">[2]</a></td>") != std::string::npos);
  // Outside the table, the usual citation link.
  CHECK(html.find("After <a class=\"cite\" data-n=\"1\" href=\"#source-1\">[1]</a>")
        != std::string::npos);
  auto table = html.substr(html.find("<table>"), html.find("</table>") - html.find("<table>"));
  CHECK(table.find("file:") == std::string::npos);
  auto fragment = app::report_html_fragment(r.body, r.sources, "/s");
  CAPTURE(fragment);
  CHECK(fragment.find("<td>Cold air <a href=\"/s/1?format=html\">[1]</a></td>")
        != std::string::npos);
  // A table cell that a setext underline made out of one line (the fuzz
  // target's input) keeps its citation too.
  app::report_parts odd_parts;
  odd_parts.question = "Q";
  odd_parts.body.assign("\0[[1]](file:///docs/a%20b.md)?\n\v\v\v-", 35);
  odd_parts.sources = r.sources;
  auto odd = app::html_report(odd_parts);
  CHECK(odd.find("<a href=\"#source-1\">[1]</a>") != std::string::npos);
}

TEST_CASE("report fragment: citations as links to their sources, raw HTML as text, unsafe "
          "links as their text, images as links") {
  std::vector<app::cited_source> sources = {{1, "Local", "file:///c/a.md"},
                                            {2, "Web", "https://example.org/w"}};
  auto body = std::string{
    "# Title\n\nOne [[1]](file:///c/a.md), two [[2]](https://example.org/w), "
    "unknown [[5]](). <script>alert(1)</script> "
    "[click](javascript:alert(1)) [data](data:text/html;base64,PHNjcmlwdD4=) "
    "[rel](/v1/research) <javascript:alert(2)> [ok](https://ok.example/) "
    "![pic](https://example.org/p.png)\n\n<div onclick=\"x()\">block</div>\n"};
  auto html = app::report_html_fragment(body, sources, "/v1/research/q0123456789abcdef/sources");
  CAPTURE(html);
  CHECK(html.find("<html") == std::string::npos);
  CHECK(html.find("<h1>Title</h1>") != std::string::npos);
  CHECK(html.find("<a class=\"cite\" data-n=\"1\" "
                  "href=\"/v1/research/q0123456789abcdef/sources/1?format=html\">[1]</a>")
        != std::string::npos);
  // Web sources open through the server too; their URL is kept.
  CHECK(html.find("<a class=\"cite\" data-n=\"2\" data-url=\"https://example.org/w\" "
                  "href=\"/v1/research/q0123456789abcdef/sources/2?format=html\">[2]</a>")
        != std::string::npos);
  // A number no source has leads nowhere.
  CHECK(html.find("unknown [5].") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("<div") == std::string::npos);
  CHECK(html.find("&lt;div onclick=&quot;x()&quot;&gt;block&lt;/div&gt;") != std::string::npos);
  CHECK(html.find("href=\"javascript") == std::string::npos);
  CHECK(html.find("href=\"data") == std::string::npos);
  CHECK(html.find("file:") == std::string::npos);
  CHECK(html.find("href=\"\"") == std::string::npos);
  CHECK(html.find(" click ") != std::string::npos);
  CHECK(html.find("href=\"/v1/research\"") == std::string::npos);
  CHECK(html.find("<a href=\"https://ok.example/\">ok</a>") != std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("<a href=\"https://example.org/p.png\">pic</a>") != std::string::npos);
  // Every number links its page when the sources are not known yet (a
  // report being written).
  auto live = app::report_html_fragment("Five [[5]](file:///c/e.md).", {}, "/s", true);
  CHECK(live.find("<a class=\"cite\" data-n=\"5\" href=\"/s/5?format=html\">[5]</a>")
        != std::string::npos);
}

TEST_CASE("report numbering: gap-free, in the order first cited, ranges moved with the text") {
  std::string body
    = "A [[10]](https://a.example/) b [[3]](file:///x.md). C [[10]](https://a.example/) "
      "d [[7]]() e [[99]](https://gone.example/(x)) f.";
  CHECK(app::citation_order(body) == std::vector<int>{10, 3, 7, 99});
  auto numbering = app::first_cited_numbering(body);
  CHECK(numbering == std::map<int, int>{{10, 1}, {3, 2}, {7, 3}, {99, 4}});
  numbering.erase(99);
  auto out = app::renumber_citations(body, numbering);
  CHECK(out.text
        == "A [[1]](https://a.example/) b [[2]](file:///x.md). C [[1]](https://a.example/) "
           "d [[3]]() e  f.");
  // The offset of "C" moves back by the one digit each [[10]] lost before it.
  auto c = body.find(". C") + 2;
  CHECK(out.text.substr(out.shifted(c), 1) == "C");
  auto f = body.find(" f.") + 1;
  CHECK(out.text.substr(out.shifted(f), 2) == "f.");
  CHECK(out.shifted(0) == 0);
  // Numbers with no gap stay as they are.
  auto same = app::renumber_citations("x [[1]](u) y [[2]](v)", {{1, 1}, {2, 2}});
  CHECK(same.text == "x [[1]](u) y [[2]](v)");
  CHECK(same.edits.empty());
}

} // namespace report_files_test
