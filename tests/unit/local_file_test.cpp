// Reading local files for `quarry extract` and the local corpus: regular
// files only (a FIFO is never opened, so never waited on), the size caps of
// fetched pages, binary detection and cleaning of text files.

#include "quarry/extract/html.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/fetch/local_file.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <variant>

#include <sys/stat.h>
#include <unistd.h>

namespace local_file_test {

using namespace quarry;
namespace fs = std::filesystem;

namespace {

// The error of reading `path`, or a failed check when it was read.
sdk::error read_error(const std::string& path, const fetch::local_file_limits& limits = {}) {
  auto read = fetch::read_local_file(path, limits);
  auto* err = std::get_if<sdk::error>(&read);
  REQUIRE_MESSAGE(err != nullptr, path << " was read");
  return *err;
}

std::string read_ok(const std::string& path, const fetch::local_file_limits& limits = {}) {
  auto read = fetch::read_local_file(path, limits);
  if (auto* err = std::get_if<sdk::error>(&read))
    FAIL(path << ": " << err->message);
  return std::get<std::string>(read);
}

// Random-looking bytes (a fixed linear congruential sequence).
std::string noise(size_t n) {
  std::string out;
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    out += static_cast<char>((x >> 16) & 0xFF);
  }
  return out;
}

} // namespace

TEST_CASE("local files: every kind of path that is not a regular file has "
          "its own error") {
  test::temp_dir tmp;
  auto fifo = tmp.file("pipe.html");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Nobody writes the FIFO: opening it for reading would block forever.
  auto e = read_error(fifo);
  CHECK(e.code == sdk::errc::bad_request);
  CHECK(e.message == "is not a regular file (a FIFO)");
  e = read_error(tmp.path());
  CHECK(e.code == sdk::errc::bad_request);
  CHECK(e.message == "is a folder");
  e = read_error("/dev/zero");
  CHECK(e.code == sdk::errc::bad_request);
  CHECK(e.message == "is a device");
  e = read_error(tmp.file("absent.txt"));
  CHECK(e.code == sdk::errc::not_found);
  CHECK(e.message == "no such file");
  auto target = tmp.write("target.txt", "some text");
  auto link = tmp.file("link.txt");
  fs::create_symlink(target, link);
  CHECK(read_ok(link) == "some text");
  fetch::local_file_limits nofollow;
  nofollow.follow_symlinks = false;
  e = read_error(link, nofollow);
  CHECK(e.code == sdk::errc::refused);
  CHECK(e.message == "is a symbolic link");
  // A link to a FIFO is refused like the FIFO itself.
  auto fifo_link = tmp.file("pipe-link.txt");
  fs::create_symlink(fifo, fifo_link);
  CHECK(read_error(fifo_link).message == "is not a regular file (a FIFO)");
}

TEST_CASE("local files obey the size caps of fetched pages") {
  test::temp_dir tmp;
  fetch::local_file_limits limits;
  limits.max_html_bytes = 100;
  limits.max_pdf_bytes = 200;
  CHECK(read_ok(tmp.write("exact.html", std::string(100, 'a')), limits).size() == 100);
  auto e = read_error(tmp.write("over.html", std::string(101, 'a')), limits);
  CHECK(e.code == sdk::errc::too_large);
  CHECK(e.message.find("is too large: more than 100 bytes") == 0);
  CHECK(e.message.find("max_html_size") != std::string::npos);
  // A PDF gets the PDF cap, by its first bytes or by its name.
  auto pdf = "%PDF-1.4\n" + std::string(150, 'x');
  CHECK(read_ok(tmp.write("doc.bin", pdf), limits) == pdf);
  CHECK(read_ok(tmp.write("doc.pdf", std::string(150, 'x')), limits).size() == 150);
  e = read_error(tmp.write("big.pdf", "%PDF-1.4\n" + std::string(300, 'x')), limits);
  CHECK(e.code == sdk::errc::too_large);
  CHECK(e.message.find("max_pdf_size") != std::string::npos);
  // The defaults are open_url's.
  fetch::local_file_limits defaults;
  CHECK(defaults.max_html_bytes == fetch::fetch_options{}.max_html_bytes);
  CHECK(defaults.max_pdf_bytes == fetch::fetch_options{}.max_pdf_bytes);
  auto sparse = tmp.file("huge.html");
  {
    tmp.write("huge.html", "<html>");
    fs::resize_file(sparse, static_cast<uintmax_t>(fetch::default_max_html_bytes + 1));
  }
  CHECK(read_error(sparse).code == sdk::errc::too_large);
  fetch::fetch_options configured;
  configured.max_html_bytes = 1000;
  CHECK(fetch::local_limits(configured).max_html_bytes == 1000);
}

TEST_CASE("local files: the cap holds for a file longer than its size says") {
  // /proc files report a size of 0 but have content: only what is read
  // counts, and reading stops after cap + 1 bytes.
  fetch::local_file_limits limits;
  limits.max_html_bytes = 16;
  limits.max_pdf_bytes = 16;
  struct stat st {};
  REQUIRE(::stat("/proc/self/maps", &st) == 0);
  REQUIRE(st.st_size == 0);
  auto e = read_error("/proc/self/maps", limits);
  CHECK(e.code == sdk::errc::too_large);
}

TEST_CASE("local files: binary data labelled as text is detected, text is "
          "cleaned") {
  CHECK(extract::looks_binary(noise(4096)));
  CHECK(extract::looks_binary(std::string{"text\0with a NUL", 15}));
  CHECK(extract::looks_binary("a\x01"
                              "b\x02"
                              "c\x03"));
  CHECK_FALSE(extract::looks_binary("a stray bell\x07, \x1B[1mcolour\x1B[0m"));
  CHECK_FALSE(extract::looks_binary("Plain text,\ttabs,\r\nlines and \f."));
  CHECK_FALSE(extract::looks_binary("\xEF\xBB\xBF"
                                    "caf\xC3\xA9"));
  // UTF-16 is text once decoded.
  std::string utf16{"\xFF\xFEh\0i\0 \0t\0h\0e\0r\0e\0", 18};
  CHECK(extract::looks_binary(utf16));
  CHECK_FALSE(extract::looks_binary(extract::decode_to_utf8(utf16, {})));
  // Cleaning: invalid UTF-8 repaired, CR LF and CR become LF, controls go.
  CHECK(extract::clean_text("a\r\nb\rc\n\td\x1B[31mred\x07\x7F") == "a\nb\nc\n\td[31mred");
  CHECK(extract::clean_text("bad \xFF byte") == "bad \xEF\xBF\xBD byte");
  CHECK(extract::clean_text("c1 \xC2\x9B"
                            "2J and \xC2\xA0 nbsp")
        == "c1 2J and \xC2\xA0 nbsp");
  CHECK(extract::clean_text("# Notes\n\nUnchanged text.\n") == "# Notes\n\nUnchanged text.\n");
  // The reader of open_url and `quarry extract` refuses binary text files
  // and cleans the others.
  auto bin = fetch::read_document(noise(4096), "text/plain", "/x/random.txt",
                                  std::chrono::milliseconds{1000});
  REQUIRE(bin.failure.has_value());
  CHECK(bin.reason == "the document is binary data, not text");
  auto text = fetch::read_document(
    "A text file with a bell\x07 and an escape\x1B[2J, long enough to count "
    "as readable text.\r\n",
    "text/plain", "/x/notes.txt", std::chrono::milliseconds{1000});
  REQUIRE_FALSE(text.failure.has_value());
  CHECK(text.text
        == "A text file with a bell and an escape[2J, long enough "
           "to count as readable text.\n");
}

} // namespace local_file_test
