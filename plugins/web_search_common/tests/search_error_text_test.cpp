// Tests of what the web_search backends make of error answers: HTML pages
// reduced to their title and first words (never markup), bounded and clean
// text, and the explanations with their remedies.

#include "web_search_common.hpp"
#include "web_search_tool.hpp"

#include "quarry/sdk/text.hpp"

#include <doctest/doctest.h>

#include <string>

namespace search_error_text_test {

using namespace quarry;
using namespace quarry::plugins::web_search_common;

namespace {

// Whether `text` is one line of valid UTF-8 without markup or controls.
void check_clean(const std::string& text, size_t max_size) {
  CAPTURE(text);
  CHECK(text.size() <= max_size);
  CHECK(sdk::is_valid_utf8(text));
  CHECK(text.find('<') == std::string::npos);
  CHECK(text.find('>') == std::string::npos);
  for (auto c : text) {
    auto u = static_cast<unsigned char>(c);
    CHECK((u >= 0x20 && u != 0x7F));
  }
}

} // namespace

TEST_CASE("web_search_common tells an HTML error body from others") {
  CHECK(is_html_body({{"Content-Type", "text/html; charset=utf-8"}}, "x"));
  CHECK(is_html_body({{"content-type", "application/xhtml+xml"}}, "x"));
  CHECK(is_html_body({}, "\xEF\xBB\xBF  \n<!DOCTYPE HTML><html>"));
  CHECK(is_html_body({}, "<HTML><body>x</body></HTML>"));
  CHECK(is_html_body({}, "<title>502</title>"));
  CHECK_FALSE(is_html_body({{"Content-Type", "application/json"}}, R"({"a":1})"));
  CHECK_FALSE(is_html_body({}, "Too Many Requests"));
  CHECK_FALSE(is_html_body({}, "a < b and <html> later"));
}

TEST_CASE("web_search_common reduces HTML error pages to their title and first words") {
  // The shape of a gateway's page: title, a heading that repeats it, text,
  // scripts, styles and comments that nobody reads.
  auto text = html_error_text(
    "<!DOCTYPE html><html><head><meta charset=utf-8><title>502 Bad Gateway"
    "</title><style>body{color:red}</style><script>var x = '<p>no</p>';"
    "</script></head><body><!-- <p>hidden</p> --><center><h1>502 Bad Gateway"
    "</h1></center><hr><center>nginx/1.25.3</center><p>Try &amp; try "
    "again&nbsp;later &#8212; or <b>not</b>.</p><svg><text>drawn</text>"
    "</svg></body></html>");
  CHECK(text == "502 Bad Gateway: nginx/1.25.3. Try & try again later \xE2\x80\x94 or not.");
  check_clean(text, max_error_text);
  // No title: the first blocks alone.
  CHECK(html_error_text("<html><body><h1>Forbidden</h1><p>You don't have "
                        "permission.</p></body></html>")
        == "Forbidden. You don't have permission.");
  // Nothing readable.
  CHECK(html_error_text("<html><head><script>alert(1)</script></head></html>").empty());
  // A tag cut by the end of the body ends the text; a lone `<` is text.
  CHECK(html_error_text("<title>a < b</title><p>x<p") == "a < b: x");
}

TEST_CASE("web_search_common error text is bounded and clean, whatever the page") {
  // Long pages, escape sequences, broken UTF-8, a title that never ends.
  std::string long_page = "<html><head><title>";
  for (int i = 0; i < 200; ++i)
    long_page += "Very long title word ";
  long_page += "</title></head><body>";
  for (int i = 0; i < 100000; ++i)
    long_page += "<p>paragraph \xE6\x96\x87\xE5\xAD\x97 text</p>";
  long_page += "</body></html>";
  auto text = html_error_text(long_page);
  check_clean(text, max_error_text);
  CHECK(text.rfind("Very long title word", 0) == 0);
  CHECK(text.substr(text.size() - 3) == "...");
  auto hostile = html_error_text("<title>\x1B]0;owned\x07Ti\x1B[31mtle\xFF\x9B"
                                 "2J</title><p>a\tb\r\nc\x01</p>");
  check_clean(hostile, max_error_text);
  CHECK(hostile.find("Ti") != std::string::npos);
  CHECK(hostile.find("owned") == std::string::npos);
  check_clean(html_error_text("<title>never ends " + std::string(100000, 'x')), max_error_text);
  // Text that only looks like markup stays text, bounded.
  auto angles = html_error_text(std::string(200000, '<'));
  CHECK(angles.size() <= max_error_text);
  CHECK(sdk::is_valid_utf8(angles));
  check_clean(html_error_text("<script>" + std::string(200000, 'x')), max_error_text);
  // Smaller bounds hold too.
  CHECK(html_error_text(long_page, 40).size() <= 40);
}

TEST_CASE("web_search_common error text: JSON messages, HTML pages and plain bodies") {
  CHECK(error_text({}, R"({"detail":{"error":"Rate limit exceeded"}})") == "Rate limit exceeded");
  // A JSON body with a wrong content type stays a JSON message.
  CHECK(error_text({{"Content-Type", "text/html"}}, R"({"message":"nope"})") == "nope");
  CHECK(error_text({{"Content-Type", "text/html"}}, "<html><title>Just a moment...</title></html>")
        == "Just a moment...");
  CHECK(error_text({}, "Too Many Requests\n") == "Too Many Requests");
  auto plain = error_text({}, std::string(5000, 'y'));
  CHECK(plain.size() <= max_error_text);
}

TEST_CASE("web_search_common explains refusals with the remedy") {
  const error_advice advice{"Example Search", "Check api_key.", "Buy credits.", "Slow down."};
  auto err = classify_answer(429, {{"Content-Type", "text/html"}, {"Retry-After", "12"}},
                             "<html><head><title>429 Too Many Requests</title></head><body><h1>Too "
                             "Many Requests</h1></body></html>",
                             nullptr, &advice);
  CHECK(err.code == sdk::errc::rate_limited);
  CHECK(err.http_status == 429);
  CHECK(err.retry_after_ms == std::optional<int64_t>{12000});
  CHECK(err.message
        == "Example Search refused the request: too many requests (HTTP 429: "
           "429 Too Many Requests). Slow down.");
  auto auth = classify_answer(401, {}, R"({"message":"bad key"})", nullptr, &advice);
  CHECK(auth.code == sdk::errc::auth);
  CHECK(auth.message
        == "Example Search refused the request: the request is not authorised "
           "(HTTP 401: bad key). Check api_key.");
  auto quota = classify_answer(402, {}, "", nullptr, &advice);
  CHECK(quota.code == sdk::errc::quota);
  CHECK(quota.message
        == "Example Search refused the request: the plan's quota or credits "
           "are used up (HTTP 402). Buy credits.");
  // The backend's own codes change the class before the explanation.
  auto refined = classify_answer(
    400, {}, "Not enough credits",
    [](sdk::error& e, int, std::string_view) { e.code = sdk::errc::quota; }, &advice);
  CHECK(refined.code == sdk::errc::quota);
  CHECK(refined.message.find("Buy credits.") != std::string::npos);
  // Other classes: what the service answered, without a remedy.
  auto server = classify_answer(503, {}, "<html><title>Service Unavailable</title></html>", nullptr,
                                &advice);
  CHECK(server.code == sdk::errc::overloaded);
  CHECK(server.message == "Example Search answered HTTP 503: Service Unavailable");
  // Without advice: the service has no name and no remedy.
  auto bare = classify_answer(429, {}, "", nullptr, nullptr);
  CHECK(bare.message == "the search service refused the request: too many requests (HTTP 429).");
}

} // namespace search_error_text_test
