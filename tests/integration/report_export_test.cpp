// Reports people can send, through the real binary: `quarry research --pdf
// --docx`, `quarry sessions export --format pdf|docx` and `GET
// /v1/research/{id}/report?format=pdf|docx`, each read back (pdftotext for
// the PDF, `pandoc -t plain` for the DOCX) for the report's title and
// headings, a citation and the Sources list; a missing tool (PATH without
// it), a failing one and a broken one give a clear error and no file.
//
// Needs Chromium, pandoc and pdftotext (scripts/setup --exports, which
// scripts/test runs); without them the cases say so and pass, unless
// QUARRY_REQUIRE_E2E=1 (CI) makes that a failure.

#include "serve_client.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <sys/stat.h>

namespace report_export_test {

using namespace quarry;
using namespace quarry::test::serve;

namespace {

namespace fs = std::filesystem;

const char* const question = "How do the running costs of a heat pump compare with a gas boiler?";

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool on_path(const std::string& name) {
  return test::run_process({"sh", "-c", "command -v \"$0\"", name}).exit_code == 0;
}

// The tools are there, or the case is skipped (a failure in CI).
bool tools_present() {
  std::string missing;
  for (const auto* t : {"pandoc", "pdftotext"})
    if (!on_path(t))
      missing += std::string{" "} + t;
  if (!on_path("chromium") && !on_path("chromium-browser"))
    missing += " chromium";
  if (missing.empty())
    return true;
  const char* require = std::getenv("QUARRY_REQUIRE_E2E");
  if (require != nullptr && std::string{require} == "1")
    FAIL("the export tools are missing (run scripts/setup --exports):" << missing);
  MESSAGE("skipped: the export tools are missing (scripts/setup --exports):" << missing);
  return false;
}

struct export_fixture {
  test::temp_dir home;

  test::process_result
  quarry(std::vector<std::string> args,
         std::vector<std::pair<std::string, std::optional<std::string>>> extra_env = {}) {
    std::vector<std::string> argv{QUARRY_EXE, "--plugin-dir", QUARRY_PLUGIN_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_process(argv, test::isolated_quarry_options(home.path(), extra_env));
  }

  // A folder for PATH with only `sh`-run fakes in it (no chromium, pandoc).
  std::string fake_path(const std::vector<std::pair<std::string, std::string>>& tools = {}) {
    auto dir = home.file("fake-bin");
    fs::create_directories(dir);
    for (const auto& [name, body] : tools) {
      auto path = home.write("fake-bin/" + name, "#!/bin/sh\n" + body);
      fs::permissions(path, fs::perms::owner_all);
    }
    return dir;
  }
};

std::string pdf_text(const std::string& path) {
  auto r = test::run_process({"pdftotext", "-enc", "UTF-8", path, "-"});
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

std::string docx_text(const std::string& path) {
  auto r = test::run_process({"pandoc", "--from=docx", "--to=plain", "--wrap=none", path});
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Whitespace folded, for text that a PDF wraps.
std::string folded(const std::string& x) {
  std::string out;
  for (char c : x) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f';
    if (space) {
      if (!out.empty() && out.back() != ' ')
        out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// What a sent report must hold, from its Markdown: the title, each heading
// of the body, a citation, and the Sources with the titles of its entries
// and their paths relative to the corpus, but no file:// URL anywhere.
void check_sent(const std::string& text, const std::string& md, const std::string& what) {
  CAPTURE(what);
  CAPTURE(text.substr(0, 3000));
  auto flat = folded(text);
  CHECK(flat.find(folded(question)) != std::string::npos);
  std::istringstream lines{md};
  int headings = 0;
  int sources = 0;
  std::regex source_line{R"(^(\d+)\. (.*) <file://[^>]*/([^/>]+)>$)"};
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("## ", 0) == 0) {
      CHECK(flat.find(folded(l.substr(3))) != std::string::npos);
      ++headings;
    }
    std::smatch m;
    if (std::regex_match(l, m, source_line)) {
      CAPTURE(l);
      // "n. Title" and the file's name, as text.
      CHECK(flat.find(m[1].str() + ". " + folded(m[2].str())) != std::string::npos);
      CHECK(flat.find(m[3].str()) != std::string::npos);
      ++sources;
    }
  }
  CHECK(headings >= 1);
  CHECK(sources >= 3);
  CHECK(flat.find("Sources") != std::string::npos);
  CHECK(std::regex_search(flat, std::regex{R"(\[\d+\])"}));
  CHECK(text.find("file:") == std::string::npos);
}

// The raw parts of a DOCX: no file:// link in its text or its relations.
void check_docx_links(const std::string& path) {
  auto r = test::run_process(
    {"unzip", "-p", path, "word/document.xml", "word/_rels/document.xml.rels"});
  if (r.exit_code == 127)
    return; // no unzip: the text check above covers the text
  CHECK(r.out.find("<w:document") != std::string::npos);
  CHECK(r.out.find("file:") == std::string::npos);
}

} // namespace

TEST_CASE_FIXTURE(export_fixture, "research --pdf --docx writes documents that read back as the "
                                  "report, with its headings, citations and Sources") {
  if (!tools_present())
    return;
  auto pdf = home.file("report.pdf");
  auto docx = home.file("report.docx");
  auto tmp = home.file("tmp");
  fs::create_directories(tmp);
  auto res = quarry({"research", question, "--no-clarify", "--pdf", pdf, "--docx", docx},
                    {{"TMPDIR", tmp}});
  CAPTURE(res.err);
  REQUIRE(res.exit_code == 0);
  // The converters' folders are gone.
  CHECK(fs::is_empty(tmp));
  auto pdf_bytes = slurp(pdf);
  CHECK(pdf_bytes.rfind("%PDF-", 0) == 0);
  check_sent(pdf_text(pdf), res.out, "PDF");
  CHECK(slurp(docx).rfind("PK", 0) == 0);
  check_sent(docx_text(docx), res.out, "DOCX");
  check_docx_links(docx);
  // No temporary file was left beside them.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(home.path()))
    files += e.path().filename().string().find("report.") != std::string::npos;
  CHECK(files == 2);
}

TEST_CASE_FIXTURE(export_fixture, "research --pdf or --docx without the tool on PATH fails at "
                                  "once, naming the Debian package, and writes nothing") {
  auto path = fake_path();
  for (auto [flag, package] : {std::pair{"--pdf", "apt-get install chromium"},
                               std::pair{"--docx", "apt-get install pandoc"}}) {
    auto file = home.file(std::string{"report"} + flag);
    auto res = quarry({"research", question, "--no-clarify", "--out", home.file("r.md"), flag,
                       file},
                      {{"PATH", path}});
    CAPTURE(res.err);
    CHECK(res.exit_code == 1);
    CHECK(res.err.find("not installed") != std::string::npos);
    CHECK(res.err.find(package) != std::string::npos);
    // Before the research: nothing indexed, no report.
    CHECK(res.out.empty());
    CHECK_FALSE(fs::exists(file));
    CHECK_FALSE(fs::exists(home.file("r.md")));
  }
}

TEST_CASE_FIXTURE(export_fixture, "sessions export --format pdf|docx: to a file, to a pipe, and "
                                  "errors that leave no file") {
  if (!tools_present())
    return;
  auto res = quarry({"research", question, "--no-clarify"});
  REQUIRE(res.exit_code == 0);
  auto listed = nlohmann::json::parse(quarry({"sessions", "list", "--json"}).out);
  REQUIRE(listed.size() == 1);
  auto id = listed[0]["id"].get<std::string>();

  auto pdf = home.file("s.pdf");
  auto out = quarry({"sessions", "export", id, "--format", "pdf", "--out", pdf});
  CAPTURE(out.err);
  REQUIRE(out.exit_code == 0);
  check_sent(pdf_text(pdf), res.out, "sessions export PDF");
  // To a pipe: the document's bytes.
  auto piped = quarry({"sessions", "export", id, "--format", "docx"});
  REQUIRE(piped.exit_code == 0);
  CHECK(piped.out.rfind("PK\x03\x04", 0) == 0);
  auto docx = home.write("piped.docx", piped.out);
  check_sent(docx_text(docx), res.out, "sessions export DOCX");
  // md and html take --out too.
  auto md = home.file("s.md");
  REQUIRE(quarry({"sessions", "export", id, "--format", "md", "--out", md}).exit_code == 0);
  CHECK(slurp(md) == res.out);

  // The tool missing: a clear error, no file.
  auto missing = quarry({"sessions", "export", id, "--format", "docx", "--out",
                         home.file("m.docx")},
                        {{"PATH", fake_path()}});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("DOCX export needs pandoc, which is not installed") != std::string::npos);
  CHECK(missing.err.find("apt-get install pandoc") != std::string::npos);
  CHECK_FALSE(fs::exists(home.file("m.docx")));
  // A tool that fails, and one that writes half a file: an existing file
  // stays as it was.
  auto kept = home.write("kept.docx", "the earlier export");
  auto failing = fake_path({{"pandoc", "echo 'pandoc: out of memory' >&2\nexit 2\n"}});
  auto failed = quarry({"sessions", "export", id, "--format", "docx", "--out", kept},
                       {{"PATH", failing + ":/usr/bin:/bin"}});
  CAPTURE(failed.err);
  CHECK(failed.exit_code == 1);
  CHECK(failed.err.find("pandoc failed to make the DOCX (exit status 2): pandoc: out of memory")
        != std::string::npos);
  CHECK(slurp(kept) == "the earlier export");
  fs::remove(home.file("fake-bin/pandoc"));
  auto broken = fake_path(
    {{"pandoc", "for a in \"$@\"; do case \"$a\" in --output=*) printf 'PK\\003\\004half' > "
                "\"${a#--output=}\";; esac; done\n"}});
  auto half = quarry({"sessions", "export", id, "--format", "docx", "--out", kept},
                     {{"PATH", broken + ":/usr/bin:/bin"}});
  CAPTURE(half.err);
  CHECK(half.exit_code == 1);
  CHECK(half.err.find("pandoc wrote a broken DOCX") != std::string::npos);
  CHECK(slurp(kept) == "the earlier export");
  // jsonl and claims are not report files.
  CHECK(quarry({"sessions", "export", id, "--format", "jsonl", "--out", home.file("p")}).exit_code
        == 2);
}

TEST_CASE("serve: GET /report?format=pdf|docx answers the document with its type and file name, "
          "and a JSON error without the tool") {
  test::temp_dir home;
  bool tools = tools_present();
  std::string id;
  {
    server_process srv{home, {}};
    auto started = call("POST", srv.url("/v1/research"),
                        R"({"question": "How loud is a heat pump?", "clarify": false})");
    REQUIRE(started.status == 202);
    id = started.as_json()["id"].get<std::string>();
    wait_until([&] { return state_of(srv, id) == "completed"; }, "the research");
    if (tools) {
      auto md = call("GET", srv.url("/v1/research/" + id + "/report")).body;
      for (auto [format, type, magic] :
           {std::tuple{"pdf", "application/pdf", std::string{"%PDF-"}},
            std::tuple{"docx",
                       "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                       std::string{"PK\x03\x04", 4}}}) {
        // A named copy: clang refuses to capture a structured binding.
        std::string shown_format{format};
        CAPTURE(shown_format);
        auto r = call("GET", srv.url("/v1/research/" + id + "/report?format=" + format));
        REQUIRE(r.status == 200);
        CHECK(r.header("content-type") == type);
        CHECK(r.header("content-disposition")
              == "attachment; filename=\"quarry-" + id + "." + format + "\"");
        REQUIRE(r.body.rfind(magic, 0) == 0);
        auto file = home.write(std::string{"api."} + format, r.body);
        auto text = std::string{format} == "pdf" ? pdf_text(file) : docx_text(file);
        auto flat = folded(text);
        CHECK(flat.find("How loud is a heat pump?") != std::string::npos);
        CHECK(flat.find("Sources") != std::string::npos);
        CHECK(std::regex_search(flat, std::regex{R"(\[\d+\])"}));
        CHECK(text.find("file:") == std::string::npos);
        CHECK(md.find("## Sources") != std::string::npos);
      }
    }
    CHECK(call("GET", srv.url("/v1/research/" + id + "/report?format=rtf")).status == 400);
    CHECK(call("GET", srv.url("/v1/research/q0000000000000000/report?format=pdf")).status == 404);
  }
  // The same store served without the tools on PATH.
  auto bin = home.file("empty-bin");
  fs::create_directories(bin);
  server_process srv{home, {}, {{"PATH", bin}}};
  for (auto [format, package] : {std::pair{"pdf", "apt-get install chromium"},
                                 std::pair{"docx", "apt-get install pandoc"}}) {
    auto r = call("GET", srv.url("/v1/research/" + id + "/report?format=" + format));
    CAPTURE(r.body);
    CHECK(r.status == 501);
    CHECK(r.header("content-type").find("application/json") == 0);
    auto j = r.as_json();
    CHECK(j["error"]["code"] == "not_implemented");
    CHECK(j["error"]["message"].get<std::string>().find(package) != std::string::npos);
  }
}

} // namespace report_export_test
