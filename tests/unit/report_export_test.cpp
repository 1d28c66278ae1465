// Reports people can send: the sendable HTML page the PDF and DOCX are made
// from (no file:// link, nothing fetched, numbers kept, tables), and the
// converters run as child processes: a tool that fails, hangs, writes
// nothing or a broken file, or is missing, is an error and never a file.

#include "report_export.hpp"
#include "report_render.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/stat.h>

namespace report_export_test {

using namespace quarry;
using namespace quarry::app;

namespace {

report_parts sample() {
  report_parts r;
  r.question = "Heat pumps — what do they cost?";
  r.body
    = "## Costs\n\nA heat pump is cheaper to run [[1]](file:///srv/corpus/energy/costs%20a.md) "
      "and quieter [[3]](https://example.com/noise).\n\n"
      "| fuel | kg CO2 per kWh |\n|---|---|\n| gas | 0.2 |\n\n"
      "![a chart](https://example.com/chart.png) ~~old~~\n";
  r.sources = {{1, "Running costs", "file:///srv/corpus/energy/costs%20a.md", false},
               {3, "Noise", "https://example.com/noise", true}};
  r.corpus_root = "/srv/corpus";
  return r;
}

// A program in `dir`: a shell script (run through its #! line, not by us
// through a shell).
std::string script(const test::temp_dir& dir, const std::string& name, const std::string& body) {
  auto path = dir.write(name, "#!/bin/sh\n" + body);
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

} // namespace

TEST_CASE("sendable report: no file:// link, local paths relative to the corpus, numbers kept") {
  auto html = sendable_html_report(sample());
  CHECK(html.find("file:") == std::string::npos);
  // The local source: its title and its path in the corpus, as text.
  CHECK(html.find("Running costs<br><code>energy/costs a.md</code>") != std::string::npos);
  // Its citation links to the entry.
  CHECK(html.find("<a class=\"cite\" data-n=\"1\" href=\"#source-1\">[1]</a>")
        != std::string::npos);
  CHECK(html.find("<li id=\"source-1\">") != std::string::npos);
  // A web source: linked, and its URL as text for paper.
  CHECK(html.find("<a href=\"https://example.com/noise\">Noise</a><br><span "
                  "class=\"url\">https://example.com/noise</span>")
        != std::string::npos);
  CHECK(html.find("(snippet only)") != std::string::npos);
  // A gap in the numbers starts a new list at the next number.
  CHECK(html.find("<ol class=\"sources\" start=\"1\">") != std::string::npos);
  CHECK(html.find("<ol class=\"sources\" start=\"3\">") != std::string::npos);
  // Nothing is loaded: images are links, and the page forbids every load.
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("<a href=\"https://example.com/chart.png\">a chart</a>") != std::string::npos);
  CHECK(html.find("Content-Security-Policy\" content=\"default-src 'none'") != std::string::npos);
  // GitHub's tables and strikethrough, as the page renders them.
  CHECK(html.find("<table>") != std::string::npos);
  CHECK(html.find("<td>0.2</td>") != std::string::npos);
  CHECK(html.find("<del>old</del>") != std::string::npos);
  CHECK(html.find("<h1>Heat pumps — what do they cost?</h1>") != std::string::npos);
  CHECK(html.find("<h2>Costs</h2>") != std::string::npos);
  // The HTML export renders tables too, and keeps its file:// links.
  auto page = html_report(sample());
  CHECK(page.find("<table>") != std::string::npos);
  CHECK(page.find("file:///srv/corpus/energy/costs%20a.md") != std::string::npos);
}

TEST_CASE("sendable report: a local path outside the corpus shows only its file name") {
  CHECK(shown_local_path("/srv/corpus/a/b.md", "/srv/corpus") == "a/b.md");
  CHECK(shown_local_path("/srv/corpus/a/b.md", "/srv/corpus/") == "a/b.md");
  CHECK(shown_local_path("/home/me/secret/b.md", "/srv/corpus") == "b.md");
  CHECK(shown_local_path("/srv/corpus-other/b.md", "/srv/corpus") == "b.md");
  CHECK(shown_local_path("/srv/corpus/../etc/b.md", "/srv/corpus") == "b.md");
  CHECK(shown_local_path("/home/me/b.md", "") == "b.md");
  auto r = sample();
  r.corpus_root.clear();
  auto html = sendable_html_report(r);
  CHECK(html.find("<code>costs a.md</code>") != std::string::npos);
  CHECK(html.find("/srv") == std::string::npos);
}

TEST_CASE("export formats: names, extensions and media types") {
  CHECK(export_format_from("pdf") == export_format::pdf);
  CHECK(export_format_from("docx") == export_format::docx);
  CHECK_FALSE(export_format_from("doc"));
  CHECK(export_content_type(export_format::pdf) == "application/pdf");
  CHECK(export_content_type(export_format::docx)
        == "application/vnd.openxmlformats-officedocument.wordprocessingml.document");
  CHECK(export_extension(export_format::docx) == "docx");
}

TEST_CASE("export: a tool that fails, writes nothing or a broken file is an error") {
  test::temp_dir dir;
  auto r = sample();
  export_options o;
  o.timeout = std::chrono::seconds{20};

  o.program = script(dir, "fails",
                     "echo 'noise' >&2\necho 'pandoc: cannot parse the input' >&2\n"
                     "exit 3\n");
  auto made = export_report(r, export_format::docx, o);
  REQUIRE(std::holds_alternative<export_error>(made));
  auto err = std::get<export_error>(made);
  CHECK(err.what == export_error::kind::failed);
  CHECK(err.message
        == "fails failed to make the DOCX (exit status 3): noise\n"
           "pandoc: cannot parse the input");

  o.program = script(dir, "silent", "exit 0\n");
  made = export_report(r, export_format::pdf, o);
  REQUIRE(std::holds_alternative<export_error>(made));
  CHECK(std::get<export_error>(made).what == export_error::kind::bad_output);
  CHECK(std::get<export_error>(made).message == "silent exited without writing the PDF");

  // A PDF cut short: the header without the end marker. The tool's output
  // argument is --print-to-pdf=FILE.
  o.program = script(dir, "cut",
                     "for a in \"$@\"; do case \"$a\" in --print-to-pdf=*) printf "
                     "'%%PDF-1.4 half a page' > \"${a#--print-to-pdf=}\";; esac; done\n");
  made = export_report(r, export_format::pdf, o);
  REQUIRE(std::holds_alternative<export_error>(made));
  CHECK(std::get<export_error>(made).what == export_error::kind::bad_output);
  CHECK(std::get<export_error>(made).message.find("broken PDF") != std::string::npos);

  // The same script, writing a whole one, is taken.
  o.program = script(dir, "whole",
                     "for a in \"$@\"; do case \"$a\" in --print-to-pdf=*) printf "
                     "'%%PDF-1.4\\n%%%%EOF\\n' > \"${a#--print-to-pdf=}\";; esac; "
                     "done\n");
  made = export_report(r, export_format::pdf, o);
  REQUIRE(std::holds_alternative<std::string>(made));
  CHECK(std::get<std::string>(made) == "%PDF-1.4\n%%EOF\n");

  // A missing program names the package to install.
  o.program = dir.file("no-such-tool");
  made = export_report(r, export_format::docx, o);
  REQUIRE(std::holds_alternative<export_error>(made));
  CHECK(std::get<export_error>(made).what == export_error::kind::missing_tool);
  CHECK(std::get<export_error>(made).message.find("apt-get install pandoc") != std::string::npos);
}

TEST_CASE("export: a tool that hangs is stopped at its timeout, with what it started") {
  test::temp_dir dir;
  auto pid_file = dir.file("child.pid");
  // It starts a helper in its group and waits for ever, as a hung browser.
  auto program = script(dir, "hangs",
                        "sleep 300 &\necho $! > '" + pid_file + "'\nwhile :; do sleep 1; done\n");
  export_options o;
  o.program = program;
  o.timeout = std::chrono::milliseconds{1500};
  auto t0 = std::chrono::steady_clock::now();
  auto made = export_report(sample(), export_format::pdf, o);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(std::holds_alternative<export_error>(made));
  CHECK(std::get<export_error>(made).what == export_error::kind::timed_out);
  CHECK(std::get<export_error>(made).message
        == "hangs did not finish the PDF within 1500 ms and was stopped; no file was written");
  CHECK(took < std::chrono::seconds{10});
  // The helper went with it (killed with the group; reaped by init).
  std::ifstream in{pid_file};
  pid_t helper = 0;
  in >> helper;
  REQUIRE(helper > 0);
  auto gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat{"/proc/" + std::to_string(helper) + "/stat"};
    std::string line;
    std::getline(stat, line);
    // Gone, or a zombie waiting for init.
    gone = !stat || line.find(") Z ") != std::string::npos;
    if (!gone)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  CHECK(gone);
}

TEST_CASE("export: the tool runs without a shell, signals unblocked, stdin empty") {
  test::temp_dir dir;
  auto out = dir.file("out");
  // Arguments with shell syntax arrive as they are.
  auto program = script(dir, "echoes",
                        "printf '%s|' \"$@\" > '" + out + "'\ncat >> '" + out
                          + "'\necho \"[$FOO]\" >> '" + out
                          + "'\ngrep SigBlk /proc/self/status >> '" + out + "'\n");
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &block, &old);
  auto ran = run_tool({program, "a b", "$(touch x)", ";"}, {{"FOO", "bar"}}, dir.file("log"),
                      std::chrono::seconds{20});
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  CHECK(ran.exit_code == 0);
  CHECK_FALSE(ran.timed_out);
  std::ifstream in{out};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  CHECK(text == "a b|$(touch x)|;|[bar]\nSigBlk:\t0000000000000000\n");
  CHECK_FALSE(std::filesystem::exists(dir.file("x")));
}

TEST_CASE("export slots: at most N at once") {
  export_slots slots{2};
  auto a = slots.take();
  auto b = slots.take();
  CHECK(a);
  CHECK(b);
  CHECK_FALSE(slots.take());
  a.reset();
  CHECK(slots.take());
}

} // namespace report_export_test
