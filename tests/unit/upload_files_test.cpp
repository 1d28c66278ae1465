// Uploaded files (app/upload_files.hpp): the type told from the bytes and
// checked against the declared type and the name, safe names, the pending
// uploads' folder with its limits, a session taking them, and their index.

#include "upload_files.hpp"

#include "quarry/sdk/text.hpp"

#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>

namespace upload_files_test {

using namespace quarry;
using namespace quarry::app;
namespace fs = std::filesystem;

namespace {

// A zip archive's first local file header naming `member` (enough for the
// sniffing, which reads names only).
std::string zip_with(const std::string& member) {
  std::string z{"PK\x03\x04", 4};
  z += std::string(22, '\0');
  z += member;
  z += "<xml/>";
  return z;
}

const std::string docx_media = "application/vnd.openxmlformats-officedocument.wordprocessingml."
                               "document";

upload_kind kind_or_fail(std::string_view type, std::string& name, std::string_view bytes) {
  auto d = decide_upload_kind(type, name, bytes);
  if (auto* r = std::get_if<upload_refusal>(&d))
    FAIL(r->message);
  return std::get<upload_kind>(d);
}

int refusal_of(std::string_view type, std::string name, std::string_view bytes) {
  auto d = decide_upload_kind(type, name, bytes);
  auto* r = std::get_if<upload_refusal>(&d);
  return r == nullptr ? 0 : r->status;
}

int mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return static_cast<int>(st.st_mode & 0777);
}

} // namespace

TEST_CASE("uploads: the bytes tell PDF, DOCX and text apart") {
  CHECK(sniff_upload(test::make_pdf({"Hello"})) == upload_kind::pdf);
  CHECK(sniff_upload(zip_with("word/document.xml")) == upload_kind::docx);
  CHECK_FALSE(sniff_upload(zip_with("xl/workbook.xml")));
  CHECK(sniff_upload("# Notes\n\nSome text.") == upload_kind::text);
  CHECK(sniff_upload("\xEF\xBB\xBFwith a byte order mark") == upload_kind::text);
  CHECK_FALSE(sniff_upload(std::string{"nul\0inside", 10}));
  CHECK_FALSE(sniff_upload("\xFF\xFE not UTF-8"));
  CHECK_FALSE(sniff_upload("\x89PNG\r\n\x1a\n"));
}

TEST_CASE("uploads: the declared type, the name and the bytes must agree") {
  auto pdf = test::make_pdf({"Hello"});
  std::string name = "report.pdf";
  CHECK(kind_or_fail("application/pdf", name, pdf) == upload_kind::pdf);
  CHECK(name == "report.pdf");
  name = "report";
  CHECK(kind_or_fail("application/pdf", name, pdf) == upload_kind::pdf);
  CHECK(name == "report.pdf");
  name = "notes.md";
  CHECK(kind_or_fail("text/plain; charset=utf-8", name, "# x") == upload_kind::markdown);
  name = "notes";
  CHECK(kind_or_fail("text/markdown", name, "# x") == upload_kind::markdown);
  CHECK(name == "notes.md");
  name = "page.htm";
  CHECK(kind_or_fail("application/octet-stream", name, "<p>x</p>") == upload_kind::html);
  name = "a.docx";
  CHECK(kind_or_fail(docx_media, name, zip_with("word/document.xml")) == upload_kind::docx);
  name = "a.DOCX";
  CHECK(kind_or_fail("Application/Octet-Stream", name, zip_with("word/document.xml"))
        == upload_kind::docx);

  // Disagreements are 415, and say what is accepted.
  CHECK(refusal_of("text/plain", "notes.txt", pdf) == 415);
  CHECK(refusal_of("application/pdf", "report.pdf", "not a pdf") == 415);
  CHECK(refusal_of("application/pdf", "report.md", pdf) == 415);
  CHECK(refusal_of("application/octet-stream", "blob", pdf) == 415);
  CHECK(refusal_of("application/octet-stream", "x.pdf", "text") == 415);
  CHECK(refusal_of("image/png", "x.png", "\x89PNG") == 415);
  CHECK(refusal_of("", "x.md", "text") == 415);
  CHECK(refusal_of(docx_media, "a.docx", zip_with("xl/workbook.xml")) == 415);
  CHECK(refusal_of("text/plain", "x.txt", std::string{"a\0b", 3}) == 415);
  CHECK(refusal_of("text/plain", "x.txt", "") == 400);
  std::string n = "x.png";
  auto d = decide_upload_kind("image/png", n, "x");
  REQUIRE(std::holds_alternative<upload_refusal>(d));
  CHECK(std::get<upload_refusal>(d).message.find("application/pdf, text/markdown")
        != std::string::npos);
}

TEST_CASE("uploads: names lose their folders, control characters and leading dots") {
  auto safe = [](std::string_view raw) {
    auto s = safe_upload_name(raw);
    return std::holds_alternative<std::string>(s) ? std::get<std::string>(s) : std::string{"!"};
  };
  CHECK(safe("report.pdf") == "report.pdf");
  CHECK(safe("../x") == "x");
  CHECK(safe("..\\..\\windows\\x.md") == "x.md");
  CHECK(safe("/etc/passwd") == "passwd");
  CHECK(safe(".hidden.md") == "hidden.md");
  CHECK(safe("a\nb\x01.md") == "ab.md");
  CHECK(safe("Résumé 2024.pdf") == "Résumé 2024.pdf");
  CHECK(safe("..") == "!");
  CHECK(safe("dir/") == "!");
  CHECK(safe("\xFF.md") == "!");
  auto long_name = safe(std::string(150, 'a') + std::string(100, 'e') + "\xC3\xA9.pdf");
  CHECK(long_name.size() <= 200);
  CHECK(long_name.substr(long_name.size() - 4) == ".pdf");
  // Longer names are cut at a character boundary.
  auto accents = safe(std::string(120, 'a') + std::string(200, 'x').replace(0, 200, [] {
    std::string s;
    for (int i = 0; i < 100; ++i)
      s += "\xC3\xA9";
    return s;
  }()) + ".md");
  CHECK(accents.size() <= 200);
  CHECK(sdk::is_valid_utf8(accents));
}

TEST_CASE("uploads: pending uploads are private files, limited, found by id, and expire") {
  test::temp_dir home;
  upload_limits limits;
  limits.max_files = 2;
  limits.max_bytes = 1000;
  upload_folder folder{home.path(), limits};
  auto added = folder.add("notes.md", upload_kind::markdown, "# Notes\n\nThe text.");
  REQUIRE(std::holds_alternative<pending_upload>(added));
  auto up = std::get<pending_upload>(added);
  CHECK(is_upload_id(up.id));
  CHECK(up.bytes == 18);
  auto dir = home.path() + "/uploads/" + up.id;
  CHECK(mode_of(home.path() + "/uploads") == 0700);
  CHECK(mode_of(dir) == 0700);
  CHECK(mode_of(dir + "/notes.md") == 0600);
  auto found = folder.find(up.id);
  REQUIRE(found);
  CHECK(found->name == "notes.md");
  CHECK(found->kind == upload_kind::markdown);
  CHECK_FALSE(folder.find("0123456789abcdef0123456789abcdef"));
  CHECK_FALSE(folder.find("../etc"));

  // Over the bytes, then over the files: 429.
  auto big = folder.add("big.txt", upload_kind::text, std::string(990, 'x'));
  REQUIRE(std::holds_alternative<upload_refusal>(big));
  CHECK(std::get<upload_refusal>(big).status == 429);
  REQUIRE(std::holds_alternative<pending_upload>(folder.add("b.txt", upload_kind::text, "b")));
  auto third = folder.add("c.txt", upload_kind::text, "c");
  REQUIRE(std::holds_alternative<upload_refusal>(third));
  CHECK(std::get<upload_refusal>(third).status == 429);

  // A link put in place of an upload is never followed.
  fs::create_symlink("/etc", home.path() + "/uploads/ffffffffffffffffffffffffffffffff");
  CHECK_FALSE(folder.find("ffffffffffffffffffffffffffffffff"));
  CHECK(folder.list().size() == 2);

  // Expired: not found, and swept.
  upload_limits none = limits;
  none.keep = std::chrono::seconds{-1};
  upload_folder expired{home.path(), none};
  CHECK_FALSE(expired.find(up.id));
  CHECK(expired.sweep() >= 2);
  CHECK_FALSE(fs::exists(dir));
  CHECK(fs::exists("/etc/passwd"));
}

TEST_CASE("uploads: a session takes its uploads once, and its files are indexed") {
  test::temp_dir home;
  upload_folder folder{home.path(), upload_limits{}};
  auto a = std::get<pending_upload>(
    folder.add("notes.md", upload_kind::markdown, "# Zorblax\n\nThe Zorblax coefficient is 42."));
  auto b = std::get<pending_upload>(
    folder.add("notes.md", upload_kind::markdown, "# Other\n\nAnother text about frost."));
  auto pdf = std::get<pending_upload>(
    folder.add("paper.pdf", upload_kind::pdf, test::make_pdf({"Quasar flux density tables"})));
  const std::string session = "q0123456789abcdef";
  std::vector<session_upload> wanted{{a.id, {}, 0, {}}, {b.id, {}, 0, {}}, {pdf.id, {}, 0, {}}};

  // One unknown id: nothing is taken.
  auto refused = claim_uploads(home.path(), session,
                               {{a.id, {}, 0, {}}, {"0123456789abcdef0123456789abcdef", {}, 0, {}}},
                               upload_limits{});
  REQUIRE(std::holds_alternative<upload_refusal>(refused));
  CHECK(std::get<upload_refusal>(refused).status == 400);
  CHECK(std::get<upload_refusal>(refused).message.find("0123456789abcdef0123456789abcdef")
        != std::string::npos);
  CHECK(folder.find(a.id));

  auto claimed = claim_uploads(home.path(), session, wanted, upload_limits{});
  REQUIRE(std::holds_alternative<std::vector<session_upload>>(claimed));
  auto files = std::get<std::vector<session_upload>>(claimed);
  REQUIRE(files.size() == 3);
  CHECK(files[0].name == "notes.md");
  CHECK(files[1].name == "notes (2).md");
  CHECK(files[2].name == "paper.pdf");
  CHECK(files[2].type == "pdf");
  auto dir = session_folder(home.path(), session);
  CHECK(mode_of(dir + "/files") == 0700);
  CHECK(fs::exists(dir + "/files/notes (2).md"));
  CHECK_FALSE(folder.find(a.id));
  CHECK(folder.list().empty());
  // Taken once only.
  auto again = claim_uploads(home.path(), "qfedcba9876543210", {{a.id, {}, 0, {}}},
                             upload_limits{});
  REQUIRE(std::holds_alternative<upload_refusal>(again));

  auto indexed = index_session_files(dir, corpus::update_options{});
  INFO((indexed.index() == 1 ? std::get<1>(indexed) : std::string{}));
  REQUIRE(indexed.index() == 0);
  auto opened = corpus::corpus_index::open(std::get<0>(indexed));
  REQUIRE(opened.index);
  CHECK(opened.index->size().first == 3);
  auto hits = opened.index->search("Zorblax coefficient", 5);
  REQUIRE_FALSE(hits.hits.empty());
  CHECK(hits.hits[0].url.find("notes.md") != std::string::npos);
  CHECK_FALSE(opened.index->search("quasar flux", 5).hits.empty());

  CHECK(remove_session_folder(home.path(), session).empty());
  CHECK_FALSE(fs::exists(dir));
  CHECK(remove_session_folder(home.path(), session).empty());
  CHECK_FALSE(remove_session_folder(home.path(), "../x").empty());
}

} // namespace upload_files_test
