// Tests of PDF text extraction (poppler-cpp) on PDFs written by the test PDF
// writer: text, metadata, time limits, damaged input and concurrency.

#include "quarry/extract/pdf.hpp"

#include "support/pdf_writer.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace pdf_extract_test {

using namespace quarry;
using namespace quarry::extract;

namespace {

void check_ok(const pdf_extraction& x) {
  if (x.failure)
    FAIL("unexpected failure: " << x.failure->message);
}

} // namespace

TEST_CASE("pdf extracts the text of one page") {
  auto bytes = test::make_pdf({"Hello PDF world.\nSecond line (with parens) "
                               "and a back\\slash."});
  REQUIRE(bytes.rfind("%PDF-1.4\n", 0) == 0);
  auto x = extract_pdf(bytes);
  check_ok(x);
  CHECK(x.pages == 1);
  CHECK(x.pages_read == 1);
  CHECK(x.text == "Hello PDF world.\nSecond line (with parens) and a back\\slash.");
  CHECK(x.title.empty());
  CHECK(x.author.empty());
  CHECK(x.published.empty());
}

TEST_CASE("pdf joins pages with a blank line") {
  auto bytes = test::make_pdf(
    {"Page one alpha.", "Page two beta.\nMore beta.", "Page three gamma."});
  auto x = extract_pdf(bytes, std::chrono::milliseconds{0});
  check_ok(x);
  CHECK(x.pages == 3);
  CHECK(x.pages_read == 3);
  CHECK(x.text
        == "Page one alpha.\n\nPage two beta.\nMore beta.\n\n"
           "Page three gamma.");
  // No form feeds or trailing whitespace survive.
  CHECK(x.text.find('\f') == std::string::npos);
  CHECK(x.text.back() != '\n');
}

TEST_CASE("pdf skips blank pages when joining") {
  auto x = extract_pdf(test::make_pdf({"first", "", "third"}));
  check_ok(x);
  CHECK(x.pages == 3);
  CHECK(x.pages_read == 3);
  CHECK(x.text == "first\n\nthird");
}

TEST_CASE("pdf decodes Latin-1 characters") {
  auto x = extract_pdf(test::make_pdf({"Caf\xC3\xA9 na\xC3\xAFve"}));
  check_ok(x);
  CHECK(x.text == "Caf\xC3\xA9 na\xC3\xAFve");
}

TEST_CASE("pdf reads the title, author and creation date") {
  SUBCASE("title only, through make_pdf") {
    auto x = extract_pdf(test::make_pdf({"body"}, "Annual Report 2024"));
    check_ok(x);
    CHECK(x.title == "Annual Report 2024");
    CHECK(x.author.empty());
    CHECK(x.published.empty());
  }
  SUBCASE("all fields; the date converted to UTC") {
    test::pdf_spec spec;
    spec.pages = {"body"};
    spec.title = "\xC3\x9C"
                 "bersicht \xE2\x80\x93 Q1"; // Übersicht – Q1
    spec.author = "Ada Lovelace";
    spec.creation_date = "D:20240501140000+02'00'";
    auto x = extract_pdf(test::make_pdf_document(spec));
    check_ok(x);
    CHECK(x.title
          == "\xC3\x9C"
             "bersicht \xE2\x80\x93 Q1");
    CHECK(x.author == "Ada Lovelace");
    CHECK(x.published == "2024-05-01T12:00:00Z");
  }
}

TEST_CASE("pdf checks the time limit before every page, the first too") {
  auto bytes = test::make_pdf({"one", "two", "three"}, "Limited");
  SUBCASE("a deadline already past reads no page but keeps the metadata") {
    auto x = extract_pdf_until(bytes, std::chrono::steady_clock::now());
    check_ok(x);
    CHECK(x.pages == 3);
    CHECK(x.pages_read == 0);
    CHECK(x.text.empty());
    CHECK(x.title == "Limited");
  }
  SUBCASE("no deadline reads everything") {
    auto x = extract_pdf_until(bytes, std::nullopt);
    check_ok(x);
    CHECK(x.pages_read == 3);
    CHECK(x.text == "one\n\ntwo\n\nthree");
  }
  SUBCASE("a far deadline reads everything") {
    auto x = extract_pdf_until(bytes, std::chrono::steady_clock::now() + std::chrono::hours{1});
    check_ok(x);
    CHECK(x.pages_read == 3);
  }
  SUBCASE("a zero limit means no limit") {
    auto x = extract_pdf(bytes, std::chrono::milliseconds{0});
    check_ok(x);
    CHECK(x.pages_read == 3);
  }
}

TEST_CASE("pdf reports unreadable input as a failure") {
  auto good = test::make_pdf({"some text here", "and more text"});
  auto check_failed = [](const pdf_extraction& x, const std::string& word) {
    REQUIRE(x.failure.has_value());
    CHECK(x.failure->code == sdk::errc::invalid_response);
    CHECK(x.failure->message.find(word) != std::string::npos);
    CHECK(x.text.empty());
    CHECK(x.pages_read == 0);
  };
  SUBCASE("empty input") {
    check_failed(extract_pdf(""), "empty");
  }
  SUBCASE("not a PDF at all") {
    check_failed(extract_pdf("<html><body>hello</body></html>"), "not a PDF");
  }
  SUBCASE("a PDF header followed by garbage") {
    check_failed(extract_pdf("%PDF-1.4\n" + std::string(3000, '\x7F')), "damaged");
  }
  SUBCASE("password-protected") {
    test::pdf_spec spec;
    spec.pages = {"secret"};
    spec.password_protected = true;
    check_failed(extract_pdf(test::make_pdf_document(spec)), "password-protected");
  }
  SUBCASE("truncated after the header") {
    check_failed(extract_pdf(good.substr(0, 40)), "damaged");
  }
  SUBCASE("truncated at any point: never a crash") {
    // Poppler reconstructs what it can: a cut file either fails cleanly or
    // yields a prefix of the text.
    for (size_t n = 1; n < good.size(); n += 37) {
      CAPTURE(n);
      auto x = extract_pdf(good.substr(0, n));
      if (x.failure) {
        CHECK(x.failure->code == sdk::errc::invalid_response);
      } else {
        CHECK(x.pages_read <= x.pages);
        CHECK(std::string{"some text here\n\nand more text"}.find(x.text) == 0);
      }
    }
  }
}

TEST_CASE("pdf extraction runs concurrently") {
  std::vector<std::string> docs;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> pages;
    for (int p = 0; p < 5; ++p)
      pages.push_back("doc " + std::to_string(i) + " page " + std::to_string(p));
    docs.push_back(test::make_pdf(pages));
  }
  std::vector<std::string> texts(docs.size());
  std::vector<bool> failed(docs.size(), false);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < docs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 10; ++round) {
        auto x = extract_pdf(docs[i]);
        if (x.failure || (round > 0 && x.text != texts[i]))
          failed[i] = true;
        texts[i] = x.text;
      }
    });
  for (auto& t : threads)
    t.join();
  for (size_t i = 0; i < docs.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(failed[i]);
    auto prefix = "doc " + std::to_string(i) + " page ";
    CHECK(texts[i]
          == prefix + "0\n\n" + prefix + "1\n\n" + prefix + "2\n\n" + prefix + "3\n\n" + prefix
               + "4");
  }
}

} // namespace pdf_extract_test
