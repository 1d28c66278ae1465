// `quarry tool run open_url` and `quarry extract` through the real binary and
// the real plugin, against real HTTP servers on 127.0.0.1; local files that
// are not regular files, over the size caps or binary.

#include "support/http_server.hpp"
#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <sys/stat.h>

namespace open_url_cli_test {

using namespace quarry;
using test::response_plan;

namespace {

struct open_url_fixture {
  test::temp_dir home;
  test::http_server server;

  open_url_fixture() {
    server.route("GET", "/article", [](const test::request&) {
      return response_plan::text(
        200,
        "<!DOCTYPE html><html lang=\"de\"><head><title>Waermepumpen</title>"
        "<meta property=\"og:site_name\" content=\"Energie Blog\">"
        "<meta name=\"author\" content=\"Jana Beispiel\">"
        "<meta property=\"article:published_time\" "
        "content=\"2024-03-01T08:00:00Z\">"
        "<meta property=\"article:modified_time\" content=\"2024-03-05T10:00:00Z\">"
        "</head><body><nav>Menu Start "
        "Impressum</nav><article><h1>W\xE4rmepumpen</h1><p>Eine "
        "W\xE4rmepumpe nutzt Umweltw\xE4rme aus Luft, Wasser oder Erdreich "
        "und hebt sie auf ein h\xF6heres Temperaturniveau.</p><p>Die "
        "Jahresarbeitszahl beschreibt das Verh\xE4ltnis von W\xE4rme zu "
        "Strom \xFC"
        "ber ein ganzes Jahr.</p></article><section id=\"comments\"><h2>Kommentare</h2>"
        "<div class=\"comment\"><p>Sehr hilfreicher Artikel, danke f\xFCr die Erkl\xE4rung "
        "der Jahresarbeitszahl und der Umweltw\xE4rme.</p></div></section></body></html>",
        "text/html; charset=iso-8859-1");
    });
    server.route("GET", "/paper.pdf", [](const test::request&) {
      return response_plan::text(
        200,
        test::make_pdf({"Abstract: ground source heat pumps reach seasonal "
                        "performance factors above four.",
                        "Results: the second page holds the measurements."},
                       "Field study"),
        "application/pdf");
    });
  }

  test::process_result quarry(std::vector<std::string> args, bool allow_loopback = true) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR, "--set",
                                  "tools.open_url.plugin=open_url"};
    if (allow_loopback) {
      argv.push_back("--set");
      argv.push_back("tools.open_url.allow=[\"127.0.0.1\"]");
    }
    argv.insert(argv.end(), args.begin(), args.end());
    test::process_options opts;
    opts.env = {{"HOME", home.path()},
                {"XDG_CONFIG_HOME", std::nullopt},
                {"XDG_DATA_HOME", std::nullopt},
                {"QUARRY_CONFIG", std::nullopt}};
    return test::run_process(argv, opts);
  }
};

} // namespace

TEST_CASE_FIXTURE(open_url_fixture, "tool run open_url reads a page and a PDF") {
  auto res = quarry(
    {"tool", "run", "open_url",
     "{\"urls\": [\"" + server.url("/article") + "\", \"" + server.url("/paper.pdf") + "\"]}",
     "--json"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  auto llm = nlohmann::json::parse(j["llm_text"].get<std::string>());
  REQUIRE(llm["results"].size() == 2);
  CHECK(llm["results"][0]["updated_at"] == "2024-03-01T08:00:00Z");
  CHECK(llm["results"][0]["content"].get<std::string>().find("Jahresarbeitszahl")
        != std::string::npos);
  CHECK(llm["results"][0]["content"].get<std::string>().find("Impressum") == std::string::npos);
  CHECK(llm["results"][1]["title"] == "Field study");
  CHECK(llm["results"][1]["content"].get<std::string>().find("second page holds")
        != std::string::npos);
  REQUIRE(j["documents"].size() == 2);
  CHECK(j["documents"][0]["url"] == server.url("/article"));
  CHECK(j["documents"][0]["published"] == "2024-03-01T08:00:00Z");
  CHECK_FALSE(j.contains("error"));
}

TEST_CASE_FIXTURE(open_url_fixture, "tool run open_url refuses internal "
                                    "addresses and exits 1") {
  auto res = quarry({"tool", "run", "open_url", "{\"urls\": [\"" + server.url("/article") + "\"]}"},
                    false);
  CHECK(res.exit_code == 1);
  CHECK(res.out.find("blocked by SSRF protection") != std::string::npos);
  CHECK(server.requests_served() == 0);
  auto meta = quarry(
    {"tool", "run", "open_url", R"({"urls": ["http://169.254.169.254/latest/meta-data/"]})"});
  CHECK(meta.exit_code == 1);
  CHECK(meta.out.find("cloud metadata") != std::string::npos);
}

TEST_CASE_FIXTURE(open_url_fixture, "extract prints a page's text and its "
                                    "metadata") {
  auto res = quarry({"extract", server.url("/article"), "--json"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["title"] == "Waermepumpen");
  CHECK(j["byline"] == "Jana Beispiel");
  CHECK(j["published"] == "2024-03-01T08:00:00Z");
  CHECK(j["modified"] == "2024-03-05T10:00:00Z");
  CHECK(j["site_name"] == "Energie Blog");
  // Readers' comments are kept apart from the text.
  CHECK(j["comments"].get<std::string>().find("Sehr hilfreicher Artikel") != std::string::npos);
  CHECK(j["text"].get<std::string>().find("Sehr hilfreicher") == std::string::npos);
  CHECK(j["lang"] == "de");
  CHECK(j["text"].get<std::string>().find("W\xC3\xA4rmepumpe nutzt") != std::string::npos);
  auto plain = quarry({"extract", server.url("/paper.pdf")});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("seasonal performance factors above four") != std::string::npos);
  CHECK(plain.out.find("second page holds") != std::string::npos);
}

TEST_CASE_FIXTURE(open_url_fixture, "extract guesses the charset of a page and a file "
                                    "that name none (field case undeclared-gbk-page)") {
  std::ifstream in{std::string{QUARRY_FIXTURES_DIR}
                     + "/../field-cases/undeclared-gbk-page/page.html",
                   std::ios::binary};
  REQUIRE(in.good());
  std::string page{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  server.route("GET", "/gbk", [page](const test::request&) {
    return response_plan::text(200, page, "text/html");
  });
  const std::string sentence = "\xE7\xA9\xBA\xE6\xB0\x94\xE6\xBA\x90\xE7\x83\xAD"
                               "\xE6\xB3\xB5"; // 空气源热泵 in UTF-8
  auto res = quarry({"extract", server.url("/gbk"), "--json"});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["text"].get<std::string>().find(sentence) != std::string::npos);
  CHECK(j["text"].get<std::string>().find("\xEF\xBF\xBD") == std::string::npos);
  CHECK(j["note"].get<std::string>().find("encoding guessed: gb18030") != std::string::npos);
  // A file on disk, printed as text: the note goes to stderr.
  auto file = home.write("gbk.html", page);
  auto plain = quarry({"extract", file});
  CAPTURE(plain.err);
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find(sentence) != std::string::npos);
  CHECK(plain.err.find("encoding guessed") != std::string::npos);
  // The same page labelled UTF-8 (a wrong label) decodes mostly to U+FFFD:
  // a read failure, not a page of replacement characters.
  server.route("GET", "/mislabelled", [page](const test::request&) {
    return response_plan::text(200, page, "text/html; charset=utf-8");
  });
  auto bad = quarry({"extract", server.url("/mislabelled")});
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.empty());
}

TEST_CASE_FIXTURE(open_url_fixture, "extract reads local files") {
  home.write("page.html", "<html><head><title>Local page</title></head><body>"
                          "<article><p>The local page explains district "
                          "heating networks and their pipes in some detail "
                          "for the reader.</p></article></body></html>");
  {
    std::ofstream out{home.file("report.pdf"), std::ios::binary};
    out << test::make_pdf({"A local PDF report on heat storage tanks and "
                           "their losses over a winter."},
                          "Storage");
  }
  home.write("notes.md", "# Notes\n\nPlain Markdown notes pass through as "
                         "they are, without any change at all.\n");
  auto html = quarry({"extract", home.file("page.html"), "--json"});
  REQUIRE(html.exit_code == 0);
  CHECK(nlohmann::json::parse(html.out)["title"] == "Local page");
  auto pdf = quarry({"extract", home.file("report.pdf"), "--json"});
  REQUIRE(pdf.exit_code == 0);
  auto pj = nlohmann::json::parse(pdf.out);
  CHECK(pj["title"] == "Storage");
  CHECK(pj["text"].get<std::string>().find("heat storage tanks") != std::string::npos);
  auto md = quarry({"extract", home.file("notes.md")});
  REQUIRE(md.exit_code == 0);
  CHECK(md.out
        == "# Notes\n\nPlain Markdown notes pass through as they are, "
           "without any change at all.\n");
}

TEST_CASE_FIXTURE(open_url_fixture, "extract rejects bad input with clear "
                                    "errors") {
  auto missing = quarry({"extract", home.file("nope.html")});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("no such file") != std::string::npos);
  auto scheme = quarry({"extract", "gopher://example.com/"});
  CHECK(scheme.exit_code == 2);
  CHECK(scheme.err.find("only http, https and file") != std::string::npos);
  auto refused = quarry({"extract", server.url("/article")}, false);
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("blocked by SSRF protection") != std::string::npos);
  auto notfound = quarry({"extract", server.url("/absent")});
  CHECK(notfound.exit_code == 1);
  CHECK(notfound.err.find("upstream returned HTTP 404") != std::string::npos);
  home.write("tiny.txt", "hi");
  auto tiny = quarry({"extract", home.file("tiny.txt")});
  CHECK(tiny.exit_code == 1);
  CHECK(tiny.err.find("could not be parsed into readable text") != std::string::npos);
  auto badcfg = quarry(
    {"--set", "tools.open_url.max_redirects=99", "extract", home.file("tiny.txt")});
  CHECK(badcfg.exit_code == 2);
  CHECK(badcfg.err.find("max_redirects") != std::string::npos);
}

TEST_CASE_FIXTURE(open_url_fixture, "extract names what a path is when it "
                                    "is not a regular file") {
  // Nobody writes the FIFO: opening it for reading would block forever.
  auto fifo = home.file("pipe.html");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto res = quarry({"extract", fifo});
  CHECK_FALSE(res.timed_out);
  CHECK(res.exit_code == 2);
  CHECK(res.err == "quarry: " + fifo + ": is not a regular file (a FIFO)\n");
  CHECK(res.out.empty());
  auto folder = quarry({"extract", home.path()});
  CHECK(folder.exit_code == 2);
  CHECK(folder.err == "quarry: " + home.path() + ": is a folder\n");
  auto device = quarry({"extract", "/dev/zero"});
  CHECK(device.exit_code == 2);
  CHECK(device.err == "quarry: /dev/zero: is a device\n");
  auto url = quarry({"extract", "file://" + fifo});
  CHECK(url.exit_code == 2);
  CHECK(url.err.find("is not a regular file (a FIFO)") != std::string::npos);
  auto missing = quarry({"extract", home.file("absent.txt")});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err == "quarry: " + home.file("absent.txt") + ": no such file\n");
}

TEST_CASE_FIXTURE(open_url_fixture, "extract obeys open_url's size caps for "
                                    "local files") {
  auto page = "<html><head><title>Big</title></head><body><article><p>" + std::string(3000, 'w')
              + "</p></article></body></html>";
  auto path = home.write("big.html", page);
  auto capped = quarry({"--set", "tools.open_url.max_html_size=2KiB", "extract", path});
  CHECK(capped.exit_code == 1);
  CHECK(capped.err
        == "quarry: " + path
             + ": is too large: more than 2 KiB, "
               "the maximum size of HTML and text files (the open_url "
               "option max_html_size)\n");
  CHECK(capped.out.empty());
  CHECK(quarry({"extract", path}).exit_code == 0);
  // The default cap (20 MiB), on a sparse file that is never read.
  auto huge = home.write("huge.txt", "start");
  std::filesystem::resize_file(huge, 21u * 1024 * 1024);
  auto res = quarry({"extract", huge});
  CHECK(res.exit_code == 1);
  CHECK(res.err.find(": is too large: more than 20 MiB") != std::string::npos);
}

TEST_CASE_FIXTURE(open_url_fixture, "extract refuses binary text files and "
                                    "cleans the text it prints") {
  std::string noise;
  uint32_t x = 3;
  for (int i = 0; i < 4096; ++i) {
    x = x * 1103515245u + 12345u;
    noise += static_cast<char>((x >> 16) & 0xFF);
  }
  auto random = home.write("random.txt", noise);
  auto bin = quarry({"extract", random});
  CHECK(bin.exit_code == 1);
  CHECK(bin.err == "quarry: cannot read " + random + ": the document is binary data, not text\n");
  CHECK(bin.out.empty());
  auto md = home.write("dirty.md", "# Dirty\r\n\r\nA bell\x07, an escape\x1B[2J, a C1 "
                                   "control\xC2\x9B"
                                   "and a bad byte \xFF in notes that "
                                   "are long enough.\r\n");
  auto res = quarry({"extract", md});
  CHECK(res.exit_code == 0);
  CHECK(res.out
        == "# Dirty\n\nA bell, an escape[2J, a C1 controland a bad "
           "byte \xEF\xBF\xBD in notes that are long enough.\n");
}

} // namespace open_url_cli_test
